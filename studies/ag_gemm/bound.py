"""The perfect-overlap bound of the ag-gemm study, measured in the same run as every provider.

A fused all-gather + GEMM cannot beat ``max(all-gather alone, matmul alone)`` (each half at
full speed, the shorter one hidden behind the longer). The worker times ``all-gather`` and
``matmul`` as contestants of the same round-robin as the providers, so each round r has its own
``bound_r = max(ag_r, mm_r)``; from those:

- the bound's time (median of ``bound_r``, bootstrap CI);
- the bound's speedup over the baseline, ``median(base_r / bound_r)``: the ceiling of every
  speedup, drawn in the key chart;
- each provider's fraction of the bound, ``median(bound_r / prov_r)``: 1 is perfect overlap
  (a speedup equal to the bound's), below 1 what is left on the table.

Rounds pair samples taken within milliseconds of each other, so clock drift cancels (as in the
speedups); with unequal sample counts (an older run, a variant that lost samples) the ratios
fall back to ratios of medians and the bound to the larger of the two medians.
"""

from __future__ import annotations

import math

import numpy as np

from workbench import derived, stats
from workbench.derived import Derived

PARTS = ("all-gather", "matmul")
NAME = "perfect-overlap bound"


def rounds(grp: dict) -> np.ndarray | None:
    """Per round, max(all-gather, matmul) in ns; None when a part is missing or failed, or the
    two were not timed in the same rounds (then :func:`medians_bound`)."""
    parts = [grp.get(p) for p in PARTS]
    if any(p is None or not p.correct or not p.samples_ns for p in parts):
        return None
    ag, mm = (np.asarray(p.samples_ns, dtype=float) for p in parts)
    return np.maximum(ag, mm) if ag.size == mm.size else None


def medians_bound(grp: dict) -> float:
    """max of the parts' medians in ns (NaN without both parts)."""
    parts = [grp.get(p) for p in PARTS]
    if any(p is None or not p.correct or not p.samples_ns for p in parts):
        return math.nan
    return max(stats.summarize(p.samples_ns).median for p in parts)


def time_ms(grp: dict) -> tuple[float, float, float]:
    """The bound's time (median, CI lo, CI hi) in ms; the CI only where rounds pair the parts."""
    b = rounds(grp)
    if b is None:
        return medians_bound(grp) / 1e6, math.nan, math.nan
    s = stats.summarize(b.tolist())
    return s.median / 1e6, s.ci_lo / 1e6, s.ci_hi / 1e6


def _pairs(grp: dict, v) -> tuple[np.ndarray, bool] | None:
    b = rounds(grp)
    if b is None or v is None or not v.correct or not v.samples_ns:
        return None
    return b, b.size == len(v.samples_ns)


def speedup(grp: dict, base, name: str) -> Derived:
    """The bound's speedup over the baseline: median over rounds of base / bound."""
    got = _pairs(grp, base)
    if got is None:
        return derived.not_meaningful(name, "needs the all-gather and the matmul alone and the baseline, checked "
                                            "and timed in one run", "x", 1.0)
    b, paired = got
    return derived.ratio(b, base.samples_ns, name, paired=paired)


def fraction(grp: dict, v, name: str) -> Derived:
    """A provider's fraction of the bound: median over rounds of bound / provider (1: it runs
    as fast as perfect overlap would)."""
    got = _pairs(grp, v)
    if got is None:
        return derived.not_meaningful(name, "needs the all-gather and the matmul alone and this provider, checked "
                                            "and timed in one run", "x", 1.0)
    b, paired = got
    return derived.ratio(v.samples_ns, b, name, paired=paired)  # median(b_r / v_r)
