"""Analyse once: a run record -> everything people read about it, computed in one place.

:func:`analyse` calls the study's ``analyze`` once per record and derives the rest from its
tables: the per-variant results table, the verdict, the claims table (the seed's findings
checked on this run) and the "run disturbed" lines (load and CPU clock during the run). The
page (cached per run state), the CLI (``run``, ``report``), the Markdown report, the notebook
and the ``--json`` record all start from it, so they cannot disagree, and a study bug in any
hook lands in ``errors`` instead of killing a page or a report. A study without
``SEED_CLAIMS`` gets an empty claims table.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable

import pandas as pd

from . import claims as claimsmod
from . import derived, stats, tables
from . import machine_load as load
from .record import RunRecord, VariantResult
from .registry import registry
from .untrusted import escape


@dataclass
class Analysis:
    rec: RunRecord
    study: ModuleType | None
    tables: dict[str, pd.DataFrame]  # study.analyze(rec); {} on failure (the reason in errors)
    results: pd.DataFrame  # the per-variant results table (workbench.tables.variants_table)
    verdict: str  # Markdown-safe text: states only clear results
    claims: pd.DataFrame  # workbench.claims.COLUMNS; empty for a study without SEED_CLAIMS
    disturbance: list[str]  # "run disturbed" lines with figures (workbench.machine_load)
    errors: list[str] = field(default_factory=list)  # a hook that failed, with why

    @property
    def drift(self) -> derived.Drift:
        """The run's drift between blocks (from its null controls), or not measured."""
        return derived.drift_of(self.tables)

    @property
    def levels(self) -> str:
        """What the run's CIs cover, in one line (pages, reports, the CLI summary)."""
        return levels_line(self.drift)


def levels_line(drift: derived.Drift) -> str:
    return (f"CIs cover the samples of each block; {drift.text()}; compared variants timed in the same rounds pair "
            "by round. Run-to-run variation: only across runs (--repeat-runs, committed runs of one machine).")


def under_load(rec: RunRecord, disturbance: list[str], verdict: str) -> str:
    """A disturbed run's verdict leads with that: what the disturbed variants show is
    inconclusive under load (their derived figures say so too, where the study passes the
    load notes to :mod:`workbench.derived`)."""
    if not disturbance:
        return verdict
    notes = [v.variant for v, note in zip(rec.variants, load.variant_notes(rec)) if note]
    which = (f"{len(notes)} of {len(rec.variants)} variant(s) ran under load ({escape(', '.join(notes[:4]))}"
             + (f" and {len(notes) - 4} more" if len(notes) > 4 else "") + "): what they show is inconclusive under "
             "load" if notes else "what it shows is inconclusive under load")
    return f"Measured under load (see the warnings): {which}. {verdict}"


def _attempt(errors: list[str], what: str, fn: Callable[[], Any], default: Any) -> Any:
    """``fn()``, or ``default`` with the reason in ``errors`` (a study bug must not kill a page
    or a report; a run from a bundle may hold outputs its study cannot read)."""
    try:
        return fn()
    except Exception as exc:
        errors.append(f"{what} failed: {type(exc).__name__}: {exc}")
        return default


def _has_data(rec: RunRecord) -> bool:
    return bool(rec.variants) or any(k != "load" for k in (rec.outputs or {}))


def _study_of(rec: RunRecord) -> ModuleType | None:
    return registry().get(rec.study)


def analyse(rec: RunRecord, study: ModuleType | None = None) -> Analysis:
    """Everything about one run, with ``study.analyze`` called exactly once."""
    study = study if study is not None else _study_of(rec)
    errors: list[str] = []
    results = tables.variants_table(rec)
    tbls: dict[str, pd.DataFrame] = {}
    if study is not None and _has_data(rec):
        tbls = _attempt(errors, "The analysis of this run", lambda: study.analyze(rec), {}) or {}
    hook = getattr(study, "verdict", None)
    if hook is None:
        verdict = generic_verdict(results, tbls)
    else:
        verdict = _attempt(errors, "The verdict", lambda: hook(tbls), None)
        if verdict is None:
            verdict = f"none ({escape(errors[-1])})"
    disturbance = _attempt(errors, "The load analysis", lambda: load.disturbance(rec), [])
    return Analysis(rec=rec, study=study, tables=tbls, results=results, verdict=under_load(rec, disturbance, verdict),
                    claims=claimsmod.evaluate(study, tbls, rec), disturbance=disturbance, errors=errors)


