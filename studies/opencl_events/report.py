"""What people read about an opencl-events run: charts, the verdict and the report's sections,
built from the analysis tables only (:mod:`.analysis` did the arithmetic).

The key chart is the seed's right-hand plot made honest: each provider's extra time per run over
the baseline, per buffer size, with its 95% CI (paired by round), and the figures the seed
states drawn as reference marks labelled with the seed's machine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from workbench.evidence.tables import md_table
from workbench.base.untrusted import escape as esc
from workbench.evidence.verdict import Finding

from .analysis import BASELINES, BUCKETS, CALLBACK, HEADS, excess_text, group_name

if TYPE_CHECKING:  # altair is imported inside the chart functions: the GPU nodes have none
    import altair as alt

SEED_AMD = "AMD RX 5500 XT"
SEED_INTEL = "Intel UHD 530/640"
SMALL_RANGE = (4 << 10, 64 << 10)
#: the figures the seed states (it published plots only), as reference marks per experiment and
#: chart: (quantity, provider the figure is about, x from, x to (None: the largest size), y, label)
SEED_REFS = {
    "excess": {
        "callbacks": [(*SMALL_RANGE, 10.0, f"seed ({SEED_INTEL}): callback ~10 us")],
        "wait": [(*SMALL_RANGE, 10.0, f"seed ({SEED_INTEL}): callback ~10 us"),
                 (*SMALL_RANGE, 0.0, f"seed ({SEED_AMD}): waiting ~0")],
        "dependency": [(15 << 20, None, 400.0, f"seed ({SEED_AMD}): cb ~0.4 ms beyond 15 MiB"),
                       (4 << 10, None, 2.5, f"seed ({SEED_AMD}): waiting 2-3 us")],
    },
    "relative": {
        "callbacks": [(*SMALL_RANGE, 3.0, f"seed ({SEED_AMD}): callback ~3x")],
        "wait": [(*SMALL_RANGE, 3.0, f"seed ({SEED_AMD}): callback ~3x")],
    },
}
LIVE = "live (95% CI bars)"
WIDTH, HEIGHT = 380, 200


# --- charts -------------------------------------------------------------------------------------

def _groups(pts: pd.DataFrame) -> list[int]:
    """The worker counts of a dependency run ([0] otherwise)."""
    if "workers" not in pts.columns or not pts["workers"].notna().any():
        return [0]
    return sorted(int(w) for w in pts["workers"].dropna().unique())


def _x(dependency: bool, per_worker: bool = False):
    """The size axis (log 2, labelled in KiB/MiB): total size for the dependency runs (the seed
    discusses them so), else the buffer size."""
    import altair as alt

    axis = alt.Axis(labelExpr="datum.value >= 1048576 ? datum.value / 1048576 + ' MiB' : datum.value / 1024 + ' KiB'",
                    labelOverlap=True)
    name, title = (("total_bytes", "total buffer size (all workers)") if dependency and not per_worker else
                   ("size_bytes", "buffer size per worker" if per_worker else "buffer size"))
    return alt.X(f"{name}:Q", scale=alt.Scale(type="log", base=2, padding=8, nice=False), title=title,
                 axis=axis), name


def _seed_refs(kind: str, exp: str, x_field: str, x_min: float, x_max: float) -> pd.DataFrame:
    """The seed's stated figures for this chart as segments, cut to the sizes the run has."""
    rows = []
    for lo, hi, y, label in SEED_REFS.get(kind, {}).get(exp, []):
        lo, hi = max(lo, x_min), min(hi or x_max, x_max)
        if hi > lo:
            rows.append({x_field: lo, "x2": hi, "y": y, "source": label})
    return pd.DataFrame(rows)


def symlog_ticks(values) -> list[float]:
    """Axis ticks of a symlog scale: 0 and the powers of ten (either sign) within the values'
    range (Vega's own ticks on symlog land on 2, 4, 6 ...)."""
    lo, hi = min(values + [0.0]), max(values + [0.0])
    ticks = [0.0]
    for k in range(0, 7):
        ticks += [v for v in (10.0 ** k, -(10.0 ** k)) if lo <= v <= hi]
    return sorted(ticks)


#: what each bit of a callback combination "(s,r,c)" sets a callback on
CALLBACK_EVENTS = ("submitted", "running", "complete")


