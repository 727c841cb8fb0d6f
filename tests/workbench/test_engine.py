"""The comparison engine (issue 41): coverage and status rules as properties across seeds,
levels never silent, the load rule, robust drift, small-n intervals, figures made of figures,
and the row's formatting (never a bare point, never "0.00x")."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.evidence import derived, engine, stats
from workbench.data.record import RunRecord, VariantResult


def _rec(variants, outputs=None, cpus: int = 2) -> RunRecord:
    return RunRecord("20261127-000000-calibration-abcdef", "calibration", {}, {"cpu_logical": cpus},
                     variants=variants, outputs=outputs or {})


def _v(name, samples, blocks=None, **params) -> VariantResult:
    return VariantResult(name, {"provider": name, **params}, list(map(float, samples)), True,
                         blocks=None if blocks is None else list(blocks))


def _blocks_run(rng, drift_sd: float, nulls: int, effect: float = 1.0, n: int = 20, noise: float = 0.01):
    """A run of ``nulls`` A/A twins and one compared pair, every variant timed in a block of its
    own: a block's samples are its true time x exp(block effect) x (1 + noise)."""
    blk = iter(range(10_000))

    def block(name, true, **params):
        b = next(blk)
        x = true * np.exp(rng.normal(0, drift_sd / np.sqrt(2))) * (1 + rng.normal(0, noise, n))
        return _v(name, x, [b] * n, **params)

    vs = []
    for i in range(nulls):
        vs += [block(f"p{i}", 100e3), block(f"aa:p{i}", 100e3, twin_of=f"p{i}")]
    vs += [block("a", 100e3), block("b", 100e3 * effect)]
    return _rec(vs)


TWINS = engine.Nulls(twins="again / first")


def test_a_cross_block_comparison_without_a_drift_estimate_is_never_clear():
    """Issue 41: 61 of 79 committed bundles measured no drift, and their cross-block rows were
    'clear'; without a null control a comparison of two blocks is at most inconclusive."""
    rng = np.random.default_rng(0)
    ev = engine.Evidence(_blocks_run(rng, 0.0, nulls=0, effect=1.5))
    d = ev.ratio("a", "b", "b / a")
    assert not ev.drift.measured and d.covers == derived.WITHIN_BLOCK
    assert d.status == "inconclusive" and d.caveat.startswith("drift not measured") and d.lo > 1.4
    # paired by round, the same effect is clear: the drift cancels in each round
    rounds = range(20)
    paired = engine.Evidence(_rec([_v("a", 100e3 * (1 + rng.normal(0, 0.01, 20)), rounds),
                                   _v("b", 150e3 * (1 + rng.normal(0, 0.01, 20)), rounds)]))
    p = paired.ratio("a", "b", "b / a")
    assert p.covers == derived.ROUNDS and p.status == "clear" and p.paired


@pytest.mark.parametrize("drift_sd", [0.0, 0.03, 0.08])
def test_null_comparisons_are_clear_at_most_at_about_the_nominal_rate(drift_sd):
    """A property across seeds: two blocks of one configuration compared with the drift of 4
    A/A twins are 'clear' in at most ~5% of runs (<= 10% here), whatever the drift."""
    clear = 0
    for seed in range(80):
        ev = engine.Evidence(_blocks_run(np.random.default_rng(seed), drift_sd, nulls=4), TWINS)
        clear += ev.ratio("a", "b", "b / a").status == "clear"
    assert clear <= 8, clear


def test_a_real_effect_still_shows_with_the_drift():
    ev = engine.Evidence(_blocks_run(np.random.default_rng(1), 0.02, nulls=6, effect=1.3), TWINS)
    d = ev.ratio("a", "b", "b / a")
    assert ev.drift.measured and d.covers == derived.BLOCKS and d.status == "clear" and d.lo > 1.1


def test_a_null_that_is_not_null_is_reported_and_left_out_of_the_drift():
    """One real effect (0.61x) named as a null raised a run's drift from 4.1% to 17.4%: judged
    against the other nulls it is clearly not null, and the drift is estimated without it."""
    rng = np.random.default_rng(2)
    rec = _blocks_run(rng, 0.03, nulls=5)
    rec.variants[1].samples_ns = [x * 0.61 for x in rec.variants[1].samples_ns]  # aa:p0 is a real effect
    ev = engine.Evidence(rec, TWINS)
    flagged = [d for d in ev.null_rows if d.status == "clear"]
    assert [d.sources for d in flagged] == ["p0|aa:p0"] and "not a null here" in flagged[0].why
    assert ev.drift.excluded == 1 and ev.drift.controls == 4 and ev.drift.pct < 8
    assert "1 left out: clearly not null" in ev.drift.text()


