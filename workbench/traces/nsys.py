"""Nsight Systems SQLite export (``nsys export --type sqlite`` / ``nsys profile --export=sqlite``).

The export's layout drifts between releases: tables appear lazily (only for what was traced),
some gain ``_V2``/``_V3`` suffixes, columns are added. So each source table is resolved by
what exists (the highest suffix present wins) and read by column name, one reader per table:

- ``CUPTI_ACTIVITY_KIND_KERNEL`` (category ``kernel``), ``_MEMCPY`` / ``_MEMSET``
  (``gpu_memcpy`` / ``gpu_memset``): lanes ``GPU <device> stream <stream>``;
- ``CUPTI_ACTIVITY_KIND_RUNTIME`` (``cuda_runtime``) and ``OSRT_API`` (``osrt``, OS runtime
  calls) on their thread's lane;
- ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` (``cuda_sync``: stream/event/context waits) on the
  lane of the runtime call with the same correlation id (``process <pid> CUDA sync`` if none);
- ``NVTX_EVENTS``: push/pop and start/end ranges (``nvtx`` spans) and marks (instants) on
  ``NVTX <thread>``, event types resolved through ``ENUM_NSYS_EVENT_TYPE`` when present,
  domain names in args.

Names come from ``StringIds``, thread names from ``ThreadNames``. Times are ns from the
session start. Host threads are ``globalTid``: pid = (globalTid >> 24) & 0xFFFFFF,
tid = globalTid & 0xFFFFFF. ``META_DATA_EXPORT`` (``EXPORT_META_DATA`` before 2023) gives
``EXPORT_SCHEMA_VERSION``: majors 2 (Nsight Systems 2021 - 2022.3, e.g. 2.9.1 in 2022.2) and 3
(2022.4 - 2026, e.g. 3.0.0 in 2022.4, 3.15 in 2024.7 and 3.24 in 2026.1) are read, both the same
way: every table and column is read where it exists. Another major is refused with the
version and the Nsight Systems release found; an export of 2021 without a metadata table is
read as it is. The file is opened through :mod:`.sqlite`: read-only, every source checked to
be a table, queries bounded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .model import KERNEL, concat, from_columns, sort_rows, with_depth
from .sqlite import SQLITE_MAGIC, Database

FORMAT = "nsys-sqlite"
#: EXPORT_SCHEMA_VERSION majors whose layout this reader was written against
SUPPORTED_MAJORS = (2, 3)
INFO = Format(
    FORMAT, "Nsight Systems SQLite export", (".sqlite", ".nsys.sqlite"),
    "EXPORT_SCHEMA_VERSION 2.x and 3.x (Nsight Systems 2021 - 2026); tables and columns read where they exist "
    "(_V2/_V3 names resolved)",
    "CUDA kernels, memcpy and memset on GPU stream lanes, CUDA runtime calls, OS runtime calls and CUDA "
    "synchronization on thread lanes, NVTX ranges and marks (with domains); correlation ids")

# NVTX event types (ENUM_NSYS_EVENT_TYPE), used when the export has no enum table
_NVTX_RANGES = {59: "NvtxPushPopRange", 60: "NvtxStartEndRange", 70: "NvtxtPushPopRange", 71: "NvtxtStartEndRange"}
_NVTX_MARKS = {34: "NvtxMark"}
_NVTX_DOMAIN = 75  # NvtxDomainCreate: its text is the domain's name
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
               10: "PtoP"}  # CUpti_ActivityMemcpyKind
_SYNC_TYPES = {1: "Event synchronize", 2: "Stream wait event", 3: "Stream synchronize", 4: "Context synchronize"}
#: logical source -> base table name (suffixes resolved at load)
_SOURCES = {"kernel": "CUPTI_ACTIVITY_KIND_KERNEL", "runtime": "CUPTI_ACTIVITY_KIND_RUNTIME",
            "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY", "memset": "CUPTI_ACTIVITY_KIND_MEMSET",
            "sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "nvtx": "NVTX_EVENTS", "osrt": "OSRT_API"}


def detect(head: bytes, name: str) -> bool:
    """Any SQLite database (load explains when it is not an nsys export)."""
    return head.startswith(SQLITE_MAGIC)


def resolve(db: Database, base: str) -> str | None:
    """The table for ``base``: ``base`` or ``base_V<n>`` with the highest n present; checked
    to be a table (a view or trigger there is refused)."""
    pattern = re.compile(rf"^{re.escape(base)}(?:_V(\d+))?$", re.I)
    found = [(int(m.group(1) or 1), n) for n in (o[1] for o in db.objects.values()) if (m := pattern.fullmatch(n))]
    if not found:
        return None
    return db.table(max(found)[1])


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read kernels, copies, runtime/OS calls, syncs and NVTX from an nsys SQLite export."""
    p = Path(path)
    with Database(p, FORMAT) as db:
        tables = {k: resolve(db, base) for k, base in _SOURCES.items()}
        export = _export_meta(db)
        if not any(tables.values()):
            raise TraceError(FORMAT, f"{p.name}: {_what_sqlite(db, export)}")
        version = export.get("EXPORT_SCHEMA_VERSION")
        if version is not None:
            major = str(version).split(".")[0].strip()
            if not major.isdigit() or int(major) not in SUPPORTED_MAJORS:
                product = export.get("EXPORT_PRODUCT_VERSION")
                raise TraceError(FORMAT, f"{p.name}: an Nsight Systems export of schema version {str(version)[:20]}"
                                         + (f" (Nsight Systems {str(product)[:20]})" if product else "")
                                         + f", which this reader does not know (it reads "
                                         f"{', '.join(f'{m}.x' for m in SUPPORTED_MAJORS)}: Nsight Systems 2021 - 2026)")
        names = _Names(db)
        runtime = _runtime(db, tables["runtime"], names)
        parts = [_gpu_activity(db, tables["kernel"], names, KERNEL), _gpu_activity(db, tables["memcpy"], names, "gpu_memcpy"),
                 _gpu_activity(db, tables["memset"], names, "gpu_memset"), runtime,
                 _osrt(db, tables["osrt"], names), _sync(db, tables["sync"], names, runtime),
                 _nvtx(db, tables["nvtx"], names)]
        gpus = _gpu_names(db)
    parts = [t for t in parts if t is not None]
    negative, unclosed, malformed, overflow = (sum(int(t.attrs.get(k, 0)) for t in parts)
                                               for k in ("negative", "unclosed", "malformed", "overflow"))
    parts = [t for t in parts if len(t)]
    if not parts:
        dropped = f" ({malformed + overflow:,} rows with impossible times dropped)" if malformed + overflow else ""
        raise TraceError(FORMAT, f"{p.name}: the export has no kernel, copy, runtime, sync, OS runtime or NVTX rows"
                                 + dropped)
    df = concat(parts)
    df["track"] = df["track"].cat.set_categories(_lane_order(df["track"].cat.categories), ordered=True)
    df = with_depth(sort_rows(df))  # the export's row order means nothing (sort_rows)
    meta: dict[str, Any] = {"clock": "ns from the nsys session start", "export_schema_version": version,
                            "tables": sorted(t for t in tables.values() if t), "export": export,
                            "negative_durations": negative, "unclosed_spans": unclosed,
                            "malformed_events": malformed, "timestamp_overflows": overflow}
    if gpus:
        meta["gpus"] = gpus
    return df, meta


