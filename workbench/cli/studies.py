"""``list`` (the studies) and ``knobs STUDY`` (what ``--set`` takes)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from ..presentation import manual
from ..base.names import seed_title
from ..seam.registry import registry
from .base import EXIT_BAD_INPUT, EXIT_OK, Command, find_study, fmt_table


class List(Command):
    """The index of the studies (built here, at run time: no page of the repository lists them),
    each with its seed and its page."""

    name, help = "list", "list the studies with their seed"

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("--json", action="store_true")

    @classmethod
    def run(cls, args) -> int:
        reg = registry()
        pages = {m.ID: manual.page_name(m) for m in reg.values()}
        if args.json:  # the seed's file name stays in the JSON; people read its title
            print(json.dumps([{"id": m.ID, "title": m.TITLE, "seed": m.SEED, "seed_title": seed_title(m),
                               "summary": m.SEED_SUMMARY, "page": pages[m.ID]} for m in reg.values()], indent=1))
        else:
            rows = [[m.ID, manual.short_title(m), seed_title(m), pages[m.ID]] for m in reg.values()]
            print(fmt_table(rows, ["study", "name", "seed", "page"]))
        return EXIT_OK


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(_value_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _allowed_text(p) -> str:
    """What a knob takes: its choices, its range, true/false or text."""
    if p.choices:
        return ("any of " if p.multi else "one of ") + ", ".join(map(_value_text, p.choices))
    if p.kind == "bool":
        return "true or false"
    if p.kind in ("int", "float"):
        lo = "" if p.min is None else _value_text(p.min)
        hi = "" if p.max is None else _value_text(p.max)
        span = f"{lo}..{hi}" if lo or hi else "any number"
        return span + (" (a list)" if p.multi else "")
    return "text" + (" (a list)" if p.multi else "")


def knobs_table(study) -> list[dict[str, str]]:
    """A study's knobs as rows: name, default, allowed values, unit, where the page shows it
    (headline, advanced, GPU only) and what it does."""
    space = study.SPACE
    rows = []
    for p in space.params:
        where = "GPU only" if p.name in space.gpu_only else "headline" if p.name in space.headline or not space.headline \
            else "advanced"
        rows.append({"knob": p.name, "default": _value_text(p.default), "allowed": _allowed_text(p), "unit": p.unit,
                     "shown": where, "what it does": p.help})
    return rows


def knobs_text(study) -> str:
    """``knobs STUDY`` (and ``run STUDY --help``): the knobs table, then each preset with its
    purpose and the knobs it sets."""
    from ..evidence.tables import render
    import pandas as pd

    table = pd.DataFrame(knobs_table(study))
    table["what it does"] = table["what it does"].map(lambda t: textwrap.fill(t, 70))
    table["allowed"] = table["allowed"].map(lambda t: textwrap.fill(t, 36))
    table["default"] = table["default"].map(lambda t: textwrap.fill(t.replace(",", ", "), 30).replace(", ", ","))
    lines = [render(table, "plain", max_rows=None), "", "presets (--preset NAME):"]
    for name, values in study.SPACE.presets.items():
        purpose = study.SPACE.purposes.get(name, "")
        sets = " ".join(f"{k}={_value_text(v)}" for k, v in values.items())
        lines.append(f"  {name}: {purpose}{' ' if purpose else ''}({sets or 'the defaults'})")
    return "\n".join(lines)


class Knobs(Command):
    """``knobs STUDY``: what ``--set`` takes."""

    name, help, takes_store = "knobs", "a study's knobs: ranges, defaults, units, presets", False

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("study", help="a study id (python -m workbench list)")
        s.add_argument("--json", action="store_true", help="the knobs and presets as JSON")

    @classmethod
    def run(cls, args) -> int:
        study = find_study(args.study)
        if study is None:
            return EXIT_BAD_INPUT
        if args.json:
            print(json.dumps({"study": study.ID, "knobs": knobs_table(study),
                              "presets": {k: {"purpose": study.SPACE.purposes.get(k, ""), "sets": v}
                                          for k, v in study.SPACE.presets.items()}}, default=str, indent=1))
        else:
            print(f"{study.ID}: {study.TITLE}\n")
            print(knobs_text(study))
            print(f"\nrun it: python -m workbench run {study.ID} --preset smoke --set NAME=VALUE")
        return EXIT_OK
