"""SIGINT, SIGTERM and SIGKILL during a sweep of each CPU study (issue: safety).

Each signal goes to the CLI process alone, once the run has stored a point. Afterwards the
store passes ``PRAGMA integrity_check``, the points stored before the signal are still
there, the run reads as ``interrupted`` (for SIGKILL: because its process is gone), and no
process the run started is left (found by a marker in their environment). The three runs of
a study go at once, each with its own store and machine lock.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest

from benchmarks.interrupts import MARK_VAR, SWEEPS, marked
from tests.safety.hostile import stored_points
from workbench.results.store import Store
from workbench.seam.registry import get
from tests.support.paths import ROOT


# Each study's sweep stores a first point within seconds and would run on for a minute or more
# (interrupted at its first point: the length only keeps a loaded machine from finishing it
# before the signal lands). The stress driver's, which sends 500 signals at random times.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def _params_reason(study_id: str) -> str | None:
    study = get(study_id)
    args = SWEEPS[study_id]
    preset = args[args.index("--preset") + 1] if "--preset" in args else None
    sets = dict(a.split("=", 1) for a in args[1::2] if "=" in a)
    return study.requires(study.SPACE.resolve(sets, preset=preset))


@pytest.mark.parametrize("study_id", list(SWEEPS))
def test_interrupted_sweeps_keep_their_points_and_leave_no_process(study_id, tmp_path):
    reason = _params_reason(study_id)
    if reason:
        pytest.skip(f"{study_id} cannot run here: {reason}")
    runs = []
    for sig in SIGNALS:
        folder = tmp_path / sig.name
        folder.mkdir()
        mark = uuid.uuid4().hex
        env = os.environ | {"WORKBENCH_LOCK": str(folder / "machine.lock"), MARK_VAR: mark,
                            "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "--store", str(folder / "results.sqlite"), "run",
                                 study_id, *SWEEPS[study_id]], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=open(folder / "stderr.txt", "w"), start_new_session=True)
        runs.append({"sig": sig, "proc": proc, "store": folder / "results.sqlite", "mark": mark, "folder": folder})
    try:
        deadline = time.monotonic() + 180
        pending = list(runs)
        while pending and time.monotonic() < deadline:
            for run in list(pending):
                seen = stored_points(run["store"])
                if seen:
                    assert run["proc"].poll() is None, (
                        f"{study_id} finished before the {run['sig'].name}: lengthen its sweep in SWEEPS")
                    run["seen"] = seen
                    run["proc"].send_signal(run["sig"])
                    pending.remove(run)
            time.sleep(0.1)
        assert not pending, [(r["sig"].name, (r["folder"] / "stderr.txt").read_text()[-1500:]) for r in pending]
        for run in runs:
            rc = run["proc"].wait(120)
            err = (run["folder"] / "stderr.txt").read_text()[-1500:]
            assert rc == (-9 if run["sig"] == signal.SIGKILL else 130), (run["sig"].name, rc, err)
            con = sqlite3.connect(run["store"])
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            con.close()
            (row,) = Store(run["store"]).runs()
            assert row["status"] == "interrupted", (run["sig"].name, row)
            assert row["variants"] >= run["seen"] >= 1, (run["sig"].name, row)
        deadline = time.monotonic() + 20
        while any(marked(r["mark"]) for r in runs) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [(r["sig"].name, marked(r["mark"])) for r in runs if marked(r["mark"])]
    finally:
        for run in runs:  # only this test's processes: each carries its run's marker
            for pid in marked(run["mark"]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if run["proc"].poll() is None:
                run["proc"].kill()
                run["proc"].wait()
