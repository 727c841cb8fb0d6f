"""The opencl-events analysis: every number read off a run, derived overheads with their CIs.

``analyze`` (re-exported by :mod:`studies.opencl_events`) is the only place that computes on a
record. Conditions of one point were timed in interleaved rounds (``sweep_point``), so a
condition's sample i and its baseline's sample i come from the same round: every difference
and ratio over the baseline is paired by round (:class:`workbench.evidence.engine.Evidence`). A range
of sizes (a bucket) pools the rounds of its sizes: the median over those pairs, with its
order-statistic interval.

An extra time below zero is not flagged as impossible: the baseline differs from a condition
in more than the added call (without ``unmap`` the maps stay open and pile up, and a waiting
thread can keep a CPU awake), so a condition can be faster; such a result is stated as it is.

Runs stored before the compared dimension was named ``provider`` call it ``condition``; both
are read.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from workbench.evidence import derived, engine, tables
from workbench.evidence.derived import Derived, fmt_derived
from workbench.data.record import RunRecord

#: each experiment's baseline: no callback, no wait, no unmap
BASELINES = {"callbacks": "(0,0,0)", "wait": "(0,0,0)", "dependency": "plain", "cuda": "none"}
#: the provider that stands for the seed's CL_COMPLETE callback, per experiment (CUDA: its twin)
CALLBACK = {"callbacks": "(0,0,1)", "wait": "(0,0,1)", "dependency": "cb", "cuda": "host-func"}
#: the provider that waits for each event on another thread
WAIT = {"wait": "wait", "dependency": "wait", "cuda": "event-sync"}
UNMAP = {"dependency": "unmap"}
#: the providers shown in the key table and given a relative overhead, per experiment
HEADS = {"callbacks": ("(0,0,1)", "(1,0,0)", "(0,1,0)", "(1,1,1)"), "wait": ("(0,0,1)", "wait"),
         "dependency": ("cb", "wait", "unmap"), "cuda": ("host-func", "event-sync", "event-poll")}
#: size ranges (per run's buffer; per worker in the dependency experiment) the claims read
#: the fewest runs per measurement ``target_ms`` picks (a fixed end-of-batch latency, the last
#: callback's or wait's, is divided by the runs)
MIN_REPS = 8
BUCKETS = ((0, 128 << 10, "4-64 KiB"), (128 << 10, 2 << 20, "128 KiB-1 MiB"), (2 << 20, 1 << 62, "2 MiB and up"))
SMALL, LARGE = BUCKETS[0][2], BUCKETS[-1][2]
_UNSIGNED = re.compile(r"(?<![\d.,-])(\d)")  # a number's first digit with no sign before it
DERIVED_EXTRA = ["quantity", "experiment", "workers", "provider", "baseline", "size_bytes", "total_bytes", "bucket",
                 "reps"]
POINT_COLUMNS = ["variant", "platform", "device", "experiment", "callback_impl", "workers", "provider", "size_bytes",
                 "total_bytes", "reps", "samples", "mean_us", "median_us", "ci_lo_us", "ci_hi_us", "iqr_us", "noisy",
                 "correct", "check"]


def size_label(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else (
        f"{n >> 10} KiB" if n % 1024 == 0 else f"{n} B")


def bucket_of(size: int) -> str:
    return next(name for lo, hi, name in BUCKETS if lo <= size < hi)


def provider_of(params: dict) -> str:
    """The compared dimension of a variant (``condition`` in runs stored before the rename)."""
    return str(params.get("provider", params.get("condition", "")))


def group_name(workers: int) -> str:
    return f"{workers} workers: " if workers else ""


# --- tables -----------------------------------------------------------------------------------

def _valid(rec: RunRecord) -> pd.DataFrame:
    """One row per valid variant: experiment, workers (0 without), provider, sizes, runs per
    measurement and the samples (ns per run) as an array."""
    rows = [{"variant": v.variant, "experiment": v.params.get("experiment", rec.params.get("experiment")),
             "workers": int(v.params.get("workers") or 0), "provider": provider_of(v.params),
             "size_bytes": int(v.params["size_bytes"]), "reps": int(v.extra.get("reps", rec.params.get("reps", 0))),
             "samples": np.asarray(v.samples_ns, dtype=float)}
            for v in rec.valid_variants() if not v.params.get("twin_of")]
    df = pd.DataFrame(rows, columns=["variant", "experiment", "workers", "provider", "size_bytes", "reps", "samples"])
    df["total_bytes"] = df["size_bytes"] * df["workers"].clip(lower=1)
    return df


def points_table(rec: RunRecord) -> pd.DataFrame:
    """One row per provider and size: the per-variant results with sizes and runs per measurement."""
    pts = tables.variants_table(rec)
    if "twin_of" in pts.columns:  # the A/A twin is a null control (``nulls``), not a point
        pts = pts[pts["twin_of"].isna()].drop(columns="twin_of")
    if not len(pts):
        return pts
    if "provider" not in pts.columns:
        pts["provider"] = pts.pop("condition") if "condition" in pts.columns else ""
    else:
        pts["provider"] = pts["provider"].fillna(pts.pop("condition")) if "condition" in pts.columns else pts["provider"]
    by_name = {v.variant: v for v in rec.variants}
    pts["mean_ns"] = [float(np.mean(by_name[n].samples_ns)) if by_name[n].samples_ns else np.nan for n in pts["variant"]]
    pts["reps"] = [by_name[n].extra.get("reps", rec.params.get("reps")) for n in pts["variant"]]
    if "workers" in pts.columns:  # the seed discusses the dependency runs by total buffer size
        pts["total_bytes"] = pts["size_bytes"] * pts["workers"]
    pts = tables.with_us(pts)
    return pts[[c for c in POINT_COLUMNS if c in pts.columns]]


def samples_table(rec: RunRecord) -> pd.DataFrame:
    """Every measurement (chart data: the seed plots each one as a dot)."""
    smp = tables.samples_table(rec)
    if "twin_of" in smp.columns:
        smp = smp[smp["twin_of"].isna()]
    if not len(smp):
        return smp
    if "provider" not in smp.columns:
        smp["provider"] = smp["condition"] if "condition" in smp.columns else ""
    smp = smp.assign(time_us=smp["ns"] / 1e3)
    if "workers" in smp.columns:
        smp["total_bytes"] = smp["size_bytes"] * smp["workers"]
    return smp[[c for c in ("workers", "provider", "size_bytes", "total_bytes", "time_us", "correct") if c in smp]]


# --- derived quantities ---------------------------------------------------------------------------

def _sides(ev: engine.Evidence, parts: list[tuple]) -> tuple[engine.Series, engine.Series]:
    """Two providers' samples as the engine pairs them: ``parts`` is one (variant a, samples a,
    variant b, samples b) per size; pairs stay pairs (round i with round i) when every size
    has as many rounds on both sides, and the sizes' rounds are pooled in order."""
    xa = np.concatenate([p[1] for p in parts]) if parts else np.array([])
    xb = np.concatenate([p[3] for p in parts]) if parts else np.array([])
    paired = all(p[1].size == p[3].size for p in parts)
    rounds = list(range(xa.size)) if paired else None
    names_a, names_b = [p[0] for p in parts], [p[2] for p in parts]
    pair = "rounds of " + "|".join(names_a + names_b)  # the two sides' common rounds, pooled in size order
    return (ev.series(xa, "+".join(names_a), "|".join(names_a), rounds=rounds, sources=names_a, timeline=pair),
            ev.series(xb, "+".join(names_b), "|".join(names_b), rounds=rounds, sources=names_b, timeline=pair))


