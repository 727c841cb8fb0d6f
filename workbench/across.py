"""The run-to-run level: claims, targets and derived numbers judged across runs.

A CI of one run covers that run (its samples, its drift between blocks); two runs of one
configuration minutes apart differ by more (issue 30: the same mc2 split gained 22.4%
[21.6, 26.4] and 12.9% [12.4, 16.2] in two runs). Where several runs of one configuration
exist (``python -m workbench run ... --repeat-runs N``: fresh processes, one run group; or
committed bundles of one machine kind), this module states each run's figure and the
interval across runs (:func:`workbench.stats.across_runs`: a two-level bootstrap, runs then
each run's own replicates, with a t(k-1) interval), and evaluates the study's claims on the
across-run figures.

A run's replicates of a derived number are drawn from its CI (normal on the number's scale,
on the log scale for a ratio): the derived table keeps the CI, not the bootstrap, and the
CI is what the run states. A study with the raw replicates at hand (mc2-split's gains) passes
them to :func:`workbench.stats.across_runs` directly.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from . import claims, derived, stats
from .analysis import Analysis
from .catalog import upgraded
from .record import RunRecord, machine_label
from .tables import md_table

#: the columns a table must have for its rows to be derived quantities (and replaced across runs)
DERIVED_FORM = ("name", "point", "lo", "hi", "status")
_Z = 1.959963984540054  # the normal 97.5% quantile: a 95% CI spans +-_Z standard errors


def group_key(rec: RunRecord) -> tuple:
    """What makes runs one configuration here: the study, its parameters and the machine kind
    (a run group of ``--repeat-runs``, or committed bundles of one machine, share it); renamed
    parameters under their new names, so an older run joins the newer ones."""
    return (rec.study, json.dumps(upgraded(rec.study, rec.params), sort_keys=True, default=str),
            machine_label(rec.env or {}))


def groups(records: Sequence[RunRecord], min_runs: int = 2) -> list[list[RunRecord]]:
    """The records grouped by :func:`group_key`, oldest first, groups of ``min_runs`` or more."""
    by: dict[tuple, list] = {}
    for r in records:
        by.setdefault(group_key(r), []).append(r)
    return [sorted(g, key=lambda r: r.created_utc or r.run_id) for g in by.values() if len(g) >= min_runs]


def replicates(d: derived.Derived, size: int = derived.RESAMPLES, seed: int = 0) -> np.ndarray | None:
    """Draws of a run's derived number from its CI (normal on its scale; log scale for a
    ratio), or None where it has no finite CI."""
    if not all(math.isfinite(x) for x in (d.point, d.lo, d.hi)):
        return None
    rng = np.random.default_rng(seed)
    if d.unit == "x" and d.point > 0 and d.lo > 0 and d.hi > 0:
        sd = (math.log(d.hi) - math.log(d.lo)) / (2 * _Z)
        return d.point * np.exp(rng.normal(0.0, sd, size))
    return d.point + rng.normal(0.0, (d.hi - d.lo) / (2 * _Z), size)


def across(items: Sequence[derived.Derived], name: str | None = None, seed: int = 0) -> tuple[derived.Derived, str]:
    """One derived number across runs (one item per run): its mean over runs with the CI
    across runs, classified as any derived number (``covers`` = runs; the one rule: fewer than
    5 runs is never clear), and each run's figure as text."""
    first = items[0]
    name = name or first.name
    per_run = "; ".join(derived.fmt_derived(d, status=False) for d in items)
    usable = [(d, replicates(d, seed=seed + i)) for i, d in enumerate(items)]
    usable = [(d, r) for d, r in usable if r is not None]
    if len(usable) < 2:
        return derived.not_meaningful(name, f"fewer than 2 runs with a CI ({len(usable)})", first.unit,
                                      first.null), per_run
    mean, lo, hi = stats.across_runs([d.point for d, _ in usable], [r for _, r in usable], seed=seed)
    k = len(usable)
    return derived.classify(name, mean, lo, hi, first.unit, first.null, k, k, False, covers=derived.RUNS), per_run


