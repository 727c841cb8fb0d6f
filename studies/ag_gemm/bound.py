"""The perfect-overlap bound of the ag-gemm study, measured in the same run as every provider.

A fused all-gather + GEMM cannot beat ``max(all-gather alone, matmul alone)`` (each half at
full speed, the shorter one hidden behind the longer). The worker times ``all-gather`` and
``matmul`` as contestants of the same round-robin as the providers, so each round r has its own
``bound_r = max(ag_r, mm_r)``; from those:

- the bound's time (median of ``bound_r``, its order-statistic CI);
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

from workbench.evidence import engine, stats
from workbench.evidence.derived import Derived

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


def _rounds_series(ev: engine.Evidence, grp: dict) -> engine.Series | None:
    """The bound per round as the engine reads it: the round of each value, the parts' load."""
    b = rounds(grp)
    if b is None:
        return None
    return ev.series(b, NAME, "bound rounds", rounds=range(b.size), sources=[grp[p].variant for p in PARTS],
                     timeline=_timeline(grp))


def _timeline(grp: dict) -> str:
    """The round-robin of one shape (its contestants' samples are its rounds, by position)."""
    return "round-robin of " + "|".join(sorted(v.variant for v in grp.values()))


def _positional(ev: engine.Evidence, v, grp: dict) -> engine.Series:
    """A contestant's samples in round order (the worker times the round-robin by position)."""
    return ev.series(v.samples_ns, v.variant, v.variant, rounds=range(len(v.samples_ns)), sources=[v.variant],
                     timeline=_timeline(grp))


def speedup(ev: engine.Evidence, grp: dict, base, name: str) -> Derived:
    """The bound's speedup over the baseline: median over rounds of base / bound."""
    b = _rounds_series(ev, grp)
    if b is None or base is None or not base.correct or not base.samples_ns:
        return engine.not_meaningful(name, "needs the all-gather and the matmul alone and the baseline, checked "
                                           "and timed in one run", "x", 1.0)
    return ev.ratio(b, _positional(ev, base, grp), name)


def fraction(ev: engine.Evidence, grp: dict, v, name: str) -> Derived:
    """A provider's fraction of the bound: median over rounds of bound / provider (1: it runs
    as fast as perfect overlap would)."""
    b = _rounds_series(ev, grp)
    if b is None or v is None or not v.correct or not v.samples_ns:
        return engine.not_meaningful(name, "needs the all-gather and the matmul alone and this provider, checked "
                                           "and timed in one run", "x", 1.0)
    return ev.ratio(_positional(ev, v, grp), b, name)  # median(b_r / v_r)
