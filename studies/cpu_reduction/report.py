"""Charts, verdict and report sections of the cpu-reduction study, built from the tables of
:mod:`.analysis` only (no arithmetic on samples here: every figure shown was computed there)."""

from __future__ import annotations

import pandas as pd

from workbench.evidence import derived
from workbench.evidence.tables import md_table
from workbench.traces.charts import PY_ZONE_COLORS
from workbench.base.untrusted import escape as esc
from workbench.evidence.verdict import Finding

from . import profiles
from .analysis import CHART_PHASES, column_name, key_programs
from .plan import GRAIN_SIZE
from .claims import SEED_N
from .seed import SEED_MACHINE, SEED_SCALING_MS

#: the seed's scaling series (its names: no-split, c=8 fixed, MKL) by the live series drawn in the
#: same colour: one name for both, the seed's dashed ("torch.sum" live; "torch.sum", the seed's)
SEED_SERIES = {"no-split": "IREE no-split", "c=8 fixed": "IREE c=8 aligned", "MKL": "torch.sum"}
#: the seed's fork/join figures @32 threads (us), drawn beside the live ones
SEED_FORKJOIN_US = {"openmp": 13.0, "iree-task": 15.0}
#: timeline colours by role (:data:`.profiles.ROLES`): Python zones in the colour every trace
#: view gives them (workbench.traces.charts.PY_ZONE_COLORS)
ROLE_COLORS = {"python": PY_ZONE_COLORS[1], "dispatch": "#d62728", "wait": "#bbbbbb", "runtime": "#4c78a8"}
TIMELINE_WIDTH = 620


# --- charts ---------------------------------------------------------------------------------------


def _seed_overview_title(tbls: dict[str, pd.DataFrame]) -> str:
    """The key table's title; at another N than the seed's it says the two are not comparable."""
    run = tbls.get("_run")
    n = int(run["n"].iloc[0]) if run is not None and len(run) and "n" in run else SEED_N
    head = "The seed's overview beside this run's"
    return head if n == SEED_N else (f"{head} (this run at N={n:,}: the seed's figures, at N={SEED_N // 1_000_000}M, "
                                     "are not comparable with it)")


#: what each table and chart is called where people read it (workbench.base.names; ids stay in the API)
TITLES = {
    "seed_overview": _seed_overview_title,
    "overview": "Time per call of every implementation", "scaling": "Thread scaling: time per call against workers",
    "python_cost": "IREE's Python cost: the iree.runtime call minus iree-benchmark-module",
    "vs_torch": "IREE against torch.sum at the same worker count",
    "alloc": "torch.sum's per-call allocation (interleaved rounds)",
    "dispatch_model": "Dispatch model: PyTorch/OpenMP against IREE", "speedup": "Speed-up from 1 worker to w",
    "sizes": "Size sweep with the copy-bandwidth floor", "grain": "torch.sum around GRAIN_SIZE",
    "forkjoin": "Fork/join: time at w workers minus time at 1",
    "forkjoin_compare": "Fork/join: IREE's task system against OpenMP", "bandwidth": "Copy bandwidth per worker count",
    "phases": "Phases of one iteration, per capture", "phase_compare": "Phases: c=2 beside c=8",
    "phase_diff": "Phases: c=8 minus c=2", "overhead": "Runtime overhead per iteration (total minus compute)",
    "key_times": "Key moments of one iteration", "iree_allocs": "IREE's allocations per iteration",
    "timeline": "Per-thread timeline of the median iteration", "timeline_ascii": "Per-thread timeline, as text",
    "timeline_*": "Per-thread timeline of the median iteration",
}

def charts(tbls: dict[str, pd.DataFrame], only: str | None = None) -> dict:
    """Every chart the run's tables make; ``only``: that one alone (a short report draws its key
    chart only, and each chart costs tens of milliseconds to build)."""
    def has(name: str) -> bool:
        return name in tbls and len(tbls[name]) > 0

    made = {"scaling": (lambda: scaling_chart(tbls)) if has("scaling") else None,
            "overview": (lambda: _overview_chart(tbls["overview"], tbls["_run"].iloc[0])) if has("overview") else None,
            "phases": (lambda: phases_chart(tbls["_phase_chart"])) if has("_phase_chart") else None,
            "grain": (lambda: grain_chart(tbls["_grain"])) if has("_grain") else None,
            "forkjoin": (lambda: _forkjoin_chart(tbls["forkjoin"])) if has("forkjoin") else None,
            "sizes": (lambda: _sizes_chart(tbls["sizes"])) if has("sizes") else None}
    out = {name: build() for name, build in made.items() if build is not None and only in (None, name)}
    if only is None and has("timeline"):
        out.update(_timelines(tbls["timeline"]))
    return out


