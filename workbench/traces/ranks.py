"""Many ranks as one trace: one file per rank merged into one span table, clocks aligned.

A multi-GPU run writes one trace per rank (Kineto, nsys, rocpd). :func:`merge` stacks them
with a ``rank`` column, prefixes lanes and processes with the rank (``"rank 1 · GPU 1
stream 7"``, ranks in order, each rank's lanes in their own order) and shifts each rank's
clock so that the ranks line up:

- ``"collective"``: the *end* of each rank's first collective kernel (NCCL/RCCL, or spans
  matching ``marker``) is put at rank 0's. A collective ends on every rank at nearly the same
  moment, since none can finish before the last rank joins; its start differs by how long
  each rank waited, which is what :func:`collective_skew` measures afterwards.
- ``"base"``: the times as the files report them on a wall clock (Kineto's
  ``baseTimeNanoseconds + ts``). Good to the hosts' clock agreement (NTP: often milliseconds).
- ``"none"``: the times as recorded, whatever their clock.
- ``"auto"``: ``"collective"`` when every rank has one, else ``"base"`` when every rank
  reports a wall clock, else the ranks' first events are put together, and ``meta["alignment"]``
  says that the relative timing of the ranks is then unknown.

Per-rank statistics: :func:`rank_summary` (the GPU-time breakdown per rank, step medians
with CIs), :func:`collective_skew` (per collective call, the arrival spread and the
last rank to arrive), :func:`slowest` (the rank that keeps the others waiting, and the skew),
:func:`rank_name_stats` (per span name, the median per rank and the spread).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..evidence import stats
from ..base.untrusted import PatternError, user_regex
from . import load
from .analysis import DROP_REASONS, STEP_NAMES, dropped_events, search_mask
from .model import concat, end_ns, spans
from .overlap import breakdown

#: GPU kernels of collective libraries (NCCL, RCCL, and the names torch and rocprof give them)
COLLECTIVE = r"(?i)nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|sendrecv"
#: categories searched first for a collective (device-side work; host-side calls only as fallback)
_DEVICE_CATEGORIES = ("kernel", "gpu_user_annotation")
ALIGNMENTS = ("auto", "collective", "base", "none")


class RankError(ValueError):
    """Traces that cannot be merged as asked (the message says why, in one line)."""


def rank_of(meta: Mapping[str, Any]) -> int | None:
    """The rank a trace says it is (Kineto ``distributedInfo.rank``, or ``meta["rank"]``)."""
    info = meta.get("distributedInfo")
    for v in ((info or {}).get("rank") if isinstance(info, Mapping) else None, meta.get("rank")):
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0:
            return int(v)
    return None


def first_collective(df: pd.DataFrame, marker: str | None = None) -> pd.Series | None:
    """The first span (by start) that is a collective (or matches ``marker``), preferring
    device-side kernels over host-side calls; None when there is none."""
    s = spans(df)
    hit = search_mask(_aligned_on(marker), s["name"])
    if not hit.any():
        return None
    found = s[hit]
    dev = found[found["category"].astype(str).isin(_DEVICE_CATEGORIES)]
    pick = dev if len(dev) and marker is None else found
    return pick.loc[pick["start_ns"].idxmin()]


def _aligned_on(marker: str | None):
    """The spans to align on, compiled: ``marker`` (a user's regex, matched in linear time by
    :func:`workbench.base.untrusted.user_regex`), else :data:`COLLECTIVE`."""
    try:
        return user_regex(marker or COLLECTIVE, "--marker")
    except PatternError as exc:
        raise RankError(str(exc)) from None


def _short(name: str) -> str:
    """A kernel name without its argument list, at most 60 characters."""
    return name.split("(", 1)[0][:60] or name[:60]


def _wall_clock(meta: Mapping[str, Any]) -> bool:
    return bool(meta.get("base_time_ns")) or "wall" in str(meta.get("clock", "")).lower()


def _offsets(tables: list[pd.DataFrame], metas: list[Mapping], align: str, marker: str | None
             ) -> tuple[list[int], str, list[str | None]]:
    """Per-rank clock shifts (ns to add), the alignment used, and each rank's marker span."""
    if align not in ALIGNMENTS:
        raise RankError(f"unknown alignment '{align}' (use one of {', '.join(ALIGNMENTS)})")
    marks = [first_collective(t, marker) for t in tables]
    if align in ("auto", "collective") and all(m is not None for m in marks):
        ends = [int(m["start_ns"] + m["dur_ns"]) for m in marks]
        names = [_short(str(m["name"])) for m in marks]
        same = len(set(names)) == 1
        how = (f"end of each rank's first {'marker' if marker else 'collective'} ({names[0]})" if same else
               f"end of each rank's first collective (names differ: {', '.join(sorted(set(names)))})")
        return [ends[0] - e for e in ends], how, names
    if align == "collective":
        missing = [i for i, m in enumerate(marks) if m is None]
        raise RankError(f"no {'span matching ' + repr(marker) if marker else 'collective kernel'} in the trace of "
                        f"rank(s) {', '.join(map(str, missing))}: align by 'base' or 'none' instead")
    if align in ("auto", "base") and all(_wall_clock(m) for m in metas):
        return [0] * len(tables), "wall-clock times as reported (base times); good to the hosts' clock agreement", [None] * len(tables)
    if align == "base":
        raise RankError("not every trace reports a wall-clock base time: align by 'collective' or 'none' instead")
    if align == "none":
        return [0] * len(tables), "none: times as recorded by each file", [None] * len(tables)
    starts = [int(t["start_ns"].min()) for t in tables]
    return ([starts[0] - s for s in starts],
            "first events put together (no common collective, no wall clock): the ranks' relative timing is unknown",
            [None] * len(tables))


