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
import re
import sys

import numpy as np
import pandas as pd

from workbench import cbuild, stats, tables
from workbench.store import RunRecord
from workbench.study import Param, ParamError, ParamSpace, RunContext, VariantResult
from workbench.untrusted import escape as esc

from studies._launch_cache import SOFTSTACK_CACHE_LIMIT, OutOfMemory

ID = "launch-cache"
TITLE = "Launch cache: per-launch scratch allocation vs a locked cache vs a pool"
SEED = "003_dccaa0ad43ebb428.txt"
SEED_SUMMARY = ("GCC review of caching libgomp's nvptx soft-stack block between OpenMP kernel launches: "
                "8 host threads, `time` before/after, lock vs pool of 3.")

CPU_POLICIES = ("per_call", "locked_cache", "size_limit", "pool")
GPU_POLICIES = ("per_call", "locked_cache", "size_limit", "pool", "framework", "graph")

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
        Param("repeat", "int", 3, "phases per variant (the seed ran 5)", min=1, max=50),
        Param("max_samples", "int", 5_000, "per-launch latencies kept per variant (evenly subsampled beyond)",
              min=100, max=2_000_000),
        Param("trace_launches", "int", 100, "launches per thread drawn in the timeline trace (0: none)",
              min=0, max=2000),
        Param("seed", "int", 3, "random seed of the kernels' inputs", min=0, max=2**31 - 1),
    ),
    presets={
        "smoke": {"threads": 2, "launches": 200, "scratch_bytes": 4 << 20, "touch_pages": 64, "repeat": 1,
                  "trace_launches": 20},
        "quick": {"launches": 4096, "repeat": 2},
    },
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
        from studies._launch_cache import gpu

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
    base = {"target": params["target"], "threads": params["threads"], "launches": params["launches"],
            "scratch_bytes": params["scratch_bytes"]}
    out = []
    for policy in policies_of(params):
        label = f"pool{params['k']}" if policy == "pool" else policy
        extra = {"k": params["k"]} if policy == "pool" else (
            {"cache_limit": params["cache_limit"]} if policy == "size_limit" else {})
        if params["target"] == "cpu":
            for mode in params["malloc"]:
                out.append((f"{label}/{mode}", {**base, "policy": policy, "malloc": mode, **extra}))
        else:
            for sync in params["sync"]:
                out.append((f"{label}/{'sync' if sync else 'async'}", {**base, "policy": policy, "sync": sync, **extra}))
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
    from studies._launch_cache import check_checksums

    target = params["target"]
    variants = _variants(params)
    rng = np.random.default_rng(params["seed"])
    outputs: dict = {"target": target, "cpu_count": os.cpu_count()}
    if target == "cpu":
        from studies._launch_cache import cpu

        ctx.progress(0.0, "compiling kernels/c/launch_cache.c")
        exe = cpu.build()
        outputs["compiler"] = cbuild.compiler_version(cbuild.compiler())

        def phase_of(vparams, salt):
            return cpu.run_phase(exe, vparams["policy"], params["threads"], params["launches"],
                                 params["scratch_bytes"], params["k"], params["touch_pages"], params["passes"],
                                 vparams["malloc"], salt, limit=params["cache_limit"],
                                 data_bytes=params["data_bytes"], oom_every=params["oom_every"])
    else:
        from studies._launch_cache import gpu

        outputs.update(gpu.device_text())
        outputs["blocks"] = gpu.resolve_blocks(params["blocks"])

        def phase_of(vparams, salt, launches=params["launches"], oom_every=params["oom_every"]):
            return gpu.run_phase(vparams["policy"], params["threads"], launches, params["scratch_bytes"],
                                 params["k"], params["touch_pages"], params["passes"], vparams["sync"], salt,
                                 blocks=params["blocks"], limit=params["cache_limit"],
                                 data_bytes=params["data_bytes"], oom_every=oom_every)

        # Warm-up: load the module, create the context's streams and events once, off the clock.
        for name, vparams in variants:
            ctx.progress(0.0, f"warm-up {name}")
            phase_of(vparams, 1, launches=2 * params["threads"], oom_every=0)

    acc = {name: {"lat": [], "seg": [], "reps": [], "fails": []} for name, _ in variants}
    blocks = outputs.get("blocks", 1)
    trace: list[dict] = []
    steps = len(variants) * params["repeat"]
    out_of_memory: set[str] = set()
    # Repeats interleave the variants so a drift of the machine hits them all alike.
    for rep in range(params["repeat"]):
        for vi, (name, vparams) in enumerate(variants):
            if name in out_of_memory:
                continue
            ctx.progress((rep * len(variants) + vi) / steps, f"{name}, phase {rep + 1}/{params['repeat']}")
            salt = int(rng.integers(1, 2**62))
            try:
                phase = phase_of(vparams, salt)
            except OutOfMemory as exc:
                # The policy cannot run these launches in this memory: a failed variant with the
                # reason and no samples (replacing the row of its earlier phases, if any).
                out_of_memory.add(name)
                ctx.update(VariantResult(name, vparams, [], False, f"phase {rep + 1}: {exc}", {}))
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
    if trace:
        doc = {"traceEvents": trace, "displayTimeUnit": "ns",
               "otherData": {"study": ID, "note": "host-side span of each launch: acquire block, launch, "
                                                  "(sync), release; last phase of each variant"}}
        ctx.attach("timeline.json", "trace/chrome-json", json.dumps(doc).encode())
    ctx.progress(1.0, "done")
    return outputs


