"""ROCm profiler CSV: rocprofv3 traces and counter collection, rocprof v1 ``results.csv``.

rocprofv3 writes one CSV per trace kind (``<pid>_kernel_trace.csv``, ``_hip_api_trace.csv``,
``_hsa_api_trace.csv``, ``_marker_api_trace.csv``, ``_rccl_api_trace.csv``,
``_memory_copy_trace.csv``, ``_memory_allocation_trace.csv``, ``_scratch_memory_trace.csv``,
``_counter_collection.csv``); the kind is recognised from the header, and columns are matched
by name because releases add columns (``Guid``, ``Stream_Id``, ``LDS_Block_Size``, VGPR/SGPR
counts) and changed ``Agent_Id`` from an integer to a string like ``"Agent 2"``. Timestamps
are ns. Since ROCm 7 the default output is a rocpd database (:mod:`.rocpd` reads it); these
files come from ``rocprofv3 --output-format csv`` or ``rocpd convert -f csv``.

Copies are category ``gpu_memcpy`` (as Kineto and nsys name them). A counter-collection file
has one row per counter per dispatch: rows of one dispatch become one kernel span with the
counters in ``args["counters"]``; files without timestamps (ROCm 6) and the per-name stats
files (``*_stats.csv``), ``agent_info.csv`` and PC-sampling files hold no spans and are refused
with a message naming the file kind.

The last line may lack its newline (rocprofv3 writes some files that way): only a row with a
different field count than the header is a truncation.

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
INFO = Format(
    FORMAT, "rocprof CSV", (".csv",),
    "rocprofv3 (ROCm 6.2 - 7.x, direct or `rocpd convert`); rocprof v1 results.csv",
    "kernel dispatches (GPU lanes per agent and queue or stream), HIP/HSA/marker/RCCL API calls (thread "
    "lanes), memory copies (gpu_memcpy), memory allocations and scratch, counter collection (one kernel "
    "span per dispatch, counters in args), correlation ids; stats/agent-info CSVs refused by kind")

_START, _END = "Start_Timestamp", "End_Timestamp"
#: kind -> columns that identify it (all must be present), tested in this order
_KINDS = {
    "counter_collection": {"Counter_Name", "Counter_Value"},
    "kernel": {"Kernel_Name", _START, _END},
    "memory_copy": {"Direction", _START, _END},
    "memory_allocation": {"Operation", "Allocation_Size", _START, _END},
    "scratch_memory": {"Operation", "Alloc_Flags", _START, _END},
    "api": {"Function", _START, _END},
    "v1": {"KernelName", "BeginNs", "EndNs"},
    # no spans in these: recognised so the refusal can name them
    "stats": {"Name", "Calls", "TotalDurationNs"},
    "agent_info": {"Logical_Node_Id", "Agent_Type"},
    "pc_sampling": {"Exec_Mask"},
}
_NO_SPANS = {
    "stats": "a rocprofv3 stats CSV (per-name totals, no timestamps); import the matching *_trace.csv",
    "agent_info": "rocprofv3's agent_info.csv (device descriptions, no events); import a *_trace.csv",
    "pc_sampling": "a rocprofv3 PC-sampling CSV (instruction samples, not spans)",
    "counter_collection": "a rocprofv3 counter_collection.csv without Start/End_Timestamp columns (ROCm 6); "
                          "collect with ROCm 7 or import the kernel_trace.csv of the run",
}
_DOMAIN_CATS = {"HIP_RUNTIME_API": "hip_api", "HIP_COMPILER_API": "hip_api", "HSA_CORE_API": "hsa_api",
                "HSA_AMD_EXT_API": "hsa_api", "HSA_IMAGE_EXT_API": "hsa_api", "HSA_FINALIZE_EXT_API": "hsa_api",
                "MARKER_CORE_API": "marker", "MARKER_CONTROL_API": "marker", "MARKER_NAME_API": "marker",
                "MARKER_CORE_RANGE_API": "marker", "ROCTX": "marker", "RCCL_API": "rccl_api"}
_FILE_KINDS = r"(kernel|hip_api|hsa_api|marker_api|rccl_api|memory_copy|memory_allocation|scratch_memory)_trace"


_DIRECTIONS = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
               "HOST_TO_HOST": "HtoH", "PEER_TO_PEER": "PtoP"}


def copy_name(direction: str) -> str:
    """"MEMORY_COPY_HOST_TO_DEVICE" -> "Memcpy HtoD" (the names Kineto and nsys give copies)."""
    d = re.sub(r"^MEMORY_COPY_", "", str(direction or "").strip())
    return f"Memcpy {_DIRECTIONS.get(d, d.replace('_', ' ').lower())}".strip()


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
    return bool(re.search(rf"(_{_FILE_KINDS}|_counter_collection|^results)\.csv$", name))


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


class _Rows:
    """A CSV file's header and rows, with column access by name."""

    def __init__(self, header: list[str], data: list[list[str]], name: str):
        self.header, self.data, self.name = header, data, name
        self.col = {c: i for i, c in enumerate(header)}
        self.n = len(data)

    def get(self, column: str, default: str = "") -> list[str]:
        i = self.col.get(column)
        return [r[i] for r in self.data] if i is not None else [default] * self.n

    def ints(self, column: str) -> list[int | None]:
        return [_int(x) for x in self.get(column)]

    def times(self, start: str, end: str) -> tuple[np.ndarray, np.ndarray]:
        try:
            return (np.array([int(x) for x in self.get(start)], dtype=np.int64),
                    np.array([int(x) for x in self.get(end)], dtype=np.int64))
        except (ValueError, OverflowError) as exc:
            raise TraceError(FORMAT, f"{self.name}: non-integer timestamp ({exc})") from None

    def args(self, skip: tuple[str, ...] = (_START, _END)) -> list[dict]:
        keep = [(c, i) for c, i in self.col.items() if c not in skip]
        return [{c: r[i] for c, i in keep} for r in self.data]


