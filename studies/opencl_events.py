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
callback); see ``studies/_opencl_events/clrt.py``.
"""

from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pandas as pd

from workbench import stats, tables
from workbench.store import RunRecord
from workbench.study import Param, ParamError, ParamSpace, RunContext, StudyUnavailable, VariantResult
from workbench.untrusted import escape as esc

from studies._opencl_events import clrt
from studies._opencl_events.experiments import (DEP_CONDITIONS, TREES, DependencyRuns, KernelRuns, combo_label,
                                                 dep_label, sweep_point)

ID = "opencl-events"
TITLE = "OpenCL event overhead: callbacks, waits and dependencies"
SEED = "001_5ca36159b3daf8a4.txt"
SEED_SUMMARY = ("Event callbacks cost up to 3x per small kernel on an AMD GPU and ~10 us on Intel; waiting on "
                "another thread removes most of it; with chains of work and a final map the overhead shrinks.")

EXPERIMENTS = ("callbacks", "wait", "dependency", "cuda")
ALL_COMBOS = tuple(f"{s}{r}{c}" for s in "01" for r in "01" for c in "01")
DEFAULT_SIZES = [4096 << k for k in range(14)]  # 4 KiB .. 32 MiB, the seed's range
BASELINES = {"callbacks": "(0,0,0)", "wait": "(0,0,0)", "dependency": "plain", "cuda": "none"}

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
        "smoke": {"experiment": "callbacks", "sizes": [4096, 65536], "reps": 16, "measurements": 3,
                  "combos": ["000", "001", "111"], "callback_impl": "ctypes"},
        "quick": {"sizes": [4096, 65536, 1048576], "reps": 64, "measurements": 5},
    },
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
        from studies._opencl_events import cuda

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

def _size_label(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else (
        f"{n >> 10} KiB" if n % 1024 == 0 else f"{n} B")


class _Progress:
    """``ctx.progress`` over every point's rounds (one warm-up plus the measurements)."""

    def __init__(self, ctx: RunContext, points: int, rounds: int):
        self.ctx, self.rounds, self.total, self.done, self.where = ctx, rounds, points * rounds, 0, ""

    def point(self, where: str) -> None:
        self.where = where
        self.ctx.progress(self.done / self.total, f"{where}: checking the kernels")

    def round(self, rnd: int) -> None:
        self.done += 1
        self.ctx.progress(self.done / self.total, f"{self.where}: round {rnd + 1} of {self.rounds}")

    def skip(self) -> None:
        self.done += self.rounds


def _measure_point(ctx: RunContext, runs, conditions: list, label, point: dict, params, refused,
                   progress: _Progress) -> None:
    """Check the kernels, time the conditions the platform supports (interleaved rounds), check
    again, and record every condition; a refused or unchecked one keeps its reason and no samples.

    ``runs`` is a KernelRuns, DependencyRuns or CudaRuns; ``label(c)`` names a condition as the
    seed does; ``refused(c)`` is the platform's refusal of a callback that ``c`` needs, or None.
    """
    def record(c, samples, ok, check, extra=None):
        name = _vname(point.get("workers"), label(c), point["size_bytes"])
        ctx.record(VariantResult(name, {**point, "condition": label(c)}, samples, ok, check, extra or {}))

    reps = params["reps"]

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
        progress.skip()
        return
    if params["target_ms"]:
        reps = reps_for(runs.time(live[0], min(reps, PILOT_REPS)).ns_per_run, params["target_ms"], reps)
    res = sweep_point(runs, live, reps, params["measurements"], progress.round)
    ok_after, check_after = runs.verify()
    for c in live:
        r = res[c]
        good = ok_after and not r.problems
        msg = (f"before and after timing: {check_after}" if good else
               "; ".join(sorted(set(r.problems))) or f"kernel check failed after timing: {check_after}")
        record(c, r.samples_ns, good, msg, {"reps": reps})