# --- analysis --------------------------------------------------------------------------------

_TIME_RE = re.compile(r"^(\d+)m([\d.]+)s$")


def parse_time(text: str) -> float:
    """`time`'s '12m10.456s' -> seconds."""
    m = _TIME_RE.match(text.strip())
    if not m:
        raise ValueError(f"not a `time` figure: {text!r}")
    return int(m.group(1)) * 60 + float(m.group(2))


def fmt_time(seconds: float) -> str:
    """Seconds -> `time`'s '0m1.234s' shape."""
    if seconds != seconds:
        return "n/a"
    m, s = divmod(seconds, 60)
    return f"{int(m)}m{s:.3f}s"


def _repeats_table(rec: RunRecord) -> pd.DataFrame:
    rows = []
    for v in rec.variants:
        for i, r in enumerate(v.extra.get("repeats", [])):
            rows.append({"variant": v.variant, "policy": v.params.get("policy"), "phase": i + 1, **r})
    return pd.DataFrame(rows)


def seed_tables() -> dict[str, pd.DataFrame]:
    """The seed's runs in seconds, and per (launches, build) medians with patch/baseline ratios."""
    runs = pd.DataFrame(SEED_FIGURES["tables"]["time_runs"])
    for col in ("real", "user", "sys"):
        runs[f"{col}_s"] = runs[col].map(parse_time)
    summary = runs.groupby(["launches", "threads", "build", "policy"], as_index=False, sort=False)[
        ["real_s", "user_s", "sys_s"]].median()
    for col in ("real_s", "user_s", "sys_s"):
        base = summary[summary["build"] == "baseline"].set_index("launches")[col]
        summary[f"{col[:-2]}_vs_baseline"] = summary[col] / summary["launches"].map(base)
    return {"_seed_runs": runs, "seed_summary": summary}


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    df = tables.with_us(tables.variants_table(rec))
    reps = _repeats_table(rec)
    out = {"policies": df, "phases": reps, **seed_tables()}
    if not len(df) or not len(reps):  # nothing ran (e.g. every variant out of memory)
        return out
    med = reps.groupby("variant", sort=False).median(numeric_only=True).drop(columns=["phase"])
    df = df.set_index("variant")
    for col in ("real_s", "user_s", "sys_s", "minflt", "majflt", "nvcsw", "nivcsw", "peak_bytes"):
        if col in med:
            df[col] = med[col]
    df["cpu_s"] = df["user_s"] + df["sys_s"]
    df["launches_per_s"] = df["launches"] / df["real_s"]
    df["minflt_per_launch"] = df["minflt"] / df["launches"]
    df["peak_mib"] = df["peak_bytes"] / 2**20
    for key in ("hwm_kib", "device_used_at_end_bytes", "mmapped_allocs", "allocs", "blocks_created", "limit_frees",
                "oom_retries", "data_allocs"):
        if key in med:
            df[key] = med[key]
    pct = {v.variant: v.extra.get("lat_pct_ns", {}) for v in rec.variants}
    for q in ("p50", "p99", "p999", "max"):
        df[f"{q}_us"] = [pct[v].get(q, float("nan")) / 1e3 for v in df.index]
    df = df.reset_index()
    out["policies"] = df
    out["vs_per_call"] = _vs_per_call(df)
    out["segments"] = _segments(rec)
    out["_latency_quantiles"] = _quantiles(rec)
    return out


