"""rocprofv3 JSON: the ``rocprofiler-sdk-tool`` document ``rocprofv3 --output-format json`` writes.

``{"rocprofiler-sdk-tool": [one entry per profiled process]}`` (a single object in early
releases). An entry holds ``metadata`` (pid, init/fini time), ``agents`` (CPUs and GPUs, each
``id.handle``), ``kernel_symbols`` (``kernel_id`` -> names), ``strings`` (``buffer_records``:
per record kind its name and operation names; ``marker_api``: roctx messages keyed by
correlation id) and ``buffer_records``: lists of records per kind, each with ``kind``,
``operation`` (indices into those strings), ``thread_id``, ``correlation_id.internal`` and
``start_timestamp``/``end_timestamp`` in ns (the schema: rocprofiler-sdk's
``source/docs/rocprofv3-schema.json``).

Read: ``kernel_dispatch`` (category ``kernel``; lanes ``GPU <n> stream <s>``, or ``queue <q>``
where the records carry no stream, ``n`` the GPU's index among the agents), ``memory_copy``
(``gpu_memcpy`` named as Kineto and nsys name copies, ``Memcpy HtoD``; a copy between two GPUs
is ``Memcpy PtoP``; lane ``GPU <n> copies`` of the destination GPU, else the source),
``marker_api`` (roctx ranges, category ``marker``, named by their message) and ``hip_api``,
``hsa_api`` and ``rccl_api`` calls on ``thread <tid>`` lanes. ``correlation`` is the internal
correlation id (an API call <-> the kernel or copy it launched). Several processes in one
document: lanes are prefixed ``process <pid> · ``. Counter collection, PC samples and
allocation records are not read.

A document with the tool's key but without ``buffer_records`` records of this shape is
refused as "a rocprofv3 JSON document of an unsupported version"; one without kernels,
copies, markers or API calls says what it holds instead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .chrome import read_bytes, read_json
from .model import KERNEL, from_columns, with_depth
from .rocprof import copy_name

FORMAT = "rocprofv3-json"
INFO = Format(
    FORMAT, "rocprofv3 JSON", (".json", ".json.gz"),
    "the rocprofiler-sdk-tool document (rocprofv3 --output-format json, ROCm 6.2 - 7.x)",
    "kernel dispatches (GPU lanes per GPU and stream or queue, names from kernel_symbols), memory copies "
    "(gpu_memcpy; between GPUs: Memcpy PtoP), roctx markers (named by their message), HIP/HSA/RCCL API calls "
    "(thread lanes), agents; correlation ids")
KEY = "rocprofiler-sdk-tool"
_API = {"hip_api": "hip_api", "hsa_api": "hsa_api", "rccl_api": "rccl_api", "marker_api": "marker"}
_GPU_AGENT = 2  # rocprofiler_agent_type_t: ROCPROFILER_AGENT_TYPE_GPU


def detect(head: bytes, name: str) -> bool:
    """A JSON object whose first key is the tool's, as the tool writes it (a gzip's head
    arrives opened); a JSON schema that describes the document is not one."""
    return re.match(rb'\s*\{\s*"' + re.escape(KEY.encode()) + rb'"\s*:', head) is not None


def _unsupported(name: str, why: str) -> TraceError:
    return TraceError(FORMAT, f"{name}: a rocprofv3 JSON document of an unsupported version ({why})")


def _handle(v: Any) -> Any:
    """``{"handle": 5}`` -> 5 (ids are written as one-field objects)."""
    return v.get("handle") if isinstance(v, dict) else v


def _gpu_index(agents: Any) -> dict[Any, int]:
    """Agent handle -> the GPU's index (``gpu_index`` or ``logical_node_type_id`` where the
    release writes them, else its position among the GPU agents)."""
    out: dict[Any, int] = {}
    gpus = [a for a in agents if isinstance(a, dict) and a.get("type") == _GPU_AGENT] if isinstance(agents, list) else []
    for i, a in enumerate(sorted(gpus, key=lambda a: (a.get("node_id", 0) if isinstance(a.get("node_id"), int) else 0))):
        idx = a.get("gpu_index", a.get("logical_node_type_id", i))
        out[_handle(a.get("id"))] = idx if isinstance(idx, int) and not isinstance(idx, bool) else i
    return out


def _kernel_names(symbols: Any) -> dict[Any, str]:
    """kernel_id -> name (formatted, else demangled, else the symbol), from a list or an object."""
    items = symbols.values() if isinstance(symbols, dict) else symbols if isinstance(symbols, list) else []
    out = {}
    for s in items:
        if isinstance(s, dict):
            out[s.get("kernel_id")] = str(s.get("formatted_kernel_name") or s.get("demangled_kernel_name")
                                          or s.get("kernel_name") or f"kernel {s.get('kernel_id')}")
    return out


def _op_names(strings: Any) -> list[tuple[str, list]]:
    """Per record kind (by index): its name and its operations' names."""
    recs = strings.get("buffer_records") if isinstance(strings, dict) else None
    out = []
    for r in recs if isinstance(recs, list) else []:
        ops = r.get("operations") if isinstance(r, dict) else None
        out.append((str(r.get("kind", "")) if isinstance(r, dict) else "", ops if isinstance(ops, list) else []))
    return out