def _row(d: Derived, quantity: str, exp: str, workers: int, provider: str, baseline: str, size: int | None,
         reps: int | None) -> dict:
    return d.row(quantity=quantity, experiment=exp, workers=workers, provider=provider, baseline=baseline,
                 size_bytes=size, total_bytes=(size * max(workers, 1)) if size else None,
                 bucket=bucket_of(size) if size else None, reps=reps)


def _point_rows(ev: engine.Evidence, exp: str, workers: int, g: pd.DataFrame) -> list[dict]:
    """Per size: each provider minus the baseline (us per run); the head providers' ratio over
    the baseline; the callback minus the waiting thread."""
    base_name, heads = BASELINES[exp], HEADS.get(exp, ())
    cb, wait = CALLBACK.get(exp), WAIT.get(exp)
    rows = []
    for size, gs in g.groupby("size_bytes", sort=True):
        by = {r.provider: r for r in gs.itertuples()}
        where = f"{group_name(workers)}{{}} at {size_label(size)}" + (
            f" per worker ({size_label(size * workers)} total)" if workers else "")
        if base_name in by:
            base = by[base_name]
            for prov, r in by.items():
                if prov == base_name:
                    continue
                a, b = _sides(ev, [(base.variant, base.samples, r.variant, r.samples)])
                d = ev.difference(a, b, where.format(f"{prov} - {base_name}"), "us")
                rows.append(_row(d, "excess", exp, workers, prov, base_name, size, r.reps))
                if prov in heads:
                    d = ev.ratio(a, b, where.format(f"{prov} / {base_name}"))
                    rows.append(_row(d, "relative", exp, workers, prov, base_name, size, r.reps))
        if cb in by and wait in by:
            a, b = _sides(ev, [(by[wait].variant, by[wait].samples, by[cb].variant, by[cb].samples)])
            d = ev.difference(a, b, where.format(f"{cb} - {wait}"), "us")
            rows.append(_row(d, "callback - wait", exp, workers, cb, wait, size, by[cb].reps))
    return rows