def live_series(provider: str, c, split) -> str:
    """The scaling chart's name of a live series; the ones the seed also drew say which."""
    if provider == "torch":
        return SEED_SERIES["MKL"]
    name = column_name(c, split if isinstance(split, str) else None)
    return SEED_SERIES["c=8 fixed"] if name == "IREE c=8 aligned" else name


def scaling_chart(tbls: dict[str, pd.DataFrame]):
    """The key chart: time per call vs workers at n, iree-benchmark-module (else the Python
    runtime) per program and torch.sum, 95% CIs as bars, the seed's thread-scaling lines dashed
    in the same colours, labelled with the seed's machine."""
    from workbench.presentation import charts as wbcharts

    sc, run = tbls["scaling"], tbls["_run"].iloc[0]
    iree = "iree-bench" if (sc["provider"] == "iree-bench").any() else "iree-task"
    sc = sc[sc["provider"].isin([iree, "torch"])]
    sc = sc.assign(series=[live_series(p, c, s) for p, c, s in zip(sc["provider"], sc["c"], sc["split"])])
    seed = pd.DataFrame([{"w": w, "median_ns": ms * 1e6, "series": SEED_SERIES[name]}
                         for name, by_w in SEED_SCALING_MS.items() for w, ms in by_w.items()])
    n = int(run["n"])
    # the seed's lines are at N=1M: beside another N they are context, not a comparison
    note = "" if n == SEED_N else f"seed at N={SEED_N // 1_000_000}M: not comparable (this run: N={n:,})"
    return wbcharts.sweep_errorbars(
        sc, x="w", provider="series", x_title="workers / threads", log_y=True, seed=seed,
        seed_machine=f"{SEED_MACHINE}, N=1M", width=520, height=320, seed_note=note,
        title=f"Thread scaling, N={n:,}: {iree} and torch.sum (CI bars clipped at the top)")


def _overview_chart(ov: pd.DataFrame, run):
    """The total per call with its CI, one row per implementation (every name readable): bars
    on a linear axis, or points with whiskers on a log axis when the medians span a decade or
    more (a 13 ms numpy beside 50 us IREE programs; :func:`workbench.presentation.charts.magnitude_marks`)."""
    import altair as alt

    from workbench.presentation import charts as wbcharts

    unit = wbcharts.time_unit([v * 1e3 for v in ov["total_us"]])
    scale = 1e3 / wbcharts.units.PER_NS[unit]
    d = ov.assign(total=ov["total_us"] * scale, lo=ov["ci_lo_us"] * scale, hi=ov["ci_hi_us"] * scale)
    tip = ["w", alt.Tooltip("noise:Q", format=".1%")]
    chart = wbcharts.magnitude_marks(d, "series", "total", "lo", "hi", value_title=wbcharts.titled("time per call, "
                                     "median", unit), sort=None, tooltip=tip)
    return chart.properties(
        title=f"Time per call, N={int(run['n']):,}, {int(run['w_max'])} workers (median, 95% CI)",
        width=460, height=alt.Step(20)).properties(autosize=alt.AutoSizeParams(type="pad"))


def phases_chart(pc: pd.DataFrame):
    """Each capture's median steady-state iteration as the shares of its phases (an iteration's
    phases sum to its total, printed at the bar's end) and the seed's one traced iteration per c,
    fainter. Shares, not times: the totals span 56 us to 6 ms, and on one linear time axis the
    short iterations (the seed's) were slivers; stacked phases cannot go on a log axis."""
    import altair as alt

    order = list(dict.fromkeys(pc.sort_values(["source", "c", "w"], ascending=[False, True, True])["capture"]))
    y = alt.Y("capture:N", sort=order, title=None, axis=alt.Axis(labelLimit=560))
    bars = alt.Chart(pc).mark_bar().encode(
        y=y, x=alt.X("us:Q", stack="normalize", title="share of the iteration (its total in us at the bar's end)",
                     axis=alt.Axis(format="%")),
        color=alt.Color("phase:N", sort=list(CHART_PHASES), legend=alt.Legend(orient="bottom", columns=4)),
        order=alt.Order("order:Q"), opacity=alt.condition("datum.source == 'seed'", alt.value(0.5), alt.value(1.0)),
        tooltip=["capture", "phase", alt.Tooltip("us:Q", format=".1f"), alt.Tooltip("total_us:Q", format=".1f")])
    totals = alt.Chart(pc.drop_duplicates("capture").assign(end=1.0)).mark_text(align="left", dx=4, fontSize=11).encode(
        y=y, x=alt.X("end:Q"), text=alt.Text("total_us:Q", format=",.1f"))
    return (bars + totals).properties(
        title=alt.TitleParams("Phases of one iteration: live (the median steady-state iteration) and the seed's traced "
                              f"one ({SEED_MACHINE}, 32 workers, faint)",
                              subtitle="Python captures: IREE's phases, then the Python binding's part of the call "
                                       "and the Python iteration outside the call"),
        width=560).properties(autosize=alt.AutoSizeParams(type="pad"))