def _read(p: Path) -> tuple[_Rows, str]:
    text = p.read_bytes().decode("utf-8", "replace")  # a stray non-UTF-8 byte in a kernel name: U+FFFD
    try:
        rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    except csv.Error as exc:
        raise TraceError(FORMAT, f"{p.name}: malformed CSV ({exc})") from None
    if not rows:
        raise TraceError(FORMAT, f"{p.name}: empty CSV")
    header = [c.strip() for c in rows[0]]
    kind = _kind(header)
    if kind is None:
        raise TraceError(FORMAT, f"{p.name}: header matches no rocprof trace column set")
    if kind in _NO_SPANS and kind != "counter_collection":
        raise TraceError(FORMAT, f"{p.name}: {_NO_SPANS[kind]}")
    if kind == "counter_collection" and not {_START, _END} <= set(header):
        raise TraceError(FORMAT, f"{p.name}: {_NO_SPANS[kind]}")
    data = [r for r in rows[1:] if any(x.strip() for x in r)]
    # a complete last line may lack its newline; a cut one has fewer fields than the header
    bad = next((i for i, r in enumerate(rows[1:]) if len(r) != len(header) and any(x.strip() for x in r)), None)
    if bad is not None:
        last = bad == len(rows) - 2
        raise TraceError(FORMAT, f"{p.name}: " + ("truncated (the last row has {got} of {want} fields)" if last else
                                                  "row {row} has {got} fields, the header {want}").format(
            got=len(rows[bad + 1]), want=len(header), row=bad + 2))
    if not data:
        raise TraceError(FORMAT, f"{p.name}: no rows")
    return _Rows(header, data, p.name), kind


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read one rocprofv3 CSV or a rocprof v1 results.csv."""
    p = Path(path)
    rows, kind = _read(p)
    builder = {"kernel": _kernels, "v1": _kernels_v1, "memory_copy": _copies, "memory_allocation": _allocations,
               "scratch_memory": _allocations, "api": _api_calls, "counter_collection": _counters}[kind]
    cols, order = builder(rows)
    start, end = cols.pop("start"), cols.pop("end")
    negative = int((end < start).sum())
    df = from_columns({**cols, "start_ns": start, "dur_ns": np.maximum(end - start, 0)}, n=len(start),
                      source=FORMAT, track_order=order)
    df = with_depth(df)
    return df, {"clock": "ns (rocprof timestamps)", "rocprof_kind": kind, "columns": rows.header,
                "negative_durations": negative}


def _gpu_lanes(dev: list, queue: list, lane: str) -> tuple[list[str], list[str]]:
    tracks = [f"GPU {d} · {lane} {q}" for d, q in zip(dev, queue)]
    return tracks, sorted(set(tracks), key=_natural)


def _kernels(rows: _Rows) -> tuple[dict, list[str]]:
    """kernel_trace.csv: lanes per agent and stream (when the file has streams) or queue."""
    dev = rows.ints("Agent_Id")
    streams = "Stream_Id" in rows.col
    queue = rows.ints("Stream_Id" if streams else "Queue_Id")
    tracks, order = _gpu_lanes(dev, queue, "stream" if streams else "queue")
    start, end = rows.times(_START, _END)
    return {"process": ["GPU"] * rows.n, "track": tracks, "device": dev, "stream": queue,
            "name": rows.get("Kernel_Name"), "category": [KERNEL] * rows.n, "start": start, "end": end,
            "correlation": rows.ints("Correlation_Id"), "args": rows.args()}, order


def _kernels_v1(rows: _Rows) -> tuple[dict, list[str]]:
    dev, queue = rows.ints("gpu-id"), rows.ints("queue-id")
    tracks, order = _gpu_lanes(dev, queue, "queue")
    start, end = rows.times("BeginNs", "EndNs")
    return {"process": ["GPU"] * rows.n, "track": tracks, "device": dev, "stream": queue,
            "name": rows.get("KernelName"), "category": [KERNEL] * rows.n, "start": start, "end": end,
            "correlation": rows.ints("Index"), "args": rows.args(("BeginNs", "EndNs"))}, order


def _copies(rows: _Rows) -> tuple[dict, list[str]]:
    """memory_copy_trace.csv: ``gpu_memcpy`` spans on the destination agent's copy lane."""
    dev = rows.ints("Destination_Agent_Id")
    stream = rows.ints("Stream_Id") if "Stream_Id" in rows.col else [None] * rows.n
    tracks = [f"copy stream {q}" if q is not None else "copies" for q in stream]
    start, end = rows.times(_START, _END)
    return {"process": ["GPU"] * rows.n, "track": tracks, "device": dev, "stream": stream,
            "name": [copy_name(d) for d in rows.get("Direction")], "category": ["gpu_memcpy"] * rows.n, "start": start,
            "end": end, "correlation": rows.ints("Correlation_Id"), "args": rows.args()}, sorted(set(tracks),
                                                                                               key=_natural)


