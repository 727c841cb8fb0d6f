"""Trace diff: two traces (two runs, two configurations, two profilers of one workload)
compared span name by span name.

Per name: counts, total and median duration on each side, the difference (b minus a) of
both with a bootstrap 95% CI, a Mann-Whitney U test of the durations, its p-value adjusted
over all names tested (Holm by default: :func:`workbench.evidence.stats.adjust_pvalues`), and a
verdict. Names present in only one trace are listed as such. The table is plain data
(:func:`diff`); :func:`headline` says it in one line and :func:`display` formats it.

Bootstrap. Each side's spans of a name are resampled with replacement, the two sides
independently, ``resamples`` times. Up to :data:`EXACT_N` spans a side is resampled directly
(medians and sums of the resampled values). Above it, the resampled median is drawn from its
exact distribution (:func:`workbench.evidence.stats.bootstrap_medians`, the lower median, one order
statistic away from the midpoint at these sizes) and the resampled sum from a normal with the
bootstrap's own mean and variance (n times the mean, n times the population variance),
which the sum of n >= 256 resampled values follows closely. The number of resamples shrinks
(down to 500) when the direct resampling of many small names would exceed
:data:`BUDGET` drawn values; ``attrs["resamples"]`` says how many were used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..evidence import stats
from .model import spans
from .overlap import breakdown, steps, where

#: spans of a name (per side) up to which the bootstrap resamples values directly
EXACT_N = 256
#: values drawn by the direct bootstrap over all names, at most
BUDGET = 40_000_000
MIN_RESAMPLES = 500
#: fewer spans than this on a side: no test, verdict "too few spans"
MIN_COUNT = stats.MIN_SAMPLES_FOR_VERDICT

COLUMNS = ["name", "category", "count_a", "count_b", "total_us_a", "total_us_b", "delta_total_us",
           "delta_total_lo_us", "delta_total_hi_us", "median_us_a", "median_us_b", "delta_median_us",
           "delta_median_lo_us", "delta_median_hi_us", "p_value", "p_adjusted", "verdict", "note"]


class DiffError(ValueError):
    """Two traces that cannot be compared by name; the message says why, in one line."""


def _durations_by_name(df: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Span durations (ns) per name, and each name's most frequent category."""
    s = spans(df)
    names = s["name"].astype(str).to_numpy()
    dur = s["dur_ns"].to_numpy()
    order = np.argsort(names, kind="stable")
    names, dur = names[order], dur[order]
    cats = s["category"].astype(str).to_numpy()[order]
    bounds = np.flatnonzero(names[1:] != names[:-1]) + 1
    out, cat = {}, {}
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(names)]):
        if hi > lo:
            out[names[lo]] = dur[lo:hi]
            vals, counts = np.unique(cats[lo:hi], return_counts=True)
            cat[names[lo]] = str(vals[np.argmax(counts)])
    return out, cat


