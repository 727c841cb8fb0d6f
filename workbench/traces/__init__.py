"""Trace import: every profiler's output read into one span table (see :mod:`.model`).

``load(path) -> (spans, meta)`` detects the format from the file's content (the name is only
a tie-breaker), calls that format's importer and validates the result. Every failure, from an
unreadable file to a truncated or corrupted one, raises :class:`TraceError` with one line
naming the detected format and what is wrong; importers never let another exception out.

Importers (one module each, with ``FORMAT``, ``detect(head, name)`` and ``load(path)``):
``ireeperf`` (IREE ireeperf-jsonl and .ireeprof), ``tracy`` (.tracy captures),
``chrome`` (Chrome trace JSON: torch.profiler/Kineto, rocprof v1), ``rocprof`` (rocprofv3
and rocprof v1 CSV), ``nsys`` (Nsight Systems SQLite export), ``perfetto`` (.pftrace).
Files are parsed, never executed or unpickled.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import os
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd


class TraceError(Exception):
    """A trace that cannot be read; ``str()`` is one line: '<format>: <what is wrong>'."""

    def __init__(self, fmt: str, message: str):
        self.format = fmt
        self.message = " ".join(str(message).split())  # one line, always
        super().__init__(f"{fmt}: {self.message}")


#: bytes read for content detection
HEAD_BYTES = 1 << 16


def _importers() -> list[ModuleType]:
    # Imported lazily so a broken optional dependency of one format cannot stop the others.
    from . import chrome, ireeperf, nsys, perfetto, rocprof, tracy

    return [ireeperf, tracy, nsys, perfetto, rocprof, chrome]


def read_head(path: str | os.PathLike, n: int = HEAD_BYTES) -> bytes:
    """First ``n`` bytes of a file, gunzipped when it is gzip (so detectors see the content)."""
    with open(path, "rb") as fh:
        head = fh.read(n)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as gz:
                return gz.read(n)
        except (OSError, EOFError, zlib.error):
            return head  # a broken gzip: the chrome importer reports it
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


def formats() -> list[str]:
    """Format ids of all importers."""
    return [m.FORMAT for m in _importers()]


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


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a trace file into ``(spans, meta)``; raises :class:`TraceError` on any failure.

    ``meta`` always has ``format``, ``path`` and ``clock`` (what ``start_ns`` counts from).
    """
    from .model import SpanTableError, validate

    p = Path(path)
    if not p.is_file():
        raise TraceError("unknown", f"{p}: no such file")
    try:
        if p.stat().st_size == 0:
            raise TraceError("unknown", f"{p.name}: empty file")
        mod = _detect_module(p)
    except OSError as exc:
        raise TraceError("unknown", f"{p.name}: cannot read ({exc.strerror or exc})") from None
    if mod is None:
        raise TraceError("unknown", f"{p.name}: not a supported trace format (supported: {', '.join(formats())})")
    try:
        with _gc_paused():
            df, meta = mod.load(p)
        validate(df)
    except TraceError:
        raise
    except SpanTableError as exc:
        raise TraceError(mod.FORMAT, f"{p.name}: importer produced an invalid span table ({exc})") from None
    except MemoryError:
        raise TraceError(mod.FORMAT, f"{p.name}: out of memory while reading") from None
    except Exception as exc:  # noqa: BLE001 - the contract: one clear line, never a traceback
        raise TraceError(mod.FORMAT, f"{p.name}: unreadable ({type(exc).__name__}: {exc})") from None
    meta = {"format": mod.FORMAT, "path": str(p), **meta}
    meta.setdefault("clock", "unknown")
    return df, meta