def generic_verdict(results: pd.DataFrame, tbls: dict[str, pd.DataFrame] | None = None) -> str:
    """The verdict of a study without its own: the fastest checked variant of the results table
    (and whether its CI sets it apart from the next), the clear results of a ``derived`` table
    (inconclusive ones counted, never stated), and the failed checks."""
    if results.empty:
        return "No measurement."
    failed = results.loc[~results["correct"].astype(bool), "variant"].tolist()
    valid = results[results["correct"].astype(bool) & (results["samples"] > 0)].sort_values("median_ns")
    if valid.empty:
        return f"No valid measurement ({len(failed)} variant(s) failed their check)."
    best = valid.iloc[0]
    text = (f"Fastest of {len(valid)} checked variant(s): {escape(best['variant'])} at {stats.fmt_ns(best['median_ns'])} "
            f"(95% CI {stats.fmt_ns(best['ci_lo_ns'])} to {stats.fmt_ns(best['ci_hi_ns'])})")
    if len(valid) > 1:
        second = valid.iloc[1]
        if best.get("load_note") or second.get("load_note"):
            text += f", inconclusive under load against {escape(second['variant'])}"
        elif second["ci_lo_ns"] <= best["ci_hi_ns"]:
            text += (f", not clearly ahead of {escape(second['variant'])} ({stats.fmt_ns(second['median_ns'])}: "
                     "their CIs overlap)")
    parts = [text + "."]
    head = derived.headline((tbls or {}).get("derived"))
    if head:
        parts.append(escape(head))
    if failed:
        parts.append(f"{len(failed)} variant(s) FAILED their correctness check: {escape(', '.join(failed))}.")
    return " ".join(parts)


def charts_of(a: Analysis, only: str | None = None) -> dict:
    """``study.charts(tables)``; a failure is appended to ``a.errors`` and gives no charts.
    ``only``: that chart alone where the study's ``charts`` takes ``only=`` and makes it (a
    short report draws its key chart only), else every chart."""
    if a.study is None or not a.tables:
        return {}
    if only is not None and "only" in inspect.signature(a.study.charts).parameters:
        one = _attempt(a.errors, "The charts", lambda: a.study.charts(a.tables, only=only), {}) or {}
        if only in one:
            return one
    return _attempt(a.errors, "The charts", lambda: a.study.charts(a.tables), {}) or {}


def sections_of(a: Analysis) -> list[str]:
    """The study's extra Markdown (``report_sections(tables)``); [] on failure."""
    hook = getattr(a.study, "report_sections", None)
    if hook is None or not a.tables:
        return []
    return _attempt(a.errors, "The report sections", lambda: hook(a.tables), []) or []


def variant_json(v: VariantResult) -> dict[str, Any]:
    """A variant as the ``--json`` record shows it: its raw samples and their summary."""
    s = stats.summarize(v.samples_ns)
    return {
        "variant": v.variant, "params": v.params, "samples_ns": v.samples_ns,
        "median_ns": s.median, "ci_ns": [s.ci_lo, s.ci_hi], "iqr_ns": s.iqr,
        "noisy": s.noisy, "correct": v.correct, "check": v.check, "extra": v.extra,
    } | ({"blocks": v.blocks} if v.blocks is not None else {})


def json_fields(a: Analysis) -> dict[str, Any]:
    """What the ``--json`` record adds to the run's raw record (``rec.to_json() | json_fields(a)``):
    ``variants`` with their summaries, ``verdict``, ``claims``, ``disturbance`` and ``levels``
    (what its CIs cover: the drift between blocks line)."""
    return {"variants": [variant_json(v) for v in a.rec.variants], "verdict": a.verdict,
            "claims": claimsmod.to_json(a.claims), "disturbance": list(a.disturbance), "levels": a.levels}