def grain_chart(g: pd.DataFrame):
    """torch.sum at 1 and w threads vs N with the GRAIN_SIZE threshold marked and labelled."""
    import altair as alt

    from workbench.presentation import charts as wbcharts

    lines = wbcharts.sweep_chart(g, x="n", provider="series", x_title="N (elements)", log_x=False, unit="us",
                                 title=f"torch.sum around GRAIN_SIZE = {GRAIN_SIZE:,}: serial below it (thread count "
                                       "irrelevant), parallel from it")
    mark = pd.DataFrame({"n": [GRAIN_SIZE], "label": [f"GRAIN_SIZE {GRAIN_SIZE:,}"]})
    rule = alt.Chart(mark).mark_rule(strokeDash=[4, 3], color="black").encode(x="n:Q", tooltip=["label", "n"])
    text = alt.Chart(mark).mark_text(align="left", dx=4, baseline="top", y=4).encode(x="n:Q", text="label:N")
    return alt.layer(_unpadded(lines), rule, text).properties(autosize=alt.AutoSizeParams(type="pad"))


def _unpadded(chart):
    """A shared helper's chart without its top-level autosize, to layer more marks on it."""
    import altair as alt

    chart = chart.copy()
    chart.autosize = alt.Undefined
    return chart


def _forkjoin_chart(fj: pd.DataFrame):
    import altair as alt

    from workbench.presentation import charts as wbcharts

    ws = sorted(set(fj["w"]) | {32})
    x = alt.X("w:Q", scale=alt.Scale(type="log", base=2, nice=False, padding=12),
              axis=wbcharts.count_axis("workers / threads", ws))
    y_title = "time at w minus at 1 worker (us)"
    color = alt.Color("mechanism:N", legend=alt.Legend(labelLimit=360, orient="bottom", columns=1))
    base = alt.Chart(fj).encode(x=x, color=color)
    seed = pd.DataFrame([{"w": 32, "us": us, "mechanism": m} for k, us in SEED_FORKJOIN_US.items()
                         for m in fj.loc[fj["key"] == k, "mechanism"].unique()[:1]])
    tip = ["mechanism", "w", alt.Tooltip("point:Q", format=".2f", title="median (us)"),
           alt.Tooltip("lo:Q", format=".2f", title="95% CI lo"), alt.Tooltip("hi:Q", format=".2f", title="95% CI hi"),
           "status"]
    layers = [base.mark_line(point=True).encode(y=alt.Y("point:Q", title=y_title), tooltip=tip),
              base.mark_rule(strokeWidth=2).encode(y=alt.Y("lo:Q", title=y_title), y2="hi:Q")]
    if len(seed):
        layers.append(alt.Chart(seed).mark_point(filled=False, size=90, shape="diamond").encode(
            x=x, y=alt.Y("us:Q", title=y_title), color=color,
            tooltip=[alt.Tooltip("mechanism:N"), alt.Tooltip("us:Q", title=f"seed @32 ({SEED_MACHINE})")]))
    return alt.layer(*layers).properties(
        title=f"Fork/join: what 1 -> w workers adds (median, 95% CI; diamonds: the seed's @32, {SEED_MACHINE})",
        width=480, height=260).properties(autosize=alt.AutoSizeParams(type="pad"))


