"""Analyses of span tables: small table -> table functions (drawing lives in charts.py)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from .model import end_ns, spans, tracks

#: host ranges that mark a training/inference step: ``ProfilerStep#N`` (torch.profiler's
#: schedule), or a range named ``step`` or ``iteration`` (``record_function``, NVTX, roctx)
STEP_NAMES = r"^(ProfilerStep#\d+|step|iteration)$"


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


#: categories of spans a profiler draws around everything it recorded (Kineto's "PyTorch
#: Profiler (0)" and its own step spans on the "Spans" lane): never the program's own work
ENVELOPE_CATEGORIES = ("trace",)
#: the workbench's own Python zones (:mod:`workbench.running.tracy` names them ``py.<what>``): the
#: program's work as it named it, never an envelope, even where one covers the whole capture
PY_ZONE_PREFIX = "py."


def envelopes(df: pd.DataFrame) -> np.ndarray:
    """Which rows are envelope spans: a profiler's own spans (:data:`ENVELOPE_CATEGORIES`),
    and any span that covers every other row of the trace (a process-wide range), unless the
    program named it as its own zone (:data:`PY_ZONE_PREFIX`).

    Envelopes say when the profiler ran, not where time went: they are kept out of the
    timeline's axis range and of the per-name tables, and drawn as a thin band.
    """
    n = len(df)
    if n == 0:
        return np.zeros(0, dtype=bool)
    env = df["category"].isin(ENVELOPE_CATEGORIES).to_numpy() & (df["kind"] == "span").to_numpy()
    rest = ~env
    if rest.sum() < 2:
        return env
    st = df["start_ns"].to_numpy()
    en = st + df["dur_ns"].to_numpy()
    lo, hi = st[rest].min(), en[rest].max()
    # a span from the first start to the last end of all the others (not itself the only one)
    cover = rest & (st <= lo) & (en >= hi) & (df["kind"] == "span").to_numpy()
    cover &= ~df["name"].astype(str).str.startswith(PY_ZONE_PREFIX).to_numpy()
    if cover.sum() < rest.sum():  # unless every row is one (nothing inside them)
        env |= cover
    return env


def self_time(lane: np.ndarray, start: np.ndarray, end: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Each span's time not covered by its children (the spans one level deeper that start
    inside it on its lane), so that enclosing zones do not outrank the work inside them."""
    dur = (end - start).astype(np.int64)
    out = dur.copy()
    if len(dur) == 0:
        return out
    order = np.lexsort((-dur, start, lane))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))  # rank in nesting order (lane first): parents precede children
    for d in np.unique(depth[depth > 0]):
        child = np.flatnonzero(depth == d)
        par = np.flatnonzero(depth == d - 1)
        if len(par) == 0:  # their parents are not in the table (a window, envelopes left out)
            continue
        par = par[np.argsort(pos[par])]
        # the parent: the last span one level up before the child in nesting order, on its lane
        j = np.searchsorted(pos[par], pos[child]) - 1
        ok = j >= 0
        p = par[np.maximum(j, 0)]
        ok &= (lane[p] == lane[child]) & (end[p] > start[child])
        np.subtract.at(out, p[ok], dur[child[ok]])
    return np.maximum(out, 0)


def span_self_ns(df: pd.DataFrame) -> np.ndarray:
    """:func:`self_time` of every row of a table (instants: 0)."""
    st = df["start_ns"].to_numpy()
    en = st + df["dur_ns"].to_numpy()
    out = self_time(df["track"].cat.codes.to_numpy().astype(np.int64), st, en,
                    df["depth"].to_numpy(dtype=np.int64, na_value=0))
    out[(df["kind"] != "span").to_numpy()] = 0
    return out


