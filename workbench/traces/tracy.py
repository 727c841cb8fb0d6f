"""Tracy ``.tracy`` captures read in Python (no Tracy build needed), file versions 0.11.0 - 0.14.0.

Container (Tracy's FileWrite): magic ``tr\\xFDP``, u8 compression (0 LZ4, 1 Zstd), u8 stream
count, then blocks of (u32 LE compressed size, payload); block i belongs to stream i mod n and
each stream is one continuous compression stream (LZ4 blocks use the previous 64 KiB of the
same stream as dictionary). Every block inflates to at most 64 KiB (Tracy's FileBufSize);
more is corruption, and the whole file's inflated size is capped (:mod:`.inflate`).

Payload: ``tracy`` + major, minor, patch, then Tracy's ``Worker`` serialization, which only
Tracy's own version reads. The layout differences between 0.11.0 and 0.14.0 are the version
gates of ``Worker::Worker(FileRead&)`` in ``server/TracyWorker.cpp`` (the file versions
between releases are Tracy's development versions):

- 0.11.1: a 4-byte group hint per thread;        - 0.11.2: a die level in the CPU topology;
- 0.12.3: the 8-byte ``delay`` after the header is gone;
- 0.12.4: GPU contexts carry note names and notes, GPU zones a 2-byte query id;
- 0.13.2: messages carry a source and a severity byte;
- 0.13.4: one list of sections; 0.13.5: sections by category with descriptions.

Other versions are refused with the version found (or read through ``tracy-csvexport`` when it
is on PATH, Tracy's reader of its own version). Checked against captures of Tracy 0.11.1,
0.12.2, 0.13.1 and 0.14.0 and their ``tracy-csvexport -u``/``-g``/``-m``/``-p`` output
(tests/data/tracy_versions), and the IREE 3.13 wheel's 0.11.2 captures.

Read: strings, thread names, source locations, zone extras (dynamic names and texts: IREE puts
dispatch names there), every thread's zone tree (category ``zone``), messages (instants on
their thread, category ``message``), GPU contexts' zones (category ``kernel``, lane
``GPU: <context name>``, GPU time; CPU submit times in args) and plots (instants with
``args["value"]`` on ``plot: <name>``). Locks are skipped; frames, memory, callstacks and
samples (after the plots) are not read. All structs in the file are packed (no padding).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from . import Format, TraceError
from .inflate import Budget
from .model import concat, from_columns, with_depth

FORMAT = "tracy"
MAGIC = b"tr\xfdP"
LEGACY_MAGICS = (b"tlZ\x04", b"tZst")
#: file versions this reader decodes (inclusive)
OLDEST, NEWEST = (0, 11, 0), (0, 14, 0)
INFO = Format(
    FORMAT, "Tracy capture", (".tracy",),
    "file versions 0.11.0 - 0.14.0 (Tracy 0.11.x - 0.14.0, IREE wheels' 0.11.2); others through "
    "tracy-csvexport on PATH",
    "CPU zones per thread (dynamic names and texts from zone extras), GPU zones per GPU context, messages "
    "(instants), plots (instants with values); locks skipped, frames and memory not read")
_BLOCK_MAX = 64 * 1024


def _ver(major: int, minor: int, patch: int) -> int:
    return (major << 16) | (minor << 8) | patch


def detect(head: bytes, name: str) -> bool:
    """Tracy container (current or legacy magic) or an uncompressed Tracy payload."""
    return head[:4] == MAGIC or head[:4] in LEGACY_MAGICS or head[:5] == b"tracy"


def supported_text() -> str:
    return f"{'.'.join(map(str, OLDEST))} - {'.'.join(map(str, NEWEST))}"


class _BlockSink:
    """Receives one stream's inflated output; refuses a block over 64 KiB (see module docstring)."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data) -> int:
        self.size += len(data)
        if self.size > _BLOCK_MAX:
            raise OverflowError("a block inflates beyond Tracy's 64 KiB buffer")
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out, self.parts, self.size = b"".join(self.parts), [], 0
        return out


