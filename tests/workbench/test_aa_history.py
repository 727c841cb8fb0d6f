"""A/A history that stays honest (issue 30): an interleaved session is one unit of run-to-run
variation. Fed synthetic runs with a 5% spread between runs and 1.5-3% between the rounds of
a session, separate A/A runs judged with A/A sessions as history are called different in at
most 5% of comparisons (counting rounds as units, 16-50% were); per pair (any of its three
variants), Holm keeps the family-wise rate near 5% by design."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.ab_false_calls import MODES, synthetic, synthetic_levels, synthetic_session, _synthetic_run
from workbench.reading.comparison import compare_runs, run_to_run


@pytest.mark.parametrize("round_sd", [0.015, 0.03])
def test_session_history_gives_at_most_five_percent_false_calls_on_synthetic_runs(round_sd):
    tallies = synthetic(pairs=120, run_sd=0.05, round_sd=round_sd, rounds=8, sessions=3, old_runs=6, seed=7)
    t = tallies[MODES[2]]
    assert t.pairs == 120 and t.aa == 360
    assert t.false <= 0.05 * t.aa
    assert t.false_pairs <= 0.08 * t.pairs  # family-wise: ~5% by Holm's design, binomial noise on 120 pairs
    assert t.aa_unconfirmed == 0  # the history knows the run-to-run noise: nothing is left unconfirmed


def test_a_session_is_one_unit_whose_spread_is_the_run_level():
    """The history's sigma from sessions is the run-level spread, not the rounds' (which an
    8-round session would have given with 15 df)."""
    rng = np.random.default_rng(3)
    hist = [r for k in range(12) for r in synthetic_session(k, rng, run_sd=0.05, round_sd=0.02, rounds=8)]
    a = _synthetic_run("20270109-000000-calibration-aaaaaa", synthetic_levels(rng, 0.05), rng)
    b = _synthetic_run("20270109-000000-calibration-bbbbbb", synthetic_levels(rng, 0.05), rng)
    noise = run_to_run(hist, a, b)
    assert noise["v1"]["df"] == 11 and noise["v1"]["runs"] == 12
    assert 0.03 < noise["v1"]["sigma"] < 0.08
    assert {r["verdict"] for r in compare_runs(a, b, hist)["rows"]} <= {"cannot tell apart", "within run-to-run noise",
                                                                        "faster", "slower"}
