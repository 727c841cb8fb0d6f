"""The launch-cache analysis: every number read off a run, derived ratios with their CIs.

``analyze`` (re-exported by :mod:`studies.launch_cache`) is the only place that computes on a
record. A variant's phases are its replicates for the `time` figures (real, user, sys: one
value per phase, as the seed's five `time` runs per build); the variants' phases run in
interleaved rounds (phase i of every variant in round i), so a ratio of two variants' phase
times is paired by round (the engine's median of per-phase ratios with its order-statistic
interval: with fewer than 6 phases no 95% interval exists, and the ratio is shown but
inconclusive; the committed runs have 3, the seed ran 5). Per-launch latencies (thousands per
variant) give the per-launch figures, compared across the two variants' processes with the
run's drift between blocks (its A/A twin: per_call timed twice in every round).

The compared dimension is ``provider`` (the caching policy); runs stored before it was named so
call it ``policy``; both are read.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

from workbench.evidence import derived, engine, tables
from workbench.evidence.derived import fmt_derived
from workbench.data.record import RunRecord

from .seed import SEED_FIGURES

CLOCKS = ("real", "user", "sys")
#: the mode each target's policies are compared within: glibc's mmap threshold (CPU), a stream
#: synchronisation after every launch (GPU)
MODE = {"cpu": "malloc", "gpu": "sync"}
_TIME_RE = re.compile(r"^(\d+)m([\d.]+)s$")
QUANTILES = np.array([0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999])


def provider_of(params: dict) -> str:
    """The compared dimension of a variant (``policy`` in runs stored before the rename)."""
    return str(params.get("provider", params.get("policy", "")))


def parse_time(text: str) -> float:
    """`time`'s '12m10.456s' -> seconds."""
    m = _TIME_RE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a `time` figure: {text!r}")
    return int(m.group(1)) * 60 + float(m.group(2))


def fmt_time(seconds: float) -> str:
    """Seconds -> `time`'s '0m1.234s' shape."""
    if seconds != seconds:
        return "n/a"
    m, s = divmod(seconds, 60)
    return f"{int(m)}m{s:.3f}s"


def fmt_seconds(s: float) -> str:
    """A phase time with enough digits (0.0040 s, 0.386 s, 29.6 s)."""
    if s != s:
        return "n/a"
    return f"{s:.4f}" if s < 0.1 else f"{s:.3f}" if s < 10 else f"{s:.1f}"


def seed_tables() -> dict[str, pd.DataFrame]:
    """The seed's runs in seconds, and per (launches, build) medians with patch/baseline ratios."""
    runs = pd.DataFrame(SEED_FIGURES["tables"]["time_runs"])
    for col in CLOCKS:
        runs[f"{col}_s"] = runs[col].map(parse_time)
    summary = runs.groupby(["launches", "threads", "build", "policy"], as_index=False, sort=False)[
        ["real_s", "user_s", "sys_s"]].median()
    for col in CLOCKS:
        base = summary[summary["build"] == "baseline"].set_index("launches")[f"{col}_s"]
        summary[f"{col}_vs_baseline"] = summary[f"{col}_s"] / summary["launches"].map(base)
    return {"_seed_runs": runs, "seed_summary": summary}


def phases_table(rec: RunRecord) -> pd.DataFrame:
    """One row per variant and phase: the phase's counters (real/user/sys s, faults, context
    switches, peak scratch, the policy's own counts)."""
    rows = []
    for v in rec.variants:
        for i, r in enumerate(v.extra.get("repeats", [])):
            rows.append({"variant": v.variant, "provider": provider_of(v.params), "phase": i + 1, **r})
    return pd.DataFrame(rows)


def _mode_of(rec: RunRecord) -> str:
    return MODE.get(str(rec.params.get("target", "cpu")), "malloc")


def policies_table(rec: RunRecord, reps: pd.DataFrame) -> pd.DataFrame:
    """One row per variant: the per-launch results (median latency with CI) and, per phase
    counter, its median over phases (``*_lo``/``*_hi``: the range over phases)."""
    df = tables.with_us(tables.variants_table(rec))
    if not len(df):
        return df
    if "provider" not in df.columns:
        df["provider"] = df.pop("policy") if "policy" in df.columns else ""
    elif "policy" in df.columns:
        df["provider"] = df["provider"].fillna(df.pop("policy"))
    df = df.set_index("variant")
    df["phases"] = reps.groupby("variant").size() if len(reps) else 0
    df["phases"] = df["phases"].fillna(0).astype(int)
    if len(reps):
        num = reps.drop(columns=["provider", "phase"]).select_dtypes("number").assign(variant=reps["variant"])
        g = num.groupby("variant", sort=False)
        med, lo, hi = g.median(), g.min(), g.max()
        for col in med.columns:
            df[col] = med[col]
        for col in ("real_s", "user_s", "sys_s"):
            if col in med:
                df[col.replace("_s", "_lo_s")], df[col.replace("_s", "_hi_s")] = lo[col], hi[col]
        if "real_s" in df:
            df["launches_per_s"] = df["launches"] / df["real_s"]
            df["minflt_per_launch"] = df["minflt"] / df["launches"]
            df["peak_mib"] = df["peak_bytes"] / 2**20
    pct = {v.variant: v.extra.get("lat_pct_ns", {}) for v in rec.variants}
    for q in ("p50", "p99", "p999", "max"):
        df[f"{q}_us"] = [pct.get(v, {}).get(q, float("nan")) / 1e3 for v in df.index]
    return df.reset_index()


