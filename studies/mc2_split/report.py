"""mc2-split's report: the analysis tables in, charts, the verdict and the report sections out;
no arithmetic on results.

Charts keep a fixed pixel size (the per-variant bar chart of every run was 3,892 px wide with
96 variants: the configurations are now one row each of a dot plot), times are in us with the
unit in the title, chunk counts on integer axes, and the seed's 1874 and 1262 us are marked on
the key chart as the seed's, with its machine; altair is imported inside the chart functions
(the GPU nodes, which import this package to run its worker, have none).

Formulas in the Markdown are code spans (``x = 384 × 8192 × 2 B``), never bare ``*`` or ``_``
(which Markdown reads as emphasis), and every string from a run goes through
:func:`workbench.base.untrusted.escape`.
"""

from __future__ import annotations

import pandas as pd

from workbench.evidence import engine
from workbench.evidence.tables import md_table
from workbench.traces import charts as tcharts
from workbench.base.untrusted import escape as esc
from workbench.evidence.verdict import Finding

from . import seed
from .analysis import headline, is_inflation, x_order
from .plan import short_chunks
from .planner import readme_planner
from .spread import TARGET_PCT, across_runs, display


# --- charts ----------------------------------------------------------------------------------------

SPLIT_COLORS = {"serial": "#4c78a8", "seed's split": "#e45756", "best split": "#54a24b"}


FIGURE_SHAPES = {"measured (median, 95% CI)": "circle", "predicted (fitted contention)": "diamond",
                 "predicted (given fits)": "diamond", "model floor (no contention)": "triangle-down"}


