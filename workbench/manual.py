"""The manual's generated parts: each study's knob and preset tables in ``docs/studies/<id>.md``.

A hand-typed copy of a parameter space drifts from the code at the first new knob, so these
tables come from the study's ``SPACE``. ``python -m workbench.manual`` rewrites the block
between :data:`BEGIN` and :data:`END` of every study page; a test fails while a page is out of
step.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .registry import registry
from .study import Param, ParamSpace

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- knobs and presets: generated from the study's SPACE by `python -m workbench.manual` -->"
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


def study_page(study_id: str) -> Path:
    return ROOT / "docs" / "studies" / f"{study_id}.md"


def refreshed(text: str, space: ParamSpace) -> str:
    """``text`` with its generated block rewritten; ValueError when the markers are missing."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise ValueError("the page has no generated block (its markers are missing)")
    return f"{head}{BEGIN}\n{space_markdown(space)}\n{END}{tail}"


def main() -> int:
    """Rewrite every study page's generated block; print the pages that changed."""
    for study_id, mod in registry().items():
        page = study_page(study_id)
        old = page.read_text(encoding="utf-8")
        new = refreshed(old, mod.SPACE)
        if new != old:
            page.write_text(new, encoding="utf-8")
            print(page.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
