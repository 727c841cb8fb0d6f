"""Analyses of span tables: small table -> table functions (drawing lives in charts.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .model import end_ns, spans, tracks


def window(df: pd.DataFrame, start_ns: int | None = None, end: int | None = None) -> pd.DataFrame:
    """Rows overlapping [start_ns, end) (instants inside it)."""
    m = np.ones(len(df), dtype=bool)
    e = end_ns(df).to_numpy()
    s = df["start_ns"].to_numpy()
    if start_ns is not None:
        m &= (e > start_ns) | ((e == s) & (s >= start_ns))
    if end is not None:
        m &= s < end
    return df[m]


def wall_ns(df: pd.DataFrame) -> int:
    """First start to last end over all rows."""
    if df.empty:
        return 0
    return int(end_ns(df).max() - df["start_ns"].min())


def name_stats(df: pd.DataFrame, by: tuple[str, ...] = ("category", "name")) -> pd.DataFrame:
    """Per-name statistics of the spans, longest total first.

    Columns: ``by`` + ``count, total_us, mean_us, median_us, min_us, max_us, share_pct``, where
    ``share_pct`` is total time over the trace's wall time (nested and parallel spans can
    make the shares add up past 100%).
    """
    s = spans(df)
    keys = list(by)
    if s.empty:
        return pd.DataFrame(columns=keys + ["count", "total_us", "mean_us", "median_us", "min_us", "max_us",
                                            "share_pct"])
    g = s.groupby(keys, observed=True, sort=False)["dur_ns"]
    out = g.agg(count="count", total_ns="sum", mean_ns="mean", median_ns="median", min_ns="min", max_ns="max")
    out = out.reset_index()
    wall = wall_ns(df) or 1
    for c in ("total", "mean", "median", "min", "max"):
        out[f"{c}_us"] = out.pop(f"{c}_ns") / 1e3
    out["share_pct"] = 100.0 * out["total_us"] * 1e3 / wall
    for k in keys:
        out[k] = out[k].astype(str)
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def busy_intervals(start_ns: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged [start, end) intervals of their union, sorted."""
    if len(start_ns) == 0:
        return start_ns.astype(np.int64), end.astype(np.int64)
    order = np.argsort(start_ns, kind="stable")
    s, e = start_ns[order], end[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    ends = np.maximum.reduceat(e, idx)
    return s[idx], ends


def gaps(df: pd.DataFrame, min_gap_ns: int = 0) -> pd.DataFrame:
    """Idle intervals per track (no span of the track running), longer than ``min_gap_ns``.

    Columns: ``track, start_ns, dur_ns``.
    """
    rows = []
    s = spans(df)
    for track, g in s.groupby("track", observed=True, sort=True):
        bs, be = busy_intervals(g["start_ns"].to_numpy(), end_ns(g).to_numpy())
        gs, ge = be[:-1], bs[1:]
        keep = (ge - gs) > min_gap_ns
        rows.append(pd.DataFrame({"track": str(track), "start_ns": gs[keep], "dur_ns": (ge - gs)[keep]}))
    if not rows:
        return pd.DataFrame({"track": pd.Series(dtype=str), "start_ns": pd.Series(dtype=np.int64),
                             "dur_ns": pd.Series(dtype=np.int64)})
    return pd.concat(rows, ignore_index=True)


def track_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per track: spans, busy time (union), idle time inside its active range, utilisation.

    Columns: ``track, spans, first_ns, last_ns, busy_us, idle_us, busy_pct, largest_gap_us``.
    """
    rows = []
    s = spans(df)
    for track, g in s.groupby("track", observed=True, sort=True):  # lane order (ordered categorical)
        bs, be = busy_intervals(g["start_ns"].to_numpy(), end_ns(g).to_numpy())
        busy = int((be - bs).sum())
        active = int(be.max() - bs.min())
        gap = (bs[1:] - be[:-1]).max() if len(bs) > 1 else 0
        rows.append({"track": str(track), "spans": len(g), "first_ns": int(bs.min()), "last_ns": int(be.max()),
                     "busy_us": busy / 1e3, "idle_us": (active - busy) / 1e3,
                     "busy_pct": 100.0 * busy / active if active else 100.0, "largest_gap_us": gap / 1e3})
    return pd.DataFrame(rows)


def category_counts(df: pd.DataFrame) -> dict[str, int]:
    """Rows per category (spans and instants)."""
    vc = df["category"].astype(str).value_counts()
    return {str(k): int(v) for k, v in vc.items()}


def compare(a: pd.DataFrame, b: pd.DataFrame, by: tuple[str, ...] = ("category", "name"),
            labels: tuple[str, str] = ("a", "b")) -> pd.DataFrame:
    """Per-name deltas between two traces (b minus a), largest absolute total change first.

    Columns: ``by`` + ``count_a, count_b, total_us_a, total_us_b, mean_us_a, mean_us_b,
    delta_total_us, delta_mean_us, ratio_mean`` (suffixes from ``labels``).
    """
    la, lb = labels
    keys = list(by)
    sa = name_stats(a, by)[keys + ["count", "total_us", "mean_us"]]
    sb = name_stats(b, by)[keys + ["count", "total_us", "mean_us"]]
    m = sa.merge(sb, on=keys, how="outer", suffixes=(f"_{la}", f"_{lb}"))
    for c in ("count", "total_us"):
        m[[f"{c}_{la}", f"{c}_{lb}"]] = m[[f"{c}_{la}", f"{c}_{lb}"]].fillna(0)
    m[f"count_{la}"] = m[f"count_{la}"].astype(int)
    m[f"count_{lb}"] = m[f"count_{lb}"].astype(int)
    m["delta_total_us"] = m[f"total_us_{lb}"] - m[f"total_us_{la}"]
    m["delta_mean_us"] = m[f"mean_us_{lb}"] - m[f"mean_us_{la}"]
    m["ratio_mean"] = m[f"mean_us_{lb}"] / m[f"mean_us_{la}"]
    order = m["delta_total_us"].abs().sort_values(ascending=False, kind="stable").index
    return m.loc[order].reset_index(drop=True)


def summary(df: pd.DataFrame, meta: dict) -> dict:
    """The CLI's ``--json`` document: format, span_count, by_category, tracks, start_ns, end_ns."""
    return {
        "format": meta.get("format"),
        "span_count": int((df["kind"] == "span").sum()),
        "instant_count": int((df["kind"] == "instant").sum()),
        "by_category": category_counts(df),
        "tracks": [str(t) for t in tracks(df)],
        "start_ns": int(df["start_ns"].min()) if len(df) else None,
        "end_ns": int(end_ns(df).max()) if len(df) else None,
        "clock": meta.get("clock"),
    }