PILOT_REPS = 8  # runs of the baseline that set the runs per measurement under target_ms
MIN_REPS = 8  # a fixed end-of-batch latency (the last callback, the last wait) is divided by the runs


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
    progress = _Progress(ctx, len(worker_list) * len(params["sizes"]), params["measurements"] + 1)
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
            progress.point((f"{workers} workers, " if workers else "") + _size_label(size))
            runs = (DependencyRuns(target, size, workers, cbs, params["host"]) if workers
                    else KernelRuns(target, size, cbs))
            if workers:
                queue_modes.add("out-of-order" if runs.out_of_order else "in-order")
            point = {"experiment": exp, **({"workers": workers} if workers else {}), "size_bytes": size, **base}
            try:
                _measure_point(ctx, runs, conditions, label, point, params, unsupported, progress)
            finally:
                if workers:
                    unmaps_refused += runs.unmaps_refused
                runs.close()
    ctx.progress(1.0, "done")
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

    from studies._opencl_events import cuda

    name = cuda.device_name(params["device"])
    progress = _Progress(ctx, len(params["sizes"]), params["measurements"] + 1)
    for size in params["sizes"]:
        progress.point(_size_label(size))
        runs = cuda.CudaRuns(size, params["device"])
        point = {"experiment": "cuda", "size_bytes": size, "platform": "CUDA (CuPy)", "device": name,
                 "callback_impl": "cupy"}
        try:
            _measure_point(ctx, runs, list(cuda.CONDITIONS), str, point, params, lambda c: None, progress)
        finally:
            runs.close()
    ctx.progress(1.0, "done")
    return {"platform": "CUDA (CuPy)", "device": name, "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "cuda_driver": cupy.cuda.runtime.driverGetVersion()}


# --- analysis ---------------------------------------------------------------------------------

BUCKETS = ((0, 128 << 10, "4-64 KiB"), (128 << 10, 2 << 20, "128 KiB-1 MiB"), (2 << 20, 1 << 62, ">= 2 MiB"))


def _bucket(size: int) -> str:
    for lo, hi, name in BUCKETS:
        if lo <= size < hi:
            return name
    raise ValueError(size)


def _group_keys(df: pd.DataFrame) -> list[str]:
    return [k for k in ("platform", "device", "experiment", "workers") if k in df.columns]


def overhead_table(rec: RunRecord) -> pd.DataFrame:
    """Per condition and size bucket: extra time per run over the experiment's baseline, with CI.

    Computed once per set of valid variants: the page asks for it from the verdict and from
    ``analyze`` on every rerun, and its bootstraps take most of a second on a full sweep.
    """
    key = tuple((tuple(sorted(v.params.items())), tuple(v.samples_ns)) for v in rec.valid_variants())
    return _overhead_table(key).copy()


@functools.lru_cache(maxsize=8)
def _overhead_table(valid: tuple) -> pd.DataFrame:
    if not valid:
        return pd.DataFrame()
    df = pd.DataFrame([{**dict(params), "samples": np.asarray(samples)} for params, samples in valid])
    if "workers" in df.columns:
        df["workers"] = df["workers"].fillna(0).astype(int)
    rows = []
    keys = _group_keys(df)
    for gkey, g in df.groupby(keys, dropna=False):
        exp = g["experiment"].iloc[0]
        base_name = BASELINES[exp]
        base = {r.size_bytes: r.samples for r in g[g["condition"] == base_name].itertuples()}
        for cond, gc in g[g["condition"] != base_name].groupby("condition", sort=False):
            by_bucket: dict[str, list] = {}
            for r in gc.itertuples():
                if r.size_bytes in base:
                    by_bucket.setdefault(_bucket(r.size_bytes), []).append((base[r.size_bytes], r.samples))
            for _lo, _hi, bname in BUCKETS:
                pairs = by_bucket.get(bname)
                if not pairs:
                    continue
                d, lo, hi = stats.mean_median_diff_ci(pairs)
                base_mean = float(np.mean([np.median(a) for a, _b in pairs]))
                rows.append({**dict(zip(keys, gkey if isinstance(gkey, tuple) else (gkey,))), "condition": cond,
                             "baseline": base_name, "bucket": bname, "sizes": len(pairs),
                             "overhead_us": d / 1e3, "ci_lo_us": lo / 1e3, "ci_hi_us": hi / 1e3,
                             "baseline_us": base_mean / 1e3, "relative": d / base_mean if base_mean else np.nan})
    return pd.DataFrame(rows)


POINT_COLUMNS = ["variant", "platform", "device", "experiment", "callback_impl", "workers", "condition", "size_bytes",
                 "total_bytes", "reps", "samples", "mean_us", "median_us", "ci_lo_us", "ci_hi_us", "iqr_us", "noisy",
                 "excess_us", "excess_batch_ms", "correct", "check"]


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    """``points`` (one row per condition and size), ``overhead`` (per size bucket, with CIs) and
    ``_samples`` (every measurement, for the charts' dots; a leading underscore marks it as
    chart data rather than a table to read)."""
    points = tables.variants_table(rec)
    if len(points):
        means = {v.variant: float(np.mean(v.samples_ns)) if v.samples_ns else np.nan for v in rec.variants}
        points["mean_ns"] = points["variant"].map(means)
        points["reps"] = points["variant"].map({v.variant: v.extra.get("reps", rec.params.get("reps"))
                                                for v in rec.variants})
        if "workers" in points.columns:  # the seed discusses the dependency runs by total buffer size
            points["total_bytes"] = points["size_bytes"] * points["workers"]
        keys = [k for k in ("workers", "size_bytes") if k in points.columns]
        # the seed's right-hand plot: each condition minus the fastest condition at that size
        points["excess_ns"] = points["mean_ns"] - points[points["correct"]].groupby(keys)["mean_ns"].transform("min")
        points = tables.with_us(points)
        # The same excess per measurement (batch of `reps` runs): a fixed delay at the end of a
        # batch (the last callback's delivery) is the same here whatever the runs per measurement.
        points["excess_batch_ms"] = points["excess_us"] * points["reps"] / 1e3
        points = points[[c for c in POINT_COLUMNS if c in points.columns]]
    samples = tables.samples_table(rec)
    if len(samples):
        samples = samples.assign(time_us=samples["ns"] / 1e3)
        if "workers" in samples.columns:
            samples["total_bytes"] = samples["size_bytes"] * samples["workers"]
        samples = samples[[c for c in ("workers", "condition", "size_bytes", "total_bytes", "time_us", "correct")
                           if c in samples]]
    return {"points": points, "overhead": overhead_table(rec), "_samples": samples}


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    import altair as alt  # only here: the GPU machines have no altair

    pts, smp = tbls["points"], tbls["_samples"]
    if not len(pts):
        return {}
    pts = pts[pts["correct"]]
    smp = smp[smp["correct"]] if len(smp) else smp
    dependency = "workers" in pts.columns and pts["workers"].notna().any()
    axis = alt.Axis(labelExpr="datum.value >= 1048576 ? datum.value / 1048576 + ' MiB' : datum.value / 1024 + ' KiB'")
    # The seed discusses the dependency runs by total buffer size (all workers' slices).
    x = (alt.X("total_bytes:Q", scale=alt.Scale(type="log", base=2), title="total buffer size (all workers)",
               axis=axis) if dependency else
         alt.X("size_bytes:Q", scale=alt.Scale(type="log", base=2), title="buffer size", axis=axis))
    color = alt.Color("condition:N", title="condition")
    groups = sorted(pts["workers"].dropna().unique()) if dependency else [None]
    out = {}
    for w in groups:
        p = pts if w is None else pts[pts["workers"] == w]
        s = smp if w is None else smp[smp["workers"] == w]
        suffix = "" if w is None else f" ({int(w)} workers)"
        key = "" if w is None else f"_w{int(w)}"
        dots = alt.Chart(s).mark_circle(size=14, opacity=0.4).encode(
            x=x, y=alt.Y("time_us:Q", scale=alt.Scale(type="log"), title="time per run (us)"), color=color)
        line = alt.Chart(p).mark_line(point=True).encode(
            x=x, y=alt.Y("mean_us:Q", scale=alt.Scale(type="log")), color=color,
            tooltip=["condition", "size_bytes", alt.Tooltip("mean_us:Q", format=".2f"),
                     alt.Tooltip("median_us:Q", format=".2f"), alt.Tooltip("ci_lo_us:Q", format=".2f"),
                     alt.Tooltip("ci_hi_us:Q", format=".2f"), "samples"])
        out["timing" + key] = (dots + line).properties(
            title=f"Time per run vs buffer size{suffix}: mean line, every measurement a dot", width=460, height=300)
        out["excess" + key] = alt.Chart(p).mark_line(point=True).encode(
            x=x, y=alt.Y("excess_us:Q", title="mean minus fastest condition (us)"), color=color,
            tooltip=["condition", "size_bytes", alt.Tooltip("excess_us:Q", format=".2f")]).properties(
            title=f"Overhead: each condition minus the fastest at that size{suffix}", width=460, height=300)
    if dependency:
        out["per_worker_size"] = alt.Chart(pts).mark_line(point=True).encode(
            x=alt.X("size_bytes:Q", scale=alt.Scale(type="log", base=2), title="buffer size per worker", axis=axis),
            y=alt.Y("mean_us:Q", scale=alt.Scale(type="log"), title="time per run (us)"), color=color,
            strokeDash=alt.StrokeDash("workers:N"),
            tooltip=["workers", "condition", "size_bytes", "total_bytes", alt.Tooltip("mean_us:Q", format=".2f")],
        ).properties(title="Time per run vs buffer size per worker (mean; 7 and 28 workers)", width=460, height=300)
    return out


def _fmt_us(row) -> str:
    return f"{row.overhead_us:+.2f} us [{row.ci_lo_us:+.2f}, {row.ci_hi_us:+.2f}] ({row.relative:+.0%})"


def live_findings(tbl: pd.DataFrame) -> list[dict]:
    """One line per experiment/bucket: the headline conditions' overhead, for the seed-vs-live table."""
    if not len(tbl):
        return []
    heads = {"callbacks": ["(0,0,1)", "(1,1,1)"], "wait": ["(0,0,1)", "wait"], "dependency": ["cb", "wait", "unmap"],
             "cuda": ["host-func", "event-sync", "event-poll"]}
    rows = []
    keys = [k for k in ("experiment", "workers") if k in tbl.columns]
    for gkey, g in tbl.groupby(keys, sort=False):
        exp = g["experiment"].iloc[0]
        for bucket in [b for _lo, _hi, b in BUCKETS if b in set(g["bucket"])]:
            gb = g[g["bucket"] == bucket].set_index("condition")
            parts = [f"{c}: {_fmt_us(gb.loc[c])}" for c in heads[exp] if c in gb.index]
            label = exp + (f", {int(g['workers'].iloc[0])} workers" if "workers" in g and g["workers"].iloc[0] else "")
            rows.append({"experiment": label, "bucket": bucket, "live overhead vs " + BASELINES[exp]: "; ".join(parts)})
    return rows


def report_sections(rec: RunRecord, tbls: dict[str, pd.DataFrame]) -> list[str]:
    from workbench.report import md_table

    out = rec.outputs or {}
    impl = out.get("callback_impl", rec.params.get("callback_impl"))
    where = esc(f"{out.get('platform', '?')} / {out.get('device', '?')}")
    method = [
        "## What is measured",
        f"Platform and device: **{where}** (driver {esc(out.get('driver_version', out.get('cuda_driver', '?')))}). "
        + (f"Runs per measurement chosen per point for about {esc(rec.params.get('target_ms'))} ms (a pilot of the "
           f"baseline; between {MIN_REPS} and {esc(rec.params.get('reps'))}; each point's count is its `reps`), "
           if rec.params.get("target_ms") else f"{esc(rec.params.get('reps'))} runs per measurement, ")
        + f"{esc(rec.params.get('measurements'))} measurements per point "
        "after one warm-up round, conditions interleaved. One sample = host wall time from the first enqueue until "
        "the queue finished and every callback/wait returned, divided by the runs.",
    ]
    if rec.params.get("experiment") != "cuda":
        method.append(
            f"Callbacks registered as {esc(impl, 'code')}: `native` is a C function that bumps an atomic counter (the seed's "
            "C++ setting), `ctypes` a Python function called on the runtime's thread (GIL + frame per call), "
            "`pyopencl` is `Event.set_callback`, which starts one OS thread per callback on the enqueuing thread. "
            f"Callback support: {esc(out.get('callback_support', {}))}.")
    else:
        method.append("CUDA host functions run in the stream: the next kernel waits for each to return, unlike an "
                      "OpenCL callback. CuPy's trampoline takes the GIL for each.")
    sections = ["\n\n".join(method)]
    ov = tbls.get("overhead")
    if ov is not None and len(ov):
        show = ov.copy()
        show["overhead (95% CI)"] = [_fmt_us(r) for r in show.itertuples()]
        cols = [c for c in ("platform", "experiment", "workers", "condition", "baseline", "bucket", "sizes",
                            "baseline_us", "overhead (95% CI)") if c in show.columns]
        sections.append("## Overhead per buffer-size bucket\nMean over the bucket's sizes of median(condition) - "
                        "median(baseline) per run; bootstrap 95% CI.\n\n" + md_table(show[cols].round(2)))
        live = pd.DataFrame(live_findings(ov))
        seed = pd.DataFrame(SEED_FIGURES["tables"]["findings"])
        seed = seed[seed["experiment"] == ("callbacks" if rec.params.get("experiment") == "cuda"
                                           else rec.params.get("experiment"))]
        sections.append(f"## The seed's findings beside this run\nSeed ({SEED_FIGURES['machine']}), as the seed "
                        f"states them:\n\n{md_table(seed)}\n\nThis run ({where}):\n\n{md_table(live)}")
    return sections


def verdict(rec: RunRecord) -> str:
    """One line: the largest small-buffer overhead over the baseline, with its CI, per experiment."""
    failed = [v.variant for v in rec.variants if not v.correct]
    tail = f" {len(failed)} point(s) FAILED their check or were refused." if failed else ""
    ov = overhead_table(rec)
    if ov.empty:
        return "No overhead could be computed (no baseline with a compared condition)." + tail
    small = ov[ov["bucket"] == ov["bucket"].iloc[0]]
    parts = []
    for (plat, exp), grp in small.groupby(["platform", "experiment"], sort=False):
        top = grp.sort_values("overhead_us").iloc[-1]
        parts.append(f"{esc(exp)} on {esc(plat)}: {esc(top['condition'])} adds {top['overhead_us']:.1f} us "
                     f"[{top['ci_lo_us']:.1f}, {top['ci_hi_us']:.1f}] per run over {esc(top['baseline'])} "
                     f"({top['relative']:+.0%}) at {esc(top['bucket'])}")
    return "; ".join(parts) + "." + tail