def _segments(rec: RunRecord) -> pd.DataFrame:
    """Where a launch's host time goes: mean/median/p99 of each part, and its share of the mean."""
    rows = []
    for v in rec.variants:
        segs = v.extra.get("segments_ns", {})
        total = sum(s["mean"] for s in segs.values())
        for name, s in segs.items():
            rows.append({"variant": v.variant, "policy": v.params.get("policy"), "segment": name,
                         "mean_us": s["mean"] / 1e3, "p50_us": s["p50"] / 1e3, "p99_us": s["p99"] / 1e3,
                         "share": s["mean"] / total if total > 0 else float("nan")})
    return pd.DataFrame(rows)


def _mode_col(df: pd.DataFrame) -> str:
    return "malloc" if "malloc" in df.columns else "sync"


def _vs_per_call(df: pd.DataFrame) -> pd.DataFrame:
    """Each policy's real/user/sys over per_call's with the same malloc mode or sync setting."""
    mode = _mode_col(df)
    rows = []
    for _, r in df.iterrows():
        base = df[(df["policy"] == "per_call") & (df[mode] == r[mode])]
        if base.empty:
            continue
        b = base.iloc[0]
        rows.append({"variant": r["variant"], "policy": r["policy"], mode: r[mode],
                     **{f"{c}_vs_per_call": r[f"{c}_s"] / b[f"{c}_s"] if b[f"{c}_s"] > 0 else float("nan")
                        for c in ("real", "user", "sys")},
                     "p50_vs_per_call": r["p50_us"] / b["p50_us"], "correct": r["correct"]})
    return pd.DataFrame(rows)


