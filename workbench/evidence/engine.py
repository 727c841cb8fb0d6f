"""The comparison engine: a study declares what it compares; this module alone computes every
derived number, its CI and its status.

**What a study declares** (in its seam, ``studies/<id>/__init__.py``; tritonbench's model):

- ``METRICS``: what each variant's samples measure, with units (:class:`Metric`: ``time`` in
  ns by default; ``bandwidth``, ``throughput``, ``ratio``, ``percent``, ``count`` computed
  from a sample and the variant's parameters, e.g. bytes / time);
- ``BASELINES``: which variant each is compared with (:class:`Baseline`: the baseline's
  parameters, the parameters a compared variant shares with it, ratio or difference, on which
  metric); the engine pairs by round where both were timed in the same rounds;
- ``NULLS``: the null controls (:class:`Nulls`: A/A twins, the same configuration timed again
  in a block of its own, interleaved with the compared variants; pairs of blocks whose true
  ratio is 1 that the study names);
- ``TARGETS``: figures the study holds a quantity to (:class:`Target`);
- ``SEED_CLAIMS``: the seed's findings as tests (:mod:`workbench.evidence.claims`: the quantity, the
  direction and, where the seed gives one, the magnitude with its tolerance).

**What the engine builds from them**: :class:`Evidence` is one run as evidence. It knows
which variants were measured under load (:mod:`workbench.base.machine_load`), which were timed in
the same rounds, and the run's drift between blocks (from the declared nulls,
:func:`estimate_drift`); every derived row of a study comes from its methods (``ratio``,
``difference``, ``gain``, ``share``, ``median``, ``combine``, ``transform``, ``bracket``,
``rate``, ``compare`` for the declared baselines), and :func:`judge` gives each its status.
A study names what to compare (variants, or :meth:`Evidence.series` of values it read off a
profile or its outputs, with the variants they came from); it never passes a load note, a
drift or a pairing, so it cannot leave one out. :mod:`workbench.evidence.verdict` writes the verdict
sentence from the rows and :mod:`workbench.evidence.claims` judges the claims; ``charts`` read the
chart-ready table of :meth:`Evidence.metric_table`.

**The rules** (:func:`judge`; ``docs/reading-a-run.md`` states them for users):

1. a CI covers its levels and says so (``covers``, :mod:`workbench.evidence.derived`): per-round
   values when both sides share rounds; each side's samples plus the run's drift when they
   were timed in different blocks; one block's samples otherwise;
2. nothing is clear from fewer than :data:`MIN_SAMPLES` samples (rounds, runs, hosts) a side;
3. a comparison of two blocks in a run whose drift was not measured is at most inconclusive
   ("drift not measured"): unless paired by round, a difference between blocks can be the
   machine moving between them;
4. a figure with a side measured under load is at most inconclusive; a figure the engine
   cannot attribute to variants takes the run's load (:func:`workbench.base.machine_load.run_note`);
5. a CI must reach its nominal 95%: a median's is the distribution-free order-statistic
   interval (exact coverage, :func:`workbench.evidence.stats.order_ranks`), which needs 6 values; 5
   paired rounds (the fewest the rules allow) get the t interval of their mean instead (on
   the log scale for a ratio), and a median of 5 values of one block is inconclusive.

**The intervals.** A median of paired per-round values (ratio b_r / a_r, difference
b_r - a_r) or of one block's values: its order-statistic interval (5 rounds: the t interval of
their mean, geometric for a ratio). Two sides from different
blocks: each side's median is drawn from a normal on the log scale whose spread is read off
its order-statistic interval at that interval's actual coverage
(:func:`workbench.evidence.stats.median_draws`: calibrated at 5-20 samples, where a bootstrap of the
median is too narrow, and O(n log n)), times exp(delta), delta the run's drift between two
blocks (tau x t_k, :class:`workbench.evidence.derived.Drift`); the CI is the 2.5-97.5% percentiles of
:data:`DRAWS` draws. Draws are seeded by the quantity's name, so one record always gives
one table. A figure built from other figures (:meth:`Evidence.combine`) combines their draws
and inherits the weakest level, the fewest samples and every caveat of its parts.

**The drift** (:func:`estimate_drift`): the log ratio of each null control's medians; nulls
that share a block are one unit (their block effect is one draw, counted once); tau is the
root mean square over units, and each null is judged against the tau of the *other* units:
a null whose CI excludes 1 there is reported (the verdict names it first), and one beyond
the bound of all the run's nulls together (:func:`_beyond_family`, against two or more: a real
effect named as a null) is left out of the drift; against one, which of the two moved cannot
be told, and both stay. Declared kinds (:attr:`Nulls.kind`) judge a null only against nulls of
its kind, and give a comparison of two variants of one kind that kind's drift. A quantity a claim tests is never a null
(``tests/workbench/test_engine_boundary.py`` checks every study's declarations).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..base import machine_load
from . import stats
from .derived import BLOCKS, CONFIDENCE, COUNT, MIN_SAMPLES, NO_DRIFT, ROUNDS, SAMPLES, WITHIN_BLOCK, Derived, Drift, derived_table, fmt_derived, item, too_few

#: draws of a statistic made of several medians (its CI is their 2.5-97.5% percentiles)
DRAWS = 2000
#: metric kinds and their default units and direction (True: higher is better)
KINDS = {"time": ("ns", False), "bandwidth": ("GB/s", True), "throughput": ("/s", True), "ratio": ("x", None),
         "percent": ("%", None), "count": ("", None)}
DRIFT_NOT_MEASURED = ("drift not measured: the run has no usable null control, so a difference between two blocks "
                      "may be the machine moving between them")
_NAN = float("nan")


# --- declarations -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metric:
    """What a variant's samples measure: ``time`` (the samples, ns) or a figure computed from
    each sample and the variant's parameters (``per_sample(params, samples_ns)``, in ``unit``)."""

    name: str
    kind: str = "time"
    unit: str = ""
    per_sample: Callable[[dict, np.ndarray], np.ndarray] | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name}: unknown kind {self.kind!r} (one of {', '.join(KINDS)})")
        if not self.unit:
            object.__setattr__(self, "unit", KINDS[self.kind][0])

    def values(self, v) -> np.ndarray:
        x = np.asarray(v.samples_ns, dtype=float)
        return x if self.per_sample is None else np.asarray(self.per_sample(v.params, x), dtype=float)


