"""Charts, verdict and report sections of the cpu-reduction study, built from the tables of
:mod:`.analysis` only (no arithmetic on samples here: every figure shown was computed there)."""

from __future__ import annotations

import pandas as pd

from workbench import stats
from workbench.untrusted import escape as esc

from .plan import GRAIN_SIZE, IREE_PROVIDERS
from .seed import SEED_FIGURES

PHASE_ORDER = ("['VM setup','scheduling delay','dispatch compute','inter-dispatch','cleanup + wake-up']")


# --- charts ---------------------------------------------------------------------------------------

def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    import altair as alt

    from workbench import charts as wbcharts

    out = {}
    if "overview" in tbls and len(tbls["overview"]):
        out["overview"] = _overview_chart(tbls["overview"])
    if "scaling" in tbls and len(tbls["scaling"]):
        # the seed's scaling chart: IREE through its C++ harness and torch.sum; a heavy-tailed
        # CI (a stalled OpenMP barrier) is clipped so it cannot flatten every line
        sc = tbls["scaling"][tbls["scaling"]["provider"].isin(["iree-bench", "torch"])]
        sc = sc.assign(ci_hi_ns=sc["ci_hi_ns"].clip(upper=3 * sc["median_ns"].max()))
        out["scaling"] = wbcharts.line_with_ci(sc, x="w", color="series", x_title="workers / threads", log_y=True,
                                               title="Thread scaling (iree-benchmark-module, torch.sum)")
    if "sizes" in tbls and len(tbls["sizes"]):
        out["sizes"] = _sizes_chart(tbls["sizes"])
    if "_grain" in tbls and len(tbls["_grain"]):
        g = tbls["_grain"]
        lines = wbcharts.line_with_ci(g, x="n", color="series", x_title="N (elements)",
                                      title=f"torch.sum around GRAIN_SIZE = {GRAIN_SIZE:,}: serial below, parallel "
                                            "from it")
        rule = alt.Chart(pd.DataFrame({"n": [GRAIN_SIZE], "what": ["GRAIN_SIZE (aten TensorIterator.h)"]})).mark_rule(
            strokeDash=[4, 3], color="black").encode(x="n:Q", tooltip=["what", "n"])
        out["grain"] = (lines + rule).properties(width=520, height=300)
    if "forkjoin" in tbls and len(tbls["forkjoin"]):
        fj = tbls["forkjoin"]
        base = alt.Chart(fj).encode(x=alt.X("w:Q", title="workers / threads", scale=alt.Scale(type="log", base=2)),
                                    color=alt.Color("mechanism:N", legend=alt.Legend(labelLimit=320)))
        out["forkjoin"] = (base.mark_line(point=True).encode(
            y=alt.Y("forkjoin_us:Q", title="time at w minus at 1 worker (us)"),
            tooltip=["mechanism", "w", alt.Tooltip("forkjoin_us:Q", format=".2f"), alt.Tooltip("lo_us:Q", format=".2f"),
                     alt.Tooltip("hi_us:Q", format=".2f"), "status"])
            + base.mark_errorbar().encode(y=alt.Y("lo_us:Q", title="time at w minus at 1 worker (us)"),
                                          y2="hi_us:Q")).properties(
            title="Fork/join: what going from 1 to w workers adds (median, 95% CI)", width=460, height=260)
    if "phases" in tbls and len(tbls["phases"]):
        out["phases"] = _phases_chart(tbls["phases"])
    if "timeline" in tbls and len(tbls["timeline"]):
        out.update(_timelines(tbls["timeline"]))
    # "pad": the plot keeps its own width and height and legends, titles and rotated labels add
    # to them (Streamlit's "fit" squeezes a plot with a long legend to a sliver)
    return {k: v.properties(autosize=alt.AutoSizeParams(type="pad")) for k, v in out.items()}


def _overview_chart(ov: pd.DataFrame):
    """Bars of the total per call with CI whiskers; a whisker far above every median (a
    heavy tail) is clipped at the top of the axis, its true bound in the tooltip."""
    import altair as alt

    top = float(ov["total_us"].max()) * 1.6
    base = alt.Chart(ov).encode(x=alt.X("series:N", sort=None, title=None))
    y = alt.Scale(domain=[0, top], clamp=True)
    tip = ["series", "w", alt.Tooltip("total_us:Q", format=".1f"), alt.Tooltip("ci_lo_us:Q", format=".1f"),
           alt.Tooltip("ci_hi_us:Q", format=".1f"), alt.Tooltip("noise:Q", format=".1%")]
    bars = base.mark_bar().encode(y=alt.Y("total_us:Q", scale=y, title="us per call (median)"), tooltip=tip)
    whiskers = base.mark_errorbar(color="black", clip=True).encode(
        y=alt.Y("ci_lo_us:Q", scale=y, title="us per call (median)"), y2="ci_hi_us:Q")
    return (bars + whiskers).properties(
        title="Total time per call at n, largest w (median, 95% CI; whiskers clipped at the axis top)",
        width=alt.Step(36), height=260)