def _pooled(g: pd.DataFrame, a: str, b: str) -> list[tuple]:
    """Per size that has both providers ``a`` and ``b``: (variant a, samples a, variant b,
    samples b), in size order."""
    out = []
    for _size, gs in g.groupby("size_bytes", sort=True):
        by = {r.provider: r for r in gs.itertuples()}
        if a in by and b in by:
            out.append((by[a].variant, by[a].samples, by[b].variant, by[b].samples))
    return out


def _bucket_rows(ev: engine.Evidence, exp: str, workers: int, g: pd.DataFrame) -> list[dict]:
    """Per size range: the head providers' excess and ratio over the baseline, and the callback
    minus the waiting thread, each over the pooled rounds of the range's sizes."""
    base_name, rows = BASELINES[exp], []
    pairs = [(base_name, p, "bucket excess") for p in HEADS.get(exp, ())]
    if exp in WAIT:
        pairs.append((WAIT[exp], CALLBACK[exp], "bucket callback - wait"))
    for _lo, _hi, bucket in BUCKETS:
        gb = g[g["size_bytes"].map(bucket_of) == bucket]
        for a, b, quantity in pairs:
            parts = _pooled(gb, a, b)
            if not parts:
                continue
            sa, sb = _sides(ev, parts)
            sizes = len(parts)
            d = ev.difference(sa, sb, f"{group_name(workers)}{b} - {a} at {bucket} ({sizes} sizes)", "us")
            rows.append({**_row(d, quantity, exp, workers, b, a, None, None), "bucket": bucket, "sizes": sizes})
            if a == base_name:
                d = ev.ratio(sa, sb, f"{group_name(workers)}{b} / {a} at {bucket} ({sizes} sizes)")
                rows.append({**_row(d, "bucket relative", exp, workers, b, a, None, None), "bucket": bucket,
                             "sizes": sizes})
    return rows


