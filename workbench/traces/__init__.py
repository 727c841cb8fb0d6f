"""Trace import: every profiler's output read into one span table (see :mod:`.model`).

``load(path) -> (spans, meta)`` detects the format from the file's content (the name is only
a tie-breaker), calls that format's importer and validates the result. Every failure, from an
unreadable file to a truncated, corrupted or hostile one, raises :class:`TraceError` with one
line naming the detected format and what is wrong; importers never let another exception out.

Importers are one module each, with ``FORMAT`` (the id), ``INFO`` (a :class:`Format`: label,
suffixes, versions read, what is read), ``detect(head, name)`` and ``load(path)``; they are
listed once, in :data:`IMPORTERS`, whose order is the detection order. :func:`formats` gives
their :class:`Format` records; the upload label, the suffix filter and the table of docs/traces.md
(:func:`formats_markdown`) derive from it. Files are parsed, never executed or unpickled;
decompression is bounded (:mod:`.inflate`) and SQLite files are read through :mod:`.sqlite`.

Every ``meta`` has ``format``, ``path``, ``clock`` and the counts of what the importer could
not use as it stands (0 when nothing): ``malformed_events`` (dropped: unusable timestamps,
unpaired ends, rows of the wrong shape), ``timestamp_overflows`` (dropped: beyond int64 ns),
``negative_durations`` (kept with ``dur_ns`` 0: end before start) and ``unclosed_spans`` (kept,
ending at the last timestamp of the trace or with duration 0, as the importer says).

Lanes keep the source's order, except that a GPU with many streams or queues lists them busiest
first (:func:`.model.busiest_first`), so the first lanes any view shows hold most of the work.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import re
import resource
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from .base import Format, TraceError
from .inflate import gunzip_head, max_read_bytes
from .model import SpanTableError, busiest_first, validate


#: importer modules in detection order. rocpd before nsys (both are SQLite: rocpd is
#: recognised by its table names, nsys takes any other SQLite and explains what it lacks);
#: rocprofv3's JSON before chrome, which comes last because it accepts any JSON array or
#: object with events.
IMPORTERS = ("ireeperf", "tracy", "rocpd", "nsys", "perfetto", "rocprof", "rocprofjson", "chrome")

#: bytes read for content detection
HEAD_BYTES = 1 << 16


def _importers() -> list[ModuleType]:
    # Imported lazily so a broken optional dependency of one format cannot stop the others.
    return [importlib.import_module(f".{name}", __name__) for name in IMPORTERS]


def read_head(path: str | os.PathLike, n: int = HEAD_BYTES) -> bytes:
    """First ``n`` bytes of a file, gunzipped when it is gzip (so detectors see the content)."""
    with open(path, "rb") as fh:
        head = fh.read(n)
    if head[:2] == b"\x1f\x8b":
        inner = gunzip_head(path, n)
        return inner if inner else head  # a broken gzip: the chrome importer reports it
    return head


def detect(path: str | os.PathLike) -> str | None:
    """The format id of a trace file, or None when no importer recognises it."""
    mod = _detect_module(path)
    return mod.FORMAT if mod else None


def _detect_module(path: str | os.PathLike) -> ModuleType | None:
    head = read_head(path)
    name = Path(path).name
    for mod in _importers():
        try:
            if mod.detect(head, name):
                return mod
        except Exception:  # a detector must never break loading of other formats
            continue
    return None


def looks_like(head: bytes) -> str:
    """What a file no importer recognises looks like, in a few words (for the refusal)."""
    s = head.lstrip()
    if s[:1] in (b"{", b"["):
        keys = list(dict.fromkeys(k.decode("utf-8", "replace") for k in re.findall(rb'"([^"\\]{1,40})"\s*:', s[:4096])))
        if {"context", "benchmarks"} <= set(keys):
            return "a google-benchmark JSON result (timings, no spans)"
        if s[:1] == b"[":
            return "a JSON array without trace events"
        shown = ", ".join(json.dumps(k) for k in keys[:6]) or "none found"
        return f"a JSON object (keys: {shown}) without trace events"
    if s[:1] == b"<":
        return "an XML or HTML document"
    text = head[:512]
    try:
        first = text.decode("utf-8").splitlines()[0] if text else ""
    except UnicodeDecodeError:
        first = None
    if first is None or re.search(r"[\x00-\x08\x0e-\x1f]", text.decode("latin-1")):
        return f"a binary file starting {head[:8].hex(' ')}"
    if first.count(",") >= 2:
        cols = [c.strip().strip('"')[:30] for c in first.split(",")][:6]
        return f"a CSV file with columns {', '.join(cols)}{', ...' if first.count(',') >= 6 else ''}"
    return f"a text file starting {json.dumps(first[:60])}"


def formats() -> list[Format]:
    """Every importer's :class:`Format`, in detection order."""
    return [m.INFO for m in _importers()]