def _what_sqlite(db: Database, export: dict[str, str]) -> str:
    """What a SQLite file without any table this reader uses looks like, in words."""
    names = {str(o[1]) for o in db.objects.values()}
    if any("rocpd" in n.lower() for n in names):
        return "a rocpd database (rocprofv3's output) without its views: not an Nsight Systems export"
    if export or names & {"StringIds", "TARGET_INFO_GPU", "ThreadNames", "TARGET_INFO_SESSION_START_TIME"}:
        product = export.get("EXPORT_PRODUCT_VERSION")
        return (f"an Nsight Systems export{f' (Nsight Systems {product[:20]})' if product else ''} without kernel, "
                "memcpy, memset, CUDA runtime, synchronization, OS runtime or NVTX tables: nothing of those was "
                "traced (nsys profile -t cuda,nvtx,osrt)")
    return "a SQLite database without Nsight Systems tables"


def _export_meta(db: Database) -> dict[str, str]:
    for name in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        table = resolve(db, name)
        if table:
            rows = db.select(table, ("name", "value"), f"table '{table}'")
            if len(rows.columns) == 2:
                return {str(k): str(v) for k, v in zip(rows["name"], rows["value"])}
    return {}


def _gpu_names(db: Database) -> list[str]:
    table = resolve(db, "TARGET_INFO_GPU")
    if not table:
        return []
    rows = db.select(table, ("id", "name"), f"table '{table}'")
    return [str(n) for n in rows["name"]] if "name" in rows else []