TIME = Metric("time")


@dataclass(frozen=True)
class Baseline:
    """Each checked variant whose parameters match ``only`` (param -> allowed values) compared
    with its baseline: the variant whose parameters include ``base`` and equal the compared
    one's on ``match``. ``stat``: ``"ratio"`` (variant / baseline), ``"difference"`` (variant -
    baseline, in ``unit``; time in us by default) or ``"gain"`` (% less time than the
    baseline). ``name`` is formatted with the variant's parameters, ``variant`` and ``base``."""

    base: Mapping[str, Any]
    match: tuple[str, ...] = ()
    only: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    stat: str = "ratio"
    metric: str = "time"
    unit: str = ""
    name: str = "{variant} / {base}"
    physical_min: float | None = None
    table: str = "derived"

    def __post_init__(self):
        if self.stat not in ("ratio", "difference", "gain"):
            raise ValueError(f"baseline stat {self.stat!r}: ratio, difference or gain")


@dataclass(frozen=True)
class Nulls:
    """A study's null controls: ``twins`` (the when-text of its A/A twins, variants whose
    ``params["twin_of"]`` names the variant they repeat, e.g. "again (reverse order) / first";
    "" for none) and ``pairs(ev)`` for other pairs of blocks whose true ratio is 1: ``(label,
    a, b)`` with a and b variant names or :class:`Series`. ``source`` says in words what they
    are (the drift line prints it)."""

    twins: str = "again / first"
    pairs: Callable[["Evidence"], Sequence[tuple[str, Any, Any]]] | None = None
    source: str = "A/A twins (aa: variants)"
    #: what kind of quantity a variant's time is, from its params (None: one kind): quantities
    #: of different kinds drift apart by different amounts (a thread's fork/join between blocks
    #: moves by tens of percent where a clock read moves by one), so a null is judged only
    #: against nulls of its kind, and a comparison of two variants of one kind takes that
    #: kind's drift where it has 2 or more nulls (else the run's)
    kind: Callable[[Mapping[str, Any]], str] | None = None


@dataclass(frozen=True)
class Target:
    """A figure a quantity is held to: met when its CI lies at or above ``at_least`` (or at
    or below ``at_most``), missed when it lies wholly on the other side (:func:`target`)."""

    name: str
    at_least: float | None = None
    at_most: float | None = None
    why: str = ""


def target(d: Derived | Mapping[str, Any] | None, at_least: float | None = None, at_most: float | None = None) -> str:
    """A quantity against its target: ``met``, ``MISSED``, ``inconclusive`` (the CI straddles
    it, or a caveat keeps the CI from deciding: under load, too few, drift not measured) or
    ``not measured``."""
    if d is None:
        return "not measured"
    d = item(d)
    if not (math.isfinite(d.lo) and math.isfinite(d.hi)):
        return "not measured"
    limit = at_least if at_least is not None else at_most
    above, below = d.lo >= limit, d.hi < limit
    if at_most is not None:
        above, below = d.hi <= limit, d.lo > limit
    if not (above or below) or d.caveat:
        return "inconclusive"
    return "met" if above else "MISSED"


# --- the rules ---------------------------------------------------------------------------------

def judge(name: str, point: float, lo: float, hi: float, *, unit: str, null: float, n_a: int, n_b: int,
          paired: bool, covers: str, caveats: Iterable[str] = (), physical_min: float | None = None,
          physical_max: float | None = None, sources: Iterable[str] = ()) -> Derived:
    """A quantity's status from its point, CI and what limits it (the module docstring's rules)."""
    srcs = "|".join(dict.fromkeys(s for s in sources if s))
    limits = [too_few(min(n_a, n_b), covers)] if min(n_a, n_b) < MIN_SAMPLES else []
    if covers == WITHIN_BLOCK:
        limits.append(DRIFT_NOT_MEASURED)
    limits += [c for c in caveats if c]
    caveat = "; ".join(dict.fromkeys(limits))
    base = dict(n_a=int(n_a), n_b=int(n_b), paired=bool(paired), covers=covers, caveat=caveat, sources=srcs)
    if not all(math.isfinite(x) for x in (point, lo, hi)):
        return Derived(name, _NAN, _NAN, _NAN, unit, null, "not meaningful", "missing or non-finite samples", **base)
    unit_text = "" if unit in ("", "x", "%") else f" {unit}"
    if physical_min is not None and hi < physical_min:
        return Derived(name, point, lo, hi, unit, null, "not meaningful", f"physically impossible: the whole CI "
                       f"[{lo:.3g}, {hi:.3g}]{unit_text} is below {physical_min:g}", **base)
    if physical_max is not None and lo > physical_max:
        return Derived(name, point, lo, hi, unit, null, "not meaningful", f"physically impossible: the whole CI "
                       f"[{lo:.3g}, {hi:.3g}]{unit_text} is above {physical_max:g}", **base)
    if lo <= null <= hi:
        why = f"the CI includes {null:g}" + (f"; {caveat}" if caveat else "")
        return Derived(name, point, lo, hi, unit, null, "inconclusive", why, **base)
    if caveat:
        return Derived(name, point, lo, hi, unit, null, "inconclusive", caveat, **base)
    return Derived(name, point, lo, hi, unit, null, "clear", "", **base)


