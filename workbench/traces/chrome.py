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

Speed and memory (benchmarks/traces.py): the event array is parsed with orjson a few MB at a
time (:func:`_chunks`), ``X`` events are taken column-wise per piece, timestamps are kept as
C doubles and ``args`` as compact orjson batches until the table is built, so only one
piece of parsed events is alive at a time; the args dicts are rebuilt last, after the other
columns' buffers are freed and their heap pages handed back (:func:`_trim_heap`). Peak RSS
is ~3x the file. Without orjson the whole document is parsed with the json module (slower,
same result).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from array import array
from itertools import compress
from operator import itemgetter
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
    if head[:2] == b"\x1f\x8b":
        return True  # gzip that could not be opened for a look inside: load() reports the damage
    s = head.lstrip()
    if s[:1] == b"[":
        return bool(re.match(rb"\[\s*(\{|\]|$)", s[:64]))
    if s[:1] == b"{":
        return b'"traceEvents"' in head or b'"ph"' in s[:2000]
    return False


_META_KEYS = ("deviceProperties", "distributedInfo", "schemaVersion", "traceName", "displayTimeUnit")
#: bytes of event text parsed at a time on the chunked path
CHUNK_BYTES = 2 << 20


class _Unchunkable(Exception):
    """The chunked fast path cannot split this document; parse it whole."""


def read_bytes(path: Path) -> bytes:
    """File content, gunzipped when it is gzip."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(FORMAT, f"{path.name}: truncated or corrupted gzip ({exc})") from None
    return data


def read_json(data: bytes, name: str) -> Any:
    """Parse a whole document, closing an unterminated bare array; errors say where."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(FORMAT, f"{name}: not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        stripped = text.rstrip().rstrip(",")
        if stripped.lstrip().startswith("[") and not stripped.endswith("]"):
            try:  # the trace event format allows omitting the closing bracket
                return json.loads(stripped + "]")
            except json.JSONDecodeError:
                pass
        # a string or value running into the end of the text means the file was cut
        cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        where = "truncated" if cut else f"invalid JSON at char {exc.pos}"
        raise TraceError(FORMAT, f"{name}: {where} ({exc.msg})") from None
    except RecursionError:
        raise TraceError(FORMAT, f"{name}: JSON nested too deeply") from None


