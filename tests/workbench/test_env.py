def test_nccl_settings_are_recorded_but_not_the_container_label(monkeypatch):
    from workbench.base import env

    monkeypatch.setenv("NCCL_CGA_CLUSTER_SIZE", "1")
    monkeypatch.setenv("NCCL_VERSION", "2.28.3-1")
    found = env._env_vars()["env_vars"]
    assert found["NCCL_CGA_CLUSTER_SIZE"] == "1" and "NCCL_VERSION" not in found


def test_turbo_and_smt_state_are_read_where_the_kernel_exposes_them(monkeypatch):
    from workbench.base import env

    files = {"/sys/devices/system/cpu/intel_pstate/no_turbo": "1", "/sys/devices/system/cpu/cpufreq/boost": "1",
             "/sys/devices/system/cpu/smt/control": "on", "/sys/devices/system/cpu/smt/active": "1"}
    monkeypatch.setattr(env, "_read", files.get)
    assert env._turbo_smt() == {"cpu_turbo": False, "smt_control": "on", "smt_active": True}  # intel_pstate wins
    files.pop("/sys/devices/system/cpu/intel_pstate/no_turbo")
    assert env._turbo_smt()["cpu_turbo"] is True
    monkeypatch.setattr(env, "_read", lambda path: None)
    assert env._turbo_smt() == {}


def test_load_sample_reads_the_load_average_and_a_clock_where_readable():
    import math

    from workbench.base import machine_load as load

    s = load.sample()
    assert math.isfinite(s["loadavg_1m"]) and s["loadavg_1m"] >= 0
    assert s.get("cpu_mhz") is None or s["cpu_mhz"] > 0
    assert math.isnan(load.loadavg({"loadavg_1m": "3"})) and math.isnan(load.loadavg(None))  # untrusted: numbers only
