"""Derived quantities as data: one row per number derived from measurements, its 95% CI, the
levels of uncertainty the CI covers, and the one status it may claim.

This module holds the row (:class:`Derived`), the levels (:data:`COVERS`), the run's drift
between blocks as data (:class:`Drift`) and how rows are tabled and printed. Rows are built
by the comparison engine only (:mod:`workbench.evidence.engine`: every ratio, difference, share,
gain, rate and across-run figure, and the rules that give each its status); a study asks
the engine for them and formats them, never builds one (``tests/workbench/test_engine_boundary.py``
keeps it so).

**What a CI covers** (the ``covers`` column, never empty; Kalibera and Jones, "Rigorous
Benchmarking in Reasonable Time", 2013: uncertainty has levels, and a CI must say which it
includes):

- ``rounds``: the two sides were timed in the same interleaved rounds: the statistic is made
  of per-round values, so what drifts between rounds falls on both sides alike and cancels;
- ``samples + drift``: the sides were timed in different blocks of one run: each side's
  sampling noise plus the run's **drift between blocks**, measured by its null controls;
- ``samples (drift not measured)``: different blocks, but the run has no usable null
  control: the CI is within-block only, so the figure is at most inconclusive;
- ``samples``: one block (a share of one profiled iteration's total, a median of
  per-iteration values, a figure against a model): drift cannot enter;
- ``runs``: several runs of one configuration on one host (:mod:`workbench.reading.across`);
- ``hosts``: runs on several hosts, the hosts the units (a host effect is in the CI);
- ``count``: a rate of events in trials (failures of a check): no timing level applies.

**Statuses** (``docs/reading-a-run.md`` explains them to users): ``clear`` (the CI excludes
``null`` and nothing limits it), ``inconclusive`` (the CI includes ``null``, or a ``caveat``
keeps the CI from deciding: too few samples, an interval short of 95%, drift not measured,
measured under load) and ``not meaningful`` (physically impossible, missing samples, or
quantities of different instruments or runs; ``why`` says which). :class:`Derived` enforces
the rules a status can never break, whoever builds the row.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from . import stats
from ..base import units

CONFIDENCE = 0.95
#: fewer samples (rounds, runs, hosts) than this a side: shown, but inconclusive whatever the CI
MIN_SAMPLES = stats.MIN_SAMPLES_FOR_VERDICT
STATUSES = ("clear", "inconclusive", "not meaningful")
#: what a CI covers (the module docstring says what each means)
ROUNDS = "rounds"
BLOCKS = "samples + drift"
WITHIN_BLOCK = "samples (drift not measured)"
SAMPLES = "samples"
RUNS = "runs"
HOSTS = "hosts"
COUNT = "count"
COVERS = (ROUNDS, BLOCKS, WITHIN_BLOCK, SAMPLES, RUNS, HOSTS, COUNT)
#: the levels a "clear" may stand on (drift not measured is not one of them)
DECIDING = (ROUNDS, BLOCKS, SAMPLES, RUNS, HOSTS, COUNT)
COLUMNS = ["name", "point", "lo", "hi", "unit", "null", "status", "why", "n_a", "n_b", "paired", "covers", "caveat",
           "sources"]


@dataclass(frozen=True)
class Derived:
    """One derived number with its 95% CI and what it may claim (see the module docstring).

    ``caveat`` is what keeps the CI from deciding whatever it says (under load, drift not
    measured, too few samples, an interval short of 95%): a claim reads it before the CI.
    ``sources`` names the variants the number is made of (``|``-separated)."""

    name: str
    point: float
    lo: float
    hi: float
    unit: str  # "us", "ns", "x" (a ratio), "%" (a share or gain), "GB/s", ...
    null: float  # 0 for a difference, share or gain, 1 for a ratio
    status: str  # one of STATUSES
    why: str = ""  # the reason for "not meaningful" and "inconclusive"
    n_a: int = 0  # samples (or rounds, runs, hosts) a side
    n_b: int = 0
    paired: bool = False
    covers: str = SAMPLES  # one of COVERS
    caveat: str = ""
    sources: str = ""

    def __post_init__(self):
        # the rules no status may break, whoever builds the row
        if self.status == "clear":
            levels = "" if self.covers in DECIDING else f"a CI that covers {self.covers or 'nothing'}"
            reason = (too_few(min(self.n_a, self.n_b), self.covers) if min(self.n_a, self.n_b) < MIN_SAMPLES else
                      self.caveat or levels)
            if reason:
                object.__setattr__(self, "status", "inconclusive")
                object.__setattr__(self, "why", reason)
                object.__setattr__(self, "caveat", self.caveat or reason)
        if not self.covers:
            object.__setattr__(self, "covers", SAMPLES)

    @property
    def clear(self) -> bool:
        return self.status == "clear"

    def row(self, **extra: Any) -> dict[str, Any]:
        """The table row; ``extra`` columns (e.g. ``table="alloc"``) are added after these."""
        return dataclasses.asdict(self) | extra


#: what a figure's units are called, by the level its CI covers (the one rule's message)
UNITS_OF = {ROUNDS: "rounds", RUNS: "runs", HOSTS: "hosts", COUNT: "trials"}


def too_few(n: int, covers: str = SAMPLES) -> str:
    return f"only {n} {UNITS_OF.get(covers, 'samples')}: too few for a verdict (at least {MIN_SAMPLES})"


@dataclass(frozen=True)
class Drift:
    """The run's drift between blocks: ``log_sd`` is tau, the spread of a ratio's log between
    two blocks of one configuration, from ``controls`` null controls worth ``nulls`` independent
    contrasts (nulls that share blocks count as the blocks they span, less one; the degrees of
    freedom of its t); ``excluded`` nulls were left out as clearly not null. Not measured
    without a null. :mod:`workbench.evidence.engine` estimates it and says how."""

    log_sd: float = math.nan
    nulls: int = 0
    source: str = ""
    excluded: int = 0
    controls: int = 0  # null controls the units are made of

    @property
    def measured(self) -> bool:
        return self.nulls > 0 and math.isfinite(self.log_sd)

    @property
    def pct(self) -> float:
        """tau as a percentage of a ratio (2.1 for exp(tau) = 1.021)."""
        return 100.0 * math.expm1(self.log_sd) if self.measured else math.nan

    def text(self) -> str:
        """``drift between blocks: 2.1% (7 null controls, 5 independent: ...)``, or why it is not measured."""
        left = (f"; {self.excluded} left out: clearly not null" if self.excluded else "")
        if not self.measured:
            return ("drift between blocks not measured (no usable null control" + left + "): a comparison of two "
                    "blocks is at most inconclusive")
        count = (f"{self.controls} null controls, {self.nulls} independent" if self.controls != self.nulls
                 else f"{self.nulls} null control(s)")
        return f"drift between blocks: {self.pct:.1f}% ({count}{left}: {self.source})"

    def draws(self, rng, size: int) -> np.ndarray:
        """Draws of delta, the log offset between two blocks: tau times Student's t with as many
        degrees of freedom as there are null units (zeros when not measured)."""
        if not self.measured:
            return np.zeros(size)
        # clipped where exp() would overflow: a t with 1-2 degrees of freedom has far tails, and
        # a factor of e^50 between two blocks is already past any percentile that is read
        return np.clip(self.log_sd * rng.standard_t(self.nulls, size), -50.0, 50.0)


NO_DRIFT = Drift()


def drift_of(tbls: Mapping[str, pd.DataFrame] | None) -> Drift:
    """The run's :class:`Drift` from its ``drift`` table (not measured without one)."""
    t = (tbls or {}).get("drift")
    if t is None or not len(t):
        return NO_DRIFT
    r = t.iloc[0]
    get = r.get
    return Drift(float(r["log_sd"]), int(r["nulls"]), str(r["source"]), int(get("excluded", 0) or 0),
                 int(get("controls", 0) or 0))


