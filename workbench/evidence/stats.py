"""Statistics for timing samples: one module, built on scipy.

Every figure the workbench reports is a median with its distribution-free (order-statistic)
confidence interval, the IQR as the noise figure, and a noise warning when IQR/median exceeds 10%. A/B comparisons
give a ratio of medians with its CI, a Mann-Whitney U p-value and a verdict. Across several
runs of one configuration, :func:`across_runs` gives the run-to-run level (a two-level
bootstrap: runs, then samples); :func:`clopper_pearson` bounds a rate of false calls.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..base import units

NOISE_WARN = 0.10  # IQR/median above this is flagged as noisy
MIN_SAMPLES_FOR_VERDICT = 5  # fewer samples than this per side: no statistical verdict
ALPHA = 0.05
_BOOT_RESAMPLES = 2000


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    min: float
    max: float
    mean: float
    q1: float
    q3: float
    iqr: float
    ci_lo: float
    ci_hi: float
    noise: float  # IQR / median
    noisy: bool

    def to_dict(self) -> dict:
        return asdict(self)


def _scipy_stats():
    """scipy.stats on first use: its import takes about half a second, which commands that
    summarise nothing (``list``, ``--help``, the app's first page) should not pay."""
    from scipy import stats

    return stats


def _rng(seed: int | None):
    return np.random.default_rng(seed)


BOOTSTRAP_MAX_N = 1000  # above this, bootstrap medians are drawn exactly (:func:`resampled_medians`)


def median_ci(samples, confidence: float = 0.95, seed: int | None = 0) -> tuple[float, float]:
    """Confidence interval of the median: the distribution-free order-statistic interval
    (:func:`median_interval`), whose coverage is at least ``confidence`` for any continuous
    distribution from 6 samples on (a percentile bootstrap of 5-20 samples covers less than
    it claims). Below 6 no pair of order statistics reaches 95%: the widest, [min, max], is
    returned (:func:`median_interval` says its coverage). ``seed`` is kept for callers that
    passed one: the interval draws nothing."""
    _median, lo, hi, _coverage = median_interval(samples, confidence)
    return lo, hi


@lru_cache(maxsize=512)
def order_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """``(lo, hi, coverage)``: the 0-based ranks of the order statistics that bound the
    median of ``n`` values with at least ``confidence``, and the interval's exact coverage.

    [x_(j), x_(n+1-j)] misses the median when fewer than j values lie below it (or above):
    coverage = 1 - 2 P(Binomial(n, 1/2) <= j - 1); the largest j that keeps it at or above
    ``confidence`` is taken. Where none does (n <= 5 at 95%), the widest interval, [min, max],
    with its coverage 1 - 2^(1-n) (93.75% at n = 5)."""
    if n < 1:
        return 0, 0, 0.0
    cdf = _scipy_stats().binom.cdf(np.arange(n), n, 0.5)
    k = max(int(np.searchsorted(cdf, (1 - confidence) / 2, side="right")) - 1, 0)
    return k, n - 1 - k, float(1 - 2 * cdf[k])


def median_interval(samples, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """``(median, lo, hi, coverage)`` of finite ``samples``: the order-statistic interval of
    :func:`order_ranks` (NaN for no samples)."""
    x = np.asarray(samples, dtype=float).ravel()
    if x.size == 0:
        nan = float("nan")
        return nan, nan, nan, 0.0
    xs = np.sort(x)
    lo, hi, coverage = order_ranks(int(xs.size), confidence)
    return float(np.median(xs)), float(xs[lo]), float(xs[hi]), coverage


def median_spread(samples, confidence: float = 0.95, log: bool = True) -> tuple[float, float]:
    """``(median, se)``: the median of ``samples`` and the standard error of its (log, for
    positive samples with ``log``) sampling distribution, read off the order-statistic
    interval: its width over 2 z, z the normal quantile of the interval's *actual* coverage
    (so the [min, max] of 5 samples counts as the 93.75% interval it is). NaN se below 2
    samples; 0 when the interval is one value (ties)."""
    med, lo, hi, coverage = median_interval(samples, confidence)
    if not coverage > 0 or not math.isfinite(med):
        return med, float("nan")
    z = float(_scipy_stats().norm.ppf((1 + coverage) / 2))
    width = math.log(hi / lo) if log else hi - lo
    return med, width / (2 * z)


def median_draws(samples, size: int, rng, log: bool = True) -> tuple[float, np.ndarray]:
    """``(median, draws)``: ``size`` draws of the sampling distribution of ``median(samples)``,
    normal with :func:`median_spread`'s standard error (log-normal for positive samples with
    ``log``): what a statistic made of several medians combines, vectorised (O(n log n) a
    side, against O(resamples x n) for a bootstrap, and calibrated at small n where a
    bootstrap of the median is too narrow)."""
    x = np.asarray(samples, dtype=float).ravel()
    log = log and bool((x > 0).all())
    med, se = median_spread(x, log=log)
    z = rng.standard_normal(size)
    if log:
        return med, med * np.exp(se * z)
    return med, med + se * z


def median_ci_half_width_rel(samples, confidence: float = 0.95) -> float:
    """Half the width of the median's CI, as a fraction of the median (``--precision``'s measure)."""
    x = np.asarray(samples, dtype=float)
    med = float(np.median(x)) if x.size else float("nan")
    if not med > 0:
        return float("inf")
    lo, hi = median_ci(x, confidence)
    return (hi - lo) / 2 / med


def bootstrap_medians(x: np.ndarray, resamples: int, rng) -> np.ndarray:
    """Medians of ``resamples`` bootstrap resamples of ``x``, drawn exactly without resampling.

    A resample's (lower) median is at most the j-th smallest value x_(j) when at least
    k = (n+1)//2 of its n draws are <= x_(j), and each draw is with probability j/n: so
    P(median <= x_(j)) = P(Binomial(n, j/n) >= k). Inverting that CDF with uniforms gives
    the bootstrap distribution in O(n + resamples log n) instead of sorting resamples x n
    values (seconds and gigabytes for 20k-sample variants). Ties need no care: tied order
    statistics are equal values. For even n this is the lower median, which differs from
    the midpoint by one order statistic, negligible at the sizes this path is used for.
    """
    xs = np.sort(x)
    n = xs.size
    cdf = _scipy_stats().binom.sf((n + 1) // 2 - 1, n, np.arange(1, n + 1) / n)
    idx = np.searchsorted(cdf, rng.random(resamples), side="left")
    return xs[np.minimum(idx, n - 1)]


def summarize(samples, confidence: float = 0.95) -> Summary:
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, False)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    lo, hi = median_ci(x, confidence)
    noise = float((q3 - q1) / med) if med > 0 else float("nan")
    return Summary(
        n=int(x.size), median=float(med), min=float(x.min()), max=float(x.max()),
        mean=float(x.mean()), q1=float(q1), q3=float(q3), iqr=float(q3 - q1),
        ci_lo=lo, ci_hi=hi, noise=noise, noisy=bool(noise > NOISE_WARN),
    )


@dataclass(frozen=True)
class Comparison:
    """B relative to A: ``ratio`` = median(B) / median(A); below 1 means B is faster."""

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    ratio: float
    ratio_ci_lo: float
    ratio_ci_hi: float
    p_value: float
    verdict: str  # "faster" | "slower" | "cannot tell apart" | "too few samples"

    def to_dict(self) -> dict:
        return asdict(self)


def compare(a, b, alpha: float = ALPHA, confidence: float = 0.95, seed: int | None = 0) -> Comparison:
    """A/B comparison of two sample sets (B against the baseline A)."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    ma, mb = float(np.median(xa)), float(np.median(xb))
    ratio = mb / ma if ma > 0 else float("nan")
    if xa.size < MIN_SAMPLES_FOR_VERDICT or xb.size < MIN_SAMPLES_FOR_VERDICT:
        return Comparison(int(xa.size), int(xb.size), ma, mb, ratio, float("nan"), float("nan"),
                          float("nan"), "too few samples")
    tail = (1 - confidence) / 2
    lo, hi = (float(q) for q in np.quantile(ratio_bootstrap(xa, xb, seed=seed), [tail, 1 - tail]))
    p = float(_scipy_stats().mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    # Both the rank test and the ratio CI must agree before we call a difference.
    if p < alpha and hi < 1.0:
        verdict = "faster"
    elif p < alpha and lo > 1.0:
        verdict = "slower"
    else:
        verdict = "cannot tell apart"
    return Comparison(int(xa.size), int(xb.size), ma, mb, ratio, lo, hi, p, verdict)


def resampled_medians(x, resamples: int, rng) -> np.ndarray:
    """Percentile-bootstrap replicates of ``median(x)``: resampled directly up to
    :data:`BOOTSTRAP_MAX_N` samples, drawn from the exact distribution of the (lower) median
    above (:func:`bootstrap_medians`)."""
    x = np.asarray(x, dtype=float)
    if x.size > BOOTSTRAP_MAX_N:
        return bootstrap_medians(x, resamples, rng)
    return np.median(x[rng.integers(0, x.size, (resamples, x.size))], axis=1)


def ratio_bootstrap(a, b, resamples: int = _BOOT_RESAMPLES, seed: int | None = 0) -> np.ndarray:
    """Bootstrap replicates of median(b) / median(a), both sides resampled independently:
    the distribution a ratio's percentile CI (and a summary over variants) is read from."""
    rng = _rng(seed)
    return resampled_medians(b, resamples, rng) / resampled_medians(a, resamples, rng)


def mean_median_diff_ci(pairs, confidence: float = 0.95, resamples: int = _BOOT_RESAMPLES,
                        seed: int | None = 0) -> tuple[float, float, float]:
    """Mean over pairs of median(b) - median(a), with a bootstrap percentile CI.

    Each pair is (baseline samples, condition samples), e.g. one pair per buffer size in a
    size bucket; both sides of every pair are resampled independently. The difference
    (an added cost in ns) complements :func:`compare`'s ratio when overheads are additive.
    """
    rng = _rng(seed)
    pairs = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in pairs]
    point = float(np.mean([np.median(b) - np.median(a) for a, b in pairs]))
    boot = np.zeros(resamples)
    for a, b in pairs:
        ia = rng.integers(0, len(a), (resamples, len(a)))
        ib = rng.integers(0, len(b), (resamples, len(b)))
        boot += np.median(b[ib], axis=1) - np.median(a[ia], axis=1)
    boot /= len(pairs)
    alpha = (1 - confidence) / 2
    return point, float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))


