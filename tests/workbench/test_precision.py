"""``--precision``: the harness repeats until the median's CI half-width meets the target, or
the time cap; studies that do not repeat through the harness refuse it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from workbench.running import harness
from workbench.evidence import stats
from workbench.cli import main


def _noisy_timer(seed: int = 0):
    rng = np.random.default_rng(seed)
    return lambda loops: float(rng.lognormal(np.log(1e-3), 0.1)) * loops


def test_measure_repeats_until_the_target_precision():
    plain = harness.measure(_noisy_timer(), repeat=5, loops=1, warmup=0)
    assert len(plain.samples_ns) == 5 and stats.median_ci_half_width_rel(plain.samples_ns) > 0.02
    with harness.repeat_to_precision(0.02, cap_s=60):
        m = harness.measure(_noisy_timer(), repeat=5, loops=1, warmup=0)
    assert len(m.samples_ns) > 5 and stats.median_ci_half_width_rel(m.samples_ns) <= 0.02
    assert harness.precision_target() is None  # the target ends with the block


def test_the_time_cap_stops_repeating():
    with harness.repeat_to_precision(1e-6, cap_s=0):
        m = harness.measure(_noisy_timer(), repeat=5, loops=1, warmup=0)
    assert len(m.samples_ns) == 5


def test_child_processes_see_the_target():
    """cpu-reduction's IREE runtime children time with this harness: the target reaches them."""
    code = "from workbench.running import harness; t = harness.precision_target(); print(t.rel if t else None)"
    with harness.repeat_to_precision(0.03, cap_s=60):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=os.environ | {"PYTHONPATH": os.getcwd()}).stdout
    assert out.strip() == "0.03"


def test_interleaved_rounds_grow_together_and_stay_paired():
    pytest.importorskip("torch")
    from studies.cpu_reduction import data, measure, plan

    x = data.make_input(4096, 0)
    pts = [plan.Point(p, 4096, None, 1, experiment="alloc") for p in ("torch", "torch-out")]
    with harness.repeat_to_precision(0.002, cap_s=3):
        out = measure.interleaved_torch(pts, {4096: x}, {4096: data.reference(x)}, rounds=3)
    assert all(v.correct for v in out)
    assert len(out[0].samples_ns) == len(out[1].samples_ns) == out[0].extra["rounds"] > 3


def test_run_with_precision_records_whether_each_variant_met_it(store, capsys):
    code = main(["--store", str(store.path), "run", "calibration", "--preset", "smoke", "--set", "threads=1",
                 "--precision", "50%", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    rec = json.loads(out.out)
    assert rec["reproduce"].endswith("--precision 50%")
    assert all(v["extra"]["precision"]["met"] and v["extra"]["precision"]["target_rel"] == 0.5 for v in rec["variants"])


@pytest.mark.parametrize("args, fragment", [
    (["launch-cache", "--precision", "2%"], "does not repeat to a precision target"),
    (["calibration", "--precision", "0%"], "outside (0%, 50%]"),
    (["calibration", "--precision", "two"], "expected a percentage"),
])
def test_precision_is_refused_where_it_cannot_hold(store, capsys, args, fragment):
    assert main(["--store", str(store.path), "run", *args]) == 2
    assert fragment in capsys.readouterr().err and store.runs() == []
