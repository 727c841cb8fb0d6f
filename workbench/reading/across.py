"""The run-to-run level: claims, targets and derived numbers judged across runs, hosts the units.

A CI of one run covers that run (its samples, its drift between blocks); two runs of one
configuration minutes apart differ by more (issue 30: the same mc2 split gained 22.4%
[21.6, 26.4] and 12.9% [12.4, 16.2] in two runs). Where several runs of one configuration
exist (``python -m workbench run ... --repeat-runs N``: fresh processes, one run group; or
committed bundles of one machine kind), this module states each run's figure and the
interval across them:

- runs of **one host** (one machine fingerprint) are the units: the mean over runs with a
  two-level bootstrap (runs, then each run's own replicates) and a t(k-1) interval
  (:func:`workbench.evidence.stats.across_runs`; ``covers`` = runs);
- runs of **several hosts**: the hosts are the units (:func:`workbench.evidence.stats.across_hosts`:
  each host's runs averaged, then a t interval over hosts; ``covers`` = hosts), since runs of
  one host share its machine and pooled as exchangeable they make the interval too narrow;
  each host's own figure is listed beside it, and every row says how many hosts it spans.

No figure here is a best-of-N: a row is one configuration's, never the best of several
picked after measuring them (whose CI would not cover what it claims). The one rule holds:
fewer than 5 units (runs, or hosts) is never clear; a run measured under load makes the
across-run figure inconclusive too.

A run's replicates of a derived number are drawn from its CI (normal on the number's scale,
on the log scale for a ratio): the derived table keeps the CI, not its draws, and the CI is
what the run states. A study with the raw replicates at hand (mc2-split's gains) passes
them to :func:`workbench.evidence.stats.across_runs` directly.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..evidence import claims, derived, engine, stats
from .analysis import Analysis
from ..results.catalog import upgraded
from ..data.record import RunRecord, machine_label
from ..evidence.tables import md_table

#: the columns a table must have for its rows to be derived quantities (and replaced across runs)
DERIVED_FORM = ("name", "point", "lo", "hi", "status")
_Z = 1.959963984540054  # the normal 97.5% quantile: a 95% CI spans +-_Z standard errors


def group_key(rec: RunRecord) -> tuple:
    """What makes runs one configuration here: the study, its parameters and the machine kind
    (a run group of ``--repeat-runs``, or committed bundles of one machine, share it); renamed
    parameters under their new names, so an older run joins the newer ones. Hosts of one kind
    stay apart inside a group (:func:`host_of`)."""
    return (rec.study, json.dumps(upgraded(rec.study, rec.params), sort_keys=True, default=str),
            machine_label(rec.env or {}))


#: host names that name no machine: lent VMs all call themselves ``vm`` (their runs on different
#: days ran on different machines of one kind), containers ``localhost``
GENERIC_HOSTNAMES = ("", "vm", "localhost", "localhost.localdomain")


def host_of(rec: RunRecord) -> str:
    """The host a run ran on, as people read it: its machine kind and the start of its
    fingerprint ("4x NVIDIA H200 #b13ad3"; the fingerprint hashes the hardware and software, so
    it tells machines of one kind apart only where they differ), with the host name where it
    names one, else the day (a lent VM: runs of one kind on different days are different hosts)."""
    env = rec.env if isinstance(rec.env, dict) else {}
    fp, name = str(env.get("fingerprint") or ""), str(env.get("hostname") or "")
    where = name if name.lower() not in GENERIC_HOSTNAMES else str(rec.created_utc or "")[:10]
    return machine_label(env) + (f" #{fp[:6]}" if fp else "") + (f", {where}" if where else "")


def groups(records: Sequence[RunRecord], min_runs: int = 2) -> list[list[RunRecord]]:
    """The records grouped by :func:`group_key`, oldest first, groups of ``min_runs`` or more."""
    by: dict[tuple, list] = {}
    for r in records:
        by.setdefault(group_key(r), []).append(r)
    return [sorted(g, key=lambda r: r.created_utc or r.run_id) for g in by.values() if len(g) >= min_runs]


def replicates(d: derived.Derived, size: int = engine.DRAWS, seed: int = 0) -> np.ndarray | None:
    """Draws of a run's derived number from its CI (normal on its scale; log scale for a
    ratio), or None where it has no finite CI."""
    if not all(math.isfinite(x) for x in (d.point, d.lo, d.hi)):
        return None
    rng = np.random.default_rng(seed)
    if d.unit == "x" and d.point > 0 and d.lo > 0 and d.hi > 0:
        sd = (math.log(d.hi) - math.log(d.lo)) / (2 * _Z)
        return d.point * np.exp(rng.normal(0.0, sd, size))
    return d.point + rng.normal(0.0, (d.hi - d.lo) / (2 * _Z), size)


def _loaded(items: Sequence[derived.Derived]) -> str:
    n = sum("under load" in d.caveat for d in items)
    return f"{n} of {len(items)} runs measured under load" if n else ""


def _one_host(name: str, items: Sequence[derived.Derived], seed: int,
              draws: Sequence[np.ndarray | None] | None = None) -> derived.Derived:
    first = items[0]
    draws = draws if draws is not None else [None] * len(items)
    usable = [(d, r) for d, r in ((d, r if r is not None else replicates(d, seed=seed + i))
                                  for i, (d, r) in enumerate(zip(items, draws))) if r is not None]
    if len(usable) < 2:
        return engine.not_meaningful(name, f"fewer than 2 runs with a CI ({len(usable)})", first.unit, first.null)
    mean, lo, hi = stats.across_runs([d.point for d, _ in usable], [r for _, r in usable], seed=seed)
    k = len(usable)
    return engine.judge(name, mean, lo, hi, unit=first.unit, null=first.null, n_a=k, n_b=k, paired=False,
                        covers=derived.RUNS, caveats=[_loaded(items)])


def _many_hosts(name: str, items: Sequence[derived.Derived], hosts: Sequence[str]) -> derived.Derived:
    first = items[0]
    usable = [(d, h) for d, h in zip(items, hosts) if math.isfinite(d.point)]
    mean, lo, hi, h = stats.across_hosts([d.point for d, _ in usable], [h for _, h in usable])
    if h < 2:
        return engine.not_meaningful(name, "fewer than 2 hosts with a figure", first.unit, first.null)
    return engine.judge(name, mean, lo, hi, unit=first.unit, null=first.null, n_a=h, n_b=h, paired=False,
                        covers=derived.HOSTS, caveats=[_loaded(items)])


def across(items: Sequence[derived.Derived], name: str | None = None, seed: int = 0,
           hosts: Sequence[str] | None = None) -> tuple[derived.Derived, str]:
    """One derived number across runs (one item per run, ``hosts`` the host of each): the
    figure a claim is judged on (runs the units on one host, hosts the units on several) and
    each run's figure as text."""
    name = name or items[0].name
    hosts = list(hosts) if hosts is not None else ["one host"] * len(items)
    per_run = "; ".join(derived.fmt_derived(d, status=False) for d in items)
    if len(set(hosts)) > 1:
        return _many_hosts(name, items, hosts), per_run
    return _one_host(name, items, seed), per_run


