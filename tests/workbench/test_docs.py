"""The README and the manual as GitHub shows them: every relative link and anchor resolves, the
README stays a front door, each study has its page in its folder, generated from its seam and in
step, and no page outside a study's folder lists the studies (the index is built at run time)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.support.mdlint import anchors, broken_links, github_slug, lint_markdown

from workbench.presentation import manual
from workbench.seam.registry import registry

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: the README is a front door: what it is, set-up, a first run, the studies, links into docs/
README_MAX_BYTES = 11_000


def documents() -> list[Path]:
    """The project's own Markdown: README, the manual, writing a study, the studies' pages,
    committed results."""
    return [README, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "studies" / "README.md",
            *sorted((ROOT / "studies").glob("*/README.md")), *sorted((ROOT / "traces").glob("*/README.md"))]


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


def check_study_page(mod, root: Path = ROOT) -> list[str]:
    """What is wrong with a study's page: missing, out of step with its seam, not rendering, or
    a link that does not resolve (inside ``root``, the repository the study lives in)."""
    stale = manual.out_of_step(mod)
    if stale:
        return [f"{stale}: run python -m workbench.presentation.manual"]
    page = manual.study_page(mod)
    return lint_markdown(page.read_text(encoding="utf-8"), base_dir=page.parent) + broken_links(page, root)


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_every_study_has_its_page_in_its_folder_generated_from_its_seam(study_id):
    mod = registry()[study_id]
    assert manual.study_page(mod) == ROOT / "studies" / mod.__name__.split(".")[-1] / "README.md"
    assert check_study_page(mod) == []
    text = manual.study_page(mod).read_text(encoding="utf-8")
    assert f"# {manual.short_title(mod)} (`{study_id}`)" in text and manual.question(mod) in text
    assert "?" in manual.question(mod), f"{study_id}: its docstring's Question: paragraph asks nothing"


def test_no_page_outside_the_studies_folders_lists_the_studies():
    """The index is built at run time, so a new study changes no page outside its folder: the
    README and the manual may link a study from their prose, but no table lists the studies'
    pages (one linking two or more is an index that a new study would have to join)."""
    page = re.compile(r"\]\((?:\.\./)*(?:docs/)?studies/((?!README\.md)[\w-]+)(?:/README)?\.md\)")
    for doc in [README, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "studies" / "README.md"]:
        linked = {m for line in doc.read_text(encoding="utf-8").splitlines() if line.startswith("|")
                  for m in page.findall(line)}
        assert len(linked) < 2, f"{doc.relative_to(ROOT)} lists the studies in a table: {sorted(linked)}"


def test_the_page_generator_writes_a_whole_page_and_refuses_a_page_without_its_blocks():
    mod = registry()["calibration"]
    page = manual.study_page(mod)
    whole = manual.new_page(mod, page)
    assert manual.refreshed(whole, mod, page) == whole and "## Knobs and presets" in whole
    assert lint_markdown(whole, base_dir=page.parent) == []
    with pytest.raises(ValueError, match="markers are missing"):
        manual.refreshed("# Calibration\n\nprose only\n", mod, page)
    # prose between the blocks is the author's and stays
    text = page.read_text(encoding="utf-8")
    assert "## What it measures" in manual.refreshed(text.replace("- **Runs on**: any CPU", "- stale"), mod, page)


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