def _kinds_run(rng, quiet_sd: float = 0.005, loud_sd: float = 0.25, n: int = 10, effect: float = 1.0):
    """Two clock reads and two fork/joins, each with its A/A twin, each in a block of its own: the
    fork/joins drift between blocks by ``loud_sd``, the clock reads by ``quiet_sd``; ``w2`` takes
    ``effect`` times ``w1``'s time."""
    blk = iter(range(10_000))
    vs = []
    for name, kind, true, sd in (("c1", "clock", 50.0, quiet_sd), ("c2", "clock", 60.0, quiet_sd),
                                 ("w1", "forkjoin", 20e3, loud_sd), ("w2", "forkjoin", 20e3 * effect, loud_sd)):
        for variant, extra in ((name, {}), (f"aa:{name}", {"twin_of": name})):
            x = true * np.exp(rng.normal(0, sd / np.sqrt(2))) * (1 + rng.normal(0, 0.01, n))
            vs.append(_v(variant, x, [next(blk)] * n, kind=kind, **extra))
    return _rec(vs, cpus=16)


def test_nulls_of_another_kind_do_not_judge_a_null_nor_set_its_kinds_drift():
    """On a quiet 16-CPU host 10.9% of calibration's fork/join twins were called clear against
    the pooled drift of its clock and empty-call twins: a thread's fork/join drifts between
    blocks far more. Declared kinds: a null is judged only against nulls of its kind, and a
    comparison of two fork/joins takes the fork/joins' drift."""
    pooled = kinds = 0
    for seed in range(60):
        rec = _kinds_run(np.random.default_rng(seed))
        pooled += sum(d.status == "clear" for d in engine.Evidence(rec, TWINS).null_rows)
        ev = engine.Evidence(rec, engine.Nulls(twins="again / first", kind=lambda p: p["kind"]))
        kinds += sum(d.status == "clear" for d in ev.null_rows)
        assert ev.drift_between(ev.side("w1"), ev.side("w2")) is ev.kind_drift["forkjoin"]
        assert ev.drift_between(ev.side("c1"), ev.side("w2")) is ev.drift
    assert pooled >= 12 and kinds == 0, (pooled, kinds)  # two nulls of a kind: neither is "not a null"
    ev = engine.Evidence(_kinds_run(np.random.default_rng(0)), engine.Nulls(twins="again / first",
                                                                         kind=lambda p: p["kind"]))
    assert list(ev.level_tables()["drift"]["kind"]) == ["", "clock", "forkjoin"]
    assert ev.kind_drift["forkjoin"].pct > 5 * ev.kind_drift["clock"].pct


def test_nulls_that_share_blocks_count_as_the_blocks_they_span():
    """Two nulls of the same two blocks are one contrast; k nulls against one common block are
    k (their blocks less one): the t's degrees of freedom count what is independent."""
    rng = np.random.default_rng(3)
    x = lambda: 100e3 * (1 + rng.normal(0, 0.01, 20))  # noqa: E731
    same = _rec([_v("a", x(), [0] * 20), _v("b", x(), [1] * 20), _v("c", x(), [0] * 20), _v("d", x(), [1] * 20)])
    ev = engine.Evidence(same, engine.Nulls(twins="", pairs=lambda e: [("ab", "a", "b"), ("cd", "c", "d")]))
    assert ev.drift.controls == 2 and ev.drift.nulls == 1
    star = _rec([_v("r", x(), [0] * 20)] + [_v(f"t{i}", x(), [i + 1] * 20) for i in range(4)])
    ev = engine.Evidence(star, engine.Nulls(twins="", pairs=lambda e: [(f"r{i}", "r", f"t{i}") for i in range(4)]))
    assert ev.drift.controls == 4 and ev.drift.nulls == 4


