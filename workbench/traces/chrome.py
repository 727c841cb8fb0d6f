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
Kineto writes it (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ...). Annotation ranges Kineto
puts on a stream (``gpu_user_annotation``) get a lane of their own beside it ("GPU 0 · stream 7
annotations"), so that lane statistics of the stream count its kernels only; a trace without
metadata events names its GPU lanes from the events' device and stream. Older Kineto spelled the
categories ``Kernel``/``Memcpy``/``Memset``/``Runtime``/``Operator``; rocprof v1 has no
categories, so they come from the process name (``GPU0`` -> ``kernel``, ``COPY`` ->
``gpu_memcpy``, ``HIP``/``HSA`` -> ``hip_api``/``hsa_api``).

Speed and memory (benchmarks/traces.py). The file is inflated as it is parsed (never whole in
memory) and the event array is parsed a few MB at a time (:func:`_pieces`). With msgspec (a
dependency) each event is decoded into a small struct of the fields read, its ``args`` kept as
raw JSON bytes (:class:`_Event`): no dict per event, unread fields skipped in C; the column ids
(correlation, device, stream) are decoded from the raw args of a whole piece at once. Timestamps
stay C doubles until the table is built; ``args`` are kept as one raw JSON batch per piece and
decoded last, after the other columns' buffers are freed (:func:`_trim_heap`), or not at all
when the caller does not want them (``load(path, args=False)``: the CLI's summaries). Without
msgspec the pieces are parsed with orjson into dicts, and without orjson the whole document
with the json module (slower, same result).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
from array import array
from collections import Counter
from itertools import compress
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .inflate import gunzip, gunzip_stream
from .model import KERNEL, from_columns, with_depth

try:
    import msgspec
except ImportError:  # the GPU machines may lack it: the orjson/json paths below read the same
    msgspec = None

FORMAT = "chrome-json"
INFO = Format(
    FORMAT, "Chrome trace JSON", (".json", ".json.gz", ".pt.trace.json"),
    "trace event format; torch.profiler/Kineto (torch 2.x), rocprof v1 results.json",
    "X, B/E, async b/e spans; i/I/R instants; M names and sort indices set lanes; Kineto categories, "
    "devices, streams and correlation ids; flows and counters counted only")
#: ``load(path, args=False)`` skips the args column (workbench.traces.load passes it on)
ARGS_OPTIONAL = True
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
    """File content, gunzipped (bounded: :mod:`.inflate`) when it is gzip."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gunzip(data, FORMAT, path.name)
    return data


def read_json(data: bytes, name: str) -> tuple[Any, int]:
    """Parse a whole document, closing an unterminated bare array; errors say where.

    Returns ``(document, replaced)``: byte sequences that are not UTF-8 (a stray byte in a
    kernel name) become U+FFFD and are counted, instead of refusing the whole trace.
    """
    text = data.decode("utf-8", "replace")
    # U+FFFD written by the decoder, not ones the file spelled out itself
    bad_utf8 = text.count("\ufffd") - data.decode("utf-8", "ignore").count("\ufffd") if "\ufffd" in text else 0
    try:
        return json.loads(text), bad_utf8
    except json.JSONDecodeError as exc:
        stripped = text.rstrip().rstrip(",")
        if stripped.lstrip().startswith("[") and not stripped.endswith("]"):
            try:  # the trace event format allows omitting the closing bracket
                return json.loads(stripped + "]"), bad_utf8
            except json.JSONDecodeError:
                pass
        # a string or value running into the end of the text means the file was cut
        cut = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        where = "truncated" if cut else f"invalid JSON at char {exc.pos}"
        raise TraceError(FORMAT, f"{name}: {where} ({exc.msg})") from None
    except RecursionError:
        raise TraceError(FORMAT, f"{name}: JSON nested too deeply") from None


#: inflated bytes read at a time from a file
READ_BYTES = 4 << 20


def _blocks(path: Path):
    """The file's bytes in blocks, inflated as they are read when it is gzip (bounded:
    :mod:`.inflate`)."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
        if magic == b"\x1f\x8b":
            data = magic + fh.read()
        else:
            yield magic
            while block := fh.read(READ_BYTES):
                yield block
            return
    yield from gunzip_stream(data, FORMAT, path.name, step=READ_BYTES)


def _pieces(blocks, header: dict, decode):
    """Yield the event list in pieces of about CHUNK_BYTES, each parsed by ``decode`` (bytes
    of a JSON array -> list), from ``blocks`` of the document's bytes.

    Holding the whole parsed document costs ~6x the file size; parsing a piece at a time keeps
    only the columns, and reading the blocks as they come keeps only a piece of the text.
    Pieces are cut at ``}, {`` between events; a cut that falls inside a string or a nested
    array makes a piece invalid JSON, which raises :class:`_Unchunkable` (the caller then
    parses the whole document), so a successful parse is always a correct one. ``header``
    receives the top-level keys (those before and after the event array).
    """
    blocks = iter(blocks)
    buf = b""
    for block in blocks:  # up to the event array: the header keys must be in the first MBs
        buf += block
        lead = len(buf) - len(buf.lstrip())
        if buf[lead:lead + 1] == b"[":
            bare, pos = True, lead + 1
            break
        m = re.search(rb'"traceEvents"\s*:\s*\[', buf)
        if m is not None:
            try:
                header.update(_loads(buf[:m.end() - 1] + b"[]}"))
            except ValueError:
                raise _Unchunkable from None
            bare, pos = False, m.end()
            break
        if len(buf) > 4 * CHUNK_BYTES:
            raise _Unchunkable
    else:
        raise _Unchunkable
    split = re.compile(rb"\}\s*,\s*\{")
    done = False
    while True:
        m = split.search(buf, pos + CHUNK_BYTES) if len(buf) - pos > CHUNK_BYTES else None
        if m is None and not done:
            block = next(blocks, None)
            if block is None:
                done = True
            else:
                buf = buf[pos:] + block  # drop what was parsed
                pos = 0
            continue
        try:
            if m is None:  # the last piece, and what follows the array
                if bare:
                    yield decode(b"[" + buf[pos:])
                else:
                    tail = _loads(b'{"traceEvents":[' + buf[pos:], events_as=decode)
                    events = tail.pop("traceEvents")
                    header.update(tail)
                    yield events
                return
            piece = decode(b"[" + buf[pos:m.start() + 1] + b"]")
        except ValueError:  # orjson's and msgspec's decode errors are ValueErrors
            raise _Unchunkable from None
        yield piece
        piece = None  # drop it before the next parse: only one piece alive at a time
        pos = m.end() - 1


def _loads(data: bytes, events_as=None) -> Any:
    """A JSON object (the header, or the tail after the events), with orjson or msgspec;
    ``events_as`` decodes its ``traceEvents`` list the way the pieces are decoded."""
    if msgspec is not None:
        if events_as is not None and events_as is not _orjson_loads:
            keys = msgspec.json.decode(data, type=_TailKeys)
            out = {k: getattr(keys, k) for k in keys.__struct_fields__ if getattr(keys, k) is not msgspec.UNSET}
            return {**out, "traceEvents": msgspec.json.decode(data, type=_Tail).traceEvents}
        return msgspec.json.decode(data)
    return _orjson_loads(data)


def _orjson_loads(data: bytes) -> Any:
    try:
        import orjson
    except ImportError:
        raise _Unchunkable from None
    return orjson.loads(data)


def load(path: str | os.PathLike, args: bool = True) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a Chrome trace JSON file (see module docstring); ``args=False`` leaves the ``args``
    column empty (faster, less memory: for outputs that do not show them)."""
    p = Path(path)
    header: dict[str, Any] = {}
    try:
        decode = _decode_events if msgspec is not None else _orjson_loads
        df, meta = parse_events(_pieces(_blocks(p), header, decode), 0, p.name, args=args)
        doc: Any = header or []
    except _Unchunkable:
        doc, bad_utf8 = read_json(read_bytes(p), p.name)
        if isinstance(doc, dict):
            events = doc.get("traceEvents")
            if not isinstance(events, list):
                raise TraceError(FORMAT, f"{p.name}: object has no 'traceEvents' list") from None
        elif isinstance(doc, list):
            events = doc
        else:
            raise TraceError(FORMAT, f"{p.name}: top-level JSON is a {type(doc).__name__}, "
                                     "not an event list") from None
        df, meta = parse_events(events, 0, p.name, args=args)
        if bad_utf8:
            meta["non_utf8_replaced"] = bad_utf8
    base_ns = 0
    if isinstance(doc, dict):
        try:
            base_ns = int(doc.get("baseTimeNanoseconds") or 0)
        except (TypeError, ValueError):
            raise TraceError(FORMAT, f"{p.name}: baseTimeNanoseconds is not an integer") from None
        meta.update({k: v for k, v in doc.items() if k in _META_KEYS})
    if base_ns:
        # Kineto writes ts relative to this base; adding it back makes ranks' traces comparable
        df = _rebase(df, base_ns, meta)
        meta["clock"] = "wall-clock ns (baseTimeNanoseconds + ts)"
    meta["base_time_ns"] = base_ns
    return df, meta


def _rebase(df: pd.DataFrame, base_ns: int, meta: dict) -> pd.DataFrame:
    """``start_ns + base_ns``; rows that would leave int64 are dropped and counted."""
    start = df["start_ns"].to_numpy()
    room = (2**63 - 1) - abs(base_ns)
    over = (np.abs(start) > room) | (np.abs(start + df["dur_ns"].to_numpy()) > room) if room > 0 else \
        np.ones(len(df), dtype=bool)
    if over.any():
        meta["timestamp_overflows"] = meta.get("timestamp_overflows", 0) + int(over.sum())
        df = df[~over].reset_index(drop=True)
        if df.empty:
            raise TraceError(FORMAT, "baseTimeNanoseconds puts every event beyond int64 ns")
    df["start_ns"] = df["start_ns"] + base_ns
    return df


def parse_events(events, base_ns: int = 0, name: str = "", extra: dict | None = None, args: bool = True
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Span table from trace events: a list of events, or an iterable of such lists (pieces).

    Four steps: :func:`_collect` (the per-event loop: raw values into C buffers),
    :func:`_usable_rows` (drops and counts rows whose timestamps cannot be used),
    :func:`_lanes` (lane labels and order) and :func:`_table` (the span table).
    """
    c = _collect(events, args)
    start_us, dur_us, keep, dropped = _usable_rows(c, base_ns)
    unclosed = sum(len(s) for s in c.open_b.values()) + len(c.open_async)
    if len(start_us) == 0:
        bad = dropped["malformed_events"] + dropped["timestamp_overflows"]
        raise TraceError(FORMAT, f"{name}: no trace events with timestamps" + (f" ({bad} malformed)" if bad else ""))
    negative = int((dur_us < 0).sum())
    df = _table(c, start_us, dur_us, keep, base_ns)
    meta = {"clock": "wall-clock ns (baseTimeNanoseconds + ts)" if base_ns else "trace ts (us) x 1000",
            "base_time_ns": base_ns, "skipped_phases": c.skipped,
            "malformed_events": c.bad + dropped["malformed_events"],
            "timestamp_overflows": dropped["timestamp_overflows"], "negative_durations": negative,
            "unclosed_spans": unclosed, **(extra or {})}
    return df, meta


class _Collected:
    """What :func:`_collect` gathers: per-row buffers, lane keys and the metadata events."""

    def __init__(self):
        self.proc_name: dict[Any, str] = {}
        self.proc_labels: dict[Any, str] = {}
        self.thread_name: dict[tuple, str] = {}
        self.proc_sort: dict[Any, float] = {}
        self.thread_sort: dict[tuple, float] = {}
        self.codes: dict[tuple, int] = {}  # (pid, tid) -> lane code, in order of first appearance
        self.code_, self.name_, self.args_, self.inst_, self.cat_ = [], [], [], [], []
        # C doubles, not float objects: parser floats kept alive would pin its memory arenas
        self.ts_, self.dur_ = array("d"), array("d")
        self.open_b: dict[tuple, list] = {}
        self.open_async: dict[tuple, dict] = {}
        self.skipped: dict[str, int] = {}
        self.bad = 0
        self.shared = {}.setdefault  # one str per distinct name/category (the parser makes one per event)
        self.args_blobs: list = []
        self.keep_args = True  # False: args are not kept (only their column ids are read)
        # the args fields that become columns, taken before packing; correlation ids as C int64
        # (int objects from the parser would pin its arenas, see _pack)
        self.corr_, self.dev_, self.strm_ = array("q"), [], []


def _flush(c: _Collected) -> None:
    """Take the column fields out of the pending args and pack them (see :func:`_pack`)."""
    for out, key in ((c.dev_, "device"), (c.strm_, "stream")):
        out.extend([a.get(key) if type(a) is dict else None for a in c.args_])
    ids = [a.get("correlation") if type(a) is dict else None for a in c.args_]
    c.corr_.extend([v if type(v) is int and _NO_ID < v < 2**63 else _NO_ID for v in ids])
    c.args_blobs.append(_pack(c.args_) if c.keep_args else len(c.args_))
    c.args_.clear()


def _take_x(c: _Collected, xs: list) -> list:
    """Column-wise fast path for a piece's X events; returns the events it could not take."""
    def col(key: str, default: Any = None) -> list:
        # itemgetter runs in C; events lacking the key take the slower .get path
        try:
            return list(map(itemgetter(key), xs))
        except KeyError:
            return [ev.get(key, default) for ev in xs]

    codes, shared = c.codes, c.shared
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
    c.code_.extend([codes[k] for k in keys])
    c.name_.extend([shared(v, v) if type(v) is str else v for v in col("name")])
    c.cat_.extend([shared(v, v) if type(v) is str else v for v in col("cat")])
    c.ts_.extend(ts_a)
    c.dur_.extend(dur_a)
    c.args_.extend(col("args"))
    c.inst_.extend([False] * len(xs))
    return []


def _collect(events, args: bool = True) -> _Collected:
    """The per-event loop: raw values of every usable event into buffers, one row each.

    ``X`` events, the bulk of any trace, are taken a piece at a time, column by column
    (:func:`_take_x`, or :func:`_take_structs` for msgspec's structs); the other phases go
    through a per-event loop (:func:`_take_rest`). Only raw values are collected; conversion
    to ns happens once, vectorised, in :func:`_table`.
    """
    pieces = [events] if isinstance(events, list) else events
    buf = _Collected()
    buf.keep_args = args
    for piece in pieces:
        if type(piece) is not list:
            raise _Unchunkable
        if piece and type(piece[0]) is _Event:
            rest = _take_structs(buf, piece)
        else:
            try:
                phs = list(map(itemgetter("ph"), piece))
            except (KeyError, TypeError):  # an event without "ph" (rocprof v1's leading {}) or not an object
                phs = [ev.get("ph") if type(ev) is dict else None for ev in piece]
            is_x = [ph == "X" for ph in phs]
            xs = list(compress(piece, is_x))
            rest = [] if len(xs) == len(piece) else [ev for ev, x in zip(piece, is_x) if not x]
            rest = _take_x(buf, xs) + rest
            xs = phs = None
        if rest:
            buf.bad += _take_rest(buf, rest)
        if len(buf.args_) >= _ARGS_BATCH:
            _flush(buf)
        piece = rest = None  # free the parsed piece before the next one is parsed
    _flush(buf)
    return buf


if msgspec is not None:
    class _Event(msgspec.Struct, gc=False):
        """The fields of a trace event that are read; ``args`` stays raw JSON until needed."""

        ph: Any = None
        cat: Any = None
        name: Any = None
        pid: Any = None
        tid: Any = None
        ts: Any = None
        dur: Any = 0
        id: Any = None
        args: msgspec.Raw = msgspec.Raw(b"{}")  # absent: no fields (an explicit null stays null)

    class _Ids(msgspec.Struct, gc=False):
        """The args fields that become columns (a missing correlation id is -2**63)."""

        correlation: int = -(2**63)
        device: Any = None
        stream: Any = None

    class _AnyIds(msgspec.Struct, gc=False):
        """:class:`_Ids` of an args whose correlation is not an integer (checked afterwards)."""

        correlation: Any = None
        device: Any = None
        stream: Any = None

    class _Tail(msgspec.Struct):
        """The event array's last piece (the top-level keys after it: :data:`_TAIL_KEYS`)."""

        traceEvents: list[_Event] = []

    #: the top-level keys read, wherever they stand (Kineto writes some after the events)
    _TailKeys = msgspec.defstruct("_TailKeys", [(k, Any, msgspec.UNSET) for k in ("baseTimeNanoseconds",
                                                                                 *_META_KEYS)])
    _EVENTS = msgspec.json.Decoder(list[_Event])
    _IDS = msgspec.json.Decoder(list[_Ids])
    _NO_IDS = _AnyIds()
else:
    class _Event:  # never instantiated: the orjson path makes dicts
        pass

#: phases counted, never read (flows, counters, ...): a struct path skips them without a dict
_COUNTED = frozenset(("s", "f", "t", "C", "P", "O", "N", "D", "c", "n"))


def _decode_events(data: bytes) -> list:
    """A JSON array of events as :class:`_Event` structs (msgspec)."""
    return _EVENTS.decode(data)


_get_pidtid, _get_ts, _get_dur = attrgetter("pid", "tid"), attrgetter("ts"), attrgetter("dur")
_get_name, _get_cat, _get_args, _get_ph = attrgetter("name"), attrgetter("cat"), attrgetter("args"), attrgetter("ph")
_get_device, _get_stream, _get_corr = attrgetter("device"), attrgetter("stream"), attrgetter("correlation")


def _take_structs(c: _Collected, evs: list) -> list:
    """Column-wise path for a piece of msgspec structs: X events and instants into the
    columns, flows and counters counted; returns the other events (B/E, b/e, M) as dicts for
    :func:`_take_rest`."""
    phs = list(map(_get_ph, evs))
    try:
        counts = Counter(phs)
    except TypeError:  # an unhashable "ph" (a list): every event through the checked loop
        return [_as_dict(ev, c.keep_args) for ev in evs]
    rest: list = []
    for ph, n in counts.items():
        if ph in _COUNTED:
            c.skipped[ph] = c.skipped.get(ph, 0) + n
    if any(ph not in _COLUMNS and ph not in _COUNTED for ph in counts):  # B/E, b/e, M: rare
        rest = [_as_dict(ev, c.keep_args) for ev, ph in zip(evs, phs) if ph not in _COLUMNS and ph not in _COUNTED]
    xs = list(compress(evs, map("X".__eq__, phs))) if counts.get("X", 0) != len(evs) else evs
    n_inst = sum(counts.get(k, 0) for k in _INSTANTS)
    inst = list(compress(evs, map(_INSTANTS.__contains__, phs))) if n_inst else []
    for group, is_inst in ((xs, False), (inst, True)):
        if group:
            rest += _take_columns(c, group, is_inst)
    return rest


#: phases taken as columns by :func:`_take_structs`: complete events and instants
_INSTANTS = frozenset(("i", "I", "R"))
_COLUMNS = _INSTANTS | {"X"}


def _take_columns(c: _Collected, xs: list, instants: bool) -> list:
    """One group of structs (complete events, or instants) into the columns; returns them as
    dicts for the checked loop when a pid/tid cannot be a key."""
    codes, shared = c.codes, c.shared
    try:
        keys = list(map(_get_pidtid, xs))
        new = [k for k in dict.fromkeys(keys) if k not in codes]
    except TypeError:  # an unhashable pid/tid (a list): each event through the checked loop
        return [_as_dict(ev, c.keep_args) for ev in xs]
    for k in new:
        codes[k] = len(codes)
    ts = list(map(_get_ts, xs))
    try:
        ts_a = array("d", ts)
    except (TypeError, OverflowError):  # strings (rocprof v1), None, out of range: NaN if unusable
        ts_a = array("d", [_float_or_nan(v) for v in ts])
    if instants:
        dur_a = array("d", bytes(8 * len(xs)))
    else:
        dur = list(map(_get_dur, xs))
        try:
            dur_a = array("d", dur)
        except (TypeError, OverflowError):
            dur_a = array("d", [_float_or_nan(v) for v in dur])
    if c.args_:
        _flush(c)  # the rows before these first: args batches stay in row order
    c.code_.extend(map(codes.__getitem__, keys))
    # one shared str per distinct name/category: the parser makes one per event, and those kept
    # alive until the table is built would pin the parser's memory arenas
    c.name_.extend(_shared(shared, list(map(_get_name, xs))))
    c.cat_.extend(_shared(shared, list(map(_get_cat, xs))))
    c.ts_.extend(ts_a)
    c.dur_.extend(dur_a)
    c.inst_.extend([instants] * len(xs))
    raws = list(map(_get_args, xs))
    blob = b"[" + b",".join(raws) + b"]"
    if instants:  # no column ids on instants
        c.dev_.extend([None] * len(xs))
        c.strm_.extend([None] * len(xs))
        c.corr_.extend(array("q", [_NO_ID]) * len(xs))
    else:
        try:  # typed: every correlation an int, so the ids go to C int64 in one step
            ids = _IDS.decode(blob)
            corr = array("q", map(_get_corr, ids))
        except (msgspec.ValidationError, msgspec.DecodeError, OverflowError):  # odd args: one at a time
            ids = [_one_ids(r) for r in raws]
            corr = array("q", [v if type(v) is int and _NO_ID < v < 2**63 else _NO_ID for v in map(_get_corr, ids)])
        c.dev_.extend(map(_get_device, ids))
        c.strm_.extend(map(_get_stream, ids))
        c.corr_.extend(corr)
    c.args_blobs.append(blob if c.keep_args else len(xs))
    return []


def _shared(shared, values: list) -> list:
    """``values`` with each str replaced by the one shared copy of it (``shared`` is a dict's
    setdefault); other values (None, numbers, lists) as they are."""
    try:
        return list(map(shared, values, values))
    except TypeError:  # an unhashable value (a list) among them
        return [shared(v, v) if type(v) is str else v for v in values]


def _raw_args(raw) -> Any:
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None


def _one_ids(raw):
    try:
        return msgspec.json.decode(raw, type=_AnyIds)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _NO_IDS


def _as_dict(ev, keep_args: bool) -> dict:
    return {"ph": ev.ph, "cat": ev.cat, "name": ev.name, "pid": ev.pid, "tid": ev.tid, "ts": ev.ts, "dur": ev.dur,
            "id": ev.id, "args": _raw_args(ev.args) if keep_args else None}


def _other_phase(ev: dict, ph, buf: _Collected):
    """An event of another phase than X: ``(lane key, ts, dur, args, instant, the event that
    names the span)`` for an instant or a closed B/E or b/e pair; None for one taken otherwise
    (an opening B or b, metadata, a phase not read); False for an E or e that closes nothing.
    Fields of the wrong type raise."""
    if ph in ("i", "I", "R"):
        return (ev.get("pid"), ev.get("tid")), ev.get("ts"), 0, ev.get("args"), True, ev
    if ph == "B":
        buf.open_b.setdefault((ev.get("pid"), ev.get("tid")), []).append(ev)
        return None
    if ph == "E":
        stack = buf.open_b.get((ev.get("pid"), ev.get("tid")))
        if not stack:
            return False
        b = stack.pop()
        args = {**(b.get("args") or {}), **(ev.get("args") or {})} or None
        return (b.get("pid"), b.get("tid")), b["ts"], float(ev["ts"]) - float(b["ts"]), args, False, b
    if ph == "b":
        buf.open_async[(ev.get("cat"), ev.get("id"), ev.get("name"))] = ev
        return None
    if ph == "e":
        b = buf.open_async.pop((ev.get("cat"), ev.get("id"), ev.get("name")), None)
        if b is None:
            return False
        key = (b.get("pid"), f"async {b.get('cat') or ''}".strip())
        return key, b["ts"], float(ev["ts"]) - float(b["ts"]), b.get("args"), False, b
    if ph == "M":
        _metadata(ev, buf)
    else:
        buf.skipped[str(ph)] = buf.skipped.get(str(ph), 0) + 1
    return None


def _take_rest(buf: _Collected, rest: list) -> int:
    """The events :func:`_take_x` left (other phases, and X events it could not take as
    columns) into ``buf``, one at a time: B/E and b/e pairs matched, metadata read, instants
    kept (:func:`_other_phase`); returns how many were malformed."""
    codes, shared = buf.codes, buf.shared
    bad = 0
    # bound methods: this loop runs once per event, so attribute lookups add up
    add_code, add_name, add_cat, add_ts, add_dur, add_args, add_inst = (
        buf.code_.append, buf.name_.append, buf.cat_.append, buf.ts_.append, buf.dur_.append, buf.args_.append,
        buf.inst_.append)
    codes_get = codes.get
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
                got = _other_phase(ev, ph, buf)
            except (KeyError, TypeError, ValueError, AttributeError):
                got = False
            if not got:
                bad += got is False
                continue
            key, ts, dur, args, kind, ev = got
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
    return bad


#: |ns| at or beyond this does not fit int64 (with room for adding a duration)
_MAX_NS = 9.2e18


def _usable_rows(c: _Collected, base_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict]:
    """Start and duration (us) of the rows kept; rows with a NaN timestamp (missing, not a
    number) or one beyond int64 ns once ``base_ns`` is added are dropped from every buffer
    and counted. ``keep`` is the kept rows' indices, or None when all are kept."""
    start_us = np.frombuffer(c.ts_, dtype=np.float64).copy()
    dur_us = np.frombuffer(c.dur_, dtype=np.float64).copy()
    del c.ts_[:], c.dur_[:]
    with np.errstate(invalid="ignore", over="ignore"):
        nan = np.isnan(start_us) | np.isnan(dur_us)
        start_abs = np.abs(start_us * 1000.0 + base_ns)
        end_abs = np.abs(start_us * 1000.0 + np.maximum(dur_us, 0) * 1000.0 + base_ns)
        overflow = ~nan & ((start_abs >= _MAX_NS) | (end_abs >= _MAX_NS) | ~np.isfinite(start_abs + end_abs))
    dropped = {"malformed_events": int(nan.sum()), "timestamp_overflows": int(overflow.sum())}
    ok = ~(nan | overflow)
    if ok.all():
        return start_us, dur_us, None, dropped
    keep = np.flatnonzero(ok)
    c.code_, c.name_, c.cat_, c.inst_, c.dev_, c.strm_ = ([lst[i] for i in keep] for lst in (
        c.code_, c.name_, c.cat_, c.inst_, c.dev_, c.strm_))
    c.corr_ = array("q", np.frombuffer(c.corr_, dtype=np.int64)[keep].tobytes())
    return start_us[ok], dur_us[ok], keep, dropped


def _lanes(c: _Collected, gpu: dict[int, tuple]) -> tuple[list[str], np.ndarray, list[str]]:
    """Lane order and labels: ``(order, lane index per code, process label per code)``.

    One lane per (pid, tid), ordered by sort indices then first appearance (as Perfetto
    does); GPU lanes read "GPU 0 · stream 7", from the metadata events or, in a trace without
    them, from the device and stream of the lane's GPU events (``gpu``: code -> (device,
    stream)); labels that collide get their process and tid.
    """
    seen_keys = list(c.codes)  # lane key per code
    first_pid: dict[Any, int] = {}
    for i, (pid, _tid) in enumerate(seen_keys):
        first_pid.setdefault(pid, i)
    proc_sort, thread_sort, codes = c.proc_sort, c.thread_sort, c.codes
    keys = sorted(seen_keys, key=lambda k: (_num(proc_sort.get(k[0])), first_pid[k[0]], _num(thread_sort.get(k)),
                                            codes[k]))
    labels = {k: _lane_label(k, c.proc_name, c.thread_name, gpu.get(codes[k])) for k in keys}
    for k in keys:  # GPU lanes: "GPU 0 · stream 7"
        pl = c.proc_labels.get(k[0], "")
        if pl and pl != "CPU" and not labels[k].startswith(pl):
            labels[k] = f"{pl} · {labels[k]}"
    counts: dict[str, int] = {}
    for v in labels.values():
        counts[v] = counts.get(v, 0) + 1
    for k in keys:
        if counts[labels[k]] > 1:
            labels[k] = f"{_proc_label(k[0], c.proc_name)} / {labels[k]} ({k[1]})"
    order = list(dict.fromkeys(labels[k] for k in keys))
    position = {label: i for i, label in enumerate(order)}  # a dict: 60,000 lanes stay linear
    lane_of_code = np.array([position[labels[k]] for k in seen_keys], dtype=np.int64)
    process_of_code = [_proc_label(k[0], c.proc_name) for k in seen_keys]
    return order, lane_of_code, process_of_code


def _table(c: _Collected, start_us: np.ndarray, dur_us: np.ndarray, keep: np.ndarray | None,
           base_ns: int) -> pd.DataFrame:
    """The span table from the kept rows; args are rebuilt last (see :func:`_trim_heap`)."""
    n = len(start_us)
    # whole us and the fraction apart: ts in us since the epoch (~1.7e15, older Kineto) times
    # 1000 is past 2**53, where a double's step is 256 ns; the whole part is exact in int64
    whole_us = np.floor(start_us)
    start_ns = whole_us.astype(np.int64) * 1000 + np.rint((start_us - whole_us) * 1000.0).astype(np.int64) + base_ns
    dur_ns = np.maximum(np.rint(dur_us * 1000.0), 0).astype(np.int64)
    inst = np.array(c.inst_, dtype=bool)
    dur_ns[inst] = 0
    seen_keys = list(c.codes)
    code_arr = np.array(c.code_, dtype=np.int64)
    raw_cat = _categorical(c.cat_, lambda v: None if v is None else str(v))
    cats = np.array([_category(v, None, {}) for v in raw_cat.categories] + [None], dtype=object)[raw_cat.codes]
    missing = pd.isna(cats)
    if missing.any():  # rocprof v1: no categories; they come from the process name
        for i in np.flatnonzero(missing):
            cats[i] = _category(None, seen_keys[c.code_[i]][0], c.proc_name)
    # GPU events: device and stream from their args, else from their lane's pid and tid
    rows = np.flatnonzero(np.isin(cats, list(_GPU_CATS)))
    lane = code_arr[rows]
    device = _ints_or_na(c.dev_, rows, np.array([k[0] for k in seen_keys] + [None], dtype=object)[lane], n)
    stream = _ints_or_na(c.strm_, rows, np.array([k[1] for k in seen_keys] + [None], dtype=object)[lane], n)
    both = ~(device.isna()[rows] | stream.isna()[rows])
    first_codes, first = np.unique(lane[both], return_index=True)  # each lane's first GPU event
    at = rows[both][first]
    gpu = dict(zip(first_codes.tolist(), zip(device[at].tolist(), stream[at].tolist())))  # lane code -> (device, stream)
    order, lane_of_code, process_of_code = _lanes(c, gpu)
    track = _annotation_lanes(pd.Categorical.from_codes(lane_of_code[code_arr], categories=order, ordered=True),
                              cats == "gpu_user_annotation")
    proc_codes, proc_names = pd.factorize(np.array(process_of_code, dtype=object))
    process = pd.Categorical.from_codes(proc_codes[code_arr], categories=proc_names)
    ids = np.frombuffer(c.corr_, dtype=np.int64)
    has_id = ids != _NO_ID
    df = from_columns({
        "process": process, "track": track, "device": device, "stream": stream,
        "name": _categorical(c.name_, lambda v: "" if v is None else str(v)),
        "category": cats, "start_ns": start_ns, "dur_ns": dur_ns,
        "correlation": pd.arrays.IntegerArray(np.where(has_id, ids, 0), ~has_id),
        "kind": pd.Categorical.from_codes(inst.astype(np.int8), categories=["span", "instant"]),
    }, n=n, source=FORMAT)
    df = with_depth(df)
    # args last: the collected columns (emptied in place: the closures and appenders share them)
    # and the table's temporaries are freed and their pages handed back before the dicts are
    # rebuilt from their batches
    del code_arr, process, cats, device, stream, ids, has_id
    for lst in (c.code_, c.name_, c.cat_, c.inst_, c.dev_, c.strm_, c.corr_):
        del lst[:]
    _trim_heap()
    args = _unpack(c.args_blobs)
    if keep is not None:
        args = [args[i] for i in keep]
    df["args"] = args
    return df


def _ints_or_na(values: list, rows: np.ndarray, fallback: np.ndarray, n: int) -> pd.arrays.IntegerArray:
    """An Int64 column of ``n`` rows, set at ``rows`` from ``values`` (where None: ``fallback``),
    each read as ``int()`` would (numbers and numeric text; anything else: NA), NA elsewhere."""
    got = np.fromiter(map(values.__getitem__, rows.tolist()), dtype=object, count=len(rows))  # lists stay items
    got = np.where(pd.isna(got), fallback, got)
    num = pd.to_numeric(pd.Series(got, dtype=object), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    ok = np.isfinite(num) & (np.abs(num) < 2**53)
    data = np.zeros(n, dtype=np.int64)
    mask = np.ones(n, dtype=bool)
    data[rows[ok]] = np.trunc(num[ok]).astype(np.int64)
    mask[rows[ok]] = False
    return pd.arrays.IntegerArray(data, mask)


def _categorical(values: list, label) -> pd.Categorical:
    """A categorical of raw values (shared strings, mostly): each distinct value labelled once
    (``label`` for those that are not str), the rows mapped to codes in C; values that label
    alike (1 and "1") become one category, unhashable ones their text."""
    try:
        index = {k: i for i, k in enumerate(dict.fromkeys(values))}
    except TypeError:  # a list or dict where a name should be
        values = [v if v is None or type(v) is str else str(v) for v in values]
        index = {k: i for i, k in enumerate(dict.fromkeys(values))}
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    labels = [k if type(k) is str else label(k) for k in index]
    if None in labels:  # missing values: code -1
        remap = np.array([-1 if v is None else i for i, v in enumerate(labels)], dtype=np.int64)
        labels = [v for v in labels if v is not None]
        remap[remap >= 0] = np.arange(len(labels))
        codes = remap[codes]
    # sorted categories, as pd.Categorical makes them (sorting by name sorts by text); labels
    # that collided become one
    if not labels:
        return pd.Categorical.from_codes(np.full(len(values), -1), categories=[])
    cats, inverse = np.unique(np.array(labels, dtype=object), return_inverse=True)
    codes = np.where(codes >= 0, inverse[np.maximum(codes, 0)], -1)
    return pd.Categorical.from_codes(codes, categories=list(cats))


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
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # no C library to open by None (Windows)
        return None


_MALLOC_TRIM = _find_malloc_trim()  # glibc only


def _unpack(blobs: list) -> list:
    """The args of every row (None where not a dict); empties ``blobs`` batch by batch. A batch
    is raw JSON (an array of args), a list of dicts, or a count of rows whose args were not kept."""
    out: list = []
    for i, b in enumerate(blobs):
        blobs[i] = None  # each batch is freed (and its pages trimmed) once decoded
        if type(b) is int:
            out.extend([None] * b)
            continue
        if isinstance(b, bytes):
            b = msgspec.json.decode(b) if msgspec is not None else _orjson_loads(b)
            _trim_heap()
        out.extend([a if type(a) is dict and a else None for a in b])  # no fields ({}, absent): None
    return out


def _annotation_lanes(track: pd.Categorical, is_annotation: np.ndarray) -> pd.Categorical:
    """GPU annotation ranges (``gpu_user_annotation``) moved from their stream's lane to a
    lane of their own right after it ("GPU 0 · stream 7 annotations"): on the stream's lane
    their union would count as the stream's busy time, though no kernel ran."""
    if not is_annotation.any():
        return track
    codes = track.codes.astype(np.int64)
    has = set(np.unique(codes[is_annotation]).tolist())
    cats, base, ann = [], [], []
    taken = set(track.categories)
    for i, lane in enumerate(track.categories):
        base.append(len(cats))
        cats.append(lane)
        if i in has:
            label = f"{lane} annotations"  # "GPU 0 · stream 7 annotations"
            while label in taken:  # a lane of that name exists already
                label += " (GPU)"
            ann.append(len(cats))
            cats.append(label)
        else:
            ann.append(-1)
    new = np.where(is_annotation, np.array(ann)[codes], np.array(base)[codes])
    return pd.Categorical.from_codes(new, categories=cats, ordered=True)


def _metadata(ev: dict, c: _Collected) -> None:
    """Record one ``M`` event (lane names and sort indices)."""
    a = ev.get("args") or {}
    mname, pid, key = ev.get("name"), ev.get("pid"), (ev.get("pid"), ev.get("tid"))
    if mname == "process_name":
        c.proc_name[pid] = str(a.get("name", ""))
    elif mname == "process_labels":  # Kineto: "CPU" or "GPU 0" for a device's pid
        c.proc_labels[pid] = str(a.get("labels", ""))
    elif mname == "thread_name":
        c.thread_name[key] = str(a.get("name", ""))
    elif mname == "process_sort_index":
        c.proc_sort[pid] = a.get("sort_index", 0)
    elif mname == "thread_sort_index":
        c.thread_sort[key] = a.get("sort_index", 0)


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


def _proc_label(pid: Any, proc_name: dict) -> str:
    return proc_name.get(pid) or f"process {pid}"


def _lane_label(key: tuple, proc_name: dict, thread_name: dict, gpu: tuple | None = None) -> str:
    pid, tid = key
    tn = thread_name.get(key)
    if tn:
        return tn.strip()
    pn = proc_name.get(pid)
    if pn and re.match(r"GPU\s*\d+", pn):
        return f"{pn} · stream {tid}"
    if pn:
        return f"{pn} · {_thread(tid)}"
    if gpu is not None:  # no metadata: the lane's GPU events say where they ran
        return f"GPU {gpu[0]} · stream {gpu[1]}"
    if pid in (None, "") and tid in (None, ""):
        return "global"
    if pid == -1:  # Kineto's own activity (buffer requests, flushes): not a thread of the program
        return "profiler overhead"
    if pid is None or pid == tid:  # a process's main thread
        return _thread(tid)
    return f"{_process(pid)} · {_thread(tid)}"


def _thread(tid: Any) -> str:
    """"thread 6583" for a numeric id, the name itself for a named one ("PyTorch Profiler")."""
    return f"thread {tid}" if isinstance(tid, int) or (isinstance(tid, str) and tid.isdigit()) else str(tid)


def _process(pid: Any) -> str:
    return f"process {pid}" if isinstance(pid, int) or (isinstance(pid, str) and pid.isdigit()) else str(pid)


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