def _derived_rows(a: Analysis) -> dict[str, dict]:
    """Every derived-form row of an analysis' tables, by name (the first table that has it)."""
    out: dict[str, dict] = {}
    for table, df in a.tables.items():
        if table.startswith("_") or df is None or not len(df) or not set(DERIVED_FORM) <= set(df.columns):
            continue
        for row in df.to_dict("records"):
            out.setdefault(str(row["name"]), row)
    return out


def derived_across(analyses: Sequence[Analysis]) -> pd.DataFrame:
    """Every derived number that all the runs have: each run's figure and the interval across
    runs (derived form, ``covers`` = runs, ``runs`` and ``per_run`` columns)."""
    rows_by_run = [_derived_rows(a) for a in analyses]
    names = [n for n in rows_by_run[0] if all(n in r for r in rows_by_run[1:])] if rows_by_run else []
    out = []
    for i, name in enumerate(names):
        d, per_run = across([derived.item(r[name]) for r in rows_by_run], seed=i)
        out.append(d.row(runs=len(analyses), per_run=per_run))
    return derived.derived_table(out)


def tables_across(analyses: Sequence[Analysis]) -> dict[str, pd.DataFrame]:
    """The first run's tables with every derived-form row replaced by its across-run figure
    (rows the other runs lack are dropped): what the claims are evaluated on across runs."""
    acr = derived_across(analyses).set_index("name") if analyses else pd.DataFrame()
    out: dict[str, pd.DataFrame] = {}
    for table, df in analyses[0].tables.items():
        if table.startswith("_") or df is None or not len(df) or not set(DERIVED_FORM) <= set(df.columns):
            out[table] = df
            continue
        keep = df[df["name"].isin(acr.index)].copy()
        for col in derived.COLUMNS[1:]:
            if col in acr.columns:
                keep[col] = keep["name"].map(acr[col])
        out[table] = keep.reset_index(drop=True)
    return out


def claims_across(analyses: Sequence[Analysis]) -> pd.DataFrame:
    """The study's claims evaluated on the across-run figures (:func:`tables_across`)."""
    first = analyses[0]
    return claims.evaluate(first.study, tables_across(analyses), first.rec)


def summary(analyses: Sequence[Analysis]) -> dict[str, Any]:
    """The run-to-run view of a group: its runs, the derived numbers across runs, the claims
    evaluated across runs (plain data; :func:`markdown` prints it)."""
    return {"runs": [a.rec.run_id for a in analyses], "derived": derived_across(analyses),
            "claims": claims_across(analyses) if analyses and analyses[0].study is not None else pd.DataFrame()}


def markdown(s: dict[str, Any]) -> str:
    """The run-to-run view as Markdown: claims across runs, then the derived numbers."""
    runs = s["runs"]
    parts = [f"## Across {len(runs)} runs of one configuration\n\nRuns: " + ", ".join(f"`{r}`" for r in runs)
             + ". Each figure is the mean over runs with its 95% CI across runs (two-level bootstrap: runs, then "
               "each run's own CI; t interval with runs - 1 degrees of freedom). Fewer than "
             + f"{derived.MIN_SAMPLES} runs: nothing is clear."]
    if len(s["claims"]):
        parts.append("### The seed's claims across runs\n\n" + md_table(claims.display(s["claims"])[
            ["claim", "here", "live figure (95% CI)", "why"]]))
    d = s["derived"]
    if len(d):
        shown = pd.DataFrame({"quantity": d["name"], "across runs (95% CI)": [derived.fmt_derived(r) for r in
                                                                             d.to_dict("records")],
                              "each run": d["per_run"]})
        parts.append("### Derived numbers across runs\n\n" + md_table(shown))
    return "\n\n".join(parts)
