"""The app with hostile uploads and abandoned jobs (issue: safety): the Runs page shows one
clear message for every kind of bad bundle (no traceback, nothing stored), a run's markup
stays text on its page, and a job whose browser session is gone is cancelled, then killed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.pagetest import study_app
from streamlit.testing.v1 import AppTest

from tests.safety.test_bundles import HOSTILE, _hostile_record, _write, valid_doc
from workbench.running import jobs
from workbench.results.store import Store
from tests.support.paths import ROOT


# One of each kind of failure: parse, encoding, types, values, names, nesting, version, study.
KINDS = ["not JSON", "not UTF-8", "a JSON list", "correct as a string", "NaN sample", "relative run id",
         "attachment name with ..", "duplicate attachment names", "attachment not base64", "deep nesting",
         "nesting past the parser", "newer version", "unknown study", "no run"]


def test_the_runs_page_refuses_every_bad_bundle_with_a_message(store, tmp_path, monkeypatch):
    monkeypatch.setattr("pages._ui.committed", lambda study_id: ([], []))
    store.save(_hostile_record())  # a run for the page to show beside the upload
    at = AppTest.from_file(str(ROOT / "pages" / "runs.py"), default_timeout=60).run()
    for kind in KINDS:
        mutate, fragment = HOSTILE[kind]
        data = _write(tmp_path, mutate).read_bytes()
        at.file_uploader(key="runs:import").set_value((f"{kind}.json", data, "application/json"))
        at.run()
        at.button(key="runs:do-import").click().run()
        assert not at.exception, (kind, at.exception)
        errors = [e.value for e in at.error]
        assert any(e.startswith("Not imported") for e in errors), (kind, errors)
    assert len(Store(store.path).runs()) == 1
    at.file_uploader(key="runs:import").set_value(("ok.json", json.dumps(valid_doc()).encode(), "application/json"))
    at.run()
    at.button(key="runs:do-import").click().run()
    assert not at.exception and any("Imported" in s.value for s in at.success)
    assert len(Store(store.path).runs()) == 2


def test_a_run_s_markup_stays_text_on_its_study_page(store, monkeypatch):
    monkeypatch.setattr("pages._ui.committed", lambda study_id: ([], []))
    store.save(_hostile_record())
    at = study_app("calibration").run()
    assert not at.exception
    shown = [m.value for m in [*at.markdown, *at.caption, *at.warning, *at.error]]
    assert any("alert(1)" in text for text in shown)
    for text in shown:
        assert "<script" not in text and "<img" not in text and "](http://evil" not in text.replace("\\]", "")


def _job(cmd: list[str], owner_alive) -> jobs.Job:
    proc = subprocess.Popen(cmd, start_new_session=True)
    job = jobs.Job("x", proc, Path("/nonexistent/p"), Path("/nonexistent/o"), Path("/nonexistent/e"), cmd,
                   owner_alive=owner_alive)
    jobs._track(job)
    return job


def test_a_job_whose_session_is_gone_is_cancelled_and_killed_if_it_hangs_on(monkeypatch):
    monkeypatch.setattr(jobs, "ORPHAN_GRACE_S", 1.0)
    monkeypatch.setattr(jobs, "KILL_AFTER_S", 1.0)
    monkeypatch.setattr(jobs, "_REAPER", "not started: this test calls reap() with its own clock")
    alive = {"owner": True}
    polite = _job([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.default_int_handler); "
                                         "time.sleep(60)"], lambda: alive["owner"])
    stubborn = _job([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                                           "time.sleep(60)"], lambda: alive["owner"])
    time.sleep(0.5)  # let the interpreters install their handlers
    t0 = time.monotonic()
    jobs.reap(t0)
    assert not polite.done and not stubborn.done  # owner still there
    alive["owner"] = False
    jobs.reap(t0 + 0.1)  # gone, but within the grace a reloading tab has
    assert polite.cancelled is None
    jobs.reap(t0 + 1.2)  # gone for longer: cancelled (SIGINT)
    assert polite.proc.wait(10) in (-signal.SIGINT, 1)  # KeyboardInterrupt: status 1
    assert stubborn.cancelled is not None and "session ended" in stubborn.cancel_reason
    time.sleep(0.3)
    assert not stubborn.done  # it ignores SIGINT
    jobs.reap(stubborn.cancelled + 1.1)  # still there after KILL_AFTER_S: its process group is killed
    assert stubborn.proc.wait(10) == -signal.SIGKILL


def test_the_queued_run_message_names_the_holder_s_study_and_parameters(tmp_path, monkeypatch):
    from workbench.running.runner import holder_text

    text = holder_text(json.dumps({"pid": 42, "user": "ana", "study": "launch-cache", "since": "2026-01-01T00:00:00Z",
                                   "params": {"threads": 8, "malloc": ["pinned", "dynamic"]}}))
    assert "launch-cache" in text and "threads=8" in text and "malloc=pinned,dynamic" in text and "pid 42" in text
    assert holder_text("") == holder_text("{broken") == "another run (the lock file does not say which)"


@pytest.mark.parametrize("page", ["home.py", "runs.py"])
def test_pages_open_a_store_connection_of_their_own_per_run(page, store, monkeypatch):
    """No Store shared between sessions: each script run opens its own."""
    import pages._ui.store as ui_store

    opened = []
    real = ui_store.open_store
    monkeypatch.setattr(ui_store, "open_store", lambda: opened.append(1) or real())
    monkeypatch.setattr("pages._ui.committed", lambda study_id: ([], []))
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=60).run()
    at.run()
    assert not at.exception and len(opened) == 2
