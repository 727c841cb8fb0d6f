"""A/B comparisons (workbench/reading/comparison.py, workbench/running/ab_session.py): diffs first, refusals, Holm-adjusted
verdicts, run-to-run noise from A/A runs, interleaved sessions, the Runs page's default pair."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from workbench.reading import comparison as compare
from workbench.evidence import stats
from workbench.running.ab_session import execute_ab, round_order
from workbench.results.catalog import Header
from workbench.cli import main
from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import committed_runs
from workbench.seam.study import Param, ParamSpace
from tests.support.paths import ROOT

ENV = {"fingerprint": "f00", "cpu_model": "Test CPU", "cpu_logical": 2, "packages": {"numpy": "2.0"}}


def _run(run_id: str, variants: dict[str, np.ndarray], params=None, env=None, study="calibration",
         vparams=None) -> RunRecord:
    return RunRecord(run_id=run_id, study=study, params=params or {"repeat": 30, "threads": 2, "torch": False},
                     env=env or ENV, status="complete", reproduce="python -m workbench run calibration",
                     variants=[VariantResult(name, (vparams or {}).get(name, {"kind": "x"}), [float(x) for x in xs], True,
                                             "ok") for name, xs in variants.items()])


def _drifting_runs(n_runs: int, shift_sd: float, seed: int, names=("a", "b", "c")) -> list[RunRecord]:
    """Runs of one configuration: each run's level moves by a run-to-run shift (sd ``shift_sd``,
    log scale), its 40 samples scatter 1% around that level. Within-run tests see the shift
    as a highly significant difference; it is only run-to-run noise."""
    rng = np.random.default_rng(seed)
    return [_run(f"20260101-0000{i:02d}-calibration-aa{i:04x}",
                 {name: 1e4 * math.exp(rng.normal(0, shift_sd)) * rng.normal(1, 0.01, 40) for name in names})
            for i in range(n_runs)]


def _with_level(rec: RunRecord, factor: float, run_id: str) -> RunRecord:
    rng = np.random.default_rng(7)
    return _run(run_id, {v.variant: 1e4 * factor * rng.normal(1, 0.01, 40) for v in rec.variants})


def test_aa_with_drift_is_within_run_to_run_noise_given_aa_runs():
    runs = _drifting_runs(8, 0.05, seed=1)
    a, history = runs[0], runs[1:]
    b = _with_level(a, 1.06, "20260101-010000-calibration-bbbbbb")  # a shift the A/A runs show too
    a = _with_level(a, 1.0, "20260101-010000-calibration-aaaaaa")
    alone = compare.compare_runs(a, b)
    # within-run samples alone would call it slower (a false call): without A/A runs it stays unconfirmed
    assert {r["verdict"] for r in alone["rows"]} == {"unconfirmed slower"}
    assert any("run-to-run noise unknown" in w for w in alone["warnings"])
    headline = compare.summary_text(alone)
    assert alone["summary"]["slower"] == 0 and "unconfirmed in 3" in headline
    assert "overall" not in headline.replace("no overall direction stated", "")
    judged = compare.compare_runs(a, b, history)
    assert {r["verdict"] for r in judged["rows"]} == {"within run-to-run noise"}
    assert all(r["noise"].startswith("A/A range ") and r["p_adjusted"] >= 0.05 for r in judged["rows"])
    # every B/A lies inside the band of B/A ratios that A/A pairs reach
    assert all(r["aa_band"][0] < r["ratio"] < r["aa_band"][1] for r in judged["rows"])
    assert not any("unknown" in w for w in judged["warnings"])


def test_a_change_beyond_the_aa_spread_is_still_called():
    runs = _drifting_runs(8, 0.02, seed=2)
    a = _with_level(runs[0], 1.0, "20260101-010000-calibration-aaaaaa")
    b = _with_level(runs[0], 1.5, "20260101-010000-calibration-bbbbbb")
    cmp = compare.compare_runs(a, b, runs)
    rows = cmp["rows"]
    assert {r["verdict"] for r in rows} == {"slower"} and all(r["run_to_run_known"] for r in rows)
    assert all(r["ci"][0] > 1 and r["p_adjusted"] < 0.05 for r in rows)
    assert cmp["summary"]["run_to_run_known"] and "B is slower overall" in compare.summary_text(cmp)
    assert all(r["ratio"] > r["aa_band"][1] for r in rows)  # outside the range A/A pairs reach


def test_verdicts_agree_with_the_printed_aa_range():
    """x's B/A (2.0) lies outside the A/A range and its within-run test passes on its own
    (Holm over the within-run p-values), but not in the combined step-down, where x ranks
    first: it cannot be told apart; it is not 'within run-to-run noise', which the range
    contradicts. The others lie inside their ranges: within run-to-run noise."""
    def row(name, ratio, p_within, p_rr):
        return compare._row(name, "", ratio=ratio, ci=[ratio * 0.9, ratio * 1.1], p_value=p_within, p_run_to_run=p_rr,
                            aa={"sigma": 0.1 if name == "x" else 0.5, "df": 10, "runs": 11}, run_to_run_known=True)

    rows = [row("x", 2.0, 0.02, 1e-6)] + [row(n, 1.3, 1e-6, 0.5) for n in "abc"]
    compare._decide(rows)
    x, *rest = rows
    assert x["ratio"] > x["aa_band"][1] and x["p_adjusted"] == pytest.approx(0.08)
    assert x["verdict"] == "cannot tell apart"
    assert all(r["aa_band"][0] <= r["ratio"] <= r["aa_band"][1] and r["verdict"] == "within run-to-run noise"
               for r in rest)
    assert "98.75% level" in x["noise"]  # the first of four in Holm's step-down: alpha / 4


def test_aa_runs_count_only_with_the_same_configuration_machine_and_software():
    runs = _drifting_runs(6, 0.05, seed=3)
    other_params = [_run(r.run_id, {v.variant: v.samples_ns for v in r.variants}, params={"repeat": 5}) for r in runs]
    other_machine = [_run(r.run_id, {v.variant: v.samples_ns for v in r.variants}, env={**ENV, "fingerprint": "bad"})
                     for r in runs]
    other_software = [_run(r.run_id, {v.variant: v.samples_ns for v in r.variants},
                           env={**ENV, "packages": {"numpy": "2.1"}}) for r in runs]
    a, b = runs[0], runs[1]
    assert compare.run_to_run(other_params + other_machine + other_software, a, b) == {}
    noise = compare.run_to_run(runs, a, b)
    assert set(noise) == {"a", "b", "c"} and all(n["runs"] == 4 and n["df"] == 3 for n in noise.values())


def test_parameter_and_environment_diffs_come_first_and_are_flagged():
    rng = np.random.default_rng(0)
    a = _run("20260101-000000-calibration-aaaaaa", {"x": rng.normal(100, 1, 20)})
    b = _run("20260101-000001-calibration-bbbbbb", {"x": rng.normal(100, 1, 20)},
             params={"repeat": 64, "threads": 2, "torch": False},
             env={**ENV, "packages": {"numpy": "2.1"}, "fingerprint": "f01"})
    cmp = compare.compare_runs(a, b)
    assert cmp["param_diff"] == [{"param": "repeat", "a": 30, "b": 64}]
    assert {"key": "packages.numpy", "a": "2.0", "b": "2.1"} in cmp["env_diff"]
    assert any(w.startswith("parameters differ (repeat)") for w in cmp["warnings"])
    assert any(w.startswith("different machines") for w in cmp["warnings"])
    text = compare.markdown(cmp)
    assert text.index("| repeat | 30 | 64 |") < text.index("| packages.numpy |") < text.index("**Verdict:**")
    assert text.index("**Verdict:**") < text.index("## Per variant")


def test_a_variant_whose_own_parameters_differ_is_not_compared():
    rng = np.random.default_rng(0)
    a = _run("20260101-000000-calibration-aaaaaa", {"x": rng.normal(100, 1, 20), "y": rng.normal(50, 1, 20)},
             vparams={"x": {"world_size": 2}})
    b = _run("20260101-000001-calibration-bbbbbb", {"x": rng.normal(60, 1, 20), "y": rng.normal(50, 1, 20)},
             vparams={"x": {"world_size": 4}})
    rows = {r["variant"]: r for r in compare.compare_runs(a, b)["rows"]}
    assert rows["x"]["verdict"] == "not compared: parameters differ" and "world_size: 2 vs 4" in rows["x"]["noise"]
    assert rows["y"]["verdict"] == "cannot tell apart"


def test_runs_of_different_studies_are_refused(tmp_path, store, capsys):
    rng = np.random.default_rng(0)
    a = _run("20260101-000000-calibration-aaaaaa", {"x": rng.normal(100, 1, 20)})
    b = _run("20260101-000001-launch-cache-bbbbbb", {"x": rng.normal(100, 1, 20)}, study="launch-cache")
    with pytest.raises(compare.CompareError, match="different studies"):
        compare.compare_runs(a, b)
    store.save(a)
    store.save(b)
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id]) == 2
    assert "different studies" in capsys.readouterr().err


def test_p_values_are_holm_adjusted_over_the_compared_variants():
    """Twelve variants each 1.5% slower: each alone is significant, but not all survive Holm;
    the reported p_adjusted is Holm's adjustment of the raw p-values (no A/A runs here)."""
    rng = np.random.default_rng(5)
    names = [f"v{i}" for i in range(12)]
    a = _run("20260101-000000-calibration-aaaaaa", {n: rng.normal(100, 3, 30) for n in names})
    b = _run("20260101-000001-calibration-bbbbbb", {n: rng.normal(101.5, 3, 30) for n in names})
    rows = compare.compare_runs(a, b)["rows"]
    raw = np.array([r["p_value"] for r in rows])
    adjusted = np.array([r["p_adjusted"] for r in rows])
    assert np.allclose(adjusted, stats.adjust_pvalues(raw, "holm"))
    assert (adjusted >= raw).all()
    demoted = [r for r in rows if r["p_value"] < 0.05 <= r["p_adjusted"]]
    assert demoted and all(r["verdict"] == "cannot tell apart" for r in demoted)


