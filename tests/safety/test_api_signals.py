"""SIGTERM and SIGHUP into ``wb.run`` in a plain Python process (issue 42): handled as SIGINT is,
the run stored ``interrupted`` with its finished points (docs/safety.md), not left ``running``
by a process that died of the signal.

The study sends the signal to its own process between two points, so where it lands is fixed:
nothing here depends on timing."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

SCRIPT = """
import os, signal, sys
# a process started under nohup inherits SIGHUP ignored, and a run leaves an ignored signal
# alone (the user asked for it): the test starts from Python's own default
signal.signal(signal.SIGHUP, signal.SIG_DFL)
import workbench as wb
from workbench.data.record import VariantResult
from workbench.seam.registry import get

def run(params, ctx):
    ctx.record(VariantResult("first", {}, [10.0, 11.0, 12.0], True, "ok"))
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    ctx.progress(0.5, "after the signal")  # a checkpoint: the interrupt is raised here
    ctx.record(VariantResult("never", {}, [10.0, 11.0, 12.0], True, "ok"))
    return {}

get("calibration").run = run
try:
    wb.run("calibration", preset="smoke", store=sys.argv[1], progress=False)
except wb.Interrupted as exc:
    print(exc)
    sys.exit(130)
print("the run finished")
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_into_wb_run_stores_the_run_interrupted_with_its_points(sig, tmp_path):
    store = tmp_path / "results.sqlite"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(store), sig], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "WORKBENCH_LOCK": str(tmp_path / "lock"),
                                            "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("interrupted; 1 finished point kept in run ")
    con = sqlite3.connect(store)
    try:  # as stored, not as a reader would show a run whose process died
        assert con.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]
        assert con.execute("SELECT variant FROM variants").fetchall() == [("first",)]
    finally:
        con.close()


def test_the_handlers_are_given_back_after_the_run(tmp_path):
    code = ("import signal, workbench as wb\n"
            "wb.run('calibration', preset='smoke', store=__import__('sys').argv[1], progress=False)\n"
            "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "
            "signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.sqlite")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                                       "WORKBENCH_LOCK": str(tmp_path / "lock")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "True"]
    assert signal.getsignal(signal.SIGTERM) is not None  # this process untouched