def _chunks(data: bytes, header: dict):
    """Yield the event list in pieces of about CHUNK_BYTES, parsed with orjson.

    Holding the whole parsed document costs ~6x the file size (a dict per event); parsing
    a piece at a time keeps only the columns. Pieces are cut at ``}, {`` between events; a
    cut that falls inside a string or a nested array makes a piece invalid JSON, which
    raises :class:`_Unchunkable` (the caller then parses the whole document), so a
    successful parse is always a correct one. ``header`` receives the top-level keys.
    """
    try:
        import orjson
    except ImportError:
        raise _Unchunkable from None
    lead = len(data) - len(data.lstrip())
    bare = data[lead:lead + 1] == b"["
    if bare:
        pos = lead + 1
    else:
        m = re.search(rb'"traceEvents"\s*:\s*\[', data)
        if m is None:
            raise _Unchunkable
        try:
            header.update(orjson.loads(data[:m.end() - 1] + b"[]}"))
        except (orjson.JSONDecodeError, TypeError):
            raise _Unchunkable from None
        pos = m.end()
    split = re.compile(rb"\}\s*,\s*\{")
    while True:
        m = split.search(data, pos + CHUNK_BYTES) if len(data) - pos > CHUNK_BYTES else None
        try:
            if m is None:
                if bare:
                    yield orjson.loads(b"[" + data[pos:])
                else:
                    tail = orjson.loads(b'{"traceEvents":[' + data[pos:])
                    events = tail.pop("traceEvents")
                    header.update(tail)
                    yield events
                return
            piece = orjson.loads(b"[" + data[pos:m.start() + 1] + b"]")
        except orjson.JSONDecodeError:
            raise _Unchunkable from None
        yield piece
        piece = None  # drop it before the next parse: only one piece alive at a time
        pos = m.end() - 1


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a Chrome trace JSON file (see module docstring)."""
    p = Path(path)
    header: dict[str, Any] = {}
    try:
        # the generator owns the file bytes, so they are freed as soon as the last piece is parsed
        df, meta = parse_events(_chunks(read_bytes(p), header), 0, p.name)
        doc: Any = header or []
    except _Unchunkable:
        doc = read_json(read_bytes(p), p.name)
        if isinstance(doc, dict):
            events = doc.get("traceEvents")
            if not isinstance(events, list):
                raise TraceError(FORMAT, f"{p.name}: object has no 'traceEvents' list") from None
        elif isinstance(doc, list):
            events = doc
        else:
            raise TraceError(FORMAT, f"{p.name}: top-level JSON is a {type(doc).__name__}, "
                                     "not an event list") from None
        df, meta = parse_events(events, 0, p.name)
    base_ns = 0
    if isinstance(doc, dict):
        try:
            base_ns = int(doc.get("baseTimeNanoseconds") or 0)
        except (TypeError, ValueError):
            raise TraceError(FORMAT, f"{p.name}: baseTimeNanoseconds is not an integer") from None
        meta.update({k: v for k, v in doc.items() if k in _META_KEYS})
    if base_ns:
        # Kineto writes ts relative to this base; adding it back makes ranks' traces comparable
        df["start_ns"] = df["start_ns"] + base_ns
        meta["clock"] = "wall-clock ns (baseTimeNanoseconds + ts)"
    meta["base_time_ns"] = base_ns
    return df, meta


def parse_events(events, base_ns: int = 0, name: str = "", extra: dict | None = None
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Span table from trace events: a list of events, or an iterable of such lists (pieces).

    ``X`` events, the bulk of any trace, are taken a piece at a time, column by column with
    list comprehensions; the other phases go through a per-event loop. Only raw values are
    collected; conversion to ns happens once, vectorised, at the end.
    """
    pieces = [events] if isinstance(events, list) else events
    proc_name: dict[Any, str] = {}
    proc_labels: dict[Any, str] = {}
    thread_name: dict[tuple, str] = {}
    proc_sort: dict[Any, float] = {}
    thread_sort: dict[tuple, float] = {}
    codes: dict[tuple, int] = {}  # (pid, tid) -> lane code, in order of first appearance
    code_, name_, args_, inst_, cat_ = [], [], [], [], []
    # C doubles, not float objects: parser floats kept alive would pin its memory arenas
    ts_, dur_ = array("d"), array("d")
    open_b: dict[tuple, list] = {}
    open_async: dict[tuple, dict] = {}
    skipped: dict[str, int] = {}
    bad = 0
    # bound methods: this loop runs once per event, so attribute lookups add up
    add_code, add_name, add_cat, add_ts, add_dur, add_args, add_inst = (
        code_.append, name_.append, cat_.append, ts_.append, dur_.append, args_.append, inst_.append)
    codes_get = codes.get
    shared = {}.setdefault
    args_blobs: list = []
    # the args fields that become columns, taken before packing; correlation ids as C int64
    # (int objects from the parser would pin its arenas, see _pack)
    corr_, dev_, strm_ = array("q"), [], []

    def flush() -> None:
        for out, key in ((dev_, "device"), (strm_, "stream")):
            out.extend([a.get(key) if type(a) is dict else None for a in args_])
        ids = [a.get("correlation") if type(a) is dict else None for a in args_]
        corr_.extend([c if type(c) is int and _NO_ID < c < 2**63 else _NO_ID for c in ids])
        args_blobs.append(_pack(args_))
        args_.clear()
    def take_x(xs: list) -> list:
        """Column-wise fast path for a piece's X events; returns the events it could not take."""
        def col(key: str, default: Any = None) -> list:
            # itemgetter runs in C; events lacking the key take the slower .get path
            try:
                return list(map(itemgetter(key), xs))
            except KeyError:
                return [ev.get(key, default) for ev in xs]

        try:  # fails before any change when a pid/tid is unhashable (a list)
            try:
                keys = list(map(itemgetter("pid", "tid"), xs))
            except KeyError:
                keys = [(ev.get("pid"), ev.get("tid")) for ev in xs]
            new = [k for k in dict.fromkeys(keys) if k not in codes]
        except TypeError:
            return xs
        for k in new:
            codes[k] = len(codes)
        ts = col("ts")
        dur = col("dur", 0)
        try:  # array() is all or nothing, so the columns never get out of step
            ts_a = array("d", ts)
        except (TypeError, OverflowError):  # strings (rocprof v1), None, out of range: NaN if unusable
            ts_a = array("d", [_float_or_nan(v) for v in ts])
        try:
            dur_a = array("d", dur)
        except (TypeError, OverflowError):
            dur_a = array("d", [_float_or_nan(v) for v in dur])
        code_.extend([codes[k] for k in keys])
        # one shared str per distinct name/category (the parser makes a new one per event)
        name_.extend([shared(v, v) if type(v) is str else v for v in col("name")])
        cat_.extend([shared(v, v) if type(v) is str else v for v in col("cat")])
        ts_.extend(ts_a)
        dur_.extend(dur_a)
        args_.extend(col("args"))
        inst_.extend([False] * len(xs))
        return []

    for piece in pieces:
        if type(piece) is not list:
            raise _Unchunkable
        try:
            phs = list(map(itemgetter("ph"), piece))
        except (KeyError, TypeError):  # an event without "ph" (rocprof v1's leading {}) or not an object
            phs = [ev.get("ph") if type(ev) is dict else None for ev in piece]
        is_x = [ph == "X" for ph in phs]
        xs = list(compress(piece, is_x))
        rest = [] if len(xs) == len(piece) else [ev for ev, x in zip(piece, is_x) if not x]
        rest = take_x(xs) + rest
        for ev in rest:
            if type(ev) is not dict:
                bad += 1
                continue
            ph = ev.get("ph")
            if ph == "X":
                key = (ev.get("pid"), ev.get("tid"))
                ts = ev.get("ts")
                dur = ev.get("dur", 0)
                args = ev.get("args")
                kind = False
            elif ph is None:
                continue  # rocprof v1 opens with an empty {} event
            else:
                try:
                    if ph in ("i", "I", "R"):
                        key = (ev.get("pid"), ev.get("tid"))
                        ts, dur, args, kind = ev.get("ts"), 0, ev.get("args"), True
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
                        ts, dur, kind = b["ts"], float(ev["ts"]) - float(b["ts"]), False
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
                        ts, dur, kind = b["ts"], float(ev["ts"]) - float(b["ts"]), False
                        ev = b
                    elif ph == "M":
                        _metadata(ev, proc_name, proc_labels, thread_name, proc_sort, thread_sort)
                        continue
                    else:
                        skipped[str(ph)] = skipped.get(str(ph), 0) + 1
                        continue
                except (KeyError, TypeError, ValueError, AttributeError):
                    bad += 1
                    continue
            try:
                c = codes_get(key)
            except TypeError:  # unhashable pid/tid (a list): malformed
                bad += 1
                continue
            if c is None:
                c = codes[key] = len(codes)
            add_code(c)
            # one shared str per distinct name/category (the parser makes a new one per event)
            nm = ev.get("name")
            add_name(shared(nm, nm) if type(nm) is str else nm)
            ct = ev.get("cat")
            add_cat(shared(ct, ct) if type(ct) is str else ct)
            try:
                add_ts(ts)
            except (TypeError, OverflowError):  # strings (rocprof v1), None, out of range: NaN if unusable
                add_ts(_float_or_nan(ts))
            try:
                add_dur(dur)
            except (TypeError, OverflowError):
                add_dur(_float_or_nan(dur))
            add_args(args)
            add_inst(kind)
        if len(args_) >= _ARGS_BATCH:
            flush()
        piece = xs = rest = phs = None  # free the parsed piece before the next one is parsed
    flush()
    start_us, dur_us = np.frombuffer(ts_, dtype=np.float64).copy(), np.frombuffer(dur_, dtype=np.float64).copy()
    del ts_[:], dur_[:]
    # NaN (unusable) or beyond int64 ns (|t| >= ~292 years): dropped as malformed
    ok = (np.abs(start_us) < 9e15) & (np.abs(dur_us) < 9e15)
    if not ok.all():  # events with unusable timestamps are dropped and counted
        bad += int((~ok).sum())
        keep = np.flatnonzero(ok)
        code_, name_, cat_, inst_, dev_, strm_ = ([lst[i] for i in keep] for lst in (
            code_, name_, cat_, inst_, dev_, strm_))
        corr_ = array("q", np.frombuffer(corr_, dtype=np.int64)[keep].tobytes())
        start_us, dur_us = start_us[ok], dur_us[ok]
    start_ns = np.rint(start_us * 1000.0).astype(np.int64) + base_ns
    dur_ns = np.maximum(np.rint(dur_us * 1000.0), 0).astype(np.int64)
    inst = np.array(inst_, dtype=bool)
    dur_ns[inst] = 0
    seen_keys = list(codes)  # lane key per code
    unclosed = sum(len(s) for s in open_b.values()) + len(open_async)
    n = len(start_ns)
    if n == 0:
        raise TraceError(FORMAT, f"{name}: no trace events with timestamps" + (f" ({bad} malformed)" if bad else ""))

    # Lanes: label per (pid, tid), ordered by sort indices then first appearance (as Perfetto does).
    first_pid: dict[Any, int] = {}
    for i, (pid, _tid) in enumerate(seen_keys):
        first_pid.setdefault(pid, i)
    keys = sorted(seen_keys, key=lambda k: (_num(proc_sort.get(k[0])), first_pid[k[0]], _num(thread_sort.get(k)),
                                            codes[k]))
    labels = {k: _lane_label(k, proc_name, thread_name) for k in keys}
    for k in keys:  # GPU lanes: "GPU 0 stream 7"
        pl = proc_labels.get(k[0], "")
        if pl and pl != "CPU" and not labels[k].startswith(pl):
            labels[k] = f"{pl} {labels[k]}"
    counts: dict[str, int] = {}
    for v in labels.values():
        counts[v] = counts.get(v, 0) + 1
    for k in keys:
        if counts[labels[k]] > 1:
            labels[k] = f"{_proc_label(k[0], proc_name)} / {labels[k]} ({k[1]})"
    code_arr = np.array(code_, dtype=np.int64)
    lane_labels = [labels[k] for k in seen_keys]  # by code
    order = list(dict.fromkeys(labels[k] for k in keys))
    track = pd.Categorical.from_codes(
        np.array([order.index(lab) for lab in lane_labels], dtype=np.int64)[code_arr], categories=order, ordered=True)
    process = np.array([_proc_label(k[0], proc_name) for k in seen_keys], dtype=object)[code_arr]
    raw_cat = pd.Categorical([c if type(c) is str else None if c is None else str(c) for c in cat_])
    cats = np.array([_category(c, None, {}) for c in raw_cat.categories] + [None], dtype=object)[raw_cat.codes]
    missing = pd.isna(cats)
    if missing.any():  # rocprof v1: no categories; they come from the process name
        for i in np.flatnonzero(missing):
            cats[i] = _category(None, seen_keys[code_[i]][0], proc_name)
    gpu_idx = np.flatnonzero(np.isin(cats, list(_GPU_CATS)))
    device = np.full(n, None, dtype=object)
    stream = np.full(n, None, dtype=object)
    for i in gpu_idx.tolist():
        k = seen_keys[code_[i]]
        device[i] = _int_or_none(k[0] if dev_[i] is None else dev_[i])
        stream[i] = _int_or_none(k[1] if strm_[i] is None else strm_[i])
    ids = np.frombuffer(corr_, dtype=np.int64)
    has_id = ids != _NO_ID
    df = from_columns({
        "process": process, "track": track, "device": device, "stream": stream,
        "name": ["" if v is None else v if type(v) is str else str(v) for v in name_],
        "category": cats, "start_ns": start_ns, "dur_ns": dur_ns, "correlation": pd.arrays.IntegerArray(np.where(has_id, ids, 0), ~has_id),
        "kind": pd.Categorical.from_codes(inst.astype(np.int8), categories=["span", "instant"]),
    }, n=n, source=FORMAT)
    df = with_depth(df)
    # args last: the collected columns (emptied in place: the closures and appenders share them)
    # and the table's temporaries are freed and their pages handed back before the dicts are
    # rebuilt from their batches
    del code_arr, process, cats, device, stream, ids, has_id
    for lst in (code_, name_, cat_, inst_, dev_, strm_, corr_):
        del lst[:]
    _trim_heap()
    args = _unpack(args_blobs)
    if not ok.all():
        args = [args[i] for i in keep]
    df["args"] = args
    meta = {"clock": "wall-clock ns (baseTimeNanoseconds + ts)" if base_ns else "trace ts (us) x 1000",
            "base_time_ns": base_ns, "skipped_phases": skipped, "malformed_events": bad,
            "unclosed_spans": unclosed, **(extra or {})}
    return df, meta


