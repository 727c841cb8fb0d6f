"""mc2-split's charts: tables in (``analyze``'s), Altair charts out; no arithmetic on results.

Every chart keeps a fixed pixel size (the per-variant bar chart of every run was 3,892 px wide
with 96 variants: the configurations are now one row each of a dot plot), times are in us
with the unit in the title, chunk counts on integer axes, and the seed's 1874 and 1262 us are
marked on the key chart as the seed's, with its machine.
"""

from __future__ import annotations

import pandas as pd

SPLIT_COLORS = {"serial": "#4c78a8", "seed's split": "#e45756", "best split": "#54a24b"}


FIGURE_SHAPES = {"measured (median, 95% CI)": "circle", "predicted (fitted contention)": "diamond",
                 "predicted (given fits)": "diamond", "model floor (no contention)": "triangle-down"}


def key_chart(data: pd.DataFrame):
    """Measured (median, 95% CI) vs predicted per split, the seed's figures as grey crosses."""
    import altair as alt

    from . import analysis

    order = [x for x in analysis.x_order() if x in set(data["x"])]
    is_seed = data["config"] == "seed"
    own = data[~is_seed]
    configs = list(dict.fromkeys(own["config"]))
    x = alt.X("x:N", sort=order, title="split", axis=alt.Axis(labelAngle=0, labelLimit=120))
    y_title = "time per op (us)"
    y = alt.Y("us:Q", title=y_title, scale=alt.Scale(zero=False))
    offset = alt.XOffset("config:N", sort=configs, scale=alt.Scale(domain=configs))
    color = alt.Color("config:N", sort=configs, title="configuration", legend=alt.Legend(labelLimit=260))
    figures = [f for f in FIGURE_SHAPES if f in set(own["source"])]
    shape = alt.Shape("source:N", title="figure", legend=alt.Legend(labelLimit=320),
                      scale=alt.Scale(domain=figures, range=[FIGURE_SHAPES[f] for f in figures]))
    tip = ["config", "x", "chunks", "source", alt.Tooltip("us:Q", format=",.1f"), alt.Tooltip("lo:Q", format=",.1f"),
           alt.Tooltip("hi:Q", format=",.1f")]
    measured = own[own["source"].str.startswith("measured")]
    layers = []
    if len(measured):
        layers.append(alt.Chart(measured).mark_rule(strokeWidth=2).encode(
            x=x, xOffset=offset, y=alt.Y("lo:Q", title=y_title, scale=alt.Scale(zero=False)), y2="hi:Q", color=color))
    layers.append(alt.Chart(own).mark_point(size=80, filled=True, opacity=0.9).encode(
        x=x, xOffset=offset, y=y, color=color, shape=shape, tooltip=tip))
    seed_label = data.loc[is_seed, "source"].iloc[0] if is_seed.any() else "seed"
    seed_marks = alt.Chart(data[is_seed]).encode(x=x, y=y, tooltip=tip)
    layers.append(seed_marks.mark_point(size=160, shape="cross", filled=True, color="#555555"))
    layers.append(seed_marks.mark_text(align="left", dx=10, color="#555555", fontSize=11).encode(
        text=alt.Text("label:N")).transform_calculate(label="format(datum.us, '.0f') + ' us (seed)'"))
    return alt.layer(*layers).resolve_scale(xOffset="independent").properties(
        width=min(120 * max(len(order), 3), 840), height=320,
        title=alt.TitleParams("Time per op by split: measured vs predicted (us)",
                              subtitle="grey crosses: the seed's serial 1874 us and fused MC² op 1262 us, measured on "
                                       "the seed's Ascend NPU (8 ranks), not on this machine"))


def configs_chart(live: pd.DataFrame):
    """One row per configuration: serial and every split measured (median, 95% CI)."""
    import altair as alt

    d = live[live["correct"].astype(bool)].assign(
        kind=lambda t: t["split"].map({"unsplit": "serial", "heuristic": "seed's split", "best": "best split"})
        .fillna(t["split"]))
    configs = list(dict.fromkeys(d["comm"]))
    y = alt.Y("comm:N", sort=configs, title="configuration (collective + SM carve-out)",
              axis=alt.Axis(labelLimit=260))
    x_title = "measured time per op (us, median and 95% CI)"
    x = alt.X("measured_us:Q", title=x_title, scale=alt.Scale(zero=False))
    color = alt.Color("kind:N", title="split", sort=["serial", "seed's split", "best split"],
                      legend=alt.Legend(labelLimit=200))
    base = alt.Chart(d)
    bars = base.mark_rule(opacity=0.6).encode(x=alt.X("ci_lo_us:Q", title=x_title, scale=alt.Scale(zero=False)),
                                             x2="ci_hi_us:Q", y=y, color=color, yOffset="kind:N")
    dots = base.mark_point(size=50, filled=True).encode(
        x=x, y=y, color=color, yOffset="kind:N",
        tooltip=["variant", "chunks", alt.Tooltip("measured_us:Q", format=",.1f"),
                 alt.Tooltip("ci_lo_us:Q", format=",.1f"), alt.Tooltip("ci_hi_us:Q", format=",.1f")])
    return (bars + dots).properties(width=620, height=max(150, 40 * len(configs)),
                                    title="Every configuration: serial and splits (us)")


