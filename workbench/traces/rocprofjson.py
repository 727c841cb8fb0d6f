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
copies, markers or API calls says what it holds instead. A record whose timestamps are not
integers is dropped as malformed; one whose start, end or duration is no time of a trace
(beyond 9.2e18 ns: a span from -2^63 to 2^63-1) as a timestamp overflow. Ids of the wrong type
(a list for a kernel id, text for a stream) are read as missing.

Memory: the record lists are most of the document, and parsed whole they take about ten times
its size (a dict per record, and one per id inside it). They are read in pieces instead
(:func:`_split`): the rest of the document (agents, symbols, strings) is parsed with each
record list stood in for by a placeholder, then each list is parsed a piece of about
:data:`CHUNK_BYTES` at a time into the span table's columns. A cut that does not parse (a
record list of an unexpected shape) falls back to parsing the document whole.
"""

from __future__ import annotations

import os
import re
from array import array
from pathlib import Path
from typing import Any, Iterator

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
    """``{"handle": 5}`` -> 5 (ids are written as one-field objects); an id of another type
    than an integer or text (a list, an object) is None: it names nothing."""
    v = v.get("handle") if isinstance(v, dict) else v
    return v if isinstance(v, (int, str)) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    """An integer column's value (a stream, a correlation id): None unless an int64."""
    return v if type(v) is int and -(1 << 63) <= v < (1 << 63) else None


def _gpu_index(agents: Any) -> dict[Any, int]:
    """Agent handle -> the GPU's index (``gpu_index`` or ``logical_node_type_id`` where the
    release writes them, else its position among the GPU agents)."""
    out: dict[Any, int] = {}
    gpus = [a for a in agents if isinstance(a, dict) and a.get("type") == _GPU_AGENT] if isinstance(agents, list) else []
    for i, a in enumerate(sorted(gpus, key=lambda a: (a.get("node_id", 0) if isinstance(a.get("node_id"), int) else 0))):
        idx = a.get("gpu_index", a.get("logical_node_type_id", i))
        out[_handle(a.get("id"))] = idx if isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < 1 << 31 \
            else i
    return out


