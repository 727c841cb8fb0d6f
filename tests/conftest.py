"""Shared fixtures: a throw-away results store, hardware skips by marker, and Triton's
interpreter in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_interpreted(module: str, scenarios: list) -> list:
    """``python -m module '<scenarios as JSON>'`` under Triton's interpreter, which must be
    switched on before triton is first imported, hence a child process; returns the JSON list
    the module prints last."""
    env = os.environ | {"TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", module, json.dumps(scenarios)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def store(tmp_path, monkeypatch):
    from workbench.store import Store

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
