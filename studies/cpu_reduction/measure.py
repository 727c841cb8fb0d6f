"""Measuring the cpu-reduction variants: in-process (torch, numpy) and out-of-process (IREE).

Each function returns :class:`workbench.record.VariantResult` objects whose correctness was
checked against the float64 reference *before* the samples were accepted; a failed check or
a failed tool keeps the variant with ``correct=False``, no samples and the reason (IREE's
own error text and the command) in ``check``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from workbench import harness, procs
from workbench.env import REPO_ROOT
from workbench.harness import ExternalCommandError
from workbench.record import VariantResult

from . import data
from .iree_tools import benchmark, run_module


@dataclass(frozen=True)
class Point:
    """One measured configuration: provider (the compared dimension), elements, chunks and
    split (IREE only), workers; ``experiment`` names the interleaved experiments whose
    samples are paired by round (``alloc``, ``forkjoin``), empty for an ordinary point."""

    provider: str
    n: int
    c: int | None
    w: int
    split: str | None = None
    experiment: str = ""

    @property
    def name(self) -> str:
        chunk = "" if self.c is None else f"/c={self.c}" + (f"/{self.split}" if self.c > 1 and self.split else "")
        prefix = f"{self.experiment}:" if self.experiment else ""
        return f"{prefix}{self.provider}/n={self.n}{chunk}/w={self.w}"

    @property
    def program_key(self) -> tuple[int, int, str | None]:
        """(n, c, split) of the IREE program this point runs (split None without a split)."""
        return (self.n, self.c or 1, self.split if (self.c or 1) > 1 else None)

    @property
    def params(self) -> dict:
        out = {"provider": self.provider, "n": self.n, "c": self.c, "split": self.split, "w": self.w}
        return out | ({"experiment": self.experiment} if self.experiment else {})


def failed(p: Point, reason: str, extra: dict | None = None) -> VariantResult:
    return VariantResult(p.name, p.params, [], False, reason, extra or {})


def checked(p: Point, value: float, ref: float, samples_ns: list[float], extra: dict) -> VariantResult:
    ok, text = data.check(value, ref)
    return VariantResult(p.name, p.params, samples_ns if ok else [], ok, text, extra)


def torch_fn(provider: str, x: np.ndarray) -> Callable[[], object]:
    """``torch.sum(x)`` (allocates its output each call) or ``torch.sum(x, 0, out=o)``.

    The ``out=`` overload needs a ``dim``; over the only dimension of a 1D tensor it runs the
    same reduction into the preallocated 0-d ``o``, so the difference is the allocation.
    """
    import torch

    xt = torch.from_numpy(x)
    out = torch.empty((), dtype=torch.float32)
    return (lambda: torch.sum(xt, 0, out=out)) if provider == "torch-out" else (lambda: torch.sum(xt))


def torch_point(p: Point, x: np.ndarray, ref: float, repeat: int) -> VariantResult:
    import torch

    fn = torch_fn(p.provider, x)
    with harness.torch_threads(p.w):
        value = float(fn())
        m = harness.time_callable(fn, repeat=repeat)
    return checked(p, value, ref, m.samples_ns, {"loops": m.loops, "torch": torch.__version__, "threads": p.w})


def interleaved_torch(points: list[Point], arrays: dict, refs: dict, rounds: int) -> list[VariantResult]:
    """Torch points timed in interleaved rounds: each round takes one sample of every point,
    in forward order on even rounds and reverse order on odd ones, so drift and order effects
    fall on all points alike and sample ``i`` of every point comes from round ``i`` (paired).

    Each point keeps its own calibrated loop count and its own thread count (set before
    each of its samples, then one untimed call so a resized OpenMP pool is warm)."""
    import torch

    fns, loops, results = {}, {}, {}
    for p in points:
        fn = torch_fn(p.provider, arrays[p.n])
        with harness.torch_threads(p.w):
            value = float(fn())
            ok, text = data.check(value, refs[p.n])
            if ok:
                fn()
                loops[p.name] = harness.calibrate_loops(harness.perf_counter_timer(fn), 1e-3)
        fns[p.name], results[p.name] = fn, (ok, text)
    samples: dict[str, list[float]] = {p.name: [] for p in points}
    live = [p for p in points if results[p.name][0]]

    def one_round(r: int) -> None:
        for p in (live if r % 2 == 0 else live[::-1]):
            timer = harness.perf_counter_timer(fns[p.name])
            with harness.torch_threads(p.w):
                fns[p.name]()
                samples[p.name].append(timer(loops[p.name]) * 1e9 / loops[p.name])

    for r in range(rounds):
        one_round(r)
    # a precision target (--precision) adds whole rounds, so the samples stay paired by round
    while more := harness.more_samples([samples[p.name] for p in live]):
        for _ in range(more):
            one_round(rounds)
            rounds += 1
            if harness.precision_cap_passed():
                break
    out = []
    for p in points:
        ok, text = results[p.name]
        extra = {"loops": loops.get(p.name), "torch": torch.__version__, "threads": p.w, "rounds": rounds,
                 "paired_by": "round (interleaved; order reversed every other round)",
                 "interleaved_with": [q.name for q in points if q is not p]}
        out.append(VariantResult(p.name, p.params, samples[p.name] if ok else [], ok, text, extra))
    return out


def copy_bandwidth(workers: int, repeat: int, n_elems: int = 1 << 25) -> dict:
    """Copy bandwidth (read + write bytes per second) of a 128 MiB float32 array with torch.

    Larger than any cache here, so it is the DRAM floor a streaming sum cannot beat. Counted
    STREAM-style: 2 x bytes per copy (one read, one write).
    """
    import torch

    src = torch.ones(n_elems, dtype=torch.float32)
    dst = torch.empty_like(src)
    with harness.torch_threads(workers):
        m = harness.time_callable(lambda: dst.copy_(src), repeat=repeat, warmup=2)
    ok = bool(torch.equal(dst, src))
    moved = 2 * n_elems * 4
    med = float(np.median(m.samples_ns))
    return {"w": workers, "bytes_per_copy": moved, "samples_ns": m.samples_ns, "copy_gbps": moved / med,
            "correct": ok}


def numpy_point(p: Point, x: np.ndarray, ref: float, repeat: int) -> VariantResult:
    """``numpy.sum`` (pairwise summation, one thread): the single-thread reference."""
    value = float(np.sum(x))
    m = harness.time_callable(lambda: np.sum(x), repeat=repeat)
    return checked(p, value, ref, m.samples_ns, {"loops": m.loops, "numpy": np.__version__})


def run_iree_python(jobs: list[dict], driver: str, workers: int, repeat: int, env: dict | None = None,
                    timeout_s: float = 600, exit_crash_ok: bool = False) -> tuple[list[dict], str]:
    """Run ``studies.cpu_reduction.iree_py`` on ``[{"key", "vmfb", "input"}]``: (results, command).

    Raises :class:`ExternalCommandError` when the child fails as a whole. ``exit_crash_ok``
    accepts a child that wrote its complete results and then died: the Tracy runtime under a
    live capture intermittently segfaults in interpreter teardown (IREE 3.13 wheels).
    """
    cmd = [sys.executable, "-m", "studies.cpu_reduction.iree_py"]
    job = {"driver": driver, "workers": workers, "repeat": repeat, "programs": jobs}
    shown = f"echo '{json.dumps(job)}' | {' '.join(cmd)}"
    try:
        proc = subprocess.run(cmd, input=json.dumps(job), capture_output=True, text=True, timeout=timeout_s,
                              cwd=str(REPO_ROOT), env=env, **procs.popen_kwargs())
    except subprocess.TimeoutExpired:
        raise ExternalCommandError([shown], -1, f"timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        if exit_crash_ok and proc.stdout.rstrip().endswith("]"):
            return json.loads(proc.stdout), f"{shown}  # child died at exit (status {proc.returncode}) after its results"
        raise ExternalCommandError([shown], proc.returncode, proc.stderr)
    return json.loads(proc.stdout), shown


def _module_extra(module) -> dict:
    return {"module": module.info["key"], "dispatches": module.info["dispatches"],
            "program": module.info.get("label", ""), "dispatch_names": module.info.get("dispatch_names", [])}


def iree_python(points: list[Point], driver: str, workers: int, modules: dict, inputs: dict, refs: dict,
                repeat: int) -> list[VariantResult]:
    """All points of one driver setup through ``iree.runtime`` in one child process."""
    progs = [{"key": p.name, "vmfb": str(modules[p.program_key].vmfb), "input": str(inputs[p.n])} for p in points]
    try:
        results, _ = run_iree_python(progs, driver, workers, repeat)
    except ExternalCommandError as exc:
        return [failed(p, f"iree.runtime child: {exc}") for p in points]
    by_key = {r["key"]: r for r in results}
    out = []
    for p in points:
        r = by_key.get(p.name, {"error": "no result from the child process"})
        extra = {"driver": driver, "workers": workers, **_module_extra(modules[p.program_key])}
        if "error" in r:
            out.append(failed(p, f"iree.runtime ({driver}, {workers} workers): {r['error']}", extra))
        else:
            out.append(checked(p, r["value"], refs[p.n], r["samples_ns"], extra | {"loops": r["loops"]}))
    return out


def iree_bench(p: Point, module, input_npy: Path, ref: float, repeat: int, min_time_s: float) -> VariantResult:
    """``iree-benchmark-module`` (C++ harness): result checked with ``iree-run-module`` first."""
    extra = _module_extra(module)
    try:
        value = run_module(module.vmfb, input_npy, "local-task", p.w)
        ok, text = data.check(value, ref)
        if not ok:
            return VariantResult(p.name, p.params, [], False, text, extra)
        samples, cmd = benchmark(module.vmfb, input_npy, p.w, repeat, f"{min_time_s:g}s")
        while more := harness.more_samples([samples]):  # --precision: more repetitions, same command
            samples = samples + benchmark(module.vmfb, input_npy, p.w, more, f"{min_time_s:g}s")[0]
    except ExternalCommandError as exc:
        return failed(p, str(exc), extra)
    return VariantResult(p.name, p.params, samples, True, text, extra | {"command": cmd, "min_time_s": min_time_s})
