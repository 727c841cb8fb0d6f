"""What people read about a launch-cache run: charts, the verdict and the report's sections, built
from the analysis tables only (:mod:`.analysis` did the arithmetic).

The key chart puts each policy's real, user and sys time over per_call's (paired by phase, 95%
CI) on a log scale, beside the seed's patch/baseline ratios at 256 and 1,048,576 launches.
"""

from __future__ import annotations

import math

import pandas as pd

from workbench.evidence import derived
from workbench.evidence.tables import md_table
from workbench.base.untrusted import escape as esc
from workbench.evidence.verdict import Finding

from .analysis import CLOCKS, fmt_seconds, fmt_time, per_launch, range_text, ratio_cell, seed_tables

WIDTH, HEIGHT = 520, 280
#: the floor (s) of a log axis of `time` figures that are all 0 (a 0 has no bar on a log axis)
SECONDS_FLOOR = 1e-3
SEED_LABEL = "seed: patch / baseline, {n:,} launches (NVIDIA GPU, libgomp nvptx, 8 threads)"


def _mode_text(run, mode) -> str:
    return f"sync={mode}" if run["mode"] == "sync" else f"malloc={mode}"


# --- charts -------------------------------------------------------------------------------------

def _vs_per_call(tbls) -> object | None:
    """Each variant's real/user/sys over per_call's (CI bars, log) with the seed's ratios."""
    import altair as alt

    from workbench.presentation import charts as wb

    dv = tbls["derived"]
    d = dv[(dv["quantity"] == "vs per_call") & dv["point"].notna()] if len(dv) else dv
    if not len(d):
        return None
    d = d.assign(ci=[derived.fmt_derived(r) for r in d.to_dict("records")], source="live (95% CI bars)")
    seed = tbls["seed_summary"]
    seed = seed[seed["build"] == "patch"]
    refs = pd.DataFrame([{"clock": c, "point": float(r[f"{c}_vs_baseline"]),
                          "source": SEED_LABEL.format(n=int(r["launches"]))} for r in seed.to_dict("records")
                         for c in CLOCKS])
    vals = [v for v in d["lo"].tolist() + d["hi"].tolist() + d["point"].tolist() + refs["point"].tolist() if v > 0]
    lo = max(min(vals), 1e-4) / 1.5
    y_scale = alt.Scale(type="log", domain=[lo, max(vals + [1.0]) * 1.5], clamp=True)
    y_title = "time / per_call's (x, log scale)"
    x = alt.X("clock:N", sort=list(CLOCKS), title=None, axis=alt.Axis(labelAngle=0, labelFontSize=12))
    variants = list(dict.fromkeys(d["variant"]))
    color = alt.Color("variant:N", sort=variants, title="variant", scale=alt.Scale(scheme="tableau10"),
                      legend=alt.Legend(labelLimit=240))
    tip = ["variant", "clock", alt.Tooltip("ci:N", title="ratio (95% CI)"), alt.Tooltip("n_a:Q", title="phases")]
    base = alt.Chart(d).encode(x=x, xOffset=alt.XOffset("variant:N", sort=variants), color=color)
    layers = [
        alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(color="#999").encode(y=alt.Y("y:Q", scale=y_scale,
                                                                                       title=y_title)),
        base.mark_rule(strokeWidth=3, opacity=0.6).encode(y=alt.Y("lo:Q", scale=y_scale, title=y_title), y2="hi:Q",
                                                          tooltip=tip),
        base.mark_point(filled=True, size=60).encode(y=alt.Y("point:Q", scale=y_scale, title=y_title), tooltip=tip),
    ]
    if len(refs):
        shapes = alt.Shape("source:N", title="reference", scale=alt.Scale(range=["diamond", "triangle-up"]),
                           legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=560))
        layers.append(alt.Chart(refs).mark_point(color="#444", filled=False, size=140, strokeWidth=2).encode(
            x=x, y=alt.Y("point:Q", scale=y_scale, title=y_title), shape=shapes,
            tooltip=[alt.Tooltip("source:N", title="figure"), "clock", alt.Tooltip("point:Q", format=".3f")]))
    return wb._pad(alt.layer(*layers).properties(
        title="real / user / sys over per_call's (same mode; paired by phase, 95% CI), beside the seed's",
        width=WIDTH, height=HEIGHT))