def decompress(data: bytes, name: str = "") -> bytes:
    """The uncompressed Worker payload of a .tracy file (bounded: see the module docstring)."""
    if data[:5] == b"tracy":
        return data
    if data[:4] in LEGACY_MAGICS:
        raise TraceError(FORMAT, f"{name}: legacy Tracy container ({data[:4]!r}, Tracy < 0.9); supported: "
                                 f"{supported_text()} (re-save the capture with a newer Tracy)")
    if data[:4] != MAGIC or len(data) < 6:
        raise TraceError(FORMAT, f"{name}: not a Tracy file (bad magic)")
    comp, n_streams = data[4], data[5]
    if comp not in (0, 1) or n_streams == 0:
        raise TraceError(FORMAT, f"{name}: unknown compression {comp} / {n_streams} streams in the header")
    budget = Budget(FORMAT, name, len(data))
    if comp == 1:
        import zstandard  # optional: only zstd-compressed captures need it

        sinks = [_BlockSink() for _ in range(n_streams)]
        writers = [zstandard.ZstdDecompressor().stream_writer(s, write_size=_BLOCK_MAX) for s in sinks]
    else:
        import lz4.block  # optional: only LZ4-compressed captures need it

        dicts = [b""] * n_streams
    out: list[bytes] = []
    off, i, n = 6, 0, len(data)
    while off < n:
        if off + 4 > n:
            raise TraceError(FORMAT, f"{name}: truncated (block header cut at byte {off})")
        (size,) = struct.unpack_from("<I", data, off)
        off += 4
        if size == 0 or off + size > n:
            raise TraceError(FORMAT, f"{name}: truncated (block {i} needs {size} bytes, {n - off} left)")
        block = data[off: off + size]
        off += size
        s = i % n_streams
        try:
            if comp == 1:
                writers[s].write(block)
                writers[s].flush()
                chunk = sinks[s].take()
            else:
                chunk = lz4.block.decompress(block, uncompressed_size=_BLOCK_MAX, dict=dicts[s])
                dicts[s] = (dicts[s] + chunk)[-_BLOCK_MAX:]
        except Exception as exc:  # zstd/lz4 raise their own error types; OverflowError from the sink
            raise TraceError(FORMAT, f"{name}: corrupted compressed block {i} ({exc})") from None
        budget.add(len(chunk))
        out.append(chunk)
        i += 1
    return b"".join(out)


class _Reader:
    """Cursor over the payload; every overrun is a TraceError naming what was being read."""

    def __init__(self, buf: bytes, name: str):
        self.b = buf
        self.o = 0
        self.name = name

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.o + n > len(self.b):
            raise TraceError(FORMAT, f"{self.name}: truncated or corrupted (reading {what} at byte {self.o} of "
                                     f"{len(self.b)} uncompressed)")

    def unpack(self, fmt: str, what: str):
        s = struct.Struct("<" + fmt)
        self.need(s.size, what)
        v = s.unpack_from(self.b, self.o)
        self.o += s.size
        return v

    def u64(self, what: str) -> int:
        return self.unpack("Q", what)[0]

    def count(self, what: str, item_size: int) -> int:
        """A u64 element count, checked against the bytes left (corruption shows up here)."""
        n = self.u64(what)
        self.need(n * item_size, f"{n} x {what}")
        return n

    def string(self, what: str) -> bytes:
        n = self.count(what, 1)
        s = self.b[self.o: self.o + n]
        self.o += n
        return s

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.o += n

    def array(self, dtype: str | np.dtype, n: int, what: str) -> np.ndarray:
        dt = np.dtype(dtype)
        self.need(n * dt.itemsize, what)
        out = np.frombuffer(self.b, dtype=dt, count=n, offset=self.o)
        self.o += n * dt.itemsize
        return out


class UnsupportedVersion(TraceError):
    """A Tracy file version this reader does not decode."""


class _Strings:
    """The capture's string table and the lookups zones, messages and plots use."""

    def __init__(self, r: _Reader):
        n_str = r.count("strings", 16)
        self.items: list[str] = []
        by_ptr: dict[int, str] = {}
        b = r.b
        for _ in range(n_str):
            ptr, ssz = r.unpack("QQ", "string")
            r.need(ssz, "string bytes")
            s = b[r.o: r.o + ssz].decode("utf-8", "replace")  # never bytes, whatever the file holds
            r.o += ssz
            self.items.append(s)
            by_ptr[ptr] = s
        self.by_id: dict[int, str] = {}
        for _ in range(r.count("string ids", 16)):
            sid, ptr = r.unpack("QQ", "string id")
            if ptr in by_ptr:
                self.by_id[sid] = by_ptr[ptr]
        self.thread_names: dict[int, str] = {}
        for _ in range(r.count("thread names", 16)):
            tid, ptr = r.unpack("QQ", "thread name")
            if ptr in by_ptr:
                self.thread_names[tid] = by_ptr[ptr]

    def ref(self, v: int, flags: int) -> str | None:
        """StringRef: u64 value + flags (bit 1 active, bit 0 value is an index into strings)."""
        if not flags & 2:
            return None
        if flags & 1:
            return self.items[v] if v < len(self.items) else None
        return self.by_id.get(v)

    def idx(self, raw: int) -> str | None:
        """StringIdx: 24-bit (index + 1), 0 meaning none."""
        return self.items[raw - 1] if 0 < raw <= len(self.items) else None