def _quantiles(rec: RunRecord) -> pd.DataFrame:
    qs = np.array([0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999])
    rows = []
    for v in rec.variants:
        if not v.samples_ns:
            continue
        vals = np.quantile(np.asarray(v.samples_ns), qs)
        rows += [{"variant": v.variant, "policy": v.params.get("policy"), "quantile": float(q), "lat_us": x / 1e3}
                 for q, x in zip(qs, vals)]
    return pd.DataFrame(rows)


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    import altair as alt

    from workbench import charts as wbcharts  # altair is not installed on the GPU nodes

    df = tbls["policies"]
    out = {}
    if len(df) and "real_s" in df:
        long = df.melt(id_vars=["variant", "correct"], value_vars=["real_s", "user_s", "sys_s"],
                       var_name="clock", value_name="seconds")
        clocks = ["real_s", "user_s", "sys_s"]
        # symlog: per-call and cached phases differ by 100x, and sys can be exactly 0.
        out["time"] = alt.Chart(long).mark_bar().encode(
            x=alt.X("variant:N", sort=None), xOffset=alt.XOffset("clock:N", sort=clocks),
            y=alt.Y("seconds:Q", scale=alt.Scale(type="symlog", constant=1e-3), title="seconds (median of phases, symlog)"),
            color=alt.Color("clock:N", sort=clocks), tooltip=["variant", "clock", alt.Tooltip("seconds:Q", format=".4f")],
        ).properties(title="real / user / sys of the launch phase, per policy", height=280)
        out["latency"] = wbcharts.median_ci_bars(df, title="Per-launch latency (median, 95% CI)")
        lat = df.melt(id_vars=["variant"], value_vars=["p50_us", "p99_us"], var_name="quantile", value_name="us")
        out["tail"] = alt.Chart(lat).mark_bar().encode(
            x=alt.X("variant:N", sort=None), xOffset="quantile:N",
            y=alt.Y("us:Q", scale=alt.Scale(type="log"), title="per-launch latency (us, log)"), color="quantile:N",
            tooltip=["variant", "quantile", alt.Tooltip("us:Q", format=".2f")],
        ).properties(title="Per-launch latency: median and p99", height=280)
        out["memory"] = alt.Chart(df).mark_bar().encode(
            x=alt.X("variant:N", sort=None), y=alt.Y("peak_mib:Q", title="peak scratch held (MiB)"),
            tooltip=["variant", alt.Tooltip("peak_mib:Q", format=".1f")],
        ).properties(title="Peak scratch memory per policy", height=240)
        out["faults"] = alt.Chart(df).mark_bar().encode(
            x=alt.X("variant:N", sort=None), y=alt.Y("minflt_per_launch:Q", title="minor page faults per launch"),
            tooltip=["variant", "minflt", alt.Tooltip("minflt_per_launch:Q", format=".1f")],
        ).properties(title="Page faults per launch (getrusage)", height=240)
    seg = tbls.get("segments")
    if seg is not None and len(seg):
        out["segments"] = alt.Chart(seg).mark_bar().encode(
            x=alt.X("variant:N", sort=None),
            y=alt.Y("mean_us:Q", stack="normalize", title="share of the mean launch", axis=alt.Axis(format="%")),
            color=alt.Color("segment:N", sort=None), order=alt.Order("segment:N"),
            tooltip=["variant", "segment", alt.Tooltip("mean_us:Q", format=".2f"), alt.Tooltip("p99_us:Q", format=".2f"),
                     alt.Tooltip("share:Q", format=".0%")],
        ).properties(title="Where a launch's host time goes (share of the mean launch; tooltips in us)", height=280)
    q = tbls.get("_latency_quantiles")
    if q is not None and len(q):
        out["latency_cdf"] = alt.Chart(q).mark_line().encode(
            x=alt.X("lat_us:Q", scale=alt.Scale(type="log"), title="per-launch latency (us, log)"),
            y=alt.Y("quantile:Q"), color="variant:N", tooltip=["variant", "quantile", "lat_us"],
        ).properties(title="Per-launch latency distribution (CDF of kept samples)", width=420, height=280)
    s = tbls["seed_summary"].melt(id_vars=["launches", "build"], value_vars=["real_s", "user_s", "sys_s"],
                                  var_name="clock", value_name="seconds")
    out["seed"] = alt.Chart(s).mark_bar().encode(
        x=alt.X("build:N", sort=None), xOffset=alt.XOffset("clock:N", sort=["real_s", "user_s", "sys_s"]), y="seconds:Q",
        color=alt.Color("clock:N", sort=["real_s", "user_s", "sys_s"]),
        column=alt.Column("launches:N", title="launches (8 threads)"),
    ).properties(title="The seed's `time` figures (median of 5 runs; the seed's machine)", width=160, height=220)
    return out