def _bar_height(n: int) -> int:
    """A plot tall enough for ``n`` bars and never a strip (one variant still gets a real plot)."""
    return max(90, 22 * n)


def _clock_panels(pol: pd.DataFrame) -> object:
    """real, user, sys per variant (median of phases as a point, the range over phases as a
    rule), one facet each with its own log axis: per_call and the caches differ by 10-1000x (a
    bar's length would mean nothing on it)."""
    import altair as alt

    from workbench.presentation import charts as wb

    rows = []
    for clock in CLOCKS:
        med = pol[f"{clock}_s"]
        lo, hi = pol.get(f"{clock}_lo_s", med), pol.get(f"{clock}_hi_s", med)
        positive = [v for v in list(lo) + list(med) if v > 0]
        floor = min(positive) / 1.5 if positive else SECONDS_FLOOR
        for v, c, m, a, b in zip(pol["variant"], pol["correct"], med, lo, hi):
            rows.append({"variant": v, "correct": bool(c), "clock": clock, "text": fmt_seconds(m), "floor": floor,
                         "med": max(m, floor), "lo": max(a, floor), "hi": max(b, floor)})
    d = pd.DataFrame(rows)
    order = list(pol["variant"])
    scale = alt.Scale(type="log")
    base = alt.Chart().encode(y=alt.Y("variant:N", sort=order, title=None, axis=alt.Axis(labelLimit=200)))
    bars = base.mark_point(filled=True, size=60).encode(
        x=alt.X("med:Q", scale=scale, title="seconds (log scale)"),
        color=alt.condition("datum.correct", alt.value("#4c78a8"), alt.value("#d62728")),
        tooltip=["variant", "clock", alt.Tooltip("text:N", title="median of phases (s)"),
                 alt.Tooltip("lo:Q", format=".4f", title="min"), alt.Tooltip("hi:Q", format=".4f", title="max")])
    rng = base.mark_rule(color="black").encode(x=alt.X("lo:Q", scale=scale, title="seconds (log scale)"), x2="hi:Q")
    chart = alt.layer(bars, rng, data=d).properties(width=240, height=_bar_height(len(order)))
    return wb._pad(wb.facet(chart, "clock", list(CLOCKS), title=None, columns=3, independent=("x",)).properties(
        title="real / user / sys of the launch phase per variant (s: median of phases, rule: range; 0 s at the floor)"))


def _per_variant_bars(pol: pd.DataFrame, field: str, title: str, axis_title: str, fmt: str) -> object:
    """One mark per variant: bars from 0, or points on a log axis when the values span a decade
    or more (:func:`workbench.presentation.charts.magnitude_marks`; a 0 is drawn at the axis' floor)."""
    import altair as alt

    from workbench.presentation import charts as wb

    positive = [v for v in pol[field].tolist() if v == v and v > 0]
    log = bool(positive) and wb.spans_decades(positive, wb.LOG_DECADES)
    d = pol.assign(v=pol[field].clip(lower=min(positive) / 3) if log else pol[field])
    chart = wb.magnitude_marks(d, "variant", "v", value_title=axis_title, sort=list(pol["variant"]), failed="correct",
                               log=log, tooltip=[alt.Tooltip(f"{field}:Q", format=fmt, title=axis_title)])
    return wb._pad(chart.properties(title=title, width=WIDTH, height=_bar_height(len(pol))))



#: what each table and chart is called where people read it (workbench.base.names; ids stay in the API)
TITLES = {
    "key": "The seed's figures beside this run's", "phases": "Launch phases, one per round",
    "policies": "Per policy: clocks, latency, scratch memory, page faults",
    "seed_summary": "The seed's `time` figures", "segments": "Where a launch's host time goes",
    "vs_per_call": "Each policy's real, user and sys time over per_call's", "time": "real, user and sys time per policy",
    "latency": "Per-launch latency", "tail": "Per-launch latency: median and p99", "memory": "Peak scratch memory",
    "faults": "Minor page faults per launch", "latency_cdf": "Per-launch latency distribution",
    "seed": "The seed's `time` figures",
}

