"""Timing harness: warm-up, inner-loop calibration, repetitions, raw samples, own floor.

The measured function owns its clock (as in pyperf): a *timer* is ``timer(loops) -> seconds``
that runs the work ``loops`` times and returns the elapsed time by whatever clock fits the
work (``perf_counter_ns`` on the host, CUDA events on a GPU, OpenCL profiling events).
``measure`` calibrates ``loops`` so one sample is long against the clock's resolution, warms
up, then collects ``repeat`` samples and returns per-call times in ns, all kept.

GPU work, and work spread over ranks, has one clock: :class:`DistTimer` (barrier, optional
spin kernel that hides the host's launch cost, CUDA events, optional L2 flush, the maximum
over ranks). It serves one GPU without a process group as well as every torchrun worker.

The harness reports its own floor: the per-call cost of timing an empty callable the same
way. Figures within a few times the floor are dominated by the harness, and reports say so.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

from ..base import interrupt, procs
from ..evidence.stats import median_ci_half_width_rel
from ..base.units import PER_NS

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
        interrupt.check()  # between samples: a Ctrl-C recorded meanwhile stops the run here
        samples.append(timer(loops) * 1e9 / loops)
        if budget_s is not None and i >= 2 and time.perf_counter() - start > budget_s:
            break
    while more := more_samples([samples]):  # a precision target (``--precision``) asks for more
        for _ in range(more):
            interrupt.check()
            samples.append(timer(loops) * 1e9 / loops)
            if precision_cap_passed():
                break
    return Measurement(samples_ns=samples, loops=loops, warmup=warmup, clock=clock)


def time_callable(fn: Callable[[], object], **kw) -> Measurement:
    """Time a zero-argument callable on the host clock (see :func:`measure`)."""
    return measure(perf_counter_timer(fn), **kw)


# --- repeating to a target precision -------------------------------------------------------

#: where the active precision target lives: an environment variable, so the child processes a
#: study starts (cpu-reduction's IREE runtime children time with this harness) honour it too
PRECISION_ENV = "WORKBENCH_PRECISION"
#: samples a series may grow to under a precision target (bounds memory and bootstrap cost)
MAX_PRECISION_SAMPLES = 20_000


@dataclass(frozen=True)
class Precision:
    """Repeat until the median's 95% CI half-width is at most ``rel`` of the median, or until
    ``deadline_unix`` (wall-clock seconds, which a child process reads the same way)."""

    rel: float
    deadline_unix: float


def precision_target() -> Precision | None:
    """The active target (:func:`repeat_to_precision`), or None."""
    raw = os.environ.get(PRECISION_ENV)
    if not raw:
        return None
    try:
        doc = json.loads(raw)
        return Precision(float(doc["rel"]), float(doc["deadline_unix"]))
    except (ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def repeat_to_precision(rel: float, cap_s: float) -> Iterator[Precision]:
    """Within the block, every :func:`measure` (and every series a study extends through
    :func:`more_samples`) keeps sampling past its ``repeat`` until its median's CI half-width
    is within ``rel`` of the median, or until ``cap_s`` seconds from now, whichever first.
    The cap is for the whole block: what is measured after it gets its declared repeats."""
    target = Precision(rel, time.time() + cap_s)
    old = os.environ.get(PRECISION_ENV)
    os.environ[PRECISION_ENV] = json.dumps({"rel": rel, "deadline_unix": target.deadline_unix})
    try:
        yield target
    finally:
        if old is None:
            os.environ.pop(PRECISION_ENV, None)
        else:
            os.environ[PRECISION_ENV] = old


def precision_cap_passed() -> bool:
    target = precision_target()
    return target is not None and time.time() >= target.deadline_unix


def more_samples(series: Sequence[Sequence[float]]) -> int:
    """How many more samples to take of each series (samples of the same thing, e.g. one
    variant; several series taken in interleaved rounds grow together): 0 without a target,
    once the cap has passed, at :data:`MAX_PRECISION_SAMPLES`, or when every series meets the
    target; else half as many as the shortest has, so the CI is recomputed a logarithmic
    number of times."""
    target = precision_target()
    if target is None or not series or time.time() >= target.deadline_unix:
        return 0
    shortest = min(len(s) for s in series)
    if shortest >= MAX_PRECISION_SAMPLES:
        return 0
    if all(len(s) and median_ci_half_width_rel(s) <= target.rel for s in series):
        return 0
    return max(3, shortest // 2)


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


# --- distributed and GPU clock -----------------------------------------------------------

#: ~2 ms of ``torch.cuda._sleep`` at an H200's 1.98 GHz: longer than the host needs to enqueue
#: an op of a few dozen kernels, so the GPU reaches the start event with the whole op queued
SLEEP_CYCLES = 4_000_000


@dataclass
class Timing:
    """Samples of one timed function: per-call ns per repetition, the maximum over ranks (a
    call is done when its slowest rank is), and every rank's own samples."""

    samples_ns: list[float]
    rank_samples_ns: list[list[float]]
    loops: int
    clock: str

    @property
    def median_ns(self) -> float:
        return statistics.median(self.samples_ns)

    def rank_medians_ns(self) -> list[float]:
        return [statistics.median(s) for s in self.rank_samples_ns]