def report_sections(rec: RunRecord, tbls: dict[str, pd.DataFrame]) -> list[str]:
    from workbench.report import md_table

    df = tbls["policies"]
    seed = tbls["seed_summary"]
    rows = [{"launches / threads": f"{r['launches']:,} / {r['threads']}", "build": f"{r['build']} ({r['policy']})",
             "real": fmt_time(r["real_s"]), "user": fmt_time(r["user_s"]), "sys": fmt_time(r["sys_s"]),
             "user vs baseline": f"{r['user_vs_baseline']:.2f}", "sys vs baseline": f"{r['sys_vs_baseline']:.2f}"}
            for _, r in seed.iterrows()]
    secs = ["## The seed's `time` figures (seed's machine, median of its 5 runs)\n\n" + md_table(pd.DataFrame(rows))]
    if not len(df) or "real_s" not in df:
        return secs
    p = rec.params
    mode = _mode_col(df)
    rows = [{"variant": r["variant"], mode: r[mode], "real": fmt_time(r["real_s"]), "user": fmt_time(r["user_s"]),
             "sys": fmt_time(r["sys_s"]), "minor faults": f"{r['minflt']:,.0f}",
             "per-launch p50": stats.fmt_ns(r["p50_us"] * 1e3), "p99": stats.fmt_ns(r["p99_us"] * 1e3),
             "peak scratch": f"{r['peak_mib']:.0f} MiB", "check": "ok" if r["correct"] else "FAILED"}
            for _, r in df.iterrows()]
    secs.append(f"## Live `time` of the launch phase ({p['launches']:,} launches over {p['threads']} threads, "
                f"{esc(p['target'])}, scratch {p['scratch_bytes']:,} B; median of {p['repeat']} phases)\n\n"
                + md_table(pd.DataFrame(rows)))
    vs = tbls.get("vs_per_call")
    if vs is not None and len(vs):
        s256 = seed[seed["launches"] == 256].set_index("build")
        s1m = seed[seed["launches"] == 1048576].set_index("build")
        rows = [{"variant": r["variant"], mode: r[mode],
                 **{clock: f"{r[f'{clock}_vs_per_call']:.3f}" for clock in ("real", "user", "sys")},
                 "per-launch p50": f"{r['p50_vs_per_call']:.3f}"} for _, r in vs.iterrows()]
        secs.append("## Cached vs per-call, live beside the seed\n\n"
                    "Ratios below 1 mean less time than allocating per launch. The seed's "
                    f"ratios are patch / baseline (256 launches: real {s256.loc['patch', 'real_vs_baseline']:.2f}, "
                    f"user {s256.loc['patch', 'user_vs_baseline']:.2f}, sys {s256.loc['patch', 'sys_vs_baseline']:.2f}; "
                    f"1,048,576 launches: real {s1m.loc['patch', 'real_vs_baseline']:.2f}, user "
                    f"{s1m.loc['patch', 'user_vs_baseline']:.2f}, sys {s1m.loc['patch', 'sys_vs_baseline']:.2f}).\n\n"
                    + md_table(pd.DataFrame(rows)))
    seg = tbls.get("segments")
    if seg is not None and len(seg):
        cells = seg.assign(cell=[f"{stats.fmt_ns(m * 1e3)} ({sh:.0%})" for m, sh in zip(seg["mean_us"], seg["share"])])
        table = cells.pivot(index="variant", columns="segment", values="cell")
        table = table.reindex(index=list(dict.fromkeys(seg["variant"])),
                              columns=list(dict.fromkeys(seg["segment"]))).fillna("").reset_index()
        table.columns.name = None
        secs.append("## Where a launch's time goes (host clock, mean per launch; share of the mean launch)\n\n"
                    + md_table(table))
    secs.append(_findings(rec, df))
    return secs