def test_summary_is_the_geometric_mean_with_a_ci():
    rng = np.random.default_rng(9)
    factors = {"a": 1.1, "b": 1.2, "c": 1.3}
    a = _run("20260101-000000-calibration-aaaaaa", {n: rng.normal(100, 1, 30) for n in factors})
    b = _run("20260101-000001-calibration-bbbbbb", {n: rng.normal(100 * f, 1, 30) for n, f in factors.items()})
    s = compare.compare_runs(a, b)["summary"]
    expected = math.prod(factors.values()) ** (1 / 3)
    assert s["geomean_ratio"] == pytest.approx(expected, rel=0.01)
    assert s["ci"][0] < s["geomean_ratio"] < s["ci"][1] and s["ci"][0] > 1
    assert s["unconfirmed_slower"] == 3 and s["compared"] == 3 and not s["run_to_run_known"]


def test_every_median_in_the_table_carries_its_ci():
    rng = np.random.default_rng(3)
    a = _run("20260101-000000-calibration-aaaaaa", {"x": rng.normal(1e4, 100, 30)})
    b = _run("20260101-000001-calibration-bbbbbb", {"x": rng.normal(1e4, 100, 30)})
    (row,) = compare.compare_runs(a, b)["rows"]
    for side in ("a", "b"):
        lo, hi = row[f"median_{side}_ci"]
        assert lo < row[f"median_{side}"] < hi and hi / lo < 1.1
    line = next(l for l in compare.markdown(compare.compare_runs(a, b)).splitlines() if l.startswith("| x |"))
    assert line.count("[") == 2 and " .. " in line  # A and B medians with their CIs, and B/A with its CI


