"""CPU reduction: IREE's runtime overhead against PyTorch on a float32 sum (seed 000).

Question: for a 1D float32 sum of N elements on this CPU, how much of IREE's per-call time
is compute and how much is runtime machinery (VM invoke, semaphores, fences, task
scheduling, wake-up), compared with PyTorch's OpenMP two-pass reduction, and does
splitting the reduction into c chunks (two dispatches) buy parallelism worth its cost?

Measured, per (implementation, N, c, workers w), each result checked against a float64
reference before its time counts (see ``studies/_cpu_reduction/data.py`` for the exact
tolerance):

- ``torch``: ``torch.sum(x)``; ``torch-out``: ``torch.sum(x, out=o)`` (no per-call output
  allocation); both with ``torch.set_num_threads(w)``. ``numpy``: ``np.sum`` (one thread).
- ``iree-task`` / ``iree-sync``: the compiled module called through the Python runtime
  (``iree.runtime``) on local-task with w workers / local-sync (inline, one thread), one
  child process per driver setup.
- ``iree-bench``: ``iree-benchmark-module`` (C++ harness, no Python), local-task with w
  workers; its google-benchmark repetitions are the raw samples.

Clocks: host ``perf_counter_ns`` through :mod:`workbench.harness` for the in-process and
Python-runtime variants (per-call ns over calibrated loops), google-benchmark's real time
for ``iree-bench``. Programs come from ``kernels/iree/sum_programs.py`` compiled with the
seed's flags and cached in ``.workbench/cache/iree/`` by (N, c, flags, compiler version).

Beyond the timings: copy bandwidth measured in the same run (the memory floor of the
size sweep), and optional profiles of one configuration per c (IREE's native profiler
exported as ireeperf-jsonl, and a Tracy capture) from which the phase breakdown, the compute
time of the overview and the per-thread timeline are taken.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from workbench import stats, tables
from workbench.store import RunRecord
from workbench.study import Param, ParamError, ParamSpace, RunContext
from workbench.untrusted import escape as esc

ID = "cpu-reduction"
TITLE = "CPU reduction: IREE vs PyTorch sum (runtime overhead)"
SEED = "000_a9087dd746f9e088.txt"
SEED_SUMMARY = ("IREE CPU sum of 1M float32 on a 32-core Zen4: MKL 15 us vs IREE 56-61 us; the gap is "
                "runtime overhead (VM setup, scheduling, cleanup), not compute.")

IMPLS = ("torch", "torch-out", "numpy", "iree-task", "iree-sync", "iree-bench")
IREE_IMPLS = ("iree-task", "iree-sync", "iree-bench")
SINGLE_THREAD = ("numpy", "iree-sync")  # measured at w = 1 only
EXPERIMENTS = ("grid", "sizes", "phases")
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
MAX_N = 1 << 26  # 64Mi elements (256 MiB of float32)
#: bytes of float32 copies a point can hold at once (main process, .npy, child, C++ tool, ...)
COPIES_ALIVE = 6

SPACE = ParamSpace(
    params=(
        Param("n", "int", 1_000_000, "elements summed (float32); accepts 1M, 64Mi", unit="elements",
              min=1024, max=MAX_N),
        Param("chunks", "int", [1, 2, 8], "IREE split into c chunks (1 = no split; c > 1: two dispatches)",
              min=1, max=65536, multi=True),
        Param("workers", "int", sorted({1, CORES}), f"torch threads / IREE local-task workers (1..{CORES} here)",
              min=1, max=1024, multi=True),
        Param("variants", "str", list(IMPLS), "implementations to time", choices=IMPLS, multi=True),
        Param("repeat", "int", 20, "samples per variant", min=3, max=1000),
        Param("sizes", "int", [16_384, 262_144, 1_000_000, 4_194_304, 16_777_216],
              "N values of the size sweep (at the largest worker count)", unit="elements", min=1024, max=MAX_N,
              multi=True),
        Param("experiments", "str", ["grid", "sizes", "phases"],
              "grid: every variant x c x w at n (overview, thread scaling); sizes: size sweep with the "
              "bandwidth floor; phases: profile one iteration per c at n and the largest w",
              choices=EXPERIMENTS, multi=True),
        Param("profiler", "str", "both", "profiles taken by the phases experiment (Tracy adds ~1.5 s per c "
              "and gives the per-thread timeline)",
              choices=("ireeperf", "tracy", "both")),
        Param("seed", "int", 0, "input generator seed", min=0, max=2**31 - 1),
    ),
    presets={
        "smoke": {"n": 16_384, "chunks": [1, 3], "workers": [1], "repeat": 5, "sizes": [4096, 16_384],
                  "experiments": ["grid"], "variants": list(IMPLS)},
        "quick": {"n": 1_000_000, "chunks": [1, 2, 8], "workers": sorted({1, CORES}), "repeat": 10,
                  "sizes": [16_384, 1_000_000, 16_777_216], "experiments": ["grid", "sizes", "phases"],
                  "profiler": "both"},
    },
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
    for w in params["workers"]:
        if w > CORES:
            raise ParamError("workers", f"{w} workers is beyond this machine's {CORES} usable CPUs "
                                        f"(allowed 1..{CORES})")
    sizes = params["sizes"] if "sizes" in params["experiments"] else []
    for s in sizes:
        if max(chunks) > s:
            raise ParamError("sizes", f"size {s} is smaller than the largest chunk count c={max(chunks)} "
                                      "(every size must be >= every c)")
    avail = _mem_available_bytes()
    biggest = max([n, *sizes])
    if avail is not None and biggest * 4 * COPIES_ALIVE > avail:
        name = "n" if biggest == n else "sizes"
        raise ParamError(name, f"N={biggest} needs about {biggest * 4 * COPIES_ALIVE / 2**30:.1f} GiB "
                               f"({COPIES_ALIVE} float32 copies) but only {avail / 2**30:.1f} GiB is available")


def requires(params) -> str | None:
    import importlib.util

    need = []
    if any(v.startswith("torch") for v in params["variants"]) or "sizes" in params["experiments"]:
        need.append(("torch", "torch"))
    if any(v in IREE_IMPLS for v in params["variants"]):
        need += [("iree.runtime", "iree-base-runtime==3.13.0"), ("iree.compiler", "iree-base-compiler==3.13.0")]
    missing = [pip for mod, pip in need if importlib.util.find_spec(mod.split(".")[0]) is None
               or importlib.util.find_spec(mod) is None]
    if missing:
        return f"missing package(s): {', '.join(missing)}; install with: pip install {' '.join(missing)}"
    return None


# --- run ------------------------------------------------------------------------------------------

def points(params) -> list:
    """The measured configurations (deduplicated): the grid at n, and the size sweep at max w."""
    from studies._cpu_reduction.measure import Point

    out: dict = {}

    def add(impl, n, w):
        w = 1 if impl in SINGLE_THREAD else w
        for c in (params["chunks"] if impl in IREE_IMPLS else [None]):
            p = Point(impl, n, c, w)
            out.setdefault(p.name, p)

    for impl in params["variants"]:
        if "grid" in params["experiments"]:
            for w in params["workers"]:
                add(impl, params["n"], w)
        if "sizes" in params["experiments"]:
            for n in params["sizes"]:
                add(impl, n, max(params["workers"]))
    return list(out.values())


def run(params, ctx: RunContext) -> dict:
    from kernels.iree.sum_programs import program
    from studies._cpu_reduction import data, iree_tools, measure, profiles
    from workbench.harness import ExternalCommandError

    pts = points(params)
    repeat = params["repeat"]
    w_max = max(params["workers"])
    profiled = "phases" in params["experiments"] and any(v in IREE_IMPLS for v in params["variants"])
    iree_pts = [p for p in pts if p.impl in IREE_IMPLS]
    programs = sorted({(p.n, p.c) for p in iree_pts} | ({(params["n"], c) for c in params["chunks"]}
                                                          if profiled else set()))
    steps = len(programs) + len(pts) + (len(params["chunks"]) if profiled else 0) + 2
    done = 0

    def tick(msg):
        nonlocal done
        ctx.progress(done / steps, msg)
        done += 1

    # Other processes on the box skew every figure (an OpenMP barrier waits for a descheduled
    # thread): keep the load average beside the results.
    outputs: dict = {"tolerance": data.TOLERANCE_TEXT, "cores": CORES, "iree_flags": list(iree_tools.SEED_FLAGS),
                     "programs": {}, "bandwidth": {}, "captures": [], "capture_errors": [],
                     "loadavg_start": list(os.getloadavg())}
    if programs:
        outputs["iree_versions"] = iree_tools.versions()

    # 1. compile (cached); a failure fails only the points of that program
    modules, broken = {}, {}
    for n, c in programs:
        tick(f"compile N={n} c={c}")
        prog = program(n, c)
        try:
            mod = iree_tools.compile_program(prog)
        except ExternalCommandError as exc:
            broken[(n, c)] = f"compile failed: {exc}"
            continue
        outputs["programs"][f"n={n}/c={c}"] = mod.info
        if mod.info["dispatches"] != prog.dispatches:
            broken[(n, c)] = (f"compiled module has {mod.info['dispatches']} dispatches, the program is written "
                              f"for {prog.dispatches} ({mod.info['dispatch_names']})")
        modules[(n, c)] = mod

    with tempfile.TemporaryDirectory(prefix="cpu-reduction-") as tmp:
        tmpdir = Path(tmp)
        sizes = sorted({p.n for p in pts} | {n for n, _ in programs})
        arrays, inputs, refs = {}, {}, {}
        for n in sizes:
            x = data.make_input(n, params["seed"])
            refs[n] = data.reference(x)
            inputs[n] = tmpdir / f"x_{n}.npy"
            np.save(inputs[n], x)
            arrays[n] = x
        outputs["reference"] = {str(n): refs[n] for n in sizes}

        # 2. memory floor: copy bandwidth at every worker count, in this same run
        if "sizes" in params["experiments"]:
            tick("copy bandwidth")
            for w in sorted(set(params["workers"])):
                outputs["bandwidth"][str(w)] = measure.copy_bandwidth(w, repeat=max(5, repeat // 2))

        def usable(p):
            if p.impl in IREE_IMPLS and (p.n, p.c) in broken:
                ctx.record(measure.failed(p, broken[(p.n, p.c)]))
                tick(p.name)
                return False
            return True

        # 3. in-process variants
        for p in pts:
            if p.impl in ("torch", "torch-out", "numpy"):
                tick(p.name)
                fn = measure.numpy_point if p.impl == "numpy" else measure.torch_point
                ctx.record(fn(p, arrays[p.n], refs[p.n], repeat))

        # 4. IREE through the Python runtime: one child process per driver setup
        groups: dict = {}
        for p in pts:
            if p.impl in ("iree-task", "iree-sync") and usable(p):
                groups.setdefault((p.impl, p.w), []).append(p)
        for (impl, w), group in sorted(groups.items()):
            tick(f"{impl} w={w} ({len(group)} programs)")
            driver = "local-task" if impl == "iree-task" else "local-sync"
            for res in measure.iree_python(group, driver, w, modules, inputs, refs, repeat):
                ctx.record(res)
            done += len(group) - 1

        # 5. IREE through iree-benchmark-module (C++)
        for p in pts:
            if p.impl == "iree-bench" and usable(p):
                tick(p.name)
                ctx.record(measure.iree_bench(p, modules[(p.n, p.c)], inputs[p.n], refs[p.n], repeat,
                                              min_time_s=0.01))

        # 6. profiles of one configuration per c (n, largest w): IREE's profiler and Tracy around
        # iree-benchmark-module, and Tracy around the Python runtime path
        if profiled:
            n = params["n"]
            captures = [("ireeperf", "bench"), ("tracy", "bench"), ("tracy", "python")]
            captures = [cap for cap in captures if params["profiler"] in ("both", cap[0])]
            for c in params["chunks"]:
                tick(f"profile c={c}")
                if (n, c) in broken:
                    continue
                mod = modules[(n, c)]
                for source, via in captures:
                    capdir = tmpdir / f"cap_{c}_{source}_{via}"
                    capdir.mkdir()
                    try:
                        path, cmd = _capture(source, via, mod.vmfb, inputs[n], w_max, capdir)
                    except (ExternalCommandError, FileNotFoundError) as exc:
                        outputs["capture_errors"].append(f"{source} via {via} c={c}: {exc}")
                        continue
                    name = profiles.attachment_name(n, c, w_max, source, via)
                    blob = path.read_bytes()
                    ctx.attach(name, f"trace/{'ireeperf-jsonl' if source == 'ireeperf' else 'tracy'}", blob)
                    outputs["captures"].append({"name": name, "source": source, "via": via, "c": c, "w": w_max,
                                                "n": n, "bytes": len(blob), "command": cmd})
    outputs["loadavg_end"] = list(os.getloadavg())
    ctx.progress(1.0, "done")
    return outputs


def _capture(source: str, via: str, vmfb: Path, input_npy: Path, workers: int, capdir: Path) -> tuple[Path, str]:
    """One profile of the module: IREE's profiler around iree-benchmark-module ("ireeperf"), or
    a Tracy capture around iree-benchmark-module ("bench") or the iree.runtime call ("python").
    Returns the capture file and the command that produced it."""
    from studies._cpu_reduction import iree_tools, measure

    if source == "ireeperf":
        return iree_tools.capture_ireeperf(vmfb, input_npy, workers, capdir)
    if via == "bench":
        return iree_tools.capture_tracy(capdir, iree_tools.traced_benchmark(vmfb, input_npy, workers))
    job = [{"key": "profile", "vmfb": str(vmfb), "input": str(input_npy)}]
    return iree_tools.capture_tracy(capdir, lambda env: measure.run_iree_python(
        job, "local-task", workers, repeat=3, env=env, exit_crash_ok=True)[1])


# --- analysis -------------------------------------------------------------------------------------

def _series(impl, c) -> str:
    return impl if c is None or c != c else f"{impl} c={int(c)}"


def _variants(rec: RunRecord) -> pd.DataFrame:
    df = tables.with_us(tables.variants_table(rec))
    if df.empty:
        return df
    df["c"] = df["c"].astype("Int64") if "c" in df else pd.NA
    df["series"] = [_series(i, c if c is not pd.NA else None) for i, c in zip(df["impl"], df["c"])]
    floor = rec.floor_ns or float("nan")
    df["floor_note"] = np.where(df["median_ns"] < 10_000, f"< 10 us: harness floor {stats.fmt_ns(floor)}", "")
    return df


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    from studies._cpu_reduction import profiles

    p = rec.params
    df = _variants(rec)
    out: dict[str, pd.DataFrame] = {}
    profs = profiles.load_profiles(rec) if rec.attachments else []
    phase_df = profiles.phase_table(profs) if profs else pd.DataFrame()
    compute = profiles.compute_us(phase_df)
    ok = df[df["correct"]] if len(df) else df
    w_max = max(p.get("workers", [1]))

    # overview at n and the largest w (single-thread variants at w = 1), seed's shape
    if len(ok):
        ov = ok[(ok["n"] == p["n"]) & ((ok["w"] == w_max) | ok["impl"].isin(SINGLE_THREAD))].copy()
        torch_row = ov[ov["impl"] == "torch"]
        base = float(torch_row["median_us"].iloc[0]) if len(torch_row) else float("nan")
        comp = [compute.get((p["n"], int(c), w_max)) if c is not pd.NA and i in IREE_IMPLS and i != "iree-sync"
                else None for i, c in zip(ov["impl"], ov["c"])]
        ov["compute_us"] = [x[0] if x else float("nan") for x in comp]
        ov["compute_from"] = [f"{x[1]} profile" if x else "" for x in comp]
        ov["overhead_us"] = ov["median_us"] - ov["compute_us"]
        ov["vs_torch"] = ov["median_us"] / base
        # A loaded 2-core box can stall torch's OpenMP barrier for a scheduler tick at w > 1;
        # the fastest torch at any w keeps the comparison readable then.
        at_n = ok[(ok["n"] == p["n"]) & (ok["impl"] == "torch")]
        ov["vs_best_torch"] = ov["median_us"] / (float(at_n["median_us"].min()) if len(at_n) else float("nan"))
        out["overview"] = ov[["series", "impl", "c", "w", "median_us", "ci_lo_us", "ci_hi_us", "compute_us",
                              "overhead_us", "vs_torch", "vs_best_torch", "compute_from", "noise",
                              "floor_note"]].rename(
            columns={"median_us": "total_us"}).reset_index(drop=True)

        sc = ok[ok["n"] == p["n"]]
        if len(sc):
            out["scaling"] = sc[["series", "impl", "c", "w", "median_us", "ci_lo_us", "ci_hi_us", "noise",
                                 "floor_note"]].sort_values(["series", "w"]).reset_index(drop=True)

        sz = ok[(ok["w"] == w_max) | ok["impl"].isin(SINGLE_THREAD)]
        if "sizes" in p.get("experiments", []) and sz["n"].nunique() > 1:
            bw = rec.outputs.get("bandwidth", {}).get(str(w_max))
            floor_gbps = bw["copy_gbps"] if bw else float("nan")
            sz = sz[["series", "impl", "c", "w", "n", "median_ns", "ci_lo_ns", "ci_hi_ns", "median_us",
                     "floor_note"]].sort_values(["series", "n"]).copy()
            # A streaming sum reads 4 bytes per element; the floor lets those reads move at the copy's
            # aggregate rate (STREAM convention: read + write bytes per second).
            sz["floor_us"] = sz["n"] * 4 / floor_gbps / 1e3
            sz["overhead_share"] = 1 - sz["floor_us"] / sz["median_us"]
            sz["overhead_dominates"] = sz["overhead_share"] > 0.5
            out["sizes"] = sz.reset_index(drop=True)

    bw = rec.outputs.get("bandwidth", {})
    if bw:
        out["bandwidth"] = pd.DataFrame([{"workers": int(w), "copy_gbps": b["copy_gbps"],
                                          "bytes_per_copy": b["bytes_per_copy"], "samples": len(b["samples_ns"]),
                                          "correct": b["correct"]} for w, b in sorted(bw.items(), key=lambda kv: int(kv[0]))])
    if len(phase_df):
        out["phases"] = phase_df
        out["timeline"] = profiles.timeline_table(profs)
    return out


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    import altair as alt

    from workbench import charts as wbcharts

    out = {}
    if "overview" in tbls and len(tbls["overview"]):
        ov = tbls["overview"].rename(columns={"total_us": "median_us", "ci_lo_us": "lo_us", "ci_hi_us": "hi_us"})
        out["overview"] = wbcharts.median_ci_bars(
            ov.assign(median_ns=ov["median_us"] * 1e3, ci_lo_ns=ov["lo_us"] * 1e3, ci_hi_ns=ov["hi_us"] * 1e3,
                      correct=True, n=0, check=""), x="series",
            title="Total time per call at n, largest w (median, 95% CI)")
    if "scaling" in tbls and len(tbls["scaling"]):
        sc = tbls["scaling"]
        sc = sc.assign(median_ns=sc["median_us"] * 1e3, ci_lo_ns=sc["ci_lo_us"] * 1e3, ci_hi_ns=sc["ci_hi_us"] * 1e3)
        out["scaling"] = wbcharts.line_with_ci(sc, x="w", color="series", x_title="workers / threads",
                                               title="Thread scaling: time per call vs workers")
    if "sizes" in tbls and len(tbls["sizes"]):
        sz = tbls["sizes"]
        lines = wbcharts.line_with_ci(sz, x="n", color="series", log_x=True, log_y=True, x_title="N (elements)",
                                      title="Size sweep (log-log) with the memory-bandwidth floor")
        fl = sz.drop_duplicates("n")[["n", "floor_us"]].assign(what="bandwidth floor (N*4 B / copy bw)")
        floor = alt.Chart(fl).mark_line(strokeDash=[6, 3], color="black").encode(
            x=alt.X("n:Q", scale=alt.Scale(type="log")), y=alt.Y("floor_us:Q", scale=alt.Scale(type="log")),
            tooltip=["n", alt.Tooltip("floor_us:Q", format=".2f"), "what"])
        cross = sz[~sz["overhead_dominates"]].groupby("series", as_index=False)["n"].min()
        marks = alt.Chart(cross).mark_rule(strokeDash=[2, 2], opacity=0.6).encode(
            x="n:Q", color="series:N", tooltip=["series", alt.Tooltip("n:Q", title="overhead < 50% from N")])
        out["sizes"] = (lines + floor + marks).properties(width=520, height=320)
    if "phases" in tbls and len(tbls["phases"]):
        ph = tbls["phases"]
        ph = ph[~ph["phase"].isin(["total", "unavailable"])].assign(
            capture=lambda d: d["source"] + " c=" + d["c"].astype(str) + " w=" + d["w"].astype(str) + " via "
            + d["via"])
        out["phases"] = alt.Chart(ph).mark_bar().encode(
            y=alt.Y("capture:N", title=None), x=alt.X("median_us:Q", stack="zero", title="median us per iteration"),
            color=alt.Color("phase:N", sort=list(ph["phase"].unique())),
            order=alt.Order("phase_order:Q"),
            tooltip=["capture", "phase", alt.Tooltip("median_us:Q", format=".1f"),
                     alt.Tooltip("share_pct:Q", format=".0f")],
        ).transform_calculate(phase_order="indexof(['VM setup','scheduling delay','dispatch compute',"
                                          "'inter-dispatch','cleanup + wake-up'], datum.phase)").properties(
            title="Phase breakdown of one steady-state iteration", width=520)
    if "timeline" in tbls and len(tbls["timeline"]):
        tl = tbls["timeline"]
        tl = tl[tl["kind"] == "span"]
        for cap in tl["capture"].unique():
            d = tl[tl["capture"] == cap]
            key = "timeline_" + "".join(ch for ch in cap.replace(" ", "_") if ch.isalnum() or ch == "_")
            out[key] = alt.Chart(d).mark_bar(height=10).encode(
                y=alt.Y("track:N", sort=list(dict.fromkeys(d["track"])), title=None),
                x=alt.X("start_us:Q", title="us from iteration start"), x2="end_us:Q",
                color=alt.Color("role:N", scale=alt.Scale(domain=["dispatch", "wait", "runtime"],
                                                          range=["#d62728", "#bbbbbb", "#4c78a8"])),
                tooltip=["track", "name", alt.Tooltip("start_us:Q", format=".1f"),
                         alt.Tooltip("end_us:Q", format=".1f")],
            ).properties(title=f"One iteration, per lane/thread: {cap}", width=560)
    return out


# --- report ---------------------------------------------------------------------------------------

def verdict(rec: RunRecord) -> str:
    """One line: torch vs the fastest IREE variant at n and the largest w, and IREE's compute share."""
    failed = [v.variant for v in rec.variants if not v.correct]
    tail = f" {len(failed)} variant(s) FAILED their check: {esc(', '.join(failed))}." if failed else ""
    try:
        ov = analyze(rec).get("overview")
    except Exception as exc:  # the report still shows the raw results
        return f"Analysis failed ({esc(f'{type(exc).__name__}: {exc}')}).{tail}"
    if ov is None or ov.empty:
        return "No checked variant at n." + tail
    torch_rows = ov[ov["impl"] == "torch"]
    iree = ov[ov["impl"].isin(IREE_IMPLS)].sort_values("total_us")
    if torch_rows.empty or iree.empty:
        best = ov.sort_values("total_us").iloc[0]
        return f"Fastest at N={rec.params['n']:,}: {esc(best['series'])} {best['total_us']:.1f} us.{tail}"
    t, b = torch_rows.iloc[0], iree.iloc[0]
    best_torch = b["total_us"] / b["vs_best_torch"]
    text = (f"N={rec.params['n']:,}, {int(t['w'])} threads: torch.sum {t['total_us']:.1f} us "
            f"[{t['ci_lo_us']:.1f}, {t['ci_hi_us']:.1f}] (fastest torch at any w: {best_torch:.1f} us), fastest "
            f"IREE {esc(b['series'])} {b['total_us']:.1f} us [{b['ci_lo_us']:.1f}, {b['ci_hi_us']:.1f}] "
            f"({b['vs_best_torch']:.2f}x the fastest torch).")
    profiled = iree[iree["compute_us"].notna()]
    if len(profiled):
        r = profiled.iloc[0]
        text += (f" {esc(r['series'])}: compute {r['compute_us']:.1f} us of {r['total_us']:.1f} us "
                 f"({100 * r['compute_us'] / r['total_us']:.0f}%), the rest runtime overhead.")
    return text + tail