def derived_table(ev: engine.Evidence) -> pd.DataFrame:
    """Every derived overhead of the run with its 95% CI and status (one row each); the
    ``quantity`` column says which: ``excess`` and ``relative`` per size, ``callback - wait``
    per size, and their ``bucket`` forms per size range."""
    valid = _valid(ev.rec)
    rows = []
    for (exp, workers), g in valid.groupby(["experiment", "workers"], sort=True):
        rows += _point_rows(ev, exp, int(workers), g) + _bucket_rows(ev, exp, int(workers), g)
    df = derived.derived_table(rows)
    for col in DERIVED_EXTRA + ["sizes"]:
        if col not in df.columns:
            df[col] = pd.Series(dtype=object)
    return df


# --- the seed-shaped tables ---------------------------------------------------------------------

def _unclear(d: Derived) -> str:
    """What an unclear figure's cell says after it: ``(CI includes 0)``, or what kept its CI
    from deciding (``(not clear: measured under load)``)."""
    if d.status == "clear":
        return ""
    if d.lo <= d.null <= d.hi:
        return f" (CI includes {d.null:g})"
    return " (not clear: " + ("measured under load" if "under load" in d.caveat else d.caveat.split("; ")[0]) + ")"


def excess_text(d, unit: bool = False) -> str:
    """``+9.3 [+8.1, +10.5]`` (a difference, signed; ``unit``: ``+9.3 us [+8.1, +10.5]``) or
    ``1.097x [1.093, 1.099]`` (a ratio); ``(CI includes 0)`` after an inconclusive one (or what
    kept it from deciding); ``n/a (why)`` for a not meaningful one."""
    d = derived.item(d)
    if d.status == "not meaningful" or not np.isfinite(d.point):
        return fmt_derived(d)
    if d.unit == "x":
        return fmt_derived(d, status=False) + _unclear(d)
    text = fmt_derived(d, status=False)
    signed = _UNSIGNED.sub(r"+\1", text if unit else text.replace(f" {d.unit}", ""))
    return signed + _unclear(d)


def key_table(dv: pd.DataFrame) -> pd.DataFrame:
    """The seed's findings are per size range ("3x for small sizes ... significant until about 2
    to 4 MiB"): per worker count and range, each head provider's extra time per run over the
    baseline (us, median of the range's paired rounds, 95% CI)."""
    ex = dv[dv["quantity"] == "bucket excess"] if len(dv) else dv
    if not len(ex):
        return pd.DataFrame()
    order = {b: i for i, (_lo, _hi, b) in enumerate(BUCKETS)}
    rows = []
    for (exp, workers, bucket), g in sorted(ex.groupby(["experiment", "workers", "bucket"]),
                                            key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]])):
        row = {"workers": int(workers)} if workers else {}
        row |= {"size range" + (" (per worker)" if workers else ""): bucket, "sizes": int(g["sizes"].iloc[0])}
        by = {r["provider"]: r for r in g.to_dict("records")}
        for prov in HEADS.get(exp, ()):
            if prov in by:
                row[f"{prov} - {BASELINES[exp]} (us)"] = excess_text(by[prov])
        rows.append(row)
    return pd.DataFrame(rows)


def per_size_table(pts: pd.DataFrame, dv: pd.DataFrame) -> pd.DataFrame:
    """The seed's comparison per point: the baseline's time per run and each head provider's
    extra time per run over it (us, median of paired rounds, 95% CI), as the README shows it."""
    if not len(pts) or not len(dv):
        return pd.DataFrame()
    ex = dv[dv["quantity"] == "excess"]
    ok = pts[pts["correct"]]
    ok = ok.assign(workers=ok["workers"].fillna(0).astype(int) if "workers" in ok else 0)
    rows = []
    for (exp, workers, size), g in ok.groupby(["experiment", "workers", "size_bytes"], sort=True):
        base = g[g["provider"] == BASELINES[exp]]
        row = {"experiment": exp}
        if workers:
            row |= {"workers": workers, "per worker": size_label(size), "total": size_label(size * workers)}
        else:
            row["buffer"] = size_label(size)
        row["runs per measurement"] = int(g["reps"].iloc[0]) if g["reps"].notna().any() else None
        if len(base):
            b = base.iloc[0]
            row[f"{BASELINES[exp]} (us per run)"] = f"{b['median_us']:.1f} [{b['ci_lo_us']:.1f}, {b['ci_hi_us']:.1f}]"
        here = ex[(ex["experiment"] == exp) & (ex["workers"] == workers) & (ex["size_bytes"] == size)]
        for prov in HEADS.get(exp, ()):
            hit = here[here["provider"] == prov]
            if len(hit):
                row[f"{prov} - {BASELINES[exp]} (us)"] = excess_text(hit.iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)


