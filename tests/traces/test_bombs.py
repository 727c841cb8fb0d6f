"""Hostile trace files: decompression bombs and SQLite files whose views never end.

Each bomb is read by ``python -m workbench.traces.cli`` in a child process limited to 1 GiB of
address space: it must exit 2 within the time limit with one line that names the limit it hit
(a MemoryError would also exit 2, so the message is what shows the cap worked).
"""

from __future__ import annotations

import gzip
import resource
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path
from tests.support.paths import DATA, ROOT

MEMORY_LIMIT = 1 << 30
TIME_LIMIT_S = 60


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _read_bounded(path: Path, **env: str) -> tuple[int, list[str], float]:
    import os

    t = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "workbench.traces.cli", str(path)], capture_output=True, text=True,
                         cwd=ROOT, timeout=TIME_LIMIT_S, preexec_fn=_limit_memory,
                         env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **env})
    return res.returncode, res.stderr.strip().splitlines(), time.monotonic() - t


def _assert_refused(path: Path, pattern: str, **env: str) -> None:
    import re

    rc, lines, seconds = _read_bounded(path, **env)
    assert rc == 2 and len(lines) == 1, (rc, lines)
    assert re.search(pattern, lines[0]), lines[0]
    assert seconds < TIME_LIMIT_S


def test_gzip_bomb_1mb_inflating_to_1gb(tmp_path):
    # gzip members concatenate; 16 members of 64 MiB of spaces are 1 GiB from ~1 MB of file
    member = gzip.compress(b" " * (64 << 20), compresslevel=9)
    p = tmp_path / "bomb.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": [') + member * 16)
    assert p.stat().st_size < 2 << 20
    _assert_refused(p, r"chrome-json: bomb.json.gz: inflates beyond 99 MiB \(1,0\d\d,\d\d\d bytes compressed")


def test_gzip_limits_are_configurable(tmp_path):
    member = gzip.compress(b" " * (8 << 20), compresslevel=9)
    p = tmp_path / "small.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1}')
                  + member + gzip.compress(b"]}"))
    rc, lines, _ = _read_bounded(p)
    assert rc == 0, lines  # 8 MiB from ~8 KB: under the 64 MiB floor
    _assert_refused(p, r"small.json.gz: inflates beyond 4 MiB", WORKBENCH_TRACE_INFLATE_MAX_MB="4")


def _tracy_container(blocks: list[bytes]) -> bytes:
    return b"tr\xfdP\x01\x01" + b"".join(struct.pack("<I", len(b)) + b for b in blocks)


def test_zstd_tracy_bomb_of_many_small_blocks(tmp_path):
    import zstandard

    # blocks of 64 KiB each (legal), one zstd stream: ~10 bytes per block, a few GiB in all
    comp = zstandard.ZstdCompressor(level=19).compressobj()
    zeros = b"\0" * (64 << 10)
    blocks = [comp.compress(zeros) + comp.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for _ in range(3000)]
    p = tmp_path / "bomb.tracy"
    p.write_bytes(_tracy_container(blocks))
    assert p.stat().st_size < 64 << 10
    _assert_refused(p, r"tracy: bomb.tracy: inflates beyond 64 MiB")


def test_zstd_tracy_bomb_of_one_block(tmp_path):
    import zstandard

    block = zstandard.ZstdCompressor(level=19).compress(b"\0" * (1 << 30))
    p = tmp_path / "one.tracy"
    p.write_bytes(_tracy_container([block]))
    assert p.stat().st_size < 64 << 10
    _assert_refused(p, r"tracy: one.tracy: corrupted compressed block 0 \(a block inflates beyond Tracy's 64 KiB")


_RECURSIVE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS start, x AS end FROM c"


def test_sqlite_recursive_view_where_nsys_expects_a_table(tmp_path):
    p = tmp_path / "report.sqlite"
    con = sqlite3.connect(p)
    con.execute(f"CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS {_RECURSIVE}")
    con.close()
    _assert_refused(p, "nsys-sqlite: report.sqlite: 'CUPTI_ACTIVITY_KIND_KERNEL' is a view, not a table")


def _rocpd_with_kernels_view(tmp_path: Path, select_sql: str) -> Path:
    """rank0.db with its ``kernels`` view replaced."""
    import shutil

    p = tmp_path / "results.db"
    shutil.copy(DATA / "two_ranks_training_step" / "rank0.db", p)
    con = sqlite3.connect(p)
    con.execute("DROP VIEW kernels")
    con.execute(f"CREATE VIEW kernels AS {select_sql}")
    con.commit()
    con.close()
    return p


def test_sqlite_recursive_kernels_view_in_rocpd(tmp_path):
    p = _rocpd_with_kernels_view(tmp_path, _RECURSIVE)
    _assert_refused(p, "rocpd: results.db: view 'kernels' uses WITH/RECURSIVE")


def test_sqlite_cross_join_view_hits_the_time_budget(tmp_path):
    joined = ", ".join(f"rocpd_string s{i}" for i in range(8))
    p = _rocpd_with_kernels_view(tmp_path, f"SELECT s0.id AS start, s1.id AS end FROM {joined} ORDER BY s7.string")
    _assert_refused(p, r"took over 2 s \(limit: WORKBENCH_TRACE_SQL_SECONDS\)", WORKBENCH_TRACE_SQL_SECONDS="2")
