"""The benchmark scripts' shared scaffolding.

A study benchmark (``ag_gemm.py``, ``ag_gemm_kernel.py``, ``mc2_split.py``): its common
arguments (:func:`study_arguments`), the run in a fresh store, bundled and printed, or the
committed bundles printed instead (:func:`run_or_print`, :func:`run_benchmark`), and the head
of each run's table (:func:`print_run_head`). A statistical benchmark (``ab_false_calls.py``,
``null_controls.py``, ``cpu_reduction.py``, ``interrupts.py``): a temporary store, a progress
line with the time since its start, and the machine with its load average at the start and
the end (:class:`Session`), which every figure it prints is read against; busy processes for
its loaded condition (:func:`background_load`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from workbench.base.env import capture, summary_line
from workbench.running.runner import execute_keep_partial
from workbench.data.record import RunRecord
from workbench.results.store import Store, committed_runs, read_bundle, write_run_bundle
from workbench.seam.study import ParamError, StudyUnavailable


#: The head of a child script that measures one trace import's memory (``traces.py``,
#: ``rocprofjson_memory.py``; run as ``python -c SCRIPT TRACE REPO WARMUP``): the repository on
#: the path, ``load`` warmed up on a small file of the same format (lazy imports, allocator
#: pools), ``status_kb(key)`` of /proc/self/status, the peak RSS (VmHWM) reset to the current
#: RSS, and that RSS as ``base``. The caller's part loads ``sys.argv[1]`` and reads the peak.
LOAD_MEMORY_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[2])
from workbench.traces import load
load(sys.argv[3])
def status_kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
with open("/proc/self/clear_refs", "w") as fh:  # "5" resets the peak RSS (VmHWM) to the current RSS
    fh.write("5")
base = status_kb("VmRSS:")
"""

def run_benchmark(study: ModuleType, values: dict[str, Any], show: Callable[[RunRecord], bool], *,
                  bundle_dir: Path | None = None, bundle_stem: str = "bench", unavailable_status: int = 2) -> int:
    """Execute in a fresh store (progress on stderr), keep and bundle a failed run's finished
    points, print the table with ``show``. Without the hardware it prints the committed runs
    instead and returns ``unavailable_status``; bad parameters return 2. Otherwise 0 when the
    run finished and ``show`` says every check (and target) held."""
    try:
        rec, error = execute_keep_partial(study, values, Store(),
                                          progress=lambda f, m: print(f"[{f:4.0%}] {m}", file=sys.stderr, flush=True))
    except ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StudyUnavailable as exc:
        recs = committed_runs(study.ID)
        print(f"cannot run here: {exc}\ncommitted results ({len(recs)} runs under traces/{study.ID}/):")
        for committed in recs:
            show(committed)
        return unavailable_status
    if error:
        print(f"run failed: {error}", file=sys.stderr)
    if bundle_dir:
        print(f"bundle: {write_run_bundle(rec, bundle_dir, bundle_stem, bool(error))}", file=sys.stderr)
    return 0 if show(rec) and not error else 1


def study_arguments(doc: str, tag: str = "bench") -> argparse.ArgumentParser:
    """A study benchmark's parser (its docstring's first line as the description): ``--set``,
    ``--bundle-dir``, ``--tag`` and ``--from``; the benchmark adds its own."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="study parameters, name=value (over the defaults)")
    ap.add_argument("--bundle-dir", type=Path, help="write the run's bundle here")
    ap.add_argument("--tag", default=tag, help="bundle file name part")
    ap.add_argument("--from", dest="bundles", nargs="*", type=Path, help="print these bundles instead of running")
    return ap


def run_or_print(study: ModuleType, values: dict[str, Any], show: Callable[[RunRecord], bool],
                 args: argparse.Namespace, *, bundle_stem: str, unavailable_status: int = 2) -> int:
    """``--from``: print those bundles with ``show`` (1 when one fails it); else run ``values``
    with ``--set`` over them (:func:`run_benchmark`)."""
    if args.bundles is not None:
        return 0 if all([show(read_bundle(p)) for p in args.bundles]) else 1
    try:
        values = values | study.SPACE.parse_sets(args.set)
    except ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run_benchmark(study, values, show, bundle_dir=args.bundle_dir, bundle_stem=bundle_stem,
                         unavailable_status=unavailable_status)


def print_run_head(rec: RunRecord, what: str = "") -> None:
    """The head of one run's tables: its id and origin (and ``what``), the machine with the
    versions that matter to a GPU study, and the command that reproduces it."""
    pkgs, env = rec.env.get("packages", {}), rec.env
    versions = {"torch": pkgs.get("torch"), "triton": pkgs.get("triton"), "CUDA": env.get("cuda_runtime"),
                "NCCL": env.get("nccl")}
    print(f"\n## run {rec.run_id} ({rec.origin}, {rec.created_utc} UTC){'; ' + what if what else ''}")
    print(f"machine: {summary_line(env)}; " + ", ".join(f"{k} {v}" for k, v in versions.items() if v) + "\n")
    print(f"reproduce: `{rec.reproduce}`\n")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Session:
    """A statistical benchmark's session: its store (if it keeps runs), its progress line, its
    machine and load."""

    def __init__(self, store: Store | None = None):
        self.store, self.t0, self.load_start, self.load_end = store, time.perf_counter(), _load(), ""

    def say(self, message: str) -> None:
        """A progress line on stderr, with the seconds since the session started."""
        print(f"[{time.perf_counter() - self.t0:6.0f} s] {message}", file=sys.stderr, flush=True)

    def machine(self) -> str:
        """The machine, its load average at the start and at the end (other processes
        included), and the session's length."""
        return (f"{summary_line(capture())}; load average {self.load_start} at the start, "
                f"{self.load_end or _load()} at the end; {time.perf_counter() - self.t0:.0f} s")


@contextmanager
def session(name: str) -> Iterator[Session]:
    """A :class:`Session` over a store in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"wb-bench-{name}-") as tmp:
        s = Session(Store(Path(tmp) / f"{name}.sqlite"))
        try:
            yield s
        finally:
            s.load_end = _load()


@contextmanager
def background_load(n: int) -> Iterator[None]:
    """``n`` processes beside the benchmark, each spinning on one CPU (the loaded condition),
    ended on the way out."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait(timeout=10)
