"""Reports people share: every study's smoke run and every committed bundle gives an issue report
that fits in one GitHub issue and lints clean; the full Markdown report lints and every chart
PNG in it has something drawn; the HTML report loads nothing from anywhere. And the checker."""

from __future__ import annotations

import io
import re

import pytest
from tests.support.mdlint import ISSUE_LIMIT, lint_issue, lint_markdown, outside_fences
from workbench.presentation import report
from workbench.running import runner
from workbench.reading.analysis import analyse
from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import committed_runs
from workbench.seam.registry import registry


def test_lint_catches_each_kind_of_breakage(tmp_path):
    bad = "\n".join([
        "| a | b |", "|---|---|", "| 1 | 2 | 3 |",
        "![chart](/abs/path.png)", "![chart](missing.png)",
        "<details><summary>x</summary>",
        "```mermaid", "gantt", "    title t", "    this is not a task", "```",
        "```mermaid", "xychart-beta", '    x-axis "n" ["a", "b"]', "    line [1, 2, 3]", "```",
    ])
    problems = lint_markdown(bad, base_dir=tmp_path)
    text = "\n".join(problems)
    assert "3 cells" in text and "absolute" in text and "does not exist" in text
    assert "not closed" in text and "neither a keyword nor a task" in text and "3 values for 2 categories" in text
    issue = "\n".join(lint_issue("![c](c.png)\n" + "x" * ISSUE_LIMIT))
    assert "an image" in issue and "over the" in issue


def test_lint_accepts_escaped_pipes_valid_gantt_and_xychart(tmp_path):
    (tmp_path / "c.png").write_bytes(b"png")
    ok = "\n".join(["| a | b |", "|---|---|", "| x \\| y | 2 |", "![c](c.png)",
                    "<details><summary>s</summary>\n\nbody\n\n</details>",
                    "```mermaid", "gantt", "  dateFormat x", "  axisFormat %L", "  section T1",
                    "  vm_setup :a1, 0, 12", "```",
                    "```mermaid", '%%{init: {"theme": "base"}}%%', "xychart-beta", '    title "t"',
                    '    x-axis "w" ["1", "2"]', '    y-axis "us" 0 --> 10', "    line [1, 2.5]", "```"])
    assert lint_markdown(ok, base_dir=tmp_path) == []


def _smoke(study_id, store):
    study = registry()[study_id]
    if study.requires(study.SPACE.defaults("smoke")) is not None:
        return None
    return runner.execute(study, {}, store, preset="smoke")


def _png_drawn(png: bytes) -> bool:
    """Something besides the background, axes and text: enough coloured pixels (the marks)."""
    from PIL import Image

    im = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for r, g, b in im.getdata() if max(r, g, b) - min(r, g, b) > 40) >= 200


def _check_reports(rec: RunRecord, tmp_path, pngs: bool) -> None:
    a = analyse(rec)
    issue = report.issue_markdown(rec, a)  # the default: about two screens
    assert lint_issue(issue) == [], lint_issue(issue)
    assert "**Verdict:**" in issue and "Reproduce:" in issue and "--full" in issue
    assert len(issue) <= report.ISSUE_SHORT_LIMIT, f"default issue report of {len(issue):,} characters"
    full = report.issue_markdown(rec, a, full=True)
    assert lint_issue(full) == [], lint_issue(full)
    assert "**Verdict:**" in full and "Environment and reproduce command" in full and len(full) <= report.ISSUE_LIMIT
    if pngs:
        path = report.write_markdown(rec, tmp_path / f"{rec.run_id}.md", analysis=a)
        problems = lint_markdown(path.read_text(), base_dir=path.parent)
        assert problems == [], problems
        blank = [p.name for p in (path.parent / f"{path.stem}_files").glob("*.png") if not _png_drawn(p.read_bytes())]
        assert not blank, f"chart PNGs with nothing drawn: {blank}"


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_smoke_run_reports_fit_an_issue_and_draw(study_id, store, tmp_path):
    rec = _smoke(study_id, store)
    if rec is None:
        pytest.skip(f"{study_id} cannot run here (its committed bundles are checked below)")
    _check_reports(rec, tmp_path, pngs=True)


COMMITTED = [(sid, rec.run_id) for sid in sorted(registry()) for rec in committed_runs(sid)]


@pytest.mark.parametrize("study_id, run_id", COMMITTED, ids=[r for _, r in COMMITTED])
def test_committed_bundle_reports_fit_an_issue(study_id, run_id, tmp_path):
    rec = next(r for r in committed_runs(study_id) if r.run_id == run_id)
    # chart PNGs for the newest committed run of each study (rendering all of them is minutes)
    newest = max(committed_runs(study_id), key=lambda r: r.created_utc).run_id
    _check_reports(rec, tmp_path, pngs=run_id == newest)


def _hostile_record() -> RunRecord:
    """A run whose strings try to become markup, links and images."""
    evil = "<img src=http://evil.example/x.png> [l](http://evil.example) ![i](http://evil.example/i.png) `x` *a*"
    return RunRecord(run_id="20260101-000000-calibration-aaaaaa", study="calibration",
                     params={"repeat": 5, "threads": 1, "torch": False},
                     env={"fingerprint": "f", "cpu_model": evil, "os": "</details><script>alert(1)</script>"},
                     status="complete", created_utc="2026-01-01T00:00:00Z", reproduce=f"python -m workbench run {evil}",
                     variants=[VariantResult("empty-call", {"kind": "harness"}, [30.0, 31.0, 33.0, 34.0], True, evil),
                               VariantResult("forkjoin/w1", {"kind": "forkjoin", "threads": 1},
                                             [4e4, 4.1e4, 4.3e4, 4.2e4], True, "ok")])


def test_html_report_is_one_file_that_loads_nothing_and_escapes_the_run(tmp_path):
    path = report.write_report(_hostile_record(), "html", tmp_path / "r.html")
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<figure><img" in text  # a chart, inline
    for ref in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', text):  # images inline, links to its own sections
        assert ref.startswith("data:image/png;base64,") or re.fullmatch(r"#sec-\d+", ref), \
            f"an external reference: {ref[:80]}"
    assert '<nav class="toc">' in text and '<details class="section"' in text
    assert "<script" not in text and "<link" not in text and "@import" not in text and "url(" not in text
    assert "<img src=http" not in text and "&lt;img src=http" in text


def test_issue_report_keeps_the_lead_and_names_what_did_not_fit():
    rec = _hostile_record()
    a = analyse(rec)
    full = report.issue_markdown(rec, a, full=True)
    limit = len(full) - 200  # a limit the whole report does not fit in, but its lead does
    small = report.issue_markdown(rec, a, limit=limit, full=True)
    assert len(small) <= limit and "**Verdict:**" in small and "Environment and reproduce command" in small
    assert "Left out to fit in one issue" in small
    assert lint_issue(full) == [] and "Left out" not in full
    prose = outside_fences(full)  # a code block shows its text as text
    assert "<img" not in prose and "](http" not in prose.replace("\\](", "")


def test_every_format_leads_with_the_verdict(tmp_path):
    rec = _hostile_record()
    for fmt in ("md", "issue", "html"):
        text = report.write_report(rec, fmt, tmp_path / f"r.{fmt}").read_text()
        assert "Verdict:" in text[:3000], fmt
