"""Reports of a bundle whose fields hold 300,000 characters (issue 42): every field is capped where
it reaches a report, so the issue report stays under GitHub's 65,536 characters, and says what
was cut; md and html stay readable documents; a report under an address-space limit keeps
everything but its PNG charts (the renderer would abort the process)."""

from __future__ import annotations

import copy

import pytest

from tests.safety.hostile import cli, valid_doc, write
from tests.support.mdlint import lint_issue, lint_markdown
from workbench.presentation.report import ISSUE_LIMIT
from workbench.base.untrusted import MAX_BLOCK_CHARS, MAX_FIELD_CHARS, clip, escape

GITHUB_LIMIT = 65_536
BIG = 300_000


def _huge(variants: int = 3, text: str = "x") -> dict:
    doc = valid_doc(variants)
    big = (text * BIG)[:BIG]
    run = doc["run"]
    run["reproduce"] = "python -m workbench run calibration " + big
    run["env"]["cpu_model"] = big
    run["env"]["extra_field"] = big
    run["params"]["note"] = big
    run["variants"][0]["check"] = "ok " + big
    run["variants"][1]["params"]["label"] = big
    run["status"], run["error"] = "failed", big
    run["outputs"]["warnings"] = [big, big]
    run["outputs"]["study_note"] = big
    return doc


@pytest.mark.parametrize("where", ["text", "cell", "code", "html", "mermaid", "block"])
def test_one_field_is_capped_in_every_context_and_says_so(where):
    out = escape("y" * BIG, where)
    cap = MAX_BLOCK_CHARS if where == "block" else MAX_FIELD_CHARS
    assert cap < len(out) < cap + 100
    assert f"{BIG - cap:,} more characters cut" in out


def test_clip_leaves_short_text_alone():
    assert clip("abc", 3) == "abc" and clip("abcd", 3) == "abc … (1 more characters cut)"


@pytest.mark.parametrize("text", ["x", "| a `b` <c> ", "@octocat #1 "])
@pytest.mark.parametrize("extra", [[], ["--full"]])
def test_the_issue_report_fits_in_one_issue_whatever_the_fields_hold(text, extra, tmp_path):
    path = write(tmp_path, _huge(text=text))
    out = tmp_path / "r.md"
    got = cli("report", str(path), "--format", "issue", *extra, "-o", str(out))
    assert got.code == 0, got.err
    report = out.read_text()
    assert len(report) < GITHUB_LIMIT and len(report) <= ISSUE_LIMIT
    assert "more characters cut" in report
    assert not lint_issue(report), lint_issue(report)[:5]


def test_many_fields_each_under_the_cap_still_fit(tmp_path):
    doc = valid_doc(variants=400)
    for i, v in enumerate(doc["run"]["variants"]):
        v["check"] = f"{i} " + "z" * (MAX_FIELD_CHARS - 10)
    doc["run"]["outputs"]["warnings"] = ["w" * (MAX_FIELD_CHARS - 10)] * 60
    path = write(tmp_path, doc)
    for extra in ([], ["--full"]):
        out = tmp_path / "r.md"
        assert cli("report", str(path), "--format", "issue", *extra, "-o", str(out)).code == 0
        report = out.read_text()
        assert len(report) <= ISSUE_LIMIT and not lint_issue(report), lint_issue(report)[:5]


def test_md_and_html_reports_of_huge_fields_are_bounded(tmp_path):
    path = write(tmp_path, _huge())
    for fmt in ("md", "html"):
        out = tmp_path / f"r.{fmt}"
        assert cli("report", str(path), "--format", fmt, "-o", str(out)).code == 0
        text = out.read_text()
        assert len(text) < 20 * MAX_BLOCK_CHARS  # not the 2.7 MB the fields hold
        if fmt == "md":
            assert not lint_markdown(text, out.parent), lint_markdown(text, out.parent)[:5]


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_a_report_under_an_address_space_limit_keeps_all_but_its_png_charts(fmt, tmp_path):
    path = write(tmp_path, copy.deepcopy(valid_doc(3)))
    out = tmp_path / f"r.{fmt}"
    got = cli("report", str(path), "--format", fmt, "-o", str(out), mem_mb=16 << 10)
    assert got.code == 0, (got.code, got.err[-1000:])  # vl-convert's V8 would abort the process (SIGTRAP)
    assert got.err_lines == [line for line in got.err_lines if line.startswith("note: charts not drawn as PNG")]
    assert len(got.err_lines) == 1
    text = out.read_text()
    assert "charts not drawn as PNG" in text and "ulimit -v" in text
    assert "## Results" in text or "<h2>Results</h2>" in text or "Results" in text
    assert not list(tmp_path.glob("r_files/*.png"))
