"""The README and the manual as GitHub shows them: every relative link and anchor resolves, the
README stays a front door, each study has its page, and the generated tables are in step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.support.mdlint import anchors, broken_links, github_slug, lint_markdown

from workbench import manual
from workbench.registry import registry

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: the README is a front door: what it is, set-up, a first run, the studies, links into docs/
README_MAX_BYTES = 11_000


def documents() -> list[Path]:
    """The project's own Markdown: README, the manual, writing a study, committed results."""
    return [README, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "studies" / "README.md",
            *sorted((ROOT / "traces").glob("*/README.md"))]


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(doc):
    assert broken_links(doc, ROOT) == []


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_renders_on_github(doc):
    """Tables aligned, <details> closed, Mermaid blocks parse, images present beside it."""
    assert lint_markdown(doc.read_text(encoding="utf-8"), base_dir=doc.parent) == []


def test_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) < README_MAX_BYTES, "the manual belongs in docs/, the README links to it"
    assert "make run     # " in text and "make test    # " in text  # the set-up contract, verbatim
    linked = {t for _, t in re.findall(r"\[([^\]]*)\]\((docs/[^)#]+)", text)}
    for page in ("reading-a-run", "comparing-runs", "traces", "cli", "sharing", "gpu", "safety", "testing"):
        assert f"docs/{page}.md" in linked, page
    assert "](studies/README.md)" in text and "](docs/README.md)" in text


def test_every_study_has_a_page_a_readme_row_and_current_knob_tables():
    readme = README.read_text(encoding="utf-8")
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for study_id, mod in registry().items():
        page = manual.study_page(study_id)
        assert page.exists(), f"{study_id} has no page in the manual: {page.relative_to(ROOT)}"
        assert f"| [{study_id}](docs/studies/{study_id}.md) |" in readme, f"{study_id}: no row in the README"
        assert f"](studies/{study_id}.md)" in index, f"{study_id}: not in docs/README.md"
        text = page.read_text(encoding="utf-8")
        assert manual.refreshed(text, mod.SPACE) == text, \
            f"{page.relative_to(ROOT)} is out of step with {study_id}'s SPACE: run python -m workbench.manual"


def test_slugs_as_github_makes_them():
    assert github_slug("Narrowing a CI: `--precision`") == "narrowing-a-ci---precision"
    assert github_slug("Comparing runs (A/B)") == "comparing-runs-ab"
    assert github_slug("The seed's claims on these runs (issue #18)") == "the-seeds-claims-on-these-runs-issue-18"
    assert github_slug("**Bold** and _em_ with `snake_case`") == "bold-and-em-with-snake_case"
    assert github_slug("MC² split: [the plan](x.md)") == "mc²-split-the-plan"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n<a id=\"here\"></a>\n") == {"a", "a-1", "here"}


def test_broken_links_are_found(tmp_path):
    (tmp_path / "b.md").write_text("# Present\n")
    doc = tmp_path / "a.md"
    doc.write_text("[ok](b.md#present) [gone](c.md) [anchor](b.md#absent) [self](#nowhere) "
                   "`[code](c.md)` [web](https://example.com) <img src=\"d.png\"> [up](../x.md)\n"
                   "```\n[fenced](c.md)\n```\n")
    found = broken_links(doc, tmp_path)
    assert [p.split(": ", 1)[1] for p in found] == [
        "c.md: no such file", "b.md#absent: b.md has no heading with that anchor",
        "#nowhere: a.md has no heading with that anchor", "../x.md leaves the repository", "d.png: no such file"]