def _op(ops: list[tuple[str, list]], kind: Any, op: Any) -> str | None:
    if isinstance(kind, int) and 0 <= kind < len(ops) and isinstance(op, int) and 0 <= op < len(ops[kind][1]):
        return str(ops[kind][1][op])
    return None


class _Rows:
    """Columns of the span table, appended record by record."""

    def __init__(self):
        self.cols: dict[str, list] = {c: [] for c in ("process", "track", "device", "stream", "name", "category",
                                                      "start", "end", "correlation", "args")}
        self.bad = 0

    def add(self, rec: dict, **cols: Any) -> None:
        start, end = rec.get("start_timestamp"), rec.get("end_timestamp")
        if type(start) is not int or type(end) is not int:
            self.bad += 1
            return
        corr = rec.get("correlation_id")
        cols.setdefault("correlation", corr.get("internal") if isinstance(corr, dict) else None)
        for c, v in cols.items():
            self.cols[c].append(v)
        self.cols["start"].append(start)
        self.cols["end"].append(end)
        n = len(self.cols["start"])
        for c in self.cols.values():
            if len(c) < n:
                c.append(None)


def _entry(entry: dict, rows: _Rows, prefix: str, name: str) -> None:
    """One process's records into ``rows``."""
    buffers = entry.get("buffer_records")
    if not isinstance(buffers, dict):
        raise _unsupported(name, "no 'buffer_records' object")
    gpu = _gpu_index(entry.get("agents"))
    kernels = _kernel_names(entry.get("kernel_symbols"))
    ops = _op_names(entry.get("strings"))
    messages = {m.get("key"): str(m.get("value")) for m in (entry.get("strings") or {}).get("marker_api") or []
                if isinstance(m, dict)} if isinstance(entry.get("strings"), dict) else {}
    proc = f"{prefix}GPU" if prefix else "GPU"
    for rec in _records(buffers, "kernel_dispatch", name):
        info = rec.get("dispatch_info") if isinstance(rec.get("dispatch_info"), dict) else {}
        dev = gpu.get(_handle(info.get("agent_id")))
        stream = _handle(rec.get("stream_id"))
        lane, q = ("stream", stream) if stream is not None else ("queue", _handle(info.get("queue_id")))
        rows.add(rec, process=proc, track=f"{prefix}GPU {dev} · {lane} {q}", device=dev, stream=q,
                 name=kernels.get(info.get("kernel_id"), f"kernel {info.get('kernel_id')}"), category=KERNEL,
                 args={"thread_id": rec.get("thread_id"), "dispatch_id": info.get("dispatch_id"),
                       "grid": _xyz(info.get("grid_size")), "workgroup": _xyz(info.get("workgroup_size"))})
    for rec in _records(buffers, "memory_copy", name):
        src, dst = gpu.get(_handle(rec.get("src_agent_id"))), gpu.get(_handle(rec.get("dst_agent_id")))
        op = _op(ops, rec.get("kind"), rec.get("operation")) or ""
        label = "Memcpy PtoP" if src is not None and dst is not None and src != dst else copy_name(op)
        dev = dst if dst is not None else src
        rows.add(rec, process=proc, track=f"{prefix}GPU {dev} · copies" if dev is not None else f"{prefix}copies",
                 device=dev, name=label, category="gpu_memcpy",
                 args={"bytes": rec.get("bytes"), "direction": op, "src_gpu": src, "dst_gpu": dst})
    for key, category in _API.items():
        for rec in _records(buffers, key, name):
            corr = rec.get("correlation_id")
            internal = corr.get("internal") if isinstance(corr, dict) else None
            op = _op(ops, rec.get("kind"), rec.get("operation")) or key
            label = messages.get(internal, op) if key == "marker_api" else op
            rows.add(rec, process=f"{prefix}process", track=f"{prefix}thread {rec.get('thread_id')}", name=label,
                     category=category, args={"operation": op} if label != op else None)


