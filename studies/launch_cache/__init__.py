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
import pandas as pd

from workbench import cbuild
from workbench.record import RunRecord
from workbench.record import VariantResult
from workbench.study import Param, ParamError, ParamSpace, RunContext

from studies.launch_cache import analysis
from studies.launch_cache.measure import SOFTSTACK_CACHE_LIMIT, OutOfMemory
from studies.launch_cache.analysis import fmt_time, parse_time  # noqa: F401  (the seed's `time` figures)
from studies.launch_cache.claims import SEED_CLAIMS  # noqa: F401  (the seed's findings, checked live)

ID = "launch-cache"
TITLE = "Launch cache: per-launch scratch allocation vs a locked cache vs a pool"
SEED = "003_dccaa0ad43ebb428.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "the GCC review of caching nvptx's OpenMP soft-stack block"
SEED_SUMMARY = ("GCC review of caching libgomp's nvptx soft-stack block between OpenMP kernel launches: "
                "8 host threads, `time` before/after, lock vs pool of 3.")

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

# The seed's `time` output, as printed (5 runs per build; 8 host threads in both configurations).
_SEED_RUNS = {
    (256, "baseline"): [("3m55.375s", "7m14.192s", "0m30.148s"), ("3m54.487s", "7m6.775s", "0m34.678s"),
                        ("3m54.633s", "7m20.381s", "0m30.620s"), ("3m54.992s", "7m12.464s", "0m29.610s"),
                        ("3m55.471s", "7m14.342s", "0m29.815s")],
    (256, "patch"): [("3m53.404s", "3m39.869s", "0m16.149s"), ("3m54.713s", "3m41.018s", "0m16.129s"),
                     ("3m55.242s", "3m55.148s", "0m17.130s"), ("3m55.374s", "3m40.411s", "0m15.818s"),
                     ("3m55.189s", "3m40.144s", "0m15.846s")],
    (1048576, "baseline"): [("12m29.975s", "24m2.244s", "8m8.153s"), ("12m15.391s", "23m51.018s", "8m0.809s"),
                            ("12m5.424s", "23m38.585s", "7m47.714s"), ("12m10.456s", "23m51.691s", "7m54.324s"),
                            ("12m37.735s", "24m19.671s", "8m15.752s")],
    (1048576, "patch"): [("4m42.600s", "16m14.593s", "0m40.444s"), ("4m43.579s", "15m33.805s", "0m38.537s"),
                         ("4m42.211s", "16m32.926s", "0m40.271s"), ("4m44.256s", "15m49.290s", "0m39.116s"),
                         ("4m42.013s", "15m39.447s", "0m38.517s")],
}

SEED_FIGURES = {
    "source": f"seed {SEED}: Julian Brown's microbenchmark in the review thread (8 threads launching OpenMP "
              "kernels, then joined and checked), `time` output before and after the stacks-caching patch",
    "machine": "the patch author's machine, NVIDIA GPU via libgomp's nvptx plugin (model not stated)",
    "tables": {
        "time_runs": [
            {"launches": n, "threads": 8, "build": build,
             "policy": "per_call" if build == "baseline" else "locked_cache",
             "run": i + 1, "real": r, "user": u, "sys": s}
            for (n, build), runs in _SEED_RUNS.items() for i, (r, u, s) in enumerate(runs)
        ],
    },
    "notes": [
        "baseline: the stacks block is allocated and freed (cuMemAlloc/cuMemFree) at every launch and each "
        "launch synchronises; patch: one cached block, reused if large enough, locked during the kernel.",
        "The soft-stack block was about 50 MB on the author's hardware with default options.",
        "256 launches: real time about the same (3m55s) but user 7m14s -> 3m40s and sys 30s -> 16s.",
        "1,048,576 launches: real 12m10s -> 4m42s, user 23m51s -> 15m49s, sys 8m -> 40s.",
        "Across a set of GPU benchmarks the author saw about 11-12% improvement; the sync removal was dropped.",
    ],
}


def requires(params) -> str | None:
    if params["target"] == "gpu":
        from studies.launch_cache import gpu

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
    return out


def _percentiles(lat_ns: np.ndarray) -> dict[str, float]:
    q = np.percentile(lat_ns, [50, 90, 99, 99.9])
    return {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]), "p999": float(q[3]),
            "max": float(lat_ns.max()), "mean": float(lat_ns.mean())}


def _segment_stats(x: np.ndarray) -> dict[str, float]:
    """Mean (the means of the segments add up to the mean launch), median and p99, in ns."""
    q = np.percentile(x, [50, 99])
    return {"mean": float(x.mean()), "p50": float(q[0]), "p99": float(q[1])}


