"""Launch cache: where kernel-launch time goes when every launch needs a big scratch block.

Question (seed: a GCC review of libgomp's nvptx plugin caching the OpenMP soft-stack block
between kernel launches): with T host threads each launching small kernels that need a
scratch block of S bytes (50 MB in the seed), how much do allocating and freeing the block
per launch cost in real, user and sys time, and which caching policy wins: one cached block
behind a lock (the patch) or a pool of up to k blocks (the reviewer's proposal)? And what
does the synchronisation after each launch (the patch's second change) cost?

Targets:
- ``cpu``: a C program (kernels/c/launch_cache.c, built at run time with the system C
  compiler) runs T pthreads; the scratch block comes from glibc malloc, which serves blocks
  over its mmap threshold by mmap/munmap, so every launch faults its touched pages in anew.
  One fresh process per phase. Policies: per_call, locked_cache, size_limit, pool; each under
  a pinned mmap threshold (``mallopt(M_MMAP_THRESHOLD, 128 KiB)``) and glibc's dynamic default.
- ``gpu``: CuPy, T Python threads with a stream each, a RawKernel that uses the block, run by
  ``blocks`` thread blocks (0: enough to fill the GPU, so kernels run one at a time as the
  seed's OpenMP kernels did). Policies: per_call (raw cudaMalloc/cudaFree), locked_cache,
  size_limit, pool, framework (CuPy's caching allocator), graph (CUDA-graph replay, the
  floor); each with and without a stream synchronisation after every launch.

``size_limit`` is the patch as committed (its ChangeLog): the locked cache, plus a limit
(``cache_limit``, libgomp's SOFTSTACK_CACHE_LIMIT of 128 MiB) on the block kept while the
application allocates other memory: before each such allocation a cached block over the limit
is freed, and an allocation that runs out of memory frees the cached block whatever its size
and is retried once. The application's allocations are ``data_bytes`` per launch (the
kernel's mapped data; 0: none, as in the seed's timings); ``oom_every`` injects an
out-of-memory into every N-th of them, to exercise the retry (the other policies then cannot
run the launch, and the variant fails saying so).

Measures, per phase (all threads, all launches): real time (monotonic clock), user and sys
time and minor/major page faults and context switches (getrusage deltas, whole process),
peak scratch held (the policy's own count; peak RSS on the CPU, device memory in use on the
GPU), and every launch's latency (host monotonic clock, from asking for the block to giving it
back), split into its parts: acquire / kernel / release on the CPU, acquire / launch / sync /
release on the GPU (where the time goes). Every launch's checksum is checked against a closed
form before its time counts. A Chrome-trace timeline of the first launches per thread is
attached to each run.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from workbench.running import cbuild
from workbench.data.record import VariantResult
from workbench.seam.study import Param, ParamError, ParamSpace, RunContext

from . import cpu, gpu
from .measure import SOFTSTACK_CACHE_LIMIT, OutOfMemory, check_checksums, trace_events, variant_result
# the hooks and the seed's data (workbench.seam.study lists them)
from .analysis import NULLS, analyze  # noqa: F401 (NULLS: the declared null controls, workbench.evidence.engine)
from .claims import SEED_CLAIMS  # noqa: F401
from .report import README_BLOCKS, TITLES, charts, findings, report_sections  # noqa: F401
from .seed import SEED_FIGURES  # noqa: F401

ID = "launch-cache"
TITLE = "Launch cache: per-launch scratch allocation vs a locked cache vs a pool"
SEED = "003_dccaa0ad43ebb428.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "the GCC review of caching nvptx's OpenMP soft-stack block"
SEED_SUMMARY = ("GCC review of caching libgomp's nvptx soft-stack block between OpenMP kernel launches: "
                "8 host threads, `time` before/after, lock vs pool of 3.")
RUNS_ON = "any CPU (C); CuPy on NVIDIA GPUs"

CPU_POLICIES = ("per_call", "locked_cache", "size_limit", "pool")
GPU_POLICIES = ("per_call", "locked_cache", "size_limit", "pool", "framework", "graph")
#: The declared sweep: the compared dimension ``provider`` (the caching policy, from ``policies``)
#: crossed with one grid axis per target: glibc's mmap threshold on the CPU, a stream
#: synchronisation after every launch on the GPU (the patch's dropped second change).
SWEEP_AXIS = {"cpu": "malloc", "gpu": "sync"}
#: the seed-shaped table (real/user/sys of each policy and its ratio to per_call) and the chart
#: (those ratios with their CIs beside the seed's patch/baseline ratios) a page leads with
KEY_TABLE = "key"
KEY_CHART = "vs_per_call"
#: the committed run a page without a run of its own opens on: every policy, sync and async
HEADLINE_RUN = "gpu-16384-launches"

SPACE = ParamSpace(
    params=(
        Param("target", "str", "cpu", "where the launches run", choices=("cpu", "gpu")),
        Param("policies", "str", ["all"], "how a launch gets its scratch block ('all': every policy of the target)",
              choices=("all",) + GPU_POLICIES, multi=True),
        Param("threads", "int", 8, "host threads launching (the seed: 8)", min=1, max=256),
        Param("launches", "int", 16384, "total launches, split evenly over the threads (the seed counts totals)",
              min=1, max=1 << 21),
        Param("scratch_bytes", "int", 50_000_000, "scratch block per launch (the seed's soft stacks: ~50 MB)",
              unit="B", min=4096, max=1 << 34),
        Param("k", "int", 3, "pool size: blocks cached at most (the review: 3)", min=1, max=64),
        Param("touch_pages", "int", 256, "pages of the block the kernel writes one 64-byte line in, spread evenly",
              min=1, max=4096),
        Param("passes", "int", 1, "times the kernel re-reads its lines: its length (the seed's kernels ran long)",
              min=1, max=10_000_000),
        Param("blocks", "int", 1, "GPU: thread blocks per kernel, each doing the whole kernel (0: enough to fill "
              "the GPU, 8 per multiprocessor, so kernels run one at a time as the seed's did)", min=0, max=1 << 16),
        Param("cache_limit", "int", SOFTSTACK_CACHE_LIMIT, "size_limit: the largest block kept cached while the "
              "application allocates other memory (the patch's SOFTSTACK_CACHE_LIMIT: 128 MiB)", unit="B", min=0,
              max=1 << 40),
        Param("data_bytes", "int", 0, "application data allocated before and freed after every launch (the "
              "kernel's mapped arguments; where size_limit frees a block over the limit); 0: none", unit="B",
              min=0, max=1 << 34),
        Param("oom_every", "int", 0, "fault injection: every N-th data allocation fails as out of memory "
              "(size_limit frees its block and retries; the others cannot run the launch); 0: never",
              min=0, max=1 << 30),
        Param("sync", "bool", [True, False], "GPU: synchronise the stream after every launch", multi=True),
        Param("malloc", "str", ["pinned", "dynamic"],
              "CPU: glibc mmap threshold pinned at 128 KiB, or glibc's dynamic default", choices=("pinned", "dynamic"),
              multi=True),
        Param("repeat", "int", 5, "phases per variant, interleaved (the seed ran 5; a ratio of phase times needs "
              "at least 5 for a CI)", min=1, max=50),
        Param("max_samples", "int", 5_000, "per-launch latencies kept per variant (evenly subsampled beyond)",
              min=100, max=2_000_000),
        Param("trace_launches", "int", 100, "launches per thread drawn in the timeline trace (0: none)",
              min=0, max=2000),
        Param("rng_seed", "int", 3, "random seed of the kernels' inputs", min=0, max=2**31 - 1),
    ),
    presets={
        "smoke": {"threads": 2, "launches": 200, "scratch_bytes": 4 << 20, "touch_pages": 64, "repeat": 1,
                  "trace_launches": 20},
        "quick": {"launches": 4096, "repeat": 5},
    },
    headline=("target", "policies", "threads", "launches", "scratch_bytes", "repeat"),
    gpu_only=("blocks", "sync"),
    purposes={"smoke": "the tests' run: 2 threads, 200 launches of a 4 MiB block; seconds",
              "quick": "the seed's 8 threads and 50 MB blocks, 4,096 launches"},
    renamed={"seed": "rng_seed"},  # "seed" means the report a study reproduces
)

def runs_on_gpu(params) -> bool:
    """Launches on the GPU only with target=gpu; a CPU run is named by its CPUs."""
    return params.get("target") == "gpu"


def requires(params) -> str | None:
    if params["target"] == "gpu":
        return gpu.available()
    if not sys.platform.startswith("linux"):
        return "the CPU variant needs Linux (glibc malloc, getrusage, /proc/self); run it on a Linux machine"
    if cbuild.compiler() is None:
        return "the CPU variant compiles kernels/c/launch_cache.c at run time: install a C compiler " \
               "(apt-get install gcc) or point CC at one"
    return None


def policies_of(params) -> list[str]:
    """The policies to run, in the study's order ('all' expands to every one of the target)."""
    allowed = CPU_POLICIES if params["target"] == "cpu" else GPU_POLICIES
    asked = allowed if "all" in params["policies"] else params["policies"]
    return [p for p in allowed if p in asked]


