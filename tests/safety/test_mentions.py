"""@mentions and issue references from a bundle stay inert in every report (issue 42).

GitHub notifies ``@octocat`` and every member of ``@org/team`` when an issue body holding them is
posted, and ``#123``, ``GH-123`` or ``owner/repo#123`` leave a link on that issue. Run data
(variant names, parameters, environment, checks, errors, warnings, the reproduce command)
reaches the issue report (short and ``--full``), md, html, the API's reports, a comparison and
a notebook's Markdown; each is rendered as GitHub would (Markdown to HTML, code left out, since
GitHub finds no mention inside code) and searched for a live one."""

from __future__ import annotations

import html
import json
import re

import pytest
from markdown_it import MarkdownIt

from tests.safety.hostile import cli, valid_doc, write
from workbench.base.untrusted import escape, quiet_mentions

LIVE = ["@octocat", "@org/team", "#123", "GH-77", "acme/widgets#9"]
TEXT = "ping @octocat and @org/team, see #123, GH-77 and acme/widgets#9"
# what GitHub links: an @ that does not follow a word character, a # or GH- before digits
_LIVE = re.compile(r"(?<![\w])@[A-Za-z0-9]|(?<![\w&])#\d|\bGH-\d|[\w.-]+/[\w.-]+#\d", re.I)


def _rendered_text(markdown: str) -> str:
    """The text GitHub searches for mentions: rendered, code spans and blocks removed, entities read."""
    out = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    out = re.sub(r"<pre.*?</pre>|<code.*?</code>", " ", out, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", out))


def _page_text(page: str) -> str:
    """The text of an HTML report a reader sees, code and style left out."""
    page = re.sub(r"<style.*?</style>|<pre.*?</pre>|<code.*?</code>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _live(text: str) -> list[str]:
    return _LIVE.findall(text)


def _doc() -> dict:
    doc = valid_doc(variants=2)
    run = doc["run"]
    run["variants"][0]["variant"] = "empty-call @octocat"
    run["variants"][1]["check"] = TEXT
    run["variants"][0]["params"]["label"] = TEXT
    run["params"]["note"] = TEXT
    run["env"]["cpu_model"] = "CPU @org/team #123"
    run["reproduce"] = "python -m workbench run calibration  # " + TEXT
    run["status"] = "failed"
    run["error"] = "RuntimeError: " + TEXT
    run["outputs"]["warnings"] = [TEXT]
    return doc


@pytest.mark.parametrize("where", ["text", "cell", "html"])
def test_escape_makes_every_mention_and_reference_inert(where):
    out = escape(TEXT, where)
    text = _page_text(out) if where == "html" else _rendered_text(out)
    assert not _live(text), _live(text)
    assert text.replace("\u200b", "").split() == TEXT.split()  # reads the same
    assert quiet_mentions(out) == out  # once is enough, twice changes nothing


@pytest.mark.parametrize("plain", ["a@b.com", "f@2x.png", "x#y", "C#", "issue 12", "&#8203;"])
def test_text_that_links_nothing_is_left_as_it_is(plain):
    assert html.unescape(escape(plain)) == plain or plain == "&#8203;"


def test_every_report_format_keeps_them_inert(tmp_path):
    store = tmp_path / "results.sqlite"
    assert cli("import", str(write(tmp_path, _doc())), store=store).code == 0
    texts = {}
    for fmt, extra in (("issue", []), ("issue", ["--full"]), ("md", []), ("html", [])):
        path = tmp_path / f"r{len(texts)}.{fmt}"
        got = cli("report", "latest", "--format", fmt, *extra, "-o", str(path), store=store)
        assert got.code == 0, got.err
        texts[f"{fmt} {extra}"] = path.read_text()
    for name, text in texts.items():
        rendered = _page_text(text) if name.startswith("html") else _rendered_text(text)
        assert "octocat" in rendered or "octocat" in text, name  # the data is shown, not dropped
        assert not _live(rendered), (name, _live(rendered)[:5])


def test_the_api_reports_comparisons_and_notebooks_keep_them_inert(tmp_path):
    import workbench as wb
    from workbench.reading import comparison
    from workbench.presentation import report

    path = write(tmp_path, _doc())
    run = wb.load(str(path))
    for fmt in ("issue", "md"):
        assert not _live(_rendered_text(run.report(fmt)))
    assert not _live(_page_text(run.report("html")))
    other = json.loads(json.dumps(_doc()))
    other["run"]["run_id"] = "20260101-000001-calibration-abc124"
    b = wb.load(str(write(tmp_path, other, "b.bundle.json")))
    assert not _live(_rendered_text(comparison.markdown(comparison.compare_runs(run.record, b.record, []))))
    nb = report.notebook(run.record, "run #123 @octocat.bundle.json")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert not _live(_rendered_text(cell.source)), cell.source