def not_meaningful(name: str, why: str, unit: str = "", null: float = 0.0, sources: Iterable[str] = ()) -> Derived:
    """A quantity that must not be stated, with the reason (different instruments or runs, a
    failed check, no baseline): shown as ``n/a (why)``."""
    return Derived(name, _NAN, _NAN, _NAN, unit, null, "not meaningful", why,
                   sources="|".join(dict.fromkeys(s for s in sources if s)))


def _quantiles(draws: np.ndarray) -> tuple[float, float]:
    tail = (1 - CONFIDENCE) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return float(lo), float(hi)


def _rng(name: str, salt: int = 0) -> np.random.Generator:
    """A generator seeded by the quantity's name: the same record always gives the same table."""
    return np.random.default_rng([zlib.crc32(name.encode()), salt])


def order_caveat(n: int, per: str) -> str:
    """Why a median of ``n`` values has no 95% interval ("" when it has one)."""
    coverage = stats.order_ranks(n, CONFIDENCE)[2]
    if coverage >= CONFIDENCE:
        return ""
    return (f"{n} {per}: the widest interval of their median covers {coverage:.2%}, short of 95% (a "
            "distribution-free 95% interval needs at least 6)")


# --- sides --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Series:
    """Values a study read off something other than a variant's samples (a profile's
    iterations, a run's phases), with where they were timed: ``block`` (one capture, one set of
    processes), ``rounds`` (the round of each value, where they pair with another series by
    round or iteration) and ``sources`` (the variants they belong to: their load applies;
    none: the run's)."""

    values: np.ndarray
    label: str
    block: str
    rounds: tuple[int, ...] | None = None
    sources: tuple[str, ...] = ()
    #: whose rounds ``rounds`` counts: series pair by round only on one timeline (default: the
    #: block's own, so iteration i of one capture never pairs with iteration i of another)
    timeline: str = ""


@dataclass(frozen=True)
class _Side:
    values: np.ndarray
    rounds: np.ndarray | None
    keys: frozenset  # the blocks it was timed in
    sources: tuple[str, ...]
    timeline: str = "run"  # whose rounds ``rounds`` counts
    kind: str = ""  # the declared kind of quantity (:attr:`Nulls.kind`); "" for a Series


def _by_round(a: _Side, b: _Side) -> tuple[np.ndarray, np.ndarray] | None:
    """Each side's median per round, over the rounds both have (None: fewer than 2)."""
    if a.rounds is None or b.rounds is None or a.timeline != b.timeline:
        return None
    common = np.intersect1d(a.rounds, b.rounds)
    if common.size < 2:
        return None
    if np.array_equal(a.rounds, common) and np.array_equal(b.rounds, common):  # one value a round, in order
        return a.values, b.values
    return (np.array([np.median(a.values[a.rounds == r]) for r in common]),
            np.array([np.median(b.values[b.rounds == r]) for r in common]))


# --- the drift ------------------------------------------------------------------------------------

def _components(keys: Sequence[frozenset]) -> list[int]:
    """The connected components of nulls over the blocks they share (union-find)."""
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[Any, int] = {}
    for i, ks in enumerate(keys):
        for k in ks:
            if k in owner:
                parent[root(i)] = root(owner[k])
            owner[k] = i
    return [root(i) for i in range(len(keys))]


def _tau(logs: Sequence[float], keys: Sequence[frozenset], source: str, excluded: int = 0) -> Drift:
    """tau from null controls (log ratios ``logs`` between the blocks ``keys``), counting what
    is independent: nulls joined by shared blocks form a component whose B blocks give B - 1
    independent contrasts (two nulls of the same two blocks count once; k nulls against one
    common block count k); tau^2 is the components' mean squares weighted by those counts."""
    if not logs:
        return Drift(_NAN, 0, source, excluded, 0)
    comp = _components(keys)
    by: dict[int, tuple[list[float], set]] = {}
    for x, k, c in zip(logs, keys, comp):
        sq, blocks = by.setdefault(c, ([], set()))
        sq.append(x * x)
        blocks |= set(k)
    df = {c: max(len(blocks) - 1, 1) for c, (_sq, blocks) in by.items()}
    total = sum(df.values())
    tau2 = sum(df[c] * float(np.mean(sq)) for c, (sq, _b) in by.items()) / total
    return Drift(math.sqrt(tau2), total, source, excluded, len(logs))