def _u24(raw: np.ndarray, col: int) -> np.ndarray:
    return (raw[:, col].astype(np.int64) | (raw[:, col + 1].astype(np.int64) << 8)
            | (raw[:, col + 2].astype(np.int64) << 16))


def parse(buf: bytes, name: str = "") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Span table + meta from an uncompressed Tracy payload."""
    r = _Reader(buf, name)
    r.need(8, "header")
    if buf[:5] != b"tracy":
        raise TraceError(FORMAT, f"{name}: payload does not start with 'tracy' (corrupted)")
    ver = tuple(buf[5:8])
    fv = _ver(*ver)
    if not _ver(*OLDEST) <= fv <= _ver(*NEWEST):
        raise UnsupportedVersion(FORMAT, f"{name}: Tracy file version {ver[0]}.{ver[1]}.{ver[2]} is not supported "
                                         f"(read: {supported_text()}; other versions read through tracy-csvexport "
                                         "when it is on PATH)")
    r.o = 8
    header = _header(r, fv)
    strings = _Strings(r)
    r.skip(24 * r.count("external names", 24), "external names")
    thread_map = r.array("<u8", r.count("local thread map", 8), "local thread map").tolist()
    r.skip(8 * r.count("external thread map", 8), "external thread map")
    locs = _SourceLocations(r, strings)
    for what in ("zone counts", "gpu zone counts"):
        r.skip(10 * r.count(what, 10), what)
    _skip_locks(r)
    messages = _messages(r, fv, strings)
    extra_raw = r.array(np.uint8, 12 * r.count("zone extras", 12), "zone extras").reshape(-1, 12)
    extra_text, extra_name = _u24(extra_raw, 3), _u24(extra_raw, 6)
    r.u64("zone total")
    r.u64("zone children total")
    zones, track_tid, message_tid = _threads(r, fv, strings, thread_map)
    gpu = _gpu_contexts(r, fv, strings)
    plots = _plots(r, strings)

    last_time = int(header["last_time"])
    parts: list[pd.DataFrame] = []
    unfinished = 0
    if zones["start"]:
        table, unfinished = _zone_table(zones, locs, extra_name, extra_text, strings, last_time)
        parts.append(table)
    gpu_unfinished = 0
    if gpu["start"]:
        table, gpu_unfinished = _gpu_table(gpu, locs)
        parts.append(table)
    tid_track = {tid: t for t, tid in track_tid.items()}
    if len(messages["time"]):
        parts.append(_message_table(messages, message_tid, tid_track))
    if plots["time"]:
        parts.append(_plot_table(plots))
    if not parts:
        raise TraceError(FORMAT, f"{name}: the capture has no zones, GPU zones, messages or plots")
    df = concat(parts)
    used = set(df["track"].astype(str))
    # lanes: threads in the capture's order, then GPU contexts, plots and unattributed messages
    threads = [t for t in track_tid if t in used]
    df["track"] = df["track"].cat.set_categories(threads + sorted(used - set(threads)), ordered=True)
    df["process"] = pd.Categorical([header["program"] or "tracy"] * len(df))
    meta = {"clock": "ns since Tracy capture start", "tracy_version": ".".join(map(str, ver)),
            "capture_name": header["capture_name"], "program": header["program"], "pid": header["pid"],
            "capture_time": header["capture_time"], "host_info": header["host_info"], "span_ns": last_time,
            "thread_ids": {t: track_tid[t] for t in threads}, "thread_map": thread_map,
            "unfinished_zones": unfinished, "unclosed_spans": unfinished + gpu_unfinished,
            "gpu_contexts": gpu["contexts"], "messages": len(messages["time"]), "plots": sorted(set(plots["name"]))}
    return df, meta


def _header(r: _Reader, fv: int) -> dict[str, Any]:
    """Fields up to the string table (only the ones a timeline needs are kept)."""
    if fv < _ver(0, 12, 3):
        r.skip(8, "delay")
    _res, _timer_mul, last_time, _frame_off, pid, _sampling, _arch, _cpu_id = r.unpack("qdqQQqBI", "header")
    r.skip(13, "cpu manufacturer and on-demand flag")
    out = {"last_time": last_time, "pid": pid,
           "capture_name": r.string("capture name").decode("utf-8", "replace"),
           "program": r.string("program name").decode("utf-8", "replace")}
    (out["capture_time"],) = r.unpack("q", "capture time")
    r.unpack("q", "executable time")
    out["host_info"] = r.string("host info").decode("utf-8", "replace")
    for _ in range(r.count("cpu packages", 12)):
        r.unpack("I", "package id")
        for _ in range(r.count("cpu dies", 12)) if fv >= _ver(0, 11, 2) else (None,):
            if fv >= _ver(0, 11, 2):
                r.unpack("I", "die id")
            for _ in range(r.count("cpu cores", 12)):
                r.unpack("I", "core id")
                r.skip(4 * r.count("cpu threads", 4), "cpu threads")
    r.skip(28, "crash event")
    for _ in range(r.count("frame sets", 17)):
        _fname, continuous, fsz = r.unpack("QBQ", "frame set")
        r.skip(fsz * (12 if continuous else 20), "frames")
    if fv >= _ver(0, 13, 5):
        for _ in range(r.count("section categories", 10)):
            r.unpack("H", "section category")
            r.skip(15 * r.count("sections", 15), "sections")
        r.skip(5 * r.count("section descriptions", 5), "section descriptions")
    elif fv == _ver(0, 13, 4):
        r.skip(15 * r.count("sections", 15), "sections")
    return out


class _SourceLocations:
    """Static and dynamic (payload) source locations: (name, function, file, line)."""

    _FMT = "QBQBQBII"  # three StringRefs (u64 + flags byte), line, color

    def __init__(self, r: _Reader, strings: _Strings):
        self.by_ptr: dict[int, tuple] = {}
        for _ in range(r.count("source locations", 43)):
            (ptr,) = r.unpack("Q", "source location")
            self.by_ptr[ptr] = self._loc(r.unpack(self._FMT, "source location"), strings)
        self.expand = r.array("<u8", r.count("source location map", 8), "source location map").tolist()
        self.payload = [self._loc(r.unpack(self._FMT, "dynamic source location"), strings)
                        for _ in range(r.count("dynamic source locations", 35))]

    @staticmethod
    def _loc(v: tuple, strings: _Strings) -> tuple:
        a, af, f_, ff, fl, flf, line, _color = v
        return strings.ref(a, af), strings.ref(f_, ff), strings.ref(fl, flf), line

    def get(self, srcloc: int) -> tuple:
        """A zone's int16 srcloc: >= 0 indexes the static map, < 0 the payload list."""
        if srcloc >= 0:
            ptr = self.expand[srcloc] if srcloc < len(self.expand) else None
            loc = self.by_ptr.get(ptr) if ptr is not None else None
        else:
            loc = self.payload[-srcloc - 1] if -srcloc - 1 < len(self.payload) else None
        return loc or (None, None, None, 0)