def combo_meaning(name: str) -> str:
    """``(0,0,1)`` -> ``(0,0,1) on complete``; ``(0,0,0)`` -> ``(0,0,0) none``; other names as they are."""
    bits = name.strip("()").split(",")
    if len(bits) != 3 or set(bits) - {"0", "1"}:
        return name
    on = [e for b, e in zip(bits, CALLBACK_EVENTS) if b == "1"]
    return f"{name} " + ("none" if not on else "all three" if len(on) == 3 else "on " + " + ".join(on))


def provider_color(names) -> "alt.Color":
    """The provider colour with a legend that says what a callback combination means."""
    import altair as alt

    names = list(dict.fromkeys(names))
    combos = any(combo_meaning(n) != n for n in names)
    labels = "{" + ", ".join(f"'{n}': '{combo_meaning(n)}'" for n in names if "'" not in n) + "}"
    legend = alt.Legend(labelLimit=260, titleLimit=360, labelExpr=f"{labels}[datum.label] || datum.label") if combos else \
        alt.Legend(labelLimit=200)
    title = "callbacks (submitted, running, complete)" if combos else "provider"
    return alt.Color("provider:N", title=title, scale=alt.Scale(scheme="tableau10"), legend=legend)


def _derived_chart(dv: pd.DataFrame, quantity: str, exp: str, title: str):
    """``quantity`` rows (``excess`` in us or ``relative`` as a ratio) of the head providers vs
    size, CI bars, the seed's stated figures as dashed grey references; one panel per worker
    count (each its own y scale) in a dependency run."""
    import altair as alt

    from workbench.presentation import charts as wb

    dependency = exp == "dependency"
    x, x_field = _x(dependency)
    d = dv[(dv["quantity"] == quantity) & dv["provider"].isin(HEADS.get(exp, ()))].dropna(subset=["point"])
    if not len(d):
        return None
    d = d.assign(point=d["point"].astype(float), lo=d["lo"].astype(float), hi=d["hi"].astype(float),
                 workers=d["workers"].astype(int), kind="live", source=LIVE,
                 ci=[excess_text(r) for r in d.to_dict("records")])
    ratio = quantity == "relative"
    refs = pd.concat([_seed_refs(quantity, exp, x_field, float(g[x_field].min()), float(g[x_field].max()))
                      .assign(workers=w) for w, g in d.groupby("workers")], ignore_index=True)
    ys = d["lo"].tolist() + d["hi"].tolist() + (refs["y"].tolist() if len(refs) else [])
    y_axis = alt.Axis()
    if ratio:
        y_scale = wb.value_scale(ys + [1.0], log=None)
        y_title = f"time per run / {BASELINES[exp]}'s (x" + (", log scale)" if y_scale.type == "log" else ")")
    else:
        signed_decades = wb.spans_decades([abs(v) for v in ys if v])
        y_scale = (alt.Scale(type="symlog", constant=1, nice=False) if signed_decades else alt.Scale(zero=True))
        y_title = f"extra time per run over {BASELINES[exp]} (us" + (", symlog scale)" if signed_decades else ")")
        y_axis = alt.Axis(values=symlog_ticks(ys), format=",.0f") if signed_decades else alt.Axis()
    nulls = pd.DataFrame({"workers": sorted(d["workers"].unique()), "y": 1.0 if ratio else 0.0, "kind": "null"})
    data = pd.concat([d, refs.assign(kind="ref"), nulls], ignore_index=True)
    labels = [LIVE] + (list(dict.fromkeys(refs["source"])) if len(refs) else [])
    dash = alt.StrokeDash("source:N", title="reference", scale=alt.Scale(domain=labels,
                                                                          range=[[1, 0]] + [[5, 3]] * (len(labels) - 1)),
                          legend=alt.Legend(labelLimit=300, symbolStrokeColor="#555"))
    color = provider_color(d["provider"])
    tip = ["provider", alt.Tooltip(f"{x_field}:Q", title="bytes"), alt.Tooltip("ci:N", title="95% CI"), "status"]
    y = alt.Y("point:Q", scale=y_scale, title=y_title, axis=y_axis)
    live = alt.Chart().transform_filter("datum.kind == 'live'").encode(x=x, color=color)
    layers = [alt.Chart().transform_filter("datum.kind == 'null'").mark_rule(color="#999", strokeWidth=1).encode(
                  y=alt.Y("y:Q", scale=y_scale, title=y_title, axis=y_axis)),
              live.mark_rule(strokeWidth=2, opacity=0.55).encode(y=alt.Y("lo:Q", scale=y_scale, title=y_title,
                                                                          axis=y_axis), y2="hi:Q", tooltip=tip),
              live.mark_line().encode(y=y, strokeDash=dash),
              live.mark_point(filled=True, size=40).encode(y=y, tooltip=tip)]
    if len(refs):
        layers.append(alt.Chart().transform_filter("datum.kind == 'ref'").mark_rule(color="#555", strokeWidth=2)
                      .encode(x=x, x2="x2:Q", y=alt.Y("y:Q", scale=y_scale, title=y_title, axis=y_axis),
                              strokeDash=dash, tooltip=[alt.Tooltip("source:N", title="figure")]))
    chart = alt.layer(*layers, data=data).properties(width=WIDTH, height=HEIGHT)
    if dependency:
        chart = chart.facet(column=alt.Column("workers:O", title="workers", sort=wb.numeric_order(d["workers"])))
        chart = chart.resolve_scale(y="independent")
    return wb._pad(chart.properties(title=title))



