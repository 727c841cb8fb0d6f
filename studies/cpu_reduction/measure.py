"""Measuring the cpu-reduction variants: in-process (torch, numpy) and out-of-process (IREE).

Each function returns :class:`workbench.data.record.VariantResult` objects whose correctness was
checked against the float64 reference *before* the samples were accepted; a failed check or
a failed tool keeps the variant with ``correct=False``, no samples and the reason (IREE's
own error text and the command) in ``check``. The run's steps (build the programs, make the
inputs, measure each experiment's points, take the profiles) are at the end; ``run`` in the
study's ``__init__`` calls them in order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from workbench.running import harness
from workbench.base import procs
from workbench.base.env import REPO_ROOT
from workbench.running.harness import ExternalCommandError
from workbench.data.record import VariantResult
from workbench.seam.study import RunContext, Steps
from workbench.traces import TraceError
from workbench.traces.phases import PhaseError

from kernels.iree.sum_programs import program

from . import data, iree_tools, profiles
from .iree_tools import benchmark, run_module
from .plan import IREE_PROVIDERS, Point, profile_workers


def failed(p: Point, reason: str, extra: dict | None = None) -> VariantResult:
    return VariantResult(p.name, p.params, [], False, reason, extra or {})


def checked(p: Point, value: float, ref: float, samples_ns: list[float], extra: dict,
            block: int | None = None) -> VariantResult:
    """The point's result if its value passed the check (its samples timed in one ``block``)."""
    ok, text = data.check(value, ref)
    return VariantResult(p.name, p.params, samples_ns if ok else [], ok, text, extra,
                         [block] * len(samples_ns) if ok and block is not None else None)


def torch_fn(provider: str, x: np.ndarray) -> Callable[[], object]:
    """``torch.sum(x)`` (allocates its output each call) or ``torch.sum(x, 0, out=o)``.

    The ``out=`` overload needs a ``dim``; over the only dimension of a 1D tensor it runs the
    same reduction into the preallocated 0-d ``o``, so the difference is the allocation.
    """
    import torch

    xt = torch.from_numpy(x)
    out = torch.empty((), dtype=torch.float32)
    return (lambda: torch.sum(xt, 0, out=out)) if provider == "torch-out" else (lambda: torch.sum(xt))


def torch_point(p: Point, x: np.ndarray, ref: float, repeat: int, block: int | None = None) -> VariantResult:
    import torch

    fn = torch_fn(p.provider, x)
    with harness.torch_threads(p.w):
        value = float(fn())
        m = harness.time_callable(fn, repeat=repeat)
    return checked(p, value, ref, m.samples_ns, {"loops": m.loops, "torch": torch.__version__, "threads": p.w}, block)