# --- across runs: the run-to-run level ------------------------------------------------------------

def two_level_replicates(per_run: Sequence[np.ndarray], resamples: int = _BOOT_RESAMPLES,
                         seed: int | None = 0) -> np.ndarray:
    """Two-level bootstrap replicates of the mean over runs of a per-run figure (Kalibera and
    Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013: resample the top level, then
    within each drawn unit): each replicate draws k runs with replacement, then for each drawn
    run one replicate of its own within-run bootstrap (``per_run[i]``, the distribution of run
    i's figure: samples, or rounds and drift), and averages them. The run-to-run spread enters
    through the first level, the within-run noise through the second."""
    boots = [np.asarray(b, dtype=float).ravel() for b in per_run]
    k = len(boots)
    rng = _rng(seed)
    runs = rng.integers(0, k, (resamples, k))
    picks = np.stack([b[rng.integers(0, b.size, resamples)] for b in boots], axis=1)  # (resamples, k)
    return picks[np.arange(resamples)[:, None], runs].mean(axis=1)


def across_runs(points: Sequence[float], per_run: Sequence[np.ndarray], confidence: float = 0.95,
                seed: int | None = 0) -> tuple[float, float, float]:
    """The mean over runs of a per-run figure and its CI across runs: ``(mean, lo, hi)``.

    The standard error is the two-level bootstrap's (:func:`two_level_replicates`), scaled by
    sqrt(k / (k - 1)) (a bootstrap of k units underestimates the variance of their mean by that
    factor), and the interval is mean +- t(k - 1) x SE: with few runs the run level has only
    k - 1 degrees of freedom, and a percentile interval over 3-10 resampled runs would be far
    too narrow (pyperf reports its worker processes' spread the same way: as what varies
    between processes, not within one). One run has no run-to-run level: NaN bounds."""
    x = np.asarray(points, dtype=float)
    k = x.size
    mean = float(x.mean()) if k else float("nan")
    if k < 2:
        return mean, float("nan"), float("nan")
    reps = two_level_replicates(per_run, seed=seed)
    se = float(reps.std(ddof=1)) * math.sqrt(k / (k - 1))
    half = float(_scipy_stats().t.ppf(1 - (1 - confidence) / 2, k - 1)) * se
    return mean, mean - half, mean + half


