"""Shared by the safety tests of issue 28: a valid bundle to spoil, and the CLI run the way a
user runs it, in a process of its own under a memory limit and a time limit."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The CLI, its peak RSS written to a file at exit, under RLIMIT_AS when asked (set by the
# child itself: no preexec_fn, see workbench/base/procs.py). Reports then leave their PNG charts out
# (workbench.presentation.report.png_blocked: the renderer's V8 would abort under any such limit).
# The peak is VmHWM, this program's own: ru_maxrss carries the peak of the process it was forked
# from across the exec (a pytest of the whole suite holds over 1 GB).
_MEASURED = ("import atexit, re, resource, sys\n"
             "limit, rss_file = int(sys.argv[1]) << 20, sys.argv[2]\n"
             "if limit:\n"
             "    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
             "def peak_kib():\n"
             "    try:\n"
             "        return re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read())[1]\n"
             "    except (OSError, TypeError):\n"
             "        return str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
             "atexit.register(lambda: open(rss_file, 'w').write(peak_kib()))\n"
             "sys.path.insert(0, sys.argv[3])\n"
             "from workbench.cli import main\n"
             "sys.exit(main(sys.argv[4:]))\n")


@dataclass
class Result:
    code: int
    out: str
    err: str
    peak_rss_mb: float  # the CLI process's own peak resident memory

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def cli(*args: str | bytes, store: Path | None = None, timeout_s: float = 120, mem_mb: int = 0,
        env: dict | None = None, stdout=subprocess.PIPE) -> Result:
    """``python -m workbench [--store STORE] ARGS`` within ``timeout_s`` seconds
    (subprocess.TimeoutExpired past it: the bound failed), with at most ``mem_mb`` of address
    space when given; the result has its peak RSS."""
    import tempfile

    argv = ([b"--store", os.fsencode(store)] if store else []) + [os.fsencode(a) for a in args]
    lock = {"WORKBENCH_LOCK": str(Path(store).parent / "machine.lock")} if store else {}
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "rss"
        proc = subprocess.run([os.fsencode(sys.executable), b"-c", _MEASURED.encode(), str(mem_mb).encode(),
                               os.fsencode(rss_file), os.fsencode(ROOT), *argv], cwd=ROOT, stdout=stdout,
                              stderr=subprocess.PIPE, timeout=timeout_s, env=os.environ | lock | (env or {}))
        rss_kib = float(rss_file.read_text()) if rss_file.exists() and rss_file.read_text() else float("nan")
    decode = lambda b: (b or b"").decode("utf-8", "backslashreplace")  # noqa: E731
    return Result(proc.returncode, decode(proc.stdout), decode(proc.stderr), rss_kib / 1024)


def refused(result: Result, *fragments: str) -> None:
    """Exit 2, one line on stderr that holds every fragment, no traceback."""
    assert result.code == 2, (result.code, result.err[-2000:])
    assert len(result.err_lines) == 1, result.err_lines[:8]
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


def stored_runs(store: Path) -> int:
    """Runs in the store (0 when the file was never made)."""
    if not Path(store).exists():
        return 0
    con = sqlite3.connect(f"{Path(store).as_uri()}?mode=ro", uri=True)
    try:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        con.close()


def stored_points(store: Path) -> int:
    """Points in the store so far (0 while it is not made or busy): read-only, a short wait."""
    try:
        con = sqlite3.connect(f"{Path(store).as_uri()}?mode=ro", uri=True, timeout=0.2)
        try:
            return con.execute("SELECT COUNT(*) FROM variants").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def valid_doc(variants: int = 1) -> dict:
    """A bundle of a calibration run that imports cleanly."""
    run = {"format": "perf-workbench-run", "version": 1, "run_id": "20260101-000000-calibration-abc123",
           "study": "calibration", "params": {"repeat": 3, "threads": 1, "torch": False},
           "env": {"fingerprint": "f00", "cpu_model": "Test CPU", "cpu_logical": 2, "gpu_names": []},
           "status": "complete", "created_utc": "2026-01-01T00:00:00Z",
           "reproduce": "python -m workbench run calibration",
           "variants": [{"variant": f"empty-call{i or ''}", "params": {"kind": "harness"},
                         "samples_ns": [30.0 + i % 7, 31.0, 32.0, 33.5, 30.5], "correct": True, "check": "ok",
                         "extra": {"load": {"loadavg_1m": 0.5}}} for i in range(variants)],
           "outputs": {"warnings": [], "load": {"before": {"loadavg_1m": 0.4}, "after": {"loadavg_1m": 0.6}}}}
    return {"format": "perf-workbench-bundle", "version": 1, "run": run,
            "attachments": [{"name": "t.json", "kind": "trace/chrome-json",
                             "data_b64": base64.b64encode(b'{"traceEvents": []}').decode()}]}


def write(tmp_path: Path, doc: dict | bytes, name: str = "b.bundle.json") -> Path:
    path = tmp_path / name
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path
