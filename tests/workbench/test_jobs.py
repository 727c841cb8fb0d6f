"""A run started from the app: the CLI writes the run's event stream (which run, how far, each
point as it is stored), the app's job reads it; stderr carries only what went wrong; an
interrupt says how many points it kept."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from workbench.running import jobs, runner
from workbench.running.runner import interrupted_text
from workbench.seam.events import Collected, Emitter, EventTail, apply
from workbench.seam.study import RunContext

from tests.support.fake_studies import InterruptedSweep as _Sweep


def test_a_job_follows_the_runs_events_point_by_point(store):
    job = jobs.start("calibration", {"repeat": 3, "threads": 1, "torch": False}, store_path=store.path)
    seen = []
    deadline = time.time() + 120
    while not job.done and time.time() < deadline:
        seen.append(len(job.poll().variants))
        time.sleep(0.05)
    state = job.poll()
    assert job.returncode == 0, job.error_text()
    rec = job.record()
    assert state.run_id == rec["run_id"] and state.done
    assert list(state.variants) == [v["variant"] for v in rec["variants"]]  # every point, in order
    assert seen == sorted(seen)  # points arrive one by one, never go away
    assert job.progress() == (1.0, "done") and job.error_text() == ""  # no progress bar on stderr
    assert 0 < job.elapsed_s() < 120
    job.cleanup()


def test_error_text_keeps_every_line_of_stderr(tmp_path):
    """stderr has no progress bar to filter out any more: a line starting with '[' is an error too."""
    err = tmp_path / "err.txt"
    err.write_text("[rank 1] Traceback: boom\nerror: study failed\n")
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    job = jobs.Job("calibration", proc, tmp_path / "events.jsonl", tmp_path / "out.json", err, [])
    assert job.error_text() == "[rank 1] Traceback: boom\nerror: study failed"
    assert job.progress() == (0.0, "starting") and job.poll().run_id == ""


def test_an_interrupt_says_how_many_points_it_kept(store, tmp_path):
    events = tmp_path / "events.jsonl"
    with pytest.raises(KeyboardInterrupt) as info:
        runner.execute(_Sweep, {}, store, events=Emitter(events))
    run_id = info.value.run_id
    assert interrupted_text(store, run_id) == f"interrupted; 2 finished points kept in run {run_id}"
    got = Collected()
    for event in EventTail(events).poll():
        apply(event, None, got, tmp_path)
    assert got.run_id == run_id and list(got.variants) == ["p0", "p1"]
    assert got.step == (2, 5, "points") and not got.done


def test_an_interrupt_before_any_point_says_so(store):
    class Early(_Sweep):
        @staticmethod
        def run(params, ctx):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        runner.execute(Early, {}, store)
    assert "before any point finished" in interrupted_text(store, info.value.run_id)
    assert "before the run started" in interrupted_text(store, None)


def test_steps_count_points_into_the_progress():
    seen = []
    ctx = RunContext(progress=lambda f, m: seen.append((round(f, 2), m)))
    steps = ctx.steps(4, start=0.2, end=1.0)
    steps.say("checking")
    steps.tick("one")
    assert seen == [(0.2, "checking"), (0.4, "one")] and ctx.step == (1, 4, "points")