def by_host(items: Sequence[derived.Derived], hosts: Sequence[str], name: str | None = None, seed: int = 0,
            draws: Sequence[np.ndarray | None] | None = None) -> list[tuple[str, derived.Derived]]:
    """Each host's figure across its own runs (runs the units; a host with one run: that run's
    figure), then, with several hosts, the figure across hosts (hosts the units): ``[(host,
    row)]``. ``draws``: each run's own replicates of its figure where the study has them
    (else they are drawn from its CI)."""
    name = name or items[0].name
    draws = list(draws) if draws is not None else [None] * len(items)
    out = []
    for i, h in enumerate(dict.fromkeys(hosts)):
        mine = [k for k, hh in enumerate(hosts) if hh == h]
        row = (_one_host(name, [items[k] for k in mine], seed + 100 * i, [draws[k] for k in mine]) if len(mine) > 1
               else items[mine[0]])
        out.append((h, row))
    if len(out) > 1:
        out.append((f"all {len(out)} hosts", _many_hosts(name, items, hosts)))
    return out


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
    runs (derived form; ``covers`` runs on one host, hosts on several; ``runs``, ``hosts`` and
    ``per_run`` columns)."""
    rows_by_run = [_derived_rows(a) for a in analyses]
    hosts = [host_of(a.rec) for a in analyses]
    names = [n for n in rows_by_run[0] if all(n in r for r in rows_by_run[1:])] if rows_by_run else []
    out = []
    for i, name in enumerate(names):
        d, per_run = across([derived.item(r[name]) for r in rows_by_run], seed=i, hosts=hosts)
        out.append(d.row(runs=len(analyses), hosts=len(set(hosts)), per_run=per_run))
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
    return {"runs": [a.rec.run_id for a in analyses], "hosts": len({host_of(a.rec) for a in analyses}),
            "derived": derived_across(analyses),
            "claims": claims_across(analyses) if analyses and analyses[0].study is not None else pd.DataFrame()}


def markdown(s: dict[str, Any]) -> str:
    """The run-to-run view as Markdown: claims across runs, then the derived numbers."""
    runs = s["runs"]
    hosts = s.get("hosts", 1)
    units = ("Each figure is the mean over runs with its 95% CI across runs (two-level bootstrap: runs, then each "
             "run's own CI; t interval with runs - 1 degrees of freedom)" if hosts <= 1 else
             f"The runs span {hosts} hosts: each figure is the mean over hosts with its 95% CI across hosts (each "
             "host's runs averaged; t interval with hosts - 1 degrees of freedom)")
    parts = [f"## Across {len(runs)} runs of one configuration\n\nRuns: " + ", ".join(f"`{r}`" for r in runs)
             + f". {units}. Fewer than {derived.MIN_SAMPLES} units: nothing is clear."]
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