def _sizes_chart(sz: pd.DataFrame):
    import altair as alt

    from workbench import charts as wbcharts

    lines = wbcharts.line_with_ci(sz, x="n", color="series", log_x=True, log_y=True, x_title="N (elements)",
                                  title="Size sweep (log-log) with the memory-bandwidth floor")
    fl = sz.drop_duplicates("n")[["n", "floor_us"]].assign(what="bandwidth floor (N*4 B / copy bw)")
    floor = alt.Chart(fl).mark_line(strokeDash=[6, 3], color="black").encode(
        x=alt.X("n:Q", scale=alt.Scale(type="log")), y=alt.Y("floor_us:Q", scale=alt.Scale(type="log")),
        tooltip=["n", alt.Tooltip("floor_us:Q", format=".2f"), "what"])
    cross = sz[~sz["overhead_dominates"]].groupby("series", as_index=False)["n"].min()
    marks = alt.Chart(cross).mark_rule(strokeDash=[2, 2], opacity=0.6).encode(
        x="n:Q", color="series:N", tooltip=["series", alt.Tooltip("n:Q", title="overhead < 50% from N")])
    return (lines + floor + marks).properties(width=520, height=320)


def _phases_chart(ph: pd.DataFrame):
    import altair as alt

    ph = ph[~ph["phase"].isin(["total", "unavailable"])].assign(
        capture=lambda d: d["capture"] + " · " + d["statistic"])
    return alt.Chart(ph).mark_bar().encode(
        y=alt.Y("capture:N", title=None, axis=alt.Axis(labelLimit=460)),
        x=alt.X("median_us:Q", stack="zero", title="us per iteration"),
        color=alt.Color("phase:N", sort=list(ph["phase"].unique())),
        order=alt.Order("phase_order:Q"),
        tooltip=["capture", "phase", alt.Tooltip("median_us:Q", format=".1f"),
                 alt.Tooltip("share_pct:Q", format=".0f"), "statistic"],
    ).transform_calculate(phase_order=f"indexof({PHASE_ORDER}, datum.phase)").properties(
        title="Phase breakdown per profiled iteration (steady state; bars: median of each phase)", width=520)


def _timelines(tl: pd.DataFrame) -> dict:
    import altair as alt

    out = {}
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
        ).properties(title=f"Median steady-state iteration, per thread: {cap}", width=560)
    return out


# --- verdict --------------------------------------------------------------------------------------

def _ci(x, lo, hi, unit="us", digits=1) -> str:
    sep = "" if unit == "%" else " "
    return f"{x:.{digits}f}{sep}{unit} [{lo:.{digits}f}, {hi:.{digits}f}]"


