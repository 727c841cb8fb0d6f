"""Statistics: properties across seeds, not single magic numbers."""

import numpy as np
import pytest

from workbench.evidence import stats


@pytest.mark.parametrize("seed", range(5))
def test_median_ci_contains_median_and_is_ordered(seed):
    x = np.random.default_rng(seed).lognormal(3, 0.3, size=50)
    s = stats.summarize(x)
    assert s.ci_lo <= s.median <= s.ci_hi
    assert s.min <= s.q1 <= s.median <= s.q3 <= s.max
    assert s.iqr == pytest.approx(s.q3 - s.q1)


def test_ci_narrows_with_more_samples():
    rng = np.random.default_rng(1)
    small = stats.summarize(rng.normal(100, 10, 20))
    large = stats.summarize(rng.normal(100, 10, 2000))
    assert (large.ci_hi - large.ci_lo) < (small.ci_hi - small.ci_lo)


def test_noise_warning_threshold():
    quiet = stats.summarize([100, 101, 99, 100, 102, 98, 100])
    noisy = stats.summarize([100, 150, 60, 120, 80, 140, 70])
    assert not quiet.noisy and noisy.noisy


@pytest.mark.parametrize("seed", range(4))
def test_compare_detects_a_real_speedup(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(100, 3, 30)
    b = rng.normal(80, 3, 30)
    c = stats.compare(a, b)
    assert c.verdict == "faster"
    assert c.ratio_ci_lo <= c.ratio <= c.ratio_ci_hi < 1
    assert stats.compare(b, a).verdict == "slower"


def test_compare_refuses_verdict_on_too_few_samples():
    assert stats.compare([1, 2, 3], [4, 5, 6]).verdict == "too few samples"


def test_fmt_ns_units():
    assert stats.fmt_ns(812) == "812 ns"
    assert stats.fmt_ns(15_200) == "15.2 us"
    assert stats.fmt_ns(1_870_000) == "1.87 ms"
    assert stats.fmt_ns(float("nan")) == "n/a"


@pytest.mark.parametrize("seed", range(3))
def test_mean_median_diff_ci_recovers_a_shift(seed):
    rng = np.random.default_rng(seed)
    pairs = [(rng.normal(100, 1, 50), rng.normal(105, 1, 50)) for _ in range(3)]
    d, lo, hi = stats.mean_median_diff_ci(pairs)
    assert lo < 5 < hi and abs(d - 5) < 0.5
    d0, lo0, hi0 = stats.mean_median_diff_ci([(a, a) for a, _ in pairs])
    assert d0 == 0 and lo0 <= 0 <= hi0


def test_large_samples_use_the_order_statistic_interval_with_bootstrap_like_width():
    rng = np.random.default_rng(3)
    big = rng.lognormal(3, 0.3, 20_000)
    lo, hi = stats.median_ci(big)
    assert lo < np.median(big) < hi
    sub = stats.median_ci(big[:1000])
    width_small = sub[1] - sub[0]
    assert (hi - lo) < width_small  # 20x more samples: a narrower interval
    boot = stats._scipy_stats().bootstrap((big,), np.median, n_resamples=300, method="percentile",
                               random_state=np.random.default_rng(0), vectorized=True, axis=-1)
    # The exact interval and a bootstrap on the same data agree in width within 30%.
    bw = boot.confidence_interval.high - boot.confidence_interval.low
    assert 0.7 < (hi - lo) / bw < 1.3


def test_large_sample_median_ci_is_the_binomial_order_statistic_interval():
    """Above BOOTSTRAP_MAX_N: the order statistics at the binomial(n, 1/2) ranks of the
    confidence level (scipy's quantile_test), not a resampled interval."""
    x = np.random.default_rng(5).lognormal(0, 1, 5_001)
    xs = np.sort(x)
    binom = stats._scipy_stats().binom
    lo_rank, hi_rank = int(binom.ppf(0.025, x.size, 0.5)), int(binom.isf(0.025, x.size, 0.5))
    assert stats.median_ci(x) == (xs[lo_rank - 1], xs[hi_rank])
    assert stats.median_ci(x, confidence=0.5)[1] - stats.median_ci(x, confidence=0.5)[0] < xs[hi_rank] - xs[lo_rank - 1]


@pytest.mark.parametrize("seed", range(3))
def test_large_sample_compare_matches_a_resampling_bootstrap(seed):
    """Above BOOTSTRAP_MAX_N the ratio CI comes from exactly drawn bootstrap medians; it must
    agree with scipy's resampling bootstrap (which costs seconds at 20k samples)."""
    rng = np.random.default_rng(seed)
    a = rng.lognormal(3, 0.3, 3001)
    b = rng.lognormal(3, 0.3, 2500) * 1.08
    c = stats.compare(a, b)
    ref = stats._scipy_stats().bootstrap((a, b), lambda s_a, s_b, axis=-1: np.median(s_b, axis=axis) / np.median(s_a, axis=axis),
                              n_resamples=1000, method="percentile", random_state=np.random.default_rng(seed),
                              vectorized=True, axis=-1).confidence_interval
    width = ref.high - ref.low
    assert c.ratio_ci_lo <= c.ratio <= c.ratio_ci_hi
    assert abs(c.ratio_ci_lo - ref.low) < 0.15 * width and abs(c.ratio_ci_hi - ref.high) < 0.15 * width
    assert c.verdict == "slower"


def test_compare_same_distribution_rarely_calls_a_difference():
    """The false-call rate across many same-distribution pairs stays near alpha (5%), not just
    on a few seeds: a verdict that fires on noise would mislead every A/B."""
    rng = np.random.default_rng(100)
    verdicts = [stats.compare(rng.normal(100, 5, 40), rng.normal(100, 5, 40)).verdict for _ in range(40)]
    assert sum(v != "cannot tell apart" for v in verdicts) <= 4


def test_holm_and_bh_adjust_as_published():
    """Holm: sorted p times (m - rank), running maximum; BH: p times m / rank, running
    minimum from the top; NaN (no test) stays NaN and does not count."""
    p = [0.01, 0.04, 0.03, float("nan"), 0.005]
    holm = stats.adjust_pvalues(p, "holm")
    assert np.allclose(holm[[4, 0, 2, 1]], [0.02, 0.03, 0.06, 0.06]) and np.isnan(holm[3])
    bh = stats.adjust_pvalues(p, "bh")
    assert np.allclose(bh[[4, 0, 2, 1]], [0.02, 0.02, 0.04, 0.04])
