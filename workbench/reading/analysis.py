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

from ..evidence import claims as claimsmod
from ..evidence import derived, engine, stats, tables
from ..base import machine_load as load
from ..evidence import verdict as verdictmod
from ..data.record import RunRecord, VariantResult
from ..seam.registry import registry
from ..base.untrusted import escape


@dataclass
class Analysis:
    rec: RunRecord
    study: ModuleType | None
    tables: dict[str, pd.DataFrame]  # study.analyze(rec); {} on failure (the reason in errors)
    results: pd.DataFrame  # the per-variant results table (workbench.evidence.tables.variants_table)
    verdict: str  # Markdown-safe: one sentence, then at most five bullets (workbench.evidence.verdict)
    claims: pd.DataFrame  # workbench.evidence.claims.COLUMNS; empty for a study without SEED_CLAIMS
    disturbance: list[str]  # "run disturbed" lines with figures (workbench.base.machine_load)
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
    """Everything about one run, with ``study.analyze`` called exactly once; the verdict is the
    engine's (:func:`workbench.evidence.verdict.write`) from the study's findings."""
    study = study if study is not None else _study_of(rec)
    errors: list[str] = []
    results = tables.variants_table(rec)
    tbls: dict[str, pd.DataFrame] = {}
    if study is not None and _has_data(rec):
        tbls = _attempt(errors, "The analysis of this run", lambda: study.analyze(rec), {}) or {}
    disturbance = _attempt(errors, "The load analysis", lambda: load.disturbance(rec), [])
    claims = claimsmod.evaluate(study, tbls, rec)
    found = _attempt(errors, "The findings", lambda: findings_of(study, rec, results, tbls), None)
    text = None if found is None else _attempt(errors, "The verdict",
                                               lambda: verdictmod.write(rec, tbls, found, claims, disturbance), None)
    if text is None:
        text = f"No verdict: {escape(errors[-1])}."
    return Analysis(rec=rec, study=study, tables=tbls, results=results, verdict=text, claims=claims,
                    disturbance=disturbance, errors=errors)


def findings_of(study: ModuleType | None, rec: RunRecord, results: pd.DataFrame,
                tbls: dict[str, pd.DataFrame]) -> list:
    """The study's findings (its ``findings(tables)`` hook), else every derived row of its
    tables, else the fastest checked variant (a fact: its median and CI) and the engine's
    ratio of it to the next (which says whether the run sets them apart)."""
    hook = getattr(study, "findings", None)
    if hook is not None and tbls:
        return list(hook(tbls))
    found = verdictmod.generic_findings(tbls)
    if found or results.empty:
        return found
    valid = results[results["correct"].astype(bool) & (results["samples"] > 0)].sort_values("median_ns")
    if valid.empty:
        return []
    best = valid.iloc[0]
    out = [verdictmod.Finding("fastest", text=f"Fastest of {len(valid)} checked variant(s): {escape(best['variant'])} "
                              f"at {stats.fmt_ns(best['median_ns'])} (95% CI {stats.fmt_ns(best['ci_lo_ns'])} to "
                              f"{stats.fmt_ns(best['ci_hi_ns'])})")]
    if len(valid) > 1:
        second = valid.iloc[1]["variant"]
        ev = engine.Evidence(rec)
        if best["variant"] in ev and second in ev:
            label = f"{best['variant']} (the fastest) over {second} (the next)"
            out.append(verdictmod.Finding(label, ev.ratio(second, best["variant"], label)))
    return out


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
