"""The span table: one pandas DataFrame of spans and instants shared by every importer.

Every importer returns a table with exactly :data:`COLUMNS` (in that order), checked by
:func:`validate`. Times are int64 nanoseconds on the trace's own clock (never rebased
silently: ``meta["clock"]`` names it); missing values are ``pd.NA``; ``kind`` is
``"span"`` or ``"instant"`` (instants have ``dur_ns == 0``). ``track`` is an *ordered*
categorical whose category order is the lane order the source tool shows (thread order,
device/stream order), so views draw lanes in the source's order.

Other modules build tables through :func:`from_records` (a list of dicts) or
:func:`from_columns` (arrays), never by hand, so the dtypes stay the same everywhere.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

#: column -> dtype. "category" columns are pandas categoricals; Int64/Int32 are nullable.
COLUMNS: dict[str, str] = {
    "source": "category",    # importer format id: "chrome-json", "tracy", "ireeperf-jsonl", ...
    "process": "category",   # process (or host / rank) name
    "rank": "Int32",         # distributed rank of a multi-file trace (workbench.traces.ranks); NA otherwise
    "track": "category",     # lane: thread name, "GPU 0 · stream 7", "queue 0 host-execution"
    "device": "Int32",       # GPU / accelerator ordinal; NA for host spans
    "stream": "Int64",       # stream / queue id on the device; NA for host spans
    "name": "category",
    "category": "category",  # kernel, cuda_runtime, cpu_op, dispatch, zone, memcpy, ...
    "start_ns": "int64",
    "dur_ns": "int64",
    "depth": "Int32",        # nesting level within its track (0 = outermost)
    "correlation": "Int64",  # runtime call <-> kernel link where the source has one
    "args": "object",        # dict of extra fields or None
    "kind": "category",      # "span" | "instant"
}
KINDS = ("span", "instant")

#: category used for GPU kernels by every importer (the CLI contract relies on it)
KERNEL = "kernel"


class SpanTableError(ValueError):
    """A span table that breaks the model (wrong columns, dtypes or values)."""


def empty() -> pd.DataFrame:
    """A valid span table with no rows."""
    return from_columns({}, n=0)


def from_columns(cols: Mapping[str, Any], n: int | None = None, source: str | None = None,
                 track_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Build a span table from column arrays; absent columns become NA (or defaults).

    Defaults: ``kind="span"``, ``depth=0`` when absent, ``args=None``. ``track_order`` fixes the
    lane order; otherwise tracks keep their order of first appearance.
    """
    if n is None:
        n = len(next(iter(cols.values()))) if cols else 0
    out: dict[str, Any] = {}
    for col, dtype in COLUMNS.items():
        val = cols.get(col)
        if col == "source" and val is None and source is not None:
            val = pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[source])
        if val is None:
            if col == "kind":
                val = ["span"] * n
            elif col == "depth":
                val = np.zeros(n, dtype=np.int32)
            elif col in ("start_ns", "dur_ns"):
                raise SpanTableError(f"span table needs column '{col}'")
            elif col == "args":
                val = [None] * n
            elif dtype in ("Int32", "Int64"):  # all missing, built without a Python object per row
                val = pd.arrays.IntegerArray(np.zeros(n, dtype=np.int32 if dtype == "Int32" else np.int64),
                                             np.ones(n, dtype=bool))
            else:
                val = pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), categories=[])
        out[col] = _coerce(col, dtype, val, n)
    df = pd.DataFrame(out)
    df["track"] = _ordered_tracks(df["track"], track_order)
    return df