def verdict_text(tbls: dict[str, pd.DataFrame], params: dict) -> str:
    """torch vs the fastest IREE at n and the largest w (with the ratio's CI), IREE's compute
    share from its own profiled iterations, and the clear derived results of the experiments."""
    parts = []
    ov = tbls.get("overview")
    if ov is not None and len(ov):
        torch_rows = ov[ov["provider"] == "torch"]
        iree = ov[ov["provider"].isin(IREE_PROVIDERS)].sort_values("total_us")
        if len(torch_rows) and len(iree):
            t, b = torch_rows.iloc[0], iree.iloc[0]
            text = (f"N={params['n']:,}: fastest IREE {esc(b['series'])} {_ci(b['total_us'], b['ci_lo_us'], b['ci_hi_us'])} "
                    f"@{int(b['w'])}w")
            if b["vs_best_torch"] == b["vs_best_torch"]:
                text += (f" = {b['vs_best_torch']:.2f}x [{b['vs_best_torch_lo']:.2f}, {b['vs_best_torch_hi']:.2f}] the "
                         f"fastest torch.sum ({b['best_torch_us']:.1f} us at {int(b['best_torch_w'])} threads)")
            text += f"; torch.sum at {int(t['w'])} threads {_ci(t['total_us'], t['ci_lo_us'], t['ci_hi_us'])}."
            parts.append(text)
        elif len(ov):
            b = ov.sort_values("total_us").iloc[0]
            parts.append(f"Fastest at N={params['n']:,}: {esc(b['series'])} {_ci(b['total_us'], b['ci_lo_us'], b['ci_hi_us'])}.")
        prof = ov[ov["compute_share_pct"].notna() & (ov["profile_status"] == "clear")]
        if len(prof):
            r = prof.sort_values("total_us").iloc[0]
            parts.append(f"{esc(r['series'])} (profiled, {int(r['profile_iterations'])} iterations): compute "
                         f"{_ci(r['compute_share_pct'], r['compute_share_lo_pct'], r['compute_share_hi_pct'], '%', 0)} "
                         f"of each iteration, runtime overhead {_ci(r['overhead_us'], r['overhead_lo_us'], r['overhead_hi_us'])}.")
    over = tbls.get("overhead")
    if (ov is None or not len(ov)) and over is not None and len(over):
        for cap, g in over[(over["w"] == over["w"].max()) & (over["source"] == over["source"].min())].groupby(
                "capture", sort=False):
            q = g.set_index("quantity")
            if q.loc["compute share", "status"] == "clear":
                parts.append(f"{esc(cap)}, {int(q['iterations'].iloc[0])} iterations: total "
                             f"{_ci(q.loc['total', 'point'], q.loc['total', 'lo'], q.loc['total', 'hi'])}, compute "
                             f"{_ci(q.loc['compute share', 'point'], q.loc['compute share', 'lo'], q.loc['compute share', 'hi'], '%', 0)}"
                             f", overhead {_ci(q.loc['overhead', 'point'], q.loc['overhead', 'lo'], q.loc['overhead', 'hi'])}.")
    al = tbls.get("alloc")
    if al is not None and len(al):
        clear = al[al["status"] == "clear"].sort_values("n")
        if len(clear):
            r = clear.iloc[0]
            parts.append(f"torch.sum's per-call allocation at w=1: {_ci(r['alloc_us'], r['alloc_lo_us'], r['alloc_hi_us'], digits=2)} "
                         f"(n={int(r['n']):,}).")
    fj = tbls.get("forkjoin")
    if fj is not None and len(fj):
        said = []
        for mech, label in (("OpenMP", "OpenMP"), ("IREE task", "IREE's task system")):
            g = fj[fj["mechanism"].str.startswith(mech)].sort_values("w")
            if len(g) and g.iloc[-1]["status"] == "clear":
                r = g.iloc[-1]
                said.append(f"{label} {_ci(r['forkjoin_us'], r['lo_us'], r['hi_us'])} (1 -> {int(r['w'])})")
        if said:
            parts.append("Fork/join: " + ", ".join(said) + ".")
    if not parts:
        return "No checked variant at n."
    return " ".join(parts)


# --- report sections ------------------------------------------------------------------------------

def _fmt_us(x, lo=None, hi=None) -> str:
    if x is None or x != x:
        return "n/a"
    d = 2 if abs(x) < 1 else 1
    if lo is None or lo != lo:
        return f"{x:.{d}f} us"
    return f"{x:.{d}f} us [{lo:.{d}f}, {hi:.{d}f}]"