# --- tables and text ----------------------------------------------------------------------------

def derived_table(items: Iterable[Derived | Mapping[str, Any]]) -> pd.DataFrame:
    """One row per quantity, the form ``analyze`` returns (as its ``derived`` table); items are
    rows the engine built (:class:`Derived`, or :meth:`Derived.row` with extra columns)."""
    rows = [d.row() if isinstance(d, Derived) else dict(d) for d in items]
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = "" if col in ("caveat", "sources", "why") else math.nan
    return df[COLUMNS + [c for c in df.columns if c not in COLUMNS]]


def _text(x: Any) -> str:
    return x if isinstance(x, str) else ""


def item(row: Derived | Mapping[str, Any]) -> Derived:
    """A :class:`Derived` from a row of a derived table (extra columns ignored)."""
    if isinstance(row, Derived):
        return row
    get = row.get
    return Derived(str(get("name", "")), float(get("point", math.nan)), float(get("lo", math.nan)),
                   float(get("hi", math.nan)), _text(get("unit")), float(get("null", 0.0)),
                   str(get("status", "not meaningful")), _text(get("why")),
                   int(get("n_a", 0) or 0), int(get("n_b", 0) or 0), bool(get("paired", False)),
                   _text(get("covers")) or SAMPLES, _text(get("caveat")), _text(get("sources")))