def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    """``vs_per_call`` (the key chart), ``time`` (real/user/sys per variant), ``latency``
    (median per-launch latency, CI), ``tail`` (p50 and p99), ``memory`` (peak scratch),
    ``faults`` (minor page faults per launch), ``segments`` (where a launch's host time goes),
    ``latency_cdf`` and ``seed`` (the seed's `time` figures)."""
    import altair as alt

    from workbench.presentation import charts as wb  # altair is not installed on the GPU nodes

    pol = tbls["policies"]
    out = {}
    key = _vs_per_call(tbls)
    if key is not None:
        out["vs_per_call"] = key
    if len(pol) and "real_s" in pol:
        out["time"] = _clock_panels(pol)
        out["latency"] = wb.median_ci_bars(pol, title="Per-launch latency (median, 95% CI)")
        tail = pol.melt(id_vars=["variant"], value_vars=["p50_us", "p99_us"], var_name="quantile", value_name="us")
        tail = tail.assign(quantile=tail["quantile"].str.replace("_us", ""))
        vals = [v for v in tail["us"] if v > 0]
        floor = min(vals) / 2
        scale = alt.Scale(type="log", domain=[floor, max(vals) * 1.5])
        out["tail"] = wb._pad(alt.Chart(tail).mark_point(filled=True, size=60).encode(
            y=alt.Y("variant:N", sort=list(pol["variant"]), title=None, axis=alt.Axis(labelLimit=200)),
            yOffset=alt.YOffset("quantile:N", sort=["p50", "p99"]),
            x=alt.X("us:Q", scale=scale, title="per-launch latency (us, log scale)"),
            shape=alt.Shape("quantile:N", sort=["p50", "p99"], title="quantile"),
            color=alt.Color("quantile:N", sort=["p50", "p99"], title="quantile"),
            tooltip=["variant", "quantile", alt.Tooltip("us:Q", format=",.2f")],
        ).properties(title="Per-launch latency: median (p50) and p99 (us)", width=WIDTH,
                     height=_bar_height(2 * len(pol))))
        out["memory"] = _per_variant_bars(pol, "peak_mib", "Peak scratch memory held per variant (MiB, the "
                                          "policy's count)", "peak scratch (MiB)", ",.1f")
        out["faults"] = _per_variant_bars(pol, "minflt_per_launch", "Minor page faults per launch (getrusage, "
                                          "whole process)", "minor faults per launch", ",.2f")
    seg = tbls.get("segments")
    if seg is not None and len(seg):
        out["segments"] = wb._pad(alt.Chart(seg).mark_bar(height=14).encode(
            y=alt.Y("variant:N", sort=list(dict.fromkeys(seg["variant"])), title=None, axis=alt.Axis(labelLimit=200)),
            x=alt.X("mean_us:Q", stack="normalize", title="share of the mean launch", axis=alt.Axis(format="%")),
            color=alt.Color("segment:N", sort=list(dict.fromkeys(seg["segment"]))),
            order=alt.Order("segment_order:Q"),
            tooltip=["variant", "segment", alt.Tooltip("mean_us:Q", format=",.2f", title="mean (us)"),
                     alt.Tooltip("p99_us:Q", format=",.2f", title="p99 (us)"), alt.Tooltip("share:Q", format=".0%")],
        ).transform_calculate(segment_order="indexof(['acquire','kernel','launch','sync','release'], datum.segment)")
            .properties(title="Where a launch's host time goes (share of the mean launch; tooltips in us)",
                        width=WIDTH, height=_bar_height(seg["variant"].nunique())))
    q = tbls.get("_latency_quantiles")
    if q is not None and len(q):
        out["latency_cdf"] = wb._pad(alt.Chart(q).mark_line(point=True).encode(
            x=alt.X("lat_us:Q", scale=alt.Scale(type="log"), title="per-launch latency (us, log scale)"),
            y=alt.Y("quantile:Q", title="fraction of launches"), color=alt.Color("variant:N", sort=list(pol["variant"])),
            tooltip=["variant", "quantile", alt.Tooltip("lat_us:Q", format=",.2f")],
        ).properties(title="Per-launch latency distribution (quantiles of the kept samples)", width=WIDTH,
                     height=HEIGHT))
    s = tbls["seed_summary"].melt(id_vars=["launches", "build"], value_vars=["real_s", "user_s", "sys_s"],
                                  var_name="clock", value_name="seconds")
    s = s.assign(clock=s["clock"].str.replace("_s", ""), count=[f"{n:,}" for n in s["launches"]])
    out["seed"] = wb._pad(alt.Chart(s).mark_bar().encode(
        x=alt.X("build:N", sort=["baseline", "patch"], title=None),
        xOffset=alt.XOffset("clock:N", sort=list(CLOCKS)), y=alt.Y("seconds:Q", title="seconds (median of 5 runs)"),
        color=alt.Color("clock:N", sort=list(CLOCKS)),
        column=alt.Column("count:N", title="launches (8 threads)", sort=["256", "1,048,576"]),
        tooltip=["launches", "build", "clock", alt.Tooltip("seconds:Q", format=",.1f")],
    ).resolve_scale(y="independent").properties(
        title="The seed's `time` figures (median of 5 runs; the seed's machine)", width=200, height=220))
    return out