def merge(traces: Sequence[pd.DataFrame | tuple[pd.DataFrame, Mapping[str, Any]]], align: str = "auto",
          ranks: Sequence[int] | None = None, marker: str | None = None,
          names: Sequence[str] | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One span table of several ranks' traces, clocks aligned (see the module docstring).

    ``traces``: span tables, or ``(spans, meta)`` pairs as :func:`workbench.traces.load`
    returns them. Ranks come from ``ranks``, else from each meta (:func:`rank_of`), else
    the order given. ``marker``: a regular expression naming the spans to align on instead
    of collectives. ``names``: what to call each input in ``meta["ranks"]`` (file names).
    Returns ``(spans, meta)``; ``meta["ranks"]`` lists per rank its file, format, the clock
    shift applied (``offset_ns``), the marker span and dropped events; ``meta["alignment"]``
    says how the clocks were aligned. Raises :class:`RankError` when ``align`` cannot be
    honoured or two inputs claim one rank.
    """
    pairs = [t if isinstance(t, tuple) else (t, {}) for t in traces]
    if not pairs:
        raise RankError("no traces to merge")
    tables = [p[0] for p in pairs]
    metas = [dict(p[1]) for p in pairs]
    if ranks is None:
        said = [rank_of(m) for m in metas]
        ranks = said if None not in said and len(set(said)) == len(said) else list(range(len(pairs)))
    ranks = [int(r) for r in ranks]
    if len(set(ranks)) != len(ranks):
        raise RankError(f"two traces claim the same rank ({ranks}); give the ranks explicitly")
    order = np.argsort(ranks, kind="stable")
    tables = [tables[i] for i in order]
    metas = [metas[i] for i in order]
    labels = [(list(names)[i] if names else metas[i].get("path", f"trace {i}")) for i in order]
    ranks = [ranks[i] for i in order]
    shifts, how, marks = _offsets(tables, metas, align, marker)
    parts = []
    for rank, shift, t in zip(ranks, shifts, tables):
        parts.append(_relabel(t, rank, shift))
    df = concat(parts)
    formats = list(dict.fromkeys(str(m.get("format", "?")) for m in metas))
    per_rank = [{"rank": rank, "file": str(label), "format": meta.get("format"), "offset_ns": int(shift),
                 "marker": mark, "dropped": dropped_events(meta)}
                for rank, shift, mark, label, meta in zip(ranks, shifts, marks, labels, metas)]
    meta = {"format": formats[0] if len(formats) == 1 else "mixed (" + ", ".join(formats) + ")",
            "clock": f"rank {ranks[0]}'s clock ({metas[0].get('clock', 'unknown')})", "alignment": how,
            "ranks": per_rank}
    for key in DROP_REASONS:  # the importers' counts, summed over the ranks
        meta[key] = sum(int(m.get(key) or 0) for m in metas)
    return df, meta


def _relabel(t: pd.DataFrame, rank: int, shift: int) -> pd.DataFrame:
    """One rank's table with its rank, shifted clock and rank-prefixed lanes/processes."""
    prefix = f"rank {rank} · "
    out = t.copy(deep=False)
    out["start_ns"] = t["start_ns"].to_numpy() + shift
    out["rank"] = pd.array(np.full(len(t), rank), dtype="Int32")
    out["track"] = t["track"].cat.rename_categories([prefix + str(c) for c in t["track"].cat.categories])
    proc = t["process"].astype("object").fillna("").astype(str).str.strip()
    out["process"] = pd.Categorical((prefix + proc).str.removesuffix(" · ").to_numpy())
    return out


def load_ranks(paths: Sequence[str], align: str = "auto", marker: str | None = None, args: bool = True
               ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`merge` of trace files (raises ``TraceError`` for an unreadable one); ``args`` as
    :func:`workbench.traces.load` takes it."""
    loaded = [load(p, args=args) for p in paths]
    return merge(loaded, align=align, marker=marker, names=[Path(p).name for p in paths])


def is_multi_rank(df: pd.DataFrame) -> bool:
    """Whether the table holds more than one rank."""
    return df["rank"].nunique(dropna=True) > 1


def rank_summary(df: pd.DataFrame, comm: str | None = None) -> pd.DataFrame:
    """Per rank: spans, wall time, the GPU-time breakdown over the rank's devices
    (:func:`workbench.traces.overlap.breakdown`: busy, computation and communication as
    unions of intervals, the share of communication hidden under computation, idle share)
    and the median step time with its 95% CI where the trace has steps (``ProfilerStep#N``).

    Columns: ``rank, spans, wall_us, gpu_busy_us, computation_us, communication_us,
    overlap_pct, idle_pct, steps, step_median_us, step_ci_lo_us, step_ci_hi_us``.
    """
    cols = ["rank", "spans", "wall_us", "gpu_busy_us", "computation_us", "communication_us", "overlap_pct",
            "idle_pct", "steps", "step_median_us", "step_ci_lo_us", "step_ci_hi_us"]
    gpu = breakdown(df, comm, per_device=False)
    gpu = gpu[gpu["rank"].notna()].set_index(gpu["rank"].astype(int)) if len(gpu) else gpu
    rows = []
    s = spans(df)
    for rank, g in s.groupby("rank", observed=True, sort=True):
        name = g["name"].astype(str)
        steps = g[(g["category"].astype(str) == "user_annotation") & name.str.match(STEP_NAMES)]["dur_ns"].to_numpy()
        lo, hi = stats.median_ci(steps) if len(steps) else (np.nan, np.nan)
        b = gpu.loc[int(rank)] if int(rank) in gpu.index else None
        rows.append({"rank": int(rank), "spans": len(g), "wall_us": (int(end_ns(g).max()) - int(g["start_ns"].min())) / 1e3,
                     "gpu_busy_us": b["busy_us"] if b is not None else 0.0,
                     "computation_us": b["computation_us"] if b is not None else 0.0,
                     "communication_us": b["communication_us"] if b is not None else 0.0,
                     "overlap_pct": b["overlap_pct"] if b is not None else np.nan,
                     "idle_pct": b["idle_pct"] if b is not None else np.nan,
                     "steps": len(steps), "step_median_us": float(np.median(steps)) / 1e3 if len(steps) else np.nan,
                     "step_ci_lo_us": lo / 1e3, "step_ci_hi_us": hi / 1e3})
    return pd.DataFrame(rows, columns=cols)


def collective_skew(df: pd.DataFrame, marker: str | None = None) -> pd.DataFrame:
    """Per collective call (the k-th collective kernel of each name on every rank): when
    the ranks arrived (kernel start) and left (kernel end).

    Columns: ``name, call, ranks, arrival_skew_us`` (last arrival minus first),
    ``last_rank`` (the rank the others waited for; NA when several arrived together),
    ``first_rank``, ``end_spread_us`` (how
    far apart the ends are: near 0 when the clocks are aligned well). Only calls that every
    rank of the table made are listed.
    """
    s = spans(df)
    s = s[s["category"].astype(str).isin(_DEVICE_CATEGORIES[:1]) & search_mask(_aligned_on(marker), s["name"])
          & s["rank"].notna()]
    cols = ["name", "call", "ranks", "arrival_skew_us", "last_rank", "first_rank", "end_spread_us"]
    if s.empty:
        return pd.DataFrame(columns=cols)
    s = s.sort_values("start_ns", kind="stable").assign(name_s=lambda x: x["name"].astype(str))
    s["call"] = s.groupby(["rank", "name_s"], observed=True).cumcount()
    n_ranks = df["rank"].nunique(dropna=True)
    s["end"] = end_ns(s)
    out = []
    for (name, call), g in s.groupby(["name_s", "call"], sort=False):
        if g["rank"].nunique() < n_ranks:
            continue
        st = g["start_ns"].to_numpy()
        en = g["end"].to_numpy()
        rk = g["rank"].to_numpy(dtype=np.int64)
        tie = (st == st.max()).sum() > 1  # nobody arrived last: no rank to blame
        out.append({"name": name, "call": int(call), "ranks": len(g), "arrival_skew_us": (st.max() - st.min()) / 1e3,
                    "last_rank": None if tie else int(rk[st.argmax()]), "first_rank": int(rk[st.argmin()]),
                    "end_spread_us": (en.max() - en.min()) / 1e3})
    out = pd.DataFrame(out, columns=cols)
    out["last_rank"] = out["last_rank"].astype("Int32")
    return out


def slowest(df: pd.DataFrame, marker: str | None = None) -> dict[str, Any]:
    """Which rank keeps the others waiting, and by how much.

    With collectives: the rank that arrives last most often, the median arrival skew with
    its 95% CI, and how many calls that rank was last at. Without: the rank with the longest
    median step (or, without steps, the most GPU compute time), and the spread of that
    figure over ranks (max minus min; its CI would need repeated runs). Keys: ``rank``,
    ``by`` (what decided it), ``calls``, ``last_at``, ``skew_us``, ``skew_ci_us``, ``text``.
    """
    sk = collective_skew(df, marker)
    if len(sk) and sk["last_rank"].isna().all():
        return {"rank": None, "by": "last to arrive at collectives", "calls": len(sk), "last_at": 0,
                "skew_us": 0.0, "skew_ci_us": [0.0, 0.0],
                "text": f"no slowest rank: the ranks arrived together at all {len(sk)} collective calls"}
    if len(sk):
        counts = sk["last_rank"].value_counts()
        rank = int(counts.index[0])
        med = float(sk["arrival_skew_us"].median())
        lo, hi = stats.median_ci(sk["arrival_skew_us"].to_numpy())
        return {"rank": rank, "by": "last to arrive at collectives", "calls": len(sk), "last_at": int(counts.iloc[0]),
                "skew_us": med, "skew_ci_us": [lo, hi],
                "text": (f"slowest rank: {rank} (last to arrive at {int(counts.iloc[0])} of {len(sk)} collective "
                         f"calls); arrival skew median {med:,.1f} us [95% CI {lo:,.1f}, {hi:,.1f}]")}
    summ = rank_summary(df)
    if summ.empty:
        return {"rank": None, "by": None, "text": "no spans with a rank"}
    col, by = (("step_median_us", "longest median step") if summ["steps"].gt(0).all()
               else ("computation_us", "most GPU computation time") if summ["computation_us"].gt(0).any()
               else ("wall_us", "longest wall time"))
    i = int(summ[col].idxmax())
    spread = float(summ[col].max() - summ[col].min())
    rank = int(summ.loc[i, "rank"])
    return {"rank": rank, "by": by, "skew_us": spread, "skew_ci_us": None,
            "text": (f"slowest rank: {rank} ({by}: {summ.loc[i, col]:,.1f} us); spread over ranks {spread:,.1f} us "
                     "(one trace per rank: no CI)")}


def rank_name_stats(df: pd.DataFrame, top: int = 20) -> pd.DataFrame:
    """Per span name (the ``top`` by total time): the median duration on each rank, the
    slowest rank for it and the spread (max minus min of the rank medians).

    Columns: ``name, category, median_us_rank<R>...``, ``slowest_rank, spread_us, spread_pct``
    (spread over the median of the rank medians).
    """
    s = spans(df)
    s = s[s["rank"].notna()]
    key = pd.DataFrame({"category": s["category"].astype(str), "name": s["name"].astype(str),
                        "rank": s["rank"].astype(int), "dur_us": s["dur_ns"] / 1e3})
    tot = key.groupby(["category", "name"])["dur_us"].sum().nlargest(top)
    med = key.groupby(["category", "name", "rank"])["dur_us"].median().unstack("rank").reindex(tot.index)
    out = med.rename(columns=lambda r: f"median_us_rank{r}")
    out["slowest_rank"] = med.idxmax(axis=1).astype("Int32") if len(med) else pd.Series(dtype="Int32")
    out["spread_us"] = med.max(axis=1) - med.min(axis=1)
    out["spread_pct"] = 100 * out["spread_us"] / med.median(axis=1)
    out.columns.name = None
    return out.reset_index()[["name", "category"] + list(out.columns)]
