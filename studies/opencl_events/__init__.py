"""OpenCL event overhead: what do event callbacks and waits cost per enqueued piece of work?

Question (seed: Yichao Yu, "OpenCL Event Overhead"): an application that enqueues many
small kernels wants to know when each finished (to push the data on). Does hanging a
callback on every event, or waiting for it on another thread, slow the stream of work down,
and by how much per buffer size?

Experiments (``experiment=``), all with kernels from ``kernels/opencl/`` checked against
NumPy before and after their timing:

- ``callbacks``: R runs of a read-scale-write kernel over a buffer of ``size_bytes``; each
  run's event gets callbacks on a combination of CL_SUBMITTED, CL_RUNNING, CL_COMPLETE,
  labelled as the seed does, e.g. ``(0,0,1)`` = CL_COMPLETE only;
- ``wait``: the same work, with ``clWaitForEvents`` on each event in a loop on another
  thread (``wait``), beside ``(0,0,0)`` and ``(0,0,1)``;
- ``dependency``: logical workers as chains (7 = 1 + 2 + 2*2, 28 = 1 + 3 + 3*2 + 3*2*3), a
  final kernel into a host-pointer buffer and a map of it, with or without unmap, a wait
  thread and a CL_COMPLETE callback on the map event (``unmap,wait,cb`` labels);
- ``cuda``: the same question on CUDA through CuPy: ``cudaLaunchHostFunc`` vs event
  synchronize vs event polling, beside no per-launch mechanism.

Clock: host ``time.perf_counter_ns`` around R runs, from the first enqueue until the queue
finished and every callback or wait of the batch returned; one sample = total / R, as in
the seed (R = 1024 there). Conditions are interleaved round by round after one warm-up
round. Which callback is registered (``callback_impl``) matters a great deal in Python:
``native`` (a C counter, the seed's setting), ``ctypes`` (a Python function on the
runtime's thread) or ``pyopencl`` (``Event.set_callback``, which starts a thread per
callback); see ``studies/opencl_events/clrt.py``.
"""

from __future__ import annotations

import importlib.util

import pandas as pd

from workbench.record import RunRecord
from workbench.record import VariantResult
from workbench.study import Param, ParamError, ParamSpace, RunContext, Steps, StudyUnavailable

from studies.opencl_events import analysis, clrt
from studies.opencl_events.analysis import MIN_REPS, size_label
from studies.opencl_events.claims import SEED_CLAIMS  # noqa: F401  (the seed's findings, checked live)
from studies.opencl_events.measure import (DEP_CONDITIONS, TREES, DependencyRuns, KernelRuns, combo_label,
                                                 dep_label, sweep_point)

ID = "opencl-events"
TITLE = "OpenCL event overhead: callbacks, waits and dependencies"
SEED = "001_5ca36159b3daf8a4.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "Yichao Yu's wiki page OpenCL Event Overhead"
SEED_SUMMARY = ("Event callbacks cost up to 3x per small kernel on an AMD GPU and ~10 us on Intel; waiting on "
                "another thread removes most of it; with chains of work and a final map the overhead shrinks.")

EXPERIMENTS = ("callbacks", "wait", "dependency", "cuda")
ALL_COMBOS = tuple(f"{s}{r}{c}" for s in "01" for r in "01" for c in "01")
DEFAULT_SIZES = [4096 << k for k in range(14)]  # 4 KiB .. 32 MiB, the seed's range
#: the seed-shaped table (each provider's extra time per run over the baseline, per point) and
#: the chart (the same with CIs and the seed's stated figures) a page leads with
KEY_TABLE = "key"
KEY_CHART = "overhead"