def _findings(rec: RunRecord, df: pd.DataFrame) -> str:
    """Plain statements read off the counters of this run."""
    p = rec.params
    lines = ["## What the counters say", ""]
    ok = df[df["correct"]]
    if len(ok):
        best = ok.loc[ok["real_s"].idxmin()]
        lines.append(f"- Fastest whole phase: **{esc(best['variant'])}** ({fmt_time(best['real_s'])} real, "
                     f"{best['launches_per_s']:,.0f} launches/s).")
    if p["target"] == "cpu":
        for _, r in df[df["policy"] == "per_call"].iterrows():
            if r.get("allocs", 0):
                lines.append(f"- per_call/{esc(r['malloc'])}: {r['mmapped_allocs']:,.0f} of {r['allocs']:,.0f} blocks came "
                             f"from mmap; {r['minflt_per_launch']:.0f} minor faults per launch for "
                             f"{p['touch_pages']} touched pages.")
        lines.append("- glibc raises its mmap threshold to the size of each freed mmapped block, up to 32 MiB on "
                     "64-bit; blocks at or under that are then served from the heap and stop faulting, blocks above "
                     "it (the seed's 50 MB) are mmapped and unmapped every time. `pinned` switches that off with "
                     "mallopt(M_MMAP_THRESHOLD, 128 KiB).")
        locked = df[df["policy"] == "locked_cache"]
        if len(locked):
            lines.append(f"- locked_cache: {locked['nvcsw'].median():,.0f} voluntary context switches per phase "
                         "(threads sleeping on the lock while another runs its kernel).")
    else:
        lines.append("- cudaFree synchronises the whole device, so per_call waits for the GPU with or without "
                     "the sync after the launch; cached policies only wait when asked to.")
        lines.append("- Without sync, locked_cache still runs the kernels one at a time on the GPU (each waits on "
                     "the previous user's event); the pool lets k of them overlap, framework and graph all T.")
        lines.append("- A CUDA synchronisation spins by default while the host has cores to spare, so time spent "
                     "waiting for the GPU shows up as user time (user can exceed real with several threads).")
    mode = _mode_col(df)
    for value in df[mode].unique():
        sub = df[df[mode] == value].set_index("policy")
        if {"locked_cache", "pool", "per_call"} <= set(sub.index):
            lk, pl, pc = sub.loc["locked_cache"], sub.loc["pool"], sub.loc["per_call"]
            lines.append(f"- {mode}={esc(value)}: pool of {p['k']} vs one locked block: real {_times(pl['real_s'], lk['real_s'])}, "
                         f"user {_times(pl['user_s'], lk['user_s'])}, peak memory {_times(pl['peak_mib'], lk['peak_mib'], 1)}; "
                         f"per_call spends {pc['sys_s'] / max(pc['real_s'], 1e-12):.1f} s of sys per s of real.")
    return "\n".join(lines)


def _times(a: float, b: float, digits: int = 2) -> str:
    """``a / b`` as '1.23x'; 'n/a' when b is 0 (a short run can spend no measurable user time)."""
    return f"{a / b:.{digits}f}x" if b > 0 else "n/a"


def verdict(rec: RunRecord) -> str:
    """One line: each policy's real time against per-launch allocation, the seed's comparison."""
    failed = [v.variant for v in rec.variants if not v.correct]
    tail = f" {len(failed)} variant(s) FAILED their check: {esc(', '.join(failed))}." if failed else ""
    vs = analyze(rec).get("vs_per_call")
    if vs is None or vs.empty:
        return "No policy to compare with per-launch allocation." + tail
    rows = vs[vs["correct"] & (vs["policy"] != "per_call")].sort_values("real_vs_per_call")
    if rows.empty:
        return "Only per-launch allocation was measured." + tail
    best = rows.iloc[0]
    parts = ", ".join(f"{esc(r['variant'])} {r['real_vs_per_call']:.2f}x" for _, r in rows.head(4).iterrows())
    return (f"Real time against per-launch allocation (lower is better): {parts}. Fastest: {esc(best['variant'])} "
            f"(user {best['user_vs_per_call']:.2f}x, sys {best['sys_vs_per_call']:.2f}x).") + tail
