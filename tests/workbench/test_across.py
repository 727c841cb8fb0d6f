"""The run-to-run level (issue 30): a two-level bootstrap across runs covers what varies
between runs, which no single run's CI does; --repeat-runs makes that level on one machine."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.reading import across
from workbench.evidence import derived, stats
from workbench.cli import main


def _run_boot(point: float, sd: float, seed: int) -> np.ndarray:
    return point + np.random.default_rng(seed).normal(0, sd, 2000)


def test_two_level_interval_covers_the_run_to_run_spread_of_canned_runs():
    """The mc2 split that gained 22.4%, 15.9%, 12.9% and 18.9% in four runs minutes apart, each
    with a CI about 1.5 points wide: no run's CI contains the others, the across-run one does."""
    points = [22.4, 15.9, 12.9, 18.9]
    boots = [_run_boot(p, 0.8, i) for i, p in enumerate(points)]
    mean, lo, hi = stats.across_runs(points, boots)
    assert mean == pytest.approx(np.mean(points))
    assert lo < min(points) and hi > max(points)
    own = [np.quantile(b, [0.025, 0.975]) for b in boots]
    assert not any(a[0] <= points[j] <= a[1] for i, a in enumerate(own) for j in range(4) if j != i)
    # the within-run level is there too: the same points with wide within-run CIs give a wider interval
    wide = stats.across_runs(points, [_run_boot(p, 6.0, i) for i, p in enumerate(points)])
    assert wide[2] - wide[1] > hi - lo


@pytest.mark.parametrize("runs", [3, 5, 10])
def test_two_level_interval_covers_the_configurations_mean_at_its_level(runs):
    """A property over many simulated groups: run-level sd 5%, within-run sd 1%; the 95%
    interval across runs contains the configuration's true figure in at least 90% of groups."""
    rng = np.random.default_rng(runs)
    hits, trials = 0, 300
    for t in range(trials):
        points = 100 + rng.normal(0, 5, runs)
        boots = [p + rng.normal(0, 1, 400) for p in points]
        _, lo, hi = stats.across_runs(points, boots, seed=t)
        hits += lo <= 100 <= hi
    assert hits >= 0.90 * trials


def test_one_run_has_no_run_to_run_level():
    mean, lo, hi = stats.across_runs([5.0], [np.ones(10)])
    assert mean == 5.0 and lo != lo and hi != hi


def test_clopper_pearson_bounds():
    lo, hi = stats.clopper_pearson(0, 73)
    assert lo == 0 and hi < 0.05
    assert stats.clopper_pearson(0, 20)[1] > 0.16  # 20 pairs with no false call prove little
    lo, hi = stats.clopper_pearson(5, 100)
    assert lo < 0.05 < hi


def test_a_derived_number_across_runs_is_never_clear_from_fewer_than_five_runs():
    items = [derived.Derived("gain", p, p - 1, p + 1, "%", 0.0, "clear", "", 30, 30) for p in (20.0, 22.0, 21.0)]
    d, per_run = across.across(items)
    assert d.covers == derived.RUNS and d.n_a == 3 and d.status == "inconclusive" and "only 3" in d.why
    assert per_run.count(";") == 2
    five = [derived.Derived("gain", p, p - 1, p + 1, "%", 0.0, "clear", "", 30, 30)
            for p in (20.0, 22.0, 21.0, 20.5, 21.5)]
    assert across.across(five)[0].status == "clear"


def test_repeat_runs_makes_one_group_of_fresh_processes_and_judges_across_them(tmp_path, capsys):
    code = main(["--store", str(tmp_path / "s.sqlite"), "run", "calibration", "--preset", "smoke",
                 "--set", "torch=false", "--repeat-runs", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "Across 2 runs of one configuration" in out and "each run" in out
    from workbench.results.store import Store

    runs = Store(tmp_path / "s.sqlite").runs()
    assert len(runs) == 2
    recs = [Store(tmp_path / "s.sqlite").load(r["run_id"]) for r in runs]
    groups = {r.outputs["run_group"]["id"] for r in recs}
    assert len(groups) == 1 and sorted(r.outputs["run_group"]["index"] for r in recs) == [1, 2]


def test_repeat_runs_refuses_json_and_a_silly_count(tmp_path, capsys):
    assert main(["--store", str(tmp_path / "s.sqlite"), "run", "calibration", "--repeat-runs", "2", "--json"]) == 2
    assert main(["--store", str(tmp_path / "s.sqlite"), "run", "calibration", "--repeat-runs", "0"]) == 2