def overhead_table(dv: pd.DataFrame) -> pd.DataFrame:
    """Per size range: each head provider's extra time per run and its ratio over the baseline."""
    if not len(dv):
        return pd.DataFrame()
    ex = dv[dv["quantity"] == "bucket excess"].set_index(["experiment", "workers", "provider", "bucket"])
    rel = dv[dv["quantity"] == "bucket relative"].set_index(["experiment", "workers", "provider", "bucket"])
    rows = []
    for key, r in ex.iterrows():
        exp, workers, prov, bucket = key
        rrow = rel.loc[key] if key in rel.index else None
        rows.append({"experiment": exp, **({"workers": workers} if workers else {}), "provider": prov,
                     "baseline": r["baseline"], "sizes": r["sizes"], "bucket": bucket,
                     "extra per run (us)": excess_text(r), "ratio": excess_text(rrow) if rrow is not None else "",
                     "status": r["status"]})
    return pd.DataFrame(rows)


def run_table(rec: RunRecord) -> pd.DataFrame:
    """The run's setting in one row (what the verdict and the report say about how it was
    measured): platform, device, driver, callback implementation, runs and measurements per
    point, failed points."""
    out, p = rec.outputs or {}, rec.params
    # a run stopped at its time cap has no outputs: its variants still say where they ran
    first = rec.variants[0].params if rec.variants else {}
    support = out.get("callback_support") or {}
    return pd.DataFrame([{
        "experiment": p.get("experiment", ""), "platform": str(out.get("platform", first.get("platform", "?"))),
        "device": str(out.get("device", first.get("device", "?"))),
        "driver": str(out.get("driver_version", out.get("cuda_driver", "not recorded"))),
        "callback_impl": str(out.get("callback_impl", p.get("callback_impl", ""))),
        "host": str(out.get("host", p.get("host", ""))), "reps": p.get("reps"), "measurements": p.get("measurements"),
        "target_ms": float(p.get("target_ms") or 0.0), "min_reps": MIN_REPS,
        "callback_support": "; ".join(f"{k}: {v}" for k, v in support.items()),
        "unmaps_refused": out.get("unmaps_refused"),
        "failed": sum(not v.correct for v in rec.variants), "variants": len(rec.variants)}])


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    """``key`` (the seed's comparison per size range), ``per_size`` (the same per point),
    ``overhead`` (per size range, with the ratios), ``points``
    (one row per provider and size), ``derived`` (every difference and ratio with its CI),
    ``_samples`` (every measurement: chart data) and ``_run`` (how the run measured)."""
    pts = points_table(rec)
    ev = engine.Evidence(rec, NULLS)
    dv = derived_table(ev)
    return {"key": key_table(dv), "per_size": per_size_table(pts, dv), "overhead": overhead_table(dv), "points": pts,
            "derived": dv, **ev.level_tables(),
            "_samples": samples_table(rec), "_run": run_table(rec)}


#: the study's null controls (workbench.evidence.engine): the first and the last point's baselines again
NULLS = engine.Nulls(twins="again after every other point / first",
                     source="the first and the last point's baselines timed again, alone, after every other point (aa: "
                            "variants); every comparison of this study pairs by round, so their drift is shown, not "
                            "added")