def _sizes_chart(sz: pd.DataFrame):
    """iree-benchmark-module and torch.sum vs N (log-log, CI bars) with the copy-bandwidth floor."""
    import altair as alt

    from workbench.presentation import charts as wbcharts

    shown = sz[sz["provider"].isin(["iree-bench", "torch"])]
    shown = shown if len(shown) else sz
    lines = wbcharts.sweep_errorbars(shown, x="n", provider="series", x_title="N (elements)", unit="us", log_x=True,
                                     log_y=True, title="Size sweep with the copy-bandwidth floor (dashed)")
    fl = sz.drop_duplicates("n")[["n", "floor_us"]].assign(what="bandwidth floor (N*4 B / copy bandwidth)")
    floor = alt.Chart(fl).mark_line(strokeDash=[6, 3], color="black").encode(
        x="n:Q", y="floor_us:Q", tooltip=["n", alt.Tooltip("floor_us:Q", format=".2f"), "what"])
    return alt.layer(_unpadded(lines), floor).properties(autosize=alt.AutoSizeParams(type="pad"))


def _timelines(tl: pd.DataFrame) -> dict:
    """Per capture, its key spans (:func:`.profiles.timeline_table`) on the trace views' timeline:
    one row per lane and nesting level, the Python zones nested above IREE's on their lane,
    coloured by role."""
    from workbench.traces import charts as tcharts
    from workbench.traces.model import from_columns

    out = {}
    tl = tl[tl["kind"] == "span"]
    for cap in tl["capture"].unique():
        d = tl[tl["capture"] == cap]
        spans = from_columns({"track": d["track"].to_numpy(), "name": d["name"].to_numpy(),
                              "category": d["role"].to_numpy(),
                              "start_ns": (d["start_us"] * 1e3).round().to_numpy(dtype="int64"),
                              "dur_ns": ((d["end_us"] - d["start_us"]) * 1e3).round().to_numpy(dtype="int64"),
                              "depth": d["level"].to_numpy(dtype="int32")},
                             source="cpu-reduction", track_order=list(dict.fromkeys(d["track"])))
        key = "timeline_" + "".join(ch for ch in cap.replace(" ", "_") if ch.isalnum() or ch == "_")
        out[key] = tcharts.timeline(spans, width=TIMELINE_WIDTH, color_by="category", palette=ROLE_COLORS,
                                    title=f"Median steady-state iteration, per thread: {cap}",
                                    note=f"time from {d['origin'].iloc[0]}; " + (
                                        "Python zones (py.*) nested above IREE's on their thread"
                                        if (d["role"] != "python").any() else
                                        "Python zones only: torch has no zones, its OpenMP threads draw no lanes"))
    return out


# --- verdict --------------------------------------------------------------------------------------

def _rows(tbls, name) -> pd.DataFrame:
    t = tbls.get(name)
    return t if t is not None else pd.DataFrame()


def _us(x, lo, hi, digits=1) -> str:
    return f"{x:,.{digits}f} us [{lo:,.{digits}f}, {hi:,.{digits}f}]"


def _key_ratio(tbls) -> list[Finding]:
    """The key table's comparison: the fastest IREE program of the table at n and the largest w
    against torch.sum at the same w (a ratio of times with its CI), worded by who is faster."""
    ov, vs, run = _rows(tbls, "overview"), _rows(tbls, "vs_torch"), tbls["_run"].iloc[0]
    if not len(ov):
        return []
    where = f"N={int(run['n']):,}, {int(run['w_max'])} worker(s)"
    iree, t = key_programs(ov).sort_values("total_us"), ov[ov["provider"] == "torch"]
    if not len(iree) or not len(t):
        b = ov.sort_values("total_us").iloc[0]
        return [Finding("fastest", text=f"At {where}: fastest {esc(b['series'])} "
                                        f"{_us(b['total_us'], b['ci_lo_us'], b['ci_hi_us'])}")]
    b, t = iree.iloc[0], t.iloc[0]
    same = vs[(vs["against"] == "torch at the same w") & (vs["series"] == b["series"])] if len(vs) else vs
    if not len(same):
        return []
    r = same.iloc[0].to_dict()
    faster = "torch.sum is faster" if r["point"] > 1 else "IREE is faster"
    says = (f"At {where}, {faster}: the fastest IREE program of the table, {esc(b['series'])} "
            f"({_us(b['total_us'], b['ci_lo_us'], b['ci_hi_us'])}), takes {{figure}} torch.sum's time "
            f"({_us(t['total_us'], t['ci_lo_us'], t['ci_hi_us'])})")
    return [Finding(f"{b['series']} against torch.sum at {where}", r, says=says)]