def name_stats(df: pd.DataFrame, by: tuple[str, ...] = ("category", "name")) -> pd.DataFrame:
    """Per-name statistics of the spans, most self time first (envelopes left out).

    Columns: ``by`` + ``count, self_us, total_us, mean_us, median_us, min_us, max_us, lanes,
    share_pct``. ``total_us`` sums the spans' durations (a name nested in itself, or running
    on several lanes at once, counts each span); ``self_us`` is the time no child of the
    span covers, so the self times of a lane add up to its busy time. ``share_pct`` is self
    time over the time of the lanes the name runs on (the trace's wall time per lane): never
    over 100%, and the shares of one lane's names add up to its busy share.
    """
    keys = list(by)
    cols = keys + ["count", "self_us", "total_us", "mean_us", "median_us", "min_us", "max_us", "lanes", "share_pct"]
    is_span = (df["kind"] == "span").to_numpy()
    env = envelopes(df)
    s = df[is_span & ~env]
    if s.empty:
        return pd.DataFrame(columns=cols)
    self_ns = span_self_ns(df)[is_span & ~env]
    s = s.assign(self_ns=self_ns)
    g = s.groupby(keys, observed=True, sort=False)
    out = g["dur_ns"].agg(count="count", total_ns="sum", mean_ns="mean", median_ns="median", min_ns="min",
                          max_ns="max")
    out["self_ns"] = g["self_ns"].sum()
    out["lanes"] = g["track"].nunique()
    out = out.reset_index()
    wall = wall_ns(df[~env]) or 1
    for c in ("self", "total", "mean", "median", "min", "max"):
        out[f"{c}_us"] = out.pop(f"{c}_ns") / 1e3
    out["share_pct"] = 100.0 * out["self_us"] * 1e3 / (wall * out["lanes"].clip(lower=1))
    for k in keys:
        out[k] = out[k].astype(str)
    out = out.sort_values(["self_us", "total_us"], ascending=False, kind="stable").reset_index(drop=True)
    return out[cols]


def apply(df: pd.DataFrame, analyses) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """Run ``(name, table -> table)`` analyses: ``(tables, skipped)``, where an analysis that
    does not apply to this trace (it raised ValueError) is left out with its reason."""
    tables, skipped = {}, {}
    for name, fn in analyses:
        try:
            tables[name] = fn(df)
        except ValueError as exc:
            skipped[name] = str(exc)
    return tables, skipped


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