# --- verdict and report -------------------------------------------------------------------------

#: the findings a launch-cache verdict states, in order (the first leads): (quantity, provider,
#: clock, label)
FINDINGS = (("vs per_call", "locked_cache", "real", "locked_cache's real time over per_call's"),
            ("vs per_call", "locked_cache", "user", "locked_cache's user time over per_call's"),
            ("vs per_call", "locked_cache", "sys", "locked_cache's sys time over per_call's"),
            ("vs locked_cache", "pool", "real", "the pool's real time over locked_cache's"),
            ("vs locked_cache", "size_limit", "real", "size_limit's real time over locked_cache's"),
            ("latency vs per_call", "locked_cache", "per-launch latency",
             "locked_cache's median per-launch latency over per_call's"))


def _fastest(key: pd.DataFrame, pol: pd.DataFrame, mode_col: str) -> dict[str, str]:
    """Per mode, the first checked row of the key table (sorted by median real time)."""
    ok = pol[pol["correct"] & (pol["samples"] > 0)]
    modes = ok.set_index("variant")[mode_col].astype(str).to_dict() if mode_col in ok else {}
    out = {}
    for r in key.to_dict("records"):
        m = modes.get(r["variant"])
        if m is not None and m not in out and r["check"] == "ok":
            out[m] = r["variant"]
    return out


def _lowest(tbls: dict[str, pd.DataFrame]) -> list[Finding]:
    """Per mode, the key table's first row: the lowest median real time (a fact, no comparison)."""
    run, key, pol = tbls["_run"].iloc[0], tbls["key"], tbls["policies"]
    out = []
    for mode, best in (_fastest(key, pol, run["mode"]).items() if len(key) else []):
        r = pol.set_index("variant").loc[best]
        phases = int(r["phases"])
        out.append(Finding("lowest", text=f"{_mode_text(run, mode)}: lowest real time {esc(best)} "
                                          f"({fmt_seconds(r['real_s'])} s, median of {phases} phase"
                                          f"{'s' if phases != 1 else ''})"))
    return out


