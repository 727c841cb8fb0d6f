"""The split planner validated across hosts (issue #47): the vectorised simulation is the
study's simulator, the fits recover known terms, no host's splits are predicted from its own
runs, and the committed runs' figures are what the result README states."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from studies.mc2_split import planner
from studies.mc2_split.plan import CostModel, Fit
from studies.mc2_split.simulate import simulate
from workbench.base.env import REPO_ROOT

MODEL = CostModel(Fit(5.0, 0.066, "row"), Fit(35.0, 4.7, "MiB"), 8192, 2)


def _random_splits(rng, count: int) -> list[list[int]]:
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 12))
        cuts = np.sort(rng.choice(np.arange(1, 32), size=n - 1, replace=False)) if n > 1 else np.array([], int)
        edges = np.concatenate([[0], cuts, [32]]) * 128
        out.append([int(b - a) for a, b in zip(edges[:-1], edges[1:])])
    return out


def _obs(splits, host: str, f=(1.4, 1.2), op_us=0.0, run="r", collective="triton-pull", carveout=16, ws=2,
         noise=0.0, rng=None) -> pd.DataFrame:
    rows = []
    for i, chunks in enumerate(splits):
        t = simulate(chunks, MODEL, f).makespan_us + op_us
        if noise:
            t *= float(np.exp(rng.normal(0, noise)))
        rows.append({"run_id": f"{host}-{run}", "variant": f"overlap/{i}", "host": host, "backend": "nccl",
                     "world_size": ws, "provider": f"{collective}+c{carveout}", "collective": collective,
                     "carveout": carveout, "split": f"s{i}", "chunks": ",".join(map(str, chunks)),
                     "n_chunks": len(chunks), "measured_us": t,
                     "mm_us": tuple(MODEL.mm_us(c) for c in chunks), "comm_us": tuple(MODEL.comm_us(c) for c in chunks)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(4))
def test_the_vectorised_simulation_is_the_study_simulator(seed):
    rng = np.random.default_rng(seed)
    splits = _random_splits(rng, 40)
    f_mm, f_comm = (float(x) for x in rng.uniform(0.8, 2.5, 2))
    stages = planner.Stages.of(_obs(splits, "h"))
    many = planner.predict(stages, (f_mm, f_comm, 0.0, 0.0, 0.0))
    one = [simulate(c, MODEL, (f_mm, f_comm)).makespan_us for c in splits]
    np.testing.assert_allclose(many, one, rtol=1e-9)


def test_the_fit_recovers_the_terms_that_made_the_times():
    rng = np.random.default_rng(1)
    obs = _obs(_random_splits(rng, 30), "h", f=(1.6, 1.1), op_us=25.0)
    theta = planner.fit_terms(planner.Stages.of(obs), obs["measured_us"].to_numpy(), "pair+op+chunk")
    pred = planner.predict(planner.Stages.of(obs), theta)
    np.testing.assert_allclose(pred, obs["measured_us"], rtol=0.01)
    pair = planner.fit_terms(planner.Stages.of(obs), obs["measured_us"].to_numpy(), "pair")
    assert not np.allclose(planner.predict(planner.Stages.of(obs), pair), obs["measured_us"], rtol=0.01)


def test_no_split_is_predicted_from_its_own_host():
    rng = np.random.default_rng(2)
    obs = pd.concat([_obs(_random_splits(rng, 12), h, f=(1.3 + 0.1 * i, 1.2), rng=rng, noise=0.02)
                     for i, h in enumerate(("a", "b", "c"))], ignore_index=True)
    cv = planner.cross_validate(obs, "pair")
    assert len(cv) == len(obs)
    for row in cv.itertuples():
        assert row.host not in row.trained_on.split(", ")
        assert set(row.trained_on.split(", ")) == {"a", "b", "c"} - {row.host}


def test_a_key_the_other_hosts_never_ran_falls_back_to_a_coarser_one():
    rng = np.random.default_rng(3)
    a = _obs(_random_splits(rng, 10), "a", ws=2)
    b = _obs(_random_splits(rng, 10), "b", ws=4)  # world size 4 only on host b
    cv = planner.cross_validate(pd.concat([a, b], ignore_index=True), "pair")
    assert set(cv.loc[cv["host"] == "b", "level"]) == {"collective, carve-out"}
    c = _obs(_random_splits(rng, 10), "c", collective="ce", carveout=0)  # a collective no other host ran
    cv = planner.cross_validate(pd.concat([a, b, c], ignore_index=True), "pair")
    assert set(cv.loc[cv["host"] == "c", "level"]) == {"every split"}


def test_one_host_has_nothing_to_validate_against():
    assert not len(planner.cross_validate(_obs(_random_splits(np.random.default_rng(4), 8), "a"), "pair"))


def test_the_planner_picks_the_split_it_predicts_fastest_and_says_how_far_it_is_from_the_best():
    cv = pd.DataFrame({"run_id": ["r"] * 3, "provider": ["p"] * 3, "host": ["h"] * 3, "world_size": [2] * 3,
                       "split": ["a", "b", "c"], "chunks": ["1", "2", "3"],
                       "predicted_us": [100.0, 90.0, 120.0], "measured_us": [100.0, 104.0, 110.0]})
    picks = planner.planner_picks(cv)
    assert picks.iloc[0]["pick"] == "p b" and picks.iloc[0]["best"] == "p a"
    assert picks.iloc[0]["over_best"] == pytest.approx(0.04) and not picks.iloc[0]["within"]


def test_a_share_is_met_only_where_its_interval_clears_the_target():
    assert planner.verdict_of(990, 1000, 0.9) == "met"
    assert planner.verdict_of(700, 1000, 0.9) == "missed"
    assert planner.verdict_of(9, 10, 0.9).startswith("undecided")


@pytest.fixture(scope="module")
def committed_cv():
    obs = planner.committed_observations()
    if not len(obs):
        pytest.skip("no committed mc2-split runs")
    return planner.cross_validate(obs, planner.PLANNER_MODEL)


def test_the_committed_runs_miss_the_planner_criteria_as_the_readme_states(committed_cv):
    """Issue #47's criteria on the committed runs: 90% of the overlapped splits within 10% out of
    host, and the planner's pick within 3% of the measured best. The README's generated block
    states both as missed; a change of data or model that meets them fails here, so the
    README's prose is revisited with it."""
    k, n = int(committed_cv["within"].sum()), len(committed_cv)
    assert n >= 1000 and committed_cv["host"].nunique() == 2
    assert planner.verdict_of(k, n, planner.SHARE) == "missed"
    runs = planner.planner_picks(committed_cv, ("run_id",))
    assert planner.verdict_of(int(runs["within"].sum()), len(runs), planner.SHARE) == "missed"
    readme = (REPO_ROOT / "traces" / "mc2-split" / "README.md").read_text(encoding="utf-8")
    assert f"| {planner.PLANNER_MODEL} |" in readme and "within 10% of the measured time for 90%" in readme
