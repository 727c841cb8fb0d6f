"""Charts of the ag-gemm study (tables in, Altair charts out; altair imported inside, the GPU
nodes have none).

- ``speedup`` (the key chart): each provider's speedup over the baseline vs M, 95% CI bars,
  one panel per world size, the seed's MI325X figures as hollow reference marks labelled as
  the seed's; kernel-mode runs: each variant's time over cuBLAS's vs M;
- ``experiments``: the seed review's experiments (one GPU with emulated peers, or across
  ranks): barrier and staging-layout time ratios vs M;
- ``methods``: median per call with its CI per provider, one panel per shape in numeric order,
  independent scales (M=1024 and M=16384 differ 16x);
- ``timeline``: the fused kernel's per-program trace, one lane per SM, coloured by category
  (fetch, wait, gemm) through the shared timeline (``workbench.traces.charts.timeline``);
- ``ranks``: per-rank traces of one provider, aligned, lanes grouped by rank.
"""

from __future__ import annotations

import pandas as pd

#: the seed's speedups of its HBM-buffer kernel over its all-gather baseline (PR table; the
#: review's randn rerun at 8 ranks), as reference marks
SEED_SPEEDUPS = [
    {"ranks": 2, "M": 1024, "speedup": 1.67 / 0.78, "figure": "HBM buffer, seed PR table"},
    {"ranks": 2, "M": 16384, "speedup": 27.8 / 8.2, "figure": "HBM buffer, seed PR table"},
    {"ranks": 4, "M": 16384, "speedup": 27.3 / 8.6, "figure": "HBM buffer, seed PR table"},
    {"ranks": 8, "M": 16384, "speedup": 24.4 / 8.9, "figure": "HBM buffer, seed PR table"},
    {"ranks": 8, "M": 1024, "speedup": 0.262 / 0.516, "figure": "HBM buffer, seed review (randn)"},
    {"ranks": 8, "M": 4096, "speedup": 0.677 / 1.425, "figure": "HBM buffer, seed review (randn)"},
    {"ranks": 8, "M": 16384, "speedup": 2.300 / 3.257, "figure": "HBM buffer, seed review (randn)"},
]
SEED_MACHINE = "8x MI325X"
#: the kernel under study: drawn in the strongest colour, over the others
SUBJECT = "hbm-buffer"
CATEGORY_COLORS = {"fetch": "#d62728", "wait": "#ff9f1c", "gemm": "#1f77b4"}
WIDTH = 900


