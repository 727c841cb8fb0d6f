"""Nsight Systems SQLite export (``nsys export --type sqlite`` / ``nsys profile --export=sqlite``).

Tables read (each optional): ``CUPTI_ACTIVITY_KIND_KERNEL`` (category ``kernel``),
``CUPTI_ACTIVITY_KIND_RUNTIME`` (``cuda_runtime``), ``CUPTI_ACTIVITY_KIND_MEMCPY`` /
``_MEMSET`` (``gpu_memcpy`` / ``gpu_memset``), ``NVTX_EVENTS`` (``nvtx`` ranges and marks),
with names from ``StringIds`` and thread names from ``ThreadNames``. Times are ns from the
session start. Host threads are ``globalTid``: pid = (globalTid >> 24) & 0xFFFFFF,
tid = globalTid & 0xFFFFFF. The database is opened read-only.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .model import KERNEL, concat, from_columns, with_depth

FORMAT = "nsys-sqlite"
INFO = Format(FORMAT, "Nsight Systems SQLite export", (".sqlite",), "", "")
SQLITE_MAGIC = b"SQLite format 3\x00"
_NVTX_RANGES = (59, 60, 70, 71)  # push/pop and start/end ranges (incl. payload variants)
_NVTX_MARKS = (34, 75)
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 8: "DtoD", 10: "PtoP"}  # CUpti_ActivityMemcpyKind


def detect(head: bytes, name: str) -> bool:
    """Any SQLite database (load explains when it is not an nsys export)."""
    return head.startswith(SQLITE_MAGIC)


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read kernels, runtime calls, memcpy/memset and NVTX from an nsys SQLite export."""
    p = Path(path)
    try:
        con = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TraceError(FORMAT, f"{p.name}: cannot open ({exc})") from None
    try:
        return _read(con, p.name)
    except sqlite3.DatabaseError as exc:
        raise TraceError(FORMAT, f"{p.name}: corrupted or truncated database ({exc})") from None
    finally:
        con.close()