def estimate_drift(ev: "Evidence", nulls: Sequence[tuple[str, Any, Any]],
                   source: str) -> tuple[Drift, list[Derived], dict[str, Drift]]:
    """The run's drift between blocks, each kind's (:attr:`Nulls.kind`), and each null's ratio
    judged against the drift of the other nulls of its kind (those that share no block with it,
    where there are any): a null that is clear against 2 or more others is no null in this run;
    its row says so and it is left out of the drift. Against one other, which of the two moved
    cannot be told: both stay. A null with no other of its kind is shown, not judged."""
    kept = []
    for label, a, b in nulls:
        sa, sb = ev.side(a), ev.side(b)
        if sa.values.size < 2 or sb.values.size < 2 or not ((sa.values > 0).all() and (sb.values > 0).all()):
            continue
        kept.append((label, sa, sb, math.log(float(np.median(sb.values) / np.median(sa.values)))))
    if not kept:
        return NO_DRIFT, [], {}
    keys = [sa.keys | sb.keys for _, sa, sb, _ in kept]
    logs = [x for *_, x in kept]
    kinds = [sa.kind for _, sa, _, _ in kept]
    rows, flagged = [], set()
    for i, (label, sa, sb, _) in enumerate(kept):
        mine = [j for j in range(len(kept)) if j != i and kinds[j] == kinds[i]]
        apart = [j for j in mine if not keys[j] & keys[i]]
        others = apart or mine
        if not others:
            rows.append(_only(ev._unpaired("ratio", label, sa, sb, NO_DRIFT, cross=True), len(kept) > 1))
            continue
        drift = _tau([logs[j] for j in others], [keys[j] for j in others], source)
        d = ev._unpaired("ratio", label, sa, sb, drift, cross=True)
        if d.status == "clear" and len(others) >= 2 and _beyond_family(logs[i], drift, len(mine) + 1):
            flagged.add(i)
            d = _flag(d)
        elif d.status == "clear" and len(others) >= 2:
            d = Derived(**{**d.row(), "why": f"beyond its CI against the run's other null controls, not beyond the "
                           f"bound of its {len(mine) + 1} together: kept in the drift"})
        elif d.status == "clear":  # two nulls that disagree: which one moved cannot be told
            d = Derived(**{**d.row(), "status": "inconclusive", "why": "it and the run's other null control of its "
                           "kind disagree beyond its CI: one of the two moved, and two cannot tell which (both "
                           "stay in the drift)"})
        rows.append(d)
    keep = [i for i in range(len(kept)) if i not in flagged]
    by_kind = {k: _tau([logs[i] for i in keep if kinds[i] == k], [keys[i] for i in keep if kinds[i] == k], source,
                       sum(kinds[i] == k for i in flagged))
               for k in dict.fromkeys(kinds)}
    return _tau([logs[i] for i in keep], [keys[i] for i in keep], source, len(flagged)), rows, by_kind


#: the family-wise level at which a null is left out of the drift (:func:`_beyond_family`)
LEAVE_OUT_LEVEL = 0.01


def _beyond_family(x: float, others: Drift, k: int) -> bool:
    """Whether a null's log ratio ``x`` lies beyond what the ``k`` nulls judged together allow
    (Bonferroni at :data:`LEAVE_OUT_LEVEL`: ``|x|`` above tau of the others times t at
    1 - level/2k). Leaving out the largest of true nulls makes the drift too small (leaving out
    any null clear at 95%, 5.9-8.0% of A/A comparisons were clear in the coverage benchmark,
    4 twins); a real effect named as a null (issue 41's 0.61x against a 4.6% drift) lies far
    beyond the bound."""
    if not others.measured:
        return False
    t = float(stats._scipy_stats().t.ppf(1 - LEAVE_OUT_LEVEL / (2 * k), others.nulls))
    return abs(x) > t * others.log_sd


def _flag(d: Derived) -> Derived:
    return Derived(**{**d.row(), "why": "clearly different from the run's other null controls: not a null here, "
                                        "left out of the drift"})


def _only(d: Derived, of_its_kind: bool = False) -> Derived:
    what = "the only null control of its kind in the run" if of_its_kind else "the run's only null control"
    return Derived(**{**d.row(), "status": "inconclusive", "why": f"{what}: no other to judge it by"})


# --- one run as evidence ---------------------------------------------------------------------------

