"""Levels of uncertainty (issue 30): samples carry their block, derived numbers pair by round
or carry the run's drift between blocks (estimated from its null controls), and nothing is
clear from fewer than 5 samples or from a run measured under load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench import derived
from workbench.record import RunRecord, VariantResult
from workbench.schema import SchemaError, check_bundle
from workbench.store import Store, parse_bundle, to_bundle
from workbench.study import RunContext


def _block_run(rng, drift_sd: float, nulls: int, base: float = 100e3, noise: float = 0.01, n: int = 30):
    """A run of ``nulls`` A/A pairs and one compared pair, every variant timed in a block of its
    own: each block's samples are its true time x exp(block effect) x (1 + noise)."""
    def block(true):
        return true * np.exp(rng.normal(0, drift_sd / np.sqrt(2))) * (1 + rng.normal(0, noise, n))

    pairs = [(f"null {i}", block(base), block(base)) for i in range(nulls)]
    return pairs, block(base), block(base * 1.10)


def test_injected_drift_between_blocks_leaves_null_controls_unclear_and_widens_a_derived_ci():
    """With block effects of 8% and 1% noise inside a block, samples alone call null controls
    'clear' at will; with the drift the run's nulls show, they are not, and a comparison of two
    blocks gets a CI wide enough to contain the drift."""
    clear_alone = clear_after = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        pairs, a, b = _block_run(rng, drift_sd=0.08, nulls=6)
        drift, rows = derived.null_controls(pairs, "A/A pairs")
        assert drift.measured and drift.nulls == 6 and 0.02 < drift.log_sd < 0.2
        clear_after += sum(d.status == "clear" for d in rows)
        clear_alone += sum(derived.ratio(x, y, name).status == "clear" for name, x, y in pairs)
        alone, with_drift = derived.ratio(a, b, "b/a"), derived.ratio(a, b, "b/a", drift=drift)
        assert with_drift.covers == derived.BLOCKS and alone.covers == derived.WITHIN_BLOCK
        assert (with_drift.hi - with_drift.lo) > 3 * (alone.hi - alone.lo)
    assert clear_alone > 0.8 * 12 * 6  # what the old CIs said: almost every null "clear"
    assert clear_after <= 0.1 * 12 * 6


@pytest.mark.parametrize("drift_sd", [0.0, 0.03, 0.08])
def test_null_controls_are_called_clear_at_about_the_nominal_rate(drift_sd):
    """A property across seeds: each null judged against the drift of the others is clear in
    about 5% of runs (at most 10% here), whatever the drift; tau is estimated near the truth."""
    clear = total = 0
    taus = []
    for seed in range(40):
        pairs, _a, _b = _block_run(np.random.default_rng(seed), drift_sd=drift_sd, nulls=6)
        drift, rows = derived.null_controls(pairs, "A/A pairs")
        clear += sum(d.status == "clear" for d in rows)
        total += len(rows)
        taus.append(drift.log_sd)
    assert clear <= 0.10 * total
    assert abs(np.mean(taus) - drift_sd) < 0.015


def test_without_drift_a_real_change_still_shows():
    pairs, a, b = _block_run(np.random.default_rng(1), drift_sd=0.0, nulls=6)
    drift, _rows = derived.null_controls(pairs, "A/A pairs")
    assert drift.log_sd < 0.01
    assert derived.ratio(a, b, "b/a", drift=drift).status == "clear"  # a 10% change still shows


def test_a_difference_of_two_blocks_carries_the_drift_and_rounds_cancel_it():
    rng = np.random.default_rng(2)
    rounds = 20
    drift_per_round = np.exp(rng.normal(0, 0.08, rounds))  # the machine drifts round to round
    a = 50e3 * drift_per_round * (1 + rng.normal(0, 0.005, rounds))
    b = 52e3 * drift_per_round * (1 + rng.normal(0, 0.005, rounds))
    va = VariantResult("a", {}, list(a), True, blocks=list(range(rounds)))
    vb = VariantResult("b", {}, list(b), True, blocks=list(range(rounds)))
    paired = derived.RunSamples(_record([va, vb]), derived.Drift(0.08, 6, "test")).difference("a", "b", "b - a",
                                                                                           scale=1e-3)
    assert paired.paired and paired.covers == derived.ROUNDS and paired.status == "clear"
    assert paired.lo > 1.5 and paired.hi < 2.5
    # the same samples timed as two blocks: nothing pairs them, the drift widens the CI
    vb.blocks = [rounds] * rounds
    va.blocks = [rounds + 1] * rounds
    apart = derived.RunSamples(_record([va, vb]), derived.Drift(0.08, 6, "test")).difference("a", "b", "b - a",
                                                                                          scale=1e-3)
    assert not apart.paired and apart.covers == derived.BLOCKS and apart.status == "inconclusive"