def _records(buffers: dict, key: str, name: str) -> list:
    recs = buffers.get(key)
    if recs is None:
        return []
    if not isinstance(recs, list):
        raise _unsupported(name, f"'buffer_records.{key}' is not a list")
    return [r for r in recs if isinstance(r, dict)]


def _xyz(v: Any) -> list | None:
    return [v.get("x"), v.get("y"), v.get("z")] if isinstance(v, dict) else None


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a rocprofv3 JSON document (see the module docstring)."""
    p = Path(path)
    data = read_bytes(p)
    try:
        import orjson

        doc = orjson.loads(data)
    except (ImportError, ValueError):  # no orjson, or not valid JSON: the json module says where
        doc, _ = read_json(data, p.name)
    del data
    if not isinstance(doc, dict) or KEY not in doc:
        raise TraceError(FORMAT, f"{p.name}: no '{KEY}' object")
    entries = doc[KEY]
    entries = [entries] if isinstance(entries, dict) else entries
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _unsupported(p.name, f"'{KEY}' is neither a list of process entries nor one entry")
    rows = _Rows()
    pids = []
    for e in entries:
        meta = e.get("metadata") if isinstance(e.get("metadata"), dict) else {}
        pids.append(meta.get("pid"))
        _entry(e, rows, f"process {meta.get('pid')} · " if len(entries) > 1 else "", p.name)
    c = rows.cols
    if not c["start"]:
        held = sorted({k for e in entries for k, v in (e.get("buffer_records") or {}).items() if v})
        raise TraceError(FORMAT, f"{p.name}: a rocprofv3 JSON document without kernel dispatches, memory copies, "
                                 f"markers or API calls" + (f" (it holds: {', '.join(held)})" if held else
                                                            " (every record list is empty)"))
    start = np.array(c.pop("start"), dtype=np.int64)
    end = np.array(c.pop("end"), dtype=np.int64)
    df = from_columns({**c, "start_ns": start, "dur_ns": np.maximum(end - start, 0)}, n=len(start),
                      source=FORMAT, track_order=_threads_first(list(dict.fromkeys(c["track"]))))
    return with_depth(df), {"clock": "ns (rocprofiler-sdk timestamps)", "processes": pids,
                            "malformed_events": rows.bad, "negative_durations": int((end < start).sum())}


def _threads_first(tracks: list[str]) -> list[str]:
    """Thread lanes in order of appearance, then GPU lanes by GPU and stream (as rocpd's)."""
    host = [t for t in tracks if "thread " in t]
    return host + sorted((t for t in tracks if t not in host), key=_natural)


def _natural(s: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]