class _Names:
    """StringIds, thread names and the enum tables of one export."""

    def __init__(self, db: Database):
        table = resolve(db, "StringIds")
        ids = db.select(table, ("id", "value"), f"table '{table}'") if table else pd.DataFrame()
        self.strings: dict = dict(zip(ids["id"], ids["value"])) if len(ids.columns) == 2 else {}
        table = resolve(db, "ThreadNames")
        tn = db.select(table, ("nameId", "globalTid"), f"table '{table}'") if table else pd.DataFrame()
        self.threads: dict = ({g: self.text(n) for n, g in zip(tn["nameId"], tn["globalTid"])}
                              if len(tn.columns) == 2 else {})
        self.event_types = self._enum(db, "ENUM_NSYS_EVENT_TYPE")
        self.sync_types = self._enum(db, "ENUM_CUPTI_SYNC_TYPE")

    @staticmethod
    def _enum(db: Database, base: str) -> dict:
        table = resolve(db, base)
        rows = db.select(table, ("id", "name"), f"table '{table}'") if table else pd.DataFrame()
        return dict(zip(rows["id"], rows["name"].astype(str))) if len(rows.columns) == 2 else {}

    def text(self, string_id: Any) -> str:
        v = self.strings.get(string_id)
        return v if isinstance(v, str) else str(string_id)

    def map(self, ids: pd.Series) -> list[str]:
        return [self.text(i) for i in ids.tolist()]

    def host_lanes(self, gtids: pd.Series, prefix: str = "") -> tuple[list[str], list[str]]:
        """(lane, process) per row from globalTid; labels computed once per distinct thread."""
        labels: dict = {}
        for g in pd.unique(gtids):
            if g is None or (isinstance(g, float) and g != g):
                labels[g] = (f"{prefix}host", "host")
                continue
            g = int(g)
            tid, pid = g & 0xFFFFFF, (g >> 24) & 0xFFFFFF
            tn = self.threads.get(g)
            labels[g] = (f"{prefix}{tn} ({tid})" if tn else f"{prefix}thread {tid}", f"process {pid}")
        pairs = [labels[g] for g in gtids.tolist()]
        return [a for a, _ in pairs], [b for _, b in pairs]


#: |ns| at or beyond this is no time of a trace (int64 holds 9.22e18): -2^63, which a NaN or
#: infinity cast to int64 becomes, among them
_MAX_NS = 9.2e18


