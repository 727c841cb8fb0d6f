"""ROCm profiler CSV: rocprofv3 traces and rocprof v1 ``results.csv``.

rocprofv3 writes one CSV per trace kind (``<pid>_kernel_trace.csv``, ``_hip_api_trace.csv``,
``_hsa_api_trace.csv``, ``_marker_api_trace.csv``, ``_memory_copy_trace.csv``); the kind is
recognised from the header, and columns are matched by name because releases add columns
(``Stream_Id``, ``LDS_Block_Size``, VGPR/SGPR counts) and changed ``Agent_Id`` from an integer
to a string like ``"Agent 2"``. Timestamps are ns. Since ROCm 7 the default output is a
SQLite "rocpd" database; ``rocpd convert -f csv`` produces these files.

rocprof v1 ``results.csv`` has one row per kernel dispatch with ``KernelName``, ``gpu-id``,
``queue-id``, ``pid``, ``tid`` and ``BeginNs``/``EndNs``.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .model import KERNEL, from_columns, with_depth

FORMAT = "rocprof-csv"
INFO = Format(FORMAT, "rocprof CSV", (".csv",), "", "")

_KINDS = {
    # kind: columns that identify it (all must be present)
    "kernel": {"Kernel_Name", "Start_Timestamp", "End_Timestamp"},
    "memory_copy": {"Direction", "Start_Timestamp", "End_Timestamp"},
    "api": {"Function", "Start_Timestamp", "End_Timestamp"},
    "v1": {"KernelName", "BeginNs", "EndNs"},
}
_DOMAIN_CATS = {"HIP_RUNTIME_API": "hip_api", "HIP_COMPILER_API": "hip_api", "HSA_CORE_API": "hsa_api",
                "HSA_AMD_EXT_API": "hsa_api", "HSA_IMAGE_EXT_API": "hsa_api", "HSA_FINALIZE_EXT_API": "hsa_api",
                "MARKER_CORE_API": "marker", "MARKER_CONTROL_API": "marker", "MARKER_NAME_API": "marker",
                "ROCTX": "marker"}


def _header(head: bytes) -> list[str]:
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip().lstrip("\ufeff")
    return next(csv.reader([line]), [])


def _kind(cols: list[str]) -> str | None:
    s = {c.strip() for c in cols}
    for kind, need in _KINDS.items():
        if need <= s:
            return kind
    return None


def detect(head: bytes, name: str) -> bool:
    """A CSV whose header has one of the rocprofv3 / rocprof v1 column sets (or, for a damaged
    header, a rocprof file name, so load() can say what is wrong)."""
    if _kind(_header(head)) is not None:
        return True
    return bool(re.search(r"(_(kernel|hip_api|hsa_api|marker_api|memory_copy)_trace|^results)\.csv$", name))


def _int(v: Any) -> int | None:
    """Integers as written by any release ("2", "Agent 2", "0x1f", "")."""
    if v is None:
        return None
    s = str(v).strip()
    if not s:
        return None
    m = re.search(r"-?\d+", s) if not s.lower().startswith("0x") else None
    try:
        return int(s, 16) if s.lower().startswith("0x") else int(m.group()) if m else None
    except ValueError:
        return None


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read one rocprofv3 trace CSV or a rocprof v1 results.csv."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(FORMAT, f"{p.name}: not UTF-8 text (byte {exc.start})") from None
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows:
        raise TraceError(FORMAT, f"{p.name}: empty CSV")
    header = [c.strip() for c in rows[0]]
    kind = _kind(header)
    if kind is None:
        raise TraceError(FORMAT, f"{p.name}: header matches no rocprof trace column set")
    data = rows[1:]
    if not text.endswith("\n") and data:
        # a file cut mid-row: the last row is partial (too few fields or a cut number)
        raise TraceError(FORMAT, f"{p.name}: truncated (last line has no newline)")
    bad = [i + 2 for i, r in enumerate(data) if len(r) != len(header) and any(x.strip() for x in r)]
    if bad:
        raise TraceError(FORMAT, f"{p.name}: row {bad[0]} has a different field count than the header "
                                 f"({len(header)} columns)")
    data = [r for r in data if any(x.strip() for x in r)]
    if not data:
        raise TraceError(FORMAT, f"{p.name}: no rows")
    col = {c: i for i, c in enumerate(header)}

    def get(name: str, default: str = "") -> list[str]:
        i = col.get(name)
        return [r[i] for r in data] if i is not None else [default] * len(data)

    start_key, end_key = ("BeginNs", "EndNs") if kind == "v1" else ("Start_Timestamp", "End_Timestamp")
    try:
        start = np.array([int(x) for x in get(start_key)], dtype=np.int64)
        end = np.array([int(x) for x in get(end_key)], dtype=np.int64)
    except ValueError as exc:
        raise TraceError(FORMAT, f"{p.name}: non-integer timestamp ({exc})") from None
    n = len(data)
    if kind in ("kernel", "memory_copy", "v1"):
        if kind == "v1":
            dev = [_int(x) for x in get("gpu-id")]
            queue = [_int(x) for x in get("queue-id")]
            names = get("KernelName")
            cats = [KERNEL] * n
            corr = [_int(x) for x in get("Index")]
        elif kind == "kernel":
            dev = [_int(x) for x in get("Agent_Id")]
            stream_col = "Stream_Id" if "Stream_Id" in col else "Queue_Id"
            queue = [_int(x) for x in get(stream_col)]
            names = get("Kernel_Name")
            cats = [KERNEL] * n
            corr = [_int(x) for x in get("Correlation_Id")]
        else:
            dev = [_int(x) for x in get("Destination_Agent_Id")]
            queue = [_int(x) for x in get("Stream_Id")] if "Stream_Id" in col else [None] * n
            names = [f"memcpy {d}".strip() for d in get("Direction")]
            cats = ["memcpy"] * n
            corr = [_int(x) for x in get("Correlation_Id")]
        lane = "stream" if kind == "kernel" and "Stream_Id" in col else "queue"
        tracks = [f"GPU {d} {lane} {q}" if kind != "memory_copy" else
                  (f"copy stream {q}" if q is not None else "copies") for d, q in zip(dev, queue)]
        extra_cols = [c for c in header if c not in (start_key, end_key)]
        args = [{c: r[col[c]] for c in extra_cols} for r in data]
        df = from_columns({"process": ["GPU"] * n, "track": tracks, "device": dev, "stream": queue, "name": names,
                           "category": cats, "start_ns": start, "dur_ns": np.maximum(end - start, 0),
                           "correlation": corr, "args": args}, n=n, source=FORMAT,
                          track_order=sorted(set(tracks), key=_natural))
    else:
        domains = get("Domain")
        pids, tids = get("Process_Id"), get("Thread_Id")
        tracks = [f"thread {t}" for t in tids]
        cats = [_DOMAIN_CATS.get(d.strip(), d.strip().lower() or "api") for d in domains]
        names = get("Function")
        args = [{"domain": d, **({"message": m} if m else {})} for d, m in zip(domains, get("Message"))]
        df = from_columns({"process": [f"process {x}" for x in pids], "track": tracks, "name": names,
                           "category": cats, "start_ns": start, "dur_ns": np.maximum(end - start, 0),
                           "correlation": [_int(x) for x in get("Correlation_Id")], "args": args},
                          n=n, source=FORMAT, track_order=list(dict.fromkeys(tracks)))
    df = with_depth(df)
    return df, {"clock": "ns (rocprof timestamps)", "rocprof_kind": kind, "columns": header}


def _natural(s: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]
