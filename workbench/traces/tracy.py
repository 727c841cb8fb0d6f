"""Tracy ``.tracy`` captures read in Python (no Tracy build needed), for file version 0.11.x.

Container (Tracy's FileWrite): magic ``tr\\xFDP``, u8 compression (0 LZ4, 1 Zstd), u8 stream
count, then blocks of (u32 LE compressed size, payload); block i belongs to stream i mod n and
each stream is one continuous compression stream (LZ4 blocks use the previous 64 KiB of the
same stream as dictionary; uncompressed blocks are at most 64 KiB).

Payload: ``tracy`` + major, minor, patch, then Tracy's ``Worker`` serialization. The layout
changes between minor versions and Tracy only reads its own, so this reader gates on
:data:`SUPPORTED` and refuses others with the version it found. The 0.11.2 layout was
checked field by field against captures from the IREE 3.13 wheel (``iree-tracy-capture``);
differences from the 0.10 layout that matter: the CPU topology has a die level
(package -> die -> core -> thread), string references are 9 bytes (u64 + flags byte), the
CPU manufacturer is 13 bytes and each thread record carries a 4-byte group hint.

Only what a timeline needs is decoded: strings, thread names, source locations, zone
extras (IREE puts dynamic zone names, e.g. dispatch names, there) and every thread's zone
tree (delta-coded ns since capture start). Locks, messages, GPU zones, plots, memory and
samples that follow are not read. All structs in the file are packed (no padding).

If ``tracy-csvexport`` is on PATH, :func:`load_csvexport` is an alternative reader of the
same file through Tracy's own tool (thread indices only, no dynamic names).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .model import from_columns

FORMAT = "tracy"
INFO = Format(FORMAT, "Tracy capture", (".tracy",), "0.11", "zones")
MAGIC = b"tr\xfdP"
LEGACY_MAGICS = (b"tlZ\x04", b"tZst")
#: (major, minor) of the Worker layouts this reader decodes; any patch level of them
SUPPORTED = ((0, 11),)
_BLOCK_MAX = 64 * 1024


def detect(head: bytes, name: str) -> bool:
    """Tracy container (current or legacy magic) or an uncompressed Tracy payload."""
    return head[:4] == MAGIC or head[:4] in LEGACY_MAGICS or head[:5] == b"tracy"


def supported_text() -> str:
    return ", ".join(f"{a}.{b}.x" for a, b in SUPPORTED)


def decompress(data: bytes, name: str = "") -> bytes:
    """The uncompressed Worker payload of a .tracy file."""
    if data[:5] == b"tracy":
        return data
    if data[:4] in LEGACY_MAGICS:
        raise TraceError(FORMAT, f"{name}: legacy Tracy container ({data[:4]!r}, Tracy < 0.9); supported: "
                                 f"{supported_text()} (re-save the capture with Tracy {supported_text()})")
    if data[:4] != MAGIC or len(data) < 6:
        raise TraceError(FORMAT, f"{name}: not a Tracy file (bad magic)")
    comp, n_streams = data[4], data[5]
    if comp not in (0, 1) or n_streams == 0:
        raise TraceError(FORMAT, f"{name}: unknown compression {comp} / {n_streams} streams in the header")
    if comp == 1:
        import zstandard

        decs = [zstandard.ZstdDecompressor().decompressobj() for _ in range(n_streams)]
    else:
        import lz4.block

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
                chunk = decs[s].decompress(block)
            else:
                chunk = lz4.block.decompress(block, uncompressed_size=_BLOCK_MAX, dict=dicts[s])
                dicts[s] = (dicts[s] + chunk)[-_BLOCK_MAX:]
        except Exception as exc:  # zstd/lz4 raise their own error types
            raise TraceError(FORMAT, f"{name}: corrupted compressed block {i} ({exc})") from None
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


def parse(buf: bytes, name: str = "") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Span table + meta from an uncompressed Tracy payload."""
    r = _Reader(buf, name)
    r.need(8, "header")
    if buf[:5] != b"tracy":
        raise TraceError(FORMAT, f"{name}: payload does not start with 'tracy' (corrupted)")
    ver = tuple(buf[5:8])
    if ver[:2] not in SUPPORTED:
        raise UnsupportedVersion(FORMAT, f"{name}: Tracy file version {ver[0]}.{ver[1]}.{ver[2]} is not supported "
                                         f"(supported: {supported_text()}, as written by the IREE 3.x wheels; "
                                         "other versions read through tracy-csvexport when it is on PATH)")
    r.o = 8
    r.unpack("q", "delay")
    _res, _timer_mul, last_time, _frame_off, pid, _sampling, _arch, _cpu_id = r.unpack("qdqQQqBI", "header")
    r.skip(13, "cpu manufacturer")
    capture_name = r.string("capture name").decode("utf-8", "replace")
    program = r.string("program name").decode("utf-8", "replace")
    (capture_time,) = r.unpack("q", "capture time")
    r.unpack("q", "executable time")
    host_info = r.string("host info").decode("utf-8", "replace")
    for _ in range(r.count("cpu packages", 12)):
        r.unpack("I", "package id")
        for _ in range(r.count("cpu dies", 12)):
            r.unpack("I", "die id")
            for _ in range(r.count("cpu cores", 12)):
                r.unpack("I", "core id")
                r.skip(4 * r.count("cpu threads", 4), "cpu threads")
    r.skip(28, "crash event")
    for _ in range(r.count("frame sets", 17)):
        _fname, continuous, fsz = r.unpack("QBQ", "frame set")
        r.skip(fsz * (12 if continuous else 20), "frames")

    n_str = r.count("strings", 16)
    strings: list[str] = []
    by_ptr: dict[int, str] = {}
    b = r.b
    for _ in range(n_str):
        ptr, ssz = r.unpack("QQ", "string")
        r.need(ssz, "string bytes")
        s = b[r.o: r.o + ssz].decode("utf-8", "replace")
        r.o += ssz
        strings.append(s)
        by_ptr[ptr] = s
    str_by_id = {}
    for _ in range(r.count("string ids", 16)):
        sid, ptr = r.unpack("QQ", "string id")
        if ptr in by_ptr:
            str_by_id[sid] = by_ptr[ptr]
    thread_names: dict[int, str] = {}
    for _ in range(r.count("thread names", 16)):
        tid, ptr = r.unpack("QQ", "thread name")
        if ptr in by_ptr:
            thread_names[tid] = by_ptr[ptr]
    r.skip(24 * r.count("external names", 24), "external names")
    for what in ("local thread map", "external thread map"):
        r.skip(8 * r.count(what, 8), what)

    def ref(v: int, flags: int) -> str | None:
        # StringRef: u64 value + flags (bit 1 active, bit 0 value is an index into strings)
        if not flags & 2:
            return None
        if flags & 1:
            return strings[v] if v < len(strings) else None
        return str_by_id.get(v)

    srcloc_struct = "QBQBQBII"
    srcloc_by_ptr: dict[int, tuple] = {}
    for _ in range(r.count("source locations", 43)):
        (ptr,) = r.unpack("Q", "source location")
        a, af, f_, ff, fl, flf, line, _color = r.unpack(srcloc_struct, "source location")
        srcloc_by_ptr[ptr] = (ref(a, af), ref(f_, ff), ref(fl, flf), line)
    n_exp = r.count("source location map", 8)
    expand = np.frombuffer(b, dtype="<u8", count=n_exp, offset=r.o).tolist()
    r.o += 8 * n_exp
    payload = []
    for _ in range(r.count("dynamic source locations", 35)):
        a, af, f_, ff, fl, flf, line, _color = r.unpack(srcloc_struct, "dynamic source location")
        payload.append((ref(a, af), ref(f_, ff), ref(fl, flf), line))
    for what in ("zone counts", "gpu zone counts"):
        r.skip(10 * r.count(what, 10), what)
    if r.u64("lock count") != 0:
        # Locks have a per-type record layout; IREE's runtime declares none. Refuse rather than guess.
        raise TraceError(FORMAT, f"{name}: captures with Tracy locks are not supported by this reader "
                                 "(use tracy-csvexport)")
    # a message is ptr u64, time i64, StringRef (9 bytes), color u32, callstack u24
    r.skip(32 * r.count("messages", 32), "messages")
    n_extra = r.count("zone extras", 12)
    extra_raw = np.frombuffer(b, dtype=np.uint8, count=12 * n_extra, offset=r.o).reshape(-1, 12)
    r.o += 12 * n_extra
    # StringIdx is a 24-bit (index + 1), 0 meaning none
    def u24(col: int) -> np.ndarray:
        return (extra_raw[:, col].astype(np.int64) | (extra_raw[:, col + 1].astype(np.int64) << 8)
                | (extra_raw[:, col + 2].astype(np.int64) << 16))
    extra_text, extra_name = u24(3), u24(6)

    r.u64("zone total")
    r.u64("zone children total")
    n_threads = r.count("threads", 33)
    cols: dict[str, list] = {"track": [], "srcloc": [], "extra": [], "start": [], "end": [], "depth": []}
    order: list[str] = []
    track_tid: dict[str, int] = {}
    for _ in range(n_threads):
        tid, _count, _ksc, _fiber, _hint, tsz = r.unpack("QQQBiI", "thread")
        tname = thread_names.get(tid, f"thread {tid}")
        track = tname if tname not in track_tid else f"{tname} ({tid})"
        track_tid[track] = tid
        if tsz:
            order.append(track)
            _read_zones(r, tsz, track, cols)
        r.skip(8 * r.count("thread messages", 8), "thread messages")
        for what in ("context switch samples", "samples"):
            r.skip(11 * r.count(what, 11), what)

    n = len(cols["start"])
    if n == 0:
        raise TraceError(FORMAT, f"{name}: the capture has no zones")
    start = np.array(cols["start"], dtype=np.int64)
    end = np.array(cols["end"], dtype=np.int64)
    unfinished = end < start  # a zone still open when the capture stopped is written with end -1
    end[unfinished] = max(int(last_time), int(start.max()))

    # Names per distinct (srcloc, extra) pair: far fewer than zones.
    sl = np.array(cols["srcloc"], dtype=np.int64)
    ex = np.array(cols["extra"], dtype=np.int64)
    key = sl * (1 << 32) + ex
    uniq, inv = np.unique(key, return_inverse=True)
    names, zones, texts, files = [], [], [], []
    for k in uniq.tolist():
        s, e = k >> 32, k & 0xFFFFFFFF
        if s >= 0:
            ptr = expand[s] if s < len(expand) else None
            loc = srcloc_by_ptr.get(ptr) if ptr is not None else None
        else:
            loc = payload[-s - 1] if -s - 1 < len(payload) else None
        loc = loc or (None, None, None, 0)
        static = loc[0] or loc[1] or f"srcloc {s}"
        dyn = txt = None
        if 0 < e < len(extra_name):
            dyn = strings[extra_name[e] - 1] if 0 < extra_name[e] <= len(strings) else None
            txt = strings[extra_text[e] - 1] if 0 < extra_text[e] <= len(strings) else None
        names.append(dyn or static)
        zones.append(loc[1] or static)
        texts.append(txt)
        files.append(f"{loc[2]}:{loc[3]}" if loc[2] else None)
    name_arr = np.array(names, dtype=object)[inv]
    zone_arr = np.array(zones, dtype=object)[inv]
    text_arr = np.array(texts, dtype=object)[inv]
    file_arr = np.array(files, dtype=object)[inv]
    args = [{"zone": z, "text": t, "src": f, **({"unfinished": True} if u else {})}
            for z, t, f, u in zip(zone_arr.tolist(), text_arr.tolist(), file_arr.tolist(), unfinished.tolist())]
    df = from_columns({
        "track": cols["track"], "name": name_arr, "category": ["zone"] * n, "start_ns": start,
        "dur_ns": end - start, "depth": np.array(cols["depth"], dtype=np.int32), "args": args,
    }, n=n, source=FORMAT, track_order=order)
    df["process"] = pd.Categorical([program or "tracy"] * n)
    meta = {"clock": "ns since Tracy capture start", "tracy_version": ".".join(map(str, ver)),
            "capture_name": capture_name, "program": program, "pid": pid, "capture_time": capture_time,
            "host_info": host_info, "span_ns": int(last_time),
            "thread_ids": {t: track_tid[t] for t in order}, "unfinished_zones": int(unfinished.sum())}
    return df, meta


