def test_nccl_settings_are_recorded_but_not_the_container_label(monkeypatch):
    from workbench import env

    monkeypatch.setenv("NCCL_CGA_CLUSTER_SIZE", "1")
    monkeypatch.setenv("NCCL_VERSION", "2.28.3-1")
    found = env._env_vars()["env_vars"]
    assert found["NCCL_CGA_CLUSTER_SIZE"] == "1" and "NCCL_VERSION" not in found