def merged_intervals(key: np.ndarray, start_ns: np.ndarray, end: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of the intervals of each key at once: ``(key, start_ns, end_ns)`` of the
    merged intervals, sorted by key then start.

    One vectorised pass for all keys (a Python loop per key took seconds at 20,000 lanes):
    sorted by (key, start), an interval opens where its start is past the running maximum
    end of the key's earlier intervals.
    """
    if len(start_ns) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    order = np.lexsort((start_ns, key))
    k, s, e = key[order], start_ns[order], end[order]
    first = np.ones(len(k), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    run_end = pd.Series(e).groupby(np.cumsum(first)).cummax().to_numpy()
    new = first.copy()
    new[1:] |= s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    return k[idx], s[idx], np.maximum.reduceat(e, idx)


def lane_intervals(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Busy intervals of every lane at once: ``(lane_code, start_ns, end_ns)`` of the merged
    union of each lane's spans, sorted by lane code then start (:func:`merged_intervals`)."""
    s = spans(df)
    codes = s["track"].cat.codes.to_numpy().astype(np.int64)
    st = s["start_ns"].to_numpy()
    en = st + s["dur_ns"].to_numpy()
    keep = codes >= 0
    return merged_intervals(codes[keep], st[keep], en[keep])


def gaps(df: pd.DataFrame, min_gap_ns: int = 0) -> pd.DataFrame:
    """Idle intervals per track (no span of the track running), longer than ``min_gap_ns``.

    Columns: ``track, start_ns, dur_ns``, in lane order then time.
    """
    lane, bs, be = lane_intervals(df)
    same = lane[1:] == lane[:-1]
    gs, ge = be[:-1][same], bs[1:][same]
    keep = (ge - gs) > min_gap_ns
    names = np.asarray(df["track"].cat.categories, dtype=object)
    return pd.DataFrame({"track": pd.Series(names[lane[1:][same][keep]], dtype=object).astype(str),
                         "start_ns": gs[keep].astype(np.int64), "dur_ns": (ge - gs)[keep].astype(np.int64)})


def track_summary(df: pd.DataFrame, origin_ns: int | None = None) -> pd.DataFrame:
    """Per track: spans, busy time (union), idle time inside its active range, utilisation.

    Columns: ``track, spans, first_us, last_us`` (the lane's first start and last end, from
    ``origin_ns``: by default the table's first start), ``busy_us, idle_us, busy_pct,
    largest_gap_us``, one row per lane with spans, in lane order.
    """
    lane, bs, be = lane_intervals(df)
    origin = (int(df["start_ns"].min()) if len(df) else 0) if origin_ns is None else int(origin_ns)
    n_lanes = len(df["track"].cat.categories)
    counts = np.bincount(spans(df)["track"].cat.codes.to_numpy().clip(-1) + 1, minlength=n_lanes + 1)[1:]
    used = np.flatnonzero(counts)
    busy = np.bincount(lane, weights=be - bs, minlength=n_lanes)
    first = np.full(n_lanes, np.iinfo(np.int64).max)
    last = np.full(n_lanes, np.iinfo(np.int64).min)
    np.minimum.at(first, lane, bs)
    np.maximum.at(last, lane, be)
    gap = np.zeros(n_lanes, dtype=np.int64)
    same = lane[1:] == lane[:-1]
    np.maximum.at(gap, lane[1:][same], (bs[1:] - be[:-1])[same])
    active = (last - first)[used]
    busy_u = busy[used]
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(active > 0, 100.0 * busy_u / np.where(active > 0, active, 1), 100.0)
    return pd.DataFrame({"track": np.asarray(df["track"].cat.categories, dtype=object)[used].astype(str),
                         "spans": counts[used], "first_us": (first[used] - origin) / 1e3,
                         "last_us": (last[used] - origin) / 1e3,
                         "busy_us": busy_u / 1e3, "idle_us": (active - busy_u) / 1e3, "busy_pct": pct,
                         "largest_gap_us": gap[used] / 1e3})


def category_counts(df: pd.DataFrame) -> dict[str, int]:
    """Rows per category (spans and instants)."""
    vc = df["category"].astype(str).value_counts()
    return {str(k): int(v) for k, v in vc.items()}


#: the importers' counts (``workbench.traces.COUNT_KEYS``) -> what each says in an output
DROP_REASONS = {"malformed_events": "malformed (dropped)", "timestamp_overflows": "timestamp overflow (dropped)",
                "negative_durations": "negative duration (kept with duration 0)",
                "unclosed_spans": "unclosed span (kept, closed by the importer)"}


def dropped_events(meta: Mapping[str, Any]) -> dict[str, int]:
    """What the importer could not use as the source gave it, by reason, non-zero counts only.

    Every importer's meta carries the counts of :data:`DROP_REASONS` (see
    :mod:`workbench.traces`); every output (text, JSON, page) shows them.
    """
    out: dict[str, int] = {}
    for key, reason in DROP_REASONS.items():
        try:
            n = int(meta.get(key) or 0)
        except (TypeError, ValueError):
            continue
        if n > 0:
            out[reason] = n
    return out


def dropped_text(dropped: Mapping[str, int]) -> str:
    """One line for :func:`dropped_events` ("" when nothing was dropped)."""
    return ", ".join(f"{n:,} {reason}" for reason, n in dropped.items())


def summary(df: pd.DataFrame, meta: dict) -> dict:
    """The CLI's ``--json`` document: format, span_count, by_category, tracks, start_ns, end_ns,
    clock, dropped (see :func:`dropped_events`) and, for a multi-rank trace, ranks."""
    doc = {
        "format": meta.get("format"),
        "span_count": int((df["kind"] == "span").sum()),
        "instant_count": int((df["kind"] == "instant").sum()),
        "by_category": category_counts(df),
        "tracks": [str(t) for t in tracks(df)],
        "start_ns": int(df["start_ns"].min()) if len(df) else None,
        "end_ns": int(end_ns(df).max()) if len(df) else None,
        "clock": meta.get("clock"),
        "dropped": dropped_events(meta),
    }
    if "ranks" in meta:
        doc["ranks"] = meta["ranks"]
        doc["alignment"] = meta.get("alignment")
    return doc


def search_mask(regex, values: pd.Series) -> np.ndarray:
    """Whether ``regex`` (from :func:`workbench.base.untrusted.user_regex`, or any compiled pattern) finds a match in
    each of ``values`` (missing: False). Each distinct value is matched once (a trace's names
    repeat), so the cost is that of its distinct names."""
    codes, uniques = pd.factorize(values)
    hit = np.fromiter((regex.search(str(u)) is not None for u in uniques), dtype=bool, count=len(uniques))
    return np.append(hit, False)[codes]  # code -1 (missing) takes the appended False