_NO_ID = -(2**63)  # missing correlation id in the int64 buffer
#: rows whose args are serialised together (see _pack)
_ARGS_BATCH = 20_000


def _pack(args: list) -> Any:
    """Serialise a batch of args dicts so the parsed events they came from can be freed.

    The args dicts are the only parser objects kept; allocated between the event dicts,
    they would pin most of the parser's memory arenas (peak RSS ~6x the file). Kept as
    orjson bytes while parsing and decoded once at the end, they land in fresh, compact
    arenas. Batches orjson cannot write (ints beyond 64 bits) stay as they are.
    """
    try:
        import orjson

        # orjson's buffer keeps its growth capacity; a copy is sized to the content
        return bytes(memoryview(orjson.dumps(args)))
    except (ImportError, TypeError):
        return list(args)


def _trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc ``malloc_trim``; a no-op elsewhere).

    Freeing the file's bytes makes glibc raise its mmap threshold, so later large buffers
    (the collected columns, the packed args batches) come from the heap, and their pages
    stay resident after they are freed. The args dicts are built in Python's own arenas,
    which never reuse those pages, so untrimmed they add on top of them. Trimming once the
    columns are freed and after each args batch is decoded took peak RSS from ~4.2x to
    ~2.9x the file (benchmarks/traces.py, 200k Kineto spans); each trim takes well under 1 ms.
    """
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _find_malloc_trim() -> Any:
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # no C library to open by None (Windows)
        return None


_MALLOC_TRIM = _find_malloc_trim()  # glibc only


def _unpack(blobs: list) -> list:
    """The args of every row (None where not a dict); empties ``blobs`` batch by batch."""
    out: list = []
    for i, b in enumerate(blobs):
        blobs[i] = None  # each batch is freed (and its pages trimmed) once decoded
        if isinstance(b, bytes):
            import orjson  # bytes only exist where _pack had orjson; GPU nodes may lack it

            b = orjson.loads(b)
            _trim_heap()
        out.extend([a if type(a) is dict else None for a in b])
    return out


def _metadata(ev: dict, proc_name: dict, proc_labels: dict, thread_name: dict, proc_sort: dict,
              thread_sort: dict) -> None:
    """Record one ``M`` event (lane names and sort indices)."""
    a = ev.get("args") or {}
    mname, pid, key = ev.get("name"), ev.get("pid"), (ev.get("pid"), ev.get("tid"))
    if mname == "process_name":
        proc_name[pid] = str(a.get("name", ""))
    elif mname == "process_labels":  # Kineto: "CPU" or "GPU 0" for a device's pid
        proc_labels[pid] = str(a.get("labels", ""))
    elif mname == "thread_name":
        thread_name[key] = str(a.get("name", ""))
    elif mname == "process_sort_index":
        proc_sort[pid] = a.get("sort_index", 0)
    elif mname == "thread_sort_index":
        thread_sort[key] = a.get("sort_index", 0)


def _num(v: Any) -> float:
    try:
        return float(v) if v is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def _float_or_nan(v: Any) -> float:
    if type(v) is bool:
        return float("nan")
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


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