class Evidence:
    """One run as evidence: its checked variants, which ran under load, which share rounds, its
    drift between blocks from the declared ``nulls``; every derived row of the run comes from
    its methods. ``interleaved``: variants of a run recorded before blocks existed pair by
    position (the study interleaved them)."""

    def __init__(self, rec, nulls: Nulls | None = None, *, interleaved: bool = False,
                 metrics: Sequence[Metric] = (TIME,)):
        notes = dict(zip((v.variant for v in rec.variants), machine_load.variant_notes(rec)))
        self.rec = rec
        self.variants = {v.variant: v for v in rec.variants if v.correct and v.samples_ns}
        self.loaded = {name: notes.get(name, "") for name in self.variants}
        self.run_note = machine_load.run_note(rec)
        self.interleaved = interleaved
        self.metrics = {m.name: m for m in (TIME, *metrics)}
        self._draws: dict[int, tuple[Derived, np.ndarray]] = {}
        self.declared = nulls if nulls is not None else Nulls(twins="")
        self.drift, self.null_rows, self.kind_drift = NO_DRIFT, [], {}
        self.drift, self.null_rows, self.kind_drift = estimate_drift(self, self.null_pairs(), self.declared.source)

    def __contains__(self, name: str) -> bool:
        return name in self.variants

    def samples(self, name: str) -> np.ndarray:
        return np.asarray(self.variants[name].samples_ns, dtype=float)

    def null_pairs(self) -> list[tuple[str, Any, Any]]:
        """The declared null controls: the A/A twins, then the study's own pairs."""
        out = []
        if self.declared.twins:
            out += [(f"A/A: {v.params['twin_of']}, {self.declared.twins}", v.params["twin_of"], v.variant)
                    for v in self.variants.values() if v.params.get("twin_of") in self.variants]
        if self.declared.pairs is not None:
            out += [p for p in self.declared.pairs(self) if _present(self, p[1]) and _present(self, p[2])]
        return out

    # sides: a variant (by name) or a Series, as the engine pairs and loads them

    def series(self, values, label: str, block: str, rounds: Sequence[int] | None = None,
               sources: Sequence[str] = (), timeline: str = "") -> Series:
        """Values that are not a variant's samples (see :class:`Series`)."""
        return Series(np.asarray(values, dtype=float).ravel(), label, block,
                      None if rounds is None else tuple(int(r) for r in rounds), tuple(sources), timeline)

    def side(self, x: str | Series, metric: str = "time") -> _Side:
        if isinstance(x, Series):
            rounds = None if x.rounds is None else np.asarray(x.rounds, dtype=np.int64)
            return _Side(x.values, rounds, frozenset({("series", x.block)}), x.sources, x.timeline or x.block)
        v = self.variants[x]
        values = self.metrics[metric].values(v)
        kind = str(self.declared.kind(v.params)) if self.declared.kind is not None else ""
        blocks = getattr(v, "blocks", None)
        if blocks is not None and len(blocks) == len(values):
            b = np.asarray(blocks, dtype=np.int64)
            return _Side(values, b, frozenset(("block", int(k)) for k in np.unique(b)), (x,), kind=kind)
        return _Side(values, None, frozenset({("variant", x)}), (x,), kind=kind)

    def drift_between(self, a: _Side, b: _Side) -> Drift:
        """The drift a comparison of ``a`` and ``b`` takes: their kind's, where both are of one
        kind that has null controls of its own (not measured where every one was left out),
        else the run's."""
        own = self.kind_drift.get(a.kind) if a.kind == b.kind else None
        return own if own is not None else self.drift

    def note(self, sources: Sequence[str]) -> str:
        """Why a figure made of ``sources`` was measured under load ("" when it was not);
        a figure of no variant takes the run's load."""
        if not sources:
            return f"measured under load ({self.run_note})" if self.run_note else ""
        notes = [f"{s}: {self.loaded[s]}" for s in dict.fromkeys(sources) if self.loaded.get(s)]
        return f"measured under load ({'; '.join(notes[:3])}{'; ...' if len(notes) > 3 else ''})" if notes else ""

    def share_rounds(self, a: str | Series, b: str | Series, interleaved: bool = False) -> bool:
        """Whether the engine pairs ``a`` and ``b`` by round (they were timed in the same rounds)."""
        return self._pair(self.side(a), self.side(b), interleaved)[2]

    def _pair(self, a: _Side, b: _Side, interleaved: bool) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        """(a's values, b's values, paired, one block): per-round medians where they share
        rounds (or, for a run recorded before blocks, by position where the study interleaved
        them), else every value; ``one block`` when both were timed in the same block."""
        pair = _by_round(a, b)
        if pair is None and (interleaved or self.interleaved) and a.rounds is None and b.rounds is None \
                and a.values.size == b.values.size:
            pair = (a.values, b.values)
        one_block = a.keys == b.keys and len(a.keys) == 1  # one capture or stretch: no round between them
        if pair is not None:
            return pair[0], pair[1], True, one_block
        return a.values, b.values, False, one_block or bool(a.keys & b.keys)

    # the statistics

    def ratio(self, a: str | Series, b: str | Series, name: str, *, interleaved: bool = False,
              metric: str = "time") -> Derived:
        """``b / a``: the median of per-round ratios where they share rounds, else the ratio of
        medians (with the drift between blocks); below 1 when b takes less."""
        return self._compare("ratio", a, b, name, interleaved=interleaved, metric=metric)

    def difference(self, a: str | Series, b: str | Series, name: str, unit: str = "us", *, scale: float = 1e-3,
                   physical_min: float | None = None, interleaved: bool = False, metric: str = "time") -> Derived:
        """``b - a`` times ``scale`` (ns to us by default), paired as :meth:`ratio`."""
        return self._compare("difference", a, b, name, unit=unit, scale=scale, physical_min=physical_min,
                             interleaved=interleaved, metric=metric)

    def gain(self, a: str | Series, b: str | Series, name: str, *, interleaved: bool = False) -> Derived:
        """``100 x (1 - b / a)`` in %: how much less time b takes than a (null 0)."""
        r = self.ratio(a, b, name, interleaved=interleaved)
        return self.transform(r, lambda x: 100 * (1 - x), name, "%", 0.0)

    def _compare(self, kind: str, a, b, name: str, *, unit: str = "x", scale: float = 1.0,
                 physical_min: float | None = None, interleaved: bool = False, metric: str = "time") -> Derived:
        sa, sb = self.side(a, metric), self.side(b, metric)
        xa, xb, paired, one_block = self._pair(sa, sb, interleaved)
        sources = sa.sources + sb.sources
        unit = "x" if kind == "ratio" else unit
        null = 1.0 if kind == "ratio" else 0.0
        bad = _usable(kind, xa, xb)
        if bad:
            return not_meaningful(name, bad, unit, null, sources)
        if paired:  # per-round values (rounds of two variants), or per-iteration pairs of one block
            per = xb / xa if kind == "ratio" else (xb - xa) * scale
            covers = SAMPLES if one_block else ROUNDS
            if MIN_SAMPLES <= per.size and stats.order_ranks(per.size, CONFIDENCE)[2] < CONFIDENCE:
                return self._few_pairs(name, per, kind, unit, null, covers, sources, physical_min)
            return self.median(self.series(per, name, "paired", sources=sources), name, unit, null=null,
                               physical_min=physical_min, covers=covers,
                               per="iterations" if one_block else "rounds")
        return self._unpaired(kind, name, sa, sb, self.drift_between(sa, sb), cross=not one_block, scale=scale, unit=unit,
                              physical_min=physical_min)

    def _few_pairs(self, name: str, per: np.ndarray, kind: str, unit: str, null: float, covers: str,
                   sources: Sequence[str], physical_min: float | None) -> Derived:
        """Paired values too few for a 95% interval of their median (5: [min, max] covers
        93.75%): the mean (geometric for ratios) with the t interval on the log scale (ratios)
        or the values' own (differences), which has its nominal coverage at 5 rounds where the
        per-round figures are roughly normal (log-normal for ratios). A ratio with a round of 0
        (a numerator under the clock's resolution: the sys time of a short phase) has no log:
        its arithmetic mean, the interval and draws cut at 0, below which no ratio of times lies."""
        log = kind == "ratio" and bool((per > 0).all())
        v = np.log(per) if log else per
        mean, se = float(v.mean()), float(v.std(ddof=1)) / math.sqrt(v.size)
        half = float(stats._scipy_stats().t.ppf(1 - (1 - CONFIDENCE) / 2, v.size - 1)) * se
        draws = mean + se * _rng(name).standard_t(v.size - 1, DRAWS)
        point, lo, hi = (math.exp(x) if log else x for x in (mean, mean - half, mean + half))
        if kind == "ratio" and not log:
            lo, draws = max(lo, 0.0), np.maximum(draws, 0.0)
        return self._keep(judge(name, point, lo, hi, unit=unit, null=null, n_a=v.size, n_b=v.size, paired=True,
                                covers=covers, caveats=[self.note(sources)], physical_min=physical_min,
                                sources=sources), np.exp(draws) if log else draws)

    def _unpaired(self, kind: str, name: str, sa: _Side, sb: _Side, drift: Drift, *, cross: bool,
                  scale: float = 1.0, unit: str = "x", physical_min: float | None = None) -> Derived:
        """Two sides of different blocks (``cross``: with the drift) or of one block."""
        rng = _rng(name)
        log = kind == "ratio" or bool((sa.values > 0).all() and (sb.values > 0).all())
        ma, da = stats.median_draws(sa.values, DRAWS, rng, log=log)
        mb, db = stats.median_draws(sb.values, DRAWS, rng, log=log)
        delta = drift.draws(rng, DRAWS) if cross else np.zeros(DRAWS)
        if kind == "ratio":
            point, draws, null = mb / ma, db / da * np.exp(delta), 1.0
        else:
            point, draws, null = (mb - ma) * scale, (db * np.exp(delta / 2) - da * np.exp(-delta / 2)) * scale, 0.0
        covers = (BLOCKS if drift.measured else WITHIN_BLOCK) if cross else SAMPLES
        lo, hi = _quantiles(draws)
        return self._keep(judge(name, point, lo, hi, unit=unit, null=null, n_a=sa.values.size, n_b=sb.values.size,
                                paired=False, covers=covers, caveats=[self.note(sa.sources + sb.sources)],
                                physical_min=physical_min, sources=sa.sources + sb.sources), draws)

    def median(self, x: str | Series, name: str, unit: str = "us", *, scale: float = 1.0, null: float = 0.0,
               physical_min: float | None = None, physical_max: float | None = None, covers: str = SAMPLES,
               per: str = "values") -> Derived:
        """The median of one side's values (per-iteration figures of one capture, per-round
        values) with its order-statistic interval; ``covers`` says which level they vary at."""
        side = self.side(x)
        v = side.values[np.isfinite(side.values)] * scale
        if v.size < 2:
            return not_meaningful(name, f"too few values ({v.size})", unit, null, side.sources)
        med, lo, hi, _ = stats.median_interval(v, CONFIDENCE)
        _, draws = stats.median_draws(v, DRAWS, _rng(name), log=bool((v > 0).all()))
        return self._keep(judge(name, med, lo, hi, unit=unit, null=null, n_a=v.size, n_b=v.size, paired=True,
                                covers=covers, caveats=[order_caveat(int(v.size), per) if v.size >= MIN_SAMPLES else "",
                                                        self.note(side.sources)],
                                physical_min=physical_min, physical_max=physical_max, sources=side.sources), draws)

    def against_other_blocks(self, x: str | Series, name: str, unit: str = "us", *, scale: float = 1.0) -> Derived:
        """One side's median as it is compared with figures of *other* blocks of the run (a model
        fitted to cost points timed elsewhere in the run): its draws carry the run's drift
        between blocks (covers samples + drift; where the drift was not measured, what is made
        of it is at most inconclusive). An input to :meth:`combine` and :meth:`transform`."""
        side = self.side(x)
        v = side.values[np.isfinite(side.values)] * scale
        if v.size < 2 or not (v > 0).all():
            return not_meaningful(name, f"too few or non-positive values ({v.size})", unit, 0.0, side.sources)
        rng = _rng(name)
        med, draws = stats.median_draws(v, DRAWS, rng)
        draws = draws * np.exp(self.drift.draws(rng, DRAWS))
        lo, hi = _quantiles(draws)
        return self._keep(judge(name, med, lo, hi, unit=unit, null=0.0, n_a=v.size, n_b=v.size, paired=False,
                                covers=BLOCKS if self.drift.measured else WITHIN_BLOCK,
                                caveats=[self.note(side.sources)], sources=side.sources), draws)

    def share(self, part: Series, total: Series, name: str) -> Derived:
        """The median over iterations of ``100 x part_i / total_i`` in % (a part and its total
        from the same iteration of one instrument); a part below 0 or above its total is
        impossible and makes the share not meaningful."""
        sp, st = self.side(part), self.side(total)
        if sp.values.size != st.values.size or sp.values.size < 2:
            return not_meaningful(name, f"needs a part and a total per iteration ({sp.values.size} and "
                                        f"{st.values.size})", "%", 0.0, sp.sources)
        if (st.values <= 0).any():
            return not_meaningful(name, "an iteration with a total of 0 or less", "%", 0.0, sp.sources)
        wrong = int(((sp.values < 0) | (sp.values > st.values)).sum())
        if wrong:
            return not_meaningful(name, f"physically impossible: the part is negative or exceeds its total in {wrong} "
                                        f"of {sp.values.size} iterations", "%", 0.0, sp.sources)
        per = self.series(100.0 * sp.values / st.values, name, part.block, sources=part.sources + total.sources)
        return self.median(per, name, "%", physical_min=0.0, physical_max=100.0, per="iterations")

    # figures made of figures

    def draws(self, d: Derived) -> np.ndarray | None:
        """The draws behind a row this Evidence built (None for one it did not, or without a CI)."""
        kept = self._draws.get(id(d))
        return kept[1] if kept is not None and kept[0] is d else None

    def _keep(self, d: Derived, draws: np.ndarray | None) -> Derived:
        if draws is not None and d.status != "not meaningful":
            self._draws[id(d)] = (d, draws)
        return d

    def combine(self, name: str, fn: Callable[..., Any], parts: Sequence[Derived], unit: str, *, null: float,
                physical_min: float | None = None) -> Derived:
        """A figure made of others (a ratio of two differences, an error against a model):
        ``fn`` applied to their points and, vectorised, to their draws; it inherits the
        weakest level, the fewest samples and every caveat of its parts."""
        bad = [p for p in parts if p.status == "not meaningful" or self.draws(p) is None]
        sources = [s for p in parts for s in p.sources.split("|")]
        if bad:
            return not_meaningful(name, f"{bad[0].name}: {bad[0].why or 'no CI'}", unit, null, sources)
        with np.errstate(divide="ignore", invalid="ignore"):
            point = float(fn(*(p.point for p in parts)))
            draws = np.asarray(fn(*(self.draws(p) for p in parts)), dtype=float)
        if not np.isfinite(draws).all():
            return not_meaningful(name, "its distribution is not finite (a part's CI reaches 0)", unit, null, sources)
        lo, hi = _quantiles(draws)
        return self._keep(judge(name, point, lo, hi, unit=unit, null=null, n_a=min(p.n_a for p in parts),
                                n_b=min(p.n_b for p in parts), paired=all(p.paired for p in parts),
                                covers=weakest(p.covers for p in parts), caveats=[p.caveat for p in parts],
                                physical_min=physical_min, sources=sources), draws)

    def transform(self, d: Derived, fn: Callable[[Any], Any], name: str, unit: str, null: float, *,
                  physical_min: float | None = None, vectorised: bool = True) -> Derived:
        """A monotone function of one figure (a gain from a ratio, a contention factor from a
        time): its point and CI ends mapped (order kept), its draws too where it has them and
        ``fn`` takes arrays (``vectorised``; a model solved per value does not: no draws)."""
        if d.status == "not meaningful":
            return not_meaningful(name, d.why, unit, null, d.sources.split("|"))
        ends = [fn(d.point), fn(d.lo), fn(d.hi)]
        if any(e is None or not math.isfinite(e) for e in ends):
            return not_meaningful(name, "outside the range the function maps", unit, null, d.sources.split("|"))
        draws = self.draws(d) if vectorised else None
        out = judge(name, float(ends[0]), float(min(ends[1:])), float(max(ends[1:])), unit=unit, null=null, n_a=d.n_a,
                    n_b=d.n_b, paired=d.paired, covers=d.covers, caveats=[d.caveat], physical_min=physical_min,
                    sources=d.sources.split("|"))
        return self._keep(out, None if draws is None else np.asarray(fn(draws), dtype=float))

    def model(self, name: str, point: float, draws: Sequence[float] | None, n: int, unit: str = "us") -> Derived:
        """A figure of the study's own model (a predicted time) with the draws of its refits to
        resampled cost points (None: exact, the fits were given), made of ``n`` measured
        samples: an input to :meth:`combine`, not a finding (never clear: it compares nothing)."""
        d = np.full(DRAWS, float(point)) if draws is None else np.resize(np.asarray(draws, dtype=float), DRAWS)
        lo, hi = _quantiles(d)
        return self._keep(Derived(name, float(point), lo, hi, unit, _NAN, "inconclusive", "a model's figure",
                                  n_a=int(n), n_b=int(n), covers=SAMPLES), d)

    def bracket(self, name: str, xs: Sequence[float], ends: Sequence[Derived], unit: str = "",
                x_label: str = "") -> Derived:
        """Between which two measured x a figure crosses its null (a speedup crossing 1): the
        CI is the pair of measured x around the sign change, [x_j, x_j+1], and nothing
        narrower (an interpolation would assume a shape no measurement shows); the point is
        their geometric midpoint, a label. Clear when both ends are clear on their sides.
        ``x_label`` names x in the reasons ("M=")."""
        above = np.array([d.point > d.null for d in ends])
        n = min(min(d.n_a, d.n_b) for d in ends)
        covers = weakest(d.covers for d in ends)
        sources = [s for d in ends for s in d.sources.split("|")]
        if above.all() or not above.any():
            side = f"below {x_label}{xs[0]:g}" if above.all() else f"above {x_label}{xs[-1]:g}"
            return Derived(name, _NAN, _NAN, _NAN, unit, _NAN, "inconclusive",
                           f"no crossing in the measured range: it lies {side}", n, n, True, covers,
                           sources="|".join(dict.fromkeys(sources)))
        j = int(np.flatnonzero(above[:-1] != above[1:])[0])
        a, b = ends[j], ends[j + 1]
        lo, hi = float(xs[j]), float(xs[j + 1])
        unsettled = [f"at {x_label}{x:g} ({fmt_derived(d, status=False)})" for x, d in ((lo, a), (hi, b))
                     if d.status != "clear"]
        caveat = "; ".join(dict.fromkeys(c for c in (a.caveat, b.caveat) if c))
        why = ("" if not unsettled else f"between the measured {x_label}{lo:g} and {x_label}{hi:g}, but the figure "
               + " and ".join(unsettled) + " is not clearly on its side")
        return Derived(name, math.sqrt(lo * hi), lo, hi, unit, _NAN, "inconclusive" if unsettled else "clear",
                       why, n, n, True, covers, caveat, "|".join(dict.fromkeys(sources)))

    # the declared baselines, the chart-ready table and the level tables

    def compare(self, decl: Baseline) -> list[dict]:
        """The rows of one declared baseline (each with ``table``, ``variant``, ``baseline``
        and the compared variant's parameters as columns)."""
        out = []
        for v, base in _baseline_pairs(self, decl):
            fields = {**v.params, "variant": v.variant, "base": base.variant}
            name = decl.name.format(**fields)
            if decl.stat == "ratio":
                d = self.ratio(base.variant, v.variant, name, metric=decl.metric)
            elif decl.stat == "gain":
                d = self.gain(base.variant, v.variant, name)
            else:
                time_like = self.metrics[decl.metric].kind == "time"
                d = self.difference(base.variant, v.variant, name, decl.unit or ("us" if time_like else
                                                                                 self.metrics[decl.metric].unit),
                                    scale=1e-3 if time_like and decl.unit in ("", "us") else 1.0,
                                    physical_min=decl.physical_min, metric=decl.metric)
            out.append(d.row(table=decl.table, variant=v.variant, baseline=base.variant,
                             **{k: v.params.get(k) for k in decl.match}))
        return out

    def metric_table(self, metric: str = "time") -> pd.DataFrame:
        """Chart-ready: one row per checked variant (A/A twins left out) with its parameters,
        the metric's median and its 95% CI in the metric's unit (``median``, ``lo``, ``hi``,
        ``unit``), the sample count and the load note."""
        m = self.metrics[metric]
        rows = []
        for v in self.variants.values():
            if v.params.get("twin_of"):
                continue
            med, lo, hi, _ = stats.median_interval(m.values(v), CONFIDENCE)
            rows.append({**v.params, "variant": v.variant, "metric": m.name, "unit": m.unit, "median": med, "lo": lo,
                         "hi": hi, "samples": len(v.samples_ns), "load_note": self.loaded.get(v.variant, "")})
        return pd.DataFrame(rows)

    def level_tables(self) -> dict[str, pd.DataFrame]:
        """The ``drift`` table every study's ``analyze`` returns, and its ``nulls`` table (each
        null control's ratio) where the run has null controls."""
        clear = sum(r.status == "clear" for r in self.null_rows)
        kinds = self.kind_drift if len(self.kind_drift) > 1 else {}
        drift = pd.DataFrame([_drift_row(self.drift, "", clear)] + [_drift_row(d, k) for k, d in kinds.items()])
        return {"drift": drift} | ({"nulls": derived_table(self.null_rows)} if self.null_rows else {})