#: what each table and chart is called where people read it (workbench.base.names; ids stay in the API)
TITLES = {
    "key": "The seed's figures beside this run's", "overhead": "Extra time per run over the baseline",
    "per_size": "Extra time per run, per size range", "points": "Time per run at every size",
    "relative": "Time per run relative to the baseline's", "timing": "Time per run against size",
    "timing_*": "Time per run against size", "per_worker_size": "Time per run against size, per worker count",
}

def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    """``overhead`` (the key chart: extra time per run over the baseline, CI bars, the seed's
    figures), ``relative`` (time per run over the baseline's), ``timing`` (time per run vs size:
    every measurement a dot, the mean a line, as the seed plots it) per worker count, and for
    the dependency experiment ``per_worker_size``."""
    import altair as alt  # only here: the GPU machines have no altair

    from workbench.presentation import charts as wb

    pts, smp, dv = tbls["points"], tbls["_samples"], tbls["derived"]
    if not len(pts):
        return {}
    exp = str(tbls["_run"]["experiment"].iloc[0])
    pts = pts[pts["correct"]]
    smp = smp[smp["correct"]] if len(smp) else smp
    groups = _groups(pts)
    dependency = exp == "dependency"
    out = {}
    if len(dv):
        for quantity, name, what in (("excess", "overhead", "extra time per run over {base} (us, median of paired "
                                                            "rounds, 95% CI)"),
                                     ("relative", "relative", "time per run / {base}'s (median of paired rounds, "
                                                              "95% CI)")):
            chart = _derived_chart(dv, quantity, exp, what.format(base=BASELINES[exp]))
            if chart is not None:
                out[name] = chart
    x, _field = _x(dependency)
    color = provider_color(pts["provider"])
    for w in groups:
        p = pts if not w else pts[pts["workers"] == w]
        s = smp if not w else smp[smp["workers"] == w]
        unit_y = alt.Y("time_us:Q", scale=alt.Scale(type="log"), title="time per run (us, log scale)")
        dots = alt.Chart(s).mark_circle(size=14, opacity=0.35).encode(x=x, y=unit_y, color=color)
        line = alt.Chart(p).mark_line(point=True).encode(
            x=x, y=alt.Y("mean_us:Q", scale=alt.Scale(type="log"), title="time per run (us, log scale)"), color=color,
            tooltip=["provider", "size_bytes", alt.Tooltip("mean_us:Q", format=".2f"),
                     alt.Tooltip("median_us:Q", format=".2f"), alt.Tooltip("ci_lo_us:Q", format=".2f"),
                     alt.Tooltip("ci_hi_us:Q", format=".2f"), "samples"])
        out["timing" + (f"_w{w}" if w else "")] = wb._pad((dots + line).properties(
            title=f"{group_name(w)}time per run vs buffer size (us): mean line, every measurement a dot",
            width=WIDTH, height=HEIGHT))
    if dependency:
        xw, _ = _x(True, per_worker=True)
        out["per_worker_size"] = wb._pad(alt.Chart(pts.assign(workers=pts["workers"].astype(int))).mark_line(
            point=True).encode(
            x=xw, y=alt.Y("mean_us:Q", scale=alt.Scale(type="log"), title="time per run (us, log scale)"),
            color=color, strokeDash=alt.StrokeDash("workers:O", title="workers", sort=wb.numeric_order(groups)),
            tooltip=["workers", "provider", "size_bytes", "total_bytes", alt.Tooltip("mean_us:Q", format=".2f")],
        ).properties(title="Time per run vs buffer size per worker (us, mean; each worker count)", width=WIDTH,
                     height=HEIGHT))
    return out