def _ratio_panels(d: pd.DataFrame, y_title: str, title: str | list[str], seed: pd.DataFrame | None = None,
                  facet: str | None = "ranks"):
    """Points with 95% CI bars and lines per ``provider`` vs M (log axis, ticks at the M
    measured), a dashed rule at 1 (no change), optional hollow seed marks (``seed``: ranks, M,
    speedup, figure); one panel per ``facet`` value, in numeric order, own y scales."""
    import altair as alt

    from workbench import charts as wb

    xs = sorted({int(v) for v in d["M"]} | ({int(v) for v in seed["M"]} if seed is not None else set()))
    data = d.assign(_src="live")
    if seed is not None and len(seed):
        data = pd.concat([data, seed.rename(columns={"speedup": "point"}).assign(_src="seed")], ignore_index=True)
    x = alt.X("M:Q", scale=alt.Scale(type="log", nice=False, padding=14), title="M (rows of A and C, all ranks)",
              axis=alt.Axis(values=xs, format="d"))
    # one y domain around the CIs, 1 and the seed's marks: every mark inside the frame
    domain = wb.fitted_domain(list(data["point"]) + list(data.get("lo", [])) + list(data.get("hi", [])) + [1.0])
    y = alt.Y("point:Q", title=y_title, scale=alt.Scale(domain=domain, nice=False))
    color = alt.Color("provider:N", title="provider", legend=alt.Legend(labelLimit=300),
                      scale=wb.subject_scale(d["provider"], SUBJECT))
    # the kernel under study on top, thicker; the others behind it
    size = alt.condition(f"datum.provider == '{SUBJECT}'", alt.value(3), alt.value(1.5))
    tip = ["provider", "M", alt.Tooltip("point:Q", format=".3f", title=y_title),
           alt.Tooltip("lo:Q", format=".3f", title="95% CI lo"), alt.Tooltip("hi:Q", format=".3f", title="95% CI hi"),
           "status"]
    live = alt.Chart().transform_filter("datum._src == 'live'").encode(x=x, color=color)
    subject = live.transform_filter(f"datum.provider == '{SUBJECT}'")  # drawn again, on top
    layers = [live.mark_line(opacity=0.8).encode(y=y, strokeWidth=size),
              live.mark_errorbar(thickness=2).encode(y=alt.Y("lo:Q", title=y_title), y2="hi:Q"),
              live.mark_point(filled=True, size=60).encode(y=y, tooltip=tip),
              subject.mark_line(strokeWidth=3).encode(y=y), subject.mark_point(filled=True, size=80).encode(y=y, tooltip=tip),
              alt.Chart().mark_rule(color="black", strokeDash=[2, 2]).encode(y=alt.datum(1))]
    if seed is not None and len(seed):
        layers.append(alt.Chart().transform_filter("datum._src == 'seed'").mark_point(
            filled=False, size=120, color="#444444", strokeWidth=2).encode(
            x=x, y=y, shape=alt.Shape("figure:N", title=f"the seed's ({SEED_MACHINE})",
                                      scale=alt.Scale(range=["diamond", "triangle-up"])),
            tooltip=["figure", "ranks", "M", alt.Tooltip("point:Q", format=".2f", title="speedup")]))
    chart = alt.layer(*layers, data=data).properties(width=380, height=200)
    if not facet:  # its own size: the app's default "fit" squeezes a layer with a wide legend to a strip
        chart = chart.properties(autosize=alt.AutoSizeParams(type="pad"))
    if facet:
        vals = sorted(int(v) for v in data[facet].dropna().unique())
        chart = chart.facet(column=alt.Column(f"{facet}:O", sort=vals, title="ranks (world size)")).resolve_scale(
            y="independent")
    return chart.properties(title=title)


def speedup_chart(tbls: dict[str, pd.DataFrame]):
    d = tbls.get("derived")
    if d is None or not len(d) or "table" not in d:
        return None
    sp = d[(d["table"] == "speedup") & (d["status"] != "not meaningful")]
    sp = sp[sp["shard"] == "rows"] if "shard" in sp else sp
    if len(sp):
        dtypes = sorted(sp["dtype"].unique(), key=lambda d: d != "fp16")  # the seed's dtype first
        live = sp[sp["dtype"] == dtypes[0]]
        seed = pd.DataFrame(SEED_SPEEDUPS)
        seed = seed[seed["ranks"].isin(live["ranks"].unique())]
        dtype = live["dtype"].iloc[0]
        return _ratio_panels(live[["provider", "ranks", "M", "point", "lo", "hi", "status"]],
                             "speedup over NCCL all-gather + matmul (x)",
                             f"Speedup over all-gather then matmul vs M ({dtype}; >1 faster; 95% CI), seed's as "
                             "hollow marks", seed if len(seed) else None)
    kr = d[(d["table"] == "kernel") & d["name"].str.startswith("time over")]
    if len(kr):
        k = kr.assign(provider=kr["method"] + " ws" + kr["world_size"].astype(int).astype(str) + " " + kr["dtype"])
        return _ratio_panels(k[["provider", "M", "point", "lo", "hi", "status"]],
                             "time over cuBLAS's (x)", "The fused kernel on one GPU: time over cuBLAS's vs M "
                             "(1 = cuBLAS; 95% CI of per-round ratios)", facet=None)
    return None


