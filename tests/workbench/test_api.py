"""The public Python API (``import workbench as wb``): a thin layer over what the CLI calls, so
the same checks say the same lines; a run keeps its points when interrupted or failed; runs,
comparisons and traces show in a notebook as the page does (HTML, and each chart as its
Vega-Lite spec with a PNG)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

import workbench as wb
from workbench.evidence import claims
from workbench import cli
from workbench.presentation.jupyter import VEGALITE_MIME, ChartView
from workbench.data.record import VariantResult
from workbench.seam.registry import get

ROOT = Path(__file__).resolve().parents[2]
QUICK = {"preset": "smoke", "repeat": 3, "threads": 1}  # calibration in about a second
PNG = b"\x89PNG\r\n\x1a\n"


def _cli_error(capsys, *argv: str) -> str:
    code = cli.main(list(argv))
    assert code == cli.EXIT_BAD_INPUT
    return capsys.readouterr().err.strip().removeprefix("error: ")


def test_import_workbench_stays_light_and_the_cli_does_not_load_the_api():
    code = ("import sys, workbench; heavy = [m for m in ('pandas', 'altair', 'IPython', 'workbench.api') "
            "if m in sys.modules]; print(heavy)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=60).stdout.strip() == "[]"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "workbench", "list"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "calibration" in proc.stdout
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert not {"workbench.api", "workbench.knobs", "IPython", "ipywidgets"} & loaded


def test_the_api_names_are_on_the_package_and_no_submodule_hides_one():
    for name, module in wb.API.items():
        assert not (ROOT / "workbench" / f"{name}.py").exists() and not (ROOT / "workbench" / name).is_dir(), \
            f"workbench/{name} would replace wb.{name} once imported"
        assert getattr(wb, name) is getattr(__import__(f"workbench.{module}", fromlist=[name]), name)
    assert set(wb.API) <= set(dir(wb))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        wb.nope  # noqa: B018


@pytest.mark.parametrize("argv, call", [
    (["run", "calibration", "--set", "threads=0"], lambda: wb.run("calibration", threads=0)),
    (["run", "calibration", "--set", "colour=red"], lambda: wb.run("calibration", colour="red")),
    (["run", "calibration", "--preset", "huge"], lambda: wb.run("calibration", preset="huge")),
    (["run", "calibration", "--precision", "80%"], lambda: wb.run("calibration", precision="80%")),
    (["run", "nope"], lambda: wb.run("nope")),
    (["compare", "latest", "no-such-run"], lambda: wb.compare("latest", "no-such-run")),
], ids=["range", "unknown-knob", "preset", "precision", "study", "run"])
def test_bad_input_says_what_the_cli_says_and_stores_nothing(store, capsys, argv, call):
    expected = _cli_error(capsys, "--store", str(store.path), *argv)
    with pytest.raises(wb.BadInput) as info:
        call()
    assert str(info.value) == expected
    assert info.value._render_traceback_() == [f"BadInput: {expected}"]  # a notebook shows one line
    assert store.runs() == []


def test_a_run_is_stored_and_reads_as_the_page_shows_it(store):
    seen = []
    run = wb.run("calibration", progress=lambda f, m: seen.append(f), **QUICK)
    assert run.status == "complete" and run.params["repeat"] == 3 and seen and max(seen) <= 1.0
    assert [r["run_id"] for r in store.runs()] == [run.id]
    assert run.reproduce.startswith("python -m workbench run calibration")
    assert {"median_ns", "ci_lo_ns", "ci_hi_ns", "correct"} <= set(run.results.columns)
    assert "floors" in run.tables and not any(n.startswith("_") for n in run.tables)
    assert list(run.claims.columns) == claims.COLUMNS
    assert "point" in run.derived.columns and "Per call: harness floor" in run.verdict  # after a load warning, if any
    assert str(run) == cli.summary_text(run.analysis)  # print(run): the CLI's summary
    bundle = run._repr_mimebundle_()
    page = bundle["text/html"]
    assert "<strong>Verdict:</strong>" in page and "Per call: harness floor" in page and "<strong>Per-call floors of this machine</strong>" in page and "<img" in page
    assert bundle["text/plain"] == str(run)
    assert wb.load(run.id).id == run.id and wb.load("latest").id == run.id
    assert list(wb.runs("calibration", origin="local").run_id) == [run.id]


def test_every_chart_carries_its_spec_and_a_png(store):
    run = wb.run("calibration", **QUICK)
    charts = run.charts()
    assert set(charts) == {"floors", "forkjoin"} and set(run.charts(key=False)) == {"forkjoin"}
    for view in charts.values():
        bundle = view._repr_mimebundle_()
        assert bundle[VEGALITE_MIME]["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        assert base64.b64decode(bundle["image/png"]).startswith(PNG)


def test_a_chart_that_cannot_be_drawn_still_shows_its_spec(monkeypatch):
    from workbench.presentation import report

    monkeypatch.setattr(report, "render_charts", lambda charts: {})  # vl-convert failed
    bundle = ChartView("x", __import__("altair").Chart().mark_point())._repr_mimebundle_()
    assert VEGALITE_MIME in bundle and "image/png" not in bundle and "no PNG" in bundle["text/plain"]


def test_an_interrupt_keeps_the_finished_points(store, monkeypatch):
    def interrupted(params, ctx):
        ctx.record(VariantResult("first", {}, [10.0, 11.0, 12.0], True, "ok"))
        raise KeyboardInterrupt

    monkeypatch.setattr(get("calibration"), "run", interrupted)
    with pytest.raises(wb.Interrupted) as info:
        wb.run("calibration", **QUICK)
    exc = info.value
    assert isinstance(exc, KeyboardInterrupt)  # a notebook stops the cells after it
    assert str(exc) == f"interrupted; 1 finished point kept in run {exc.run.id}"
    assert exc.run.status == "interrupted" and [v.variant for v in exc.run.record.variants] == ["first"]
    assert exc._render_traceback_() == [f"Interrupted: {exc}"]


def test_a_failed_study_keeps_its_points_and_says_what_the_cli_says(store, monkeypatch, capsys):
    def failing(params, ctx):
        ctx.record(VariantResult("first", {}, [10.0, 11.0, 12.0], True, "ok"))
        raise RuntimeError("boom")

    monkeypatch.setattr(get("calibration"), "run", failing)
    assert cli.main(["--store", str(store.path), "run", "calibration", "--preset", "smoke"]) == cli.EXIT_FAILED
    said = capsys.readouterr().err.strip().splitlines()[-1].removeprefix("error: ")
    with pytest.raises(wb.RunFailed) as info:
        wb.run("calibration", **QUICK)
    api_run, cli_run = (r["run_id"] for r in store.runs())  # newest first
    assert said == f"study calibration failed: RuntimeError: boom (stored as failed run {cli_run}; finished points kept)"
    assert str(info.value) == said.replace(cli_run, api_run)
    assert info.value.run.status == "failed" and len(info.value.run.record.variants) == 1


def test_a_study_that_cannot_run_here_says_why(store, monkeypatch):
    monkeypatch.setattr(get("calibration"), "requires", lambda params: "needs a GPU (install CUDA)")
    with pytest.raises(wb.Unavailable, match=r"^study calibration cannot run here: needs a GPU \(install CUDA\)$"):
        wb.run("calibration", **QUICK)


def test_compare_and_an_interleaved_session(store):
    a, b = (wb.run("calibration", preset="smoke", threads=1) for _ in range(2))  # 5 samples: enough to compare
    cmp = wb.compare(a.id, b)
    assert cmp.a.id == a.id and cmp.b.id == b.id and cmp.verdict.startswith("B is faster in")
    assert set(cmp.table["variant"]) == {v.variant for v in b.record.variants}
    assert cmp._repr_markdown_().startswith(f"# A/B: `{b.id}` (B) against `{a.id}` (A)")
    with pytest.raises(wb.BadInput, match="runs of different studies are not compared"):
        wb.compare(a, ROOT / "traces/cpu-reduction/many-core-16cpu.bundle.json")
    session = wb.ab("calibration", a={"threads": 1}, b={"threads": 2}, both={"repeat": 3}, rounds=2, preset="smoke",
                    progress=False)
    assert session.data["mode"] == "interleaved" and session.a.params["threads"] == 1
    assert session.param_diff.to_dict("records") == [{"param": "threads", "a": 1, "b": 2}]


def test_a_bundle_needs_no_store(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_STORE", str(tmp_path / "none" / "results.sqlite"))
    run = wb.load(ROOT / "traces/cpu-reduction/many-core-16cpu.bundle.json")
    assert run.study == "cpu-reduction" and len(run.claims) and "direction holds" in set(run.claims["status"])
    with pytest.raises(wb.BadInput, match=r"no run with id 'nope' in the committed bundles; no results store at"):
        wb.load("nope")


def test_reports(store, tmp_path):
    run = wb.run("calibration", **QUICK)
    issue = run.report("issue")
    assert issue._repr_markdown_().startswith("### Calibration") and len(issue) < 60_000
    assert run.report("html").startswith("<!DOCTYPE html>")
    assert run.report("md", tmp_path / "r.md").read_text().startswith("# Calibration")
    assert (tmp_path / "r_files" / "floors.png").read_bytes().startswith(PNG)
    assert run.export(tmp_path / "r.bundle.json").is_file()
    for call, line in [(lambda: run.report("pdf"), "report format 'pdf' is not one of md, issue, html, ipynb"),
                       (lambda: run.report("ipynb"), "an ipynb report is files (a notebook and its bundle): give a path")]:
        with pytest.raises(wb.BadInput) as info:
            call()
        assert str(info.value) == line


def test_a_trace_reads_as_the_cli_summarises_it():
    spans = wb.trace(ROOT / "traces/examples/iree_sum_c8_50it.tracy")
    assert spans.summary()["format"] == "tracy" and len(spans.lanes())
    parts = spans.breakdown()
    assert list(parts) == ["by name", "phases"] and parts.skipped == {}
    assert parts["phases"]["phase"].iloc[-1] == "total" and parts["by name"]["count"].sum() > 0
    page = spans._repr_html_()
    assert "<strong>Lanes</strong>" in page and "Top 10 names by self time" in page and "<img" in page
    assert spans.timeline()._repr_mimebundle_()["image/png"]


def test_a_trace_without_phase_rules_says_why_and_several_ranks_align():
    spans = wb.trace(ROOT / "traces/examples/perfetto_trackevent_synthetic.pftrace")
    assert list(spans.breakdown()) == ["by name"] and "no phase rules" in spans.breakdown().skipped["phases"]
    two = wb.trace(*sorted((ROOT / "traces/examples").glob("kineto_2ranks_rank*_synthetic.json.gz")))
    assert sorted(two.spans["rank"].dropna().unique()) == [0, 1] and "<strong>Ranks</strong>" in two._repr_html_()


def test_a_bad_trace_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(wb.BadInput) as info:
        wb.trace(bad)
    assert "\n" not in str(info.value) and "x.json" in str(info.value)


def test_a_bundles_text_reaches_the_notebook_escaped():
    from workbench.data.record import RunRecord

    rec = RunRecord(run_id="20260101-000000-calibration-aaaaaa", study="calibration",
                    params={"repeat": 5, "threads": 1, "torch": False}, env={"cpu_model": "<img src=x onerror=alert(1)>"},
                    status="failed", error="<script>alert(1)</script>", created_utc="2026-01-01T00:00:00Z",
                    variants=[VariantResult("empty-call", {}, [30.0, 31.0, 32.0, 33.0, 34.0], False, "<b>bad</b>")])
    page = wb.Run(rec)._repr_html_()
    assert "This run is failed." in page and "FAILED" in page
    assert "<script" not in page and "<img src=x" not in page and "<b>bad" not in page
