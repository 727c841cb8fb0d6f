"""App pages under Streamlit's AppTest: they load, show stored runs, and wire Run to a job."""

import re

import pandas as pd
import pytest
from tests.support.pagetest import study_app
from streamlit.testing.v1 import AppTest

from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import Store
from tests.support.paths import ROOT



def _canned(store, run_id="20260101-000000-calibration-aaaaaa", samples=(30.0, 31.0, 32.0, 33.0, 34.0),
            outputs=None):
    rec = RunRecord(run_id=run_id, study="calibration", params={"repeat": 5, "threads": 1, "torch": False},
                    env={"fingerprint": "f00", "cpu_model": "Test CPU", "cpu_logical": 2}, status="complete",
                    outputs=outputs or {},
                    created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run calibration",
                    variants=[VariantResult("empty-call", {"kind": "harness"}, list(samples), True, "ok"),
                              VariantResult("forkjoin/w1", {"kind": "forkjoin", "threads": 1},
                                            [4e4, 4.1e4, 4.2e4, 4.3e4, 4.4e4], True, "ok")])
    store.save(rec)
    return rec


def _page(name, timeout=60):
    return AppTest.from_file(str(ROOT / "pages" / name), default_timeout=timeout)


_study = study_app


def test_home_loads_and_lists_studies(store):
    _canned(store)
    at = _page("home.py").run()
    assert not at.exception
    assert "Perf Study Workbench" in at.title[0].value
    from workbench.seam.registry import registry

    # escape() makes "#346" inert for GitHub with a zero-width space (workbench.base.untrusted)
    text = " ".join(m.value for m in [*at.markdown, *at.caption]).replace("&#8203;", "")
    for study in registry().values():  # every study by its title, its seed by what it is
        assert study.TITLE.split(" (")[0].split(":")[0] in text and getattr(study, "SEED_TITLE", study.SEED) in text
    assert ".txt" not in text and "SMT: " not in text


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
    from workbench.results.store import committed_runs
    from workbench.seam.registry import registry

    committed = [r for sid in registry() for r in committed_runs(sid)]
    if not committed:
        pytest.skip("no committed bundles under traces/")
    at = _page("runs.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert (table["origin"] == "committed").sum() == len(committed)
    # each committed run is told apart by the machine it came from and its time
    rows = table[table["origin"] == "committed"]
    assert rows["machine"].str.len().min() > 0 and rows["created"].str.endswith("UTC").all()


def test_study_page_shows_stored_run_and_seed_free_study(store):
    _canned(store)
    at = _study("calibration").run()
    assert not at.exception
    assert any("Verdict" in m.value for m in at.markdown)
    assert at.button  # Run and export buttons exist


class FakeJob:
    """A finished job as workbench.running.jobs.Job shows it to the page: its events folded in."""

    study = "calibration"
    cancelled = None

    def __init__(self, returncode=0, run_id="20260101-000000-calibration-aaaaaa", variants=2, record=True):
        from workbench.seam.events import Collected

        self.done, self.returncode = True, returncode
        self.state = Collected(run_id=run_id, progress=(1.0, "done"))
        for i in range(variants):
            self.state.variants[f"v{i}"] = VariantResult(f"v{i}", {}, [1.0, 2.0], True, "ok")
        self._record = {"run_id": run_id, "variants": [{}] * variants} if record else None
        self.was_cancelled = returncode == 130

    def poll(self):
        return self.state

    def progress(self):
        return self.state.progress

    def elapsed_s(self):
        return 42.0

    def record(self):
        return self._record

    def error_text(self):
        return "interrupted" if self.returncode == 130 else ""

    def cleanup(self):
        pass


def _run_with(store, monkeypatch, job, started=None):
    def fake_start(study_id, values, quick=False, store_path=None, owner_alive=None):
        if started is not None:
            started.update(study=study_id, values=values)
        return job

    monkeypatch.setattr("workbench.running.jobs.start", fake_start)
    at = _study("calibration").run()
    at.number_input(key="calibration:q:repeat").set_value(7)
    at.button[0].click().run()
    return at


def test_study_page_run_button_starts_a_job_with_the_widget_values_and_shows_its_run(store, monkeypatch):
    _canned(store, "20251231-000000-calibration-zzzzzz")  # an older run, shown before
    new = _canned(store, "20260101-000000-calibration-aaaaaa")
    started = {}
    at = _run_with(store, monkeypatch, FakeJob(run_id=new.run_id), started)
    assert not at.exception and not at.error
    assert started["study"] == "calibration" and started["values"]["repeat"] == 7
    assert any(new.run_id in s.value and "finished" in s.value for s in at.success)
    picker = next(sb for sb in at.selectbox if sb.label.startswith("Run ("))
    assert picker.value == new.run_id  # the run just made is the run shown


def test_a_cancelled_run_is_a_cancel_that_counts_its_kept_points(store, monkeypatch):
    kept = _canned(store, "20260101-000000-calibration-aaaaaa")
    at = _run_with(store, monkeypatch, FakeJob(returncode=130, run_id=kept.run_id, variants=2, record=False))
    assert not at.exception and not at.error  # a cancel is not an error
    assert any("cancelled" in i.value and "2 finished variants kept" in i.value for i in at.info)
    assert next(sb for sb in at.selectbox if sb.label.startswith("Run (")).value == kept.run_id


def test_a_run_cancelled_before_any_point_says_nothing_was_kept(store, monkeypatch):
    _canned(store)
    at = _run_with(store, monkeypatch, FakeJob(returncode=130, run_id="20260102-000000-calibration-bbbbbb",
                                               variants=0, record=False))
    assert not at.exception and not at.error
    text = " ".join(i.value for i in at.info)
    assert "before any variant finished" in text and "kept" not in text


def test_a_running_job_shows_elapsed_time_points_done_and_each_point(store, monkeypatch):
    job = FakeJob(run_id="20260101-000000-calibration-aaaaaa", variants=3, record=False)
    job.done, job.returncode = False, None
    job.state.progress, job.state.step = (0.5, "fork/join with 2 threads"), (3, 6, "points")
    job.cancel = lambda: None
    at = _run_with(store, monkeypatch, job)
    assert not at.exception
    assert any("fork/join with 2 threads" in p.proto.text for p in at.get("progress"))
    caption = " ".join(c.value for c in at.caption)
    assert "0:42 elapsed" in caption and "3 of 6 points" in caption and job.state.run_id in caption
    live = at.dataframe[-1].value
    assert list(live["variant"]) == ["v0", "v1", "v2"]  # each finished point, as it arrived
    assert any(b.label.startswith("Cancel run") for b in at.button)


def test_tags_note_and_delete_from_the_page(store):
    rec = _canned(store)
    store.annotate(rec.run_id, add=["baseline"], note="before the BIOS update")
    at = _study("calibration").run()
    assert not at.exception
    picker = next(sb for sb in at.selectbox if sb.label.startswith("Run ("))
    assert "#baseline" in picker.format_func(picker.value)
    assert any("before the BIOS update" in c.value for c in at.caption)
    at.checkbox(key=f"calibration:manage:{rec.run_id}:sure").check().run()
    at.button(key=f"calibration:manage:{rec.run_id}:delete").click().run()
    assert not at.exception
    assert not Store(store.path).runs()
    assert any("No runs yet" in i.value for i in at.info)


def test_study_page_rejects_invalid_widget_values_without_running(store, monkeypatch):
    calls = []
    monkeypatch.setattr("workbench.running.jobs.start", lambda *a, **k: calls.append(a))
    at = _study("calibration").run()
    # threads above the usable CPUs fails the study's own cross-check.
    at.number_input(key="calibration:q:threads").set_value(256)
    at.button[0].click().run()
    assert not at.exception and not calls
    assert any("threads" in e.value for e in at.error)


def test_a_study_that_cannot_run_with_its_defaults_refuses_the_run_with_the_reason(store, monkeypatch):
    from workbench.seam.registry import registry

    unavailable = [sid for sid, mod in registry().items() if mod.requires(mod.SPACE.defaults())]
    if not unavailable:
        pytest.skip("every study can run here")
    mod = registry()[unavailable[0]]
    calls = []
    monkeypatch.setattr("workbench.running.jobs.start", lambda *a, **k: calls.append(a))
    at = _study(mod.ID).run()
    assert any("cannot run on this machine" in w.value for w in at.warning)
    at.button[0].click().run()
    assert not at.exception and not calls
    assert any("Cannot run with these parameters here" in e.value for e in at.error)


def test_tables_show_a_dash_for_every_missing_value_text_columns_too():
    from pages._ui import MISSING, _styled

    df = pd.DataFrame({"row": ["serial", None], "gain_pct": [22.4, float("nan")], "status": [None, "clear"]})
    cells = re.findall(r'class="data row\d col\d" >([^<]*)</td>', _styled(df).to_html())
    assert cells == ["serial", "22.4", MISSING, MISSING, MISSING, "clear"]


def test_a_numeric_column_with_a_gap_shows_its_dash_in_the_browser_grid():
    """The grid draws a missing number as 'None' whatever the Styler says: such a column goes
    as its formatted text, right-aligned; a column without gaps stays numbers (sorts by value)."""
    from pages._ui import MISSING, _gaps_as_text

    df = pd.DataFrame({"threads": pd.array([None, 1, 16], dtype="Int64"), "median_us": [1.5, 22.25, 3.0]})
    shown, config = _gaps_as_text(df)
    assert shown["threads"].tolist() == [MISSING, "1", "16"] and list(config) == ["threads"]
    assert config["threads"]["alignment"] == "right" and shown["median_us"].tolist() == [1.5, 22.25, 3.0]


def test_home_states_this_machines_floor_with_its_ci(store):
    from workbench.base import env

    rec = _canned(store)
    rec.env = dict(rec.env, fingerprint=env.capture()["fingerprint"])
    rec.run_id = "20260101-000002-calibration-cccccc"
    rec.variants.append(VariantResult("perf-counter", {"provider": "perf-counter"}, [40.0] * 5, False, "FAILED: no"))
    store.save(rec)
    at = _page("home.py").run()
    floor = next(m.value for m in at.markdown if m.value.startswith("**Floor on this machine**"))
    assert "empty-call 32 ns (95% CI" in floor and "forkjoin/w1 42 us" in floor and "perf-counter" not in floor


def test_home_floor_is_the_quietest_complete_run_and_says_when_it_was_disturbed(store):
    """Issue 41: the floor showed a run of 5 threads on 2 CPUs, unflagged. It is the quietest
    complete run of this machine, and a disturbed one says so."""
    from workbench.base import env

    def run(run_id, load):
        rec = _canned(store, run_id=run_id)
        rec.env = dict(rec.env, fingerprint=env.capture()["fingerprint"])
        for v in rec.variants:
            v.extra = {"load": {"loadavg_1m": load}}
        store.delete(run_id)  # saved by _canned without its fingerprint and load
        store.save(rec)

    run("20260101-000003-calibration-dddddd", 9.0)  # newest, loaded: 9 on 2 CPUs
    run("20260101-000002-calibration-cccccc", 0.3)
    floor = next(m.value for m in _page("home.py").run().markdown if m.value.startswith("**Floor on this machine**"))
    assert "cccccc" in floor and "the quietest of 2" in floor and "Disturbed" not in floor, floor
    store.delete("20260101-000002-calibration-cccccc")
    floor = next(m.value for m in _page("home.py").run().markdown if m.value.startswith("**Floor on this machine**"))
    assert "dddddd" in floor and "**Disturbed:**" in floor, floor


def test_compare_with_draws_the_forest_plot_of_another_run_of_the_study(store):
    _canned(store, "20260101-000000-calibration-aaaaaa")
    _canned(store, "20260101-000001-calibration-bbbbbb", samples=(20.0, 21.0, 22.0, 23.0, 24.0))
    at = _study("calibration").run()
    picker = next(s for s in at.selectbox if s.label == "Compare with...")
    picker.select_index(0).run()
    assert not at.exception and not at.error
    assert any("A/B:" in m.value for m in at.markdown)
    box = next(e for e in at.expander if e.label.startswith("A/B:"))
    drawn = [c for c in box.children.values() if getattr(c, "type", "") == "vega_lite_chart"]
    assert drawn and "B / A per variant" in drawn[0].proto.spec, "no forest plot"


def test_a_run_of_a_run_group_shows_the_groups_across_run_view(store):
    """Issue 30: a run made by --repeat-runs shows each derived number per run and across the
    group's runs (the run-to-run level), beside its own figures."""
    for i, base in enumerate((30.0, 33.0, 31.0)):
        _canned(store, run_id=f"2026010{i + 1}-000000-calibration-aaaaa{i}", samples=tuple(base + k for k in range(5)),
                outputs={"run_group": {"id": "g1", "index": i + 1, "runs": 3}})
    at = _study("calibration").run()
    assert not at.exception
    shown = " ".join(e.label for e in at.expander)
    assert "Across the 3 runs of this run group" in shown
    assert any("Across 3 runs of one configuration" in m.value for m in at.markdown)