def experiments_chart(tbls: dict[str, pd.DataFrame]):
    """The seed review's experiments: time with the barrier over without, tile-contiguous
    over row-major staging, per M (95% CI of per-round ratios; 1 = no change)."""
    d = tbls.get("derived")
    if d is None or not len(d) or "table" not in d:
        return None
    ex = d[d["table"].isin(["barrier", "layout"]) & (d["status"] != "not meaningful")]
    if not len(ex):
        return None
    what = {"barrier": "barrier: with / without", "layout": "staging: tiles / rows"}
    where = (ex["where"] if "where" in ex else pd.Series(index=ex.index, dtype=object)).fillna("emulated ws2, one GPU")
    ex = ex.assign(provider=ex["table"].map(what) + " " + ex["dtype"])
    return _ratio_panels(ex[["provider", "M", "point", "lo", "hi", "status"]], "time ratio (x)",
                         # two lines: a title wider than a half-width column squeezes the plot to nothing
                         [f"The seed review's experiments ({', '.join(sorted(set(where)))}):",
                          "time ratios vs M (1 = no change; 95% CI)"], facet=None)


def methods_chart(tbls: dict[str, pd.DataFrame]):
    import altair as alt

    from workbench import charts as wb

    v = tbls.get("variants")
    if v is None or v.empty or "provider" not in v or "M" not in v:
        return None
    ok = v[v["correct"].astype(bool) & v["median_ns"].notna()].copy()
    if ok.empty:
        return None
    kernel = ok["mode"].eq("kernel") if "mode" in ok else pd.Series(False, index=ok.index)
    ok["bar"] = ok["variant"].str.split("/").str[0]
    shard = ok["shard"].map({"k": " K-sharded"}).fillna("") if "shard" in ok else ""
    ok["shape"] = (ok["dtype"] + " M=" + ok["M"].astype(int).astype(str) + shard +
                   (" ws=" + ok["world_size"].astype(int).astype(str)).where(~kernel, " one GPU"))
    order = ok.sort_values(["M", "dtype", "world_size"])["shape"].drop_duplicates().tolist()
    unit = wb.time_unit(ok["median_ns"])
    d = wb.in_unit(ok, unit)
    title = wb.titled("median per call (multi-GPU: max over ranks)", unit)
    base = alt.Chart(d).encode(y=alt.Y("bar:N", title=None, axis=alt.Axis(labelLimit=220, labelOverlap=False)),
                               color=alt.Color("bar:N", legend=None, scale=wb.subject_scale(d["bar"], SUBJECT)))
    bars = base.mark_bar().encode(x=alt.X("median:Q", title=title),
                                  tooltip=["variant", alt.Tooltip("median:Q", format=".4g"), "check"])
    err = base.mark_rule(color="black").encode(x="lo:Q", x2="hi:Q")
    head = ("The fused kernel on one GPU against cuBLAS" if kernel.all() else "All-gather + matmul providers")
    return (bars + err).properties(width=220, height=alt.Step(20)).facet(  # 3 panels fit the page
        facet=alt.Facet("shape:N", sort=order, title=None), columns=3).resolve_scale(
        x="independent", y="independent").properties(title=f"{head}: median per call, 95% CI (panels by M)")


def timeline_chart(tbls: dict[str, pd.DataFrame]):
    from workbench.traces import charts as tc

    sp = tbls.get("_program_spans")
    if sp is None or sp.empty:
        return None
    name = str(sp["trace"].iloc[0])
    return tc.timeline(sp.drop(columns="trace"), width=WIDTH, color_by="category", row_px=7,
                       title=f"hbm-buffer kernel, one lane per SM ({name}): fetch, wait and gemm rows by category")


def ranks_chart(tbls: dict[str, pd.DataFrame]):
    from workbench.traces import charts as tc

    rs = tbls.get("_rank_spans")
    if rs is None or rs.empty:
        return None
    group, how = str(rs["group"].iloc[0]), str(rs["alignment"].iloc[0])
    return tc.timeline(rs.drop(columns=["group", "alignment"]), width=WIDTH,
                       title=f"{group}: every rank's trace, aligned", note=f"clocks aligned by {how}")


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    made = {"speedup": speedup_chart(tbls), "experiments": experiments_chart(tbls), "methods": methods_chart(tbls),
            "timeline": timeline_chart(tbls), "ranks": ranks_chart(tbls)}
    return {k: v for k, v in made.items() if v is not None}