class DistTimer:
    """The one clock of GPU work, and of CPU work across ranks: CUDA events (or
    ``perf_counter_ns`` with ``device="cpu"``) around ``loops`` calls, after a barrier.

    Every rank of ``group`` must make the same calls in the same order with the same
    ``loops`` and ``repeat`` (the barrier and the reductions are collectives). Without an
    initialised process group (one GPU, no torchrun) the barrier is a device synchronisation
    and the maximum over ranks is this process's own samples.

    - ``sleep_cycles``: a spin kernel queued before the start event, so the host enqueues the
      whole op while the GPU waits and the host's launch cost is not timed (the op must take
      less host time to enqueue than the sleep lasts; see :data:`SLEEP_CYCLES`);
    - ``flush_l2``: before each call, a write of a buffer larger than L2; each call is then
      timed between its own events and the flush is not counted.
    """

    def __init__(self, device: str = "cuda", group=None, sleep_cycles: int = 0, flush_l2: bool = False,
                 l2_bytes: int = 256 << 20):
        import torch
        import torch.distributed as dist

        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
        self.torch, self.dist = torch, dist
        self.cuda = device == "cuda"
        self.clock = "cuda-event" if self.cuda else "perf_counter_ns"
        self.group = group
        self.distributed = dist.is_available() and dist.is_initialized()
        if not self.cuda and (sleep_cycles or flush_l2):
            raise ValueError("sleep_cycles and flush_l2 need device='cuda'")
        self.sleep_cycles = sleep_cycles
        self.flush_buf = torch.empty(l2_bytes // 4, dtype=torch.int32, device="cuda") if flush_l2 else None

    # --- this rank --------------------------------------------------------------------
    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def barrier(self) -> None:
        """Every rank's queued work done, every rank here (a device sync without a group)."""
        self.sync()
        if self.distributed:
            self.dist.barrier(group=self.group)
            self.sync()

    def elapsed_s(self, fn: Callable[[], object], loops: int = 1) -> float:
        """One sample on this rank: barrier (not timed), then ``loops`` calls; seconds."""
        self.barrier()
        if not self.cuda:
            t0 = time.perf_counter_ns()
            for _ in range(loops):
                fn()
            return (time.perf_counter_ns() - t0) * 1e-9
        event = lambda: self.torch.cuda.Event(enable_timing=True)  # noqa: E731
        if self.sleep_cycles:
            self.torch.cuda._sleep(self.sleep_cycles)
        if self.flush_buf is None:
            start, end = event(), event()
            start.record()
            for _ in range(loops):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3
        marks = [(event(), event()) for _ in range(loops)]
        for start, end in marks:
            self.flush_buf.zero_()
            start.record()
            fn()
            end.record()
        marks[-1][1].synchronize()
        return sum(start.elapsed_time(end) for start, end in marks) * 1e-3

    # --- across ranks -------------------------------------------------------------------
    def _tensor(self, values):
        dev = self.torch.device("cuda", self.torch.cuda.current_device()) if self.cuda else "cpu"
        return self.torch.tensor(values, dtype=self.torch.float64, device=dev)

    def max_over_ranks(self, values: Sequence[float]) -> list[float]:
        """Element-wise maximum of ``values`` over the ranks (every rank gets it)."""
        t = self._tensor(list(values))
        if self.distributed:
            self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.group)
        return t.cpu().tolist()

    def per_rank(self, values: Sequence[float]) -> list[list[float]]:
        """Every rank's ``values`` (same length on every rank), in rank order."""
        t = self._tensor(list(values))
        if not self.distributed:
            return [t.cpu().tolist()]
        parts = [self.torch.empty_like(t) for _ in range(self.dist.get_world_size(self.group))]
        self.dist.all_gather(parts, t, group=self.group)
        return [p.cpu().tolist() for p in parts]

    def _timing(self, samples_ns: list[float], loops: int) -> Timing:
        ranks = self.per_rank(samples_ns)
        return Timing([max(col) for col in zip(*ranks)], ranks, loops, self.clock)

    def loops_for(self, fns: Sequence[Callable[[], object]], min_sample_s: float, max_loops: int = 64) -> list[int]:
        """Per fn, the calls per sample that make a sample last ``min_sample_s``, from one
        untimed call and 3 timed ones; the same on every rank (the slowest rank's estimate)."""
        est = []
        for fn in fns:
            fn()
            est.append(self.elapsed_s(fn, 3) / 3)
        return [max(1, min(max_loops, math.ceil(min_sample_s / max(t, 1e-6)))) for t in self.max_over_ranks(est)]

    def samples(self, fn: Callable[[], object], repeat: int, loops: int = 1, warmup: int = 1) -> Timing:
        """``repeat`` samples of ``loops`` calls each after ``warmup`` untimed ones; per call."""
        for _ in range(warmup):
            self.barrier()
            for _ in range(loops):
                fn()
        samples = []
        for _ in range(repeat):
            interrupt.check()  # never set in a torchrun rank: only where the CLI's handler runs
            samples.append(self.elapsed_s(fn, loops) * 1e9 / loops)
        return self._timing(samples, loops)

    def interleaved(self, fns: Sequence[Callable[[], object]], repeat: int, loops: Sequence[int]) -> list[Timing]:
        """One sample of each fn per round, the order rotated each round, so a clock that
        drifts over the run (GPUs slow down as they heat) is spread over every fn instead of
        penalising the ones timed last. Round 0 is an untimed warm-up round."""
        samples: list[list[float]] = [[] for _ in fns]
        for r in range(repeat + 1):
            interrupt.check()
            shift = r % len(fns) if fns else 0
            for i in list(range(len(fns)))[shift:] + list(range(len(fns)))[:shift]:
                elapsed_s = self.elapsed_s(fns[i], loops[i])
                if r:
                    samples[i].append(elapsed_s * 1e9 / loops[i])
        return [self._timing(s, n) for s, n in zip(samples, loops)]

    def measure(self, fn: Callable[[], object], repeat: int = 20, warmup: int = 1, loops: int | None = None,
                min_sample_s: float = 1e-3) -> Measurement:
        """:func:`measure` on this clock: ``loops`` agreed by the ranks, a fixed ``repeat``
        (no time budget: every rank must take the same number of samples), the maximum over
        ranks as the samples and each rank's median in ``extra``."""
        if loops is None:
            loops = self.loops_for([fn], min_sample_s, max_loops=1 << 16)[0]
        t = self.samples(fn, repeat, loops, warmup)
        return Measurement(samples_ns=t.samples_ns, loops=loops, warmup=warmup, clock=self.clock,
                           extra={"rank_median_ns": t.rank_medians_ns()})


# --- external commands: google-benchmark JSON ------------------------------------------

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
        unit = PER_NS[row.get("time_unit", "ns")]
        out.setdefault(name, []).append(float(row["real_time"]) * unit)
    return out


def run_command(cmd: Sequence[str], timeout_s: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run an external tool; a failure or a time-out raises :class:`ExternalCommandError`
    carrying the command and the tool's own error text."""
    try:
        proc = procs.run(cmd, timeout_s, env=env)  # a recorded Ctrl-C ends it (workbench.base.procs)
    except subprocess.TimeoutExpired:
        raise ExternalCommandError(cmd, -1, f"timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        raise ExternalCommandError(cmd, proc.returncode, proc.stderr or proc.stdout)
    return proc


def run_gbench(cmd: Sequence[str], timeout_s: float = 600, env: dict | None = None) -> dict[str, list[float]]:
    """Run a command that prints google-benchmark JSON on stdout; return raw samples in ns."""
    return parse_gbench(run_command(cmd, timeout_s, env).stdout)
