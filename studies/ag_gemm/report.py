"""The ag-gemm study's report: the analysis tables in, charts, the verdict and the report
sections out (altair imported inside the chart functions: the GPU nodes have none).

Charts:

- ``speedup`` (the key chart): each provider's speedup over the baseline vs M, 95% CI bars,
  one panel per world size, hbm-buffer (the kernel under study, ``SUBJECT``) in the strongest
  colour on top, the perfect-overlap bound's speedup (max(all-gather, matmul) alone,
  measured in the same run) drawn dashed as the ceiling of them all, the seed's MI325X figures
  as hollow reference marks labelled as the seed's; kernel-mode runs: each variant's time over
  cuBLAS's vs M;
- ``experiments``: the seed review's experiments (one GPU with emulated peers, or across
  ranks): barrier and staging-layout time ratios vs M;
- ``methods``: median per call with its CI per provider, one panel per shape in numeric order,
  independent scales (M=1024 and M=16384 differ 16x);
- ``timeline``: the fused kernel's per-program trace, one lane per SM, coloured by category
  (fetch, wait, gemm) through the shared timeline (``workbench.traces.charts.timeline``);
- ``ranks``: per-rank traces of one provider, aligned, lanes grouped by rank.
"""

from __future__ import annotations

import json
import math
import re

import pandas as pd

from workbench.evidence import derived
from workbench.base.env import REPO_ROOT
from workbench.reading.readme import BlockError
from workbench.data.record import machine_label
from workbench.evidence.tables import md_table, render
from workbench.traces import charts as tc
from workbench.base.untrusted import escape as esc
from workbench.evidence.verdict import Finding

from . import analysis, kernelbench
from .seed import SEED_SPEEDUPS

SEED_MACHINE = "8x MI325X"
#: the kernel under study: drawn in the strongest colour, over the others
SUBJECT = "hbm-buffer"
BOUND = "perfect-overlap bound"
CATEGORY_COLORS = {"fetch": "#d62728", "wait": "#ff9f1c", "gemm": "#1f77b4"}
WIDTH = 900