def findings(tbls: dict[str, pd.DataFrame]) -> list[Finding]:
    """The key table's comparison (the lead), then what answers the seed's questions: fastest
    against fastest, IREE's compute share and runtime overhead per iteration, torch.sum's
    per-call allocation, the fork/join costs."""
    out = _key_ratio(tbls)
    vs = _rows(tbls, "vs_torch")
    best = vs[vs["against"] == "fastest vs fastest"] if len(vs) else vs
    out += [Finding(str(r["name"]), r) for r in best.head(1).to_dict("records")]
    over = _rows(tbls, "overhead")
    share = over[over["quantity"] == "compute share"] if len(over) else over
    if len(share):
        # the most workers, c=8 where profiled, the lightest profiler (Tracy's zones cost time)
        r = share.sort_values(["w", "c", "source"], key=lambda c: c == "ireeperf" if c.name == "source" else c).iloc[-1]
        o = over[(over["capture"] == r["capture"]) & (over["quantity"] == "overhead")].iloc[0]
        out += [Finding(f"IREE's compute share of an iteration ({r['capture']}, {int(r['iterations'])} iterations)", r),
                Finding(f"IREE's runtime overhead per iteration ({r['capture']})", o)]
    out += _python_findings(tbls)
    al = _rows(tbls, "alloc")
    one = al[al["w"] == 1].sort_values("n") if len(al) else al
    out += [Finding(f"torch.sum's per-call allocation at w=1, n={int(r['n']):,}", r) for r in one.head(1).to_dict("records")]
    fj = _rows(tbls, "forkjoin")
    for key, label in (("openmp", "OpenMP"), ("iree-task", "IREE's task system")):
        g = fj[fj["key"] == key].sort_values("w") if len(fj) else fj
        if len(g):
            r = g.iloc[-1].to_dict()
            out.append(Finding(f"{label}'s fork/join, 1 -> {int(r['w'])} workers", r))
    return out


def _python_findings(tbls) -> list[Finding]:
    """The Python path's answer to "in the runtime or around it": IREE's runtime share of a
    Python iteration in the capture the claim reads (c=8 where captured, most workers)."""
    ps = _rows(tbls, "python_share")
    share = ps[ps["quantity"] == "runtime share"] if len(ps) else ps
    if not len(share):
        return []
    r = share.sort_values(["w", "c"], key=lambda c: c == 8 if c.name == "c" else c).iloc[-1].to_dict()
    return [Finding(f"IREE's runtime share of each Python iteration ({r['capture']}, {int(r['iterations'])} "
                    f"iterations in Python zones)", r)]


# --- report sections ------------------------------------------------------------------------------

def _derived_display(df: pd.DataFrame, context: list[str]) -> pd.DataFrame:
    """A derived-form table as people read it: context columns, the figure with its CI, status."""
    shown = derived.cells(df)
    return shown[[c for c in context if c in shown] + ["figure (95% CI)", "status"]]


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    run = tbls["_run"].iloc[0]
    machine = esc(run["machine"])
    parts = []
    so = tbls.get("seed_overview")
    if so is not None and len(so):
        parts.append(f"## Overview, live ({machine}) beside the seed's\n\n" + md_table(so)
                     + "\n\nTotals: iree-benchmark-module and torch.sum per call (median, 95% CI). Compute and "
                       "overhead come from one profile's own steady-state iterations of the same program and "
                       "workers (overhead = total - compute of each iteration), never a profile's compute against "
                       "a timing run's total. The seed's figures: one Tracy iteration each, 32 workers.")
    dm = tbls.get("dispatch_model")
    if dm is not None and len(dm):
        parts.append("## Dispatch model: PyTorch/OpenMP vs IREE (live, with the seed's figures)\n\n" + md_table(dm)
                     + "\n\nFork/join = time at w minus time at 1 worker of the same work (torch: the smallest "
                       "parallel sum, n = 32,768, paired by interleaved round; IREE: one 16-element tile per "
                       "worker). Allocation: torch.sum(a) - torch.sum(a, out=o), the median of per-round "
                       "differences, at w=1 (the serial path: the output alone) and the largest w (the two-pass "
                       "path: output and per-thread buffer, the seed's 2 us); IREE: Tracy zones of semaphores, fences, "
                       "transient buffers, buffer views and command-buffer state per call (zone time includes Tracy's "
                       "own cost).")
    parts += _scaling_sections(tbls)
    for name, title, context in (
            ("grain", "GRAIN_SIZE: torch.sum at the largest w over 1 thread", ["n", "torch_path", "w1_us", "wmax_us"]),
            ("alloc", "Per-call allocation of torch.sum (interleaved rounds)",
             ["n", "w", "path", "rounds", "torch_us", "torch_out_us"]),
            ("forkjoin", "Fork/join: time at w minus time at 1 worker", ["mechanism", "w", "t1_us", "tw_us", "pairing"]),
            ("forkjoin_compare", "Fork/join: IREE's task system over OpenMP", ["w", "openmp_us", "iree_us"]),
            ("python_cost", "IREE's Python cost: iree.runtime call minus iree-benchmark-module",
             ["c", "split", "w", "python_us", "bench_us"]),
            ("python_share", "In the runtime or around it: the Python side of each call, from Python zones in Tracy "
                             "(median per steady-state iteration of one capture)",
             ["capture", "quantity", "iterations"])):
        t = tbls.get(name)
        if t is not None and len(t):
            parts.append(f"## {title}\n\n" + md_table(_rounded(_derived_display(t, context))))
    parts += _phase_sections(tbls)
    env = tbls.get("_environment")
    if env is not None and len(env):
        parts.append("## Environment (this run)\n\n" + "\n".join(f"- {esc(r.item)}: {esc(r.text)}"
                                                                  for r in env.itertuples()))
    return parts