def test_a_side_measured_under_load_keeps_a_figure_from_deciding():
    rng = np.random.default_rng(4)
    rec = _blocks_run(rng, 0.0, nulls=4, effect=2.0)
    rec.variants[-1].extra["load"] = {"loadavg_1m": 9.0}
    ev = engine.Evidence(rec, TWINS)
    d = ev.ratio("a", "b", "b / a")
    assert d.status == "inconclusive" and d.lo > 1.5 and "measured under load (b: measured under load" in d.caveat
    # a figure of no variant (a profile) takes the run's load
    s = ev.series(rng.normal(100, 1, 30), "iterations", "capture")
    assert "measured under load" in ev.median(s, "a profile's median", "us").caveat


def test_five_rounds_get_a_t_interval_six_the_order_statistic_one():
    """5 rounds: the widest interval of a median, [min, max], covers 93.75% < 95%, so the mean
    of the per-round log ratios with its t interval; 6 rounds: the median's [min, max] (96.9%)."""
    for n in (5, 6):
        rounds = range(n)
        rng = np.random.default_rng(n)
        a = 100e3 * (1 + rng.normal(0, 0.01, n))
        ev = engine.Evidence(_rec([_v("a", a, rounds), _v("b", 2 * a * (1 + rng.normal(0, 0.01, n)), rounds)]))
        d = ev.ratio("a", "b", "b / a")
        assert d.status == "clear" and d.paired and d.lo < 2 < d.hi and d.n_a == n
        per = np.asarray(ev.samples("b")) / np.asarray(ev.samples("a"))
        if n == 6:
            assert (d.lo, d.hi) == pytest.approx((per.min(), per.max()))
        else:
            assert d.point == pytest.approx(float(np.exp(np.log(per).mean())))  # the geometric mean


def test_a_ratio_with_a_round_of_zero_never_reaches_below_zero():
    """A numerator of 0 in one of 5 rounds (a sys time under the clock's tick) has no log: the
    arithmetic mean's t interval, cut at 0 (no ratio of times lies below it)."""
    rounds = range(5)
    a = [80e3, 64e3, 101e3, 90e3, 75e3]
    b = [4e3, 0.0, 4e3, 8e3, 0.0]
    d = engine.Evidence(_rec([_v("a", a, rounds), _v("b", b, rounds)])).ratio("a", "b", "b / a")
    per = np.asarray(b) / np.asarray(a)
    assert d.point == pytest.approx(per.mean()) and d.lo == 0.0 < d.point < d.hi < 1
    assert d.status == "clear"
    zero = engine.Evidence(_rec([_v("a", a, rounds), _v("b", [0.0] * 5, rounds)])).ratio("a", "b", "b / a")
    assert zero.status == "not meaningful" and "0 in every round" in zero.why


@pytest.mark.parametrize("n", [5, 6, 10, 20])
def test_paired_intervals_cover_their_truth_at_small_n(n):
    """Coverage of a paired ratio's CI across 400 seeds at 5-20 rounds: at least 93% (the
    order-statistic interval is exact for a median; a percentile bootstrap was 6-7% false-clear)."""
    covered = 0
    for seed in range(400):
        rng = np.random.default_rng(seed)
        drift = np.exp(rng.normal(0, 0.1, n))  # shared by both sides of a round
        a = 100e3 * drift * np.exp(rng.normal(0, 0.02, n))
        b = 120e3 * drift * np.exp(rng.normal(0, 0.02, n))
        d = engine.Evidence(_rec([_v("a", a, range(n)), _v("b", b, range(n))])).ratio("a", "b", "r")
        covered += d.lo <= 1.2 <= d.hi
    assert covered >= 0.93 * 400, covered


def test_unpaired_intervals_cover_their_truth_at_small_n():
    """Two blocks of 5-10 samples with a measured drift of 0: the CI of the ratio of medians
    covers the true ratio in at least 93% of 300 seeds."""
    for n in (5, 10):
        covered = 0
        for seed in range(300):
            rng = np.random.default_rng(seed)
            ev = engine.Evidence(_blocks_run(rng, 0.0, nulls=3, effect=1.1, n=n, noise=0.05), TWINS)
            d = ev.ratio("a", "b", "r")
            covered += d.lo <= 1.1 <= d.hi
        assert covered >= 0.93 * 300, (n, covered)


