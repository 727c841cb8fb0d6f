"""Chrome trace JSON: torch.profiler / Kineto (CUDA and ROCm), rocprof v1 ``results.json``.

Accepted shapes: ``{"traceEvents": [...], ...}`` or a bare array (possibly unterminated, as
the format allows), plain or gzipped. ``ts``/``dur`` are microseconds, floats carrying ns
fractions in recent PyTorch, strings in rocprof v1 (which also starts with an empty ``{}``
event). Kineto writes ``ts`` relative to ``baseTimeNanoseconds``; it is added back so
``start_ns`` is wall-clock ns and two ranks' traces line up.

Events used: ``X`` (complete), ``B``/``E`` (paired per thread), ``i``/``I``/``R`` (instants),
``b``/``e`` (async spans, paired by id), ``M`` (process/thread names and sort indices, which
set lane names and order). Flows and counters are counted in ``meta`` only.

Kineto GPU events have ``pid`` = device and ``tid`` = stream; their category is kept as
Kineto writes it (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ...). Older Kineto spelled the
categories ``Kernel``/``Memcpy``/``Memset``/``Runtime``/``Operator``; rocprof v1 has no
categories, so they come from the process name (``GPU0`` -> ``kernel``, ``COPY`` ->
``gpu_memcpy``, ``HIP``/``HSA`` -> ``hip_api``/``hsa_api``).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import TraceError
from .model import KERNEL, from_columns, with_depth

FORMAT = "chrome-json"
_OLD_CATS = {"Kernel": KERNEL, "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
             "Operator": "cpu_op", "Trace": "trace"}
_GPU_CATS = {KERNEL, "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}


def detect(head: bytes, name: str) -> bool:
    """JSON whose first value is an array of events or an object with ``traceEvents``."""
    s = head.lstrip()
    if s[:1] == b"[":
        return bool(re.match(rb"\[\s*(\{|\]|$)", s[:64]))
    if s[:1] == b"{":
        return b'"traceEvents"' in head or b'"ph"' in s[:2000]
    return False


def read_json(path: Path) -> Any:
    """Decode (gzip aware) and parse, closing an unterminated bare array."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(FORMAT, f"{path.name}: truncated or corrupted gzip ({exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(FORMAT, f"{path.name}: not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        stripped = text.rstrip().rstrip(",")
        if stripped.lstrip().startswith("[") and not stripped.endswith("]"):
            try:  # the trace event format allows omitting the closing bracket
                return json.loads(stripped + "]")
            except json.JSONDecodeError:
                pass
        where = "truncated" if exc.pos >= len(text.rstrip()) - 1 else f"invalid JSON at char {exc.pos}"
        raise TraceError(FORMAT, f"{path.name}: {where} ({exc.msg})") from None


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a Chrome trace JSON file (see module docstring)."""
    p = Path(path)
    doc = read_json(p)
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            raise TraceError(FORMAT, f"{p.name}: object has no 'traceEvents' list")
        base_ns = doc.get("baseTimeNanoseconds") or 0
        try:
            base_ns = int(base_ns)
        except (TypeError, ValueError):
            raise TraceError(FORMAT, f"{p.name}: baseTimeNanoseconds is not an integer") from None
        extra = {k: v for k, v in doc.items() if k in ("deviceProperties", "distributedInfo", "schemaVersion",
                                                          "traceName", "displayTimeUnit")}
    elif isinstance(doc, list):
        events, base_ns, extra = doc, 0, {}
    else:
        raise TraceError(FORMAT, f"{p.name}: top-level JSON is a {type(doc).__name__}, not an event list")
    return parse_events(events, base_ns, p.name, extra)


def _us_to_ns(v: Any) -> int:
    # floats keep ns fractions; strings (rocprof v1) parse the same way
    return int(round(float(v) * 1000.0))


def parse_events(events: list, base_ns: int = 0, name: str = "", extra: dict | None = None
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Span table from a list of trace events."""
    proc_name: dict[Any, str] = {}
    proc_labels: dict[Any, str] = {}
    thread_name: dict[tuple, str] = {}
    proc_sort: dict[Any, float] = {}
    thread_sort: dict[tuple, float] = {}
    cols: dict[str, list] = {k: [] for k in ("key", "name", "cat", "start", "dur", "corr", "args", "kind")}
    key_, name_, cat_, start_, dur_, corr_, args_, kind_ = (cols[k] for k in cols)
    open_b: dict[tuple, list] = {}
    open_async: dict[tuple, tuple] = {}
    skipped: dict[str, int] = {}
    seen_keys: dict[tuple, None] = {}
    bad = 0
    for ev in events:
        if not isinstance(ev, dict):
            bad += 1
            continue
        ph = ev.get("ph")
        if ph is None:
            continue  # rocprof v1 opens with an empty {} event
        try:
            if ph in ("X", "i", "I", "R"):
                key = (ev.get("pid"), ev.get("tid"))
                args = ev.get("args")
                start_.append(_us_to_ns(ev["ts"]) + base_ns)
                dur_.append(max(_us_to_ns(ev.get("dur", 0)), 0) if ph == "X" else 0)
                kind_.append("span" if ph == "X" else "instant")
            elif ph == "B":
                open_b.setdefault((ev.get("pid"), ev.get("tid")), []).append(ev)
                continue
            elif ph == "E":
                stack = open_b.get((ev.get("pid"), ev.get("tid")))
                if not stack:
                    bad += 1
                    continue
                b = stack.pop()
                key = (b.get("pid"), b.get("tid"))
                args = {**(b.get("args") or {}), **(ev.get("args") or {})} or None
                t0 = _us_to_ns(b["ts"])
                start_.append(t0 + base_ns)
                dur_.append(max(_us_to_ns(ev["ts"]) - t0, 0))
                kind_.append("span")
                ev = b
            elif ph == "b":
                open_async[(ev.get("cat"), ev.get("id"), ev.get("name"))] = ev
                continue
            elif ph == "e":
                b = open_async.pop((ev.get("cat"), ev.get("id"), ev.get("name")), None)
                if b is None:
                    bad += 1
                    continue
                key = (b.get("pid"), f"async {b.get('cat') or ''}".strip())
                args = b.get("args")
                t0 = _us_to_ns(b["ts"])
                start_.append(t0 + base_ns)
                dur_.append(max(_us_to_ns(ev["ts"]) - t0, 0))
                kind_.append("span")
                ev = b
            elif ph == "M":
                a = ev.get("args") or {}
                mname = ev.get("name")
                if mname == "process_name":
                    proc_name[ev.get("pid")] = str(a.get("name", ""))
                elif mname == "process_labels":  # Kineto: "CPU" or "GPU 0" for a device's pid
                    proc_labels[ev.get("pid")] = str(a.get("labels", ""))
                elif mname == "thread_name":
                    thread_name[(ev.get("pid"), ev.get("tid"))] = str(a.get("name", ""))
                elif mname == "process_sort_index":
                    proc_sort[ev.get("pid")] = float(a.get("sort_index", 0))
                elif mname == "thread_sort_index":
                    thread_sort[(ev.get("pid"), ev.get("tid"))] = float(a.get("sort_index", 0))
                continue
            else:
                skipped[ph] = skipped.get(ph, 0) + 1
                continue
        except (KeyError, TypeError, ValueError):
            bad += 1
            continue
        seen_keys.setdefault(key, None)
        key_.append(key)
        name_.append(str(ev.get("name", "")))
        cat_.append(ev.get("cat"))
        a = args if isinstance(args, dict) else None
        corr = a.get("correlation") if a else None
        corr_.append(corr if isinstance(corr, int) and not isinstance(corr, bool) else None)
        args_.append(a)
    unclosed = sum(len(s) for s in open_b.values()) + len(open_async)
    n = len(start_)
    if n == 0:
        raise TraceError(FORMAT, f"{name}: no trace events with timestamps" + (f" ({bad} malformed)" if bad else ""))

    # Lanes: label per (pid, tid), ordered by sort indices then first appearance (as Perfetto does).
    first_pid: dict[Any, int] = {}
    for i, (pid, _tid) in enumerate(seen_keys):
        first_pid.setdefault(pid, i)
    appearance = {k: i for i, k in enumerate(seen_keys)}
    keys = sorted(seen_keys, key=lambda k: (proc_sort.get(k[0], 0.0), first_pid[k[0]], thread_sort.get(k, 0.0),
                                            appearance[k]))
    labels = {k: _lane_label(k, proc_name, thread_name) for k in keys}
    for k in keys:  # GPU lanes: "GPU 0 stream 7"
        pl = proc_labels.get(k[0], "")
        if pl and pl != "CPU" and not labels[k].startswith(pl):
            labels[k] = f"{pl} {labels[k]}"
    dup = {v for v in labels.values() if list(labels.values()).count(v) > 1}
    for k in keys:
        if labels[k] in dup:
            labels[k] = f"{_proc_label(k[0], proc_name)} / {labels[k]}"
    cats = [_category(c, k[0], proc_name) for c, k in zip(cat_, key_)]
    is_gpu = np.array([c in _GPU_CATS for c in cats])
    device = [_int_or_none((a or {}).get("device", k[0])) if g else None for a, k, g in zip(args_, key_, is_gpu)]
    stream = [_int_or_none((a or {}).get("stream", k[1])) if g else None for a, k, g in zip(args_, key_, is_gpu)]
    df = from_columns({
        "process": [_proc_label(k[0], proc_name) for k in key_],
        "track": [labels[k] for k in key_], "device": device, "stream": stream, "name": name_,
        "category": cats, "start_ns": np.array(start_, dtype=np.int64), "dur_ns": np.array(dur_, dtype=np.int64),
        "correlation": corr_, "args": args_, "kind": kind_,
    }, n=n, source=FORMAT, track_order=[labels[k] for k in keys])
    df = with_depth(df)
    meta = {"clock": "wall-clock ns (baseTimeNanoseconds + ts)" if base_ns else "trace ts (us) x 1000",
            "base_time_ns": base_ns, "skipped_phases": skipped, "malformed_events": bad,
            "unclosed_spans": unclosed, **(extra or {})}
    return df, meta


def _int_or_none(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _proc_label(pid: Any, proc_name: dict) -> str:
    return proc_name.get(pid) or f"process {pid}"


def _lane_label(key: tuple, proc_name: dict, thread_name: dict) -> str:
    pid, tid = key
    tn = thread_name.get(key)
    if tn:
        return tn.strip()
    pn = proc_name.get(pid)
    if pn and re.match(r"GPU\s*\d+", pn):
        return f"{pn} stream {tid}"
    if pn:
        return f"{pn} {tid}"
    if pid in (None, "") and tid in (None, ""):
        return "global"
    return f"thread {tid}" if pid is None else f"{pid}/{tid}"


def _category(cat: Any, pid: Any, proc_name: dict) -> str:
    if cat:
        c = str(cat)
        return _OLD_CATS.get(c, c)
    pn = (proc_name.get(pid) or "").upper()  # rocprof v1: no categories, one process per API/agent
    if re.match(r"GPU\s*\d+", pn):
        return KERNEL
    if "COPY" in pn:
        return "gpu_memcpy"
    if "HIP" in pn:
        return "hip_api"
    if "HSA" in pn:
        return "hsa_api"
    return "event"