def _drift_row(d: Drift, kind: str, nulls_clear: int = 0) -> dict:
    """A row of the ``drift`` table: the run's (``kind`` "", first) or one kind's."""
    return {"kind": kind, "log_sd": d.log_sd, "pct": d.pct, "nulls": d.nulls, "source": d.source,
            "excluded": d.excluded, "controls": d.controls, "measured": d.measured, "text": d.text(),
            "nulls_clear": nulls_clear}


def weakest(levels: Iterable[str]) -> str:
    """The level a figure made of figures at ``levels`` covers: drift not measured if any part
    lacks it, the drift if any part has it, else rounds, else one block's samples."""
    seen = set(levels)
    for level in (WITHIN_BLOCK, BLOCKS, ROUNDS):
        if level in seen:
            return level
    return SAMPLES if not seen - {SAMPLES} else next(iter(seen - {SAMPLES}))


def rate(name: str, events: int, trials: int) -> Derived:
    """A rate of events in trials (failed checks in launches) in %, with its Clopper-Pearson
    95% CI: clear when the CI excludes 0 (events seen). A count, not a timing: no load or drift
    level applies."""
    if trials <= 0:
        return not_meaningful(name, "no trials", "%")
    lo, hi = stats.clopper_pearson(int(events), int(trials), CONFIDENCE)
    return judge(name, 100.0 * events / trials, 100.0 * lo, 100.0 * hi, unit="%", null=0.0, n_a=trials, n_b=trials,
                 paired=True, covers=COUNT)