def _read_zones(r: _Reader, top_count: int, track: str, cols: dict[str, list]) -> None:
    """Decode one thread's zone tree (iteratively: IREE nests deep enough to hurt recursion).

    Each zone is: i16 srcloc, i64 start delta, u32 extra, u32 child count, the children,
    i64 end delta; deltas accumulate over the thread in write order.
    """
    b = r.b
    zone = struct.Struct("<hqII").unpack_from
    i64 = struct.Struct("<q").unpack_from
    n_b = len(b)
    o = r.o
    ref = 0
    tr_, sl_, ex_, st_, en_, dp_ = (cols["track"], cols["srcloc"], cols["extra"], cols["start"], cols["end"],
                                    cols["depth"])
    stack = [[top_count, -1]]  # [zones left at this level, index of the parent zone]
    try:
        while stack:
            top = stack[-1]
            if top[0] == 0:
                stack.pop()
                if top[1] >= 0:
                    ref += i64(b, o)[0]
                    o += 8
                    en_[top[1]] = ref
                continue
            top[0] -= 1
            srcloc, dstart, extra, child = zone(b, o)
            o += 18
            ref += dstart
            idx = len(st_)
            tr_.append(track)
            sl_.append(srcloc)
            ex_.append(extra)
            st_.append(ref)
            en_.append(0)
            dp_.append(len(stack) - 1)
            if child:
                if child > (n_b - o) // 26:  # every zone needs at least 26 bytes
                    raise struct.error("child count larger than the data left")
                stack.append([child, idx])
            else:
                ref += i64(b, o)[0]
                o += 8
                en_[idx] = ref
    except struct.error:
        raise TraceError(FORMAT, f"{r.name}: truncated or corrupted zone data (thread '{track}', "
                                 f"byte {o} of {n_b})") from None
    r.o = o