def test_most_similar_pair_prefers_one_study_and_fewest_differences():
    def head(run_id, study, params, fingerprint):
        return Header(run_id=run_id, study=study, status="complete", created_utc="", machine="m", origin="local",
                      source="", params=params, variants=1, failed_checks=0, fingerprint=fingerprint)

    heads = [head("r5", "ag-gemm", {"world_size": 4}, "m4"), head("r4", "calibration", {"repeat": 64}, "m"),
             head("r3", "ag-gemm", {"world_size": 2}, "m2"), head("r2", "calibration", {"repeat": 32}, "m"),
             head("r1", "calibration", {"repeat": 32}, "m"), head("r0", "calibration", {"repeat": 32}, "other")]
    assert compare.most_similar_pair(heads) == ("r1", "r2")  # r0 has the same parameters, on another machine
    assert compare.most_similar_pair(heads[:3]) == ("r3", "r5")  # differing, but the only pair of one study
    assert compare.most_similar_pair([heads[0], heads[1]]) is None


def test_round_sizes_from_a_bundle_are_checked():
    v = VariantResult("x", {}, [1.0, 2.0, 3.0], True, extra={"ab_round_sizes": [1, 2]})
    assert [r.tolist() for r in compare.round_samples(v)] == [[1.0], [2.0, 3.0]]
    for bad in ([1, 1], [True, 2], [-1, 4], "12", [], [1.5, 1.5]):
        v.extra["ab_round_sizes"] = bad
        assert compare.round_samples(v) is None


# --- interleaved sessions -------------------------------------------------------------------------