def _skip_locks(r: _Reader) -> None:
    """Locks: id u32, name StringIdx, srcloc i16, type u8, valid u8, announce/terminate i64,
    thread list, then (time i64, srcloc i16, thread u8, type u8) events."""
    for _ in range(r.count("locks", 43)):
        r.skip(9, "lock header")
        r.skip(1 + 17, "lock type and times")
        r.skip(8 * r.count("lock threads", 8), "lock threads")
        r.skip(12 * r.count("lock events", 12), "lock events")


def _messages(r: _Reader, fv: int, strings: _Strings) -> dict[str, Any]:
    """ptr u64, time delta i64, StringRef (9 bytes), color u32, callstack u24 [, source u8, severity u8]."""
    size = 32 + (2 if fv >= _ver(0, 13, 2) else 0)
    n = r.count("messages", size)
    raw = r.array(np.uint8, n * size, "messages").reshape(-1, size)
    ptr = raw[:, 0:8].copy().view("<u8").ravel()
    time = np.cumsum(raw[:, 8:16].copy().view("<i8").ravel())
    value = raw[:, 16:24].copy().view("<u8").ravel().tolist()
    flags = raw[:, 24].tolist()
    text = [strings.ref(v, f) or "" for v, f in zip(value, flags)]
    severity = raw[:, 33].tolist() if size == 34 else [None] * n
    return {"ptr": ptr.tolist(), "time": time, "text": text, "severity": severity}