# --- verdict and report ----------------------------------------------------------------------

def _where(run) -> str:
    return f"{run['platform']} / {run['device']}"


def findings(tbls: dict[str, pd.DataFrame]) -> list[Finding]:
    """Per worker count (dependency) or for the run: the callback's extra time per run over the
    baseline at the smallest size range (the lead: the seed's "pretty big overhead"), its ratio
    there and its extra time at the largest range (the seed's fading), then the other head
    providers' at the smallest range; a CUDA run says what its callback is."""
    run = tbls["_run"].iloc[0]
    exp, dv = str(run["experiment"]), tbls.get("derived")
    where = f"{exp} on {_where(run)}"
    if dv is None or not len(dv):
        return [Finding("overheads", text=f"{esc(where)}: no overhead could be computed (no baseline beside a "
                                          "provider)")]
    ranges = [b for _lo, _hi, b in BUCKETS if b in set(dv["bucket"].dropna())]
    cb, base = CALLBACK.get(exp), BASELINES.get(exp, "the baseline")
    out = []
    for w in sorted(dv["workers"].dropna().unique()):
        pick = dv[(dv["workers"] == w) & (dv["provider"] == cb)]
        for quantity, bucket, what in (("bucket excess", ranges[:1], "extra time per run"),
                                       ("bucket relative", ranges[:1], "time per run"),
                                       ("bucket excess", ranges[-1:], "extra time per run")):
            for r in pick[(pick["quantity"] == quantity) & pick["bucket"].isin(bucket)].to_dict("records"):
                label = f"{group_name(int(w))}{cb}'s {what} over {base} at {r['bucket']} ({where})"
                out.append(Finding(label, r))
        others = dv[(dv["workers"] == w) & (dv["quantity"] == "bucket excess") & dv["bucket"].isin(ranges[:1])
                    & (dv["provider"] != cb)]
        out += [Finding(f"{group_name(int(w))}{r['provider']}'s extra time per run over {r['baseline']} at "
                        f"{r['bucket']}", r) for r in others.to_dict("records")]
    if exp == "cuda":
        out.append(Finding("cuda", text=f"{esc(CALLBACK['cuda'])} is the CUDA counterpart of a CL_COMPLETE callback, "
                                        "but runs in the stream"))
    return out


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    run = tbls["_run"].iloc[0]
    exp = str(run["experiment"])
    reps = (f"Runs per measurement chosen per point for about {run['target_ms']:g} ms (a pilot of the baseline; "
            f"between {int(run['min_reps'])} and {esc(run['reps'])}; each point's count is in the key table), "
            if run["target_ms"] else f"{esc(run['reps'])} runs per measurement, ")
    method = [
        "## What is measured",
        f"Platform and device: **{esc(_where(run))}** (driver {esc(run['driver'])}). {reps}{esc(run['measurements'])} "
        "measurements per point after one warm-up round, providers interleaved round by round. One sample = host "
        "wall time from the first enqueue until the queue finished and every callback/wait returned, divided by "
        "the runs. Every difference and ratio over the baseline is the median over rounds of the same round's "
        "pair, with a 95% bootstrap CI; a size range pools the rounds of its sizes.",
    ]
    if exp != "cuda":
        method.append(
            f"Callbacks registered as {esc(run['callback_impl'], 'code')}: `native` is a C function that bumps an atomic "
            "counter (the seed's C++ setting), `ctypes` a Python function called on the runtime's thread (GIL + frame "
            "per call), `pyopencl` is `Event.set_callback`, which starts one OS thread per callback on the enqueuing "
            f"thread. Callback support: {esc(run['callback_support'] or 'n/a')}.")
    else:
        method.append("CUDA host functions run in the stream: the next kernel waits for each to return, unlike an "
                      "OpenCL callback. CuPy's trampoline takes the GIL for each.")
    out = ["\n\n".join(method)]
    ov = tbls.get("overhead")
    if ov is not None and len(ov):
        out.append("## Extra time per run over the baseline, per size range\n\nMedian over the paired rounds of the "
                   "range's sizes, 95% bootstrap CI; `(CI includes 0)` marks a figure that is not a finding.\n\n"
                   + md_table(ov))
    return out