def _boot(x: np.ndarray, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap medians and sums of ``x`` (see the module docstring)."""
    n = x.size
    if n <= EXACT_N:
        draw = x[rng.integers(0, n, (resamples, n))]
        return np.median(draw, axis=1), draw.sum(axis=1, dtype=np.float64)
    med = stats.bootstrap_medians(x.astype(float), resamples, rng)
    sums = rng.normal(n * x.mean(), np.sqrt(n) * x.std(), resamples)
    return med, sums


def diff(a: pd.DataFrame, b: pd.DataFrame, alpha: float = stats.ALPHA, correction: str = "holm",
         resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Per-name comparison of trace ``b`` against trace ``a`` (differences are b minus a).

    Columns: :data:`COLUMNS` (times in us; CI bounds ``*_lo_us``/``*_hi_us``; NaN where a
    name is on one side only or has too few spans to test). Verdicts: "slower in b",
    "faster in b" (the adjusted p-value is below ``alpha`` *and* the CI of the median
    difference excludes 0), "cannot tell apart", "too few spans" (fewer than
    :data:`MIN_COUNT` on a side), "only in a", "only in b". ``note`` says when the counts
    differ. Rows: largest absolute change of total time first. ``attrs``: ``shared``,
    ``only_a``, ``only_b``, ``tested``, ``alpha``, ``correction``, ``resamples``.
    Raises :class:`DiffError` when the traces share no span name.
    """
    da, cat_a = _durations_by_name(a)
    db, cat_b = _durations_by_name(b)
    shared = [n for n in da if n in db]
    if not shared:
        raise DiffError(f"the traces share no span names (a: {len(da):,} names, b: {len(db):,}), so there is "
                        "nothing to compare by name; traces from different profilers name spans differently")
    direct = sum(min(da[n].size, EXACT_N) + min(db[n].size, EXACT_N) for n in shared)
    r = int(max(MIN_RESAMPLES, min(resamples, BUDGET // max(direct, 1))))
    rng = np.random.default_rng(seed)
    tail = 100 * (1 - confidence) / 2
    rows = []
    for name in shared:
        xa, xb = da[name], db[name]
        med_a, sum_a = _boot(xa, r, rng)
        med_b, sum_b = _boot(xb, r, rng)
        d_med = np.percentile(med_b - med_a, [tail, 100 - tail]) / 1e3
        d_tot = np.percentile(sum_b - sum_a, [tail, 100 - tail]) / 1e3
        tested = min(xa.size, xb.size) >= MIN_COUNT
        p = float(_mannwhitney(xa, xb)) if tested else np.nan
        if not tested:  # a CI from one or two spans would only restate them
            d_med = d_tot = (np.nan, np.nan)
        rows.append({"name": name, "category": cat_a[name], "count_a": xa.size, "count_b": xb.size,
                     "total_us_a": xa.sum() / 1e3, "total_us_b": xb.sum() / 1e3,
                     "delta_total_us": (xb.sum() - xa.sum()) / 1e3, "delta_total_lo_us": d_tot[0],
                     "delta_total_hi_us": d_tot[1], "median_us_a": np.median(xa) / 1e3,
                     "median_us_b": np.median(xb) / 1e3, "delta_median_us": (np.median(xb) - np.median(xa)) / 1e3,
                     "delta_median_lo_us": d_med[0], "delta_median_hi_us": d_med[1], "p_value": p})
    for side, only, cats in (("a", [n for n in da if n not in db], cat_a), ("b", [n for n in db if n not in da], cat_b)):
        src = da if side == "a" else db
        for name in only:
            x = src[name]
            rows.append({"name": name, "category": cats[name], f"count_{side}": x.size,
                         f"total_us_{side}": x.sum() / 1e3, f"median_us_{side}": np.median(x) / 1e3,
                         "delta_total_us": (x.sum() if side == "b" else -x.sum()) / 1e3, "verdict": f"only in {side}"})
    out = pd.DataFrame(rows).reindex(columns=COLUMNS)
    for c in ("count_a", "count_b"):
        out[c] = out[c].fillna(0).astype(np.int64)
    out["p_adjusted"] = stats.adjust_pvalues(out["p_value"].to_numpy(dtype=float), correction)
    sig = out["p_adjusted"] < alpha
    slower = sig & (out["delta_median_lo_us"] > 0)
    faster = sig & (out["delta_median_hi_us"] < 0)
    tested = out["p_value"].notna()
    out["verdict"] = np.select([out["verdict"].notna(), slower, faster, tested],
                               [out["verdict"].astype(object), "slower in b", "faster in b", "cannot tell apart"],
                               "too few spans")
    both = (out["count_a"] > 0) & (out["count_b"] > 0) & (out["count_a"] != out["count_b"])
    out["note"] = np.where(both, "count " + out["count_a"].astype(str) + " -> " + out["count_b"].astype(str), "")
    out = out.iloc[np.argsort(-out["delta_total_us"].abs().to_numpy(), kind="stable")].reset_index(drop=True)
    out.attrs.update(shared=len(shared), only_a=int((out["verdict"] == "only in a").sum()),
                     only_b=int((out["verdict"] == "only in b").sum()), tested=int(tested.sum()),
                     alpha=alpha, correction=correction, resamples=r)
    return out


def _mannwhitney(xa: np.ndarray, xb: np.ndarray) -> float:
    from scipy.stats import mannwhitneyu  # start-up: scipy.stats takes ~0.5 s

    if np.all(xa == xa[0]) and np.all(xb == xb[0]) and xa[0] == xb[0]:
        return 1.0  # identical constants: scipy would warn and return NaN
    return mannwhitneyu(xa, xb, alternative="two-sided").pvalue


def headline(table: pd.DataFrame, labels: tuple[str, str] = ("a", "b")) -> str:
    """One line: how many names were compared and what the verdicts say."""
    at = table.attrs
    vc = table["verdict"].value_counts()
    la, lb = labels
    corr = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(at.get("correction"), at.get("correction"))
    return (f"{lb} against {la}: {at['shared']:,} span names in both ({vc.get('slower in b', 0)} slower, "
            f"{vc.get('faster in b', 0)} faster, {vc.get('cannot tell apart', 0)} cannot tell apart, "
            f"{vc.get('too few spans', 0)} with too few spans to test), {at['only_a']:,} only in {la}, "
            f"{at['only_b']:,} only in {lb}; p-values {corr}-adjusted over {at['tested']:,} tests at "
            f"{at['alpha']:.0%}, 95% bootstrap CIs ({at['resamples']:,} resamples)")


def display(table: pd.DataFrame, labels: tuple[str, str] = ("a", "b"), name_width: int = 60) -> pd.DataFrame:
    """The table as text columns for a person: CIs as ``[lo, hi]``, "-" where there is no
    value (never None/NaN), verdicts naming the traces."""
    la, lb = labels

    def num(v: float, fmt: str = "{:,.2f}") -> str:
        return "-" if pd.isna(v) else fmt.format(v)

    def ci(lo: float, hi: float) -> str:
        return "-" if pd.isna(lo) else f"[{lo:,.2f}, {hi:,.2f}]"

    t = table
    names = t["name"].astype(str)
    return pd.DataFrame({
        "name": names.where(names.str.len() <= name_width, names.str.slice(0, name_width - 1) + "…"),
        f"n {la}": t["count_a"], f"n {lb}": t["count_b"],
        f"total {la} (us)": [num(v) for v in t["total_us_a"]], f"total {lb} (us)": [num(v) for v in t["total_us_b"]],
        "Δ total (us)": [num(v, "{:+,.2f}") for v in t["delta_total_us"]],
        "Δ total 95% CI": [ci(lo, hi) for lo, hi in zip(t["delta_total_lo_us"], t["delta_total_hi_us"])],
        f"median {la} (us)": [num(v) for v in t["median_us_a"]], f"median {lb} (us)": [num(v) for v in t["median_us_b"]],
        "Δ median (us)": [num(v, "{:+,.3f}") for v in t["delta_median_us"]],
        "Δ median 95% CI": [ci(lo, hi) for lo, hi in zip(t["delta_median_lo_us"], t["delta_median_hi_us"])],
        "p (adjusted)": [num(v, "{:.2g}") for v in t["p_adjusted"]],
        "verdict": t["verdict"].replace({"slower in b": f"slower in {lb}", "faster in b": f"faster in {lb}",
                                         "only in a": f"only in {la}", "only in b": f"only in {lb}"}),
        "note": t["note"],
    })


#: breakdown figures :func:`gpu_time_diff` compares (see :mod:`.overlap`)
GPU_FIGURES = ("overlap_pct", "comp_overlapped_pct", "idle_pct", "total_us", "busy_us", "computation_us",
               "communication_us", "comm_exposed_us", "memory_us")
GPU_COLUMNS = ["rank", "device", "figure", "basis", "steps_a", "steps_b", "a", "b", "delta", "delta_lo", "delta_hi",
               "verdict"]


def _groups(t: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """Rows of a breakdown (or per-step) table by (rank, device), missing as -1."""
    key = t[["rank", "device"]].astype("Int64").fillna(-1).astype(np.int64)
    return {k: g for k, g in t.groupby([key["rank"], key["device"]], sort=True)}


def gpu_time_diff(a: pd.DataFrame, b: pd.DataFrame, comm: str | None = None, resamples: int = 2000,
                  confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """The GPU-time breakdown of trace ``b`` against trace ``a``, per rank and device and
    figure (:data:`GPU_FIGURES`; differences b minus a).

    With steps on both sides (:func:`workbench.traces.overlap.steps`) the figures are the
    medians over steps and the difference carries a percentile-bootstrap CI (each side's
    steps resampled independently: step-to-step variation within each run, not run-to-run);
    verdicts "higher in b" / "lower in b" need at least ``stats.MIN_SAMPLES_FOR_VERDICT``
    steps a side and a CI that excludes 0, else "cannot tell apart" or "too few steps".
    Without steps the whole traces' figures are compared, one value a side, no CI, no
    verdict. Groups are matched by rank and device; two traces of one GPU each are compared
    even when their ranks or devices differ (``attrs["paired"]`` says so). Columns:
    :data:`GPU_COLUMNS`. Raises :class:`DiffError` when a side has no GPU work.
    """
    whole = {side: _groups(breakdown(t, comm)) for side, t in (("a", a), ("b", b))}
    for side in ("a", "b"):
        if not whole[side]:
            raise DiffError(f"trace {side} has no GPU kernels, copies or memsets: no GPU-time breakdown to compare")
    per_step = {side: _groups(steps(t, comm)) for side, t in (("a", a), ("b", b))}
    pairs = [(k, k) for k in whole["a"] if k in whole["b"]]
    paired = not pairs and len(whole["a"]) == 1 and len(whole["b"]) == 1
    if paired:
        pairs = [(next(iter(whole["a"])), next(iter(whole["b"])))]
    if not pairs:
        raise DiffError(f"no rank and device in both traces (a: {sorted(whole['a'])}, b: {sorted(whole['b'])})")
    rng = np.random.default_rng(seed)
    tail = 100 * (1 - confidence) / 2
    rows = []
    for ka, kb in pairs:
        sa, sb = per_step["a"].get(ka), per_step["b"].get(kb)
        for f in GPU_FIGURES:
            xa = sa[f].dropna().to_numpy(dtype=float) if sa is not None else np.zeros(0)
            xb = sb[f].dropna().to_numpy(dtype=float) if sb is not None else np.zeros(0)
            row = {"rank": ka[0], "device": ka[1], "figure": f, "steps_a": len(xa), "steps_b": len(xb)}
            if len(xa) and len(xb):
                va, vb = float(np.median(xa)), float(np.median(xb))
                d = stats.resampled_medians(xb, resamples, rng) - stats.resampled_medians(xa, resamples, rng)
                lo, hi = np.percentile(d, [tail, 100 - tail])
                enough = min(len(xa), len(xb)) >= stats.MIN_SAMPLES_FOR_VERDICT
                verdict = ("too few steps for a verdict" if not enough else "higher in b" if lo > 0
                           else "lower in b" if hi < 0 else "cannot tell apart")
                row.update(basis="median over steps", a=va, b=vb, delta=vb - va, delta_lo=lo, delta_hi=hi,
                           verdict=verdict)
            else:
                va, vb = float(whole["a"][ka][f].iloc[0]), float(whole["b"][kb][f].iloc[0])
                row.update(basis="whole trace (no steps on both sides)", a=va, b=vb, delta=vb - va, delta_lo=np.nan,
                           delta_hi=np.nan, verdict="one value a side: no CI, no verdict")
            rows.append(row)
    out = pd.DataFrame(rows, columns=GPU_COLUMNS)
    for c in ("rank", "device"):
        out[c] = out[c].astype("Int64").mask(out[c] < 0)
    out.attrs.update(paired=paired, resamples=resamples, confidence=confidence)
    return out


def gpu_time_display(table: pd.DataFrame, labels: tuple[str, str] = ("a", "b")) -> pd.DataFrame:
    """:func:`gpu_time_diff` for a person: where, the figure, both sides, Δ with its CI."""
    la, lb = labels
    return pd.DataFrame({
        "where": [where(r, d) for r, d in zip(table["rank"], table["device"])], "figure": table["figure"],
        "basis": table["basis"], f"steps {la}": table["steps_a"], f"steps {lb}": table["steps_b"],
        la: table["a"], lb: table["b"], "Δ": table["delta"],
        "Δ 95% CI": ["-" if pd.isna(lo) else f"[{lo:,.2f}, {hi:,.2f}]" for lo, hi in zip(table["delta_lo"],
                                                                                         table["delta_hi"])],
        "verdict": table["verdict"].str.replace(" in b", f" in {lb}")})