def _times(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """(start, duration, rows kept, counts) of the rows with usable times. A missing end is an
    unclosed span (duration 0); a missing or non-numeric start makes the row malformed; a start,
    end or duration that is not finite or not within int64 ns (Nsight Systems 2.x writes NaN
    and infinities as REAL, and -2^63) is a timestamp overflow: both are dropped and counted
    (no cast of a NaN to int64, whose -2^63 and RuntimeWarning were the symptom)."""
    start = pd.to_numeric(df["start"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    end = (pd.to_numeric(df["end"], errors="coerce").to_numpy(np.float64, na_value=np.nan) if "end" in df
           else np.full(len(df), np.nan))
    unclosed = np.isnan(end) & ~np.isnan(start)
    end = np.where(unclosed, start, end)
    malformed = np.isnan(start)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, which fails the test as it should
        fits = (np.abs(start) < _MAX_NS) & (np.abs(end) < _MAX_NS) & (np.abs(end - start) < _MAX_NS)
    overflow = ~malformed & ~fits
    keep = ~(malformed | overflow)
    # exact in int64 from here: every kept value is below 2^63 (REAL columns hold integers exactly to 2^53)
    start_ns = pd.to_numeric(df["start"], errors="coerce")[keep].to_numpy(np.int64) if keep.any() else \
        np.zeros(0, np.int64)
    end_ns = np.where(unclosed[keep], start_ns, pd.to_numeric(df["end"], errors="coerce")[keep].fillna(0)
                      .to_numpy(np.int64)) if "end" in df and keep.any() else start_ns
    counts = {"negative": int((end_ns < start_ns).sum()), "unclosed": int((unclosed & keep).sum()),
              "malformed": int(malformed.sum()), "overflow": int(overflow.sum())}
    return start_ns, np.maximum(end_ns - start_ns, 0), keep, counts


def _kept(value, keep: np.ndarray):
    """One column's values of the rows kept (a list, Series or array as the readers pass them)."""
    if value is None:
        return None
    if isinstance(value, pd.Series):
        return value[keep].tolist()
    if isinstance(value, np.ndarray):
        return value[keep]
    return [v for v, k in zip(value, keep) if k]


def _table(df: pd.DataFrame, row_attrs: dict[str, list] | None = None, **cols) -> pd.DataFrame:
    """The span table of ``df``'s rows with usable times (:func:`_times`; its counts in
    ``attrs``); ``row_attrs``: per-row lists kept in ``attrs`` for the rows kept."""
    start, dur, keep, counts = _times(df)
    if not keep.all():
        cols = {k: _kept(v, keep) for k, v in cols.items()}
    out = from_columns({"start_ns": start, "dur_ns": dur, **cols}, n=len(start), source=FORMAT)
    out.attrs.update(counts, **{k: _kept(v, keep) for k, v in (row_attrs or {}).items()})
    return out


def _gpu_activity(db: Database, table: str | None, names: _Names, category: str) -> pd.DataFrame | None:
    """Kernels, memcpy or memset rows of one table: GPU stream lanes."""
    if not table:
        return None
    extra = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
             "dynamicSharedMemory", "bytes", "copyKind", "srcKind", "dstKind", "value")
    df = db.select(table, ("start", "end", "deviceId", "streamId", "correlationId", "demangledName", "shortName",
                           "name") + extra, f"table '{table}'")
    if df.empty:
        return None
    if category == KERNEL:
        ids = next((df[c] for c in ("demangledName", "shortName", "name") if c in df), pd.Series([None] * len(df)))
        label = names.map(ids)
    elif category == "gpu_memcpy":
        kinds = df["copyKind"].tolist() if "copyKind" in df else [None] * len(df)
        label = [f"Memcpy {_COPY_KINDS.get(k, k)}" if k is not None and k == k else "Memcpy" for k in kinds]
    else:
        label = ["Memset"] * len(df)
    present = [c for c in extra if c in df]
    args = [dict(zip(present, row)) or None for row in df[present].itertuples(index=False, name=None)] if present \
        else [None] * len(df)
    dev, stream = df.get("deviceId", pd.Series([None] * len(df))), df.get("streamId", pd.Series([None] * len(df)))
    return _table(df, process=[f"GPU {d}" for d in dev], track=[f"GPU {d} · stream {s}" for d, s in zip(dev, stream)],
                  device=dev.tolist(), stream=stream.tolist(), name=label, category=[category] * len(df),
                  correlation=df.get("correlationId", pd.Series([None] * len(df))).tolist(), args=args)


def _runtime(db: Database, table: str | None, names: _Names) -> pd.DataFrame | None:
    if not table:
        return None
    df = db.select(table, ("start", "end", "globalTid", "correlationId", "nameId"), f"table '{table}'")
    if df.empty or "globalTid" not in df:
        return None
    lanes, procs = names.host_lanes(df["globalTid"])
    gtid = pd.to_numeric(df["globalTid"], errors="coerce").fillna(0).to_numpy(np.int64)
    return _table(df, row_attrs={"pid": ((gtid >> 24) & 0xFFFFFF).tolist()}, process=procs, track=lanes,
                  name=names.map(df.get("nameId", pd.Series([None] * len(df)))), category=["cuda_runtime"] * len(df),
                  correlation=df.get("correlationId", pd.Series([None] * len(df))).tolist())


def _osrt(db: Database, table: str | None, names: _Names) -> pd.DataFrame | None:
    if not table:
        return None
    df = db.select(table, ("start", "end", "globalTid", "nameId", "returnValue", "nestingLevel"), f"table '{table}'")
    if df.empty or "globalTid" not in df:
        return None
    lanes, procs = names.host_lanes(df["globalTid"])
    args = [{"return": r} for r in df["returnValue"]] if "returnValue" in df else None
    return _table(df, process=procs, track=lanes, name=names.map(df.get("nameId", pd.Series([None] * len(df)))),
                  category=["osrt"] * len(df), args=args)


def _sync(db: Database, table: str | None, names: _Names, runtime: pd.DataFrame | None) -> pd.DataFrame | None:
    """CUDA synchronization on the lane of the runtime call that waited (same correlation id)."""
    if not table:
        return None
    df = db.select(table, ("start", "end", "globalPid", "deviceId", "streamId", "correlationId", "syncType", "eventId"),
                   f"table '{table}'")
    if df.empty:
        return None
    pids = [(int(g) >> 24) & 0xFFFFFF if g is not None and g == g else None for g in df.get("globalPid", [None] * len(df))]
    caller: dict = {}
    if runtime is not None and len(runtime):
        caller = dict(zip(zip(runtime.attrs["pid"], runtime["correlation"].tolist()),
                          zip(runtime["track"].astype(str), runtime["process"].astype(str))))
    corr = df.get("correlationId", pd.Series([None] * len(df))).tolist()
    where = [caller.get((p, c)) or caller.get((None, c)) or (f"process {p} CUDA sync", f"process {p}")
             for p, c in zip(pids, corr)]
    types = df.get("syncType", pd.Series([None] * len(df))).tolist()
    label = [_sync_name(names.sync_types.get(t), t) for t in types]
    return _table(df, process=[w[1] for w in where], track=[w[0] for w in where], name=label,
                  category=["cuda_sync"] * len(df), correlation=corr,
                  device=df.get("deviceId", pd.Series([None] * len(df))).tolist(),
                  stream=df.get("streamId", pd.Series([None] * len(df))).tolist(),
                  args=[{"sync_type": t} for t in types])


def _sync_name(enum_name: str | None, code: Any) -> str:
    if enum_name:  # "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE" -> "Stream synchronize"
        words = re.sub(r"^.*SYNCHRONIZATION_TYPE_", "", enum_name).replace("_", " ").strip().lower()
        return words[:1].upper() + words[1:] if words else f"sync {code}"
    return _SYNC_TYPES.get(code, f"sync {code}")


def _nvtx(db: Database, table: str | None, names: _Names) -> pd.DataFrame | None:
    """NVTX ranges (spans) and marks (instants) on ``NVTX <thread>`` lanes."""
    if not table:
        return None
    df = db.select(table, ("start", "end", "eventType", "text", "textId", "globalTid", "domainId"), f"table '{table}'")
    if df.empty or "eventType" not in df:
        return None
    kinds = names.event_types
    ranges = {i for i, n in kinds.items() if n.endswith("Range")} if kinds else set(_NVTX_RANGES)
    marks = {i for i, n in kinds.items() if n.endswith("Mark")} if kinds else set(_NVTX_MARKS)
    domain_create = next((i for i, n in kinds.items() if n == "NvtxDomainCreate"), _NVTX_DOMAIN)
    domains = {}
    if "domainId" in df:
        created = df[df["eventType"] == domain_create]
        domains = dict(zip(created["domainId"], created.get("text", pd.Series([None] * len(created)))))
    df = df[df["eventType"].isin(ranges | marks)].reset_index(drop=True)
    if df.empty:
        return None
    text = df.get("text", pd.Series([None] * len(df))).tolist()
    text_id = df.get("textId", pd.Series([None] * len(df))).tolist()
    label = [t if isinstance(t, str) else names.text(i) if i is not None and i == i else "nvtx"
             for t, i in zip(text, text_id)]
    is_mark = df["eventType"].isin(marks).to_numpy()
    gtids = df.get("globalTid", pd.Series([None] * len(df)))
    lanes, procs = names.host_lanes(gtids, prefix="NVTX ")
    dom = df.get("domainId", pd.Series([None] * len(df))).tolist()
    args = [{"domain": domains[d]} if d in domains and domains[d] else None for d in dom]
    end = df["end"].where(~pd.Series(is_mark), df["start"]) if "end" in df else df["start"]
    return _table(df.assign(end=end), process=procs, track=lanes, name=label, category=["nvtx"] * len(df),
                  kind=np.where(is_mark, "instant", "span").tolist(), args=args)


def _lane_order(tracks) -> list[str]:
    """Host threads (each followed by its NVTX lane), then GPUs by device and stream."""
    def natural(t: str) -> list:
        return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"[\s()]+", t) if x]

    host = sorted((t for t in tracks if not t.startswith("GPU ")), key=lambda t: (t.removeprefix("NVTX "),
                                                                                  t.startswith("NVTX ")))
    return host + sorted((t for t in tracks if t.startswith("GPU ")), key=natural)
