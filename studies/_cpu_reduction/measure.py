"""Measuring the cpu-reduction variants: in-process (torch, numpy) and out-of-process (IREE).

Each function returns :class:`workbench.study.VariantResult` objects whose correctness was
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

import numpy as np

from workbench import harness, procs
from workbench.env import REPO_ROOT
from workbench.harness import ExternalCommandError
from workbench.study import VariantResult

from . import data
from .iree_tools import benchmark, run_module


@dataclass(frozen=True)
class Point:
    """One measured configuration: implementation, elements, chunks (IREE only), workers."""

    impl: str
    n: int
    c: int | None
    w: int

    @property
    def name(self) -> str:
        chunk = f"/c={self.c}" if self.c is not None else ""
        return f"{self.impl}/n={self.n}{chunk}/w={self.w}"

    @property
    def params(self) -> dict:
        return {"impl": self.impl, "n": self.n, "c": self.c, "w": self.w}


def failed(p: Point, reason: str, extra: dict | None = None) -> VariantResult:
    return VariantResult(p.name, p.params, [], False, reason, extra or {})


def checked(p: Point, value: float, ref: float, samples_ns: list[float], extra: dict) -> VariantResult:
    ok, text = data.check(value, ref)
    return VariantResult(p.name, p.params, samples_ns if ok else [], ok, text, extra)


def torch_point(p: Point, x: np.ndarray, ref: float, repeat: int) -> VariantResult:
    """``torch.sum(x)`` (allocates its output each call) or ``torch.sum(x, 0, out=o)``.

    The ``out=`` overload needs a ``dim``; over the only dimension of a 1D tensor it runs the
    same reduction into the preallocated 0-d ``o``, so the difference is the allocation.
    """
    import torch

    xt = torch.from_numpy(x)
    out = torch.empty((), dtype=torch.float32)
    fn = (lambda: torch.sum(xt, 0, out=out)) if p.impl == "torch-out" else (lambda: torch.sum(xt))
    with harness.torch_threads(p.w):
        value = float(fn())
        m = harness.time_callable(fn, repeat=repeat)
    return checked(p, value, ref, m.samples_ns, {"loops": m.loops, "torch": torch.__version__,
                                                 "threads": p.w})


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
    """Run ``studies._cpu_reduction.iree_py`` on ``[{"key", "vmfb", "input"}]``: (results, command).

    Raises :class:`ExternalCommandError` when the child fails as a whole. ``exit_crash_ok``
    accepts a child that wrote its complete results and then died: the Tracy runtime under a
    live capture intermittently segfaults in interpreter teardown (IREE 3.13 wheels).
    """
    cmd = [sys.executable, "-m", "studies._cpu_reduction.iree_py"]
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


def iree_python(points: list[Point], driver: str, workers: int, modules: dict, inputs: dict, refs: dict,
                repeat: int) -> list[VariantResult]:
    """All points of one driver setup through ``iree.runtime`` in one child process."""
    progs = [{"key": p.name, "vmfb": str(modules[(p.n, p.c)].vmfb), "input": str(inputs[p.n])} for p in points]
    try:
        results, _ = run_iree_python(progs, driver, workers, repeat)
    except ExternalCommandError as exc:
        return [failed(p, f"iree.runtime child: {exc}") for p in points]
    by_key = {r["key"]: r for r in results}
    out = []
    for p in points:
        r = by_key.get(p.name, {"error": "no result from the child process"})
        extra = {"driver": driver, "workers": workers, "module": modules[(p.n, p.c)].info["key"],
                 "dispatches": modules[(p.n, p.c)].info["dispatches"]}
        if "error" in r:
            out.append(failed(p, f"iree.runtime ({driver}, {workers} workers): {r['error']}", extra))
        else:
            out.append(checked(p, r["value"], refs[p.n], r["samples_ns"], extra | {"loops": r["loops"]}))
    return out


def iree_bench(p: Point, module, input_npy: Path, ref: float, repeat: int, min_time_s: float) -> VariantResult:
    """``iree-benchmark-module`` (C++ harness): result checked with ``iree-run-module`` first."""
    extra = {"module": module.info["key"], "dispatches": module.info["dispatches"]}
    try:
        value = run_module(module.vmfb, input_npy, "local-task", p.w)
        ok, text = data.check(value, ref)
        if not ok:
            return VariantResult(p.name, p.params, [], False, text, extra)
        samples, cmd = benchmark(module.vmfb, input_npy, p.w, repeat, min_time_s)
    except ExternalCommandError as exc:
        return failed(p, str(exc), extra)
    return VariantResult(p.name, p.params, samples, True, text, extra | {"command": cmd,
                                                                        "min_time_s": min_time_s})