def _ratio_panels(d: pd.DataFrame, y_title: str, title: str | list[str], seed: pd.DataFrame | None = None,
                  facet: str | None = "ranks"):
    """Points with 95% CI bars and lines per ``provider`` vs M (log axis, ticks at the M
    measured), a dashed rule at 1 (no change), optional hollow seed marks (``seed``: ranks, M,
    speedup, figure); one panel per ``facet`` value, in numeric order, own y scales."""
    import altair as alt

    from workbench.presentation import charts as wb

    xs = sorted({int(v) for v in d["M"]} | ({int(v) for v in seed["M"]} if seed is not None else set()))
    data = d.assign(_src="live", _bound=d["provider"].str.startswith(BOUND) if "provider" in d else False)
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
    # the perfect-overlap bound (a provider named BOUND) dashed: a ceiling, not a contestant
    dash = alt.StrokeDash("_bound:N", legend=None, scale=alt.Scale(domain=[False, True], range=[[1, 0], [6, 3]]))
    layers = [live.mark_line(opacity=0.8).encode(y=y, strokeWidth=size, strokeDash=dash),
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
        bnd = d[(d["table"] == "bound_speedup") & (d["status"] != "not meaningful") & (d["dtype"] == dtypes[0])]
        if "shard" in bnd:
            bnd = bnd[bnd["shard"] == "rows"]
        live = pd.concat([live, bnd.assign(provider=BOUND + " max(AG, mm)")], ignore_index=True)
        seed = pd.DataFrame(SEED_SPEEDUPS)
        seed = seed[seed["ranks"].isin(live["ranks"].unique())]
        dtype = live["dtype"].iloc[0]
        return _ratio_panels(live[["provider", "ranks", "M", "point", "lo", "hi", "status"]],
                             "speedup over NCCL all-gather + matmul (x)",
                             [f"Speedup over all-gather then matmul vs M ({dtype}; >1 faster; 95% CI); dashed: the "
                              "perfect-overlap bound,", "measured in the same run; the seed's as hollow marks"],
                             seed if len(seed) else None)
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

    from workbench.presentation import charts as wb

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
    sp = tbls.get("_program_spans")
    if sp is None or sp.empty:
        return None
    name = str(sp["trace"].iloc[0])
    return tc.timeline(sp.drop(columns="trace"), width=WIDTH, color_by="category", row_px=7,
                       title=f"hbm-buffer kernel, one lane per SM ({name}): fetch, wait and gemm rows by category")


def ranks_chart(tbls: dict[str, pd.DataFrame]):
    rs = tbls.get("_rank_spans")
    if rs is None or rs.empty:
        return None
    group, how = str(rs["group"].iloc[0]), str(rs["alignment"].iloc[0])
    return tc.timeline(rs.drop(columns=["group", "alignment"]), width=WIDTH,
                       title=f"{group}: every rank's trace, aligned", note=f"clocks aligned by {how}")



#: what each table and chart is called where people read it (workbench.base.names; ids stay in the API)
TITLES = {
    "seed_table": "The seed's table beside this run's", "summary": "Per shape: the best provider and the fused kernel",
    "variants": "Every variant's median", "checks": "Correctness checks",
    "mechanisms": "How each provider moves A and computes",
    "kernel_breakdown": "The fused kernel on one GPU: GEMM path and fetch path",
    "kernel_experiments": "The seed review's experiments", "program_overlap": "The fused kernel's own overlap",
    "program_trace_summary": "Per-program trace summary", "rank_traces": "Per-rank traces",
    "ranks": "Per rank: the slowest rank and the skew", "speedup": "Speed-up over the baseline, per M",
    "experiments": "The seed review's experiments", "methods": "Median per call of every provider",
    "timeline": "The fused kernel's timeline, one lane per SM", "chart:ranks": "Every rank's trace, aligned",
    "collective": "The collective library of the NCCL baseline (version, algorithm, protocol)",
}

def charts(tbls: dict[str, pd.DataFrame], only: str | None = None) -> dict:
    """Every chart the run's tables make (``only``: that one alone, for a short report)."""
    makers = {"speedup": speedup_chart, "experiments": experiments_chart, "methods": methods_chart,
              "timeline": timeline_chart, "ranks": ranks_chart}
    made = {k: make(tbls) for k, make in makers.items() if only in (None, k)}
    return {k: v for k, v in made.items() if v is not None}


# --- verdict and report ------------------------------------------------------------------------


def _by_status(rows: pd.DataFrame, column: str) -> str:
    """Shapes grouped by their target's status ("met: bf16 M=16384; MISSED: ..."): shorter than
    a status per shape, and the misses read at a glance. Ranks are named when they differ."""
    ranks = rows["ranks"].nunique() > 1
    groups: dict[str, list[str]] = {}
    for r in rows.to_dict("records"):
        shape = (f"{r['ranks']} ranks " if ranks else "") + f"{esc(r['dtype'])} M={r['M']}"
        groups.setdefault(esc(r[column]), []).append(shape)
    return "; ".join(f"{status} at {', '.join(shapes)}" for status, shapes in groups.items())

def _largest(summ: pd.DataFrame) -> dict:
    """The seed table's headline shape: the most ranks, fp16 where measured, the largest M."""
    top = summ[summ["ranks"] == summ["ranks"].max()]
    top = top[top["dtype"] == "fp16"] if (top["dtype"] == "fp16").any() else top
    return top.sort_values("M").iloc[-1].to_dict()


def _targets(summ: pd.DataFrame) -> list[Finding]:
    """The issue's targets, judged by the engine on the CIs, as facts (grouped by status)."""
    out = []
    for col, what in (("met", "the best provider's speedup targets (fp16)"),
                      ("hbm_met", "HBM-buffer's own targets (>= 1.30x at M=16384, not slower at M=1024)"),
                      ("best_frac_met", f"the best provider's fraction of the perfect-overlap bound (>= "
                                        f"{analysis.BOUND_TARGET:.2f} at M >= {analysis.BOUND_TARGET_FROM_M})")):
        rows = summ[summ[col].notna()] if col in summ else summ.iloc[:0]
        if len(rows):
            out.append(Finding(col, text=f"{what[:1].upper() + what[1:]}, judged on the CIs: {_by_status(rows, col)}"))
    return out


def findings(tbls: dict[str, pd.DataFrame]) -> list[Finding]:
    """Multi-GPU: the seed's kernel (hbm-buffer) against all-gather + matmul at the headline
    shape (the lead), the run's best provider there, the targets; kernel mode: the targets of
    issue #23 and the review's experiments."""
    out = []
    summ, d = tbls.get("summary"), tbls.get("derived", pd.DataFrame())
    if summ is not None and len(summ):
        r = _largest(summ)
        where = f"{r['ranks']} ranks {r['dtype']} M={r['M']}"
        sp = d[d["table"] == "speedup"] if len(d) else d
        for prov in dict.fromkeys(["hbm-buffer", r["best"]] if r["best"] else ["hbm-buffer", "all-gather-cat"]):
            hit = sp[(sp["provider"] == prov) & (sp["ranks"] == r["ranks"]) & (sp["dtype"] == r["dtype"])
                     & (sp["M"] == r["M"])] if len(sp) else sp
            for row in hit.head(1).to_dict("records"):
                label = f"{prov}'s speedup over all_gather_into_tensor + matmul at {where}"
                out.append(Finding(label, row, says=f"{esc(label)}: {{figure}} (median of per-round ratios)"))
        out += _targets(summ)
    kb = tbls.get("kernel_breakdown")
    if kb is not None and len(kb):
        out.append(Finding("kernel targets", text=kernelbench.verdict(kb)))
    ex = tbls.get("kernel_experiments")
    if ex is not None and len(ex) and summ is None and len(d):
        out += [Finding(str(x["name"]), x) for x in d[d["table"].isin(("barrier", "layout"))].to_dict("records")]
    if not out:
        out.append(Finding("nothing", text="No shape has both the NCCL baseline and another provider measured"))
    return out


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    out = []
    st = tbls.get("seed_table")
    if st is not None and len(st):
        out.append("### All-gather + GEMM in the seed's shape (measured in this run)\n"
                   "Baseline: NCCL all_gather_into_tensor, then torch.matmul. HBM Buffer: the seed's kernel "
                   "(`hbm-buffer`, SM fetch); HBM CE: the same kernel fed by copy engines (`hbm-buffer-ce`). Best: "
                   "the fastest checked provider of the run, with its mechanism. Bound: the perfect-overlap bound "
                   "max(all-gather alone, matmul alone), each round's own, timed in the same rounds; `/ bound` is "
                   "a provider's fraction of it (bound / provider time: 1 is perfect overlap). Medians per call, "
                   "maximum over ranks, 95% CIs; speedups and fractions are medians of per-round ratios.\n\n"
                   + render(st))
    lib = tbls.get("collective")
    if lib is not None and len(lib):
        out.append("### The baseline's collective library\nWhich NCCL (RCCL on ROCm) ran the baseline's "
                   "all-gather and how its tuner chose, from a short launch of its own with NCCL's debug output on "
                   "(the timed run is not changed by it): `workbench/running/collectives.py`.\n\n" + render(lib))
    mech = tbls.get("mechanisms")
    if mech is not None and len(mech):
        out.append("### How each provider moves A and computes\nWho moves the peers' rows (SM loads, copy engine, "
                   "NCCL's kernels), what computes C, and which SMs communication takes; the fused kernel's as "
                   "recorded by the run (TMA or pointer loads, the copy call, how the flags were written).\n\n"
                   + render(mech))
    rk = tbls.get("ranks")
    if rk is not None and len(rk):
        cols = ["variant", "rank_medians_us", "slowest_rank", "slowest_rank_us", "max_over_ranks_us", "skew_us",
                "skew_lo_us", "skew_hi_us"]
        out.append("### Per rank: the slowest rank and the skew\nEach rank's median (us, rank order), the slowest "
                   "rank, the median of the per-call maximum over ranks, and the skew (slowest minus fastest rank, "
                   "median over rounds, 95% CI).\n\n" + render(rk[cols]))
    chk = tbls.get("checks")
    if chk is not None and len(chk) and ((chk["shard"] == "k").any() or chk["where"].str.contains("interp").any()):
        out.append("### Correctness checks, both formulations\n`shard=k` is the seed's formulation (A sharded "
                   "along K): its `nccl` baseline (all_gather_into_tensor into an (M, K) buffer) does not "
                   "concatenate along K and fails; `all-gather-cat` (all_gather + cat(dim=1)) passes. A failed "
                   "check's time is never counted.\n\n" + render(chk))
    po = tbls.get("program_overlap")
    if po is not None and len(po):
        out.append("### The fused kernel's own overlap (per-program records)\nFrom each traced launch of the "
                   "hbm-buffer kernel, one record per program: fetch rows are communication, GEMM rows computation "
                   "(`workbench.traces.overlap`, unions over SMs). `fetch_hidden_pct`: the share of the fetch time "
                   "during which some SM computed; `neither_pct`: the share of the kernel's span with no fetch or "
                   "GEMM running (programs waiting on flags or not started).\n\n" + render(po))
    kb = tbls.get("kernel_breakdown")
    if kb is not None and len(kb):
        out.append("### The fused kernel on one GPU: GEMM path and fetch path against cuBLAS\n"
                   + kernelbench.__doc__.split("\n\n", 1)[1].split("\n\nClock:")[0].strip() + "\n\n"
                   + kernelbench.format_breakdown(kb))
    ex = tbls.get("kernel_experiments")
    if ex is not None and len(ex):
        out.append("### The seed review's experiments\nOn one GPU with emulated peers (kernel mode) or across the "
                   "ranks of a multi-GPU run (the `where` column). Barrier: the CTA barrier "
                   "between a fetch row's stores and its flag release, on and off; each checked launch starts "
                   "from a staging buffer filled with NaN. Layout: tile-contiguous against row-major staging. "
                   "Time ratios are medians of per-round ratios.\n\n" + kernelbench.format_experiments(ex))
    return out


# --- the committed README's generated blocks (workbench.reading.readme) --------------------------------

#: the ratio columns of the kernel-mode runs' README table: (column, method, world size, the
#: derived figure's name); issue #23 judges the GEMM path by throughput, the whole kernel by time
KERNEL_RATIOS = (("kernel ws1: cuBLAS/time (95% CI)", "kernel", 1, "GEMM efficiency"),
                 ("GEMM path ws2: cuBLAS/time (95% CI)", "gemm-path", 2, "GEMM efficiency"),
                 ("emulated ws2: time/cuBLAS (95% CI)", "emulated", 2, "time over cuBLAS's"),
                 ("emulated ws4: time/cuBLAS (95% CI)", "emulated", 4, "time over cuBLAS's"))


def _missed(shape: pd.DataFrame) -> str:
    """The issue #23 targets of one shape that its run did not meet on the CI (kernelbench's
    ``met``; None: the variant was not measured), named as the table's columns name them."""
    label = {(method, ws): column.split(":")[0] for column, method, ws, _ in KERNEL_RATIOS}
    out = []
    for r in shape[shape["target"].notna()].to_dict("records"):
        if r["met"] != "met":
            bound = f">= {r['target']:.2f}x throughput" if r["target_kind"] == "gemm" else f"<= {r['target']:.2f}x time"
            out.append(f"{label[(r['method'], r['world_size'])]} ({bound}"
                       + (")" if r["met"] == "MISSED" else f": {r['met']})"))
    return "; ".join(out) or "none"


def _kernel_runs(analyses: list, args: dict) -> list[tuple[str, object]]:
    """The kernel-mode analyses named in ``runs=`` (run-id suffixes), in that order."""
    by_run = {a.rec.run_id.rsplit("-", 1)[-1]: a for a in analyses if a.tables.get("kernel_breakdown") is not None}
    runs = args["runs"].split(",")
    if absent := [r for r in runs if r not in by_run]:
        raise BlockError(f"no kernel-mode bundle beside the README for run(s) {absent}")
    return [(run, by_run[run]) for run in runs]


def readme_kernel_runs(analyses: list, args: dict) -> str:
    """Per kernel-mode run named in ``runs=`` (run-id suffixes, rows in that order), dtype and
    M: the run's card and date, cuBLAS's time and the kernel's ratios to it (medians of
    per-round ratios, 95% CIs) and the issue #23 targets the run missed."""
    rows = []
    for run, a in _kernel_runs(analyses, args):
        kb, d = a.tables["kernel_breakdown"], a.tables["derived"]
        for (dtype, m), shape in kb.groupby(["dtype", "M"], sort=False):
            cublas = shape[shape["method"] == "cublas"]
            row = {"run": run, "GPU": machine_label(a.rec.env), "date": a.rec.created_utc[:10], "dtype": dtype, "M": m,
                   "cuBLAS us (95% CI)": "" if cublas.empty else
                   "{median_us:,.1f} [{ci_lo_us:,.1f}, {ci_hi_us:,.1f}]".format(**cublas.iloc[0].to_dict())}
            for column, method, ws, name in KERNEL_RATIOS:
                hit = d[(d["table"] == "kernel") & (d["method"] == method) & (d["world_size"] == ws)
                        & (d["dtype"] == dtype) & (d["M"] == m) & d["name"].str.startswith(name)]
                row[column] = derived.fmt_derived(hit.iloc[0].to_dict(), status=False) if len(hit) else ""
            row["targets missed (on the CI)"] = _missed(shape)
            rows.append(row)
    return md_table(pd.DataFrame(rows))


def readme_kernel_targets(analyses: list, args: dict) -> str:
    """Per kernel-mode run named in ``runs=``: its card, date and dtypes, and how many of the
    issue #23 targets its shapes carry it met on the 95% CI, missed, left undecided (the CI
    straddles the target, or a caveat keeps it from deciding), or did not measure: as the
    engine judged each (:func:`workbench.evidence.engine.target`)."""
    rows = []
    for run, a in _kernel_runs(analyses, args):
        kb = a.tables["kernel_breakdown"]
        met = kb.loc[kb["target"].notna(), "met"]
        rows.append({"run": run, "GPU": machine_label(a.rec.env), "date": a.rec.created_utc[:10],
                     "dtype": ", ".join(map(str, kb["dtype"].unique())), "targets": len(met),
                     "met": int((met == "met").sum()), "missed": int((met == "MISSED").sum()),
                     "undecided": int((met == "inconclusive").sum()),
                     "not measured": int((met.isna() | (met == "not measured")).sum())})
    return md_table(pd.DataFrame(rows))


#: the kernel sweeps (``scripts/gpu/ag_gemm_kernel_sweep.py``), committed as JSON lines
SWEEPS = REPO_ROOT / "traces" / "ag-gemm" / "kernel-sweeps"
_SWEEP_RE = re.compile(r"^h[0-9]00-[0-9]+-[0-9a-f]{7}$")
#: a sweep file larger than this is not one the script wrote (the biggest is about 1 MB)
_SWEEP_MAX_BYTES = 16 << 20

#: the ablation, one step per row: (path, change, sweep, variant label); each row adds one
#: change to the row above it within its path, and its figures are that variant's in that sweep
ABLATION = [
    ("GEMM path, world size 1", "kernel before this issue", "h100-3-e72cf77", "old kernel (before this issue)"),
    ("GEMM path, world size 1", "persistent programs taking tickets of a host-built queue",
     "h100-3-e72cf77", "persistent queue, pointer loads, whole tiles, 3 stages"),
    ("GEMM path, world size 1", "+ TMA", "h100-3-e72cf77", "+ TMA loads/stores, 3 stages"),
    ("GEMM path, world size 1", "+ 4 stages", "h100-3-e72cf77", "+ 4 stages"),
    ("GEMM path, world size 1", "+ stream-K over the last wave", "h100-3-e72cf77", "+ stream-K (k-aligned pieces)"),
    ("GEMM path, world size 1", "kernel before this issue", "h200-6-9ff70be", "old kernel (before this issue)"),
    ("GEMM path, world size 1", "all of the above", "h200-6-9ff70be", "+ stream-K (k-aligned pieces)"),
    ("fetch path, emulated world size 2", "kernel before this issue", "h100-3-e72cf77", "old kernel, emulated ws2"),
    ("fetch path, emulated world size 2", "new kernel, fetch rows of 32 k-tiles, 2-byte loads",
     "h100-2-d80963c", "emulated ws2: 32 k-tiles per flag, 16 fetch rows first"),
    ("fetch path, emulated world size 2", "+ 16-byte fetch loads",
     "h100-3-e72cf77", "emulated ws2: 32 k-tiles per flag, 16 fetch rows first"),
    ("fetch path, emulated world size 2", "+ k-tiles per flag by shape", "h100-4-1f37cbc", "emulated ws2: flags by shape"),
]


def sweep_rows(stem: str) -> list[dict]:
    """The rows of one committed kernel sweep (``kernel-sweeps/<stem>.jsonl``). The name must
    be a sweep's (GPU, number, commit) and the file of a sweep's size; a line that is not a JSON
    object stops the block (committed data the tool reads, never runs)."""
    path = SWEEPS / f"{stem}.jsonl"
    if not _SWEEP_RE.match(stem) or not path.is_file():
        raise BlockError(f"no kernel sweep {stem!r} in traces/ag-gemm/kernel-sweeps")
    if path.stat().st_size > _SWEEP_MAX_BYTES:
        raise BlockError(f"kernel sweep {stem}: over {_SWEEP_MAX_BYTES >> 20} MiB, not a sweep's file")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            raise BlockError(f"kernel sweep {stem}, line {n}: not a JSON object")
        rows.append(row)
    return rows


def _samples_ns(row: dict, stem: str) -> list[float]:
    s = row.get("samples_ns")
    ok = isinstance(s, list) and 0 < len(s) <= 100_000 and all(type(v) in (int, float) for v in s)
    try:
        out = [float(v) for v in s] if ok else []
    except OverflowError:  # an integer too large for a float
        out = []
    if not out or not all(map(math.isfinite, out)):
        raise BlockError(f"kernel sweep {stem}: {row.get('label')!r} at M={row.get('M')} has no samples")
    return out


def readme_ablation(analyses: list, args: dict) -> str:
    """The ablation (:data:`ABLATION`): per step, its variant's time over cuBLAS's in its sweep
    for each M (``dtype=``, default fp16), computed here from the sweep's raw samples as the
    kernel mode computes it (:func:`kernelbench.paired_ratio`: the median of per-round ratios,
    95% bootstrap CI over that sweep's rounds). The first three H100 sweeps (``h100-1`` to
    ``h100-3``) stored a ratio of medians as ``time_ratio``, which differs from the paired
    figure in the third decimal; the later ones store the paired figure."""
    dtype = args.get("dtype", "fp16")
    cache: dict[str, list[dict]] = {}
    rows = []
    for path, change, stem, label in ABLATION:
        if stem not in cache:
            cache[stem] = [r for r in sweep_rows(stem) if r.get("dtype") == dtype and r.get("ok")
                           and isinstance(r.get("M"), int)]
        sweep = cache[stem]
        found = sorted((r for r in sweep if r.get("label") == label), key=lambda r: r["M"])
        if not found:
            raise BlockError(f"kernel sweep {stem} has no checked {dtype} variant {label!r}")
        row = {"path": path, "change": change, "GPU": stem.split("-")[0].upper(), "sweep": stem}
        for r in found:
            base = [b for b in sweep if b.get("label") == "cuBLAS" and b.get("M") == r.get("M")]
            row[f"M={r['M']}"] = derived.fmt_derived(kernelbench.sweep_ratio(
                _samples_ns(base[0], stem), _samples_ns(r, stem)), status=False) if base else "no cuBLAS row"
        rows.append(row)
    return md_table(pd.DataFrame(rows).fillna(""))


def readme_sweep(analyses: list, args: dict) -> str:
    """Every checked variant of one kernel sweep (``sweep=``, a ``kernel-sweeps/`` stem), in the
    sweep's order, for ``dtype=`` (default fp16): its time over cuBLAS's at each M, computed
    from the sweep's raw samples as :func:`readme_ablation` computes it."""
    stem, dtype = args["sweep"], args.get("dtype", "fp16")
    sweep = [r for r in sweep_rows(stem) if r.get("dtype") == dtype and r.get("ok") and isinstance(r.get("M"), int)]
    base = {r["M"]: _samples_ns(r, stem) for r in sweep if r.get("label") == "cuBLAS"}
    rows: dict[str, dict] = {}
    for r in sweep:
        if r.get("label") == "cuBLAS" or r["M"] not in base:
            continue
        row = rows.setdefault(str(r.get("label")), {"variant": str(r.get("label"))})
        row[f"M={r['M']}"] = derived.fmt_derived(kernelbench.sweep_ratio(base[r["M"]], _samples_ns(r, stem)),
                                                 status=False)
    if not rows:
        raise BlockError(f"kernel sweep {stem} has no checked {dtype} variant beside cuBLAS")
    return md_table(pd.DataFrame(list(rows.values())).fillna(""))


README_BLOCKS = {"kernel_runs": readme_kernel_runs, "kernel_targets": readme_kernel_targets,
                 "ablation": readme_ablation, "sweep": readme_sweep}