def _fmt_us(x, floor_ns: float | None = None) -> str:
    """``12.3 us``; below 10 us the harness floor is stated beside the figure."""
    if x is None or x != x:
        return "n/a"
    note = f" (harness floor {stats.fmt_ns(floor_ns)})" if floor_ns and 0 <= x < 10 else ""
    return f"{x:.1f} us{note}"


def report_sections(rec: RunRecord, tbls: dict[str, pd.DataFrame]) -> list[str]:
    from studies._cpu_reduction import profiles
    from workbench.report import md_table

    env = rec.env
    machine = esc(f"{env.get('cpu_model', '?')}, {env.get('cpu_logical', '?')} logical CPUs")
    floor = stats.fmt_ns(rec.floor_ns or float("nan"))
    parts = []

    def fmt_us(x):
        return _fmt_us(x, rec.floor_ns)

    ov = tbls.get("overview")
    if ov is not None and len(ov):
        cols = {r.series: r for r in ov.itertuples()}
        rows = [("Total (measured)", "total_us"), ("Compute (profile)", "compute_us"),
                ("Runtime overhead", "overhead_us")]
        body = [{"": label, **{s: fmt_us(getattr(r, col)) for s, r in cols.items()}} for label, col in rows]
        for label, col in (("vs torch (same w)", "vs_torch"), ("vs fastest torch (any w)", "vs_best_torch")):
            body.append({"": label, **{s: f"{getattr(r, col):.2f}x" if getattr(r, col) == getattr(r, col) else "n/a"
                                       for s, r in cols.items()}})
        w_max = max(rec.params.get("workers", [1]))
        parts.append(f"## Overview (live, {machine}; N={rec.params['n']:,}, {w_max} workers/threads)\n\n"
                     + md_table(pd.DataFrame(body))
                     + f"\n\nCompute is the median dispatch compute of the profiled iteration (ireeperf, else "
                       f"Tracy) for the same c and w; overhead = total - compute. Figures below 10 us sit "
                       f"within a few times the harness floor ({floor} per call).")
        t = {r.series: r.total_us for r in ov.itertuples()}
        comp_rows = []
        if "torch" in t and "torch-out" in t:
            comp_rows.append({"item": "per-call allocation (torch.sum - torch.sum(out=))",
                              "live": fmt_us(t["torch"] - t["torch-out"]), "seed (7975WX)": "2 us"})
        for c in sorted({int(x) for x in ov["c"].dropna()}):
            py, cc = t.get(f"iree-task c={c}"), t.get(f"iree-bench c={c}")
            if py is not None and cc is not None:
                # The C++ harness can measure slower than the Python path (load, short repetitions);
                # a negative difference is then no Python cost, and the cell says so.
                note = "" if py >= cc else (" (negative: iree-benchmark-module measured slower than the Python "
                                            "path here; no Python cost can be read off)")
                comp_rows.append({"item": f"Python runtime cost, c={c} (iree-task Python - iree-benchmark-module)",
                                  "live": fmt_us(py - cc) + note, "seed (7975WX)": "(not measured)"})
        best = ov[ov["impl"].isin(IREE_IMPLS)].sort_values("total_us").head(1)
        if len(best) and "torch" in t:
            comp_rows.append({"item": f"total: torch vs best IREE ({best['series'].iloc[0]})",
                              "live": f"{fmt_us(t['torch'])} vs {fmt_us(best['total_us'].iloc[0])}",
                              "seed (7975WX)": "15 us vs 56 us"})
        sz = tbls.get("sizes")
        if sz is not None and len(sz):
            small = sz[sz["n"] == sz["n"].min()].set_index("series")["median_us"]
            iree_small = small[[i for i in small.index if i.startswith("iree-bench")]]
            if "torch" in small and len(iree_small):
                comp_rows.append({"item": f"smallest N ({int(sz['n'].min()):,}): dispatch floor proxy, torch vs "
                                          f"best iree-bench ({iree_small.idxmin()})",
                                  "live": f"{fmt_us(small['torch'])} vs {fmt_us(iree_small.min())}",
                                  "seed (7975WX)": "1.1 us vs ~10 us (dispatch floor)"})
        if comp_rows:
            parts.append("## Comparison summary: PyTorch vs IREE (live)\n\n" + md_table(pd.DataFrame(comp_rows)))
    ph = tbls.get("phases")
    if ph is not None and len(ph):
        for (c, w, source, via), g in ph.groupby(["c", "w", "source", "via"], sort=True):
            if (g["phase"] == "unavailable").any():
                parts.append(f"### Breakdown c={c} @{w}w from {esc(source)} via {esc(via)}: unavailable\n\n"
                             f"> {esc(g['note'].iloc[0])}")
                continue
            shown = g[["phase", "median_us", "share_pct", "note"]].rename(
                columns={"median_us": "duration_us", "share_pct": "%", "note": "description"})
            parts.append(f"## Breakdown of one steady-state iteration: c={c} @{w}w ({esc(source)}, {esc(via)}, "
                         f"{int(g['iterations'].iloc[0])} iterations, medians)\n\n" + md_table(shown))
        for prof in profiles.load_profiles(rec):
            if prof["per_iter"] is not None:
                parts.append(f"### Timeline of the median steady-state iteration: {esc(prof['source'])} c={prof['c']} "
                             f"@{prof['w']}w via {esc(prof['via'])} (lanes in the profiler's order)\n\n"
                             + esc(profiles.ascii_timeline(prof), "block"))
    sc = tbls.get("scaling")
    if sc is not None and len(sc):
        ms = sc.pivot_table(index="w", columns="series", values="median_us", aggfunc="first") / 1e3
        ms = ms.reset_index().rename(columns={"w": "workers"})
        ms.columns.name = None
        parts.append(f"## Thread scaling (ms per call, N={rec.params['n']:,}, live on {machine})\n\n" + md_table(ms)
                     + f"\n\nSingle-thread variants (numpy, iree-sync) run at 1 worker only. Harness floor "
                       f"{floor} per call; the scaling table in us with CIs is in the tables above.")
    bw = tbls.get("bandwidth")
    progs = rec.outputs.get("programs", {})
    env_lines = [f"- machine: {machine}; torch threads set per variant; harness floor {floor} per call",
                 f"- IREE {esc(rec.outputs.get('iree_versions', {}))}, flags "
                 f"{esc(' '.join(map(str, rec.outputs.get('iree_flags', []))))}",
                 f"- correctness: {esc(rec.outputs.get('tolerance', ''))}"]
    if bw is not None and len(bw):
        env_lines.append("- copy bandwidth (same run): " + ", ".join(
            f"{r.workers} thread(s) {r.copy_gbps:.1f} GB/s" for r in bw.itertuples()))
    for key, info in progs.items():
        pad = f", pad {info['pad']} elements materialised as {info['fills']} fill + {info['copies']} copy" \
            if info.get("copies") else ""
        # Measured on IREE 3.13: a chunk length that is not a multiple of the 16-lane vector
        # takes a ~7x slower codegen path (1M, c=8: 900 us vs 131 us for 1,000,064 elements).
        slow = (f"; chunk length {esc(info['m'])} is not a multiple of 16: IREE 3.13's slow reduction codegen path "
                "(the seed's 'c=8 fixed' needed codegen fix #24010)") if info["c"] > 1 and info["m"] % 16 else ""
        env_lines.append(f"- program {esc(key)}: {esc(info['dispatches'])} dispatch(es) {esc(info['dispatch_names'])}"
                         f"{esc(pad)}{slow}")
    load = rec.outputs.get("loadavg_start")
    if load:
        busy = load[0] > 0.5 * rec.outputs.get("cores", 1)
        env_lines.append(f"- load average (1/5/15 min) at start {', '.join(f'{x:.2f}' for x in load)}"
                         + (" -- WARNING: other processes were running; multi-thread figures suffer most"
                            if busy else ""))
    for err in rec.outputs.get("capture_errors", []):
        env_lines.append(f"- capture failed: {esc(err)}")
    parts.append("## Environment (live run)\n\n" + "\n".join(env_lines))
    return parts