def findings(tbls: dict[str, pd.DataFrame]) -> list[Finding]:
    """The seed's comparisons in its order: the locked cache against allocating per launch
    (real, user, sys: ratios of phase times, paired by phase; the lead), the key table's lowest
    real time per mode, the pool and the size limit against the locked cache, the per-launch
    latency; per mode where the run has several."""
    run, dv = tbls["_run"].iloc[0], tbls["derived"]
    if not len(dv):
        return [Finding("ratios", text="No ratio of two policies: " + ("no phase finished" if not len(tbls["key"])
                                                                        else "per_call or locked_cache is missing")),
                *_lowest(tbls)]
    modes = list(dict.fromkeys(dv["mode"]))
    out = []
    for quantity, provider, clock, label in FINDINGS:
        g = dv[(dv["quantity"] == quantity) & (dv["provider"] == provider) & (dv["clock"] == clock)]
        for r in g.to_dict("records"):
            where = f" ({_mode_text(run, r['mode'])})" if len(modes) > 1 else ""
            out.append(Finding(label + where, r))
    return out[:1] + _lowest(tbls) + out[1:]


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    run = tbls["_run"].iloc[0]
    seed = tbls["seed_summary"]
    rows = [{"launches / threads": f"{r['launches']:,} / {r['threads']}", "build": f"{r['build']} ({r['policy']})",
             "real": fmt_time(r["real_s"]), "user": fmt_time(r["user_s"]), "sys": fmt_time(r["sys_s"]),
             "real vs baseline": f"{r['real_vs_baseline']:.3g}", "user vs baseline": f"{r['user_vs_baseline']:.3g}",
             "sys vs baseline": f"{r['sys_vs_baseline']:.3g}"} for r in seed.to_dict("records")]
    out = ["## The seed's `time` figures (seed's machine, median of its 5 runs)\n\n" + md_table(pd.DataFrame(rows))]
    pol = tbls["policies"]
    if not len(pol) or "real_s" not in pol:
        return out
    kernel = (f"{int(run['passes'])} pass{'es' if run['passes'] != 1 else ''} per kernel"
              + (f", {int(run['blocks'])} thread blocks" if run["target"] == "gpu" and run["blocks"] == run["blocks"]
                 else ""))
    out.append(f"## How it was measured\n\n{int(run['launches']):,} launches over {int(run['threads'])} host threads on "
               f"{esc(run['machine'])} ({esc(run['target'])}), scratch {int(run['scratch_bytes']):,} B, {kernel}, "
               f"{int(run['data_bytes'] or 0):,} B of application data per launch; {int(run['repeat'])} phases per "
               "variant, interleaved (phase i of every variant in round i, so the ratios pair phases). Real time: "
               "the monotonic clock around the phase; user and sys: getrusage of the whole process; a ratio is the "
               "median of the per-phase ratios with a 95% bootstrap CI (fewer than 5 phases: shown, inconclusive).")
    segs = tbls.get("segments")
    if segs is not None and len(segs):
        cells = segs.assign(cell=[f"{m:,.1f} us ({sh:.0%})" if math.isfinite(sh) else f"{m:,.1f} us"
                                  for m, sh in zip(segs["mean_us"], segs["share"])])
        table = cells.pivot(index="variant", columns="segment", values="cell")
        table = table.reindex(index=list(dict.fromkeys(segs["variant"])),
                              columns=list(dict.fromkeys(segs["segment"]))).fillna("").reset_index()
        table.columns.name = None
        out.append("## Where a launch's time goes (host clock, mean per launch; share of the mean launch)\n\n"
                   + md_table(table))
    if run["target"] == "cpu":
        out.append("glibc raises its mmap threshold to the size of each freed mmapped block, up to 32 MiB on 64-bit; "
                   "blocks at or under that are then served from the heap and stop faulting, blocks above it (the "
                   "seed's 50 MB) are mmapped and unmapped every time. `pinned` switches that off with "
                   "mallopt(M_MMAP_THRESHOLD, 128 KiB).")
    else:
        out.append("cudaFree synchronises the whole device, so per_call waits for the GPU with or without the sync "
                   "after the launch; cached policies only wait when asked to. A CUDA synchronisation spins by "
                   "default while the host has cores to spare, so time spent waiting for the GPU shows up as user "
                   "time (user can exceed real with several threads).")
    return out


# --- README blocks (traces/launch-cache/README.md: generated from the committed bundles) ------------

