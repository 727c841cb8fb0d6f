"""Shared fixtures: a throw-away results store and hardware skips by marker."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _a_store_and_lock_of_the_session(tmp_path_factory):
    """Tests never touch the checkout's store or the machine lock of real runs, and test
    processes running side by side (``pytest -n``) never wait on each other's lock."""
    where = tmp_path_factory.mktemp("session")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_STORE", str(where / "results.sqlite"))
        mp.setenv("WORKBENCH_LOCK", str(where / "machine.lock"))
        yield


@pytest.fixture
def store(tmp_path, monkeypatch):
    from workbench.results.store import Store

    path = tmp_path / "results.sqlite"
    monkeypatch.setenv("WORKBENCH_STORE", str(path))
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "machine.lock"))
    s = Store(path)
    yield s
    s.close()


def _cuda_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pytest_collection_modifyitems(config, items):
    n_gpu = _cuda_count()
    for item in items:
        if "gpu" in item.keywords and n_gpu < 1:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU on this machine"))
        if "multigpu" in item.keywords and n_gpu < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2+ CUDA GPUs, found {n_gpu}"))
