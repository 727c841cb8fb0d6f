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

from workbench.seam.study import Param, ParamError, ParamSpace, RunContext, StudyUnavailable

from . import clrt, cuda
from .analysis import BASELINES, size_label
from .measure import (DEP_CONDITIONS, TREES, DependencyRuns, KernelRuns, combo_label, dep_label, measure_point,
                      measure_twin, variant_name)
# the hooks and the seed's data (workbench.seam.study lists them)
from .analysis import NULLS, analyze  # noqa: F401 (NULLS: the declared null controls, workbench.evidence.engine)
from .claims import SEED_CLAIMS  # noqa: F401
from .report import TITLES, charts, findings, report_sections  # noqa: F401
from .seed import SEED_FIGURES  # noqa: F401

ID = "opencl-events"
TITLE = "OpenCL event overhead: callbacks, waits and dependencies"
SEED = "001_5ca36159b3daf8a4.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "Yichao Yu's wiki page OpenCL Event Overhead"
SEED_SUMMARY = ("Event callbacks cost up to 3x per small kernel on an AMD GPU and ~10 us on Intel; waiting on "
                "another thread removes most of it; with chains of work and a final map the overhead shrinks.")
RUNS_ON = "PoCL on any CPU; NVIDIA OpenCL, CUDA"

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

    def open_runs(workers, size):
        return DependencyRuns(target, size, workers, cbs, params["host"]) if workers else KernelRuns(target, size, cbs)

    def point_of(workers, size):
        return {"experiment": exp, **({"workers": workers} if workers else {}), "size_bytes": size, **base}

    for workers in worker_list:
        for size in params["sizes"]:
            where = (f"{workers} workers, " if workers else "") + size_label(size)
            runs = open_runs(workers, size)
            if workers:
                queue_modes.add("out-of-order" if runs.out_of_order else "in-order")
            try:
                measure_point(ctx, runs, conditions, label, point_of(workers, size), params, unsupported, progress,
                              where)
            finally:
                if workers:
                    unmaps_refused += runs.unmaps_refused
                runs.close()
    baseline = next((c for c in conditions if label(c) == BASELINES[exp]), None)
    # the A/A null controls: the first and the last point's baselines again, last (two, so each
    # is judged against the drift the other shows)
    ends = dict.fromkeys([(worker_list[0], params["sizes"][0]), (worker_list[-1], params["sizes"][-1])])
    for workers, size in ends if baseline is not None and not unsupported(baseline) else ():
        runs = open_runs(workers, size)
        try:
            measure_twin(ctx, runs, baseline, variant_name(workers, BASELINES[exp], size), point_of(workers, size),
                         params)
        finally:
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


def _run_cuda(params, ctx: RunContext) -> dict:
    import cupy

    name = cuda.device_name(params["device"])
    progress = ctx.steps(len(params["sizes"]))

    def point_of(size):
        return {"experiment": "cuda", "size_bytes": size, "platform": "CUDA (CuPy)", "device": name,
                "callback_impl": "cupy"}

    for size in params["sizes"]:
        runs = cuda.CudaRuns(size, params["device"])
        try:
            measure_point(ctx, runs, list(cuda.CONDITIONS), str, point_of(size), params, lambda c: None, progress,
                          size_label(size))
        finally:
            runs.close()
    for size in dict.fromkeys([params["sizes"][0], params["sizes"][-1]]):  # the A/A null controls, last
        runs = cuda.CudaRuns(size, params["device"])
        try:
            measure_twin(ctx, runs, BASELINES["cuda"], variant_name(None, BASELINES["cuda"], size), point_of(size),
                         params)
        finally:
            runs.close()
    return {"platform": "CUDA (CuPy)", "device": name, "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "cuda_driver": cupy.cuda.runtime.driverGetVersion()}