def sections(tbls: dict[str, pd.DataFrame], params: dict, env: dict, outputs: dict, floor_ns) -> list[str]:
    from workbench.report import md_table

    machine = esc(f"{env.get('cpu_model', '?')}, {env.get('cpu_logical', '?')} logical CPUs")
    floor = stats.fmt_ns(floor_ns or float("nan"))
    parts = []
    ov = tbls.get("overview")
    if ov is not None and len(ov):
        parts.append(_overview_section(ov, params, machine, floor))
    dm = tbls.get("dispatch_model")
    if dm is not None and len(dm):
        parts.append("## Dispatch model: PyTorch/OpenMP vs IREE (live, with the seed's figures)\n\n" + md_table(dm)
                     + "\n\nFork/join = time at w minus time at 1 worker of the same work (torch: the smallest "
                       "parallel sum, n = 32,768, paired by interleaved round; IREE: one 16-element tile per "
                       "worker). Allocation: torch.sum(a) - torch.sum(a, out=o) at w=1, the median of per-round "
                       "differences; IREE: Tracy zones of semaphores, fences, transient buffers, buffer views and "
                       "command-buffer state per call (zone time includes Tracy's own cost).")
    for name, title in (("grain", "GRAIN_SIZE: torch.sum at 1 thread and the largest w (us, median [95% CI])"),
                        ("alloc", "Per-call allocation of torch.sum at w=1 (interleaved rounds)"),
                        ("forkjoin", "Fork/join: time at w minus time at 1 worker")):
        t = tbls.get(name)
        if t is not None and len(t):
            parts.append(f"## {title}\n\n" + md_table(_rounded(t)))
    parts += _phase_sections(tbls)
    sc = tbls.get("scaling")
    if sc is not None and len(sc):
        ms = sc.pivot_table(index="w", columns="series", values="median_us", aggfunc="first") / 1e3
        ms = ms.reset_index().rename(columns={"w": "workers"})
        ms.columns.name = None
        parts.append(f"## Thread scaling (ms per call, N={params['n']:,}, live on {machine})\n\n" + md_table(ms.round(4))
                     + f"\n\nSingle-thread variants (numpy, iree-sync) run at 1 worker only. Harness floor "
                       f"{floor} per call; the scaling table in us with CIs is in the tables above.")
    parts.append(_environment(tbls, params, outputs, machine, floor))
    return parts


def _rounded(df: pd.DataFrame) -> pd.DataFrame:
    return df.round({c: 2 for c in df.columns if c.endswith(("_us", "ratio", "_lo", "_hi"))})


def _overview_section(ov, params, machine, floor) -> str:
    from workbench.report import md_table

    cols = {r.series: r for r in ov.itertuples()}
    body = [{"": "Total (timing run)", **{s: _fmt_us(r.total_us, r.ci_lo_us, r.ci_hi_us) for s, r in cols.items()}}]
    if ov["profile"].notna().any():
        body += [{"": "Total (profile, median iteration)", **{s: _fmt_us(r.profile_total_us, r.profile_total_lo_us,
                                                                          r.profile_total_hi_us)
                                                               for s, r in cols.items()}},
                 {"": "Compute (profile)", **{s: _fmt_us(r.compute_us, r.compute_lo_us, r.compute_hi_us)
                                              for s, r in cols.items()}},
                 {"": "Runtime overhead (profile: total - compute per iteration)",
                  **{s: _fmt_us(r.overhead_us, r.overhead_lo_us, r.overhead_hi_us) for s, r in cols.items()}},
                 {"": "Profile", **{s: (f"{r.profile}, {r.profile_iterations:.0f} iterations" if isinstance(r.profile, str)
                                        else "") for s, r in cols.items()}}]
    body.append({"": "vs torch (same w)", **{s: (f"{r.vs_torch:.2f}x [{r.vs_torch_lo:.2f}, {r.vs_torch_hi:.2f}]"
                                                 if r.vs_torch == r.vs_torch else "") for s, r in cols.items()}})
    body.append({"": "vs the fastest torch (any w)", **{
        s: (f"{r.vs_best_torch:.2f}x [{r.vs_best_torch_lo:.2f}, {r.vs_best_torch_hi:.2f}] (torch @{r.best_torch_w:.0f}t)"
            if r.vs_best_torch == r.vs_best_torch else "") for s, r in cols.items()}})
    w_max = max(params.get("workers", [1]))
    return (f"## Overview (live, {machine}; N={params['n']:,}, {w_max} workers/threads)\n\n" + md_table(pd.DataFrame(body))
            + "\n\nCompute and overhead come from one profile's own iterations (ireeperf, else Tracy) of the same "
              "c and w: overhead is total - compute of each steady-state iteration, and the figure is the median "
              f"with a bootstrap CI; never a profile's compute against another run's total. Harness floor {floor} "
              "per call. The seed's overview: "
            + ", ".join(f"{k} {v}" for k, v in SEED_FIGURES["tables"]["Overview: sum 1D N=1M @32 threads/workers"][0].items()
                        if k) + " (7975WX @32t).")


