"""Timing harness: warm-up, inner-loop calibration, repetitions, raw samples, own floor.

The measured function owns its clock (as in pyperf): a *timer* is ``timer(loops) -> seconds``
that runs the work ``loops`` times and returns the elapsed time by whatever clock fits the
work (``perf_counter_ns`` on the host, CUDA events on a GPU, OpenCL profiling events).
``measure`` calibrates ``loops`` so one sample is long against the clock's resolution, warms
up, then collects ``repeat`` samples and returns per-call times in ns, all kept.

The harness reports its own floor: the per-call cost of timing an empty callable the same
way. Figures within a few times the floor are dominated by the harness, and reports say so.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

Timer = Callable[[int], float]  # loops -> elapsed seconds


@dataclass
class Measurement:
    samples_ns: list[float]  # per-call ns, one entry per repetition
    loops: int  # calls per sample
    warmup: int
    clock: str
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def clock_resolution_ns(trials: int = 2000) -> float:
    """Smallest non-zero step of ``perf_counter_ns`` observed (the timer's resolution)."""
    best = float("inf")
    for _ in range(trials):
        t0 = time.perf_counter_ns()
        t1 = time.perf_counter_ns()
        while t1 == t0:
            t1 = time.perf_counter_ns()
        best = min(best, t1 - t0)
    return float(best)


def perf_counter_timer(fn: Callable[[], object]) -> Timer:
    """Wrap a zero-argument callable into a host-clock timer."""

    def timer(loops: int) -> float:
        rng = range(loops)
        t0 = time.perf_counter_ns()
        for _ in rng:
            fn()
        return (time.perf_counter_ns() - t0) * 1e-9

    return timer


def calibrate_loops(timer: Timer, min_sample_s: float, max_loops: int = 1 << 24) -> int:
    """Smallest power of two of loops whose sample lasts at least ``min_sample_s``."""
    loops = 1
    while loops < max_loops:
        if timer(loops) >= min_sample_s:
            return loops
        loops *= 2
    return max_loops


def measure(
    timer: Timer,
    *,
    repeat: int = 20,
    warmup: int = 1,
    loops: int | None = None,
    min_sample_s: float | None = None,
    budget_s: float | None = None,
    clock: str = "perf_counter_ns",
) -> Measurement:
    """Calibrate, warm up and collect ``repeat`` samples (fewer if ``budget_s`` runs out).

    ``min_sample_s`` defaults to 1000x the host clock resolution, at least 1 ms, so the
    clock's granularity is below 0.1% of a sample. With a time budget at least 3 samples
    are always taken.
    """
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    if min_sample_s is None:
        min_sample_s = max(1e-3, 1000 * _resolution_s())
    if loops is None:
        # One call first: a cold first call (page faults, lazy init, a descheduled thread)
        # would otherwise end calibration at loops=1 and leave every sample a single call.
        timer(1)
        loops = calibrate_loops(timer, min_sample_s)
    for _ in range(warmup):
        timer(loops)
    samples: list[float] = []
    start = time.perf_counter()
    for i in range(repeat):
        samples.append(timer(loops) * 1e9 / loops)
        if budget_s is not None and i >= 2 and time.perf_counter() - start > budget_s:
            break
    return Measurement(samples_ns=samples, loops=loops, warmup=warmup, clock=clock)


def time_callable(fn: Callable[[], object], **kw) -> Measurement:
    """Time a zero-argument callable on the host clock (see :func:`measure`)."""
    return measure(perf_counter_timer(fn), **kw)


_RES_S: float | None = None
_FLOOR: Measurement | None = None


def _resolution_s() -> float:
    global _RES_S
    if _RES_S is None:
        _RES_S = clock_resolution_ns() * 1e-9
    return _RES_S


def harness_floor(repeat: int = 15) -> Measurement:
    """Per-call cost of timing an empty callable with this harness (cached per process)."""
    global _FLOOR
    if _FLOOR is None:
        _FLOOR = time_callable(lambda: None, repeat=repeat, warmup=2)
    return _FLOOR


def floor_ns() -> float:
    import statistics

    return statistics.median(harness_floor().samples_ns)


# --- threads ---------------------------------------------------------------------------

@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Set torch's intra-op thread count for the block, restoring it after."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


# --- GPU -------------------------------------------------------------------------------

def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def cuda_event_timer(fn: Callable[[], object], flush_l2: bool = False, l2_bytes: int = 256 << 20) -> Timer:
    """A timer on CUDA events around ``loops`` calls of ``fn``.

    With ``flush_l2`` each call is preceded by a write of a buffer larger than L2 and the
    timer measures each call between its own events, so the flush is not counted.
    """
    import torch

    flush_buf = torch.empty(l2_bytes // 4, dtype=torch.int32, device="cuda") if flush_l2 else None

    def timer(loops: int) -> float:
        if flush_buf is None:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(loops):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(loops)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(loops)]
        for i in range(loops):
            flush_buf.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return sum(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e-3

    return timer


def time_cuda(fn: Callable[[], object], flush_l2: bool = False, **kw) -> Measurement:
    """Time GPU work with CUDA events (requires a CUDA device)."""
    kw.setdefault("min_sample_s", 1e-3)
    return measure(cuda_event_timer(fn, flush_l2=flush_l2), clock="cuda-event", **kw)


# --- external commands: google-benchmark JSON ------------------------------------------

_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class ExternalCommandError(RuntimeError):
    """An external benchmark command failed; carries the command and its own error text."""

    def __init__(self, cmd: Sequence[str], returncode: int, stderr: str):
        self.cmd = list(cmd)
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"command failed (exit {returncode}): {shlex.join(self.cmd)}\n{stderr.strip()}")


def parse_gbench(text: str) -> dict[str, list[float]]:
    """google-benchmark JSON -> {benchmark name: per-iteration real time in ns per repetition}.

    Aggregate rows (mean, median, stddev, cv) are dropped: the raw repetitions are the samples.
    """
    doc = json.loads(text)
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        raise ValueError("not google-benchmark JSON (no 'benchmarks' list)")
    out: dict[str, list[float]] = {}
    for row in doc["benchmarks"]:
        if row.get("run_type", "iteration") != "iteration" or row.get("error_occurred"):
            continue
        name = row.get("run_name") or row["name"]
        unit = _UNIT_NS[row.get("time_unit", "ns")]
        out.setdefault(name, []).append(float(row["real_time"]) * unit)
    return out


def run_command(cmd: Sequence[str], timeout_s: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run an external tool; a failure or a time-out raises :class:`ExternalCommandError`
    carrying the command and the tool's own error text."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise ExternalCommandError(cmd, -1, f"timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        raise ExternalCommandError(cmd, proc.returncode, proc.stderr or proc.stdout)
    return proc


def run_gbench(cmd: Sequence[str], timeout_s: float = 600, env: dict | None = None) -> dict[str, list[float]]:
    """Run a command that prints google-benchmark JSON on stdout; return raw samples in ns."""
    return parse_gbench(run_command(cmd, timeout_s, env).stdout)