def _read(con: sqlite3.Connection, name: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    tables = _tables(con)
    wanted = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS"}
    if not tables & wanted:
        hint = (" (a rocpd database: convert it with 'rocpd convert -f csv')" if any("rocpd" in t for t in tables)
                else "")
        raise TraceError(FORMAT, f"{name}: SQLite database without Nsight Systems tables{hint}")
    strings = dict(con.execute("SELECT id, value FROM StringIds")) if "StringIds" in tables else {}
    thread_names: dict[int, str] = {}
    if "ThreadNames" in tables:
        for name_id, gtid in con.execute("SELECT nameId, globalTid FROM ThreadNames"):
            thread_names[gtid] = strings.get(name_id, "")
    parts: list[pd.DataFrame] = []

    def host_track(gtid: int | None) -> str:
        if gtid is None:
            return "host"
        tid = gtid & 0xFFFFFF
        tn = thread_names.get(gtid)
        return f"{tn} ({tid})" if tn else f"thread {tid}"

    def process(gtid: int | None) -> str:
        return f"process {(gtid >> 24) & 0xFFFFFF}" if gtid is not None else "host"

    for table, cat in (("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL), ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy"),
                       ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset")):
        if table not in tables:
            continue
        cols = _columns(con, table)
        name_col = next((c for c in ("demangledName", "shortName", "name") if c in cols), None)
        extra = [c for c in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "bytes",
                             "copyKind") if c in cols]
        sel = ", ".join(["start", "end", "deviceId", "streamId", "correlationId",
                         name_col or "NULL"] + extra)
        rows = con.execute(f"SELECT {sel} FROM {table} ORDER BY start").fetchall()
        if not rows:
            continue
        a = list(zip(*rows))
        n = len(rows)
        if cat == KERNEL:
            names = [strings.get(v, str(v)) for v in a[5]]
        elif cat == "gpu_memcpy":
            kinds = a[6 + extra.index("copyKind")] if "copyKind" in extra else [None] * n
            names = [f"Memcpy {_COPY_KINDS.get(k, k)}" if k is not None else "Memcpy" for k in kinds]
        else:
            names = ["Memset"] * n
        args = [dict(zip(extra, r[6:])) or None for r in rows]
        tracks = [f"GPU {d} stream {s}" for d, s in zip(a[2], a[3])]
        parts.append(from_columns({
            "process": [f"GPU {d}" for d in a[2]], "track": tracks, "device": list(a[2]), "stream": list(a[3]),
            "name": names, "category": [cat] * n, "start_ns": np.array(a[0], dtype=np.int64),
            "dur_ns": np.maximum(np.array(a[1], dtype=np.int64) - np.array(a[0], dtype=np.int64), 0),
            "correlation": list(a[4]), "args": args}, n=n, source=FORMAT))
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        rows = con.execute("SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                           "ORDER BY start").fetchall()
        if rows:
            a = list(zip(*rows))
            n = len(rows)
            parts.append(from_columns({
                "process": [process(g) for g in a[2]], "track": [host_track(g) for g in a[2]],
                "name": [strings.get(v, str(v)) for v in a[4]], "category": ["cuda_runtime"] * n,
                "start_ns": np.array(a[0], dtype=np.int64),
                "dur_ns": np.maximum(np.array(a[1], dtype=np.int64) - np.array(a[0], dtype=np.int64), 0),
                "correlation": list(a[3])}, n=n, source=FORMAT))
    if "NVTX_EVENTS" in tables:
        cols = _columns(con, "NVTX_EVENTS")
        text_id = "textId" if "textId" in cols else "NULL"
        rows = con.execute(f"SELECT start, end, eventType, text, {text_id}, globalTid FROM NVTX_EVENTS "
                           "ORDER BY start").fetchall()
        rows = [r for r in rows if r[2] in _NVTX_RANGES + _NVTX_MARKS]
        if rows:
            a = list(zip(*rows))
            n = len(rows)
            st = np.array(a[0], dtype=np.int64)
            en = np.array([e if e is not None else s for s, e in zip(a[0], a[1])], dtype=np.int64)
            marks = np.array([t in _NVTX_MARKS for t in a[2]])
            parts.append(from_columns({
                "process": [process(g) for g in a[5]], "track": [f"NVTX {host_track(g)}" for g in a[5]],
                "name": [t if t is not None else strings.get(i, "nvtx") for t, i in zip(a[3], a[4])],
                "category": ["nvtx"] * n, "start_ns": st, "dur_ns": np.where(marks, 0, np.maximum(en - st, 0)),
                "kind": np.where(marks, "instant", "span").tolist()}, n=n, source=FORMAT))
    if not parts:
        raise TraceError(FORMAT, f"{name}: the export has no kernel, runtime, memcpy, memset or NVTX rows")
    df = concat(parts)
    # lanes: host threads (NVTX next to their thread), then GPUs by device and stream
    order = sorted(df["track"].cat.categories, key=lambda t: (t.startswith("GPU"), t.replace("NVTX ", ""),
                                                               t.startswith("NVTX")))
    if any(t.startswith("GPU") for t in order):
        gpu = sorted([t for t in order if t.startswith("GPU")], key=lambda t: [int(x) if x.isdigit() else x
                                                                                for x in t.split()])
        order = [t for t in order if not t.startswith("GPU")] + gpu
    df["track"] = df["track"].cat.set_categories(order, ordered=True)
    df = with_depth(df)
    meta: dict[str, Any] = {"clock": "ns from the nsys session start", "tables": sorted(tables & wanted)}
    if "EXPORT_META_DATA" in tables:
        meta["export"] = {k: v for k, v in con.execute("SELECT name, value FROM EXPORT_META_DATA")}
    if "TARGET_INFO_GPU" in tables and "name" in _columns(con, "TARGET_INFO_GPU"):
        meta["gpus"] = [r[0] for r in con.execute("SELECT name FROM TARGET_INFO_GPU")]
    return df, meta