def fits_chart(pts: pd.DataFrame):
    import altair as alt

    d = pts.assign(panel=pts["unit"].map({"row": "CostMM: matmul time vs rows", "MiB": "CostComm: all-reduce time vs MiB"}))
    base = alt.Chart(d).encode(x=alt.X("x:Q", title="rows (CostMM) or MiB (CostComm)"),
                               color=alt.Color("cost:N", scale=alt.Scale(scheme="tableau20"),
                                               legend=alt.Legend(labelLimit=260)))
    dots = base.mark_circle(size=60).encode(y=alt.Y("measured_us:Q", title="time (us)"),
                                            tooltip=["cost", "m", "measured_us", "fit_us", "fit"])
    bars = base.mark_errorbar().encode(y=alt.Y("ci_lo_us:Q", title="time (us)"), y2="ci_hi_us:Q")
    line = base.mark_line(strokeDash=[4, 3]).encode(y="fit_us:Q")
    return (dots + bars + line).properties(width=320, height=240).facet(
        column=alt.Column("panel:N", title=None, header=alt.Header(labelFontSize=12))).resolve_scale(
        x="independent", y="independent").properties(
        title="Measured cost points (median, 95% CI) and their fits (dashed)")


def gantt_chart(gantt: pd.DataFrame, title: str = "Simulated pipeline (Gantt, us)"):
    """The simulated schedules, one panel per split (the shown ones, plus one picked in the
    drop-down)."""
    import altair as alt

    g = gantt.assign(chunk_label=gantt["chunk"].map(lambda c: f"chunk {int(c) + 1}"))
    options = list(dict.fromkeys(g.loc[~g["shown"].astype(bool), "split"]))
    chart = alt.Chart(g).mark_bar(stroke="white").encode(
        x=alt.X("start_us:Q", title="simulated time (us)"), x2="end_us:Q",
        y=alt.Y("engine:N", title=None, sort=["compute", "comm"]),
        color=alt.Color("chunk_label:N", title="chunk", sort=alt.EncodingSortField("chunk")),
        row=alt.Row("split:N", title=None, sort=alt.EncodingSortField("order", op="min"),
                    header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=400)),
        tooltip=["split", "engine", "chunk_label", "rows", alt.Tooltip("start_us:Q", format=".1f"),
                 alt.Tooltip("end_us:Q", format=".1f")])
    if options:
        pick = alt.param(name="other_split", value=options[0],
                         bind=alt.binding_select(options=options, name="also show "))
        chart = chart.add_params(pick).transform_filter("datum.shown || datum.split == other_split")
    return chart.properties(width=560, height=50, title=title)


def splits_chart(sims: pd.DataFrame):
    import altair as alt

    from workbench.charts import count_axis

    uni = sims[sims["split"].str.startswith("uniform") | (sims["split"] == "unsplit")]
    tip = ["split", "chunks", alt.Tooltip("makespan_us:Q", format=".1f"), alt.Tooltip("gain:Q", format=".1%")]
    x = alt.X("n_chunks:Q", axis=count_axis("chunks", sims["n_chunks"]))
    line = alt.Chart(uni).mark_line(point=True).encode(x=x, y=alt.Y("makespan_us:Q", title="simulated time (us)"),
                                                       tooltip=tip)
    marks = alt.Chart(sims[sims["split"].isin(["heuristic", "best"])]).mark_point(size=120, filled=True).encode(
        x=x, y="makespan_us:Q", color=alt.Color("split:N"), tooltip=tip)
    return (line + marks).properties(title="Simulated time of uniform splits, the seed's split and the best (us)",
                                     width=420, height=260)