def _rounded(df: pd.DataFrame) -> pd.DataFrame:
    return df.round({c: 2 for c in df.columns if c.endswith("_us")})


def _scaling_sections(tbls) -> list[str]:
    sc, sp, run = tbls.get("scaling"), tbls.get("speedup"), tbls["_run"].iloc[0]
    if sc is None or not len(sc):
        return []
    cell = sc.assign(text=[_us(m, lo, hi, 1) for m, lo, hi in zip(sc["median_us"], sc["ci_lo_us"], sc["ci_hi_us"])])
    wide = cell.pivot_table(index="w", columns="series", values="text", aggfunc="first").reset_index()
    wide = wide.rename(columns={"w": "workers"})
    wide.columns.name = None
    seed = "; ".join(f"{name} " + ", ".join(f"{w}: {ms:.3f}" for w, ms in by_w.items())
                     for name, by_w in SEED_SCALING_MS.items())
    out = [f"## Thread scaling (us per call, N={int(run['n']):,}; median [95% CI])\n\n" + md_table(wide.fillna(""))
           + "\n\nSingle-thread providers (numpy, iree-sync) run at 1 worker only. The seed's table (ms per call, "
           + f"{SEED_MACHINE}): {seed}."]
    if sp is not None and len(sp):
        best = sp[sp["best"]]
        out.append("### Speedup from 1 worker to the best worker count (time at 1 / time at w)\n\n"
                   + md_table(_derived_display(best, ["series", "w", "t1_us", "tw_us"]).round(
                       {"t1_us": 1, "tw_us": 1})))
    return out


def _phase_sections(tbls) -> list[str]:
    parts = []
    pc = tbls.get("phase_compare")
    if pc is not None and len(pc):
        for (w, prof), g in pc.groupby(["w", "profiler"], sort=True):
            g = g.drop(columns=["w", "profiler"]).dropna(axis=1, how="all")
            parts.append(f"## Phases, c=2 | c=8 side by side: {esc(prof)}, {esc(w)} workers (us per iteration, "
                         "median [95% CI], share of the median total)\n\n" + md_table(g)
                         + "\n\nEach live column: the median of each phase over the steady-state iterations (the "
                           f"first {profiles.WARMUP_ITERATIONS} are warm-up, dropped); the phases of every iteration "
                           "sum to its total, the medians need not. The seed's columns are one traced iteration "
                           "each at 32 workers.")
    diff = tbls.get("phase_diff")
    if diff is not None and len(diff):
        parts.append("### c=8 against c=2 (steady-state iterations of both captures)\n\n"
                     + md_table(_derived_display(diff, ["w", "source", "quantity", "iterations"])))
    ph = tbls.get("phases")
    if ph is not None and len(ph):
        for cap, g in ph.groupby("capture", sort=False):
            if (g["phase"] == "unavailable").any():
                parts.append(f"### Breakdown {esc(cap)}: unavailable\n\n> {esc(g['note'].iloc[0])}")
                continue
            shown = g[["phase", "median_us", "lo_us", "hi_us", "share_pct", "p10_us", "p90_us", "note"]].round(2)
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
                     + md_table(al[["capture", "group", "median_us", "lo_us", "hi_us", "calls_per_iteration",
                                    "statistic"]].round(2)))
    return parts