def _fake_study(drift_per_round: float, slowdown_b: float = 1.0, noise: float = 0.01):
    """A study whose every call takes longer as the session goes on (a linear drift of the
    machine), each side's rounds drawn with 1% scatter; B optionally slowed down."""
    clock = {"round": 0}
    rng = np.random.default_rng(11)

    def run(params, ctx):
        level = 1e4 * (1 + drift_per_round * clock["round"]) * (slowdown_b if params["side"] == "b" else 1.0)
        clock["round"] += 1
        for name in ("p", "q"):
            ctx.record(VariantResult(name, {"kind": name}, list(level * rng.normal(1, noise, 10)), True, "ok"))
        return {"level": level}

    space = ParamSpace((Param("side", "str", "a", choices=("a", "b")),), {"smoke": {}, "quick": {}})
    return SimpleNamespace(ID="calibration", SPACE=space, requires=lambda p: None, run=run)


def test_interleaved_aa_with_drift_cannot_tell_apart(store):
    """A drift of 5% per round: sequential runs (all A, then all B) would call B slower;
    alternating A B / B A rounds spread it over both sides."""
    a, b = execute_ab(_fake_study(0.05), {}, {}, store, rounds=6)
    assert compare.linked(a, b)
    assert [v.extra["side"] for v in a.variants] == ["A", "A"] and b.variants[0].extra["ab_round_sizes"] == [10] * 6
    assert a.outputs["ab"]["pair"] == b.run_id and a.outputs["ab"]["order"] == "".join(round_order(6))
    cmp = compare.compare_runs(a, b)
    assert cmp["mode"] == "interleaved" and {r["verdict"] for r in cmp["rows"]} == {"cannot tell apart"}
    assert all(r["noise"] == "6 paired rounds" for r in cmp["rows"])


def test_interleaved_session_detects_a_real_slowdown_despite_drift(store):
    a, b = execute_ab(_fake_study(0.05, slowdown_b=1.08), {"side": "a"}, {"side": "b"}, store, rounds=6)
    cmp = compare.compare_runs(a, b)
    assert cmp["param_diff"] == [{"param": "side", "a": "a", "b": "b"}]
    assert not any(w.startswith("parameters differ") for w in cmp["warnings"])  # the change under test
    assert {r["verdict"] for r in cmp["rows"]} == {"slower"}
    assert all(r["ci"][0] > 1 for r in cmp["rows"])
    summary = cmp["summary"]  # each round's geometric mean over p and q, t interval over the rounds
    assert summary["geomean_ratio"] == pytest.approx(1.08, rel=0.02) and 1 < summary["ci"][0] < 1.08 < summary["ci"][1]
    assert "--a side=a --b side=b --rounds 6" in a.reproduce


def test_an_aa_session_is_one_unit_of_run_to_run_variation(store):
    """Issue 30: each round of a session counted as a unit, and one 8-round A/A session
    outweighed separate runs. Its rounds share the machine's state: the session (both sides of
    an A/A session, one configuration) is one unit."""
    sessions = [execute_ab(_fake_study(0.0, noise=0.01), {}, {}, store, rounds=4) for _ in range(3)]
    a = sessions[0][0]
    x = _run("20260101-000000-calibration-aaaaaa", {"p": [1e4] * 10}, params=a.params, env=a.env)
    y = _run("20260101-000001-calibration-bbbbbb", {"p": [1.005e4] * 10}, params=a.params, env=a.env)
    history = [r for pair in sessions for r in pair]
    assert "p" not in compare.run_to_run(history[:2], x, y)  # one session: one unit, no spread yet
    noise = compare.run_to_run(history, x, y)
    assert noise["p"]["df"] == 2 and noise["p"]["runs"] == 3  # 3 sessions of 2 x 4 rounds: 2 df


