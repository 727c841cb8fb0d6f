"""Types checked everywhere data enters (issue 28): a bundle whose nested environment, outputs,
variant extras or parameters hold the wrong type is refused whole (exit 2, one line naming
the field, nothing stored), and a bad run that reached a store anyway (an older workbench
stored it) is shown as bad, never breaking the command or the page for the other runs."""

from __future__ import annotations

import copy

import pytest
from streamlit.testing.v1 import AppTest

from tests.safety.hostile import ROOT, cli, refused, stored_runs, valid_doc, write
from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import Store


def _set(path: str, value):
    def spoil(doc):
        *parents, last = path.split(".")
        node = doc["run"]
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value
    return spoil


NESTED = {
    "env.gpu_names": (_set("env.gpu_names", 5), "run.env.gpu_names"),
    "env.gpu_names[0]": (_set("env.gpu_names", [5]), "run.env.gpu_names[0]"),
    "env.cpu_model": (_set("env.cpu_model", {"a": 1}), "run.env.cpu_model"),
    "env.cpu_logical": (_set("env.cpu_logical", "two"), "run.env.cpu_logical"),
    "env.packages": (_set("env.packages", {"torch": 2}), "run.env.packages.torch"),
    "env.fingerprint": (_set("env.fingerprint", 7), "run.env.fingerprint"),
    "env: unknown key holding an object": (_set("env.extra_key", {"deep": [1]}), "run.env.extra_key"),
    "outputs.warnings": (_set("outputs.warnings", "boom"), "run.outputs.warnings"),
    "outputs.warnings[0]": (_set("outputs.warnings", [1]), "run.outputs.warnings[0]"),
    "outputs.load": (_set("outputs.load", "x"), "run.outputs.load"),
    "outputs.load.before": (_set("outputs.load", {"before": [1]}), "run.outputs.load.before"),
    "outputs.load.after.loadavg_1m": (_set("outputs.load", {"after": {"loadavg_1m": "9"}}),
                                      "run.outputs.load.after.loadavg_1m"),
    "outputs.ab": (_set("outputs.ab", {"side": "C", "pair": "x"}), "run.outputs.ab.side"),
    "extra.load": (_set("variants.0.extra.load", "x"), "run.variants[0].extra.load"),
    "extra.precision": (_set("variants.0.extra.precision", {"met": "yes"}), "run.variants[0].extra.precision.met"),
    "extra.ab_round_sizes": (_set("variants.0.extra.ab_round_sizes", [-1]), "run.variants[0].extra.ab_round_sizes[0]"),
    "params value object": (_set("params.repeat", {"a": 1}), "run.params.repeat"),
    "variant params value list of objects": (_set("variants.0.params.kind", [{}]), "run.variants[0].params.kind"),
}


@pytest.mark.parametrize("case", list(NESTED))
def test_a_wrong_nested_type_is_refused_whole_naming_the_field(case, tmp_path):
    spoil, field = NESTED[case]
    doc = copy.deepcopy(valid_doc())
    spoil(doc)
    store = tmp_path / "results.sqlite"
    for command in (["import"], ["report", "--format", "issue", "-o", str(tmp_path / "r.md")]):
        result = cli(*command, str(write(tmp_path, doc)), store=store, timeout_s=120)
        refused(result, field)
        assert result.peak_rss_mb < 1024
    assert stored_runs(store) == 0
    assert not (tmp_path / "r.md").exists()


def test_the_valid_bundle_imports():
    """The control: the same bundle unspoilt imports (a refusal above is the type's)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "results.sqlite"
        result = cli("import", str(write(Path(tmp), valid_doc())), store=store)
        assert result.code == 0, result.err
        assert stored_runs(store) == 1


# --- a bad run that reached a store anyway ----------------------------------------------------

def _bad_run(run_id: str) -> RunRecord:
    """What a workbench before typed bundles stored from a hostile bundle: an environment of
    the wrong shape, outputs and extras of the wrong types."""
    return RunRecord(run_id=run_id, study="calibration", params={"repeat": 3, "threads": 1, "torch": False},
                     env={"gpu_names": 5, "cpu_model": {"a": 1}, "fingerprint": 7, "os": ["x"]}, status="complete",
                     created_utc="2026-01-02T00:00:00Z", reproduce="python -m workbench run calibration",
                     outputs={"warnings": "boom", "load": "x", "ab": "y"},
                     variants=[VariantResult("empty-call", {"kind": "harness"}, [30.0, 31.0, 32.0], True, "ok",
                                             {"load": "x", "precision": 3})])


def _good_run(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, study="calibration", params={"repeat": 3, "threads": 1, "torch": False},
                     env={"fingerprint": "f00", "cpu_model": "Good CPU"}, status="complete",
                     created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run calibration",
                     variants=[VariantResult("empty-call", {"kind": "harness"}, [30.0, 31.0, 32.0, 33.0, 34.0], True,
                                             "ok")])


BAD, GOOD = "20260102-000000-calibration-bad000", "20260101-000000-calibration-good00"


@pytest.fixture
def mixed_store(tmp_path, monkeypatch):
    path = tmp_path / "results.sqlite"
    store = Store(path)
    store.save(_good_run(GOOD))
    store.save(_bad_run(BAD))
    store.close()
    monkeypatch.setenv("WORKBENCH_STORE", str(path))
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "machine.lock"))
    monkeypatch.setattr("pages._ui.committed", lambda study_id: ([], []))
    return path


def test_the_cli_lists_and_reports_around_a_bad_stored_run(mixed_store, tmp_path):
    listed = cli("runs", store=mixed_store)
    assert listed.code == 0 and "Traceback" not in listed.err, listed.err
    assert BAD in listed.out and GOOD in listed.out
    for fmt in ("issue", "md", "html"):
        result = cli("report", BAD, "--format", fmt, "-o", str(tmp_path / f"bad.{fmt}"), store=mixed_store)
        assert result.code in (0, 2) and "Traceback" not in result.err, (fmt, result.err[-2000:])
        assert result.code == 0 or len(result.err_lines) == 1
    good = cli("report", GOOD, "--format", "issue", "-o", str(tmp_path / "good.md"), store=mixed_store)
    assert good.code == 0, good.err


def test_the_runs_page_shows_a_bad_stored_run_as_bad_and_the_rest_works(mixed_store):
    at = AppTest.from_file(str(ROOT / "pages" / "runs.py"), default_timeout=120).run()
    assert not at.exception, at.exception
    at.selectbox(key="runs:one").set_value(BAD).run()
    assert not at.exception, at.exception
    at.selectbox(key="runs:one").set_value(GOOD).run()
    assert not at.exception, at.exception
    assert any("Verdict" in m.value for m in at.markdown)


def test_a_study_page_shows_a_bad_stored_run_as_bad_and_the_rest_works(mixed_store):
    from tests.support.pagetest import study_app

    at = study_app("calibration").run()
    assert not at.exception, at.exception
    assert any(BAD in e.value and "cannot be shown" in e.value for e in at.error) or \
        any("Verdict" in m.value for m in at.markdown)
    pick = next(s for s in at.selectbox if s.key and s.key.startswith("calibration:pick"))
    pick.set_value(GOOD).run()
    assert not at.exception, at.exception
    assert any("Verdict" in m.value for m in at.markdown)