def test_impossible_values_and_too_few_samples_are_never_clear():
    rng = np.random.default_rng(1)
    a = 100e3 + rng.normal(0, 1e3, 40)
    ev = engine.Evidence(_rec([_v("a", a, range(40)), _v("b", a - 5e3, range(40)), _v("c", [1, 2, 3], [0, 0, 0])]))
    neg = ev.difference("a", "b", "a cost", physical_min=0.0)
    assert neg.status == "not meaningful" and "impossible" in neg.why
    part, total = ev.series(a + 1, "part", "cap", range(40)), ev.series(a, "total", "cap", range(40))
    assert "exceeds its total" in ev.share(part, total, "share").why
    ok = ev.share(ev.series(0.2 * a, "part", "cap", range(40)), total, "share")
    assert ok.clear and ok.unit == "%" and ok.point == pytest.approx(20) and ok.covers == derived.SAMPLES
    few = ev.difference("c", "a", "few")
    assert few.status == "inconclusive" and "too few" in few.caveat


def test_figures_made_of_figures_inherit_the_weakest_level_and_every_caveat():
    rng = np.random.default_rng(5)
    ev = engine.Evidence(_blocks_run(rng, 0.02, nulls=4, effect=1.5), TWINS)
    across = ev.ratio("a", "b", "across blocks")
    paired = engine.Evidence(_rec([_v("x", np.full(10, 1e3) + np.arange(10), range(10)),
                                   _v("y", np.full(10, 2e3) + np.arange(10), range(10))]))
    p = paired.difference("x", "y", "paired", "ns", scale=1.0)
    q = ev.combine("half of it", lambda r: r / 2, [across], "x", null=0.5)
    assert q.covers == derived.BLOCKS and q.point == pytest.approx(across.point / 2)
    assert ev.combine("n/a", lambda a, b: a / b, [across, p], "x", null=1.0).status == "not meaningful"  # p: another run
    gain = ev.gain("a", "b", "gain")
    assert gain.unit == "%" and gain.point == pytest.approx(100 * (1 - across.point)) and gain.hi < 0


def test_a_bracket_is_clear_only_when_both_ends_are():
    rounds = range(10)
    ends = []
    for m, s in ((1024, 1.2), (4096, 0.8)):
        ev = engine.Evidence(_rec([_v("a", 100e3 + np.arange(10), rounds), _v("b", s * 100e3 + np.arange(10), rounds)]))
        ends.append(ev.ratio("a", "b", f"at {m}"))
    d = ev.bracket("crossover", [1024, 4096], ends, "rows")
    assert d.status == "clear" and (d.lo, d.hi) == (1024, 4096) and d.point == pytest.approx(2048)


def test_a_rate_of_events_and_a_target():
    seen = engine.rate("failures", 3, 1000)
    assert seen.status == "clear" and seen.covers == derived.COUNT and seen.lo > 0
    assert engine.rate("failures", 0, 1000).status == "inconclusive"
    d = derived.Derived("speedup", 1.4, 1.35, 1.45, "x", 1.0, "clear", n_a=20, n_b=20, covers=derived.ROUNDS)
    assert engine.target(d, at_least=1.3) == "met" and engine.target(d, at_least=1.5) == "MISSED"
    assert engine.target(d, at_least=1.4) == "inconclusive" and engine.target(None, at_least=1) == "not measured"
    loaded = derived.Derived("speedup", 1.4, 1.35, 1.45, "x", 1.0, "inconclusive", n_a=20, n_b=20,
                             covers=derived.ROUNDS, caveat="measured under load")
    assert engine.target(loaded, at_least=1.3) == "inconclusive"


def test_a_row_cannot_be_clear_without_its_levels_whoever_builds_it():
    for kw in ({"n_a": 3, "n_b": 3}, {"covers": derived.WITHIN_BLOCK}, {"caveat": "measured under load"}):
        d = derived.Derived("by hand", 2.0, 1.5, 2.5, "x", 1.0, "clear", **({"n_a": 20, "n_b": 20} | kw))
        assert d.status == "inconclusive" and d.caveat, kw


def test_the_order_statistic_interval_has_its_stated_coverage():
    assert stats.order_ranks(5) == (0, 4, 0.9375)
    lo, hi, cov = stats.order_ranks(20)
    assert (lo, hi) == (5, 14) and 0.95 <= cov < 0.96
    covered = sum(stats.median_ci(np.random.default_rng(s).exponential(1, 12))[0] <= np.log(2)
                  <= stats.median_ci(np.random.default_rng(s).exponential(1, 12))[1] for s in range(2000))
    assert covered >= 0.95 * 2000 - 20  # exact for any continuous distribution