SPACE = ParamSpace(
    params=(
        Param("experiment", "str", "callbacks", "which of the seed's experiments (cuda: the same question on CUDA)",
              choices=EXPERIMENTS),
        Param("sizes", "int", DEFAULT_SIZES, "buffer sizes (per worker in the dependency experiment)", unit="bytes",
              min=16, max=1 << 30, multi=True),
        Param("reps", "int", 1024, "runs per measurement; a sample is their total time / reps (seed: 1024)",
              min=1, max=1 << 20),
        Param("measurements", "int", 20, "measurements per point (seed: 150-200)", min=1, max=10_000),
        Param("platform", "str", "", "OpenCL platform: index or name substring (pocl, nvidia); empty = the first"),
        Param("device", "int", 0, "device index within the platform (CUDA device for experiment=cuda)", min=0,
              max=63),
        Param("combos", "str", list(ALL_COMBOS), "callback combinations (CL_SUBMITTED, CL_RUNNING, CL_COMPLETE) "
              "as bits, e.g. 001 = CL_COMPLETE only (experiment=callbacks)", choices=ALL_COMBOS, multi=True),
        Param("workers", "int", [7, 28], "logical workers (experiment=dependency)", choices=tuple(TREES), multi=True),
        Param("callback_impl", "str", "native", "native: C counter (the seed's case); ctypes: Python function; "
              "pyopencl: Event.set_callback (a thread per callback)", choices=clrt.CALLBACK_IMPLS),
        Param("host", "str", "python", "dependency experiment: who enqueues the runs: python (pyopencl; its wait "
              "thread shares the GIL) or native (a C loop, as the seed's C++ test; needs callback_impl=native)",
              choices=("python", "native")),
        Param("target_ms", "float", 0.0, "aim each measurement at about this many ms: a short pilot of the "
              "baseline sets the runs per measurement at each point, at most reps and at least 8 (0: always reps)",
              unit="ms", min=0.0, max=60_000.0),
    ),
    presets={
        "smoke": {"experiment": "callbacks", "sizes": [4096, 65536], "reps": 16, "measurements": 5,
                  "combos": ["000", "001", "111"], "callback_impl": "ctypes"},
        "quick": {"sizes": [4096, 65536, 1048576], "reps": 64, "measurements": 5},
    },
    headline=("experiment", "sizes", "reps", "measurements", "platform", "combos"),
    purposes={"smoke": "the tests' run: 2 sizes, 3 callback combinations, a Python callback; seconds",
              "quick": "3 sizes (4 KiB-1 MiB), every callback combination, fewer runs"},
)

SEED_FIGURES = {
    "source": "seed 001_5ca36159b3daf8a4.txt: Yichao Yu, 'OpenCL Event Overhead' (wiki page, Jan 2021); "
              "its results are figures only, so these are its stated findings, not read-off numbers",
    "machine": "Intel UHD 530, Intel UHD 640, AMD Radeon RX 5500 XT (OpenCL, C++ test programs)",
    "tables": {
        "findings": [
            {"experiment": "callbacks", "device": "AMD Radeon RX 5500 XT",
             "finding": "callbacks ~3x the time per run for small buffers; significant up to 2-4 MiB; more spread"},
            {"experiment": "callbacks", "device": "Intel UHD 530 / 640",
             "finding": "absolute overhead larger than AMD's at small sizes, about 10 us; UHD 640 negative from 512 KiB"},
            {"experiment": "wait", "device": "AMD Radeon RX 5500 XT",
             "finding": "clWaitForEvents on another thread: overhead almost completely gone (negligible)"},
            {"experiment": "wait", "device": "Intel UHD 530 / 640",
             "finding": "waiting: about the same overhead as the callback, maybe slightly lower"},
            {"experiment": "dependency", "device": "AMD Radeon RX 5500 XT",
             "finding": "callback on the map event still costly with 7 workers; rises between 4 and 15 MiB total, "
                        "saturates near 0.4 ms; waiting costs 2-3 us; unmap ~0"},
            {"experiment": "dependency", "device": "Intel UHD 530 / 640",
             "finding": "no visible callback/wait overhead (~10 us hidden); unmap gives outliers (530) or a fixed "
                        "relative overhead (640)"},
        ],
    },
    "notes": ["The seed plots time per run (mean line, every measurement a dot) against buffer size, "
              "4 KiB to 32 MiB, 1024 runs per measurement, 150-200 measurements per point."],
}


# --- parameters and requirements --------------------------------------------------------------