def _phase_sections(tbls) -> list[str]:
    from workbench.report import md_table

    from . import profiles

    parts = []
    pc = tbls.get("phase_compare")
    if pc is not None and len(pc):
        for (w, prof), g in pc.groupby(["w", "profiler"], sort=True):
            g = g.drop(columns=["w", "profiler"]).dropna(axis=1, how="all")
            parts.append(f"## Phases, c=2 | c=8 side by side: {esc(prof)}, {esc(w)} workers (us per iteration, share of "
                         "the median total)\n\n" + md_table(g)
                         + "\n\nEach live column: the median of each phase over the steady-state iterations (the "
                           f"first {profiles.WARMUP_ITERATIONS} are warm-up, dropped); the phases of every iteration "
                           "sum to its total, the medians need not. The seed's columns are one traced iteration "
                           "each at 32 workers.")
    ph = tbls.get("phases")
    if ph is not None and len(ph):
        for cap, g in ph.groupby("capture", sort=False):
            if (g["phase"] == "unavailable").any():
                parts.append(f"### Breakdown {esc(cap)}: unavailable\n\n> {esc(g['note'].iloc[0])}")
                continue
            shown = g[["phase", "median_us", "share_pct", "p10_us", "p90_us", "note"]].round(2)
            parts.append(f"### Breakdown per iteration: {esc(cap)} ({esc(g['statistic'].iloc[0])}; "
                         f"{int(g['warmup_dropped'].iloc[0])} warm-up dropped)\n\n" + md_table(shown))
    kt = tbls.get("key_times")
    if kt is not None and len(kt):
        for cap, g in kt.groupby("capture", sort=False):
            lines = [f"- t={r.t_us:.1f} us: {esc(r.event)}" + (f" ({esc(r.thread)})" if r.thread else "")
                     + (f" · seed t={r.seed_t_us:.1f}" if r.seed_t_us == r.seed_t_us else "") for r in g.itertuples()]
            parts.append(f"### Key timestamps of the median steady-state iteration: {esc(cap)}\n\n" + "\n".join(lines))
    for r in tbls.get("timeline_ascii", pd.DataFrame(columns=["capture", "text"])).itertuples():
        parts.append(f"### Timeline of the median steady-state iteration: {esc(r.capture)} (lanes in the profiler's "
                     f"order)\n\n{esc(r.text, 'block')}")
    al = tbls.get("iree_allocs")
    if al is not None and len(al):
        parts.append("### IREE per-call allocations from Tracy (us per iteration)\n\n"
                     + md_table(al[["capture", "group", "median_us", "calls_per_iteration", "statistic"]].round(2)))
    return parts


def _environment(tbls, params, outputs, machine, floor) -> str:
    bw = tbls.get("bandwidth")
    env_lines = [f"- machine: {machine}; torch threads set per variant; harness floor {floor} per call",
                 f"- IREE {esc(outputs.get('iree_versions', {}))}, flags "
                 f"{esc(' '.join(map(str, outputs.get('iree_flags', []))))}",
                 f"- correctness: {esc(outputs.get('tolerance', ''))}"]
    if bw is not None and len(bw):
        env_lines.append("- copy bandwidth (same run): " + ", ".join(
            f"{r.workers} thread(s) {r.copy_gbps:.1f} GB/s" for r in bw.itertuples()))
    for key, info in outputs.get("programs", {}).items():
        pad = f", pad {info['pad']} elements materialised as {info['fills']} fill + {info['copies']} copy" \
            if info.get("copies") else ""
        # Measured on IREE 3.13: a chunk length that is not a multiple of 16 takes a ~7x slower
        # codegen path (1M, even c=8: 900 us vs 131 us for 1,000,064 elements).
        slow = (f"; tile {info['m']} is not a multiple of 16: IREE 3.13's slow reduction codegen"
                if info["c"] > 1 and info["m"] % 16 else "")
        if info.get("split") == "partial-tile" and info.get("shards", 0) * info["m"] != info["n"]:
            slow = "; a partial last tile: IREE 3.13's dynamic-shape (slow) codegen"
        env_lines.append(f"- program {esc(key)}: {esc(info.get('label', ''))}, {esc(info['dispatches'])} dispatch(es) "
                         f"{esc(info['dispatch_names'])}{esc(pad)}{slow}")
    load, load_end = outputs.get("loadavg_start"), outputs.get("loadavg_end")
    if load:
        busy = max(load[0], (load_end or [0])[0]) > 0.5 * outputs.get("cores", 1)
        env_lines.append(f"- load average (1/5/15 min) at start {', '.join(f'{x:.2f}' for x in load)}"
                         + (f", at end {', '.join(f'{x:.2f}' for x in load_end)}" if load_end else "")
                         + (" -- WARNING: other processes were running; multi-thread figures suffer most"
                            if busy else ""))
    for err in outputs.get("capture_errors", []):
        env_lines.append(f"- capture failed: {esc(err)}")
    return "## Environment (live run)\n\n" + "\n".join(env_lines)