def prediction_chart(live: pd.DataFrame):
    """Predicted vs measured per variant, with a band of +-10%."""
    import altair as alt

    preds = [c for c in ("predicted_us", "predicted_fit_us") if c in live]
    long = live.melt(id_vars=["variant", "comm", "split", "measured_us"], value_vars=preds, var_name="model",
                     value_name="predicted")
    long["model"] = long["model"].map({"predicted_us": "given contention", "predicted_fit_us": "fitted contention"})
    lo, hi = float(live["measured_us"].min()) * 0.85, float(live["measured_us"].max()) * 1.1
    diag = pd.DataFrame({"measured_us": [lo, hi], "predicted": [lo, hi], "lo": [lo * 0.9, hi * 0.9],
                         "hi": [lo * 1.1, hi * 1.1]})
    band = alt.Chart(diag).mark_area(opacity=0.15, color="gray").encode(
        x=alt.X("measured_us:Q", scale=alt.Scale(domain=[lo, hi]), title="measured median (us)"),
        y=alt.Y("lo:Q", scale=alt.Scale(domain=[lo, hi]), title="predicted (us)"), y2="hi:Q")
    line = alt.Chart(diag).mark_line(color="gray").encode(x="measured_us:Q", y="predicted:Q")
    dots = alt.Chart(long).mark_point(size=60, filled=True).encode(
        x="measured_us:Q", y="predicted:Q", color=alt.Color("comm:N", scale=alt.Scale(scheme="tableau20"),
                                                      legend=alt.Legend(labelLimit=260)),
        shape=alt.Shape("model:N"),
        tooltip=["variant", "model", alt.Tooltip("measured_us:Q", format=".1f"), alt.Tooltip("predicted:Q", format=".1f")])
    return (band + line + dots).properties(title="Predicted vs measured (us; band: within 10%)", width=420, height=360)


def timeline_chart(spans: pd.DataFrame, alignment: pd.DataFrame, overlap: pd.DataFrame):
    """The profiled calls (serial and best split of the backend's collective and of the
    headline configuration), every rank's compute and collective lanes, on the shared
    timeline (zoom and pan in the browser). A call that stalled under the profiler (far longer
    than its timed median) is drawn up to the others' length, and the subtitle says so."""
    from workbench.traces import charts as tcharts

    ranks = spans["rank"].nunique()
    note = f"{ranks} ranks aligned" if ranks > 1 else "rank 0 only"
    if ranks > 1 and len(alignment):
        # one short clause per method (the full wording is in the trace_alignment table)
        calls = alignment.drop_duplicates("trace")["alignment"].astype(str)
        how = calls.map(lambda a: "by the end of " + a.removeprefix("end of ") if a.startswith("end of")
                        else "by wall clock" if a.startswith("wall-clock") else a[:60])
        note += " (" + ", ".join(f"{n} call(s) {h}" for h, n in how.value_counts().items()) + ")"
    end = None
    shown = set(spans["track"].astype(str).str.split(" · ").str[0])
    stalled = overlap[overlap["stalled"].astype(bool) & overlap["trace"].isin(shown)] if "stalled" in overlap else []
    if len(stalled):
        calm = overlap[~overlap["stalled"].astype(bool) & overlap["trace"].isin(shown)]
        if len(calm):
            end = int(calm["span_us"].max() * 1.05 * 1e3)
            worst = stalled.loc[stalled["span_us"].idxmax()]
            note += (f"; {len(stalled)} call(s) stalled under the profiler (up to {worst['span_us'] / 1e6:,.3g} s): "
                     f"drawn to {end / 1e3:,.0f} us")
    return tcharts.timeline(spans, end=end, width=900, title="Measured timeline: one profiled call each "
                                                            "(torch.profiler)", note=note)


def _keep_size(chart):
    """The chart at its own width and height: Streamlit's default autosize ("fit") squeezes a
    chart with a long legend to a strip."""
    import altair as alt

    return chart.properties(autosize=alt.AutoSizeParams(type="pad"))


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    out = charts_sized(tbls)
    return {name: c if name == "measured_timeline" else _keep_size(c) for name, c in out.items()}


def charts_sized(tbls: dict[str, pd.DataFrame]) -> dict:
    out = {}
    if len(tbls.get("_key_chart", [])):
        out["key"] = key_chart(tbls["_key_chart"])
    live = tbls.get("live")
    if live is not None and len(live):
        out["configs"] = configs_chart(live)
    if len(tbls.get("fit_points", [])):
        out["fits"] = fits_chart(tbls["fit_points"])
    from .analysis import is_inflation

    if is_inflation(tbls):
        out["gantt"] = gantt_chart(tbls["_gantt"], "The seed's inflation examples, simulated (Gantt, us)")
    elif len(tbls.get("_gantt", [])):
        out["gantt"] = gantt_chart(tbls["_gantt"])
    if len(tbls.get("simulated", [])):
        out["splits"] = splits_chart(tbls["simulated"])
    if len(tbls.get("_timeline_spans", [])):
        out["measured_timeline"] = timeline_chart(tbls["_timeline_spans"], tbls.get("trace_alignment", pd.DataFrame()),
                                                  tbls.get("trace_overlap", pd.DataFrame()))
    if live is not None and len(live) and "predicted_us" in live:
        out["live"] = prediction_chart(live)
    return out