# --- the seed's published figures (data, cited; never used as results) ----------------------------

SEED_FIGURES = {
    "source": "seed 000_a9087dd746f9e088.txt: IREE issue #24011, '[CPU] Reduction (sum) performance study on AMD "
              "Zen4 7975WX' (PyTorch 2.9.0+cpu with MKL; IREE --iree-opt-level=O2 --iree-opt-data-tiling "
              "--iree-llvmcpu-target-cpu=host, on top of codegen fix #24010)",
    "machine": "32-core AMD Zen4 7975WX, AVX-512, 32 threads",
    "tables": {
        "Overview: sum 1D N=1M @32 threads/workers": [
            {"": "Total (measured)", "MKL": "15 us", "IREE no-split": "61 us", "IREE c=8 fixed": "59 us",
             "IREE c=2": "61 us"},
            {"": "Compute", "MKL": "", "IREE no-split": "39.5 us", "IREE c=8 fixed": "9.9 us", "IREE c=2": "22.7 us"},
            {"": "Runtime overhead", "MKL": "", "IREE no-split": "21.5 us", "IREE c=8 fixed": "49.1 us",
             "IREE c=2": "38.3 us"},
            {"": "vs MKL", "MKL": "1.0x", "IREE no-split": "4.1x", "IREE c=8 fixed": "3.9x", "IREE c=2": "4.1x"},
        ],
        "Comparison summary: PyTorch/OpenMP vs IREE HAL/task system": [
            {"": "Dispatch floor", "PyTorch/OpenMP": "1.1 us", "IREE": "~10 us"},
            {"": "Thread fork/join", "PyTorch/OpenMP": "~13 us (OpenMP)", "IREE": "~15 us (task scheduler)"},
            {"": "Per-call allocations", "PyTorch/OpenMP": "2 us (output + 128B buffer)",
             "IREE": "~15 us (semaphores, fences, cmd buffer, heap buffer)"},
            {"": "Total @32t, 1M sum", "PyTorch/OpenMP": "15 us", "IREE": "56 us"},
        ],
        "Tracy breakdown, c=2 vs c=8 fixed @32w (us, % of iteration)": [
            {"phase": "VM setup", "c=2 (60.7 us)": "12.6 (21%)", "c=8 fixed (56.0 us)": "12.4 (22%)"},
            {"phase": "Scheduling delay", "c=2 (60.7 us)": "5.8 (10%)", "c=8 fixed (56.0 us)": "14.8 (26%)"},
            {"phase": "Dispatch 0 compute", "c=2 (60.7 us)": "22.8 (37%)", "c=8 fixed (56.0 us)": "~10 (18%)"},
            {"phase": "Inter-dispatch + dispatch_1", "c=2 (60.7 us)": "3.1 (5%)", "c=8 fixed (56.0 us)": "3.7 (7%)"},
            {"phase": "Cleanup + wakeup", "c=2 (60.7 us)": "16.4 (27%)", "c=8 fixed (56.0 us)": "15.1 (27%)"},
        ],
        "Thread scaling (ms per call)": [
            {"workers": 1, "no-split": 0.059, "c=8 fixed": 0.080, "MKL": 0.031},
            {"workers": 2, "no-split": 0.065, "c=8 fixed": 0.069, "MKL": 0.022},
            {"workers": 4, "no-split": 0.065, "c=8 fixed": 0.056, "MKL": 0.015},
            {"workers": 8, "no-split": 0.065, "c=8 fixed": 0.055, "MKL": 0.011},
            {"workers": 16, "no-split": 0.065, "c=8 fixed": 0.063, "MKL": 0.010},
            {"workers": 32, "no-split": 0.066, "c=8 fixed": 0.059, "MKL": 0.015},
        ],
    },
    "notes": [
        "Seed's 'c=8 fixed' used tile 124992 (a multiple of 16) after codegen fix #24010; the live c=8 here is "
        "the plain expand_shape split compiled by the iree-base-compiler wheel.",
        "Seed's MKL column is torch.sum with PyTorch 2.9.0+cpu (MKL/OpenMP); the live 'torch' is this venv's torch.",
        "Seed per-thread timeline (c=8 fixed, 56 us): T1 vm_setup 12.4 us then blocked 40.2 us; dispatch_0 "
        "shards of ~5 us on T2-T9 between t=27.3 and t=37.2 us; dispatch_1 (reduce 9->1, 0.04 us) at t=41.0 us "
        "on T10; iteration ends t=55.5 us.",
    ],
}