def key_chart(data: pd.DataFrame):
    """Measured (median, 95% CI) vs predicted per split, the seed's figures as grey crosses."""
    import altair as alt

    order = [x for x in x_order() if x in set(data["x"])]
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
    configs = list(dict.fromkeys(d["provider"]))
    y = alt.Y("provider:N", sort=configs, title="configuration (collective + SM carve-out)",
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

    from workbench.presentation.charts import count_axis  # altair: the GPU nodes have none

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
    long = live.melt(id_vars=["variant", "provider", "split", "measured_us"], value_vars=preds, var_name="model",
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
        x="measured_us:Q", y="predicted:Q", color=alt.Color("provider:N", scale=alt.Scale(scheme="tableau20"),
                                                      legend=alt.Legend(labelLimit=260)),
        shape=alt.Shape("model:N"),
        tooltip=["variant", "model", alt.Tooltip("measured_us:Q", format=".1f"), alt.Tooltip("predicted:Q", format=".1f")])
    return (band + line + dots).properties(title="Predicted vs measured (us; band: within 10%)", width=420, height=360)


def timeline_chart(spans: pd.DataFrame, alignment: pd.DataFrame, overlap: pd.DataFrame):
    """The profiled calls (serial and best split of the backend's collective and of the
    headline configuration), every rank's compute and collective lanes, on the shared
    timeline (zoom and pan in the browser). A call that stalled under the profiler (far longer
    than its timed median) is drawn up to the others' length, and the subtitle says so."""
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



#: what each table and chart is called where people read it (workbench.base.names; ids stay in the API)
TITLES = {
    "key": "The seed's split beside the measured ones", "live": "Every measured configuration",
    "contention": "Contention factors per configuration", "bound": "Compute- or communication-bound",
    "seed_floor": "The seed's floor, from its own figures", "seed_rule": "The seed's splitting rule",
    "fits": "Cost fits: matmul and all-reduce against size", "fit_points": "The points the cost fits are made of",
    "derivation": "The seed's split, step by step", "simulated": "Simulated splits",
    "trace_overlap": "Measured overlap, per trace and rank", "trace_alignment": "Clock alignment of the traces",
    "configs": "Every configuration's time", "gantt": "Gantt chart of the simulated splits",
    "splits": "Simulated splits", "measured_timeline": "Measured timeline (torch.profiler)",
    "planner": "Each measured split beside the planner's prediction from other hosts' runs",
    "planner_configs": "Per configuration: the planner's pick and recommended split against the fastest measured",
    "collective": "The collective library of the serial baseline (version, algorithm, protocol)",
}

def charts(tbls: dict[str, pd.DataFrame], only: str | None = None) -> dict:
    """Every chart the run's tables make (``only``: the key chart alone, for a short report)."""
    if only == "key":
        return {"key": _keep_size(key_chart(tbls["_key_chart"]))} if len(tbls.get("_key_chart", [])) else {}
    out = charts_sized(tbls)
    return {name: c if name == "measured_timeline" else _keep_size(c) for name, c in out.items()
            if only in (None, name)}


def charts_sized(tbls: dict[str, pd.DataFrame]) -> dict:
    out = {}
    if len(tbls.get("_key_chart", [])):
        out["key"] = key_chart(tbls["_key_chart"])
    live = tbls.get("live")
    if live is not None and len(live):
        out["configs"] = configs_chart(live)
    if len(tbls.get("fit_points", [])):
        out["fits"] = fits_chart(tbls["fit_points"])
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


# --- verdict and report sections -------------------------------------------------------------------

def _row(tbls: dict[str, pd.DataFrame], name: str) -> dict:
    t = tbls.get(name)
    return t.iloc[0].to_dict() if t is not None and len(t) else {}


def _derived(tbls: dict[str, pd.DataFrame], name: str) -> dict | None:
    d = tbls.get("derived")
    hit = d[d["name"] == name] if d is not None and len(d) else []
    return hit.iloc[0].to_dict() if len(hit) else None


def _model_text(tbls: dict[str, pd.DataFrame]) -> str:
    plan = _row(tbls, "_plan")
    key = tbls.get("key")
    if key is None or not len(key):
        return "No split could be planned; see the derivation"
    rows = {r["row"].split(" (")[0].split(":")[0]: r for r in key.to_dict("records")}
    serial = rows.get("serial")
    parts = []
    for name in ("the seed's split", "best split"):
        r = rows.get(name)
        if r:
            parts.append(f"{name} [{esc(r['chunks'])}] {r['predicted (us)']:,.1f} us "
                         f"({esc(r['gain over serial (model)'])} faster)")
    text = (f"Simulated with the given fits (contention {esc(plan.get('contention'))}; a model, not a measurement): "
            f"serial {serial['predicted (us)']:,.1f} us" if serial else "Simulated with the given fits")
    text += ("; " + "; ".join(parts) if parts else "") + "."
    floor = rows.get("model floor")
    if floor:
        text += f" No split beats {floor['predicted (us)']:,.1f} us even with no contention (the model's floor)."
    if plan and not plan.get("plan_ok"):
        text += f" The seed's split has no valid answer here: {esc(plan.get('reason'))}."
    return text


def _inflation_text(tbls: dict[str, pd.DataFrame]) -> str:
    t = tbls["key"]
    cases = "; ".join(f"halves of {r.half_us:.0f} us: {r.pipelined_us:.0f} us, gain {r.gain_us:+.0f} us "
                      f"(seed: {r.seed_gain_us:+.0f})" for r in t.itertuples())
    return ("The seed's inflation examples through the simulator (a 200 us matmul split in two beside a 300 us "
            f"all-reduce, serial 500 us; a model, not a measurement): {cases}")


def _gain_finding(tbls, variant: str, what: str, backend: str, key_backend: str) -> list[Finding]:
    d = _derived(tbls, f"gain of {variant} over serial {key_backend}")
    if d is None:
        return []
    word = "gains" if d["point"] > 0 else "loses"
    return [Finding(f"the gain of {variant} ({what}) over serial {backend}", d,
                    says=f"{esc(variant)} ({esc(what)}) {word} {{figure}} against serial {esc(backend)} in the same "
                         "run")]


def findings(tbls: dict[str, pd.DataFrame]) -> list[Finding]:
    """The run's headline split (the search's best split of the fastest configuration) against
    serial with the backend's own collective in the same run (the lead), its measured time
    and prediction error, and the seed's split beside it; a model-only run states its model
    (labelled as one)."""
    if is_inflation(tbls):
        return [Finding("inflation", text=_inflation_text(tbls))]
    plan = _row(tbls, "_plan")
    if not plan.get("live"):
        return [Finding("model", text=_model_text(tbls))]
    head, backend = plan.get("headline"), plan.get("backend") or "default"
    shown = "NCCL" if backend == "nccl" else backend
    live = tbls["live"].set_index("variant")
    if not head:
        return [Finding("headline", text="No overlapped split passed its check")]
    row = live.loc[head]
    what = "the search's best split" if row["is_best"] else "the fastest split measured"
    what += (", left unsplit" if row["n_chunks"] == 1 else "") + f" of {row['provider']}, the run's fastest"
    out = _gain_finding(tbls, head, what, shown, backend)
    out.append(Finding("measured", text=f"{esc(head)} [{esc(short_chunks(row['chunks']))}] measured "
                                        f"{row['measured_us']:,.1f} us [{row['ci_lo_us']:,.1f}, {row['ci_hi_us']:,.1f}]"))
    err = _derived(tbls, f"prediction error of {head} (fitted contention)")
    if err is not None:
        out.append(Finding(f"the model's prediction error for {head} (fitted contention)", err))
    seed_split = "overlap/default/heuristic"
    if seed_split in live.index and seed_split != head:
        out += _gain_finding(tbls, seed_split, f"the seed's split with {shown} as shipped", shown, backend)
    return out


def _fits_section(plan: dict) -> str:
    if not plan.get("mm_fit"):
        return ""
    return ("## Cost fits\n\n"
            f"- CostMM(m) = {esc(plan['mm_fit'])} ({esc(plan['mm_fit_source'])})\n"
            f"- CostComm(x) = {esc(plan['comm_fit'])} ({esc(plan['comm_fit_source'])}), "
            f"{esc('x = m × N × sizeof(dtype)', 'code')}\n"
            f"- contention factor {esc(plan.get('contention'))} while both engines run (the seed: 1.15)\n")


def _derivation_section(tbls: dict[str, pd.DataFrame], plan: dict) -> str:
    steps = tbls.get("derivation")
    if steps is None or not len(steps):
        return ""
    head = (f"Result: **{esc(plan['chunks'])}** ({esc(plan['bound'])}-bound)" if plan.get("plan_ok") else
            f"**No valid split**: {esc(plan.get('reason'))}. The simulator shows the unsplit case.")
    lines = "\n".join(f"{i + 1}. **{esc(r.step)}**: {esc(r.derivation, 'code')}"
                      for i, r in enumerate(steps.itertuples()))
    best = ""
    if plan.get("best_chunks"):
        gap = plan.get("heuristic_over_best")
        best = (f"\n\nBest split (exact search over {esc(plan['best_align'])}-row tiles, at most "
                f"{esc(plan['best_max_chunks'])} chunks): {esc(plan['best_chunks'])}, {plan['best_us']:,.1f} us "
                "simulated" + (f"; the seed's split is {gap:.1%} slower in the model" if gap == gap else "") + ".")
    elif plan.get("best_skipped"):
        best = f"\n\n{esc(plan['best_skipped'])}."
    return ("## The seed's split, step by step\n\n" + lines + "\n\n" + head + best +
            "\n\nReadings of the seed: the short block is `max(a, b, c)` with `rule=example` (the seed's example), "
            "`min(a, b, c)` with `rule=text` (its text); communication-bound puts the short block first.")


def _floor_section(tbls: dict[str, pd.DataFrame]) -> str:
    rows = tbls["seed_floor"].set_index("quantity")["value"]
    floor, own = rows[seed.FLOOR_ROW], rows["seed's split, no contention (factor 1)"]
    fixed = rows["all-reduce fixed cost per chunk for 1262 us (seed's split, contention 1)"]
    slope = rows["all-reduce us/MiB for 1262 us (seed's split, contention 1.15, 47 us per chunk)"]
    factor = rows["contention factor for 1262 us (seed's split)"]
    with_f = rows["seed's split under the seed's fits, contention 1.15"]
    verdict_text = "lies below" if floor > seed.FUSED_US else "is within"
    return ("## The seed's 1262 us against its own fits\n\n"
            f"The seed's measured fused operator (1262 us, 32.7% faster than its 1874 us serial) **{verdict_text} "
            f"what its own fits allow**. Under CostMM = 16.5 us + 0.192 us/row and CostComm = 47 us + 16 us/MiB "
            f"(the lines through its 803, 1071 and 143 us and its m1 = 768), no 128-row split is faster than "
            f"{floor:,.0f} us even if the two engines did not slow each other at all (contention factor 1), and "
            f"its own split [512, 896 × 4] takes {own:,.0f} us ({with_f:,.0f} us with its 1.15). For 1262 us, "
            "at least one of these would have to be true of the fused operator: each chunk's all-reduce costs at "
            f"most {fixed:.1f} us fixed instead of 47 us (no contention); or its all-reduce moves data at "
            f"{slope:.1f} us/MiB instead of 16 ({16 / slope:.2f}x the bandwidth; contention 1.15); or the engines "
            f"speed each other up (a contention factor of {factor:.2f}). So the fused op's communication is not the "
            "standalone HCCL all-reduce its CostComm was fitted to.")


def _trace_section(tbls: dict[str, pd.DataFrame]) -> str:
    ov = tbls.get("trace_overlap")
    if ov is None or not len(ov):
        return ""
    ranks = ov["rank"].nunique()
    al = tbls.get("trace_alignment")
    how = "; ".join(dict.fromkeys(al["alignment"])) if al is not None and len(al) else ""
    return ("## Measured overlap (torch.profiler, one call each)\n\n"
            f"{ranks} rank(s) per profiled call" + (f", aligned by {esc(how)}" if ranks > 1 else
                                                   " (this run attached rank 0's traces only)") +
            ". A profiled call runs a little slower than a timed one; `overlap_us` is how long the collective "
            "ran under the matmul (the `trace_overlap` table).")


def _gantt_section(tbls: dict[str, pd.DataFrame]) -> str:
    gantt = tbls.get("_gantt")
    if gantt is None or not len(gantt):
        return ""
    return "## Gantt (simulated, ASCII)\n\n" + esc(ascii_gantt(gantt[gantt["shown"].astype(bool)]), "block")


def _planner_section(tbls: dict[str, pd.DataFrame]) -> str:
    """The planner learned on other hosts' runs, per configuration of this run."""
    cfg = tbls.get("planner_configs")
    if cfg is None or not len(cfg):
        return ""
    rows = pd.DataFrame({
        "configuration": cfg["provider"].map(esc),
        "recommended split (search)": [f"[{esc(short_chunks(c))}] {u:,.1f} us" if c else "" for c, u in
                                       zip(cfg["recommended"], cfg["recommended_us"])],
        "planner's pick (measured)": [f"{esc(p)} [{esc(short_chunks(c))}] {u:,.1f} us" for p, c, u in
                                      zip(cfg["pick"], cfg["pick_chunks"], cfg["pick_us"])],
        "fastest measured": [f"{esc(f)} {u:,.1f} us" for f, u in zip(cfg["fastest"], cfg["fastest_us"])],
        "pick over fastest": [f"{100 * x:+.1f}%" for x in cfg["pick_over_fastest"]],
        "predicted within 10%": [f"{k} of {n}" for k, n in zip(cfg["within"], cfg["splits"])]})
    hosts = "; ".join(dict.fromkeys(esc(t) for t in cfg["trained_on"]))
    return ("## The planner, learned on other hosts' runs\n\n"
            "Each overlapped split predicted by the study's pipeline model with this run's own cost fits and overlap "
            f"terms learned on the committed runs of other hosts ({hosts}), never on this run's host: the `planner` "
            "table has every split (`planned_us` beside `measured_us`, also in `live`). The planner's pick is the "
            "measured split it ranks first; the recommended split is its exact search, measured only where it "
            "equals a split the run timed.\n\n" + md_table(rows))


def _collective_section(tbls: dict[str, pd.DataFrame]) -> str:
    lib = tbls.get("collective")
    if lib is None or not len(lib):
        return ""
    return ("## The baseline's collective library\n\nWhich NCCL (RCCL on ROCm) ran the serial baseline's "
            "all-reduce and how its tuner chose, from a short launch of its own with NCCL's debug output on (the "
            "timed run is not changed by it): `workbench/running/collectives.py`.\n\n" + md_table(lib))


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    plan = _row(tbls, "_plan")
    secs = [_fits_section(plan), _derivation_section(tbls, plan), _gantt_section(tbls), _floor_section(tbls),
            _trace_section(tbls), _planner_section(tbls), _collective_section(tbls)]
    if plan.get("live"):
        secs.append("`live`: `err` uses the given contention factor, `err_fit` the (compute, comm) factors fitted "
                    "to the seed's and the uniform splits of the same collective (the best split is then searched "
                    "with them, so its error is out of sample); `gain` is against serial with the backend's own "
                    "collective in the same run, in % with its 95% CI from the raw samples. `contention`: the one factor that makes the simulator give "
                    "each measured split.")
    return [s for s in secs if s]


def ascii_gantt(gantt: pd.DataFrame, width: int = 72) -> str:
    """One text line per split and engine; digits mark the chunk running."""
    end = gantt["end_us"].max()
    lines = []
    for split, g in gantt.groupby("split", sort=False):
        lines.append(str(split))
        for lane in ("compute", "comm"):
            row = [" "] * width
            for seg in g[g["engine"] == lane].itertuples():
                a = int(seg.start_us / end * width)
                b = max(a + 1, int(seg.end_us / end * width))
                for i in range(a, min(b, width)):
                    row[i] = str(int(seg.chunk) % 10)
            lines.append(f"  {lane:>7} |{''.join(row)}|")
    return "\n".join(lines)


# --- the committed README's generated blocks (workbench.reading.readme) --------------------------------

def _pct_text(x, lo, hi) -> str:
    return f"{x:+.1f}% [{lo:+.1f}, {hi:+.1f}]" if pd.notna(x) else ""


def _us_text(r: dict) -> str:
    return f"{r['measured_us']:,.1f} [{r['ci_lo_us']:,.1f}, {r['ci_hi_us']:,.1f}]"


def run_target(gain, err) -> str:
    """The benchmark's target on one run, judged by the engine on the figures' CIs (their
    caveats included): the gain above 20% and the prediction error within 10% (met), either
    wholly outside (missed), else undecided."""
    if gain is None or err is None:
        return "not measured"
    parts = [engine.target(gain, at_least=TARGET_PCT), engine.target(err, at_least=-10.0),
             engine.target(err, at_most=10.0)]
    if "not measured" in parts:
        return "not measured"
    if all(p == "met" for p in parts):
        return "met"
    if "MISSED" in parts:
        return "missed"
    return "undecided (a CI includes its bound, or a figure cannot decide)"


def readme_runs(analyses: list, args: dict) -> str:
    """Per committed run of one world size (``world_size=N``): its best split, measured and
    serial NCCL (both with CIs), the gain (with what its CI covers), the prediction error (its
    CI covers the fits too) and the target judged on the CIs."""
    rows = []
    for a in analyses:
        live = a.tables.get("live")
        plan = a.tables.get("_plan")
        if live is None or not len(live) or plan is None or str(plan.iloc[0].get("world_size")) != args["world_size"]:
            continue
        top, serial = headline(live), live[live["variant"] == "serial/default"]
        if top is None or not len(serial):
            continue
        d = _derived(a.tables, f"gain of {top['variant']} over serial {plan.iloc[0]['backend']}") or {}
        rows.append({"run": a.rec.run_id.rsplit("-", 1)[-1],
                     "best split": f"{top['provider']} {top['split']} [{top['chunks']}]",
                     "measured us (95% CI)": _us_text(top), "serial NCCL us (95% CI)": _us_text(serial.iloc[0]),
                     "gain over serial NCCL (95% CI)": _pct_text(top.get("gain"), top.get("gain_lo"),
                                                                 top.get("gain_hi")),
                     "gain's CI covers": d.get("covers", ""),
                     "prediction error (fitted contention, 95% CI)":
                         _pct_text(100 * top.get("err_fit"), 100 * top.get("err_fit_lo"), 100 * top.get("err_fit_hi"))
                         if pd.notna(top.get("err_fit")) else "",
                     "target (>= 20%, within 10%; on the CIs)":
                         run_target(d or None, _derived(a.tables, f"prediction error of {top['variant']} (fitted "
                                                                  "contention)"))})
    return md_table(pd.DataFrame(rows))


def readme_spread(analyses: list, args: dict) -> str:
    """The spread over every committed run (:mod:`.spread`): the across-run gain and target."""
    return md_table(display(across_runs([a.rec for a in analyses])[0]))


README_BLOCKS = {"runs": readme_runs, "spread": readme_spread, "planner": readme_planner}
