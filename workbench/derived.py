"""Derived quantities (differences, ratios, shares) with their own CI, and what they may claim.

A study's ``analyze`` builds every number it derives from two or more measurements here, from
the raw samples those measurements are made of, and returns them as a ``derived`` table
(:func:`derived_table`). Verdicts, claims and reports only format these rows.

**What a CI covers** (the ``covers`` column; Kalibera and Jones, "Rigorous Benchmarking in
Reasonable Time", 2013: uncertainty has levels, and a CI must say which it includes):

- ``rounds``: the two sides were timed in the same interleaved rounds (``paired=True``, or
  :func:`by_round` on the variants' ``blocks``): the statistic is made of per-round values
  and the bootstrap resamples whole rounds (a block bootstrap), so whatever drifts between
  rounds falls on both sides alike and cancels, and what remains varies from round to round
  and is in the CI;
- ``samples + drift``: the sides were timed in different blocks of one run. Resampling their
  samples covers only the noise inside each block; whatever moved between the two blocks
  (frequency, another tenant, a thermal state) would pass for an effect. The run's **drift
  between blocks** (:class:`Drift`, estimated from its null controls by
  :func:`null_controls`) is added to every bootstrap replicate as a variance component;
- ``samples (drift not measured)``: different blocks, but the run has no null controls: the
  CI is within-block only, and says so;
- ``samples``: one block (a share of one profiled iteration's total, a median of
  per-iteration values): drift cannot enter;
- ``runs``: several runs of one configuration (:mod:`workbench.stats`'s two-level bootstrap:
  runs, then samples), which the run-to-run variation enters (:mod:`workbench.across`).

**The drift model.** The log of a variant's median measured in block j is its true value plus
a block effect b_j plus the sampling error of the block. A ratio of two variants timed in
blocks 1 and 2 is off by delta = b_2 - b_1, whose spread tau the run's null controls measure:
pairs of blocks whose true ratio is 1 (the same configuration timed twice, a serial-path or
zero-work control). With null log ratios l_i, ``tau = sqrt(mean(l_i^2))``: the root-mean-square
null log ratio (a null's offset counts as drift, since its true value is 0, not its mean).
The l_i carry the sampling noise of their blocks too, which the bootstrap already covers; it
is not taken out, so it counts twice where the drift is added: conservative on purpose, since
a percentile bootstrap of the median of 10-20 samples is itself a little narrow, and the
nulls' own false-clear rate must stay at or below 5% (``benchmarks/null_controls.py``).
Each bootstrap replicate then gets a draw of delta from
``tau * t_k`` (Student's t with k = the number of nulls: the predictive distribution of a new
zero-mean deviation when tau is estimated from k of them, so a run with few null controls
gets the wide interval it has earned): a ratio's replicate is multiplied by exp(delta), a
difference's sides by exp(+delta/2) and exp(-delta/2). A variance component rather than a
block bootstrap over rounds, because two variants timed in different blocks share no rounds
to resample; where they do share rounds (``rounds``), the block bootstrap is used instead.

Every quantity gets one status (``docs/reading-a-run.md`` explains them to users):

- ``clear``: its 95% CI, with the drift where its sides come from different blocks, excludes
  ``null`` (0 for a difference or share, 1 for a ratio), from at least :data:`MIN_SAMPLES`
  samples (or rounds, or runs) a side: **the one rule**, enforced by :class:`Derived` itself,
  so no study can build a "clear" from fewer;
- ``inconclusive``: the CI includes ``null``, there are fewer than :data:`MIN_SAMPLES`, or a
  side was measured under load (``loaded``: "inconclusive under load");
- ``not meaningful``: physically impossible (the whole CI below ``physical_min``: a negative
  cost; a share outside 0-100%), made of quantities from different instruments or runs
  (the study says so with :func:`not_meaningful`), or missing samples; ``why`` says which.

CIs are percentile bootstraps of the statistic itself (2000 resamples, fixed seed, so the same
record always gives the same table). Above :data:`workbench.stats.BOOTSTRAP_MAX_N` samples a
side, medians are drawn from the exact bootstrap distribution of the median
(:func:`workbench.stats.resampled_medians`), which costs O(n) instead of O(resamples x n).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import machine_load, stats, units

RESAMPLES = 2000
CONFIDENCE = 0.95
#: fewer samples (rounds, runs) than this a side: the quantity is shown, but inconclusive
#: whatever its CI. The one rule: :class:`Derived` enforces it on every quantity built.
MIN_SAMPLES = stats.MIN_SAMPLES_FOR_VERDICT
STATUSES = ("clear", "inconclusive", "not meaningful")
#: what a CI covers (the module docstring says what each means)
ROUNDS = "rounds"
BLOCKS = "samples + drift"
WITHIN_BLOCK = "samples (drift not measured)"
SAMPLES = "samples"
RUNS = "runs"
COVERS = (ROUNDS, BLOCKS, WITHIN_BLOCK, SAMPLES, RUNS)
COLUMNS = ["name", "point", "lo", "hi", "unit", "null", "status", "why", "n_a", "n_b", "paired", "covers"]


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
    n_a: int = 0  # samples (or pairs, or runs) it is made of
    n_b: int = 0
    paired: bool = False
    covers: str = ""  # the levels its CI covers: one of COVERS ("" for a not-meaningful one)

    def __post_init__(self):
        # the one rule: nothing is clear from fewer than MIN_SAMPLES samples, rounds or runs a side
        if self.status == "clear" and min(self.n_a, self.n_b) < MIN_SAMPLES:
            object.__setattr__(self, "status", "inconclusive")
            object.__setattr__(self, "why", too_few(min(self.n_a, self.n_b)))

    @property
    def clear(self) -> bool:
        return self.status == "clear"

    def row(self, **extra: Any) -> dict[str, Any]:
        """The table row; ``extra`` columns (e.g. ``table="alloc"``) are added after these."""
        return dataclasses.asdict(self) | extra


def too_few(n: int) -> str:
    return f"only {n} samples: too few for a CI (at least {MIN_SAMPLES})"


def not_meaningful(name: str, why: str, unit: str = "", null: float = 0.0) -> Derived:
    """A quantity that must not be stated, with the reason (different instruments or runs,
    missing samples): shown as ``n/a (why)``."""
    nan = float("nan")
    return Derived(name, nan, nan, nan, unit, null, "not meaningful", why)


def classify(name: str, point: float, lo: float, hi: float, unit: str, null: float, n_a: int, n_b: int,
             paired: bool, physical_min: float | None = None, physical_max: float | None = None, *,
             covers: str = SAMPLES, loaded: str = "") -> Derived:
    """A quantity's status from its point and CI (the module docstring's rules); every
    function here ends in it, and a study with a statistic of its own calls it too."""
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
        status, why = "inconclusive", too_few(min(n_a, n_b))
    elif lo <= null <= hi:
        status, why = "inconclusive", f"the CI includes {null:g}"
    elif loaded:
        status, why = "inconclusive", f"inconclusive under load ({loaded})"
    else:
        status, why = "clear", ""
    return Derived(name, float(point), float(lo), float(hi), unit, float(null), status, why, n_a, n_b, paired,
                   covers)


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


@dataclass(frozen=True)
class Drift:
    """The run's drift between blocks (the module docstring's model): ``log_sd`` is tau, the
    spread of a ratio's log between two blocks of one configuration, estimated from ``nulls``
    null controls (``source`` says which); not measured when there are none."""

    log_sd: float = math.nan
    nulls: int = 0
    source: str = ""

    @property
    def measured(self) -> bool:
        return self.nulls > 0 and math.isfinite(self.log_sd)

    @property
    def pct(self) -> float:
        """tau as a percentage of a ratio (2.1 for exp(tau) = 1.021)."""
        return 100.0 * math.expm1(self.log_sd) if self.measured else math.nan

    def text(self) -> str:
        """``drift between blocks: 2.1% (7 null controls: ...)``, or that it was not measured."""
        if not self.measured:
            return ("drift between blocks not measured (no null controls): CIs that compare blocks are "
                    "within-block only")
        return f"drift between blocks: {self.pct:.1f}% ({self.nulls} null control(s): {self.source})"

    def draws(self, rng, size: int = RESAMPLES) -> np.ndarray:
        """Draws of delta, the log offset between two blocks: tau times Student's t with as many
        degrees of freedom as there are nulls (zeros when not measured)."""
        if not self.measured:
            return np.zeros(size)
        # clipped where exp() would overflow: a t with 1-2 degrees of freedom has far tails, and
        # a factor of e^50 between two blocks is already past any percentile that is read
        return np.clip(self.log_sd * rng.standard_t(self.nulls, size), -50.0, 50.0)


NO_DRIFT = Drift()


def covers_of(paired: bool, drift: Drift | None) -> str:
    """What a CI covers: rounds when paired, else samples plus the drift where it was measured."""
    if paired:
        return ROUNDS
    return BLOCKS if drift is not None and drift.measured else WITHIN_BLOCK


def _blocks_of(v) -> np.ndarray | None:
    blocks = getattr(v, "blocks", None)
    if blocks is None or len(blocks) != len(v.samples_ns):
        return None
    return np.asarray(blocks, dtype=np.int64)


def by_round(a, b, positional: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """The samples of two variants (:class:`workbench.record.VariantResult`) paired by the
    round they were taken in: for each block both have, each side's median in it (one sample
    a round, as interleaving takes them). None when they share fewer than 2 blocks (timed in
    different blocks: compare them unpaired, with the drift). A run recorded before blocks
    existed pairs by position when its study says the variants were interleaved
    (``positional``) and both have the same number of samples."""
    xa, xb = np.asarray(a.samples_ns, dtype=float), np.asarray(b.samples_ns, dtype=float)
    ba, bb = _blocks_of(a), _blocks_of(b)
    if ba is None or bb is None:
        return (xa, xb) if positional and ba is None and bb is None and xa.size == xb.size else None
    common = np.intersect1d(ba, bb)
    if common.size < 2:
        return None
    return (np.array([np.median(xa[ba == r]) for r in common]), np.array([np.median(xb[bb == r]) for r in common]))


def _drift_sides(rng, drift: Drift | None) -> tuple[np.ndarray, np.ndarray]:
    """Per replicate, the factors of the two sides: exp(-delta/2) and exp(+delta/2)."""
    delta = (drift or NO_DRIFT).draws(rng)
    return np.exp(-delta / 2), np.exp(delta / 2)


def difference(a, b, name: str, unit: str = "us", *, paired: bool = False, physical_min: float | None = None,
               scale: float = 1.0, drift: Drift | None = None, loaded: str = "", confidence: float = CONFIDENCE,
               seed: int = 0) -> Derived:
    """``median(b) - median(a)`` (unpaired: two blocks, with the run's ``drift`` between them),
    or the median of ``b_i - a_i`` (``paired``: the same round or iteration), times ``scale``
    (e.g. 1e-3 for samples in ns and ``unit="us"``). ``physical_min`` (e.g. 0 for a cost) flags
    a CI that lies wholly below it as impossible; ``loaded`` (why a side was measured under
    load) keeps it from being clear."""
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
        mb, ma = stats.resampled_medians(xb, RESAMPLES, rng), stats.resampled_medians(xa, RESAMPLES, rng)
        fa, fb = _drift_sides(rng, drift)
        boot = (mb * fb - ma * fa) * scale
    lo, hi = _ci(boot, confidence)
    return classify(name, point, lo, hi, unit, 0.0, xa.size, xb.size, paired, physical_min,
                    covers=covers_of(paired, drift), loaded=loaded)


def ratio_boot(a, b, *, paired: bool = False, drift: Drift | None = None, seed: int = 0) -> tuple[float, np.ndarray]:
    """The point and bootstrap replicates of :func:`ratio` (checked inputs), for statistics
    built on a ratio (a gain in %, a ratio of ratios)."""
    xa, xb = _arrays(a, b, paired)
    rng = np.random.default_rng(seed)
    if paired:
        r = xb / xa
        return float(np.median(r)), stats.resampled_medians(r, RESAMPLES, rng)
    boot = stats.resampled_medians(xb, RESAMPLES, rng) / stats.resampled_medians(xa, RESAMPLES, rng)
    return float(np.median(xb) / np.median(xa)), boot * np.exp((drift or NO_DRIFT).draws(rng))


def ratio(a, b, name: str, *, paired: bool = False, drift: Drift | None = None, loaded: str = "",
          confidence: float = CONFIDENCE, seed: int = 0) -> Derived:
    """``median(b) / median(a)`` (unpaired: two blocks, with the run's ``drift``), or the median
    of ``b_i / a_i`` (``paired``); below 1 when b takes less time than a."""
    xa, xb = _arrays(a, b, paired)
    if xa.size < 2 or xb.size < 2:
        return not_meaningful(name, f"too few samples ({xa.size} and {xb.size})", "x", 1.0)
    # a numerator of 0 is a time under the clock's resolution (sys time of a short phase): ratio 0
    if (xa <= 0).any() or (xb < 0).any():
        return not_meaningful(name, "a ratio of times needs positive denominators and no negative time", "x", 1.0)
    if paired:
        bad = _paired_ok(xa, xb)
        if bad:
            return not_meaningful(name, bad, "x", 1.0)
    point, boot = ratio_boot(xa, xb, paired=paired, drift=drift, seed=seed)
    lo, hi = _ci(boot, confidence)
    return classify(name, point, lo, hi, "x", 1.0, xa.size, xb.size, paired, covers=covers_of(paired, drift),
                    loaded=loaded)


def null_controls(nulls: Sequence[tuple], source: str, seed: int = 0) -> tuple[Drift, list[Derived]]:
    """The run's drift between blocks from its null controls, and each null's ratio judged
    against the drift of the others.

    ``nulls``: ``(name, a, b)`` or ``(name, a, b, loaded)`` with the samples of two blocks whose
    true ratio is 1 (the same configuration timed twice; a serial-path or zero-work control)
    and, where a side ran under load, why (such a null cannot be clear). The drift is the
    module docstring's tau from all of them. Each null's own ratio gets the drift estimated
    from the *other* nulls (leave one out), so it is a real check: a null that is clear
    against the others' drift says this run's blocks moved more than the rest show. A run
    with a single null has no other to judge it by: its ratio is shown, inconclusive."""
    logs, kept = [], []
    for name, a, b, *loaded in nulls:
        xa, xb = _arrays(a, b, False)
        if xa.size < 2 or xb.size < 2 or (xa <= 0).any() or (xb <= 0).any():
            continue
        logs.append(math.log(float(np.median(xb) / np.median(xa))))
        kept.append((name, xa, xb, loaded[0] if loaded else ""))

    def tau(idx) -> Drift:
        if not idx:
            return NO_DRIFT
        return Drift(math.sqrt(float(np.mean([logs[i] ** 2 for i in idx]))), len(idx), source)

    everyone = list(range(len(kept)))
    rows = [ratio(xa, xb, name, drift=tau([j for j in everyone if j != i]), loaded=loaded, seed=seed)
            for i, (name, xa, xb, loaded) in enumerate(kept)]
    if len(rows) == 1 and rows[0].status == "clear":
        rows = [dataclasses.replace(rows[0], status="inconclusive",
                                    why="the run's only null control: no other to judge the drift by")]
    return tau(everyone), rows


class RunSamples:
    """A run's checked variants, for the derived quantities of its ``analyze``: each
    comparison pairs by round where the two variants share rounds (:func:`by_round`; by
    position for a run recorded before blocks where the study says they were interleaved),
    else compares two blocks with the run's ``drift``; a side measured under load
    (:func:`workbench.machine_load.variant_notes`) keeps the result from being clear."""

    def __init__(self, rec, drift: Drift = NO_DRIFT):
        notes = dict(zip((v.variant for v in rec.variants), machine_load.variant_notes(rec)))
        self.variants = {v.variant: v for v in rec.variants if v.correct and v.samples_ns}
        self.loaded = {name: notes.get(name, "") for name in self.variants}
        self.drift = drift

    def __contains__(self, name: str) -> bool:
        return name in self.variants

    def samples(self, name: str) -> list[float]:
        return self.variants[name].samples_ns

    def sides(self, a: str, b: str, interleaved: bool = False) -> tuple[np.ndarray, np.ndarray, bool]:
        """(a's values, b's values, paired): per round where they share rounds, else all samples."""
        pair = by_round(self.variants[a], self.variants[b], positional=interleaved)
        if pair is not None:
            return pair[0], pair[1], True
        return np.asarray(self.samples(a), float), np.asarray(self.samples(b), float), False

    def load_note(self, *names: str) -> str:
        return "; ".join(f"{n}: {self.loaded[n]}" for n in names if self.loaded.get(n))

    def twins(self, when: str) -> list[tuple[str, list[float], list[float], str]]:
        """The run's A/A null controls for :func:`null_controls`: each variant that repeats
        another in a later block (``params["twin_of"]``) against it; ``when`` says when the
        twin was timed (``"again, last / first"``)."""
        return [(f"A/A: {v.params['twin_of']}, {when}", self.samples(v.params["twin_of"]), v.samples_ns,
                 self.load_note(v.params["twin_of"], v.variant))
                for v in self.variants.values() if v.params.get("twin_of") in self.variants]

    def ratio(self, a: str, b: str, name: str, interleaved: bool = False, **kw) -> Derived:
        """``b / a`` (:func:`ratio`), paired by round or with the drift."""
        xa, xb, paired = self.sides(a, b, interleaved)
        return ratio(xa, xb, name, paired=paired, drift=self.drift, loaded=self.load_note(a, b), **kw)

    def difference(self, a: str, b: str, name: str, unit: str = "us", interleaved: bool = False, **kw) -> Derived:
        """``b - a`` (:func:`difference`), paired by round or with the drift."""
        xa, xb, paired = self.sides(a, b, interleaved)
        return difference(xa, xb, name, unit, paired=paired, drift=self.drift, loaded=self.load_note(a, b), **kw)


def drift_table(drift: Drift, nulls: Sequence[Derived] = ()) -> pd.DataFrame:
    """The run's drift in one row (``text`` is the line pages and reports print), for the
    ``drift`` table every study's ``analyze`` returns."""
    return pd.DataFrame([{"log_sd": drift.log_sd, "pct": drift.pct, "nulls": drift.nulls, "source": drift.source,
                          "measured": drift.measured, "text": drift.text(),
                          "nulls_clear": sum(d.status == "clear" for d in nulls)}])


def level_tables(drift: Drift, nulls: Sequence[Derived]) -> dict[str, pd.DataFrame]:
    """The ``drift`` table every study's ``analyze`` returns, and its ``nulls`` table (each
    null control's ratio) where the run has null controls."""
    return {"drift": drift_table(drift, nulls)} | ({"nulls": derived_table(nulls)} if nulls else {})


def drift_of(tbls: Mapping[str, pd.DataFrame] | None) -> Drift:
    """The run's :class:`Drift` from its ``drift`` table (not measured without one)."""
    t = (tbls or {}).get("drift")
    if t is None or not len(t):
        return NO_DRIFT
    r = t.iloc[0]
    return Drift(float(r["log_sd"]), int(r["nulls"]), str(r["source"]))


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
    return classify(name, float(np.median(s)), lo, hi, "%", 0.0, xp.size, xp.size, True, 0.0, 100.0, covers=SAMPLES)


def boot_medians(values, seed: int = 0) -> np.ndarray:
    """The bootstrap distribution of ``median(values)`` (:data:`RESAMPLES` draws, fixed seed),
    for a statistic this module has no function for: combine distributions of the same seed
    and pass the result to :func:`from_boot`."""
    x = np.asarray(values, dtype=float).ravel()
    return stats.resampled_medians(x[np.isfinite(x)], RESAMPLES, np.random.default_rng(seed))


def from_boot(name: str, point: float, boot: np.ndarray, unit: str, *, null: float = 0.0, n_a: int = 0,
              n_b: int = 0, paired: bool = False, physical_min: float | None = None, covers: str = WITHIN_BLOCK,
              loaded: str = "", confidence: float = CONFIDENCE) -> Derived:
    """A derived quantity from its point estimate and its bootstrap distribution (e.g. a ratio
    of two differences), classified as every other one; ``covers`` says what the caller put
    into ``boot`` (:func:`drift_factors` adds the drift to a side made of two blocks)."""
    boot = np.asarray(boot, dtype=float)
    if boot.size == 0 or not np.isfinite(boot).all():
        return not_meaningful(name, "its bootstrap distribution is not finite", unit, null)
    lo, hi = _ci(boot, confidence)
    return classify(name, point, lo, hi, unit, null, n_a, n_b, paired, physical_min, covers=covers, loaded=loaded)


def drift_factors(drift: Drift | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per replicate, the factors exp(-delta/2) and exp(+delta/2) by which two sides timed in
    different blocks are multiplied (a composite statistic's version of what :func:`ratio` and
    :func:`difference` do)."""
    return _drift_sides(np.random.default_rng(seed + 1), drift)


def median_of(values, name: str, unit: str = "us", *, physical_min: float | None = None, covers: str = SAMPLES,
              confidence: float = CONFIDENCE, seed: int = 0) -> Derived:
    """The median of per-iteration (or per-round: ``covers=ROUNDS``) values that are already a
    derived quantity (e.g. total - compute of each profiled iteration), with a bootstrap CI;
    ``null`` 0."""
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size < 2:
        return not_meaningful(name, f"too few iterations ({x.size})", unit)
    lo, hi = _ci(stats.resampled_medians(x, RESAMPLES, np.random.default_rng(seed)), confidence)
    return classify(name, float(np.median(x)), lo, hi, unit, 0.0, x.size, x.size, True, physical_min, covers=covers)


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
                   int(get("n_a", 0) or 0), int(get("n_b", 0) or 0), bool(get("paired", False)),
                   get("covers") if isinstance(get("covers"), str) else "")


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
    the same unit (:mod:`workbench.units`: ``1.22 s [1.10, 1.31]``, not ``1,222,847.0 us``)."""
    d = item(d)
    if not math.isfinite(d.point):
        return f"n/a ({d.why or d.status})"
    shown = units.pick([d.point, d.lo, d.hi], d.unit, typical=d.point) if units.kind_of(d.unit) else d.unit
    scale = (lambda v: units.convert(v, d.unit, shown) if math.isfinite(v) else v) if shown != d.unit else (lambda v: v)
    point, lo_v, hi_v, null = scale(d.point), scale(d.lo), scale(d.hi), scale(d.null) if d.null else d.null
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