def _decimals(point: float, lo: float, hi: float) -> int:
    """Enough decimals for two significant digits of the point and of the CI's width (so a
    clear 1.0023x never prints as 1.00 [1.00, 1.00], and 0.004x never as 0.00x)."""
    need = [1 - math.floor(math.log10(abs(v))) for v in (point, hi - lo) if v and math.isfinite(v)]
    return max(0, min(6, max(need, default=0)))


def fmt_number(x: float, decimals: int) -> str:
    return f"{x:,.{decimals}f}"


def fmt_derived(d: Derived | Mapping[str, Any], status: bool = True) -> str:
    """``1.2 us [0.9, 2.8] (clear)``, ``77% [74, 80]``, ``0.0040x [0.0038, 0.0043] (1/250)``;
    never a bare point, never ``0.00x``; a not-meaningful value shows its reason instead. A
    time, a size or a bandwidth reads in the unit its point's magnitude calls for, its CI in
    the same unit (:mod:`workbench.base.units`: ``1.22 s [1.10, 1.31]``, not ``1,222,847.0 us``)."""
    d = item(d)
    if not math.isfinite(d.point):
        return f"n/a ({d.why or d.status})"
    shown = units.pick([d.point, d.lo, d.hi], d.unit, typical=d.point) if units.kind_of(d.unit) else d.unit
    scale = (lambda v: units.convert(v, d.unit, shown) if math.isfinite(v) else v) if shown != d.unit else (lambda v: v)
    point, lo_v, hi_v, null = scale(d.point), scale(d.lo), scale(d.hi), scale(d.null) if d.null else d.null
    if not (math.isfinite(d.lo) and math.isfinite(d.hi)):
        return f"{fmt_number(point, _decimals(point, 0.0, 0.0))} {shown} (no CI: {d.why or d.status})"
    dec = _decimals(point, lo_v, hi_v)
    # a clear CI never prints reaching its null: 0.9978 shows as 0.998, not as 1.00
    while d.status == "clear" and dec < 6 and round(lo_v, dec) <= null <= round(hi_v, dec):
        dec += 1
    # an exact 0 (a time under its clock's resolution) reads "0", not a rounded "0.000"
    p, lo, hi = ("0" if v == 0 else fmt_number(v, dec) for v in (point, lo_v, hi_v))
    if d.unit == "x":
        # a small ratio also as 1/N (1/250 reads better than 0.0040x), while its CI excludes 0
        inverse = 1 / d.point if 0 < d.point < 0.1 and d.lo > 0 else None
        text = f"{p}x [{lo}, {hi}]" + (f" (1/{inverse:,.0f})" if inverse and inverse >= 100 else
                                       f" (1/{inverse:.3g})" if inverse else "")
    elif d.unit == "%":
        text = f"{p}% [{lo}, {hi}]"
    else:
        text = f"{p} {shown} [{lo}, {hi}]".replace("  ", " ")
    if not status:
        return text
    return text + (f" (not meaningful: {d.why})" if d.status == "not meaningful" else f" ({d.status})")


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """A derived-form table as people read it: the quantity, its other columns, the figure
    with its CI as text, the status with why, and what the CI covers."""
    rows = df.to_dict("records")
    shown = df.drop(columns=[c for c in COLUMNS if c in df.columns] + ["table"], errors="ignore").copy()
    shown.insert(0, "quantity" if "quantity" not in shown.columns else "name", [r["name"] for r in rows])
    shown["figure (95% CI)"] = [fmt_derived(r, status=False) for r in rows]
    shown["status"] = [r["status"] + (f": {r['why']}" if r.get("why") else "") for r in rows]
    shown["CI covers"] = [_text(r.get("covers")) or SAMPLES for r in rows]
    return shown