def validate(params) -> None:
    if params["target"] == "cpu":
        gpu_only = sorted(set(params["policies"]) - set(CPU_POLICIES) - {"all"})
        if gpu_only:
            raise ParamError("policies", f"{', '.join(gpu_only)} run on the GPU only; the CPU target has "
                                         f"{', '.join(CPU_POLICIES)}")
    if params["launches"] < params["threads"]:
        raise ParamError("launches", f"{params['launches']} is fewer than threads={params['threads']}: "
                                     "every thread needs at least one launch")
    if params["target"] == "cpu" and params["blocks"] != 1:
        raise ParamError("blocks", f"blocks={params['blocks']}: thread blocks are a GPU setting; the CPU target "
                                   "runs each kernel on its host thread (leave blocks=1)")
    if params["oom_every"] and not params["data_bytes"]:
        raise ParamError("oom_every", "the fault injection fails data allocations: set data_bytes > 0 too")
    if params["scratch_bytes"] < 4096 * params["touch_pages"]:
        raise ParamError("scratch_bytes", f"{params['scratch_bytes']} B is under touch_pages x 4096 = "
                                          f"{4096 * params['touch_pages']} B: the kernel touches one line per page")


def _variants(params) -> list[tuple[str, dict]]:
    """(name, params) of every variant: each provider (policy) x each value of the target's
    sweep axis (:data:`SWEEP_AXIS`)."""
    base = {"target": params["target"], "threads": params["threads"], "launches": params["launches"],
            "scratch_bytes": params["scratch_bytes"]}
    axis = SWEEP_AXIS[params["target"]]
    out = []
    for policy in policies_of(params):
        label = f"pool{params['k']}" if policy == "pool" else policy
        extra = {"k": params["k"]} if policy == "pool" else (
            {"cache_limit": params["cache_limit"]} if policy == "size_limit" else {})
        for value in params[axis]:
            mode = value if axis == "malloc" else ("sync" if value else "async")
            out.append((f"{label}/{mode}", {**base, "provider": policy, axis: value, **extra}))
    # the A/A null controls: per_call again in every round, a process of its own (its phases
    # against per_call's are the run's drift between blocks)
    out += [(f"aa:{name}", {**p, "twin_of": name}) for name, p in list(out) if p["provider"] == "per_call"]
    return out


