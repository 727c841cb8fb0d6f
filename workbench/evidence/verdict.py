"""The verdict: one plain sentence (what the run shows, or why it shows nothing), then at most
five bullets with figures; the same text on the page, in the reports, the notebook and the CLI.

A study does not write its verdict: it names its findings (its ``findings(tables)`` hook, a
list of :class:`Finding`: the derived rows that answer its question, the first one its lead,
each with a label and, for the clear case, the sentence that states it), and
:func:`write` composes the text from them, the run's null controls, its load, its checks and
its claims, by one set of rules:

1. a run with no checked variant says so and nothing else;
2. a run measured under load leads with that: nothing it shows is stated as a finding, and
   its figures are shown as inconclusive (never "clear");
3. a variant that disagrees with its own A/A twin beyond its CI (a null control that is
   clearly not null) is named first: the run's blocks moved;
4. otherwise the lead finding: stated with its figure when clear, else why the run does not
   settle it; the bullets then give the other findings (clear ones with their figures, the
   rest counted), the seed's claims in one line and the failed checks.

Every string that comes from a run (variant names, reasons) is escaped here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from . import claims as claimsmod
from ..base import machine_load
from .derived import Derived, fmt_derived, item
from ..base.untrusted import escape

MAX_BULLETS = 5


@dataclass(frozen=True)
class Finding:
    """One thing a verdict may state. With ``row`` (a derived row the engine built): stated
    with its figure when clear (``says``, if given, is the sentence, ``{figure}`` replaced by
    the figure; Markdown-safe, the study escapes what it puts in), else as not clear with why.
    Without a row, ``text`` is a fact of the study's own said as it is (a model's prediction,
    labelled as one; Markdown-safe)."""

    label: str
    row: Derived | Mapping[str, Any] | None = None
    says: str = ""
    text: str = ""

    @property
    def derived(self) -> Derived | None:
        return None if self.row is None else item(self.row)


def _short_why(d: Derived) -> str:
    why = d.why or d.status
    if "measured under load" in why:
        return "measured under load"
    if why.startswith("drift not measured") or "drift not measured" in why:
        return "drift between blocks not measured" + ("; the CI includes " + f"{d.null:g}"
                                                      if why.startswith("the CI includes") else "")
    return why.split("; ")[0]


def figure_text(f: Finding) -> str:
    """A finding in a bullet: ``label: figure`` when clear, with why it is not otherwise."""
    d = f.derived
    if d is None:
        return f.text or escape(f.label)
    if d.status == "clear":
        fig = escape(fmt_derived(d, status=False))
        return f.says.replace("{figure}", fig) if f.says else f"{escape(f.label)}: {fig}"
    if d.status == "not meaningful" or not math.isfinite(d.point):
        return f"{escape(f.label)}: n/a ({escape(_short_why(d))})"
    return f"{escape(f.label)}: {escape(fmt_derived(d, status=False))}, not clear ({escape(_short_why(d))})"


def _lead(f: Finding) -> str:
    d = f.derived
    if d is None:
        return f.text or escape(f.label)
    if d.status == "clear":
        return figure_text(f)
    if d.status == "not meaningful" or not math.isfinite(d.point):
        return f"This run cannot state {escape(f.label)}: {escape(_short_why(d))}"
    figure = escape(fmt_derived(d, status=False))
    return f"This run does not settle {escape(f.label)}: {figure}, {escape(_short_why(d))}"


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def moved_nulls(tables: Mapping[str, pd.DataFrame]) -> list[Derived]:
    """The run's null controls that are clearly not null (a variant that disagrees with its own
    A/A twin beyond the bound of all the run's nulls together, so the engine left it out of
    the drift), most different first. One clear at 95% alone is expected of 1 in 20 true
    nulls: the nulls table shows it, the verdict does not lead with it."""
    nulls = tables.get("nulls")
    if nulls is None or not len(nulls):
        return []
    rows = [item(r) for r in nulls.to_dict("records")
            if r.get("status") == "clear" and "left out of the drift" in str(r.get("why", ""))]
    return sorted(rows, key=lambda d: -abs(math.log(d.point)) if d.point > 0 else 0.0)


def moved_sentence(moved: Sequence[Derived]) -> str:
    """The lead of a run whose null controls moved: the variant that disagrees with its own A/A
    twin (or the null that is not one), named first, with the figure."""
    d = moved[0]
    fig = escape(fmt_derived(d, status=False))
    more = f" ({len(moved) - 1} more null control(s) too)" if len(moved) > 1 else ""
    if d.name.startswith("A/A") and d.sources:
        who = f"{escape(d.sources.split('|')[0])} disagrees with its own A/A twin beyond its CI ({fig})"
    else:
        who = f"The null control {escape(d.name)} is clearly not null ({fig})"
    return f"{who}{more}: this run's blocks moved, so what it compares across blocks is in doubt"


def _loaded(rec, disturbance: Sequence[str]) -> str:
    notes = [n for n in machine_load.variant_notes(rec) if n]
    if notes:
        return f"{len(notes)} of {len(rec.variants)} variants"
    return "the whole run" if disturbance or machine_load.run_note(rec) else ""


def write(rec, tables: Mapping[str, pd.DataFrame], findings: Sequence[Finding], claims: pd.DataFrame | None,
          disturbance: Sequence[str]) -> str:
    """The verdict (the module docstring's rules): one sentence, then at most five bullets."""
    checked = [v for v in rec.variants if v.correct and v.samples_ns]
    failed = [v.variant for v in rec.variants if not v.correct]
    fails = (f"{len(failed)} variant(s) FAILED their check (times not counted): " + escape(", ".join(failed[:6]))
             + (", ..." if len(failed) > 6 else "")) if failed else ""
    if not checked and not findings:  # a run of captures alone (a profile) has findings, no variant
        return _sentence(f"This run shows nothing: no variant passed its check ({len(failed)} failed)"
                         if failed else "This run shows nothing: it measured no variant")
    bullets: list[str] = []
    moved = moved_nulls(tables)
    loaded = _loaded(rec, disturbance)
    if loaded:
        sentence = (f"Measured under load ({loaded}): this run states no finding, and every figure below is "
                    "inconclusive; run it again on a quiet machine")
        rest = list(findings)
    elif moved:
        sentence, rest = moved_sentence(moved), list(findings)
    elif findings:
        sentence, rest = _lead(findings[0]), list(findings[1:])
    else:
        sentence, rest = "This run compares nothing the study states", []
    bullets += _finding_bullets(rest, MAX_BULLETS - bool(fails) - bool(claims is not None and len(claims)))
    tally = claimsmod.tally(claims) if claims is not None else ""
    if tally:
        bullets.append(tally[:1].upper() + tally[1:])
    if fails:
        bullets.append(fails)
    return _sentence(sentence) + "".join(f"\n\n- {_sentence(b)}" if i == 0 else f"\n- {_sentence(b)}"
                                         for i, b in enumerate(bullets[:MAX_BULLETS]))


def _finding_bullets(findings: Sequence[Finding], room: int) -> list[str]:
    """Clear findings and facts first, each a bullet; the unclear ones counted in one."""
    said = [f for f in findings if f.derived is None or f.derived.status == "clear"]
    vague = [f for f in findings if f.derived is not None and f.derived.status != "clear"]
    room = max(room, 1)
    if vague and len(said) + len(vague) > room:
        out = [figure_text(f) for f in said[:room - 1]]
        out.append(f"{len(vague)} more figure(s) not clear (see the tables): " +
                   "; ".join(escape(f.label) for f in vague[:2]) + ("; ..." if len(vague) > 2 else ""))
        return out
    return [figure_text(f) for f in (said + vague)[:room]]


def generic_findings(tables: Mapping[str, pd.DataFrame]) -> list[Finding]:
    """The findings of a study without its own: every row of its ``derived`` table, in order."""
    d = tables.get("derived")
    if d is None or not len(d):
        return []
    return [Finding(str(r["name"]), r) for r in d.to_dict("records")]