def _present(ev: Evidence, x: Any) -> bool:
    return isinstance(x, Series) or x in ev.variants


def _usable(kind: str, xa: np.ndarray, xb: np.ndarray) -> str:
    """Why two sides cannot be compared ("" when they can)."""
    if xa.size < 2 or xb.size < 2:
        return f"too few samples ({xa.size} and {xb.size})"
    if not (np.isfinite(xa).all() and np.isfinite(xb).all()):
        return "non-finite samples"
    # a numerator of 0 is a time under the clock's resolution (sys time of a short phase): ratio 0
    if kind == "ratio" and ((xa <= 0).any() or (xb < 0).any()):
        return "a ratio of times needs positive denominators and no negative time"
    if kind == "ratio" and not xb.any():
        return "the numerator is 0 in every round, under its clock's resolution: a ratio of 0 would claim too much"
    return ""


def _matches(params: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    return all(params.get(k) == v for k, v in want.items())


def _baseline_pairs(ev: Evidence, decl: Baseline) -> list[tuple[Any, Any]]:
    """(compared variant, its baseline) for a declared baseline, A/A twins left out."""
    live = [v for v in ev.variants.values() if not v.params.get("twin_of")]
    bases = [v for v in live if _matches(v.params, decl.base)]
    # by identity and by the matched parameters' values: linear in the variants (comparing
    # variants with == and scanning the bases per variant made 4,000 variants take 25 s)
    is_base = {id(b) for b in bases}
    first: dict[tuple, Any] = {}
    for b in bases:
        first.setdefault(_match_key(b.params, decl.match), b)
    out = []
    for v in live:
        if id(v) in is_base or not all(v.params.get(k) in allowed for k, allowed in decl.only.items()):
            continue
        base = first.get(_match_key(v.params, decl.match))
        if base is not None:
            out.append((v, base))
    return out


def _match_key(params: Mapping[str, Any], names: Sequence[str]) -> tuple:
    """The values of ``names`` in ``params`` as one key that compares as ``==`` does (1 and 1.0
    alike; lists, which cannot be hashed, as tuples)."""
    return tuple(tuple(x) if isinstance(x, list) else x for x in (params.get(k) for k in names))