def _threads(r: _Reader, fv: int, strings: _Strings, thread_map: list[int]
             ) -> tuple[dict[str, list], dict[str, int], dict[int, int]]:
    """Every thread's zones; its lane name; which thread posted each message (by pointer).

    ``thread_map`` (the saved compressed-thread table) is extended in place with each thread
    not yet in it, in file order, as Tracy does while loading: the result maps the thread
    indices of Tracy's tools (tracy-csvexport's ``thread`` column) to thread ids."""
    cols: dict[str, list] = {"track": [], "srcloc": [], "extra": [], "start": [], "end": [], "depth": []}  # arrays
    track_tid: dict[str, int] = {}
    message_tid: dict[int, int] = {}
    thread_fmt = "QQQBiI" if fv >= _ver(0, 11, 1) else "QQQBI"
    for _ in range(r.count("threads", struct.calcsize("<" + thread_fmt))):
        fields = r.unpack(thread_fmt, "thread")
        tid, tsz = fields[0], fields[-1]
        if tid not in thread_map:
            thread_map.append(tid)
        tname = strings.thread_names.get(tid, f"thread {tid}")
        track = tname if tname not in track_tid else f"{tname} ({tid})"
        track_tid[track] = tid
        if tsz:
            fields, start, end, depth = _walk_zones(r, tsz, _CPU_ZONE, f"thread '{track}'")
            _add_zones(cols, track, fields, start[:, 0], end[:, 0], depth, srcloc=0, extra=2)
        for ptr in r.array("<u8", r.count("thread messages", 8), "thread messages").tolist():
            message_tid[ptr] = tid
        for what in ("context switch samples", "samples"):
            r.skip(11 * r.count(what, 11), what)
    return cols, track_tid, message_tid


class _ZoneRecord(NamedTuple):
    """How one kind of zone is written: a head before its children (its last field the child
    count), a tail after them, and the fields of each that are time deltas (one per clock)."""

    head: struct.Struct
    tail: struct.Struct
    tail_size: int  # the tail's bytes: it may end in a field that is not read
    head_deltas: tuple[int, ...]


#: a CPU zone: i16 srcloc, i64 start delta, u32 extra, u32 child count | i64 end delta
_CPU_ZONE = _ZoneRecord(struct.Struct("<hqII"), struct.Struct("<q"), 8, (1,))


def _gpu_zone(query_ids: bool) -> _ZoneRecord:
    """A GPU zone: i64 CPU and GPU start deltas, i16 srcloc, u24 callstack (skipped), u16
    thread, u64 child count | i64 CPU and GPU end deltas [, u16 query id, skipped]."""
    return _ZoneRecord(struct.Struct("<qqh3xHQ"), struct.Struct("<qq"), 18 if query_ids else 16, (0, 1))


#: times beyond this many ns (about 146 years) are corruption, and their sums could overflow int64
_MAX_ABS_NS = float(2**62)