def _subsample(x: np.ndarray, keep: int) -> tuple[list[float], int]:
    """At most ``keep`` values, evenly spaced in launch order (the stride is reported)."""
    if len(x) <= keep:
        return x.astype(float).tolist(), 1
    idx = np.linspace(0, len(x) - 1, keep).round().astype(np.int64)
    return x[idx].astype(float).tolist(), int(np.ceil(len(x) / keep))


def _trace_events(variant: str, pid: int, phase, per_thread: int) -> list[dict]:
    """Chrome-trace spans of the first launches of each thread (ts/dur in us)."""
    events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": variant}}]
    for t in np.unique(phase.thread_of):
        idx = np.flatnonzero(phase.thread_of == t)[:per_thread]
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": int(t), "args": {"name": f"host thread {t}"}})
        lat = phase.lat_ns
        for i in idx:
            parts = {f"{name}_us": float(seg[i]) / 1e3 for name, seg in phase.segments_ns.items()}
            events.append({"ph": "X", "cat": "launch", "name": "launch", "pid": pid, "tid": int(t),
                           "ts": phase.start_ns[i] / 1e3, "dur": lat[i] / 1e3, "args": {"launch": int(i), **parts}})
    return events


def _variant_result(name: str, vparams: dict, a: dict, params) -> VariantResult:
    """One policy's result from its phases: latencies pooled over phases (subsampled for
    storage, percentiles from all), per-segment statistics, each phase's counters, the checks."""
    lat = np.concatenate(a["lat"])
    samples, stride = _subsample(lat, params["max_samples"])
    done = len(a["reps"])
    phases = f"{done} phases" if done == params["repeat"] else f"{done} of {params['repeat']} phases"
    check = "; ".join(a["fails"]) if a["fails"] else f"{phases}: {a['check']}"
    segments = {seg: _segment_stats(np.concatenate([d[seg] for d in a["seg"]])) for seg in a["seg"][0]}
    return VariantResult(name, vparams, samples, not a["fails"], check, {
        "repeats": a["reps"], "lat_pct_ns": _percentiles(lat), "segments_ns": segments,
        "launches_timed": int(lat.size), "samples_stride": stride, "touch_pages": params["touch_pages"],
    })


def run(params, ctx: RunContext) -> dict:
    from studies.launch_cache.measure import check_checksums

    target = params["target"]
    variants = _variants(params)
    progress = ctx.steps(len(variants) * params["repeat"], unit="phases")
    rng = np.random.default_rng(params["rng_seed"])
    outputs: dict = {"target": target, "cpu_count": os.cpu_count()}
    if target == "cpu":
        from studies.launch_cache import cpu

        progress.say("compiling kernels/c/launch_cache.c")
        exe = cpu.build()
        outputs["compiler"] = cbuild.compiler_version(cbuild.compiler())

        def phase_of(vparams, salt):
            return cpu.run_phase(exe, vparams["provider"], params["threads"], params["launches"],
                                 params["scratch_bytes"], params["k"], params["touch_pages"], params["passes"],
                                 vparams["malloc"], salt, limit=params["cache_limit"],
                                 data_bytes=params["data_bytes"], oom_every=params["oom_every"])
    else:
        from studies.launch_cache import gpu

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

    acc = {name: {"lat": [], "seg": [], "reps": [], "fails": []} for name, _ in variants}
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
            a["lat"].append(phase.lat_ns)
            a["seg"].append(phase.segments_ns)
            a["reps"].append(phase.counters())
            if not ok:
                a["fails"].append(f"phase {rep + 1}: {msg}")
            a["check"] = msg
            if rep == params["repeat"] - 1 and params["trace_launches"]:
                trace += _trace_events(name, vi, phase, params["trace_launches"])
            # Stored after every phase (replacing the variant's earlier row): an interrupt keeps
            # each phase that finished, not only the variants whose last phase did.
            ctx.update(_variant_result(name, vparams, a, params))
            progress.tick(f"{name}, phase {rep + 1}/{params['repeat']}")
    if trace:
        doc = {"traceEvents": trace, "displayTimeUnit": "ns",
               "otherData": {"study": ID, "note": "host-side span of each launch: acquire block, launch, "
                                                  "(sync), release; last phase of each variant"}}
        ctx.attach("timeline.json", "trace/chrome-json", json.dumps(doc).encode())
    return outputs


# --- analysis, charts, report (studies/launch_cache/analysis.py, report.py) ---------------------

def seed_tables() -> dict[str, pd.DataFrame]:
    """The seed's `time` runs in seconds and their medians per build, with patch/baseline ratios."""
    return analysis.seed_tables(SEED_FIGURES["tables"]["time_runs"])


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    return analysis.analyze(rec, SEED_FIGURES["tables"]["time_runs"])


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    from studies.launch_cache import report

    return report.charts(tbls)


def verdict(tbls: dict[str, pd.DataFrame]) -> str:
    from studies.launch_cache import report

    return report.verdict_text(tbls)


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    from studies.launch_cache import report

    return report.sections(tbls)