def across_hosts(points: Sequence[float], hosts: Sequence[str], confidence: float = 0.95) -> tuple[float, float, float, int]:
    """The mean over hosts of a per-run figure and its CI with the hosts as the units:
    ``(mean, lo, hi, hosts)``. Each host's runs are averaged first (runs of one host are not
    independent draws of the machine population: pooled as if they were, 13 runs of 3 hosts
    with a host effect gave intervals that covered the truth 61-77% of the time), then a
    t interval on hosts - 1 degrees of freedom; each host mean carries its runs' and their
    samples' variation, so the spread of host means covers every level below. One host: NaN
    bounds (no host level)."""
    by: dict[str, list[float]] = {}
    for x, h in zip(points, hosts):
        by.setdefault(str(h), []).append(float(x))
    means = np.array([np.mean(v) for v in by.values()])
    h = means.size
    mean = float(means.mean()) if h else float("nan")
    if h < 2:
        return mean, float("nan"), float("nan"), h
    half = float(_scipy_stats().t.ppf(1 - (1 - confidence) / 2, h - 1)) * float(means.std(ddof=1)) / math.sqrt(h)
    return mean, mean - half, mean + half, h


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided CI of a binomial rate: k events in n trials."""
    if n <= 0:
        return float("nan"), float("nan")
    beta = _scipy_stats().beta
    tail = (1 - confidence) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - tail, k + 1, n - k))
    return lo, hi


def fmt_ns(ns: float) -> str:
    """Human time with a unit chosen for the magnitude: 812 ns, 15.2 us, 1.87 ms, 3.4 s
    (:func:`workbench.base.units.fmt`)."""
    return units.fmt(ns, "ns")


def adjust_pvalues(p, method: str = "holm") -> np.ndarray:
    """P-values adjusted for testing many hypotheses at once (one per span name, per variant...).

    ``method="holm"``: Holm's step-down correction, which bounds the chance of *any* false
    verdict (family-wise error) without assuming the tests are independent. ``"bh"``:
    Benjamini-Hochberg, which bounds the expected *share* of false verdicts among the
    reported ones (false discovery rate; assumes independent or positively dependent
    tests) and keeps more power when many names differ. NaN p-values (no test made) stay
    NaN and do not count as tests. Compare the result with the unadjusted alpha.
    """
    x = np.asarray(p, dtype=float)
    out = np.full(x.shape, np.nan)
    ok = ~np.isnan(x)
    v = x[ok]
    m = v.size
    if m == 0:
        return out
    order = np.argsort(v, kind="stable")
    ranked = v[order]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum((m - np.arange(m)) * ranked, 1.0))
    elif method == "bh":
        adj = np.minimum.accumulate((m / np.arange(m, 0, -1) * ranked[::-1]))[::-1]
        adj = np.minimum(adj, 1.0)
    else:
        raise ValueError(f"unknown p-value adjustment '{method}' (use 'holm' or 'bh')")
    back = np.empty(m)
    back[order] = adj
    out[ok] = back
    return out