def suffixes() -> list[str]:
    """File name endings of all formats (for an upload filter), without the leading dot."""
    return list(dict.fromkeys(s.lstrip(".") for f in formats() for s in f.suffixes))


def formats_markdown() -> str:
    """The table of formats in docs/traces.md: format id, what it is, versions read, what is read."""
    rows = ["| format | file | versions read | what is read |", "|---|---|---|---|"]
    for f in formats():
        rows.append(f"| `{f.id}` | {f.label} (`{'`, `'.join(f.suffixes)}`) | {f.versions} | {f.reads} |")
    return "\n".join(rows)


#: meta keys every importer's meta carries (0 when nothing was dropped or adjusted)
COUNT_KEYS = ("malformed_events", "timestamp_overflows", "negative_durations", "unclosed_spans")


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic GC while an importer builds millions of small objects.

    Parsing builds dicts/lists that all survive; every 700 allocations the collector walks
    them again for nothing. Pausing it makes JSON traces import 2-3x faster; nothing an
    importer builds is cyclic garbage, and the state is restored afterwards.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: the first bytes of every SQLite database (nsys, rocpd: queried, never read whole)
SQLITE_MAGIC = b"SQLite format 3\x00"


def _check_size(p: Path, size: int) -> None:
    """Refuse, before reading it, a file larger than a trace may be read at once (the inflate
    ceiling, :func:`.inflate.max_inflated_bytes`: the importers that read a file whole peak at
    ~3x its size). SQLite files are queried with their own row and time limits instead."""
    limit = max_read_bytes()
    if size > limit:
        with open(p, "rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                return
        raise TraceError("unknown", f"{p.name}: {size / 2**20:,.0f} MiB is larger than the {limit >> 20:,} MiB a trace "
                                    "file may have (WORKBENCH_TRACE_INFLATE_MAX_MB); nothing was read")


def _memory_limit() -> str:
    """The address-space limit that stopped an import, said with the figure ('' without one)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return "" if soft == resource.RLIM_INFINITY else \
        f" under an address-space limit of {soft >> 20:,} MiB (ulimit -v); an import takes a few times the file's size"


def load(path: str | os.PathLike, args: bool = True) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a trace file into ``(spans, meta)``; raises :class:`TraceError` on any failure.

    ``meta`` always has ``format``, ``path`` and ``clock`` (what ``start_ns`` counts from).
    ``args=False``: the ``args`` column may be left empty (None) where that makes reading faster
    and smaller (Chrome JSON): for outputs that never show the events' args.
    """
    p = Path(path)
    if not p.is_file():
        raise TraceError("unknown", f"{p}: no such file")
    try:
        size = p.stat().st_size
        if size == 0:
            raise TraceError("unknown", f"{p.name}: empty file")
        _check_size(p, size)
        mod = _detect_module(p)
    except OSError as exc:
        raise TraceError("unknown", f"{p.name}: cannot read ({exc.strerror or exc})") from None
    if mod is None:
        raise TraceError("unknown", f"{p.name}: not a supported trace format: {looks_like(read_head(p))} "
                                    f"(supported: {', '.join(f.id for f in formats())})")
    try:
        with _gc_paused():
            df, meta = mod.load(p, args=False) if not args and getattr(mod, "ARGS_OPTIONAL", False) else mod.load(p)
        validate(df)
        df = busiest_first(df)
    except TraceError:
        raise
    except SpanTableError as exc:
        raise TraceError(mod.FORMAT, f"{p.name}: importer produced an invalid span table ({exc})") from None
    except MemoryError:
        raise TraceError(mod.FORMAT, f"{p.name}: out of memory while reading{_memory_limit()}") from None
    except Exception as exc:  # noqa: BLE001 - the contract: one clear line, never a traceback
        raise TraceError(mod.FORMAT, f"{p.name}: unreadable ({type(exc).__name__}: {exc})") from None
    meta = {"format": mod.FORMAT, "path": str(p), **meta}
    meta.setdefault("clock", "unknown")
    for key in COUNT_KEYS:
        meta.setdefault(key, 0)
    return df, meta
