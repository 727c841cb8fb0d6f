"""Each study's page of the manual, generated from its seam: ``studies/<package>/README.md``.

A study's page lives in its folder (GitHub shows it when the folder is opened), so a new
study's folder plus its tests folder are the whole change: no page, row or link elsewhere
names it, and the index of the studies is built at run time (``python -m workbench list``, the
app's Home page; on GitHub, the ``studies/`` folder). Two blocks of a page come from the seam,
because a hand-typed copy drifts from the code at the first new knob:

- the head (between :data:`HEAD_BEGIN` and :data:`HEAD_END`): the title from ``TITLE`` and
  ``ID``, the seed and the summary (``SEED_TITLE``, ``SEED_SUMMARY``), the question (the ``Question:``
  paragraph of the module docstring), where it runs (``RUNS_ON``), how to start it, and where
  its committed results live (``traces/<id>/``);
- the knobs and presets (between :data:`BEGIN` and :data:`END`): every parameter of ``SPACE``
  with its default, allowed values and form placement, and every preset with its purpose.

Everything else on a page is the study author's prose, kept where it is. ``python -m
workbench.presentation.manual`` rewrites both blocks of every registered study's page and writes a whole
page for a study that has none; ``--check`` only says which pages are out of step (exit 1),
and a test fails while one is.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..base.env import REPO_ROOT
from ..seam.registry import registry
from ..seam.study import Param, ParamSpace

ROOT = REPO_ROOT
HEAD_BEGIN = "<!-- head: generated from the study's seam by `python -m workbench.presentation.manual` -->"
HEAD_END = "<!-- end of the generated head -->"
BEGIN = "<!-- knobs and presets: generated from the study's SPACE by `python -m workbench.presentation.manual` -->"
END = "<!-- end of the generated knobs and presets -->"


def _text(value: Any) -> str:
    """A parameter value as ``--set`` takes it: lists comma-separated, booleans true/false."""
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _cell(text: str) -> str:
    """A table cell: a pipe would split it."""
    return text.replace("|", "\\|")


def _allowed(p: Param) -> str:
    if p.choices is not None:
        allowed = ", ".join(f"`{_text(c)}`" for c in p.choices)
    elif p.kind == "bool":
        allowed = "`true`, `false`"
    elif p.kind == "str":
        allowed = "text"
    else:
        lo, hi = (None if b is None else _text(b) for b in (p.min, p.max))
        allowed = (f"{lo}..{hi}" if lo and hi else f">= {lo}" if lo else f"<= {hi}" if hi else "any") \
            + (f" {p.unit}" if p.unit else "")
    return f"a list of {allowed}" if p.multi else allowed


def _where(space: ParamSpace, p: Param) -> str:
    """Where the page's form shows a knob: first (headline) or under Advanced; GPU only."""
    where = "first" if p.name in space.headline else "Advanced"
    return where + (", GPU only" if p.name in space.gpu_only else "")


def space_markdown(space: ParamSpace) -> str:
    """The knobs (name, default, allowed values, where the form shows it, what it does) and the
    presets of a study with their purposes."""
    rows = ["| knob | default | allowed | form | what it does |", "|---|---|---|---|---|"]
    for p in space.params:
        default = _text(p.default)
        rows.append(f"| `{p.name}` | {_cell(f'`{default}`' if default else '(empty)')} | {_cell(_allowed(p))} "
                    f"| {_where(space, p)} | {_cell(p.help)} |")
    if space.renamed:
        rows += ["", "Renamed (the old name still reads, with a deprecation line): "
                 + ", ".join(f"`{old}` is now `{new}`" for old, new in space.renamed.items()) + "."]
    rows += ["", "| preset | for | sets |", "|---|---|---|"]
    for name, values in space.presets.items():
        sets = " ".join(f"`{k}={_text(v)}`" for k, v in values.items())
        rows.append(f"| `{name}` | {_cell(space.purposes.get(name, ''))} | {_cell(sets)} |")
    return "\n".join(rows)


def study_page(mod: ModuleType) -> Path:
    """Where a study's page lives: ``README.md`` in its package's folder."""
    return Path(mod.__file__).resolve().parent / "README.md"


def page_name(mod: ModuleType) -> str:
    """The study's page as a path from the repository's root (absolute when it lies elsewhere)."""
    page = study_page(mod)
    return page.relative_to(ROOT).as_posix() if ROOT in page.parents else str(page)


def short_title(mod: ModuleType) -> str:
    """The study's name as the app's sidebar and its page show it (``TITLE`` up to a colon or
    parenthesis)."""
    return re.split(r"[:(]", mod.TITLE)[0].strip()