def phase_series(ev: engine.Evidence, reps: pd.DataFrame, variant: str, col: str) -> engine.Series:
    """A variant's phase figures (``col``: real_s, user_s, sys_s) as the engine reads them: each
    phase a round (phase i of every variant ran in round i) and a process of its own."""
    g = reps.loc[reps["variant"] == variant].sort_values("phase")
    return ev.series(g[col].to_numpy(dtype=float), f"{variant}: {col}", f"phases of {variant}",
                     rounds=g["phase"].astype(int).tolist(), sources=[variant], timeline="the run's phases")


def _ratio_rows(ev: engine.Evidence, pol: pd.DataFrame, reps: pd.DataFrame) -> list[dict]:
    """Each variant over per_call with the same mode (real, user, sys: paired by phase; the
    per-launch latency: medians of the launches), and over locked_cache (real) for the pool
    and size_limit (the review's and the ChangeLog's comparisons)."""
    mode = _mode_of(ev.rec)
    ok = pol[pol["correct"] & (pol["samples"] > 0)]
    rows = []
    for m, g in ok.groupby(mode, sort=False) if mode in ok else []:
        by = {r["provider"]: r["variant"] for r in g.to_dict("records")}
        for base, against, clocks in (("per_call", None, CLOCKS), ("locked_cache", ("pool", "size_limit"), ("real",))):
            if base not in by:
                continue
            b = by[base]
            for r in g.to_dict("records"):
                v = r["variant"]
                if v == b or (against and r["provider"] not in against):
                    continue
                for clock in clocks:
                    d = ev.ratio(phase_series(ev, reps, b, f"{clock}_s"), phase_series(ev, reps, v, f"{clock}_s"),
                                 f"{v} / {b}: {clock}")
                    rows.append(d.row(quantity=f"vs {base}", clock=clock, variant=v, provider=r["provider"],
                                      baseline=b, mode=str(m)))
                if base == "per_call" and b in ev and v in ev:  # pooled launches of different processes
                    d = ev.ratio(b, v, f"{v} / {b}: per-launch latency")
                    rows.append(d.row(quantity="latency vs per_call", clock="per-launch latency", variant=v,
                                      provider=r["provider"], baseline=b, mode=str(m)))
    return rows


def derived_table(ev: engine.Evidence, pol: pd.DataFrame, reps: pd.DataFrame) -> pd.DataFrame:
    """Every ratio of the run with its 95% CI and status (one row each); ``quantity`` says
    which: ``vs per_call`` (real/user/sys, paired by phase), ``latency vs per_call`` (median
    per-launch latency) and ``vs locked_cache`` (real time of the pool and size_limit)."""
    df = derived.derived_table(_ratio_rows(ev, pol, reps) if len(pol) and len(reps) else [])
    for col in ("quantity", "clock", "variant", "provider", "baseline", "mode"):
        if col not in df.columns:
            df[col] = pd.Series(dtype=object)
    return df


def range_text(r: dict, clock: str) -> str:
    """A phase time: the median of the phases, with their range where there are several."""
    med, lo, hi = r.get(f"{clock}_s"), r.get(f"{clock}_lo_s"), r.get(f"{clock}_hi_s")
    if med is None or med != med:
        return "n/a"
    return fmt_seconds(med) + (f" [{fmt_seconds(lo)}, {fmt_seconds(hi)}]" if r.get("phases", 0) > 1 else "")


def ratio_cell(d: pd.Series, phases: int) -> str:
    """A ratio with its CI and status; ``n/a (1 phase)`` where no ratio of phases exists."""
    if d["status"] == "not meaningful" and phases < 2:
        return f"n/a ({phases} phase)"
    return fmt_derived(d)


def key_table(rec: RunRecord, pol: pd.DataFrame, dv: pd.DataFrame) -> pd.DataFrame:
    """The seed's `time` comparison, live: per variant (fastest real time first within each
    mode) real/user/sys (median of phases [range]), each over per_call with its CI, the peak
    scratch held and the page faults per launch."""
    if not len(pol) or "real_s" not in pol:
        return pd.DataFrame()
    mode = _mode_of(rec)
    vs = dv[dv["quantity"] == "vs per_call"].set_index(["variant", "clock"]) if len(dv) else None
    rows = []
    order = pol.assign(_bad=~pol["correct"]).sort_values([mode, "_bad", "real_s"], kind="stable") if mode in pol \
        else pol
    for r in order.to_dict("records"):
        row = {"variant": r["variant"], "phases": int(r["phases"])}
        for clock in CLOCKS:
            row[f"{clock} (s)"] = range_text(r, clock)
        for clock in CLOCKS:
            hit = vs.loc[(r["variant"], clock)] if vs is not None and (r["variant"], clock) in vs.index else None
            row[f"{clock} / per_call"] = (ratio_cell(hit, int(r["phases"])) if hit is not None
                                          else "1 (the baseline)" if r["provider"] == "per_call" else "n/a")
        row["peak scratch (MiB)"] = r.get("peak_mib", float("nan"))
        row["minor faults / launch"] = r.get("minflt_per_launch", float("nan"))
        row["check"] = "ok" if r["correct"] else "FAILED"
        rows.append(row)
    return pd.DataFrame(rows)


