"""Derived quantities of the cpu-reduction study (differences, ratios, shares) with their CIs.

Rows have the columns of the project's derived-quantity table (``name, point, lo, hi, unit,
null, status, why``; design-phase2.md), so that ``workbench/derived.py`` can replace this
module without changing the tables. CIs are percentile bootstraps of the statistic from the
raw samples it is made of; paired statistics resample pairs (the same round or iteration).

Status: ``clear`` when the CI excludes ``null`` (0 for a difference, 1 for a ratio),
``inconclusive`` when it does not, ``not meaningful`` when the whole CI is physically
impossible (a negative cost) or the inputs are missing.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 2000
COLUMNS = ["name", "point", "lo", "hi", "unit", "null", "status", "why", "n_a", "n_b", "paired"]


def _row(name, point, lo, hi, unit, null, n_a, n_b, paired, physical_min=None) -> dict:
    if not (np.isfinite(point) and np.isfinite(lo) and np.isfinite(hi)):
        return not_meaningful(name, "missing samples", unit, null)
    if physical_min is not None and hi < physical_min:
        status, why = "not meaningful", (f"physically impossible: the whole CI [{lo:.3g}, {hi:.3g}] {unit} is "
                                         f"below {physical_min:g}")
    elif lo <= null <= hi:
        status, why = "inconclusive", f"the CI includes {null:g}"
    else:
        status, why = "clear", ""
    return {"name": name, "point": float(point), "lo": float(lo), "hi": float(hi), "unit": unit, "null": null,
            "status": status, "why": why, "n_a": n_a, "n_b": n_b, "paired": paired}


def not_meaningful(name: str, why: str, unit: str = "", null: float = 0.0) -> dict:
    nan = float("nan")
    return {"name": name, "point": nan, "lo": nan, "hi": nan, "unit": unit, "null": null,
            "status": "not meaningful", "why": why, "n_a": 0, "n_b": 0, "paired": False}


def _arrays(a, b):
    return np.asarray(a, dtype=float), np.asarray(b, dtype=float)


def _ci(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    return float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))


def difference(a, b, name: str, unit: str = "us", *, paired: bool = False, physical_min: float | None = None,
               scale: float = 1.0, confidence: float = 0.95, seed: int = 0) -> dict:
    """``median(b) - median(a)`` (unpaired) or the median of ``b_i - a_i`` (paired), times
    ``scale`` (e.g. 1e-3 for ns -> us), with a bootstrap CI."""
    xa, xb = _arrays(a, b)
    if xa.size < 2 or xb.size < 2 or (paired and xa.size != xb.size):
        return not_meaningful(name, "too few samples (or unequal pairs)", unit)
    rng = np.random.default_rng(seed)
    if paired:
        d = (xb - xa) * scale
        point = float(np.median(d))
        boot = np.median(d[rng.integers(0, d.size, (RESAMPLES, d.size))], axis=1)
    else:
        point = float(np.median(xb) - np.median(xa)) * scale
        boot = (np.median(xb[rng.integers(0, xb.size, (RESAMPLES, xb.size))], axis=1)
                - np.median(xa[rng.integers(0, xa.size, (RESAMPLES, xa.size))], axis=1)) * scale
    lo, hi = _ci(boot, confidence)
    return _row(name, point, lo, hi, unit, 0.0, xa.size, xb.size, paired, physical_min)


def ratio(a, b, name: str, *, confidence: float = 0.95, seed: int = 0) -> dict:
    """``median(b) / median(a)`` with a bootstrap CI (independent resamples of both sides)."""
    xa, xb = _arrays(a, b)
    if xa.size < 2 or xb.size < 2 or np.median(xa) <= 0:
        return not_meaningful(name, "too few samples", "x", 1.0)
    rng = np.random.default_rng(seed)
    boot = (np.median(xb[rng.integers(0, xb.size, (RESAMPLES, xb.size))], axis=1)
            / np.median(xa[rng.integers(0, xa.size, (RESAMPLES, xa.size))], axis=1))
    lo, hi = _ci(boot, confidence)
    return _row(name, float(np.median(xb) / np.median(xa)), lo, hi, "x", 1.0, xa.size, xb.size, False)


def median_of(values, name: str, unit: str = "us", *, physical_min: float | None = None,
              confidence: float = 0.95, seed: int = 0) -> dict:
    """The median of per-iteration values (e.g. total - compute of each profiled iteration)
    with a bootstrap CI; ``null`` 0."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return not_meaningful(name, "fewer than 2 iterations", unit)
    rng = np.random.default_rng(seed)
    boot = np.median(x[rng.integers(0, x.size, (RESAMPLES, x.size))], axis=1)
    lo, hi = _ci(boot, confidence)
    return _row(name, float(np.median(x)), lo, hi, unit, 0.0, x.size, x.size, True, physical_min)


def fmt(row: dict, digits: int = 1) -> str:
    """``1.2 us [0.9, 2.8] (clear)``; ratios as ``4.1x [3.9, 4.3]``; never a bare point."""
    if row["status"] == "not meaningful" and not np.isfinite(row["point"]):
        return f"n/a ({row['why']})"
    unit = row["unit"]
    p, lo, hi = row["point"], row["lo"], row["hi"]
    if unit == "x":
        d = max(digits, 2 if abs(p) < 10 else 1)
        if 0 < abs(p) < 0.01:
            d = 4
        return f"{p:.{d}f}x [{lo:.{d}f}, {hi:.{d}f}] ({row['status']})"
    return f"{p:.{digits}f} {unit} [{lo:.{digits}f}, {hi:.{digits}f}] ({row['status']})"