def _walk_zones(r: _Reader, top_count: int, rec: _ZoneRecord, what: str
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode one thread's zone tree, CPU or GPU (iteratively: IREE nests deep enough to hurt
    recursion): per zone in write order, its head's fields, its start and end per clock (the
    deltas accumulate over the tree in write order) and its depth.

    Each zone is its head, its children, its tail. Untrusted input, one set of bounds: a child
    count (the top level's too) larger than the bytes left could hold, a record cut short, or
    times out of range raise TraceError naming ``what`` and the byte offset."""
    b, o, n_b = r.b, r.o, len(r.b)
    head, tail, head_size, tail_size = rec.head.unpack_from, rec.tail.unpack_from, rec.head.size, rec.tail_size
    smallest = head_size + tail_size
    heads: list[tuple] = []
    tails: list[tuple] = []
    order: list[int] = []  # the records in write order: zone i's head as i, its tail as ~i
    depth: list[int] = []
    stack = [[top_count, -1]]  # [zones left at this level, index of the parent zone]
    try:
        if top_count > (n_b - o) // smallest:
            raise struct.error("zone count larger than the data left")
        while stack:
            top = stack[-1]
            if top[0] == 0:
                stack.pop()
                if top[1] >= 0:
                    tails.append(tail(b, o))
                    order.append(~top[1])
                    o += tail_size
                continue
            top[0] -= 1
            fields = head(b, o)
            o += head_size
            idx = len(heads)
            heads.append(fields)
            order.append(idx)
            depth.append(len(stack) - 1)
            if fields[-1]:
                if fields[-1] > (n_b - o) // smallest:
                    raise struct.error("child count larger than the data left")
                stack.append([fields[-1], idx])
            else:
                tails.append(tail(b, o))
                order.append(~idx)
                o += tail_size
        if o > n_b:  # a last tail whose unread field is cut short
            raise struct.error("record cut short")
    except struct.error:
        raise TraceError(FORMAT, f"{r.name}: truncated or corrupted zone data ({what}, byte {min(o, n_b)} of {n_b})") \
            from None
    r.o = o
    fields = np.array(heads, dtype=np.int64).reshape(len(heads), len(rec.head.unpack_from(bytes(head_size))))
    seq = np.array(order, dtype=np.int64)
    is_head = seq >= 0
    deltas = np.empty((len(seq), len(rec.head_deltas)), dtype=np.int64)
    deltas[is_head] = fields[:, list(rec.head_deltas)]
    deltas[~is_head] = np.array(tails, dtype=np.int64).reshape(-1, len(rec.head_deltas))
    if len(deltas) and np.abs(deltas.astype(np.float64)).sum(axis=0).max() >= _MAX_ABS_NS:
        raise TraceError(FORMAT, f"{r.name}: zone times out of range ({what}): corrupted zone data")
    clock = np.cumsum(deltas, axis=0)
    ends = np.empty((len(heads), len(rec.head_deltas)), dtype=np.int64)
    ends[~seq[~is_head]] = clock[~is_head]
    return fields, clock[is_head], ends, np.array(depth, dtype=np.int32)


_GPU_TYPES = ("Invalid", "OpenGL", "Vulkan", "OpenCL", "Direct3D12", "Direct3D11", "Metal", "Custom", "CUDA",
              "Rocprof", "WebGPU")


def _gpu_contexts(r: _Reader, fv: int, strings: _Strings) -> dict[str, Any]:
    """GPU contexts (thread u64, calibration u8, count u64, period f32, type u8, name StringIdx,
    overflow u64 [, note names]) with per-thread zone trees [, notes]."""
    cols: dict[str, Any] = {"track": [], "srcloc": [], "cpu_start": [], "cpu_end": [], "start": [], "end": [],
                            "depth": [], "contexts": []}
    notes = fv >= _ver(0, 12, 4)
    zone = _gpu_zone(query_ids=notes)
    r.u64("gpu zone total")
    r.u64("gpu children total")
    for i in range(r.count("gpu contexts", 33)):
        _thread, _calib, _count, _period, kind, name_raw, _overflow = r.unpack("QBQfB3sQ", "gpu context")
        name = strings.idx(int.from_bytes(name_raw, "little"))
        kind_name = _GPU_TYPES[kind] if kind < len(_GPU_TYPES) else f"type {kind}"
        track = f"GPU: {name}" if name else f"GPU context {i} ({kind_name})"
        cols["contexts"].append({"name": name, "type": kind_name})
        if notes:
            r.skip(11 * r.count("gpu note names", 11), "gpu note names")
        for _ in range(r.count("gpu context threads", 16)):
            _tid, tsz = r.unpack("QQ", "gpu context thread")
            if tsz:
                fields, start, end, depth = _walk_zones(r, tsz, zone, f"'{track}'")
                _add_zones(cols, track, fields, start[:, 1], end[:, 1], depth, srcloc=2)
                cols["cpu_start"].append(start[:, 0])
                cols["cpu_end"].append(end[:, 0])
        if notes:
            for _ in range(r.count("gpu notes", 10)):
                r.unpack("H", "gpu note query")
                r.skip(16 * r.count("gpu note values", 16), "gpu note values")
    return cols


def _plots(r: _Reader, strings: _Strings) -> dict[str, list]:
    """Plots: type, format, steps, fill (u8 each), color u32, name u64, min/max/sum f64, then
    (time delta i64, value f64) points."""
    out: dict[str, list] = {"name": [], "time": [], "value": []}
    for i in range(r.count("plots", 48)):
        kind, _fmt, _steps, _fill, _color, name_id, _mn, _mx, _sum = r.unpack("BBBBIQddd", "plot")
        points = r.array([("dt", "<i8"), ("v", "<f8")], r.count("plot points", 16), "plot points")
        name = {1: "Memory usage", 2: "CPU usage"}.get(kind) or strings.by_id.get(name_id) or f"plot {i}"
        out["name"] += [name] * len(points)
        out["time"] += np.cumsum(points["dt"]).tolist()
        out["value"] += points["v"].tolist()
    return out


def _zone_names(srcloc: np.ndarray, extra: np.ndarray, locs: _SourceLocations,
                extras: tuple[np.ndarray, np.ndarray, _Strings] | None) -> tuple[np.ndarray, ...]:
    """Per zone: (name, zone function, source location name, text, source) arrays: the name is
    the dynamic name if the zone has one, else the source location's. Resolved once per distinct
    (srcloc, extra) pair, of which there are far fewer than zones. ``extras`` is
    (name index, text index, strings) of the zone extras (CPU zones only)."""
    key = srcloc.astype(np.int64) * (1 << 32) + extra.astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    names, zones, statics, texts, files = [], [], [], [], []
    for k in uniq.tolist():
        s, e = k >> 32, k & 0xFFFFFFFF
        loc = locs.get(s)
        static = loc[0] or loc[1] or f"srcloc {s}"
        dyn = txt = None
        if extras is not None and 0 < e < len(extras[0]):
            dyn, txt = extras[2].idx(int(extras[0][e])), extras[2].idx(int(extras[1][e]))
        names.append(dyn or static)
        zones.append(loc[1] or static)
        statics.append(static)
        texts.append(txt)
        files.append(f"{loc[2]}:{loc[3]}" if loc[2] else None)
    return tuple(np.array(v, dtype=object)[inv] for v in (names, zones, statics, texts, files))


def _add_zones(cols: dict[str, list], track: str, fields: np.ndarray, start: np.ndarray, end: np.ndarray,
               depth: np.ndarray, srcloc: int, extra: int | None = None) -> None:
    """One thread's zones into ``cols`` (lists of arrays, joined by :func:`_joined`)."""
    cols["track"].append(np.full(len(start), track, dtype=object))
    cols["srcloc"].append(fields[:, srcloc])
    if extra is not None:
        cols["extra"].append(fields[:, extra])
    cols["start"].append(start)
    cols["end"].append(end)
    cols["depth"].append(depth)


def _joined(cols: dict[str, list], name: str) -> np.ndarray:
    return np.concatenate(cols[name])


def _zone_table(cols: dict[str, list], locs: _SourceLocations, extra_name: np.ndarray, extra_text: np.ndarray,
                strings: _Strings, last_time: int) -> tuple[pd.DataFrame, int]:
    start, end = _joined(cols, "start"), _joined(cols, "end")
    n = len(start)
    unfinished = end < start  # a zone still open when the capture stopped is written with end -1
    end[unfinished] = max(int(last_time), int(start.max()))
    names, zones, statics, texts, files = _zone_names(_joined(cols, "srcloc"), _joined(cols, "extra"), locs,
                                                      (extra_name, extra_text, strings))
    args = [{"zone": z, "srcloc": sl, "text": t, "src": f, **({"unfinished": True} if u else {})}
            for z, sl, t, f, u in zip(zones.tolist(), statics.tolist(), texts.tolist(), files.tolist(),
                                      unfinished.tolist())]
    df = from_columns({"track": _joined(cols, "track"), "name": names, "category": ["zone"] * n, "start_ns": start,
                       "dur_ns": end - start, "depth": _joined(cols, "depth"), "args": args},
                      n=n, source=FORMAT)
    return df, int(unfinished.sum())


def _gpu_table(cols: dict[str, list], locs: _SourceLocations) -> tuple[pd.DataFrame, int]:
    start, end = _joined(cols, "start"), _joined(cols, "end")
    n = len(start)
    unfinished = end < start  # a query never resolved: the GPU end is unknown
    end[unfinished] = start[unfinished]
    names, zones, _statics, _texts, files = _zone_names(_joined(cols, "srcloc"), np.zeros(n, dtype=np.int64), locs,
                                                        None)
    args = [{"zone": z, "src": f, "cpu_start_ns": cs, "cpu_end_ns": ce, **({"unfinished": True} if u else {})}
            for z, f, cs, ce, u in zip(zones.tolist(), files.tolist(), _joined(cols, "cpu_start").tolist(),
                                       _joined(cols, "cpu_end").tolist(), unfinished.tolist())]
    df = from_columns({"track": _joined(cols, "track"), "name": names, "category": ["kernel"] * n, "start_ns": start,
                       "dur_ns": end - start, "depth": _joined(cols, "depth"), "args": args},
                      n=n, source=FORMAT)
    return df, int(unfinished.sum())


_SEVERITY = ("trace", "debug", "info", "warning", "error", "fatal")


def _message_table(m: dict[str, Any], message_tid: dict[int, int], tid_track: dict[int, str]) -> pd.DataFrame:
    n = len(m["time"])
    tracks = [tid_track.get(message_tid.get(p), "messages") for p in m["ptr"]]
    args = [{"severity": _SEVERITY[s]} if s is not None and s < len(_SEVERITY) else None for s in m["severity"]]
    return from_columns({"track": tracks, "name": m["text"], "category": ["message"] * n,
                         "start_ns": np.asarray(m["time"], dtype=np.int64), "dur_ns": np.zeros(n, dtype=np.int64),
                         "kind": ["instant"] * n, "args": args}, n=n, source=FORMAT)


def _plot_table(p: dict[str, list]) -> pd.DataFrame:
    n = len(p["time"])
    return from_columns({"track": [f"plot: {x}" for x in p["name"]], "name": p["name"], "category": ["plot"] * n,
                         "start_ns": np.asarray(p["time"], dtype=np.int64), "dur_ns": np.zeros(n, dtype=np.int64),
                         "kind": ["instant"] * n, "args": [{"value": v} for v in p["value"]]}, n=n, source=FORMAT)


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a .tracy capture (see the module docstring for the supported versions).

    Other versions go through ``tracy-csvexport`` when it is on PATH (Tracy's own reader of
    its own version); otherwise the version error names the version found and those supported.
    """
    p = Path(path)
    raw = decompress(p.read_bytes(), p.name)
    try:
        return parse(raw, p.name)
    except UnsupportedVersion:
        if shutil.which("tracy-csvexport") is None:
            raise
        return load_csvexport(p)


def load_csvexport(path: str | os.PathLike, tool: str | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a capture through ``tracy-csvexport -u`` (any version that tool reads).

    The tool prints ``name,src_file,src_line,ns_since_start,exec_time_ns,thread[,value]`` with
    the thread as an index, without dynamic zone names, nesting or zero-length zones, so depth
    is recomputed from the intervals.
    """
    exe = tool or shutil.which("tracy-csvexport")
    if exe is None:
        raise TraceError(FORMAT, "tracy-csvexport is not on PATH")
    p = Path(path)
    try:
        res = subprocess.run([exe, "-u", str(p)], capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise TraceError(FORMAT, f"{p.name}: tracy-csvexport took over 300 s") from None
    out, err = res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")
    if res.returncode != 0:
        raise TraceError(FORMAT, f"{p.name}: tracy-csvexport failed: {err.strip()[-200:]}")
    rows = list(csv.DictReader(io.StringIO(out)))
    if not rows:
        raise TraceError(FORMAT, f"{p.name}: tracy-csvexport printed no zones")
    try:
        start = np.array([int(x["ns_since_start"]) for x in rows], dtype=np.int64)
        dur = np.array([int(x["exec_time_ns"]) for x in rows], dtype=np.int64)
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(FORMAT, f"{p.name}: unexpected tracy-csvexport output ({exc})") from None
    tracks = [f"thread {x['thread']}" for x in rows]
    df = from_columns({"track": tracks, "name": [x["name"] for x in rows], "category": ["zone"] * len(rows),
                       "start_ns": start, "dur_ns": np.maximum(dur, 0),
                       "args": [{"src": f"{x['src_file']}:{x['src_line']}", **({"text": x["value"]} if x.get("value")
                                                                               else {})} for x in rows]},
                      source=FORMAT, track_order=sorted(set(tracks), key=lambda t: int(t.split()[1])))
    return with_depth(df), {"clock": "ns since Tracy capture start", "reader": "tracy-csvexport",
                            "negative_durations": int((dur < 0).sum()),
                            "note": "thread indices only; dynamic zone names are not in tracy-csvexport's output"}
