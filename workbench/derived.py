"""Derived quantities (differences, ratios, shares) with their own CI, and what they may claim.

A study's ``analyze`` builds every number it derives from two or more measurements here, from
the raw samples those measurements are made of, and returns them as a ``derived`` table
(:func:`derived_table`). Verdicts, claims and reports only format these rows.

CIs are percentile bootstraps of the statistic itself (2000 resamples, fixed seed, so the same
record always gives the same table): unpaired statistics resample both sides independently;
paired ones (``paired=True``: the same round of an interleaved sweep, the same profiled
iteration) resample the pairs. Above :data:`workbench.stats.BOOTSTRAP_MAX_N` samples a side,
medians are drawn from the exact bootstrap distribution of the median
(:func:`workbench.stats.resampled_medians`), which costs O(n) instead of O(resamples x n).

Every quantity gets one status (docs/reading-a-run.md explains them to users):

- ``clear``: its 95% CI excludes ``null`` (0 for a difference or share, 1 for a ratio);
- ``inconclusive``: the CI includes ``null``, or there are fewer than
  :data:`MIN_SAMPLES` samples a side: shown as such, never stated as a finding;
- ``not meaningful``: physically impossible (the whole CI below ``physical_min``: a negative
  cost; a share outside 0-100%), made of quantities from different instruments or runs
  (the study says so with :func:`not_meaningful`), or missing samples; ``why`` says which.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from . import stats

RESAMPLES = 2000
CONFIDENCE = 0.95
#: fewer samples than this a side: the quantity is shown, but inconclusive whatever its CI
MIN_SAMPLES = stats.MIN_SAMPLES_FOR_VERDICT
STATUSES = ("clear", "inconclusive", "not meaningful")
COLUMNS = ["name", "point", "lo", "hi", "unit", "null", "status", "why", "n_a", "n_b", "paired"]


@dataclass(frozen=True)
class Derived:
    """One derived number with its 95% CI and what it may claim (see the module docstring)."""

    name: str
    point: float
    lo: float
    hi: float
    unit: str  # "us", "ns", "x" (a ratio), "%" (a share), ...
    null: float  # 0 for a difference or share, 1 for a ratio
    status: str  # one of STATUSES
    why: str = ""  # the reason for "not meaningful" (and for "inconclusive")
    n_a: int = 0  # samples (or pairs) it is made of
    n_b: int = 0
    paired: bool = False

    @property
    def clear(self) -> bool:
        return self.status == "clear"

    def row(self, **extra: Any) -> dict[str, Any]:
        """The table row; ``extra`` columns (e.g. ``table="alloc"``) are added after these."""
        return dataclasses.asdict(self) | extra


def not_meaningful(name: str, why: str, unit: str = "", null: float = 0.0) -> Derived:
    """A quantity that must not be stated, with the reason (different instruments or runs,
    missing samples): shown as ``n/a (why)``."""
    nan = float("nan")
    return Derived(name, nan, nan, nan, unit, null, "not meaningful", why)


def _classify(name: str, point: float, lo: float, hi: float, unit: str, null: float, n_a: int, n_b: int,
              paired: bool, physical_min: float | None = None, physical_max: float | None = None) -> Derived:
    if not (math.isfinite(point) and math.isfinite(lo) and math.isfinite(hi)):
        return dataclasses.replace(not_meaningful(name, "missing or non-finite samples", unit, null),
                                   n_a=n_a, n_b=n_b, paired=paired)
    unit_text = "" if unit in ("", "x", "%") else f" {unit}"
    if physical_min is not None and hi < physical_min:
        status, why = "not meaningful", (f"physically impossible: the whole CI [{lo:.3g}, {hi:.3g}]{unit_text} is below "
                                         f"{physical_min:g}")
    elif physical_max is not None and lo > physical_max:
        status, why = "not meaningful", (f"physically impossible: the whole CI [{lo:.3g}, {hi:.3g}]{unit_text} is above "
                                         f"{physical_max:g}")
    elif min(n_a, n_b) < MIN_SAMPLES:
        status, why = "inconclusive", f"only {min(n_a, n_b)} samples: too few for a CI (at least {MIN_SAMPLES})"
    elif lo <= null <= hi:
        status, why = "inconclusive", f"the CI includes {null:g}"
    else:
        status, why = "clear", ""
    return Derived(name, float(point), float(lo), float(hi), unit, float(null), status, why, n_a, n_b, paired)


def _ci(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [tail, 1 - tail])
    return float(lo), float(hi)


def _arrays(a, b, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """Both sides as float arrays; unpaired sides lose non-finite samples (paired ones are
    checked by :func:`_paired_ok`, since dropping one side of a pair would shift the rest)."""
    xa, xb = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    return (xa, xb) if paired else (xa[np.isfinite(xa)], xb[np.isfinite(xb)])


def _paired_ok(xa: np.ndarray, xb: np.ndarray) -> str:
    if xa.size != xb.size:
        return f"paired samples of unequal length ({xa.size} and {xb.size})"
    if not (np.isfinite(xa).all() and np.isfinite(xb).all()):
        return "non-finite paired samples"
    return ""


def difference(a, b, name: str, unit: str = "us", *, paired: bool = False, physical_min: float | None = None,
               scale: float = 1.0, confidence: float = CONFIDENCE, seed: int = 0) -> Derived:
    """``median(b) - median(a)`` (unpaired), or the median of ``b_i - a_i`` (``paired``: the
    same round or iteration), times ``scale`` (e.g. 1e-3 for samples in ns and ``unit="us"``).
    ``physical_min`` (e.g. 0 for a cost) flags a CI that lies wholly below it as impossible."""
    xa, xb = _arrays(a, b, paired)
    if xa.size < 2 or xb.size < 2:
        return not_meaningful(name, f"too few samples ({xa.size} and {xb.size})", unit)
    rng = np.random.default_rng(seed)
    if paired:
        bad = _paired_ok(xa, xb)
        if bad:
            return not_meaningful(name, bad, unit)
        d = (xb - xa) * scale
        point, boot = float(np.median(d)), stats.resampled_medians(d, RESAMPLES, rng)
    else:
        point = float(np.median(xb) - np.median(xa)) * scale
        boot = (stats.resampled_medians(xb, RESAMPLES, rng) - stats.resampled_medians(xa, RESAMPLES, rng)) * scale
    lo, hi = _ci(boot, confidence)
    return _classify(name, point, lo, hi, unit, 0.0, xa.size, xb.size, paired, physical_min)


def ratio(a, b, name: str, *, paired: bool = False, confidence: float = CONFIDENCE, seed: int = 0) -> Derived:
    """``median(b) / median(a)`` (unpaired), or the median of ``b_i / a_i`` (``paired``);
    below 1 when b takes less time than a."""
    xa, xb = _arrays(a, b, paired)
    if xa.size < 2 or xb.size < 2:
        return not_meaningful(name, f"too few samples ({xa.size} and {xb.size})", "x", 1.0)
    # a numerator of 0 is a time under the clock's resolution (sys time of a short phase): ratio 0
    if (xa <= 0).any() or (xb < 0).any():
        return not_meaningful(name, "a ratio of times needs positive denominators and no negative time", "x", 1.0)
    rng = np.random.default_rng(seed)
    if paired:
        bad = _paired_ok(xa, xb)
        if bad:
            return not_meaningful(name, bad, "x", 1.0)
        r = xb / xa
        point, boot = float(np.median(r)), stats.resampled_medians(r, RESAMPLES, rng)
    else:
        point = float(np.median(xb) / np.median(xa))
        boot = stats.resampled_medians(xb, RESAMPLES, rng) / stats.resampled_medians(xa, RESAMPLES, rng)
    lo, hi = _ci(boot, confidence)
    return _classify(name, point, lo, hi, "x", 1.0, xa.size, xb.size, paired)


def share(part, total, name: str, *, confidence: float = CONFIDENCE, seed: int = 0) -> Derived:
    """The median over iterations of ``100 * part_i / total_i`` in %, paired per iteration (a
    part and its total from the same iteration of one instrument, never medians of two runs).
    A part below 0 or above its total is impossible and makes the share not meaningful."""
    xp, xt = np.asarray(part, dtype=float).ravel(), np.asarray(total, dtype=float).ravel()
    bad = _paired_ok(xp, xt)
    if bad:
        return not_meaningful(name, bad, "%")
    if xp.size < 2:
        return not_meaningful(name, f"too few iterations ({xp.size})", "%")
    if (xt <= 0).any():
        return not_meaningful(name, "an iteration with a total of 0 or less", "%")
    wrong = int(((xp < 0) | (xp > xt)).sum())
    if wrong:
        return dataclasses.replace(
            not_meaningful(name, f"physically impossible: the part is negative or exceeds its total in {wrong} of "
                                 f"{xp.size} iterations", "%"), n_a=xp.size, n_b=xp.size, paired=True)
    s = 100.0 * xp / xt
    lo, hi = _ci(stats.resampled_medians(s, RESAMPLES, np.random.default_rng(seed)), confidence)
    return _classify(name, float(np.median(s)), lo, hi, "%", 0.0, xp.size, xp.size, True, 0.0, 100.0)


def boot_medians(values, seed: int = 0) -> np.ndarray:
    """The bootstrap distribution of ``median(values)`` (:data:`RESAMPLES` draws, fixed seed),
    for a statistic this module has no function for: combine distributions of the same seed
    and pass the result to :func:`from_boot`."""
    x = np.asarray(values, dtype=float).ravel()
    return stats.resampled_medians(x[np.isfinite(x)], RESAMPLES, np.random.default_rng(seed))


def from_boot(name: str, point: float, boot: np.ndarray, unit: str, *, null: float = 0.0, n_a: int = 0,
              n_b: int = 0, paired: bool = False, physical_min: float | None = None,
              confidence: float = CONFIDENCE) -> Derived:
    """A derived quantity from its point estimate and its bootstrap distribution (e.g. a ratio
    of two differences), classified as every other one."""
    boot = np.asarray(boot, dtype=float)
    if boot.size == 0 or not np.isfinite(boot).all():
        return not_meaningful(name, "its bootstrap distribution is not finite", unit, null)
    lo, hi = _ci(boot, confidence)
    return _classify(name, point, lo, hi, unit, null, n_a, n_b, paired, physical_min)


def median_of(values, name: str, unit: str = "us", *, physical_min: float | None = None,
              confidence: float = CONFIDENCE, seed: int = 0) -> Derived:
    """The median of per-iteration values that are already a derived quantity (e.g. total -
    compute of each profiled iteration), with a bootstrap CI; ``null`` 0."""
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size < 2:
        return not_meaningful(name, f"too few iterations ({x.size})", unit)
    lo, hi = _ci(stats.resampled_medians(x, RESAMPLES, np.random.default_rng(seed)), confidence)
    return _classify(name, float(np.median(x)), lo, hi, unit, 0.0, x.size, x.size, True, physical_min)


# --- tables and text ----------------------------------------------------------------------------

def derived_table(items: Iterable[Derived | Mapping[str, Any]]) -> pd.DataFrame:
    """One row per quantity, the form ``analyze`` returns (as its ``derived`` table); items may
    be :class:`Derived` or rows from :meth:`Derived.row` with extra columns."""
    rows = [d.row() if isinstance(d, Derived) else dict(d) for d in items]
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows)
    return df[COLUMNS + [c for c in df.columns if c not in COLUMNS]]


def item(row: Derived | Mapping[str, Any]) -> Derived:
    """A :class:`Derived` from a row of a derived table (extra columns ignored)."""
    if isinstance(row, Derived):
        return row
    get = row.get
    return Derived(str(get("name", "")), float(get("point", math.nan)), float(get("lo", math.nan)),
                   float(get("hi", math.nan)), str(get("unit", "") or ""), float(get("null", 0.0)),
                   str(get("status", "not meaningful")), str(get("why", "") or ""),
                   int(get("n_a", 0) or 0), int(get("n_b", 0) or 0), bool(get("paired", False)))


def _decimals(point: float, lo: float, hi: float) -> int:
    """Enough decimals for two significant digits of the point and of the CI's width (so a
    clear 1.0023x never prints as 1.00 [1.00, 1.00], and 0.004x never as 0.00x)."""
    need = [1 - math.floor(math.log10(abs(v))) for v in (point, hi - lo) if v and math.isfinite(v)]
    return max(0, min(6, max(need, default=0)))


def fmt_number(x: float, decimals: int) -> str:
    return f"{x:,.{decimals}f}"


def fmt_derived(d: Derived | Mapping[str, Any], status: bool = True) -> str:
    """``1.2 us [0.9, 2.8] (clear)``, ``77% [74, 80]``, ``0.0040x [0.0038, 0.0043] (1/250)``;
    never a bare point, never ``0.00x``; a not-meaningful value shows its reason instead."""
    d = item(d)
    if not math.isfinite(d.point):
        return f"n/a ({d.why or d.status})"
    dec = _decimals(d.point, d.lo, d.hi)
    # an exact 0 (a time under its clock's resolution) reads "0", not a rounded "0.000"
    p, lo, hi = ("0" if v == 0 else fmt_number(v, dec) for v in (d.point, d.lo, d.hi))
    if d.unit == "x":
        # a small ratio also as 1/N (1/250 reads better than 0.0040x), while its CI excludes 0
        inverse = 1 / d.point if 0 < d.point < 0.1 and d.lo > 0 else None
        text = f"{p}x [{lo}, {hi}]" + (f" (1/{inverse:,.0f})" if inverse and inverse >= 100 else
                                       f" (1/{inverse:.3g})" if inverse else "")
    elif d.unit == "%":
        text = f"{p}% [{lo}, {hi}]"
    else:
        text = f"{p} {d.unit} [{lo}, {hi}]".replace("  ", " ")
    if not status:
        return text
    return text + (f" (not meaningful: {d.why})" if d.status == "not meaningful" else f" ({d.status})")


def headline(df: pd.DataFrame | None, limit: int = 4) -> str:
    """What a verdict may say about a derived table: its clear results (at most ``limit``), how
    many are inconclusive (never named as findings), and the not-meaningful ones with why."""
    if df is None or not len(df) or "status" not in df:
        return ""
    rows = [item(r) for r in df.to_dict("records")]
    clear = [d for d in rows if d.status == "clear"]
    parts = []
    if clear:
        shown = "; ".join(f"{d.name}: {fmt_derived(d, status=False)}" for d in clear[:limit])
        more = f" (and {len(clear) - limit} more in the derived table)" if len(clear) > limit else ""
        parts.append(f"Clear: {shown}{more}.")
    vague = sum(d.status == "inconclusive" for d in rows)
    if vague:
        parts.append(f"{vague} derived figure(s) inconclusive (CI includes no change, or too few samples): "
                     "not stated as findings.")
    flagged = [d for d in rows if d.status == "not meaningful"]
    if flagged:
        parts.append("Not meaningful: " + "; ".join(f"{d.name} ({d.why})" for d in flagged[:limit]) + ".")
    return " ".join(parts)