def validate(params) -> None:
    for s in params["sizes"]:
        if s % 4:
            raise ParamError("sizes", f"{s} is not a multiple of 4 bytes (the buffers hold float32)")
    if params["host"] == "native" and params["callback_impl"] != "native":
        raise ParamError("host", "the native loop registers the native C callback: set callback_impl=native "
                                 "(or host=python)")
    if params["experiment"] == "dependency":
        big = max(params["sizes"]) * max(params["workers"])
        if big > 4 << 30:
            raise ParamError("sizes", f"{max(params['sizes'])} bytes x {max(params['workers'])} workers = {big} bytes "
                                      "of worker buffers; keep it at most 4 GiB")


def requires(params) -> str | None:
    if params["experiment"] == "cuda":
        from studies.opencl_events import cuda

        return cuda.unavailable(params["device"])
    if importlib.util.find_spec("pyopencl") is None:
        return "pyopencl is not installed: pip install 'pyopencl[pocl]' (PoCL gives a CPU OpenCL platform)"
    plats = clrt.platforms()
    if not plats:
        return f"no OpenCL platform here: {clrt.INSTALL_HINT}. Stored results (traces/opencl-events) still show."
    try:
        plat = clrt.pick_platform(plats, params["platform"])
    except LookupError as exc:
        return str(exc)
    if params["device"] >= len(plat["devices"]):
        return f"platform {plat['name']} has {len(plat['devices'])} device(s); device={params['device']} does not exist"
    if plat.get("build_error"):
        return (f"OpenCL platform {plat['name']} ({plat['version']}) cannot compile a kernel here: "
                f"{plat['build_error']}; {clrt.BUILD_HINT}")
    if params["callback_impl"] == "native":
        return clrt.native_unavailable()
    return None


# --- run --------------------------------------------------------------------------------------

def _measure_point(ctx: RunContext, runs, conditions: list, label, point: dict, params, refused,
                   progress: Steps, where: str) -> None:
    """Check the kernels, time the conditions the platform supports (interleaved rounds), check
    again, and record every condition under its ``provider`` name; a refused or unchecked one
    keeps its reason and no samples. One step of ``progress`` per point.

    ``runs`` is a KernelRuns, DependencyRuns or CudaRuns; ``label(c)`` names a condition as the
    seed does; ``refused(c)`` is the platform's refusal of a callback that ``c`` needs, or None.
    """
    def record(c, samples, ok, check, extra=None):
        name = _vname(point.get("workers"), label(c), point["size_bytes"])
        ctx.record(VariantResult(name, {**point, "provider": label(c)}, samples, ok, check, extra or {}))

    reps = params["reps"]
    progress.say(f"{where}: checking the kernels")
    runs.prime()
    ok, check = runs.verify()
    live = []
    for c in conditions:
        why = refused(c) or (None if ok else f"kernel check failed before timing: {check}")
        if why:
            record(c, [], False, why)
        else:
            live.append(c)
    if not live:
        progress.tick(f"{where}: nothing to time")
        return
    if params["target_ms"]:
        reps = reps_for(runs.time(live[0], min(reps, PILOT_REPS)).ns_per_run, params["target_ms"], reps)
    rounds = params["measurements"] + 1
    res = sweep_point(runs, live, reps, params["measurements"],
                      lambda rnd: progress.say(f"{where}: round {rnd + 1} of {rounds}"))
    ok_after, check_after = runs.verify()
    for c in live:
        r = res[c]
        good = ok_after and not r.problems
        msg = (f"before and after timing: {check_after}" if good else
               "; ".join(sorted(set(r.problems))) or f"kernel check failed after timing: {check_after}")
        record(c, r.samples_ns, good, msg, {"reps": reps})
    progress.tick(f"{where}: done")


PILOT_REPS = 8  # runs of the baseline that set the runs per measurement under target_ms


def reps_for(ns_per_run: float, target_ms: float, reps: int) -> int:
    """Runs per measurement that take about ``target_ms``: at most ``reps``, at least MIN_REPS."""
    return int(min(reps, max(MIN_REPS, round(target_ms * 1e6 / max(ns_per_run, 1.0)))))


