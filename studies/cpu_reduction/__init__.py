"""CPU reduction: IREE's runtime overhead against PyTorch on a float32 sum (seed 000).

Question: for a 1D float32 sum of N elements on this CPU, how much of IREE's per-call time
is compute and how much is runtime machinery (VM invoke, semaphores, fences, task
scheduling, wake-up), compared with PyTorch's OpenMP two-pass reduction, and does
splitting the reduction into c chunks (two dispatches) buy parallelism worth its cost?

Measured, per (provider, N, c, split, workers w), each result checked against a float64
reference before its time counts (see ``studies/cpu_reduction/data.py`` for the exact
tolerance). The compared dimension is ``provider``:

- ``torch``: ``torch.sum(x)``; ``torch-out``: ``torch.sum(x, out=o)`` (no per-call output
  allocation); both with ``torch.set_num_threads(w)``. ``numpy``: ``np.sum`` (one thread).
- ``iree-task`` / ``iree-sync``: the compiled module called through the Python runtime
  (``iree.runtime``) on local-task with w workers / local-sync (inline, one thread), one
  child process per driver setup.
- ``iree-bench``: ``iree-benchmark-module`` (C++ harness, no Python), local-task with w
  workers; its google-benchmark repetitions are the raw samples.

Splits (``split``, for c > 1; ``kernels/iree/sum_programs.py``): ``aligned`` (the seed's
"c=8 fixed": tiles a multiple of 16, 1M = 8 x 124,992 + 64), ``even`` (ceil(N/c) chunks,
padded), ``partial-tile`` (the seed's exact 9-shard shape, a slow path in IREE 3.13).

Experiments: ``grid`` (every provider x c x w at n: overview, thread scaling), ``sizes``
(size sweep against the copy-bandwidth floor measured in the same run), ``phases``
(per-iteration phase breakdown, key timestamps, per-call allocation spans and per-thread
timelines from IREE's profiler and Tracy, at ``profile_workers``; the Python runtime's and
torch.sum's iterations in the workbench's own Tracy zones, :mod:`workbench.running.tracy`, give the
Python binding's share of each call), ``grain`` (torch at w=1
and the largest w around PyTorch's GRAIN_SIZE 32,768), ``alloc`` (torch.sum vs
torch.sum(out=) in interleaved rounds at w=1, the serial path, and at the largest w, the
two-pass path the seed measured: the per-call allocation with a CI),
``forkjoin`` (OpenMP's fork/join as torch.sum pays it at n = 32,768, interleaved over w, and
IREE's task system on a dispatch of one 16-element tile per worker, at 1 vs w workers).

Clocks: host ``perf_counter_ns`` through :mod:`workbench.running.harness` for the in-process and
Python-runtime variants (per-call ns over calibrated loops), google-benchmark's real time
for ``iree-bench``. Programs are compiled with the seed's flags for ``target_cpu`` (the
seed: ``host``) and cached in ``.workbench/cache/iree/``; a machine with only the runtime
uses modules precompiled elsewhere (``python -m studies.cpu_reduction.precompile``).
Committed 16-core results and findings: ``traces/cpu-reduction/README.md``.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

from kernels.iree.sum_programs import SPLITS, aligned_tile
from workbench.seam.study import Param, ParamError, ParamSpace, RunContext

from . import data, iree_tools, measure, plan
from .iree_tools import TARGET_CPU_RE
from .plan import AA, GRAIN_SIZE, IREE_PROVIDERS, Sweep, profile_workers
# the hooks and the seed's data (workbench.seam.study lists them)
from .analysis import NULLS, analyze  # noqa: F401 (NULLS: the declared null controls, workbench.evidence.engine)
from .claims import SEED_CLAIMS  # noqa: F401
from .report import TITLES, charts, findings, report_sections  # noqa: F401
from .seed import SEED_FIGURES  # noqa: F401

ID = "cpu-reduction"
TITLE = "CPU reduction: IREE vs PyTorch sum (runtime overhead)"
SEED = "000_a9087dd746f9e088.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "IREE issue #24011, a 1M-float sum against PyTorch"
SEED_SUMMARY = ("IREE CPU sum of 1M float32 on a 32-core Zen4: MKL 15 us vs IREE 56-61 us; the gap is "
                "runtime overhead (VM setup, scheduling, cleanup), not compute.")
RUNS_ON = "any CPU"

PROVIDERS = ("torch", "torch-out", "numpy", "iree-task", "iree-sync", "iree-bench")
EXPERIMENTS = ("grid", "sizes", "phases", "grain", "alloc", "forkjoin")
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
MAX_N = 1 << 26  # 64Mi elements (256 MiB of float32)
#: bytes of float32 copies a point can hold at once (main process, .npy, child, C++ tool, ...)
COPIES_ALIVE = 6
#: ``--precision``: the harness repeats torch, numpy and the IREE runtime children; the
#: interleaved experiments add rounds and iree-bench adds repetitions (``_cpu_reduction/measure.py``)
HONOURS_PRECISION = True
KEY_TABLE = "seed_overview"
KEY_CHART = "scaling"

#: The declared sweep: per experiment, the providers (the compared dimension) and the grid
#: axes (a parameter whose list is crossed, or fixed values; "max" = the largest worker count).
SWEEPS: dict[str, tuple[Sweep, ...]] = {
    "grid": (Sweep("providers", {"n": ("n",), "c": "chunks", "split": "split", "w": "workers"}),),
    "sizes": (Sweep("providers", {"n": "sizes", "c": "chunks", "split": "split", "w": ("max",)}),),
    "grain": (Sweep(("torch",), {"n": "grain_sizes", "w": (1, "max")}),),
    # w=1: the serial path (the output alone); the largest w: the two-pass path the seed measured
    "alloc": (Sweep(("torch", "torch-out"), {"n": "alloc_sizes", "w": (1, "max")}, interleaved=True),),
    "forkjoin": (
        # OpenMP as torch.sum pays it: the smallest parallel sum (one grain of work on one
        # thread; the others are forked and joined), 1 thread vs w, in interleaved rounds
        Sweep(("torch",), {"n": (GRAIN_SIZE,), "w": ("workers",)}, interleaved=True),
        # IREE's task system: one 16-element tile per worker (c=1: the dispatch floor)
        Sweep(("iree-bench",), {"n": ("fork_join_n",), "c": (1, "fork_join_c"), "split": ("aligned",),
                                "w": ("workers",)}),
        Sweep(("torch",), {"n": ("fork_join_n",), "w": (1,)}),
    ),
}

SPACE = ParamSpace(
    params=(
        Param("n", "int", 1_000_000, "elements summed (float32); accepts 1M, 64Mi", unit="elements",
              min=1024, max=MAX_N),
        Param("chunks", "int", [1, 2, 8], "IREE split into c chunks (1 = no split; c > 1: two dispatches)",
              min=1, max=65536, multi=True),
        Param("split", "str", ["aligned"], "how c > 1 splits: aligned (tiles a multiple of 16, remainder apart: "
              "the seed's 'c=8 fixed'), even (ceil(n/c) chunks, padded), partial-tile (the seed's 9-shard shape; "
              "IREE 3.13's slow path)", choices=SPLITS, multi=True),
        Param("workers", "int", sorted({1, CORES}), f"torch threads / IREE local-task workers (1..{CORES} here)",
              min=1, max=1024, multi=True),
        Param("providers", "str", list(PROVIDERS), "implementations to time (the compared dimension)",
              choices=PROVIDERS, multi=True),
        Param("repeat", "int", 20, "samples per variant", min=3, max=1000),
        Param("rounds", "int", 30, "interleaved rounds of the alloc and forkjoin experiments (one sample of "
              "every compared point per round)", min=3, max=1000),
        Param("sizes", "int", [16_384, 262_144, 1_000_000, 4_194_304, 16_777_216],
              "N values of the size sweep (at the largest worker count)", unit="elements", min=1024, max=MAX_N,
              multi=True),
        Param("grain_sizes", "int", [16_384, 24_576, 32_767, 32_768, 40_960, 49_152, 65_536],
              "N values of the GRAIN_SIZE experiment (torch at w=1 and the largest w)", unit="elements",
              min=1024, max=MAX_N, multi=True),
        Param("alloc_sizes", "int", [4096, 1_000_000], "N values of the allocation experiment (w=1 and the "
              "largest w; the seed's 2 us is torch's two-pass path: n >= 32,768 at many threads)",
              unit="elements", min=1024, max=MAX_N, multi=True),
        Param("experiments", "str", ["grid", "sizes", "phases", "grain", "alloc", "forkjoin"],
              "grid: every provider x c x w at n; sizes: size sweep with the bandwidth floor; phases: profiles "
              "per c at profile_workers; grain: torch around GRAIN_SIZE; alloc: torch.sum - torch.sum(out=) at "
              "w=1 and the largest w; forkjoin: OpenMP and IREE task-system fork/join at 1 vs w",
              choices=EXPERIMENTS, multi=True),
        Param("profiler", "str", "both", "profiles taken by the phases experiment (Tracy adds ~1.5 s per "
              "capture and gives the per-thread timeline)", choices=("ireeperf", "tracy", "both")),
        Param("profile_workers", "int", [0], "worker counts of the phase profiles (0 = the largest of workers)",
              min=0, max=1024, multi=True),
        Param("profile_via", "str", ["bench", "python", "torch"], "what the Tracy profiles run: "
              "iree-benchmark-module (bench), the iree.runtime call in Python zones (python), torch.sum in "
              "Python zones (torch, once per worker count)", choices=("bench", "python", "torch"), multi=True),
        Param("capture_iterations", "int", 30, "iterations per profile (iree-benchmark-module's, or the Python "
              "loop's; the first 3 are warm-up)", min=4, max=10_000),
        Param("trace_iterations", "int", 0, "0: attach raw Tracy captures; k > 0: attach them trimmed to "
              "their first 3 + k iterations as gzip'd Chrome JSON (small committed bundles)", min=0, max=1000),
        Param("target_cpu", "str", "host", "LLVM CPU the programs are compiled for (the seed: host; e.g. "
              "x86-64-v4 for a machine that only has the runtime)"),
        Param("rng_seed", "int", 0, "input generator seed", min=0, max=2**31 - 1),
    ),
    presets={
        "smoke": {"n": 16_384, "chunks": [1, 3], "split": ["aligned", "even"], "workers": [1], "repeat": 5,
                  "sizes": [4096, 16_384], "experiments": ["grid", "grain", "alloc"], "providers": list(PROVIDERS),
                  "grain_sizes": [16_384, 32_768], "alloc_sizes": [4096], "rounds": 5},
        "quick": {"n": 1_000_000, "chunks": [1, 2, 8], "workers": sorted({1, CORES}), "repeat": 10,
                  "sizes": [16_384, 1_000_000, 16_777_216], "rounds": 20,
                  "grain_sizes": [16_384, 32_767, 32_768, 65_536], "profiler": "both"},
        # the committed many-core runs (scripts/gpu/cpu_reduction.sh): everything but the profiles ...
        "many-core": {"n": 1_000_000, "chunks": [1, 2, 8, 16], "workers": [1, 2, 4, 8, 16], "repeat": 20,
                      "rounds": 40, "sizes": [16_384, 262_144, 1_000_000, 4_194_304, 16_777_216],
                      "experiments": ["grid", "sizes", "grain", "alloc", "forkjoin"]},
        # ... and the phase profiles of c=2 and the aligned c=8 at 8 and 16 workers
        "many-core-phases": {"n": 1_000_000, "chunks": [2, 8], "workers": [8, 16], "profile_workers": [8, 16],
                             "experiments": ["phases"], "providers": ["iree-bench"], "trace_iterations": 12,
                             "capture_iterations": 30, "profile_via": ["bench"]},
        # the Python side in Tracy: the iree.runtime call and torch.sum in the workbench's own zones
        "python-zones": {"n": 1_000_000, "chunks": [8], "workers": [1], "experiments": ["phases"],
                         "providers": ["iree-task", "torch"], "profiler": "tracy", "profile_via": ["python", "torch"],
                         "capture_iterations": 200},
    },
    headline=("n", "chunks", "workers", "providers", "experiments", "repeat"),
    purposes={
        "smoke": "the tests' run: N=16K, one worker, two chunkings; seconds, and nothing of the seed's N=1M",
        "quick": "the seed's N=1M at 1 and every worker, c=1, 2, 8, fewer samples",
        "many-core": "the committed many-core run: c=1-16 at 1-16 workers, every experiment but the profiles",
        "many-core-phases": "the committed profiles: c=2 and the aligned c=8 at 8 and 16 workers (IREE's tools)",
        "python-zones": "the Python side in Tracy: 200 iterations of the iree.runtime call (aligned c=8) and of "
                        "torch.sum in Python zones, one worker; about 20 s",
    },
    renamed={"seed": "rng_seed"},  # "seed" means the report a study reproduces
)


def _mem_available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def validate(params) -> None:
    n, chunks = params["n"], params["chunks"]
    for c in chunks:
        if c > n:
            raise ParamError("chunks", f"c={c} is larger than n={n}: each chunk needs at least one element "
                                       f"(allowed 1..{n})")
    for name, ws in (("workers", params["workers"]), ("profile_workers", profile_workers(params))):
        for w in ws:
            if w > CORES:
                raise ParamError(name, f"{w} workers is beyond this machine's {CORES} usable CPUs "
                                       f"(allowed 1..{CORES})")
    if not TARGET_CPU_RE.fullmatch(params["target_cpu"]):
        raise ParamError("target_cpu", f"{params['target_cpu']!r} is not an LLVM CPU name (letters, digits, "
                                       "'-', '_', '.', e.g. host, x86-64-v4, znver4)")
    sizes = params["sizes"] if "sizes" in params["experiments"] else []
    for s in [n, *sizes]:
        if max(chunks) > s:
            raise ParamError("sizes" if s != n else "chunks",
                             f"size {s} is smaller than the largest chunk count c={max(chunks)} "
                             "(every size must be >= every c)")
        if set(params["split"]) - {"even"} and max(chunks) > 1 and aligned_tile(s, max(chunks)) == 0:
            raise ParamError("split", f"split {'/'.join(params['split'])} needs tiles of at least 16 elements: "
                                      f"N={s} with c={max(chunks)} has none (use split=even, or N >= {16 * max(chunks)})")
    avail = _mem_available_bytes()
    biggest = max([n, *sizes])
    if avail is not None and biggest * 4 * COPIES_ALIVE > avail:
        name = "n" if biggest == n else "sizes"
        raise ParamError(name, f"N={biggest} needs about {biggest * 4 * COPIES_ALIVE / 2**30:.1f} GiB "
                               f"({COPIES_ALIVE} float32 copies) but only {avail / 2**30:.1f} GiB is available")


def answers_seed(params) -> bool:
    """The seed's table, scaling and claims are at N = 1M floats: a smaller N times a
    different regime (a sum under PyTorch's grain size runs on one thread)."""
    return params.get("n", 0) >= 1_000_000


def runs_on_gpu(params) -> bool:
    """A CPU study: its machine is named by its CPUs, on a GPU node too."""
    return False


def requires(params) -> str | None:
    pts = points(params)
    need = []
    if any(p.provider.startswith("torch") for p in pts) or "sizes" in params["experiments"]:
        need.append(("torch", "torch"))
    iree = bool(programs_needed(params, pts))
    if iree:
        need.append(("iree.runtime", "iree-base-runtime==3.13.0"))
    missing = [pip for mod, pip in need if importlib.util.find_spec(mod.split(".")[0]) is None
               or importlib.util.find_spec(mod) is None]
    if missing:
        return f"missing package(s): {', '.join(missing)}; install with: pip install {' '.join(missing)}"
    if iree and not iree_tools.compiler_installed():
        absent = iree_tools.not_precompiled(programs_needed(params, pts), params["target_cpu"])
        if absent:
            return (f"iree-base-compiler is not installed and {len(absent)} program(s) are not precompiled for "
                    f"target_cpu={params['target_cpu']} (e.g. {absent[0]}): pip install iree-base-compiler==3.13.0, "
                    "or compile them on another machine with python -m studies.cpu_reduction.precompile and "
                    "copy .workbench/cache/iree here")
    return None


# --- run ------------------------------------------------------------------------------------------

def points(params) -> list:
    """The measured configurations of the requested experiments (:data:`SWEEPS`, deduplicated)."""
    return plan.points(params, SWEEPS)


def sweep_size(params) -> int:
    """At most how many points :func:`points` gives (the sweep limit of ``workbench.seam.study.validate``)."""
    return plan.count(params, SWEEPS)


def programs_needed(params, pts=None) -> list[tuple[int, int, str | None]]:
    """(n, c, split) of every IREE program the run compiles: its points' and its profiles'."""
    progs = set(plan.programs(points(params) if pts is None else pts))
    if "phases" in params["experiments"] and set(params["providers"]) & set(IREE_PROVIDERS):
        progs |= {(params["n"], c, s if c > 1 else None) for c in params["chunks"] for s in params["split"]}
    return sorted(progs, key=lambda k: (k[0], k[1], k[2] or ""))


def run(params, ctx: RunContext) -> dict:
    pts = points(params)
    progs = programs_needed(params, pts)
    profiled = bool(set(progs)) and "phases" in params["experiments"]
    n_profiles = len(params["chunks"]) * len(params["split"]) * len(profile_workers(params)) if profiled else 0
    progress = ctx.steps(len(progs) + len(pts) + n_profiles + int("sizes" in params["experiments"]), unit="steps")
    # Other processes on the box skew every figure (an OpenMP barrier waits for a descheduled
    # thread): keep the load average beside the results.
    outputs: dict = {"tolerance": data.TOLERANCE_TEXT, "cores": CORES,
                     "iree_flags": list(iree_tools.seed_flags(params["target_cpu"])), "target_cpu":
                     params["target_cpu"], "programs": {}, "bandwidth": {}, "captures": [], "capture_errors": [],
                     "grain_size": GRAIN_SIZE, "loadavg_start": list(os.getloadavg())}
    if progs:
        outputs["iree_versions"] = iree_tools.versions()
    modules, broken = measure.compile_programs(progs, params["target_cpu"], outputs, progress)
    ok_pts = measure.record_broken(pts, broken, ctx, progress)
    with tempfile.TemporaryDirectory(prefix="cpu-reduction-") as tmp:
        inputs = measure.make_inputs(sorted({p.n for p in pts} | {k[0] for k in progs}), params["rng_seed"], Path(tmp))
        outputs["reference"] = {str(n): r for n, r in inputs.refs.items()}
        if "sizes" in params["experiments"]:
            progress.say("copy bandwidth")
            for w in sorted(set(params["workers"])):
                outputs["bandwidth"][str(w)] = measure.copy_bandwidth(w, repeat=max(5, params["repeat"] // 2))
            progress.tick("copy bandwidth")
        measure.measure_in_process(ok_pts, inputs, params, ctx, progress)
        measure.measure_interleaved(ok_pts, inputs, params, ctx, progress)
        measure.measure_iree_python(ok_pts, modules, inputs, params["repeat"], ctx, progress)
        measure.measure_iree_bench(ok_pts, modules, inputs, params["repeat"], ctx, progress)
        # the A/A twins last, each in a block of its own: the run's null controls
        measure.measure_in_process(ok_pts, inputs, params, ctx, progress, experiment=AA)
        measure.measure_iree_bench(ok_pts, modules, inputs, params["repeat"], ctx, progress, experiment=AA)
        if profiled:
            measure.profile(params, modules, broken, inputs, Path(tmp), outputs, ctx, progress)
    outputs["loadavg_end"] = list(os.getloadavg())
    return outputs