def _kernel_names(symbols: Any) -> dict[Any, str]:
    """kernel_id -> name (formatted, else demangled, else the symbol), from a list or an object."""
    items = symbols.values() if isinstance(symbols, dict) else symbols if isinstance(symbols, list) else []
    out = {}
    for s in items:
        if isinstance(s, dict):
            out[_handle(s.get("kernel_id"))] = str(s.get("formatted_kernel_name") or s.get("demangled_kernel_name")
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


#: |ns| at or beyond this is no time of a trace (int64 holds 9.22e18)
_MAX_NS = 9_200_000_000_000_000_000


class _Rows:
    """Columns of the span table, appended record by record: times in int64 arrays, repeated
    text (lanes, names) kept once."""

    def __init__(self):
        self.cols: dict[str, list] = {c: [] for c in ("process", "track", "device", "stream", "name", "category",
                                                      "correlation", "args")}
        self.start, self.end = array("q"), array("q")
        self.bad = self.overflow = 0
        self._same: dict = {}

    def same(self, v: Any) -> Any:
        """One object for each repeated value (a lane's text, a thread id), not one per record."""
        try:
            return self._same.setdefault((type(v), v), v)  # the type too: True is not 1
        except TypeError:  # unhashable: its own
            return v

    def add(self, rec: dict, **cols: Any) -> None:
        start, end = rec.get("start_timestamp"), rec.get("end_timestamp")
        if type(start) is not int or type(end) is not int:
            self.bad += 1
            return
        if not (-_MAX_NS < start < _MAX_NS and -_MAX_NS < end < _MAX_NS and abs(end - start) < _MAX_NS):
            self.overflow += 1
            return
        corr = rec.get("correlation_id")
        cols.setdefault("correlation", _int(corr.get("internal")) if isinstance(corr, dict) else None)
        for c in ("process", "track", "name", "stream"):
            cols[c] = self.same(cols.get(c))
        for c, column in self.cols.items():
            column.append(cols.get(c))
        self.start.append(start)
        self.end.append(end)


def _entry(entry: dict, rows: _Rows, prefix: str, name: str) -> None:
    """One process's records into ``rows``."""
    buffers = entry.get("buffer_records")
    if not isinstance(buffers, dict):
        raise _unsupported(name, "no 'buffer_records' object")
    strings = _shaped(entry, "strings", (dict,), name)
    for part, kinds in (("agents", (list,)), ("kernel_symbols", (list, dict))):
        _shaped(entry, part, kinds, name)
    for part in ("buffer_records", "marker_api"):
        _shaped(strings, part, (list,), name, "strings.")
    gpu = _gpu_index(entry.get("agents"))
    kernels = _kernel_names(entry.get("kernel_symbols"))
    ops = _op_names(strings)
    messages = {_handle(m.get("key")): str(m.get("value")) for m in strings.get("marker_api") or []
                if isinstance(m, dict)}
    proc = f"{prefix}GPU" if prefix else "GPU"
    shapes: dict[tuple, list] = {}  # grid and workgroup sizes repeat: one list each
    for rec in _records(buffers, "kernel_dispatch", name):
        info = rec.get("dispatch_info") if isinstance(rec.get("dispatch_info"), dict) else {}
        dev = gpu.get(_handle(info.get("agent_id")))
        stream = _int(_handle(rec.get("stream_id")))
        lane, q = ("stream", stream) if stream is not None else ("queue", _int(_handle(info.get("queue_id"))))
        kernel = _handle(info.get("kernel_id"))
        rows.add(rec, process=proc, track=f"{prefix}GPU {dev} · {lane} {q}", device=dev, stream=q,
                 name=kernels.get(kernel) or f"kernel {kernel}", category=KERNEL,
                 args={"thread_id": rows.same(rec.get("thread_id")), "dispatch_id": info.get("dispatch_id"),
                       "grid": _xyz(info.get("grid_size"), shapes), "workgroup": _xyz(info.get("workgroup_size"), shapes)})
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
            label = messages.get(_handle(internal), op) if key == "marker_api" else op
            rows.add(rec, process=f"{prefix}process", track=f"{prefix}thread {rec.get('thread_id')}", name=label,
                     category=category, args={"operation": op} if label != op else None)


def _shaped(parent: dict, key: str, kinds: tuple[type, ...], name: str, where: str = "") -> Any:
    """``parent[key]`` when it is absent ({} then) or of one of ``kinds``; a part of another
    shape is refused with its name (what a reader cannot read is said, not guessed)."""
    v = parent.get(key)
    if v is None:
        return {}
    if not isinstance(v, kinds):
        raise _unsupported(name, f"'{where}{key}' is {_json_type(v)}, not "
                                 + " or ".join("an object" if k is dict else "a list" for k in kinds))
    return v


def _records(buffers: dict, key: str, name: str) -> Iterator[dict]:
    """The records of one kind: a list, or a record list of the document read in pieces."""
    recs = buffers.get(key)
    if recs is None:
        return
    if isinstance(recs, _Pieces):
        for piece in recs:
            yield from (r for r in piece if isinstance(r, dict))
        return
    if not isinstance(recs, list):
        raise _unsupported(name, f"'buffer_records.{key}' is {_json_type(recs)}, not a list")
    yield from (r for r in recs if isinstance(r, dict))


def _json_type(v: Any) -> str:
    """What a JSON value is, with its article: "an object", "a list", "a number"."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number")


def _xyz(v: Any, shapes: dict[tuple, list]) -> list | None:
    if not isinstance(v, dict):
        return None
    key = (v.get("x"), v.get("y"), v.get("z"))
    try:
        return shapes.setdefault(key, list(key))
    except TypeError:  # an unhashable size: a list of its own
        return list(key)


# --- record lists read in pieces ---------------------------------------------------------------

#: bytes of a record list parsed at a time
CHUNK_BYTES = 4 << 20
#: a record list: the key of a kind this reader reads, its array of objects opening. The quote
#: before the key is not escaped, so it opens a string, which the key's closing quote and ':'
#: make a key: such a match is never inside a string of a valid document.
_LIST = re.compile(rb'(?<!\\)"(kernel_dispatch|memory_copy|hip_api|hsa_api|rccl_api|marker_api)"\s*:\s*(\[)\s*\{')
_CUT = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\}\s*\]")
_PLACEHOLDER = "\x00records:"


def _loads(data: bytes) -> Any:
    """``orjson.loads``, its "Not enough memory" (a JSONDecodeError) raised as the MemoryError it is."""
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "enough memory" in str(exc):
            raise MemoryError(str(exc)) from None
        raise


class _Unsplittable(Exception):
    """A record list that does not parse in pieces: the document is parsed whole."""


class _Pieces:
    """The record list at ``data[start:end]`` (from its '['), parsed a piece at a time on each
    iteration (only one piece alive at a time)."""

    def __init__(self, data: bytes, start: int, end: int):
        self.data, self.start, self.end = data, start, end

    def __iter__(self) -> Iterator[list]:
        pos = self.start + 1
        while pos < self.end:
            cut = _CUT.search(self.data, pos + CHUNK_BYTES, self.end)
            stop = cut.start() + 1 if cut else self.end - 1
            yield _loads(b"[" + self.data[pos:stop] + b"]")
            pos = cut.end() - 1 if cut else self.end


def _list_end(data: bytes, start: int) -> int:
    """Where the record list opening at ``data[start]`` ends (after its ']'), found by parsing
    it in pieces: a cut at '}, {' or '}]' inside a string or a nested value makes a piece that
    does not parse (:class:`_Unsplittable`), so a list that parses so is read as it is."""
    import orjson

    pos = start + 1
    while True:
        cut = _CUT.search(data, pos + CHUNK_BYTES)
        close = _CLOSE.search(data, pos, cut.start() + 1 if cut else len(data))
        try:
            if close is not None:
                _loads(b"[" + data[pos:close.end()])
                return close.end()
            if cut is None:
                raise _Unsplittable
            _loads(b"[" + data[pos:cut.start() + 1] + b"]")
        except orjson.JSONDecodeError:
            raise _Unsplittable from None
        pos = cut.end() - 1


def _split(data: bytes) -> tuple[Any, dict[str, tuple[int, int]]]:
    """The document with each record list stood in for by a placeholder string, parsed, and
    the byte range of each list; raises :class:`_Unsplittable` (or orjson's error)."""
    import orjson

    parts, ranges, pos = [], {}, 0
    while (m := _LIST.search(data, pos)) is not None:
        start = m.start(2)
        end = _list_end(data, start)
        key = f"{_PLACEHOLDER}{len(ranges)}"
        parts += [data[pos:start], orjson.dumps(key)]
        ranges[key] = (start, end)
        pos = end
    parts.append(data[pos:])
    return _loads(b"".join(parts)), ranges


def _restored(doc: Any, data: bytes, ranges: dict[str, tuple[int, int]]) -> Any:
    """``doc`` with every placeholder read back: as :class:`_Pieces` where it stands for the
    records of an entry's ``buffer_records``, parsed whole elsewhere (``strings.marker_api``)."""
    def whole(v: Any) -> Any:
        if isinstance(v, str) and v in ranges:
            return _loads(data[ranges[v][0]:ranges[v][1]])
        if isinstance(v, list):
            return [whole(x) for x in v]
        if isinstance(v, dict):
            return {k: whole(x) for k, x in v.items()}
        return v

    if not isinstance(doc, dict) or not isinstance(doc.get(KEY), (dict, list)):
        return whole(doc)
    entries = doc[KEY] if isinstance(doc[KEY], list) else [doc[KEY]]
    out = []
    for e in entries:
        if isinstance(e, dict) and isinstance(e.get("buffer_records"), dict):
            buffers = {k: _Pieces(data, *ranges[v]) if isinstance(v, str) and v in ranges else whole(v)
                       for k, v in e["buffer_records"].items()}
            e = {k: whole(v) for k, v in e.items() if k != "buffer_records"} | {"buffer_records": buffers}
        out.append(whole(e))
    return {**{k: whole(v) for k, v in doc.items() if k != KEY},
            KEY: out if isinstance(doc[KEY], list) else out[0]}


def _document(data: bytes, name: str) -> Any:
    """The document, its record lists read in pieces where they split (see the module
    docstring); else parsed whole (orjson, or the json module, which says where it is broken)."""
    try:
        import orjson

        try:
            doc, ranges = _split(data)
            return _restored(doc, data, ranges)
        except (_Unsplittable, orjson.JSONDecodeError):
            return _loads(data)
    except (ImportError, ValueError):  # no orjson, or not valid JSON: the json module says where
        return read_json(data, name)[0]


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a rocprofv3 JSON document (see the module docstring)."""
    p = Path(path)
    doc = _document(read_bytes(p), p.name)  # the bytes live while its record lists are read
    if not isinstance(doc, dict) or KEY not in doc:
        raise TraceError(FORMAT, f"{p.name}: no '{KEY}' object")
    entries = doc[KEY]
    entries = [entries] if isinstance(entries, dict) else entries
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _unsupported(p.name, f"'{KEY}' is neither a list of process entries nor one entry")
    rows = _Rows()
    pids = [(e["metadata"] if isinstance(e.get("metadata"), dict) else {}).get("pid") for e in entries]
    for pid, entry in zip(pids, entries):
        _entry(entry, rows, f"process {pid} · " if len(entries) > 1 else "", p.name)
    held = sorted({k for e in entries for k, v in (e.get("buffer_records") or {}).items() if v})
    c = rows.cols
    doc = entries = entry = None  # and with them the document's bytes: the columns hold what was read
    if not rows.start:
        dropped = rows.bad + rows.overflow
        if dropped:
            raise TraceError(FORMAT, f"{p.name}: every record of the document has unusable timestamps ({rows.bad:,} "
                                     f"not integers, {rows.overflow:,} beyond any trace's time)")
        raise TraceError(FORMAT, f"{p.name}: a rocprofv3 JSON document without kernel dispatches, memory copies, "
                                 f"markers or API calls" + (f" (it holds: {', '.join(held)})" if held else
                                                            " (every record list is empty)"))
    start = np.frombuffer(rows.start, dtype=np.int64)
    end = np.frombuffer(rows.end, dtype=np.int64)
    df = from_columns({**c, "start_ns": start.copy(), "dur_ns": np.maximum(end - start, 0)}, n=len(start),
                      source=FORMAT, track_order=_threads_first(list(dict.fromkeys(c["track"]))))
    return with_depth(df), {"clock": "ns (rocprofiler-sdk timestamps)", "processes": pids,
                            "malformed_events": rows.bad, "timestamp_overflows": rows.overflow,
                            "negative_durations": int((end < start).sum())}


def _threads_first(tracks: list[str]) -> list[str]:
    """Thread lanes in order of appearance, then GPU lanes by GPU and stream (as rocpd's)."""
    host = [t for t in tracks if "thread " in t]
    return host + sorted((t for t in tracks if t not in host), key=_natural)


def _natural(s: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]