def run_label(run) -> str:
    """A run's shape in words, from its ``_run`` row: target, launches, kernel, application data
    and injected allocation failures."""
    kernel = ("tiny kernels" if run["passes"] == 1 else f"{int(run['passes'])}-pass kernels" if run["target"] == "cpu"
              else f"{int(run['blocks']):,}-block kernels of {int(run['passes'])} passes")
    text = f"{str(run['target']).upper()}, {int(run['launches']):,} launches, {kernel}"
    if run["data_bytes"]:
        text += f", {run['data_bytes'] / 2**20:g} MiB of data a launch, block {run['scratch_bytes'] / 1e6:g} MB"
    if run.get("oom_every"):
        text += f", every {int(run['oom_every'])}th data allocation fails"
    return text


def _runs(analyses: list) -> list[tuple]:
    """(analysis, its ``_run`` row) of every run with phase times: GPU runs first, then by launch
    count, application data, injected failures and block size (the README's order)."""
    runs = [(a, a.tables["_run"].iloc[0]) for a in analyses
            if "_run" in a.tables and "real_s" in a.tables.get("policies", pd.DataFrame())]
    return sorted(runs, key=lambda ar: (ar[1]["target"] != "gpu", ar[1]["launches"], ar[1]["data_bytes"],
                                        ar[1].get("oom_every", 0), ar[1]["scratch_bytes"]))


def _by_mode(a, run) -> dict:
    """Per mode (sync True/False on the GPU, malloc pinned/dynamic on the CPU): each provider's
    ``policies`` row, checked or not (a failed one shows as failed)."""
    out: dict = {}
    for r in a.tables["policies"].to_dict("records"):
        out.setdefault(r.get(run["mode"]), {})[r["provider"]] = r
    return out


def _ratio(a, r: dict, base: dict | None, phases: int) -> str:
    """``r`` over ``base`` (real time, paired by phase, 95% CI) from the derived table."""
    if base is None:
        return "not run"
    dv = a.tables["derived"]
    hit = dv[(dv["variant"] == r["variant"]) & (dv["baseline"] == base["variant"]) & (dv["clock"] == "real")]
    return ratio_cell(hit.iloc[0], phases) if len(hit) else "n/a (a variant failed)"


def _check(*rows: dict) -> str:
    bad = [r["variant"] for r in rows if not r["correct"]]
    return f"FAILED: {', '.join(bad)}" if bad else "ok"


def readme_per_launch(analyses: list, args: dict) -> str:
    """Many launches of tiny kernels on the GPU (one pass, no application data, a sync after each
    launch): real, user and sys time per launch of per_call and of locked_cache, each from the run
    with the most launches that ran it (per_call was not run at 1,048,576 launches), locked / per_call
    (a point figure: two runs' phases do not pair) and the seed's patch / baseline at its largest
    count."""
    picked: dict[str, tuple] = {}  # provider -> (run, its policies row) of the most launches
    for a, run in _runs(analyses):
        if run["target"] != "gpu" or run["passes"] != 1 or run["data_bytes"]:
            continue
        for provider, r in _by_mode(a, run).get(True, {}).items():
            if provider in ("per_call", "locked_cache") and (
                    provider not in picked or run["launches"] > picked[provider][0]["launches"]):
                picked[provider] = (run, r)
    missing = {"per_call", "locked_cache"} - set(picked)
    if missing:
        return f"(no GPU run of tiny kernels ran {', '.join(sorted(missing))})"

    def head(provider: str) -> str:
        run, r = picked[provider]
        phases = int(r["phases"])
        return (f"{provider} (us, {int(run['launches']):,}-launch run, "
                + (f"median [range] of {phases} phases)" if phases > 1 else "1 phase)"))

    def cell(us: list[float], phases: int) -> str:
        return f"{us[0]:.3g} [{us[1]:.3g}, {us[2]:.3g}]" if phases > 1 else f"{us[0]:.3g}"

    seed = seed_tables()["seed_summary"]  # seed.py's figures, the same in every run's analysis
    top = seed[seed["launches"] == seed["launches"].max()].set_index("build")  # the seed's largest count

    def seed_cell(clock: str) -> str:
        return (f"{top.loc['patch', clock + '_vs_baseline']:#.2g} ({fmt_time(top.loc['baseline', clock + '_s'])} -> "
                f"{fmt_time(top.loc['patch', clock + '_s'])})")

    base, cache = picked["per_call"][1], picked["locked_cache"][1]
    rows = [{"per launch": p["clock"], head("per_call"): cell(p["base_us"], int(base["phases"])),
             head("locked_cache"): cell(p["other_us"], int(cache["phases"])),
             "locked_cache / per_call (point figure: the runs' phases do not pair)": f"{p['ratio']:#.2g}",
             f"seed: patch / baseline ({int(top['launches'].iloc[0]):,} launches, median of its runs)":
                 seed_cell(p["clock"])}
            for p in per_launch(base, cache)]
    return md_table(pd.DataFrame(rows))


