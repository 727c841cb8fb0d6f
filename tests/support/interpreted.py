"""Triton's interpreter in a child process (it must be on before triton is first imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.paths import ROOT


def run_interpreted(module: str, scenarios: list) -> list:
    """``python -m module '<scenarios as JSON>'`` under Triton's interpreter, which must be
    switched on before triton is first imported, hence a child process; returns the JSON list
    the module prints last."""
    env = os.environ | {"TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", module, json.dumps(scenarios)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
