"""Bounded decompression of untrusted trace files (gzip JSON, zstd/LZ4 Tracy blocks).

A small compressed file can inflate to gigabytes (a 1 MB ``.json.gz`` of one repeated byte
inflates to ~1 GB). Every importer that decompresses goes through :func:`gunzip` or
:class:`Budget`, which stream the output and stop with a :class:`TraceError` once it passes
the cap of :func:`max_inflated_bytes`:

    cap = min(max(RATIO x compressed size, FLOOR), CEILING)

- ``WORKBENCH_TRACE_INFLATE_RATIO`` (default 100): real traces compress 5-30x (Kineto JSON
  with gzip -9 ~20x, Tracy's zstd ~4x); 100x leaves room for repetitive synthetic traces.
- ``WORKBENCH_TRACE_INFLATE_MAX_MB`` (default 2048): the absolute ceiling. The Chrome importer
  peaks at ~3x the inflated size, so 2 GiB inflated is ~6 GiB of RSS at most. A file larger
  than it is refused from its size, before a byte is read (:func:`max_read_bytes`).
- a floor of 64 MiB, so small files never trip the ratio (a 100 KB file may inflate to 64 MiB).

Both variables are read at each call, so a test or a user can raise them for one run.
"""

from __future__ import annotations

import os
import zlib

from .base import TraceError

DEFAULT_RATIO = 100
DEFAULT_MAX_MB = 2048
FLOOR_BYTES = 64 << 20
#: bytes inflated per step: the most memory a bomb gets before the cap check stops it
STEP_BYTES = 1 << 20


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    return value if value > 0 and value == value and value != float("inf") else default


def max_read_bytes() -> int:
    """The largest trace file read at all (compressed or not): the ceiling."""
    return int(_env_number("WORKBENCH_TRACE_INFLATE_MAX_MB", DEFAULT_MAX_MB) * (1 << 20))


def max_inflated_bytes(compressed_bytes: int) -> int:
    """The most bytes a file of ``compressed_bytes`` may inflate to (see module docstring)."""
    ratio = _env_number("WORKBENCH_TRACE_INFLATE_RATIO", DEFAULT_RATIO)
    return min(max(int(ratio * compressed_bytes), FLOOR_BYTES), max_read_bytes())


class Budget:
    """Counts inflated bytes against the cap of one file; ``add`` raises past it."""

    def __init__(self, fmt: str, name: str, compressed_bytes: int):
        self.fmt, self.name = fmt, name
        self.compressed = compressed_bytes
        self.limit = max_inflated_bytes(compressed_bytes)
        self.used = 0

    def add(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise TraceError(self.fmt, f"{self.name}: inflates beyond {self.limit >> 20} MiB "
                                       f"({self.compressed:,} bytes compressed; limits: "
                                       "WORKBENCH_TRACE_INFLATE_RATIO, WORKBENCH_TRACE_INFLATE_MAX_MB)")


def gunzip(data: bytes, fmt: str, name: str, limit: int | None = None) -> bytes:
    """Inflate gzip ``data`` (all members) within the budget; TraceError when cut or corrupted.

    ``limit`` stops early after that many output bytes without an error (content sniffing).
    """
    out: list[bytes] = []
    got = 0
    for piece in gunzip_stream(data, fmt, name):
        out.append(piece)
        got += len(piece)
        if limit is not None and got >= limit:
            return b"".join(out)[:limit]
    return b"".join(out)


def gunzip_stream(data: bytes, fmt: str, name: str, step: int = STEP_BYTES):
    """:func:`gunzip` as it goes: the inflated bytes in pieces of at most ``step``, so a reader
    that parses as it inflates never holds the whole inflated file (same budget and errors)."""
    budget = Budget(fmt, name, len(data))
    pos = 0
    try:
        while pos < len(data):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one gzip member
            chunk = memoryview(data)[pos:]
            while True:
                piece = d.decompress(chunk, step)
                budget.add(len(piece))
                if piece:
                    yield piece
                chunk = d.unconsumed_tail
                if d.eof or (not chunk and not piece):
                    break
            if not d.eof:
                raise TraceError(fmt, f"{name}: truncated gzip (the stream ends before its end marker)")
            rest = d.unused_data
            pos = len(data) - len(rest)
            if not rest.strip(b"\0"):  # trailing zero padding after the last member is allowed
                break
    except zlib.error as exc:
        raise TraceError(fmt, f"{name}: corrupted gzip ({exc})") from None


def gunzip_head(path: str | os.PathLike, n: int) -> bytes | None:
    """The first ``n`` inflated bytes of a gzip file (fewer if it is shorter), None if corrupted.

    Reads only as much of the file as those bytes need: detection must stay cheap on a bomb.
    """
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    try:
        with open(path, "rb") as fh:
            while len(out) < n and not d.eof:
                chunk = fh.read(1 << 16)
                if not chunk:
                    break
                out += d.decompress(chunk, n - len(out))
    except zlib.error:
        return None
    return bytes(out)