def run(params, ctx: RunContext) -> dict:
    target = params["target"]
    variants = _variants(params)
    progress = ctx.steps(len(variants) * params["repeat"], unit="phases")
    rng = np.random.default_rng(params["rng_seed"])
    outputs: dict = {"target": target, "cpu_count": os.cpu_count()}
    if target == "cpu":
        progress.say("compiling kernels/c/launch_cache.c")
        exe = cpu.build()
        outputs["compiler"] = cbuild.compiler_version(cbuild.compiler())

        def phase_of(vparams, salt):
            return cpu.run_phase(exe, vparams["provider"], params["threads"], params["launches"],
                                 params["scratch_bytes"], params["k"], params["touch_pages"], params["passes"],
                                 vparams["malloc"], salt, limit=params["cache_limit"],
                                 data_bytes=params["data_bytes"], oom_every=params["oom_every"])
    else:
        outputs.update(gpu.device_text())
        outputs["blocks"] = gpu.resolve_blocks(params["blocks"])

        def phase_of(vparams, salt, launches=params["launches"], oom_every=params["oom_every"]):
            return gpu.run_phase(vparams["provider"], params["threads"], launches, params["scratch_bytes"],
                                 params["k"], params["touch_pages"], params["passes"], vparams["sync"], salt,
                                 blocks=params["blocks"], limit=params["cache_limit"],
                                 data_bytes=params["data_bytes"], oom_every=oom_every)

        # Warm-up: load the module, create the context's streams and events once, off the clock.
        for name, vparams in variants:
            progress.say(f"warm-up {name}")
            phase_of(vparams, 1, launches=2 * params["threads"], oom_every=0)

    acc = {name: {"lat": [], "seg": [], "reps": [], "fails": [], "blocks": []} for name, _ in variants}
    blocks = outputs.get("blocks", 1)
    trace: list[dict] = []
    out_of_memory: set[str] = set()
    # Repeats interleave the variants so a drift of the machine hits them all alike (and phase i
    # of two variants pairs up in the analysis).
    for rep in range(params["repeat"]):
        for vi, (name, vparams) in enumerate(variants):
            if name in out_of_memory:
                progress.tick(f"{name}: out of memory, skipped")
                continue
            progress.say(f"{name}, phase {rep + 1}/{params['repeat']}")
            salt = int(rng.integers(1, 2**62))
            try:
                phase = phase_of(vparams, salt)
            except OutOfMemory as exc:
                # The policy cannot run these launches in this memory: a failed variant with the
                # reason and no samples (replacing the row of its earlier phases, if any).
                out_of_memory.add(name)
                ctx.update(VariantResult(name, vparams, [], False, f"phase {rep + 1}: {exc}", {}))
                progress.tick(f"{name}: out of memory")
                continue
            ok, msg = check_checksums(phase.checksum, salt, params["touch_pages"], params["passes"], blocks)
            if ok and phase.extra.get("seq_ok") is False:
                ok, msg = False, "the kernels' launch counters do not match the launches made"
            a = acc[name]
            a["blocks"].append(ctx.block())
            a["lat"].append(phase.lat_ns)
            a["seg"].append(phase.segments_ns)
            a["reps"].append(phase.counters())
            if not ok:
                a["fails"].append(f"phase {rep + 1}: {msg}")
            a["check"] = msg
            if rep == params["repeat"] - 1 and params["trace_launches"]:
                trace += trace_events(name, vi, phase, params["trace_launches"])
            # Stored after every phase (replacing the variant's earlier row): an interrupt keeps
            # each phase that finished, not only the variants whose last phase did.
            ctx.update(variant_result(name, vparams, a, params))
            progress.tick(f"{name}, phase {rep + 1}/{params['repeat']}")
    if trace:
        doc = {"traceEvents": trace, "displayTimeUnit": "ns",
               "otherData": {"study": ID, "note": "host-side span of each launch: acquire block, launch, "
                                                  "(sync), release; last phase of each variant"}}
        ctx.attach("timeline.json", "trace/chrome-json", json.dumps(doc).encode())
    return outputs