def run(params, ctx: RunContext) -> dict:
    if params["experiment"] == "cuda":
        return _run_cuda(params, ctx)
    try:
        target = clrt.open_target(params["platform"], params["device"])
    except LookupError as exc:
        raise StudyUnavailable(str(exc)) from None
    cbs = clrt.Callbacks(params["callback_impl"])
    support = clrt.probe_exec_types(target, cbs)
    base = {"platform": target.platform_name, "device": target.device_name, "callback_impl": params["callback_impl"]}
    exp = params["experiment"]
    if exp == "callbacks":
        conditions = list(params["combos"])
    elif exp == "wait":
        conditions = ["000", "001", "wait"]
    else:
        conditions = DEP_CONDITIONS
    worker_list = params["workers"] if exp == "dependency" else [None]
    progress = ctx.steps(len(worker_list) * len(params["sizes"]))
    queue_modes = set()
    unmaps_refused = 0

    def unsupported(cond) -> str | None:
        """The platform's refusal of a callback this condition needs, or None."""
        if isinstance(cond, tuple):  # dependency (unmap, wait, cb): cb is a CL_COMPLETE callback
            need = [clrt.CL_COMPLETE] if cond[2] else []
        else:  # "SRC" bits, or "wait"
            need = [t for bit, (_n, t) in zip(cond, clrt.EXEC_TYPES) if bit == "1"]
        bad = [(name, support[t]) for name, t in clrt.EXEC_TYPES if t in need and support[t]]
        return "; ".join(f"{target.platform_name} does not support a callback on {name}: {why}" for name, why in bad) or None

    def label(c) -> str:
        if isinstance(c, tuple):
            return dep_label(*c)
        return "wait" if c == "wait" else combo_label(c)

    for workers in worker_list:
        for size in params["sizes"]:
            where = (f"{workers} workers, " if workers else "") + size_label(size)
            runs = (DependencyRuns(target, size, workers, cbs, params["host"]) if workers
                    else KernelRuns(target, size, cbs))
            if workers:
                queue_modes.add("out-of-order" if runs.out_of_order else "in-order")
            point = {"experiment": exp, **({"workers": workers} if workers else {}), "size_bytes": size, **base}
            try:
                _measure_point(ctx, runs, conditions, label, point, params, unsupported, progress, where)
            finally:
                if workers:
                    unmaps_refused += runs.unmaps_refused
                runs.close()
    return {
        "platform": target.platform_name, "device": target.device_name,
        "platform_version": target.device.platform.version, "device_version": target.device.version,
        "driver_version": target.device.driver_version, "callback_impl": params["callback_impl"],
        **({"host": params["host"]} if exp == "dependency" else {}),
        "callback_support": {name: support[t] or "supported" for name, t in clrt.EXEC_TYPES},
        **({"queue": sorted(queue_modes), "unmaps_refused": unmaps_refused} if queue_modes else {}),
        "platforms_here": clrt.platforms(),
    }


def _vname(workers, label: str, size: int) -> str:
    return (f"w{workers} " if workers else "") + f"{label} {size}B"


def _run_cuda(params, ctx: RunContext) -> dict:
    import cupy

    from studies.opencl_events import cuda

    name = cuda.device_name(params["device"])
    progress = ctx.steps(len(params["sizes"]))
    for size in params["sizes"]:
        runs = cuda.CudaRuns(size, params["device"])
        point = {"experiment": "cuda", "size_bytes": size, "platform": "CUDA (CuPy)", "device": name,
                 "callback_impl": "cupy"}
        try:
            _measure_point(ctx, runs, list(cuda.CONDITIONS), str, point, params, lambda c: None, progress,
                           size_label(size))
        finally:
            runs.close()
    return {"platform": "CUDA (CuPy)", "device": name, "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "cuda_driver": cupy.cuda.runtime.driverGetVersion()}


# --- analysis, charts, report (studies/opencl_events/analysis.py, report.py) -------------------

def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    return analysis.analyze(rec)


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    from studies.opencl_events import report

    return report.charts(tbls)


def verdict(tbls: dict[str, pd.DataFrame]) -> str:
    from studies.opencl_events import report

    return report.verdict_text(tbls)


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    from studies.opencl_events import report

    return report.sections(tbls)