def from_records(records: Iterable[Mapping[str, Any]], source: str,
                 track_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Build a span table from dicts with keys from :data:`COLUMNS` (others go to ``args``).

    ``start_ns`` and ``dur_ns`` are required per record (``dur_ns`` may be omitted for
    instants). This is the public constructor for code that makes its own spans::

        from_records([{"track": "rank 0", "name": "gemm", "start_ns": 0, "dur_ns": 1500,
                       "category": "kernel"}], source="ag-gemm")
    """
    recs = list(records)
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for r in recs:
        extra = {k: v for k, v in r.items() if k not in COLUMNS}
        for c in COLUMNS:
            v = r.get(c)
            if c == "args":
                v = {**(v or {}), **extra} or None
            elif c == "dur_ns" and v is None:
                v = 0
            elif c == "kind" and v is None:
                v = "span"
            elif c == "depth" and v is None:
                v = 0
            elif c == "source" and v is None:
                v = source
            cols[c].append(v)
    return from_columns(cols, n=len(recs), track_order=track_order)


def _text(v: Any) -> str:
    """A label as printable text: bytes decoded as UTF-8 and lone surrogates replaced (both
    come from traces with invalid UTF-8 names, and would break printing and JSON export)."""
    s = v.decode("utf-8", "replace") if isinstance(v, bytes) else v if isinstance(v, str) else str(v)
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            s = s.encode("utf-8", "replace").decode("utf-8")
    return s


def _clean_categories(cat: pd.Categorical) -> pd.Categorical:
    """Categories that are all valid text (see :func:`_text`); checks the categories only."""
    cats = cat.categories
    if pd.api.types.infer_dtype(cats, skipna=True) in ("string", "empty") and all(c.isascii() for c in cats):
        return cat
    new = [_text(c) for c in cats]
    if len(set(new)) == len(new):
        return cat.rename_categories(new)
    # two raw values became the same text (b"a" and "a"): one category
    codes = np.asarray(cat.codes)
    vals = np.array(new + [None], dtype=object)[codes]
    return pd.Categorical(vals, ordered=cat.ordered)


def _coerce(col: str, dtype: str, val: Any, n: int):
    if dtype == "category":
        if not isinstance(val, pd.Categorical):
            try:  # None/NaN become missing; works on lists and object arrays without a copy
                val = pd.Categorical(val)
            except TypeError:  # unhashable values: fall back to their text
                val = pd.Categorical([v if v is None or isinstance(v, str) else str(v) for v in val])
        return _clean_categories(val)
    if dtype == "int64":
        arr = np.asarray(val)
        if arr.dtype.kind == "f":
            if np.isnan(arr).any():
                raise SpanTableError(f"column '{col}' has missing values")
            arr = np.rint(arr)
        return arr.astype(np.int64, copy=False)
    if dtype in ("Int32", "Int64"):
        if isinstance(val, np.ndarray) and val.dtype.kind in "iu":
            return pd.array(val, dtype=dtype)
        if isinstance(val, pd.api.extensions.ExtensionArray | pd.Series):
            return pd.array(val, dtype=dtype)
        obj = np.asarray(val, dtype=object)
        mask = np.asarray(pd.isna(obj), dtype=bool)
        try:  # vectorised when the non-missing values are plain integers
            data = np.where(mask, 0, obj).astype(np.int64 if dtype == "Int64" else np.int32)
        except (TypeError, ValueError, OverflowError):
            return pd.array([None if _isna(v) else int(v) for v in val], dtype=dtype)
        return pd.arrays.IntegerArray(data, mask)
    # object column (args)
    return list(val) if not isinstance(val, list) else val


def _isna(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _ordered_tracks(track: pd.Series, order: Sequence[str] | None) -> pd.Categorical:
    if order is None and isinstance(track.dtype, pd.CategoricalDtype) and track.cat.ordered:
        return _clean_categories(track.array)  # already in lane order
    codes, uniques = pd.factorize(track.astype("object"), use_na_sentinel=True)
    names = [_text(u) for u in uniques]  # first-appearance order
    cats = list(dict.fromkeys([_text(t) for t in order] + names)) if order is not None else list(dict.fromkeys(names))
    pos = {c: i for i, c in enumerate(cats)}
    remap = np.array([pos[nm] for nm in names] + [-1], dtype=np.int64)
    return pd.Categorical.from_codes(remap[codes], categories=cats, ordered=True)


def validate(df: pd.DataFrame) -> pd.DataFrame:
    """Check columns, dtypes and values; returns ``df`` so it chains. Raises SpanTableError."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SpanTableError(f"span table lacks columns {missing}")
    for col, dtype in COLUMNS.items():
        got = str(df[col].dtype)
        if dtype == "object":
            continue
        if got != dtype:
            raise SpanTableError(f"column '{col}' has dtype {got}, expected {dtype}")
    if len(df):
        if (df["dur_ns"] < 0).any():
            raise SpanTableError("negative durations in 'dur_ns'")
        bad = set(df["kind"].dropna().unique()) - set(KINDS)
        if bad or df["kind"].isna().any():
            raise SpanTableError(f"'kind' must be one of {KINDS}, found {sorted(map(str, bad))}")
        if ((df["kind"] == "instant") & (df["dur_ns"] != 0)).any():
            raise SpanTableError("instants must have dur_ns == 0")
        if df["name"].isna().any():
            raise SpanTableError("spans without a name")
    for col, dtype in COLUMNS.items():
        if dtype == "category" and pd.api.types.infer_dtype(df[col].cat.categories, skipna=True) not in (
                "string", "empty"):
            raise SpanTableError(f"column '{col}' has non-text values (build tables with from_columns)")
    if not df["track"].cat.ordered:
        raise SpanTableError("'track' must be an ordered categorical (lane order)")
    return df


def spans(df: pd.DataFrame) -> pd.DataFrame:
    """Only the spans (``kind == "span"``)."""
    return df[df["kind"] == "span"]


def end_ns(df: pd.DataFrame) -> pd.Series:
    """End time of each row (start + duration)."""
    return df["start_ns"] + df["dur_ns"]


def tracks(df: pd.DataFrame) -> list[str]:
    """Lane names in source order, only those with rows."""
    used = set(df["track"].dropna().unique())
    return [t for t in df["track"].cat.categories if t in used]


def nesting_depth(track_codes: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Depth of each interval: how many other intervals of its track are open at its start.

    Sorted by (track, start, longer first), an interval's depth is the number of intervals
    of the track before it minus those that ended at or before its start. For properly
    nested spans that is the stack depth; spans that merely overlap go one level deeper,
    as trace viewers draw them. Vectorised per track; returns depths in input order.
    """
    n = len(start_ns)
    depth = np.zeros(n, dtype=np.int32)
    if n == 0:
        return depth
    order = np.lexsort((-(end_ns - start_ns), start_ns, track_codes))
    tr, st, en = track_codes[order], start_ns[order], end_ns[order]
    bounds = np.flatnonzero(np.diff(tr)) + 1
    out = np.empty(n, dtype=np.int64)
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
        s, e = st[lo:hi], en[lo:hi]
        before = np.arange(hi - lo)
        ended = np.searchsorted(np.sort(e), s, side="right")
        out[lo:hi] = before - ended
    depth[order] = np.maximum(out, 0)
    return depth


def with_depth(df: pd.DataFrame) -> pd.DataFrame:
    """Recompute ``depth`` of the spans per track from their intervals (instants get 0)."""
    is_span = (df["kind"] == "span").to_numpy()
    codes = df["track"].cat.codes.to_numpy()
    st = df["start_ns"].to_numpy()
    en = st + df["dur_ns"].to_numpy()
    d = np.zeros(len(df), dtype=np.int32)
    idx = np.flatnonzero(is_span)
    d[idx] = nesting_depth(codes[idx], st[idx], en[idx])
    out = df.copy(deep=False)  # only the depth column changes; share the others
    out["depth"] = pd.array(d, dtype="Int32")
    return out


def sort_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows in time order (start, longer first, lane, name): for importers of sources that
    do not promise an order (Nsight Systems 2025.6's export orders no table, not even by time;
    SQL rows come in whatever order the file stores them), so the table is the same however
    the source stored its rows."""
    if len(df) < 2:
        return df
    key = pd.DataFrame({"s": df["start_ns"].to_numpy(), "d": -df["dur_ns"].to_numpy(),
                        "t": df["track"].cat.codes.to_numpy(), "n": df["name"].astype(str).to_numpy(),
                        "c": df["category"].astype(str).to_numpy()})
    order = key.sort_values(["s", "d", "t", "n", "c"], kind="stable").index.to_numpy()
    if (order == np.arange(len(order))).all():
        return df
    return df.iloc[order].reset_index(drop=True)


#: a GPU with more stream or queue lanes than this lists them busiest first (the source's order
#: put rocprofv3's 567 streams of one run in id order, the one with 85% of the kernels far down)
MANY_LANES = 8
#: categories whose lanes are a GPU's streams or queues
GPU_WORK = (KERNEL, "gpu_memcpy", "gpu_memset")


def busiest_first(df: pd.DataFrame, many: int = MANY_LANES) -> pd.DataFrame:
    """The lane order with the stream and queue lanes of each GPU that has more than ``many``
    of them grouped at the place of its first lane, the busiest (most time in its spans)
    first; every other lane keeps its place. Returns ``df`` itself when nothing moves."""
    work = df["category"].isin(GPU_WORK).to_numpy() & df["device"].notna().to_numpy()
    if not work.any():
        return df
    codes = df["track"].cat.codes.to_numpy()[work]
    n = len(df["track"].cat.categories)
    busy = np.bincount(codes, weights=df["dur_ns"].to_numpy()[work].astype(np.float64), minlength=n)
    device = np.full(n, -1, dtype=np.int64)
    device[codes] = df["device"].to_numpy(dtype=np.int64, na_value=-1)[work]  # a lane's (last) device
    rank = np.full(n, -1, dtype=np.int64)
    rank[codes] = df["rank"].to_numpy(dtype=np.int64, na_value=-1)[work]
    groups: dict[tuple, list[int]] = {}
    for lane in np.flatnonzero(device >= 0):
        groups.setdefault((int(rank[lane]), int(device[lane])), []).append(int(lane))
    big = {k: sorted(v, key=lambda lane: -busy[lane]) for k, v in groups.items() if len(v) > many}
    if not big:
        return df
    group_of = {lane: k for k, v in big.items() for lane in v}
    order, done = [], set()
    for lane in range(n):
        k = group_of.get(lane)
        if k is None:
            order.append(lane)
        elif k not in done:
            order += big[k]
            done.add(k)
    cats = df["track"].cat.categories
    out = df.copy(deep=False)
    out["track"] = df["track"].cat.reorder_categories(cats[order], ordered=True)
    return out


def concat(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Stack span tables, keeping lane order (first table's tracks first)."""
    tables = [t for t in tables if t is not None]
    if not tables:
        return empty()
    order: list[str] = []
    for t in tables:
        order += [c for c in t["track"].cat.categories if c not in set(order)]
    cols = {}
    for col, dtype in COLUMNS.items():
        if dtype == "category":
            cols[col] = pd.Categorical(pd.concat([t[col].astype("object") for t in tables], ignore_index=True))
        else:
            cols[col] = pd.concat([t[col] for t in tables], ignore_index=True)
    df = pd.DataFrame(cols)
    df["track"] = pd.Categorical(df["track"], categories=order, ordered=True)
    return df