def per_launch(base: dict, other: dict) -> list[dict]:
    """real, user and sys time per launch (us) of two variants' ``policies`` rows, which may come
    from runs of different launch counts: each one's median of phases with the range, and
    other / base of the medians (a point figure: phases of two runs do not pair)."""
    rows = []
    for clock in CLOCKS:
        b, o = ([r[f"{clock}{s}_s"] / r["launches"] * 1e6 for s in ("", "_lo", "_hi")] for r in (base, other))
        rows.append({"clock": clock, "base_us": b, "other_us": o, "ratio": o[0] / b[0] if b[0] > 0 else float("nan")})
    return rows


def segments_table(rec: RunRecord) -> pd.DataFrame:
    """Where a launch's host time goes: mean/median/p99 of each part, and its share of the mean."""
    rows = []
    for v in rec.variants:
        segs = v.extra.get("segments_ns", {})
        total = sum(s["mean"] for s in segs.values())
        for name, s in segs.items():
            rows.append({"variant": v.variant, "provider": provider_of(v.params), "segment": name,
                         "mean_us": s["mean"] / 1e3, "p50_us": s["p50"] / 1e3, "p99_us": s["p99"] / 1e3,
                         "share": s["mean"] / total if total > 0 else float("nan")})
    return pd.DataFrame(rows)


def quantiles_table(rec: RunRecord) -> pd.DataFrame:
    rows = []
    for v in rec.variants:
        if not v.samples_ns:
            continue
        vals = np.quantile(np.asarray(v.samples_ns), QUANTILES)
        rows += [{"variant": v.variant, "provider": provider_of(v.params), "quantile": float(q), "lat_us": x / 1e3}
                 for q, x in zip(QUANTILES, vals)]
    return pd.DataFrame(rows)


def run_table(rec: RunRecord) -> pd.DataFrame:
    """The run's shape in one row: target, threads, launches, scratch, kernel length, phases
    asked for, the mode column, the variants that failed."""
    p = rec.params
    failed = [v.variant for v in rec.variants if not v.correct]
    return pd.DataFrame([{
        "target": p.get("target", "cpu"), "mode": _mode_of(rec), "threads": p.get("threads"),
        "launches": p.get("launches"), "scratch_bytes": p.get("scratch_bytes"), "passes": p.get("passes", 1),
        "blocks": (rec.outputs or {}).get("blocks", p.get("blocks")), "k": p.get("k"),
        "data_bytes": p.get("data_bytes", 0), "oom_every": p.get("oom_every", 0), "touch_pages": p.get("touch_pages"),
        "repeat": p.get("repeat"),
        "machine": (rec.outputs or {}).get("gpu") or "this host's CPU", "failed": ", ".join(failed)}])


def null_pairs(ev: engine.Evidence) -> list[tuple[str, engine.Series, engine.Series]]:
    """The A/A null controls: each twin's phase real times against its original's (a phase is
    one process: each variant's phases a block of its own)."""
    reps = phases_table(ev.rec)
    out = []
    for t in ev.rec.variants:
        orig = t.params.get("twin_of")
        if not orig or orig not in ev or t.variant not in ev or not len(reps):
            continue
        a, b = (ev.series(reps.loc[reps["variant"] == v, "real_s"].to_numpy(dtype=float), f"{v}: real",
                          f"phases of {v}", sources=[v]) for v in (orig, t.variant))
        out.append((f"A/A: {orig}, its twin's phases / its own (real time)", a, b))
    return out


#: the study's null controls (workbench.evidence.engine): the A/A twin's phases against its original's
NULLS = engine.Nulls(twins="", pairs=null_pairs,
                     source="per_call timed twice in every round, each phase a process of its own (aa: variants)")


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    """``key`` (the seed's comparison, live), ``policies`` (one row per variant), ``phases``
    (one row per phase), ``derived`` (every ratio with its CI), ``segments``, the seed's
    figures (``seed_summary``, ``_seed_runs``), ``_latency_quantiles`` and ``_run``."""
    ev = engine.Evidence(rec, NULLS)
    rec = dataclasses.replace(rec, variants=[v for v in rec.variants if not v.params.get("twin_of")])
    reps = phases_table(rec)
    pol = policies_table(rec, reps)
    dv = derived_table(ev, pol, reps)
    return {"key": key_table(rec, pol, dv), "policies": pol, "phases": reps, "derived": dv, **ev.level_tables(),
            "segments": segments_table(rec), "_latency_quantiles": quantiles_table(rec), "_run": run_table(rec),
            **seed_tables()}