def _allocations(rows: _Rows) -> tuple[dict, list[str]]:
    """memory_allocation / scratch_memory traces: spans per agent (``memory_allocation`` category)."""
    scratch = "Alloc_Flags" in rows.col
    dev = rows.ints("Agent_Id")
    tracks = [f"GPU {d} · {'scratch' if scratch else 'memory'}" if d is not None else "host memory" for d in dev]
    start, end = rows.times(_START, _END)
    return {"process": ["GPU"] * rows.n, "track": tracks, "device": dev,
            "stream": rows.ints("Queue_Id") if "Queue_Id" in rows.col else [None] * rows.n,
            "name": rows.get("Operation"), "category": ["scratch_memory" if scratch else "memory_allocation"] * rows.n,
            "start": start, "end": end, "correlation": rows.ints("Correlation_Id"), "args": rows.args()}, \
        sorted(set(tracks), key=_natural)


def _api_calls(rows: _Rows) -> tuple[dict, list[str]]:
    """HIP/HSA/marker/RCCL API traces: spans on the calling thread's lane."""
    domains = rows.get("Domain")
    tracks = [f"thread {t}" for t in rows.get("Thread_Id")]
    messages = rows.get("Message")
    start, end = rows.times(_START, _END)
    return {"process": [f"process {x}" for x in rows.get("Process_Id")], "track": tracks,
            "name": rows.get("Function"), "category": [_DOMAIN_CATS.get(d.strip(), d.strip().lower() or "api")
                                                       for d in domains],
            "start": start, "end": end, "correlation": rows.ints("Correlation_Id"),
            "args": [{"domain": d, **({"message": m} if m else {})} for d, m in zip(domains, messages)]}, \
        list(dict.fromkeys(tracks))


def _counters(rows: _Rows) -> tuple[dict, list[str]]:
    """counter_collection.csv (ROCm 7): one kernel span per dispatch, its counters in args."""
    key_cols = [c for c in ("Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Kernel_Name", _START, _END)
                if c in rows.col]
    per_row = ("Counter_Name", "Counter_Value")
    groups: dict[tuple, dict] = {}
    for r in rows.data:
        key = tuple(r[rows.col[c]] for c in key_cols)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {c: r[i] for c, i in rows.col.items() if c not in per_row and c not in (_START, _END)}
            g["counters"] = {}
        value = r[rows.col["Counter_Value"]]
        try:
            g["counters"][r[rows.col["Counter_Name"]]] = float(value)
        except ValueError:
            g["counters"][r[rows.col["Counter_Name"]]] = value
    firsts = _Rows(key_cols, [list(k) for k in groups], rows.name)
    dev, queue = firsts.ints("Agent_Id"), firsts.ints("Queue_Id")
    tracks, order = _gpu_lanes(dev, queue, "queue")
    start, end = firsts.times(_START, _END)
    return {"process": ["GPU"] * firsts.n, "track": tracks, "device": dev, "stream": queue,
            "name": firsts.get("Kernel_Name"), "category": [KERNEL] * firsts.n, "start": start, "end": end,
            "correlation": firsts.ints("Correlation_Id"), "args": list(groups.values())}, order


def _natural(s: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]
