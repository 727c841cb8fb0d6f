"""App pages under Streamlit's AppTest: they load, show stored runs, and wire Run to a job."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from workbench.store import RunRecord, Store
from workbench.study import VariantResult

ROOT = Path(__file__).resolve().parent.parent


def _canned(store, run_id="20260101-000000-calibration-aaaaaa", samples=(30.0, 31.0, 32.0, 33.0, 34.0)):
    rec = RunRecord(run_id=run_id, study="calibration", params={"repeat": 5, "threads": 1, "torch": False},
                    env={"fingerprint": "f00", "cpu_model": "Test CPU", "cpu_logical": 2}, status="complete",
                    created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run calibration",
                    variants=[VariantResult("empty-call", {"kind": "harness"}, list(samples), True, "ok"),
                              VariantResult("forkjoin/w1", {"kind": "forkjoin", "threads": 1},
                                            [4e4, 4.1e4, 4.2e4, 4.3e4, 4.4e4], True, "ok")])
    store.save(rec)
    return rec


def _page(name, timeout=60):
    return AppTest.from_file(str(ROOT / "pages" / name), default_timeout=timeout)


def test_home_loads_and_lists_studies(store):
    _canned(store)
    at = _page("home.py").run()
    assert not at.exception
    assert "Perf Study Workbench" in at.title[0].value
    assert any("calibration" in str(df.value) for df in at.dataframe)


def test_runs_page_compares_two_runs(store):
    _canned(store, "20260101-000000-calibration-aaaaaa")
    _canned(store, "20260101-000001-calibration-bbbbbb", samples=(20.0, 21.0, 22.0, 23.0, 24.0))
    at = _page("runs.py").run()
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "A/B" in text and "Verdict" in text


def test_runs_page_with_empty_store_and_no_committed_runs(store, monkeypatch):
    monkeypatch.setattr("pages._ui.committed", lambda study_id: ([], []))
    at = _page("runs.py").run()
    assert not at.exception and any("No runs" in i.value for i in at.info)


def test_runs_page_lists_committed_bundles_with_their_machine(store):
    from workbench.store import committed_runs
    from workbench.study import registry

    committed = [r for sid in registry() for r in committed_runs(sid)]
    if not committed:
        pytest.skip("no committed bundles under traces/")
    at = _page("runs.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert (table["source"].str.startswith("committed:")).sum() == len(committed)


def test_study_page_shows_stored_run_and_seed_free_study(store):
    _canned(store)
    at = _page("calibration.py").run()
    assert not at.exception
    assert any("Verdict" in m.value for m in at.markdown)
    assert at.button  # Run and export buttons exist


def test_study_page_run_button_starts_a_job_with_the_widget_values(store, monkeypatch):
    started = {}

    class FakeJob:
        done = True
        returncode = 0

        def progress(self):
            return 1.0, "done"

        def record(self):
            return {"run_id": "20260101-000000-calibration-aaaaaa"}

        def error_text(self):
            return ""

        def cleanup(self):
            pass

    def fake_start(study_id, values, quick=False, store_path=None, owner_alive=None):
        started.update(study=study_id, values=values)
        _canned(Store(store.path))  # the script's thread: a connection of its own
        return FakeJob()

    monkeypatch.setattr("workbench.jobs.start", fake_start)
    at = _page("calibration.py").run()
    at.number_input(key="calibration:q:repeat").set_value(7)
    at.button[0].click().run()
    assert not at.exception
    assert started["study"] == "calibration" and started["values"]["repeat"] == 7


def test_study_page_rejects_invalid_widget_values_without_running(store, monkeypatch):
    calls = []
    monkeypatch.setattr("workbench.jobs.start", lambda *a, **k: calls.append(a))
    at = _page("calibration.py").run()
    # threads above 4x the CPUs fails the study's own cross-check.
    at.number_input(key="calibration:q:threads").set_value(256)
    at.button[0].click().run()
    assert not at.exception and not calls
    assert any("threads" in e.value for e in at.error)


def test_a_study_that_cannot_run_with_its_defaults_refuses_the_run_with_the_reason(store, monkeypatch):
    from workbench.study import registry

    unavailable = [sid for sid, mod in registry().items() if mod.requires(mod.SPACE.defaults())]
    if not unavailable:
        pytest.skip("every study can run here")
    mod = registry()[unavailable[0]]
    calls = []
    monkeypatch.setattr("workbench.jobs.start", lambda *a, **k: calls.append(a))
    at = _page(f"{mod.__name__.split('.')[-1]}.py").run()
    assert any("cannot run on this machine" in w.value for w in at.warning)
    at.button[0].click().run()
    assert not at.exception and not calls
    assert any("Cannot run with these parameters here" in e.value for e in at.error)