class UnsupportedVersion(TraceError):
    """A Tracy file version this reader does not decode."""


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

    The tool prints ``name,src_file,src_line,ns_since_start,exec_time_ns,thread`` with the
    thread as an index and without dynamic zone names or nesting, so depth is recomputed
    from the intervals.
    """
    from .model import with_depth

    exe = tool or shutil.which("tracy-csvexport")
    if exe is None:
        raise TraceError(FORMAT, "tracy-csvexport is not on PATH")
    p = Path(path)
    res = subprocess.run([exe, "-u", str(p)], capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise TraceError(FORMAT, f"{p.name}: tracy-csvexport failed: {res.stderr.strip()[-200:]}")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    if not rows:
        raise TraceError(FORMAT, f"{p.name}: tracy-csvexport printed no zones")
    start = np.array([int(x["ns_since_start"]) for x in rows], dtype=np.int64)
    dur = np.array([int(x["exec_time_ns"]) for x in rows], dtype=np.int64)
    tracks = [f"thread {x['thread']}" for x in rows]
    df = from_columns({"track": tracks, "name": [x["name"] for x in rows], "category": ["zone"] * len(rows),
                       "start_ns": start, "dur_ns": np.maximum(dur, 0),
                       "args": [{"src": f"{x['src_file']}:{x['src_line']}"} for x in rows]},
                      source=FORMAT, track_order=sorted(set(tracks), key=lambda t: int(t.split()[1])))
    return with_depth(df), {"clock": "ns since Tracy capture start", "reader": "tracy-csvexport",
                            "note": "thread indices only; dynamic zone names are not in tracy-csvexport's output"}
