"""Analysis of ag-gemm runs: every number the page, the report and the claims read.

From a run record to tables (no other arithmetic happens anywhere else): :func:`analyze`
gathers the multi-GPU tables below, the one-GPU kernel mode's (:mod:`.kernelbench`) and the
attached traces' (``program_trace_summary``, ``rank_traces``, ``_program_spans``,
``_rank_spans``). The multi-GPU tables:

- ``summary``: per (ranks, dtype, M) of the row-sharded formulation, the baseline (NCCL
  all-gather, then matmul), the HBM-buffer kernel (SM fetch and copy-engine fetch) and the best
  provider of the run, each with its median, speedup over the baseline, TFLOP/s and fraction
  of the perfect-overlap bound (``studies/ag_gemm/bound.py``), the bound's time and speedup,
  the issue's targets (of the best provider; of the HBM-buffer kernel itself), and the HBM-buffer
  kernel's slowest rank and skew between ranks;
  ``seed_table``: the same in the seed's shape, numbers with their CIs;
- ``derived`` rows (``workbench.evidence.derived``, extra columns ``table, shard, ranks, dtype, M,
  provider``): each provider's speedup over the baseline (``table="speedup"``: the median of
  per-round ratios, since the providers of a shape are timed round-robin, with a bootstrap CI),
  how the speedup changes from the smallest to the largest M (``"gain"``), the M at which a
  provider crosses the baseline (``"crossover"``), the skew between ranks (``"skew"``), each
  provider's fraction of the bound (``"bound_fraction"``: median over rounds of
  max(all-gather, matmul) / provider) and the bound's own speedup (``"bound_speedup"``);
- ``ranks``: per variant, every rank's median, the slowest rank and the skew;
- ``checks``: every variant's correctness check, both formulations, and the fused kernel
  under Triton's interpreter where the run did that (``outputs["interpreter_check"]``).

Runs stored before the compared dimension was named ``provider`` call it ``method``; runs
before the seed's formulation was an option have no ``shard`` (they are row-sharded).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pandas as pd

from workbench.running import collectives
from workbench.evidence import derived, engine, stats, tables
from workbench.evidence.derived import Derived
from workbench.data.record import RunRecord
from workbench.traces import load
from workbench.traces.ranks import merge
from workbench.base.untrusted import attachment_file

from . import bound, kernelbench, mechanisms, spans

BASELINE = "nccl"
#: the providers compared with the baseline in the seed-shaped table (the HBM-buffer kernel first)
FUSED = ("hbm-buffer", "hbm-buffer-ce", "ce-chunked", "torch-fused", "auto")
#: the issue's targets on H200, fp16, N=3584, K=8192: (world size, M) -> min speedup over nccl
TARGETS = {(2, 16384): 1.30, (2, 4096): 1.10, (2, 1024): 1.00, (4, 16384): 1.30, (4, 4096): 1.15}
#: issue #24's targets for the HBM-buffer kernel itself at N=3584, K=8192 (any dtype, any world
#: size): M -> min speedup over nccl (M=1024: never slower); judged for both of its fetch paths
#: (SM loads, ``hbm-buffer``; copy engines, ``hbm-buffer-ce``: issue #35)
HBM_TARGETS = {16384: 1.30, 1024: 1.00}
#: issue #35's target for the run's best provider at N=3584, K=8192 on 2 and 4 ranks: its time
#: at most 1/0.92 of the perfect-overlap bound's (fraction of the bound >= 0.92) from this M on
BOUND_TARGET_FROM_M, BOUND_TARGET = 4096, 0.92


def provider_of(params: dict[str, Any]) -> str:
    return str(params.get("provider", params.get("method", "")))


def multi_gpu_variants(rec) -> list:
    """The multi-GPU contestants (not the kernel mode's, not the A/A twins)."""
    return [v for v in rec.variants if v.params.get("mode") != "kernel" and not v.params.get("twin_of")]


#: the study's null controls (workbench.evidence.engine): each shape's baseline again, alone, after its rounds
NULLS = engine.Nulls(twins="again alone / in the rounds",
                     source="each shape's baseline timed again alone after its rounds (aa: variants)")


def evidence(rec) -> engine.Evidence:
    """The run as evidence: its providers are timed round-robin, so a run recorded before
    blocks pairs them by position; its drift from the A/A twins."""
    return engine.Evidence(rec, NULLS, interleaved=True)


def variants_frame(rec) -> pd.DataFrame:
    """The per-variant results table with ``provider`` and ``shard`` for every run, and ms."""
    df = tables.variants_table(rec)
    if df.empty:
        return df
    prov = [provider_of(v.params) for v in rec.variants]
    df = df.assign(provider=prov, shard=[v.params.get("shard", "rows") for v in rec.variants])
    return df.assign(median_ms=df["median_ns"] / 1e6, ci_lo_ms=df["ci_lo_ns"] / 1e6, ci_hi_ms=df["ci_hi_ns"] / 1e6)


def _groups(rec) -> dict[tuple, dict[str, Any]]:
    """Multi-GPU variants by (shard, ranks, dtype, M), then by provider."""
    out: dict[tuple, dict[str, Any]] = {}
    for v in multi_gpu_variants(rec):
        p = v.params
        key = (p.get("shard", "rows"), int(p["world_size"]), p["dtype"], int(p["M"]))
        out.setdefault(key, {})[provider_of(p)] = v
    return out


def _tag(shard, ws, dtype, m, provider) -> dict[str, Any]:
    return {"shard": shard, "ranks": ws, "dtype": dtype, "M": m, "provider": provider}


def speedup(ev: engine.Evidence, base, v, name: str) -> Derived:
    """``median(base_r / v_r)`` over the rounds both were timed in (the worker times every
    provider of a shape round-robin), or the ratio of medians when the counts differ."""
    if base is None or not base.correct or not v.correct or base.variant not in ev or v.variant not in ev:
        why = "the baseline failed its check" if base is not None and not base.correct else (
            "no baseline in this run" if base is None else "this provider failed its check or has no samples")
        return engine.not_meaningful(name, why, "x", 1.0)
    return ev.ratio(v.variant, base.variant, name)


def _ms(v) -> tuple[float, float, float]:
    if v is None or not v.correct or not v.samples_ns:
        return (math.nan,) * 3
    s = stats.summarize(v.samples_ns)
    return s.median / 1e6, s.ci_lo / 1e6, s.ci_hi / 1e6


def _tflops(m: int, n: int, k: int, ms: tuple[float, float, float]) -> tuple[float, float, float]:
    flops = 2.0 * m * n * k
    return tuple(flops / (t * 1e-3) / 1e12 if t == t and t > 0 else math.nan for t in (ms[0], ms[2], ms[1]))


def _best(grp: dict[str, Any]) -> str:
    """The fastest checked provider among the fused ones (by median), "" when none."""
    valid = {p: stats.summarize(v.samples_ns).median for p, v in grp.items()
             if p in FUSED and v.correct and v.samples_ns}
    return min(valid, key=valid.get) if valid else ""


def _met(target, sp: Derived, vs_torch: Derived | None, ws: int, m: int) -> str | None:
    """The issue's target judged by the engine (met when the CI clears it, with nothing keeping
    the CI from deciding); ws=2, M=16384 must also beat PyTorch's fused op, judged by the engine
    on the speed-up over it (``vs_torch``; None: not measured). None: no target."""
    if target is None:
        return None
    judged = engine.target(sp, at_least=target)
    if judged == "met" and (ws, m) == (2, 16384):
        return engine.target(vs_torch, at_least=1.0)
    return judged


def against_target(bound: float | None, d: Derived) -> str | None:
    """A figure (a speedup, a fraction of the bound) against its target (:func:`workbench.evidence.engine.target`);
    None where there is no target."""
    return None if bound is None else engine.target(d, at_least=bound)


def summary(rec, ev: engine.Evidence) -> tuple[pd.DataFrame, list[dict]]:
    """The seed-shaped table (numbers) of the row-sharded shapes, and the speedup rows."""
    rows, items = [], []
    for (shard, ws, dtype, m), grp in sorted(_groups(rec).items()):
        if shard != "rows":
            continue
        any_v = next(iter(grp.values()))
        n, k = int(any_v.params["N"]), int(any_v.params["K"])
        base = grp.get(BASELINE)
        sp, frac = {}, {}
        for prov in list(FUSED) + ["all-gather-cat", BASELINE]:
            if prov not in grp:
                continue
            if prov != BASELINE:
                sp[prov] = speedup(ev, base, grp[prov], f"speedup over nccl: {prov}, {ws} ranks {dtype} M={m}")
                items.append(sp[prov].row(table="speedup", **_tag(shard, ws, dtype, m, prov)))
            frac[prov] = bound.fraction(ev, grp, grp[prov], f"fraction of the {bound.NAME} (max(AG, mm) / time): "
                                                              f"{prov}, {ws} ranks {dtype} M={m}")
            if frac[prov].status != "not meaningful":
                items.append(frac[prov].row(table="bound_fraction", **_tag(shard, ws, dtype, m, prov)))
        bsp = bound.speedup(ev, grp, base, f"speedup of the {bound.NAME} over nccl: {ws} ranks {dtype} M={m}")
        if bsp.status != "not meaningful":
            items.append(bsp.row(table="bound_speedup", **_tag(shard, ws, dtype, m, bound.NAME)))
        best = _best(grp)
        nan_d = engine.not_meaningful("speedup", "not measured", "x", 1.0)
        hbm_ms, best_ms, base_ms = _ms(grp.get("hbm-buffer")), _ms(grp.get(best)), _ms(base)
        picked = str(grp["auto"].params.get("picked", "")) if "auto" in grp else ""
        target = TARGETS.get((ws, m)) if dtype == "fp16" and (n, k) == (3584, 8192) else None
        best_sp = sp.get(best, nan_d)
        # the fastest of the workbench's own providers against PyTorch's fused op (the best may be it)
        ours = _best({p: v for p, v in grp.items() if p != "torch-fused"})
        vs_torch = (speedup(ev, grp["torch-fused"], grp[ours], f"speedup over torch-fused: {ours}, {ws} ranks "
                            f"{dtype} M={m}") if ours and "torch-fused" in grp else None)
        row = {"ranks": ws, "dtype": dtype, "M": m, "N": n, "K": k, "MxNxK": f"{m}x{n}x{k}",
               "baseline_ms": base_ms[0], "baseline_lo_ms": base_ms[1], "baseline_hi_ms": base_ms[2]}
        for label, prov, ms in (("hbm", "hbm-buffer", hbm_ms), ("hbmce", "hbm-buffer-ce", _ms(grp.get("hbm-buffer-ce"))),
                                ("best", best, best_ms)):
            tf = _tflops(m, n, k, ms)
            s, f = sp.get(prov, nan_d), frac.get(prov, nan_d)
            row |= {f"{label}_ms": ms[0], f"{label}_lo_ms": ms[1], f"{label}_hi_ms": ms[2],
                    f"{label}_speedup": s.point, f"{label}_speedup_lo": s.lo, f"{label}_speedup_hi": s.hi,
                    f"{label}_speedup_status": s.status, f"{label}_tflops": tf[0], f"{label}_tflops_lo": tf[1],
                    f"{label}_tflops_hi": tf[2], f"{label}_frac": f.point, f"{label}_frac_lo": f.lo,
                    f"{label}_frac_hi": f.hi}
        for label, prov in (("hbm", "hbm-buffer"), ("hbmce", "hbm-buffer-ce"), ("best", best)):
            v = grp.get(prov)
            picked_prov = picked.split("[")[0] if prov == "auto" and picked else prov
            row[f"{label}_mech"] = mechanisms.short(mechanisms.tags(
                picked_prov, v.extra if v is not None and isinstance(v.extra, dict) else None,
                mechanisms.vendor(rec.env))) if v is not None else ""
        b_ms = bound.time_ms(grp)
        row |= {"bound_ms": b_ms[0], "bound_lo_ms": b_ms[1], "bound_hi_ms": b_ms[2], "bound_speedup": bsp.point,
                "bound_speedup_lo": bsp.lo, "bound_speedup_hi": bsp.hi}
        hbm_bound = HBM_TARGETS.get(m) if (n, k) == (3584, 8192) else None
        frac_bound = BOUND_TARGET if (n, k) == (3584, 8192) and ws in (2, 4) and m >= BOUND_TARGET_FROM_M else None
        row |= {"hbm_target": hbm_bound, "hbm_met": against_target(hbm_bound, sp.get("hbm-buffer", nan_d)),
                "hbmce_met": against_target(hbm_bound, sp["hbm-buffer-ce"]) if "hbm-buffer-ce" in sp else None,
                "best_frac_target": frac_bound, "best_frac_met": against_target(frac_bound, frac.get(best, nan_d)),
                "best": best, "auto_pick": picked, "torch_fused_ms": _ms(grp.get("torch-fused"))[0],
                "ce_chunked_ms": _ms(grp.get("ce-chunked"))[0], "target": target,
                "met": _met(target, best_sp, vs_torch, ws, m)}
        rows.append(row)
    return pd.DataFrame(rows), items


# --- how the speedup changes with M ---------------------------------------------------------

def crossover(ev: engine.Evidence, ms: list[int], ends: list[Derived], name: str) -> Derived:
    """Between which two measured M a provider's speedup over the baseline crosses 1: its CI
    is the pair of measured M around the sign change, [M_j, M_j+1], and nothing narrower: a
    speedup measured at 1024 and 4096 says nothing about where in between it reaches 1 (an
    interpolation would assume a shape no measurement shows; issue 30). Clear when the
    speedups at both ends are clearly on their side of 1 (:meth:`workbench.evidence.engine.Evidence.bracket`)."""
    return ev.bracket(name, ms, ends, "rows", x_label="M=")


def trend(rec, ev: engine.Evidence) -> list[dict]:
    """Per (ranks, dtype, provider) of the row-sharded runs with 2+ M: the speedup at the
    largest M over the one at the smallest (``gain``: a ratio of two speedups, each paired by
    round, so the drift cancels in each) and the crossover M (``crossover``)."""
    by: dict[tuple, dict[int, Derived]] = {}
    for (shard, ws, dtype, m), grp in _groups(rec).items():
        if shard != "rows":
            continue
        base = grp.get(BASELINE)
        for prov in FUSED:
            v = grp.get(prov)
            if v is None or base is None:
                continue
            d = speedup(ev, base, v, f"speedup over nccl: {prov}, {ws} ranks {dtype} M={m}")
            if d.status != "not meaningful" and d.paired:
                by.setdefault((ws, dtype, prov), {})[m] = d
    items = []
    for (ws, dtype, prov), per_m in sorted(by.items()):
        if len(per_m) < 2:
            continue
        ms = sorted(per_m)
        tag = _tag("rows", ws, dtype, None, prov)
        g = ev.combine(f"speedup at M={ms[-1]} over at M={ms[0]}: {prov}, {ws} ranks {dtype}", lambda a, b: b / a,
                       [per_m[ms[0]], per_m[ms[-1]]], "x", null=1.0)
        items.append(g.row(table="gain", m_small=ms[0], m_large=ms[-1], **tag))
        c = crossover(ev, ms, [per_m[m] for m in ms], f"crossover M (speedup 1): {prov}, {ws} ranks {dtype}")
        items.append(c.row(table="crossover", m_small=ms[0], m_large=ms[-1], **tag))
    return items


# --- ranks and checks -------------------------------------------------------------------------

def ranks(rec, ev: engine.Evidence) -> tuple[pd.DataFrame, list[dict]]:
    """Per multi-GPU variant with per-rank data: each rank's median, the slowest rank, its
    median, and the skew (slowest minus fastest rank) as the median over rounds with a CI
    (runs without per-rank samples: the spread of the ranks' medians, no CI)."""
    rows, items = [], []
    for v in multi_gpu_variants(rec):
        ex = v.extra if isinstance(v.extra, dict) else {}
        meds = ex.get("rank_median_ns")
        if not v.correct or not isinstance(meds, list) or len(meds) < 2:
            continue
        p = v.params
        tag = _tag(p.get("shard", "rows"), int(p["world_size"]), p["dtype"], int(p["M"]), provider_of(p))
        slow = int(np.argmax(meds))
        row = {"variant": v.variant, **tag, "rank_medians_us": " / ".join(f"{x / 1e3:,.1f}" for x in meds),
               "slowest_rank": slow, "slowest_rank_us": meds[slow] / 1e3, "max_over_ranks_us":
               stats.summarize(v.samples_ns).median / 1e3}
        samples = ex.get("rank_samples_ns")
        if isinstance(samples, list) and len(samples) == len(meds) and len({len(s) for s in samples}) == 1:
            spread = np.ptp(np.asarray(samples, dtype=float), axis=0) / 1e3
            name = f"skew between ranks (slowest - fastest per round): {v.variant}"
            d = ev.median(ev.series(spread, name, v.variant, rounds=range(spread.size), sources=[v.variant]), name,
                          "us", physical_min=0.0, covers=derived.ROUNDS, per="rounds")
            items.append(d.row(table="skew", **tag))
            row |= {"skew_us": d.point, "skew_lo_us": d.lo, "skew_hi_us": d.hi}
        else:
            row |= {"skew_us": (max(meds) - min(meds)) / 1e3, "skew_lo_us": math.nan, "skew_hi_us": math.nan}
        rows.append(row)
    return pd.DataFrame(rows), items


RANK_COLS = ("slowest_rank", "slowest_rank_us", "skew_us", "skew_lo_us", "skew_hi_us")


def with_hbm_ranks(summ: pd.DataFrame, rk: pd.DataFrame) -> pd.DataFrame:
    """The summary with the HBM-buffer kernel's slowest rank and skew per shape (``hbm_``
    columns; NaN where the run kept no per-rank samples)."""
    cols = ["ranks", "dtype", "M", *RANK_COLS]
    h = (rk[(rk["provider"] == "hbm-buffer") & (rk["shard"] == "rows")][cols] if len(rk) and "provider" in rk
         else pd.DataFrame(columns=cols))
    h = h.rename(columns={c: f"hbm_{c}" for c in RANK_COLS})
    return summ.merge(h, on=["ranks", "dtype", "M"], how="left")


def checks(rec) -> pd.DataFrame:
    """Every multi-GPU variant's check (failed ones included: a failed check is shown, its
    time never counted), and the interpreter check of the fused kernel if the run made one."""
    rows = []
    for v in multi_gpu_variants(rec):
        p = v.params
        rows.append({"shard": p.get("shard", "rows"), "ranks": int(p["world_size"]), "dtype": p["dtype"],
                     "M": int(p["M"]), "N": int(p["N"]), "K": int(p["K"]), "provider": provider_of(p),
                     "where": str((rec.outputs or {}).get("backend", "nccl")), "correct": bool(v.correct),
                     "timed": bool(v.correct and v.samples_ns), "check": v.check})
    for c in (rec.outputs or {}).get("interpreter_check", []) or []:
        if isinstance(c, dict):
            rows.append({"shard": "rows", "ranks": int(c.get("world_size", 0)), "dtype": str(c.get("dtype", "")),
                         "M": int(c.get("M", 0)), "N": int(c.get("N", 0)), "K": int(c.get("K", 0)),
                         "provider": f"hbm-buffer rank {c.get('rank', '?')}",
                         "where": "Triton interpreter, peers emulated in one process", "correct": bool(c.get("ok")),
                         "timed": False, "check": str(c.get("check", ""))})
    return pd.DataFrame(rows)


def multi_gpu_tables(rec) -> dict[str, pd.DataFrame]:
    """The multi-GPU tables (see the module docstring); {} parts are left out."""
    ev = evidence(rec)
    out: dict[str, pd.DataFrame] = ev.level_tables()
    summ, items = summary(rec, ev)
    items += trend(rec, ev)
    rk, skew = ranks(rec, ev)
    items += skew
    if len(summ):
        summ = with_hbm_ranks(summ, rk)
        out["summary"] = summ
        out["seed_table"] = seed_table(summ)
    if len(rk):
        out["ranks"] = rk
    chk = checks(rec)
    if len(chk):
        out["checks"] = chk
    out["_derived_multi"] = derived.derived_table(items)
    out["_evidence"] = ev
    return out


# --- the attached traces ------------------------------------------------------------------------

def program_traces(rec: RunRecord) -> dict[str, pd.DataFrame]:
    """Span tables of the fused kernel's per-program traces, by attachment name."""
    out = {}
    for name, kind, data in rec.attachments:
        if kind == spans.ATTACH_KIND:
            out[name] = spans.to_spans(json.loads(data))
    return out


#: attachment kinds that are traces: the fused kernel's per-program records, torch.profiler JSON
TRACE_KINDS = (spans.ATTACH_KIND, "trace/chrome-json")


def attachment_spans(name: str, kind: str, data: bytes) -> pd.DataFrame:
    """One attached trace as a span table; raises ``workbench.traces.TraceError`` if unreadable."""
    return attachment_trace(name, kind, data)[0]


def attachment_trace(name: str, kind: str, data: bytes) -> tuple[pd.DataFrame, dict]:
    """One attached trace as ``(spans, meta)`` (meta: the importer's, e.g. Kineto's rank and
    base time, for aligning ranks); raises ``workbench.traces.TraceError`` if unreadable."""
    if kind == spans.ATTACH_KIND:
        doc = json.loads(data)
        return spans.to_spans(doc), {"rank": int(doc.get("rank", 0)), "clock": "globaltimer ns"}
    # The importers read files (format detection looks at the name and the first bytes).
    with attachment_file(name, data) as path:
        return load(path)


def rank_groups(rec: RunRecord) -> dict[str, list[tuple[int, str, str]]]:
    """Per-rank trace attachments (``<stem>_rank<r>.<ext>``) grouped by stem: stem ->
    [(rank, attachment name, kind)] in rank order, groups of 2+ ranks only."""
    groups: dict[str, list] = {}
    for name, kind, _ in rec.attachments:
        hit = re.fullmatch(r"(.+)_rank(\d+)(\..+)", name)
        if kind in TRACE_KINDS and hit:
            groups.setdefault(hit.group(1) + hit.group(3), []).append((int(hit.group(2)), name, kind))
    # the fused kernel's first, then the baseline's: what a reader compares first
    first = lambda stem: (not stem.startswith("programs_"), "hbm-buffer" not in stem, "_nccl_" not in stem, stem)  # noqa: E731
    return {stem: sorted(groups[stem]) for stem in sorted(groups, key=first) if len(groups[stem]) > 1}


def merged_ranks(rec: RunRecord, stem: str) -> tuple[pd.DataFrame, dict]:
    """The per-rank traces of one group merged into one span table, clocks aligned
    (``workbench.traces.ranks.merge``: the end of the first collective, else wall clocks)."""
    data = {name: (kind, blob) for name, kind, blob in rec.attachments}
    loaded = [attachment_trace(name, kind, data[name][1]) for _, name, kind in rank_groups(rec)[stem]]
    return merge(loaded, ranks=[r for r, _, _ in rank_groups(rec)[stem]],
                 names=[name for _, name, _ in rank_groups(rec)[stem]])


def _trace_tables(rec: RunRecord) -> dict[str, pd.DataFrame]:
    out: dict[str, pd.DataFrame] = {}
    traces = program_traces(rec)
    if traces:
        out["program_trace_summary"] = pd.DataFrame([{"trace": name, **spans.summary(df)} for name, df in traces.items()])
        out["program_overlap"] = pd.DataFrame([{"trace": name, **spans.overlap(df)} for name, df in traces.items()])
        name = max(traces, key=lambda t: len(traces[t]))
        out["_program_spans"] = traces[name].assign(trace=name)
    groups = rank_groups(rec)
    if groups:
        out["rank_traces"] = pd.DataFrame([{"traces": stem, "ranks": ", ".join(str(r) for r, _, _ in v),
                                            "kind": v[0][2]} for stem, v in groups.items()])
        stem = next(iter(groups))
        merged, meta = merged_ranks(rec, stem)
        out["_rank_spans"] = merged.assign(group=stem, alignment=meta["alignment"])
    return out


# --- analyze: every table of a run --------------------------------------------------------------

def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    """Every table of a run (the multi-GPU ones above, ``kernelbench``'s for the one-GPU kernel
    mode, the attached traces'); all derived numbers in ``derived``."""
    out: dict[str, pd.DataFrame] = {"variants": variants_frame(rec)}
    multi = multi_gpu_tables(rec)
    items = multi.pop("_derived_multi").to_dict("records")
    ev = multi.pop("_evidence")
    out |= multi
    mech = mechanisms.table(rec)
    if len(mech):
        out["mechanisms"] = mech
    kb, kitems = kernelbench.breakdown(rec, ev)
    ex, eitems = kernelbench.experiments(rec, ev)
    if len(kb):
        out["kernel_breakdown"] = kb
    if len(ex):
        out["kernel_experiments"] = ex
    out["derived"] = derived.derived_table(items + kitems + eitems)
    if rec.params.get("mode", "multi-gpu") != "kernel":
        out["collective"] = collective_table(rec)
    out |= _trace_tables(rec)
    return out


def collective_table(rec: RunRecord) -> pd.DataFrame:
    """The NCCL baseline's collective library (:mod:`workbench.running.collectives`): NCCL or RCCL, its
    file, version, algorithm and protocol per all-gather size; "not recorded" for older runs."""
    if rec.params.get("backend", "nccl") != "nccl":
        return pd.DataFrame([{"fact": "collective library", "value": f"{rec.params['backend']} (torch.distributed)"}])
    return pd.DataFrame(collectives.summary(rec.outputs.get("collective")))


# --- display ----------------------------------------------------------------------------------

def _ci(x: float, lo: float, hi: float, d: int = 3, unit: str = "") -> str:
    if x != x:
        return "n/a"
    if lo != lo:
        return f"{x:.{d}f}{unit}"
    return f"{x:.{d}f}{unit} [{lo:.{d}f}, {hi:.{d}f}]"


def _num(x) -> float:
    return math.nan if x is None else float(x)


def _slowest(rank, us) -> str:
    if rank is None or rank != rank:
        return "n/a"
    return f"rank {int(rank)}: {us:,.1f}"


def seed_table(s: pd.DataFrame) -> pd.DataFrame:
    """The seed's table (Ranks, MxNxK, Baseline ms, HBM Buffer ms, Speedup, TFLOPS) with the same
    kernel fed by copy engines and this study's best provider beside it, the perfect-overlap
    bound (its time and speedup) and every provider's fraction of it, and the mechanism of each
    (how A moves; the GEMM; SMs taken by communication); every time, speedup and fraction with
    its 95% CI."""
    rows = []
    for r in s.to_dict("records"):
        best = r["best"] + (f" ({r['auto_pick']})" if r["best"] == "auto" and r["auto_pick"] else "")
        target = "" if r["target"] is None or r["target"] != r["target"] else (
            f">= {r['target']:.2f}x: {r['met'] or 'not measured'}")
        rows.append({
            "Ranks": r["ranks"], "MxNxK": r["MxNxK"], "dtype": r["dtype"],
            "Baseline (ms)": _ci(r["baseline_ms"], r["baseline_lo_ms"], r["baseline_hi_ms"]),
            "HBM Buffer (ms)": _ci(r["hbm_ms"], r["hbm_lo_ms"], r["hbm_hi_ms"]),
            "Speedup": _ci(r["hbm_speedup"], r["hbm_speedup_lo"], r["hbm_speedup_hi"], 2, "x"),
            "TFLOPS": _ci(r["hbm_tflops"], r["hbm_tflops_lo"], r["hbm_tflops_hi"], 0),
            "HBM / bound": _ci(r["hbm_frac"], r["hbm_frac_lo"], r["hbm_frac_hi"], 2),
            "HBM CE speedup": _ci(r["hbmce_speedup"], r["hbmce_speedup_lo"], r["hbmce_speedup_hi"], 2, "x"),
            "HBM CE / bound": _ci(r["hbmce_frac"], r["hbmce_frac_lo"], r["hbmce_frac_hi"], 2),
            "Best": best or "n/a", "Best (ms)": _ci(r["best_ms"], r["best_lo_ms"], r["best_hi_ms"]),
            "Best speedup": _ci(r["best_speedup"], r["best_speedup_lo"], r["best_speedup_hi"], 2, "x"),
            "Best TFLOPS": _ci(r["best_tflops"], r["best_tflops_lo"], r["best_tflops_hi"], 0),
            "Best / bound": _ci(r["best_frac"], r["best_frac_lo"], r["best_frac_hi"], 2),
            "Best mechanism": r.get("best_mech", ""),
            "target (HBM Buffer)": "" if r.get("hbm_target") is None or r["hbm_target"] != r["hbm_target"] else (
                f">= {r['hbm_target']:.2f}x: {r['hbm_met']}"),
            "target (HBM CE)": "" if r.get("hbm_target") is None or r["hbm_target"] != r["hbm_target"] or r.get(
                "hbmce_met") is None else f">= {r['hbm_target']:.2f}x: {r['hbmce_met']}",
            "HBM slowest rank (us)": _slowest(r.get("hbm_slowest_rank"), r.get("hbm_slowest_rank_us")),
            "HBM skew (us)": _ci(_num(r.get("hbm_skew_us")), _num(r.get("hbm_skew_lo_us")), _num(r.get("hbm_skew_hi_us")),
                                 1),
            "bound max(AG, mm) (ms)": _ci(r["bound_ms"], r["bound_lo_ms"], r["bound_hi_ms"]),
            "bound speedup": _ci(r["bound_speedup"], r["bound_speedup_lo"], r["bound_speedup_hi"], 2, "x"),
            "target (best)": target,
            "target (best / bound)": "" if r.get("best_frac_target") is None or r["best_frac_target"] != r[
                "best_frac_target"] else f">= {r['best_frac_target']:.2f}: {r['best_frac_met']}",
        })
    return pd.DataFrame(rows)
