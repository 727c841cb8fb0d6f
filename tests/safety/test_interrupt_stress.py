"""A hundred interrupts into the CPU studies at random times, under a background load of 2,
lose none (issue 28): every run stops within seconds with exit 130, its store intact, its run
interrupted with the points it finished, no process it started left behind. The driver is
``benchmarks/interrupts.py`` (500 tries there, with the table); a loss rate of 1% fails this
test with probability 63% (0.99^100 = 0.37), the 1.5% measured before the fix with 78%."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from tests.safety.hostile import ROOT


@pytest.mark.slow
def test_a_hundred_interrupts_under_load_lose_none():
    seed = int(os.environ.get("WB_STRESS_SEED") or random.randrange(1 << 30))
    proc = subprocess.run([sys.executable, "benchmarks/interrupts.py", "--tries", "100", "--load", "2",
                           "--parallel", "5", "--seed", str(seed), "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode == 2 and "no study can run here" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    total = next(r for r in doc["rows"] if r["study"] == "all")
    # one line per failure, first: pytest cuts a long message short
    said = "\n".join(f"{f['study']} {f['signal']} at {f['delay_s']:.3f} s{' from its start' if f['from_start'] else ''}: "
                     f"{'LOST' if f['lost'] else ''} {'; '.join(f['wrong'])} (last line then: {f['at_signal']})"
                     for f in doc["failures"][:10])
    assert not doc["failures"], f"WB_STRESS_SEED={seed}\n{said}"
    assert total["tries"] == 100 and total["lost"] == 0 and total["wrong"] == 0
    assert total["tries"] - total["before_run"] >= 50, "most signals must land while a run measures"
