"""GPU idle time by cause, per stream: why a stream waited between two pieces of GPU work.

A stream is idle from the end of its work so far (the latest end of its earlier kernels,
copies and memsets) to the start of its next one. Each such gap is put down to one cause,
as Holistic Trace Analysis's ``get_idle_time_breakdown`` does:

- **host wait**: the runtime call that launched the next work (the call with its correlation
  id, on the same rank) started after the stream went idle: the host had not yet asked for
  more work, so the GPU waited on the CPU;
- **kernel wait**: the gap is shorter than ``kernel_wait_us`` (HTA's ``consecutive_kernel_delay``,
  30 in its microsecond times): the launch overhead of back-to-back kernels;
- **other**: the rest, e.g. a kernel waiting on an event from another stream (a collective,
  a copy).

Where the definitions differ: HTA measures each gap from the previous piece of work's end,
not from the latest end so far, so when two pieces of one stream overlap (profiler timestamps
of back-to-back kernels do, by a few ns to a few us) HTA's gap is negative, and it adds these
negative "gaps" to kernel wait. Here a stream is never idle while any of its work runs, so
its gaps add up to its idle time (:func:`workbench.traces.analysis.track_summary`'s idle time
of the lane); on the public Kineto traces HTA's host-wait and other figures are equal to
these, and its kernel wait is this one minus the overlaps (``tests/traces/test_hta_parity.py``).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from .overlap import RUNTIME_CATEGORIES, TYPES, _labels, classify

#: causes of idle time, in HTA's order (its names: host_wait, kernel_wait, other)
CAUSES = ("host wait", "kernel wait", "other")
#: gaps shorter than this are launch overhead (HTA's default consecutive_kernel_delay)
KERNEL_WAIT_US = 30.0


def gaps(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
         kernel_wait_us: float = KERNEL_WAIT_US) -> pd.DataFrame:
    """Every idle gap of every GPU stream: columns ``rank, device, stream, start_us`` (when
    the stream went idle, from the trace's first start), ``gap_us``, ``cause`` (one of
    :data:`CAUSES`) and ``next`` (the name of the work that ended the gap), in stream order
    then time. ``comm`` and ``roles`` classify the work as the breakdown does (the stream's
    type in :func:`breakdown`)."""
    cols = ["rank", "device", "stream", "start_us", "gap_us", "cause", "next"]
    types = classify(df, comm, roles)
    work = ~pd.isna(types) & df["stream"].notna().to_numpy()
    w = df.loc[work, ["rank", "device", "stream", "name", "start_ns", "dur_ns", "correlation"]]
    if w.empty:
        return pd.DataFrame(columns=cols)
    origin = int(df["start_ns"].min())
    rank = w["rank"].to_numpy(dtype=np.int64, na_value=-1)
    dev = w["device"].to_numpy(dtype=np.int64, na_value=-1)
    strm = w["stream"].to_numpy(dtype=np.int64, na_value=-1)
    st = w["start_ns"].to_numpy()
    en = st + w["dur_ns"].to_numpy()
    order = np.lexsort((st, strm, dev, rank))
    rank, dev, strm, st, en = rank[order], dev[order], strm[order], st[order], en[order]
    first = np.ones(len(st), dtype=bool)
    first[1:] = (rank[1:] != rank[:-1]) | (dev[1:] != dev[:-1]) | (strm[1:] != strm[:-1])
    # the latest end so far on the stream, before each piece of work
    run_end = pd.Series(en).groupby(np.cumsum(first)).cummax().to_numpy()
    prev_end = np.r_[0, run_end[:-1]]
    gap = st - prev_end
    is_gap = ~first & (gap > 0)
    launch = _launch_starts(df, w.iloc[order], rank)
    host = launch > prev_end
    cause = np.where(host, 0, np.where(gap < kernel_wait_us * 1e3, 1, 2))
    idx = np.flatnonzero(is_gap)
    out = pd.DataFrame({"rank": rank[idx], "device": dev[idx], "stream": strm[idx],
                        "start_us": (prev_end[idx] - origin) / 1e3, "gap_us": gap[idx] / 1e3,
                        "cause": np.asarray(CAUSES, dtype=object)[cause[idx]],
                        "next": w["name"].astype(str).to_numpy()[order][idx]})
    return _stream_labels(out)[cols]


def _launch_starts(df: pd.DataFrame, w: pd.DataFrame, rank: np.ndarray) -> np.ndarray:
    """Start of the runtime call that launched each row of ``w`` (same rank and correlation
    id), or the smallest int64 where there is none (then it never counts as host wait)."""
    out = np.full(len(w), np.iinfo(np.int64).min, dtype=np.int64)
    calls = df[df["category"].isin(RUNTIME_CATEGORIES).to_numpy() & df["correlation"].notna().to_numpy()]
    if calls.empty:
        return out
    key = pd.MultiIndex.from_arrays([calls["rank"].to_numpy(dtype=np.int64, na_value=-1),
                                     calls["correlation"].to_numpy(dtype=np.int64)])
    start = pd.Series(calls["start_ns"].to_numpy(), index=key)
    start = start[~start.index.duplicated()]
    corr = w["correlation"].to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).min)
    found = start.reindex(pd.MultiIndex.from_arrays([rank, corr]))
    ok = found.notna().to_numpy()
    out[ok] = found.to_numpy()[ok].astype(np.int64)
    return out


def breakdown(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
              kernel_wait_us: float = KERNEL_WAIT_US) -> pd.DataFrame:
    """Idle time by cause per stream: columns ``rank, device, stream, type`` (what the stream
    mostly runs, by time: a communication stream waits by design), ``cause``, ``idle_us``,
    ``gaps`` and ``share_pct`` (of the stream's idle time); every cause of :data:`CAUSES` is
    listed for every stream, 0 where it has none (see the module docstring)."""
    cols = ["rank", "device", "stream", "type", "cause", "idle_us", "gaps", "share_pct"]
    g = gaps(df, comm, roles, kernel_wait_us)
    streams = _stream_types(df, comm, roles)
    if streams.empty:
        return pd.DataFrame(columns=cols)
    grid = streams.merge(pd.DataFrame({"cause": list(CAUSES)}), how="cross")
    key = ["rank", "device", "stream", "cause"]
    if len(g):
        agg = (g.assign(**{c: g[c].fillna(-1).astype(np.int64) for c in ("rank", "device", "stream")})
               .groupby(key, sort=False).agg(idle_us=("gap_us", "sum"), gaps=("gap_us", "size")).reset_index())
        grid = grid.merge(agg, on=key, how="left")
    else:
        grid = grid.assign(idle_us=0.0, gaps=0)
    grid["idle_us"] = grid["idle_us"].fillna(0.0)
    grid["gaps"] = grid["gaps"].fillna(0).astype(np.int64)
    total = grid.groupby(["rank", "device", "stream"])["idle_us"].transform("sum")
    grid["share_pct"] = np.where(total > 0, 100.0 * grid["idle_us"] / total.where(total > 0, 1), np.nan)
    grid["cause"] = pd.Categorical(grid["cause"], categories=list(CAUSES), ordered=True)
    grid = grid.sort_values(["rank", "device", "stream", "cause"], kind="stable").reset_index(drop=True)
    grid["cause"] = grid["cause"].astype(str)
    return _stream_labels(grid)[cols]


def _stream_types(df: pd.DataFrame, comm: str | None, roles: Mapping[str, str] | None) -> pd.DataFrame:
    """Each stream with GPU work (``rank, device, stream`` as int64, -1 for missing) and the
    type it spends most time on."""
    types = classify(df, comm, roles)
    work = ~pd.isna(types) & df["stream"].notna().to_numpy()
    if not work.any():
        return pd.DataFrame(columns=["rank", "device", "stream", "type"])
    t = pd.DataFrame({"rank": df["rank"].to_numpy(dtype=np.int64, na_value=-1)[work],
                      "device": df["device"].to_numpy(dtype=np.int64, na_value=-1)[work],
                      "stream": df["stream"].to_numpy(dtype=np.int64, na_value=-1)[work],
                      "type": np.asarray(types, dtype=object)[work], "dur_ns": df["dur_ns"].to_numpy()[work]})
    per = t.groupby(["rank", "device", "stream", "type"], sort=True)["dur_ns"].sum().reset_index()
    per["order"] = per["type"].map({k: i for i, k in enumerate(TYPES)})
    per = per.sort_values(["rank", "device", "stream", "dur_ns", "order"], ascending=[True, True, True, False, True],
                          kind="stable")
    return per.drop_duplicates(["rank", "device", "stream"])[["rank", "device", "stream", "type"]].reset_index(drop=True)


def _stream_labels(t: pd.DataFrame) -> pd.DataFrame:
    """Rank, device and stream back to nullable integers (-1 meant missing)."""
    t = _labels(t)
    if "stream" in t:
        t["stream"] = t["stream"].astype("Int64").mask(t["stream"] < 0)
    return t