def test_large_samples_are_fast_and_sane():
    rng = np.random.default_rng(0)
    a, b = rng.exponential(100, 50_000), 5 + rng.exponential(100, 50_000)
    ev = engine.Evidence(_rec([_v("a", a, [0] * a.size), _v("b", b, [0] * b.size)]))
    d = ev.difference("a", "b", "big n", "ns", scale=1.0)
    assert d.n_a == 50_000 and d.lo < d.point < d.hi and d.hi - d.lo < 5 and d.covers == derived.SAMPLES


def test_formatting_has_enough_digits():
    edge = derived.Derived("edge", 0.9102, 0.7979, 0.9978, "x", 1.0, "clear", n_a=15, n_b=15, paired=True)
    assert derived.fmt_derived(edge) == "0.910x [0.798, 0.998] (clear)"
    straddles = derived.Derived("straddles", 0.91, 0.80, 1.02, "x", 1.0, "inconclusive", n_a=15, n_b=15)
    assert derived.fmt_derived(straddles) == "0.91x [0.80, 1.02] (inconclusive)"  # no digit it does not need
    tiny = derived.Derived("tiny", 0.004, 0.0038, 0.0043, "x", 1.0, "clear", n_a=15, n_b=15)
    text = derived.fmt_derived(tiny)
    assert "0.00x" not in text and text.startswith("0.004") and "(1/250)" in text
    other = engine.not_meaningful("profile compute - timing-run total", "compute and total from different runs")
    assert "different runs" in derived.fmt_derived(other)


def test_derived_table_round_trips_rows():
    d = derived.Derived("a gain", 5.0, 4.0, 6.0, "us", 0.0, "clear", n_a=10, n_b=10, covers=derived.ROUNDS,
                        sources="x|y")
    df = derived.derived_table([d.row(table="t"), engine.not_meaningful("b", "missing")])
    assert list(df.columns[:len(derived.COLUMNS)]) == derived.COLUMNS and "table" in df
    assert derived.item(df.iloc[0].to_dict()) == d
    assert derived.derived_table([]).columns.tolist() == derived.COLUMNS


def test_variants_pair_by_the_rounds_they_share_and_old_runs_by_position():
    a = _v("a", [1.0, 2.0, 3.0, 4.0], [0, 1, 2, 3])
    b = _v("b", [10.0, 30.0, 40.0], [0, 2, 3])
    alone = _v("c", [5.0, 6.0], [9, 9])
    ev = engine.Evidence(_rec([a, b, alone]))
    assert ev.share_rounds("a", "b") and not ev.share_rounds("a", "c")
    assert ev.ratio("a", "b", "r").n_a == 3  # rounds 0, 2, 3
    old = engine.Evidence(_rec([_v("x", [1.0, 2.0]), _v("y", [3.0, 4.0])]))
    assert not old.share_rounds("x", "y") and old.share_rounds("x", "y", interleaved=True)


def test_a_variant_off_its_own_twin_is_named_first_in_the_verdict():
    """Issue 41: a variant that disagrees with its own A/A twin beyond the run's nulls leads the
    verdict; a quiet run whose nulls agree does not lead with them."""
    from workbench.evidence import verdict

    rec = _blocks_run(np.random.default_rng(2), 0.03, nulls=5, n=20)
    rec.env["cpu_logical"] = 64  # no load rule here: a quiet machine
    rec.variants[1].samples_ns = [x * 0.61 for x in rec.variants[1].samples_ns]
    ev = engine.Evidence(rec, TWINS)
    text = verdict.write(rec, ev.level_tables(), [verdict.Finding("b / a", ev.ratio("a", "b", "b / a"))], None, [])
    assert text.startswith("p0 disagrees with its own A/A twin beyond its CI (0.6"), text
    assert "this run's blocks moved" in text.splitlines()[0]
    quiet = _blocks_run(np.random.default_rng(3), 0.03, nulls=5, n=20)
    quiet.env["cpu_logical"] = 64
    ev = engine.Evidence(quiet, TWINS)
    text = verdict.write(quiet, ev.level_tables(), [verdict.Finding("b / a", ev.ratio("a", "b", "b / a"))], None, [])
    assert text.startswith("This run does not settle b / a: ") and "A/A" not in text, text