def interleaved_torch(points: list[Point], arrays: dict, refs: dict, rounds: int,
                      next_block: Callable[[], int] | None = None) -> list[VariantResult]:
    """Torch points timed in interleaved rounds: each round takes one sample of every point,
    in forward order on even rounds and reverse order on odd ones, so drift and order effects
    fall on all points alike and sample ``i`` of every point comes from round ``i`` (paired;
    each round is one block of the run, numbered by ``next_block``).

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
    blocks: list[int] = []
    live = [p for p in points if results[p.name][0]]

    def one_round(r: int) -> None:
        blocks.append(next_block() if next_block else r)
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
        out.append(VariantResult(p.name, p.params, samples[p.name] if ok else [], ok, text, extra,
                                 list(blocks) if ok else None))
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


def numpy_point(p: Point, x: np.ndarray, ref: float, repeat: int, block: int | None = None) -> VariantResult:
    """``numpy.sum`` (pairwise summation, one thread): the single-thread reference."""
    value = float(np.sum(x))
    m = harness.time_callable(lambda: np.sum(x), repeat=repeat)
    return checked(p, value, ref, m.samples_ns, {"loops": m.loops, "numpy": np.__version__}, block)


def run_iree_python(jobs: list[dict], driver: str, workers: int, repeat: int, env: dict | None = None,
                    timeout_s: float = 600) -> tuple[list[dict], str]:
    """Run ``studies.cpu_reduction.iree_py`` on ``[{"key", "vmfb", "input"}]``: (results, command).

    Raises :class:`ExternalCommandError` when the child fails as a whole."""
    job = {"driver": driver, "workers": workers, "repeat": repeat, "programs": jobs}
    proc, shown = _child("studies.cpu_reduction.iree_py", job, env, timeout_s)
    if proc.returncode != 0:
        raise ExternalCommandError([shown], proc.returncode, proc.stderr)
    return json.loads(proc.stdout), shown


def _child(module: str, job: dict, env: dict | None, timeout_s: float) -> tuple[subprocess.CompletedProcess, str]:
    """``python -m module`` with ``job`` as JSON on stdin, killed at ``timeout_s``: (the
    finished process, the command as a shell line)."""
    cmd = [sys.executable, "-m", module]
    shown = f"echo '{json.dumps(job)}' | {' '.join(cmd)}"
    try:
        return procs.run(procs.bound(cmd), timeout_s, input=json.dumps(job), cwd=str(REPO_ROOT), env=env), shown
    except subprocess.TimeoutExpired:
        raise ExternalCommandError([shown], -1, f"timed out after {timeout_s:.0f} s") from None


def run_traced(job: dict, env: dict, timeout_s: float) -> tuple[dict, str]:
    """Run ``studies.cpu_reduction.traced`` (one provider's iterations in Tracy zones) under
    ``env``, killed at ``timeout_s``: (result, command). A child that wrote its result and then
    died is accepted: the Tracy runtime under a live capture intermittently segfaults in
    interpreter teardown (IREE 3.13 wheels). Raises :class:`ExternalCommandError` otherwise."""
    proc, shown = _child("studies.cpu_reduction.traced", job, env, timeout_s)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise ExternalCommandError([shown], proc.returncode, proc.stderr[-2000:] or "no result") from None
    if "error" in result:
        raise ExternalCommandError([shown], proc.returncode, result["error"])
    if proc.returncode != 0:
        shown += f"  # died at exit (status {proc.returncode}) after its result"
    return result, shown


def _module_extra(module) -> dict:
    return {"module": module.info["key"], "dispatches": module.info["dispatches"],
            "program": module.info.get("label", ""), "dispatch_names": module.info.get("dispatch_names", [])}


def iree_python(points: list[Point], driver: str, workers: int, modules: dict, inputs: dict, refs: dict,
                repeat: int, next_block: Callable[[], int] | None = None) -> list[VariantResult]:
    """All points of one driver setup through ``iree.runtime`` in one child process, which
    times them one after the other: one block each, numbered by ``next_block``."""
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
            out.append(checked(p, r["value"], refs[p.n], r["samples_ns"], extra | {"loops": r["loops"]},
                               next_block() if next_block else None))
    return out


def iree_bench(p: Point, module, input_npy: Path, ref: float, repeat: int, min_time_s: float,
               block: int | None = None) -> VariantResult:
    """``iree-benchmark-module`` (C++ harness): result checked with ``iree-run-module`` first;
    its repetitions are one block of the run."""
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
    return VariantResult(p.name, p.params, samples, True, text, extra | {"command": cmd, "min_time_s": min_time_s},
                         [block] * len(samples) if block is not None else None)


# --- the run's steps: build, inputs, every experiment's points, the profiles -----------------------

@dataclass
class _Inputs:
    """The run's inputs: arrays, their .npy files (for the IREE tools) and float64 references."""

    arrays: dict = field(default_factory=dict)
    npy: dict = field(default_factory=dict)
    refs: dict = field(default_factory=dict)


def compile_programs(progs, target_cpu: str, outputs: dict, progress: Steps) -> tuple[dict, dict]:
    """Compile (or take from the cache) every program; a failure fails only its points.
    Returns ({(n, c, split): Compiled}, {(n, c, split): reason})."""
    modules, broken = {}, {}
    for key in progs:
        n, c, split = key
        what = f"compile N={n} c={c}" + (f" {split}" if split else "")
        progress.say(what)
        prog = program(n, c, split or "aligned")
        try:
            mod = iree_tools.compile_program(prog, iree_tools.seed_flags(target_cpu))
        except (ExternalCommandError, iree_tools.NotPrecompiled) as exc:
            broken[key] = f"compile failed: {exc}"
            progress.tick(what)
            continue
        progress.tick(what)
        outputs["programs"][program_label(key)] = mod.info
        if mod.info["dispatches"] != prog.dispatches:
            broken[key] = (f"compiled module has {mod.info['dispatches']} dispatches, the program is written "
                           f"for {prog.dispatches} ({mod.info['dispatch_names']})")
        modules[key] = mod
    return modules, broken


def program_label(key) -> str:
    n, c, split = key
    return f"n={n}/c={c}" + (f"/{split}" if split else "")


def record_broken(pts, broken: dict, ctx: RunContext, progress: Steps) -> list:
    """Record the points whose program failed to build as failed; return the others."""
    ok = []
    for p in pts:
        if p.provider in IREE_PROVIDERS and p.program_key in broken:
            ctx.record(failed(p, broken[p.program_key]))
            progress.tick(p.name)
        else:
            ok.append(p)
    return ok


def make_inputs(sizes, seed: int, tmpdir: Path) -> _Inputs:
    inputs = _Inputs()
    for n in sizes:
        x = data.make_input(n, seed)
        inputs.refs[n] = data.reference(x)
        inputs.npy[n] = tmpdir / f"x_{n}.npy"
        np.save(inputs.npy[n], x)
        inputs.arrays[n] = x
    return inputs


def measure_in_process(pts, inputs: _Inputs, params, ctx: RunContext, progress: Steps, experiment: str = "") -> None:
    for p in pts:
        if p.provider in ("torch", "torch-out", "numpy") and p.experiment == experiment:
            progress.say(p.name)
            fn = numpy_point if p.provider == "numpy" else torch_point
            ctx.record(fn(p, inputs.arrays[p.n], inputs.refs[p.n], params["repeat"], ctx.block()))
            progress.tick(p.name)


def measure_interleaved(pts, inputs: _Inputs, params, ctx: RunContext, progress: Steps) -> None:
    """The alloc and forkjoin torch points: per experiment, all its points in interleaved rounds."""
    for exp in ("alloc", "forkjoin"):
        group = [p for p in pts if p.experiment == exp]
        if group:
            progress.say(f"{exp}: {len(group)} points in {params['rounds']} interleaved rounds")
            for res in interleaved_torch(group, inputs.arrays, inputs.refs, params["rounds"], ctx.block):
                ctx.record(res)
                progress.tick(res.variant)


def measure_iree_python(pts, modules, inputs: _Inputs, repeat: int, ctx: RunContext, progress: Steps) -> None:
    """IREE through the Python runtime: one child process per driver setup."""
    groups: dict = {}
    for p in pts:
        if p.provider in ("iree-task", "iree-sync"):
            groups.setdefault((p.provider, p.w), []).append(p)
    for (provider, w), group in sorted(groups.items()):
        progress.say(f"{provider} w={w} ({len(group)} programs)")
        driver = "local-task" if provider == "iree-task" else "local-sync"
        for res in iree_python(group, driver, w, modules, inputs.npy, inputs.refs, repeat, ctx.block):
            ctx.record(res)
            progress.tick(res.variant)


def measure_iree_bench(pts, modules, inputs: _Inputs, repeat: int, ctx: RunContext, progress: Steps,
                       experiment: str = "") -> None:
    """IREE through iree-benchmark-module (C++)."""
    for p in pts:
        if p.provider == "iree-bench" and p.experiment == experiment:
            progress.say(p.name)
            ctx.record(iree_bench(p, modules[p.program_key], inputs.npy[p.n], inputs.refs[p.n], repeat,
                                  min_time_s=0.01, block=ctx.block()))
            progress.tick(p.name)


def profile(params, modules, broken, inputs: _Inputs, tmpdir: Path, outputs: dict, ctx: RunContext,
            progress: Steps) -> None:
    """Profiles of each c (and split) at n and each profile worker count: IREE's profiler and
    Tracy around iree-benchmark-module, Tracy around the Python runtime path with the Python
    zones (:mod:`.traced`), and once per worker count Tracy around torch.sum in the same zones."""
    n = params["n"]
    captures = [("ireeperf", "bench")] + [("tracy", via) for via in params["profile_via"] if via != "torch"]
    captures = [cap for cap in captures if params["profiler"] in ("both", cap[0])]
    torch_too = "torch" in params["profile_via"] and params["profiler"] in ("both", "tracy")
    for w in profile_workers(params):
        if torch_too:
            progress.say(f"profile torch.sum w={w}")
            _profile_one(params, None, inputs.npy[n], inputs.refs[n], (None, None, w), ("tracy", "torch"), tmpdir,
                         outputs, ctx)
        for c in params["chunks"]:
            for split in (params["split"] if c > 1 else [None]):
                what = f"profile c={c}{' ' + split if split else ''} w={w}"
                progress.say(what)
                if (n, c, split) not in broken:
                    for source, via in captures:
                        _profile_one(params, modules[(n, c, split)], inputs.npy[n], inputs.refs[n], (c, split, w),
                                     (source, via), tmpdir, outputs, ctx)
                progress.tick(what)


def _profile_one(params, module, input_npy: Path, ref: float, point: tuple, capture: tuple[str, str], tmpdir: Path,
                 outputs: dict, ctx: RunContext) -> None:
    """One capture of one program (or of torch.sum: ``module`` None), attached (trimmed when
    ``trace_iterations`` asks), or its failure in ``outputs["capture_errors"]``."""
    (c, split, w), (source, via), n = point, capture, params["n"]
    capdir = tmpdir / f"cap_{c}_{split}_{w}_{source}_{via}"
    capdir.mkdir()
    what = f"{source} via {via}" + (f" c={c}" if c else "") + f" w={w}"
    try:
        path, cmd = capture_profile(source, via, module.vmfb if module else None, input_npy, ref, w, capdir,
                                    params["capture_iterations"])
        trim = source == "tracy" and params["trace_iterations"] > 0
        blob = profiles.trim_tracy(path, params["trace_iterations"]) if trim else path.read_bytes()
    except (ExternalCommandError, FileNotFoundError, TraceError, PhaseError) as exc:
        outputs["capture_errors"].append(f"{what}: {exc}")
        return
    name = profiles.attachment_name(n, c, w, source, via, split, trimmed=trim)
    kind = "ireeperf-jsonl" if source == "ireeperf" else ("chrome-json" if trim else "tracy")
    ctx.attach(name, f"trace/{kind}", blob)
    outputs["captures"].append({"name": name, "source": source, "via": via, "c": c, "split": split, "w": w, "n": n,
                                "bytes": len(blob), "command": cmd,
                                "trimmed_to_iterations": params["trace_iterations"] if trim else None})


#: a Tracy capture's traced program is killed after this long: generous, for a loaded 2-core
#: machine where importing torch alone can take half a minute; a capture ends long before
CAPTURE_TIMEOUT_S = 300


def capture_profile(source: str, via: str, vmfb: Path | None, input_npy: Path, ref: float, workers: int,
                    capdir: Path, iterations: int, timeout_s: float = CAPTURE_TIMEOUT_S) -> tuple[Path, str]:
    """One profile: IREE's profiler around iree-benchmark-module ("ireeperf"), or a Tracy
    capture around iree-benchmark-module ("bench"), the iree.runtime call ("python") or
    torch.sum ("torch"), the last two in Python zones (:mod:`.traced`), their result checked.
    Returns the capture file and the command that produced it."""
    if source == "ireeperf":
        return iree_tools.capture_ireeperf(vmfb, input_npy, workers, capdir, iterations)
    if via == "bench":
        return iree_tools.capture_tracy(capdir, iree_tools.traced_benchmark(vmfb, input_npy, workers, iterations),
                                        timeout_s)
    job = {"provider": "torch" if via == "torch" else "iree-task", "workers": workers, "iterations": iterations,
           "input": str(input_npy), "connect_s": timeout_s / 2, **({"vmfb": str(vmfb)} if vmfb else {})}

    def traced(env: dict, timeout_s: float) -> str:
        result, cmd = run_traced(job, env, timeout_s)
        ok, text = data.check(result["value"], ref)
        if not ok:
            raise ExternalCommandError([cmd], 0, f"wrong result under Tracy: {text}")
        return cmd

    return iree_tools.capture_tracy(capdir, traced, timeout_s)
