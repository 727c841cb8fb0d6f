"""Derived quantities: coverage and status rules as properties across seeds, impossible values
flagged, large-n fast path, and the formatting (never a bare point, never "0.00x")."""

import numpy as np
import pytest

from workbench import derived


def test_difference_ci_covers_a_known_shift_across_seeds():
    """The 95% CI of median(b) - median(a) holds the true shift in most of 200 seeded runs (a
    percentile bootstrap of a median at n=30 is a little under its nominal coverage)."""
    covered = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        a = 100 + rng.normal(0, 5, 30)
        b = 103 + rng.normal(0, 5, 30)  # true difference of medians: 3
        d = derived.difference(a, b, "shift", "us", seed=seed)
        covered += d.lo <= 3 <= d.hi
    assert covered >= 0.88 * 200, covered


def test_paired_difference_and_ratio_cover_their_truth():
    covered_d = covered_r = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        drift = rng.normal(0, 20, 25)  # shared by both sides of a round: pairing removes it
        a = 100 + drift + rng.normal(0, 1, 25)
        b = a + 2 + rng.normal(0, 1, 25)
        d = derived.difference(a, b, "paired", "us", paired=True, seed=seed)
        covered_d += d.lo <= 2 <= d.hi and d.clear
        r = derived.ratio(a, 1.5 * a * (1 + rng.normal(0, 0.01, 25)), "paired ratio", paired=True, seed=seed)
        covered_r += r.lo <= 1.5 <= r.hi and r.clear
    assert covered_d >= 88 and covered_r >= 88, (covered_d, covered_r)


def test_status_rules_across_seeds():
    """No effect: inconclusive in about 95% of seeds (never "clear" more than a few times); a
    large effect: clear every time; a ratio of identical distributions: inconclusive."""
    false_clear = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        a, b = rng.normal(50, 3, 40), rng.normal(50, 3, 40)
        d = derived.difference(a, b, "none", "us", seed=seed)
        assert d.status in ("clear", "inconclusive")
        false_clear += d.clear
        assert derived.difference(a, b + 10, "big", "us", seed=seed).clear
        assert derived.ratio(a, 2 * b, "twice", seed=seed).clear
    assert false_clear <= 12, false_clear


def test_impossible_values_are_flagged_with_the_reason():
    rng = np.random.default_rng(1)
    a = 100 + rng.normal(0, 1, 40)
    neg = derived.difference(a, a - 5, "a cost", "us", paired=True, physical_min=0.0)
    assert neg.status == "not meaningful" and "impossible" in neg.why
    assert "not meaningful" in derived.fmt_derived(neg)
    # a negative point whose CI reaches 0 is consistent with no cost: inconclusive, not impossible
    near = derived.difference(a, a - 0.05 + rng.normal(0, 1, 40), "a small cost", "us", paired=True, physical_min=0.0)
    assert near.status == "inconclusive"
    bad_share = derived.share(a + 1, a, "compute share")  # the part exceeds its total
    assert bad_share.status == "not meaningful" and "exceeds its total" in bad_share.why
    ok_share = derived.share(0.2 * a, a, "compute share")
    assert ok_share.clear and ok_share.unit == "%" and ok_share.point == pytest.approx(20)


def test_too_few_samples_and_other_instruments_are_never_clear():
    few = derived.difference([1, 2, 3], [10, 11, 12], "few", "us")
    assert few.status == "inconclusive" and "too few" in few.why
    assert derived.difference([1], [2, 3], "one", "us").status == "not meaningful"
    assert derived.difference([1, 2, 3], [1, 2], "pairs", "us", paired=True).status == "not meaningful"
    other = derived.not_meaningful("profile compute - timing-run total", "compute and total from different runs")
    assert "different runs" in derived.fmt_derived(other)


def test_large_samples_use_the_exact_median_distribution():
    rng = np.random.default_rng(0)
    a, b = rng.exponential(100, 50_000), 5 + rng.exponential(100, 50_000)
    d = derived.difference(a, b, "big n", "ns")
    assert d.n_a == 50_000 and d.lo < d.point < d.hi and d.hi - d.lo < 5
    r = derived.ratio(a, b, "big n ratio")
    assert r.lo < r.point < r.hi


def test_formatting_has_enough_digits():
    rng = np.random.default_rng(0)
    a = 1000 + rng.normal(0, 10, 40)
    tiny = derived.ratio(a, a / 250, "tiny")
    text = derived.fmt_derived(tiny)
    assert "0.00x" not in text and text.startswith("0.004") and "(1/250)" in text
    close = derived.ratio(a, a * 1.002, "close", paired=True)
    assert close.clear and "1.00x [1.00, 1.00]" not in derived.fmt_derived(close)
    assert derived.fmt_derived(derived.difference(a, a + 1.2, "d", "us", paired=True)).endswith("(clear)")
    # a clear CI whose end rounds onto the null gets another digit (ag-gemm's torch-fused, 2026-11-27)
    edge = derived.Derived("edge", 0.9102, 0.7979, 0.9978, "x", 1.0, "clear", n_a=15, n_b=15, paired=True)
    assert derived.fmt_derived(edge) == "0.910x [0.798, 0.998] (clear)"
    straddles = derived.Derived("straddles", 0.91, 0.80, 1.02, "x", 1.0, "inconclusive", n_a=15, n_b=15)
    assert derived.fmt_derived(straddles) == "0.91x [0.80, 1.02] (inconclusive)"  # no digit it does not need


def test_derived_table_round_trips_rows_and_headline_states_only_clear_results():
    rng = np.random.default_rng(3)
    a = 100 + rng.normal(0, 2, 30)
    items = [derived.difference(a, a + 20, "clear gain", "us").row(table="t"),
             derived.difference(a, a + rng.normal(0, 2, 30), "vague gain", "us"),
             derived.difference(a, a - 30, "impossible cost", "us", physical_min=0.0)]
    df = derived.derived_table(items)
    assert list(df.columns[:len(derived.COLUMNS)]) == derived.COLUMNS and "table" in df
    assert [derived.item(r).status for r in df.to_dict("records")] == ["clear", "inconclusive", "not meaningful"]
    head = derived.headline(df)
    assert "clear gain" in head and "vague gain" not in head and "1 derived figure(s) inconclusive" in head
    assert "impossible cost (physically impossible" in head
    assert derived.derived_table([]).columns.tolist() == derived.COLUMNS