def readme_pool_vs_lock(analyses: list, args: dict) -> str:
    """Per run and mode where the pool and the locked cache both ran: their real times (median of
    phases [range]), pool / locked_cache (paired by phase, 95% CI; n/a with one phase) and the
    scratch each held at its peak."""
    rows = []
    for a, run in _runs(analyses):
        for by in _by_mode(a, run).values():
            lock, pool = by.get("locked_cache"), by.get("pool")
            if lock is None or pool is None:
                continue
            phases = int(min(lock["phases"], pool["phases"]))
            rows.append({"run": run_label(run), "variants": f"{pool['variant']} vs {lock['variant']}", "phases": phases,
                         "locked_cache real (s)": range_text(lock, "real"), "pool real (s)": range_text(pool, "real"),
                         "pool / locked_cache real (95% CI)": _ratio(a, pool, lock, phases),
                         "locked_cache peak scratch (MiB)": lock["peak_mib"],
                         "pool peak scratch (MiB)": pool["peak_mib"],
                         "check": _check(lock, pool)})
    return md_table(pd.DataFrame(rows))


def readme_size_limit(analyses: list, args: dict) -> str:
    """Per run with application data (``data_bytes`` > 0, where size_limit's check runs): the real
    time (median of phases [range]) of per_call, locked_cache and size_limit, size_limit over each
    (paired by phase, 95% CI) and size_limit's own counters (median of phases)."""
    rows = []
    for a, run in _runs(analyses):
        if not run["data_bytes"]:
            continue
        for by in _by_mode(a, run).values():
            lim = by.get("size_limit")
            if lim is None:
                continue
            phases = int(lim["phases"])
            row = {"run": run_label(run), "variant": lim["variant"], "phases": phases}
            for provider in ("per_call", "locked_cache", "size_limit"):
                row[f"{provider} real (s)"] = range_text(by[provider], "real") if provider in by else "not run"
            for provider in ("locked_cache", "per_call"):
                row[f"size_limit / {provider} real (95% CI)"] = _ratio(a, lim, by.get(provider), phases)
            row |= {"blocks freed over the limit (a phase)": lim["limit_frees"],
                    "out-of-memory retries (a phase)": lim["oom_retries"],
                    # the GPU policies do not count the blocks they make
                    "blocks made (a phase)": lim.get("blocks_created", float("nan")),
                    "check": _check(*by.values())}
            rows.append(row)
    return md_table(pd.DataFrame(rows))


def readme_segments(analyses: list, args: dict) -> str:
    """Where a launch's host time goes on the GPU with a sync after each launch (mean per launch,
    us): every GPU run without application data, the variants of the providers named
    (``providers=a|b``)."""
    providers = args["providers"].split("|")
    rows = []
    for a, run in _runs(analyses):
        if run["target"] != "gpu" or run["data_bytes"]:
            continue
        seg = a.tables["segments"]
        for r in _by_mode(a, run).get(True, {}).values():
            if r["provider"] not in providers:
                continue
            mine = seg[seg["variant"] == r["variant"]]
            rows.append({"run": run_label(run), "variant": r["variant"],
                         **{f"{s} (us)": us for s, us in zip(mine["segment"], mine["mean_us"])}})
    return md_table(pd.DataFrame(rows))


README_BLOCKS = {"per-launch": readme_per_launch, "pool-vs-lock": readme_pool_vs_lock,
                 "size-limit": readme_size_limit, "segments": readme_segments}