def question(mod: ModuleType) -> str:
    """The question the study's docstring states (its ``Question:`` paragraph up to its last
    question mark, in Markdown); else the docstring's first line."""
    doc = mod.__doc__ or ""
    para = next((p for p in re.split(r"\n\s*\n", doc) if p.lstrip().startswith("Question")), None)
    if para is None:
        text = doc.strip().splitlines()[0].partition(": ")[2] or doc.strip().splitlines()[0]
    else:
        text = re.sub(r"^\s*Question(?: \([^)]*\))?:\s*", "", para)
    text = re.sub(r":\w+:`", "`", " ".join(text.split()).replace("``", "`"))  # reST literals and roles
    if "?" in text:  # the question ends at its last question mark; what it measures follows
        text = text[:text.rindex("?") + 1]
    return text[:1].upper() + text[1:]


def _link(page: Path, target: Path) -> str | None:
    """``target`` relative to ``page`` for a link GitHub follows, or None when either lies
    outside this repository (a study registered from elsewhere)."""
    if ROOT not in page.parents or not (target == ROOT or ROOT in target.parents):
        return None
    return Path(os.path.relpath(target, page.parent)).as_posix()


def head_markdown(mod: ModuleType, page: Path) -> str:
    """The generated head of a study's page (see the module doc)."""
    name = short_title(mod)
    lines = [f"# {name} (`{mod.ID}`)", ""]
    nav = [(text, _link(page, target)) for text, target in (
        ("README", ROOT / "README.md"), ("the manual", ROOT / "docs" / "README.md"), ("all studies", ROOT / "studies"))]
    if all(href for _, href in nav):
        lines += [" · ".join(f"[{text}]({href})" for text, href in nav), ""]
    results = ROOT / "traces" / mod.ID / "README.md"
    href = _link(page, results) if results.exists() else None
    lines += [f"- **Seed**: {getattr(mod, 'SEED_TITLE', None) or mod.SEED}", f"- **Summary**: {mod.SEED_SUMMARY}",
              f"- **Question**: {question(mod)}"]
    if getattr(mod, "RUNS_ON", None):
        lines.append(f"- **Runs on**: {mod.RUNS_ON}")
    lines += [f"- **Run it**: the *{name}* page of the app (`make run`), or "
              f"`python -m workbench run {mod.ID} --quick` (the presets are below)",
              f"- **Committed results**: [traces/{mod.ID}/README.md]({href})" if href else
              f"- **Committed results**: none (runs of other machines would be committed under `traces/{mod.ID}/`)"]
    return "\n".join(lines)


def _replaced(text: str, begin: str, end: str, body: str) -> str:
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not (sep and sep2):
        raise ValueError(f"the page has no generated block {begin!r} (its markers are missing)")
    return f"{head}{begin}\n{body}\n{end}{tail}"


def refreshed(text: str, mod: ModuleType, page: Path | None = None) -> str:
    """``text``, a study's page, with both generated blocks rewritten from the seam;
    ValueError when a block's markers are missing."""
    page = page or study_page(mod)
    text = _replaced(text, HEAD_BEGIN, HEAD_END, head_markdown(mod, page))
    return _replaced(text, BEGIN, END, space_markdown(mod.SPACE))


def new_page(mod: ModuleType, page: Path | None = None) -> str:
    """The whole page of a study that has none: the generated blocks, room for prose between."""
    page = page or study_page(mod)
    return (f"{HEAD_BEGIN}\n{head_markdown(mod, page)}\n{HEAD_END}\n\n## Knobs and presets\n\n"
            f"{BEGIN}\n{space_markdown(mod.SPACE)}\n{END}\n")


def out_of_step(mod: ModuleType) -> str | None:
    """Why a study's page is not what the generator writes (missing, markers gone, a block
    out of step), or None when it is."""
    page = study_page(mod)
    if not page.is_file():
        return f"{mod.ID} has no page: {page}"
    text = page.read_text(encoding="utf-8")
    try:
        if refreshed(text, mod, page) != text:
            return f"{page} is out of step with {mod.ID}'s seam"
    except ValueError as exc:
        return f"{page}: {exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    """Write every registered study's page (its generated blocks; a whole page where there is
    none) and print the pages written; ``--check``: print the pages out of step, exit 1;
    ``--study ID``: that study's page only."""
    ap = argparse.ArgumentParser(prog="python -m workbench.presentation.manual", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing: list the pages out of step (exit 1)")
    ap.add_argument("--study", action="append", metavar="ID", help="only this study's page (repeatable)")
    args = ap.parse_args(argv)
    studies = registry()
    unknown = sorted(set(args.study or ()) - set(studies))
    if unknown:
        ap.error(f"unknown study {', '.join(unknown)}; known: {', '.join(sorted(studies))}")
    stale = []
    for mod in (studies[s] for s in args.study) if args.study else studies.values():
        page = study_page(mod)
        old = page.read_text(encoding="utf-8") if page.is_file() else None
        new = new_page(mod, page) if old is None else refreshed(old, mod, page)
        if new != old:
            stale.append(page)
            if not args.check:
                page.write_text(new, encoding="utf-8")
    for page in stale:
        print(page.relative_to(ROOT) if ROOT in page.parents else page)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
