"""The GPU probes of scripts/gpu/ that time the study's collectives (overlap_probe.py,
chunk_probe.py): they import on a machine without a GPU and take the shared arguments."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import ROOT


@pytest.mark.parametrize("probe", ["overlap_probe.py", "chunk_probe.py"])
def test_a_probe_imports_and_takes_the_seed_shape_arguments(probe):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu" / probe), "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--k K" in proc.stdout and "--n N" in proc.stdout and "torchrun" in proc.stdout