def test_ab_cli_stores_two_linked_runs_and_prints_json(store, capsys):
    code = main(["--store", str(store.path), "ab", "calibration", "--preset", "smoke", "--set", "threads=1",
                 "--rounds", "5", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    assert set(doc) >= {"param_diff", "env_diff", "rows", "summary", "runs"} and doc["mode"] == "interleaved"
    a, b = (store.load(run_id) for run_id in doc["runs"])
    assert compare.linked(a, b) and a.params == b.params
    assert all(sum(v.extra["ab_round_sizes"]) == len(v.samples_ns) == 25 for v in a.variants if v.correct)
    assert "python -m workbench ab calibration" in a.reproduce


def test_ab_cli_refuses_a_bad_side_parameter_and_stores_nothing(store, capsys):
    assert main(["--store", str(store.path), "ab", "calibration", "--b", "repeat=0"]) == 2
    assert "repeat" in capsys.readouterr().err and store.runs() == []


# --- the CLI --------------------------------------------------------------------------------------

def test_compare_json_contract(store, capsys):
    runs = _drifting_runs(2, 0.0, seed=4)
    for rec in runs:
        store.save(rec)
    assert main(["--store", str(store.path), "compare", runs[0].run_id, runs[1].run_id, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert {"param_diff", "env_diff", "rows", "summary"} <= set(doc)
    assert all(r["p_run_to_run"] is None for r in doc["rows"])  # no A/A runs: null, not NaN
    for row in doc["rows"]:
        assert {"variant", "ratio", "ci", "p_adjusted", "verdict"} <= set(row) and len(row["ci"]) == 2


def test_compare_addresses_committed_bundles_by_their_app_ids(store, capsys):
    recs = [r for r in committed_runs("launch-cache")]
    if len(recs) < 2:
        pytest.skip("fewer than two committed launch-cache bundles")
    a, b = recs[0], recs[1]
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id[:-2], "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run_a"] == a.run_id and doc["run_b"] == b.run_id and doc["rows"]


# --- the Runs page --------------------------------------------------------------------------------

def _page(monkeypatch):

    from streamlit.testing.v1 import AppTest

    monkeypatch.setattr("pages._ui.committed", lambda study_id: ([], []))
    return AppTest.from_file(str(ROOT / "pages" / "runs.py"), default_timeout=60)


def test_runs_page_defaults_to_the_most_similar_pair_of_one_study(store, monkeypatch):
    rng = np.random.default_rng(0)
    older = _run("20260101-000000-calibration-aaaaaa", {"x": rng.normal(100, 1, 20)})
    similar = _run("20260101-000001-calibration-bbbbbb", {"x": rng.normal(100, 1, 20)})
    changed = _run("20260101-000002-calibration-cccccc", {"x": rng.normal(100, 1, 20)}, params={"repeat": 64})
    other = _run("20260101-000003-launch-cache-dddddd", {"x": rng.normal(100, 1, 20)}, study="launch-cache")
    for i, rec in enumerate((older, similar, changed, other)):
        rec.created_utc = f"2026-01-01T00:00:0{i}Z"
        store.save(rec)
    at = _page(monkeypatch).run()
    assert not at.exception
    # runs are picked per study: only studies with two runs are offered, A and B among its runs
    assert at.selectbox(key="runs:ab-study").options == ["calibration"]
    a, b = at.selectbox(key="runs:a:calibration"), at.selectbox(key="runs:b:calibration")
    assert a.value == older.run_id and b.value == similar.run_id
    assert len(b.options) == 3 and not any("launch-cache" in o for o in b.options)
    assert any("A/B:" in m.value for m in at.markdown)


def test_runs_page_proposes_nothing_without_two_runs_of_one_study(store, monkeypatch):
    rng = np.random.default_rng(0)
    store.save(_run("20260101-000000-calibration-aaaaaa", {"x": rng.normal(100, 1, 20)}))
    store.save(_run("20260101-000003-launch-cache-dddddd", {"x": rng.normal(100, 1, 20)}, study="launch-cache"))
    at = _page(monkeypatch).run()
    assert not at.exception and not any(s.key and s.key.startswith("runs:a") for s in at.selectbox)
    assert any("No two runs of one study" in c.value for c in at.caption)


def test_cli_compare_finds_aa_runs_in_the_store(store, capsys):
    runs = _drifting_runs(8, 0.05, seed=1)
    a = _with_level(runs[0], 1.0, "20260101-010000-calibration-aaaaaa")
    b = _with_level(runs[0], 1.06, "20260101-010000-calibration-bbbbbb")
    for rec in [*runs[1:], a, b]:
        store.save(rec)
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["verdict"] for r in rows} == {"within run-to-run noise"}
    assert all(r["noise"].startswith("A/A range ") and "7 runs" in r["noise"] for r in rows)


# --- the terminal table and the regression gate (issue 41 item 8, issue 44 item 6) ---------------

def _gate_pair(factor: float, seed: int = 2):
    """A and B of one configuration with A/A history: B's level ``factor`` times A's."""
    runs = _drifting_runs(8, 0.02, seed=seed)
    a = _with_level(runs[0], 1.0, "20260101-010000-calibration-aaaaaa")
    b = _with_level(runs[0], factor, "20260101-010000-calibration-bbbbbb")
    return compare.compare_runs(a, b, runs), a, b, runs


def test_the_gate_fails_on_a_clear_regression_beyond_the_threshold_only():
    slower, *_ = _gate_pair(1.5)
    assert {r["verdict"] for r in slower["rows"]} == {"slower"}
    found = compare.regressions(slower, 0.02)
    # every variant clearly slower by more than 2% (its CI above 1.02), and the geometric mean
    assert {r["variant"] for r in found} == {"a", "b", "c", compare.GEOMEAN}
    assert all(r["ci"][0] > 1.02 for r in found)
    # a threshold the CIs do not clear: no regression, though every verdict is "slower"
    assert compare.regressions(slower, 0.6) == []
    assert compare.gate_text(slower, 0.6).startswith("no clear regression beyond 60%")
    same, *_ = _gate_pair(1.0)
    assert compare.regressions(same, 0.0) == []


def test_an_unconfirmed_slowdown_is_named_but_does_not_fail_the_gate():
    runs = _drifting_runs(2, 0.02, seed=4)
    a = _with_level(runs[0], 1.0, "20260101-010000-calibration-aaaaaa")
    b = _with_level(runs[0], 1.5, "20260101-010000-calibration-bbbbbb")
    cmp = compare.compare_runs(a, b)  # no A/A runs: the run-to-run noise is unknown
    assert {r["verdict"] for r in cmp["rows"]} == {"unconfirmed slower"}
    assert compare.regressions(cmp, 0.02) == []
    assert len(compare.unconfirmed_regressions(cmp, 0.02)) == 3
    text = compare.gate_text(cmp, 0.02)
    assert text.startswith("no clear regression beyond 2%") and "unconfirmed" in text and "ab" in text


@pytest.mark.parametrize("text, value", [("2%", 0.02), ("0.02", 0.02), (" 5 % ".replace(" ", ""), 0.05), (0.1, 0.1)])
def test_thresholds_read_as_a_percentage_or_a_fraction(text, value):
    assert compare.parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["two", "-1%", "inf", "5000%", ""])
def test_a_threshold_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="threshold"):
        compare.parse_threshold(text)