def test_by_round_pairs_the_rounds_two_variants_share_and_old_runs_by_position():
    a = VariantResult("a", {}, [1.0, 2.0, 3.0, 4.0], True, blocks=[0, 1, 2, 3])
    b = VariantResult("b", {}, [10.0, 30.0, 40.0], True, blocks=[0, 2, 3])
    xa, xb = derived.by_round(a, b)
    assert list(xa) == [1.0, 3.0, 4.0] and list(xb) == [10.0, 30.0, 40.0]
    alone = VariantResult("c", {}, [5.0, 6.0], True, blocks=[9, 9])
    assert derived.by_round(a, alone) is None
    old_a, old_b = VariantResult("a", {}, [1.0, 2.0], True), VariantResult("b", {}, [3.0, 4.0], True)
    assert derived.by_round(old_a, old_b) is None
    assert [list(x) for x in derived.by_round(old_a, old_b, positional=True)] == [[1.0, 2.0], [3.0, 4.0]]


def test_nothing_is_clear_from_fewer_than_five_samples_whoever_builds_it():
    d = derived.Derived("built by hand", 2.0, 1.5, 2.5, "x", 1.0, "clear", "", 3, 3, True)
    assert d.status == "inconclusive" and "only 3 samples" in d.why
    assert derived.ratio([1.0, 1.01, 1.02], [2.0, 2.01, 2.02], "three").status == "inconclusive"
    import dataclasses

    assert dataclasses.replace(derived.ratio(np.ones(8), 2 * np.ones(8) + np.arange(8) * 1e-3, "r"),
                               n_a=4).status == "inconclusive"


def test_a_side_measured_under_load_keeps_a_result_from_being_clear():
    d = derived.difference(np.full(10, 1e3) + np.arange(10), np.full(10, 5e3) + np.arange(10), "d",
                           loaded="torch: load average 6.0 on 2 CPUs")
    assert d.status == "inconclusive" and d.why.startswith("inconclusive under load")


def test_drift_line_says_what_was_measured():
    assert "not measured" in derived.NO_DRIFT.text()
    line = derived.Drift(np.log(1.021), 3, "A/A twins").text()
    assert line.startswith("drift between blocks: 2.1%") and "3 null control(s)" in line


# --- the data model ---------------------------------------------------------------------------

def _record(variants) -> RunRecord:
    rec = RunRecord("20261127-000000-calibration-abcdef", "calibration", {}, {"cpu_logical": 2})
    rec.variants = variants
    return rec


def test_blocks_travel_through_bundles_and_the_store(tmp_path):
    v = VariantResult("a", {}, [1.0, 2.0, 3.0], True, "ok", {}, [4, 5, 6])
    old = VariantResult("b", {}, [1.0, 2.0], True, "ok")
    rec = _record([v, old])
    back = parse_bundle(json.dumps(to_bundle(rec)).encode())
    assert back.variants[0].blocks == [4, 5, 6] and back.variants[1].blocks is None
    s = Store(tmp_path / "s.sqlite")
    s.save(rec)
    loaded = s.load(rec.run_id)
    assert loaded.variants[0].blocks == [4, 5, 6] and loaded.variants[1].blocks is None


def test_a_bundle_whose_blocks_do_not_match_its_samples_is_refused():
    doc = to_bundle(_record([VariantResult("a", {}, [1.0, 2.0, 3.0], True, "ok", {}, [0, 1])]))
    with pytest.raises(SchemaError, match=r"variants\[0\]\.blocks: 2 block numbers for 3 samples"):
        check_bundle(doc)
    doc["run"]["variants"][0]["blocks"] = [0, -1, 2]
    with pytest.raises(SchemaError):
        check_bundle(doc)


def test_run_context_numbers_blocks_over_the_run():
    ctx = RunContext()
    assert [ctx.block() for _ in range(3)] == [0, 1, 2]