def test_a_run_compared_with_itself_is_refused(store, capsys):
    rng = np.random.default_rng(0)
    a = _run("20260101-000000-calibration-aaaaaa", {"x": rng.normal(100, 1, 20)})
    with pytest.raises(compare.CompareError, match="same run"):
        compare.compare_runs(a, a)
    store.save(a)
    assert main(["--store", str(store.path), "compare", a.run_id, a.run_id]) == 2
    assert "same run" in capsys.readouterr().err


def test_compare_prints_one_terminal_table_then_one_line_each(store, capsys):
    cmp, a, b, history = _gate_pair(1.5)
    for rec in [a, b, *history]:  # the A/A runs of the configuration: the run-to-run noise is known
        store.save(rec)
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id]) == 0
    out = capsys.readouterr().out
    assert not any(mark in out for mark in ("**", "| ", "<details>", "> ", "#"))  # no Markdown
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    assert set(lines[header + 1].replace(" ", "")) == {"-"}  # one aligned table: its rule under the header
    width = {len(line) for line in lines[header + 2:header + 5]}
    assert len(width) == 1  # aligned rows
    assert any(line.startswith("geometric mean") for line in lines)
    after = lines[lines.index("", header):]
    assert all(len(line) < 400 for line in after)  # each warning one line
    assert "1.5" in out or "1.50x slower" in out
    # the Markdown form on request, the gate's exit status
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id, "--format", "md"]) == 0
    assert "**Verdict:**" in capsys.readouterr().out
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id, "--fail-above", "2%"]) == 1
    assert "regression: 4 clearly slower by more than 2%" in capsys.readouterr().out
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id, "--fail-above", "80%"]) == 0
    assert main(["--store", str(store.path), "compare", a.run_id, b.run_id, "--fail-above", "two"]) == 2


def test_a_run_reads_with_the_same_median_ci_in_a_comparison_as_on_its_page():
    from workbench.evidence.tables import variants_table

    cmp, a, b, _ = _gate_pair(1.2)
    page = variants_table(a).set_index("variant")
    for r in cmp["rows"]:
        assert r["median_a_ci"] == pytest.approx([page.loc[r["variant"], "ci_lo_ns"], page.loc[r["variant"], "ci_hi_ns"]])
