"""mc2-split's conclusions: derived gains with CIs, the seed's claims on the committed H200
runs and on a live gloo run, the model floor, the inflation examples, the spread over runs,
per-rank traces and charts that draw."""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest

import studies.mc2_split as study
from studies.mc2_split import seed
from studies.mc2_split.analysis import (contention_factor, current_names, floor_range, floor_rows,
                                         prediction_error, seed_model)
from studies.mc2_split.plan import CostModel, Fit, heuristic, parse_fit
from studies.mc2_split.search import best_split
from studies.mc2_split.simulate import simulate
from studies.mc2_split.spread import across_runs
from workbench.evidence import engine
from workbench.running import runner
from workbench.data.record import RunRecord, VariantResult
from workbench.reading.analysis import analyse, charts_of
from workbench.results.store import Store
from tests.support.committed_claims import analyses
from tests.support.paths import ROOT

BUNDLES = sorted((ROOT / "traces" / "mc2-split").glob("*.bundle.json"))


@pytest.fixture(scope="module")
def committed():
    """Every committed bundle, analysed once per session (shared): run id suffix -> Analysis."""
    return {name.split("-")[-1].removesuffix(".bundle.json"): a for name, a in analyses(study.ID).items()}


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """The cpu preset, live under gloo on 2 processes (a few repetitions): the seed's rule on
    given fits, every rank's trace."""
    tmp = tmp_path_factory.mktemp("mc2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_LOCK", str(tmp / "machine.lock"))
        store = Store(tmp / "results.sqlite")
        rec = runner.execute(study, {"reps": "5", "warmup": "1", "uniform": "2"}, store, preset="cpu")
        store.close()
    return rec


# --- derived quantities ----------------------------------------------------------------------

def _ev(**samples) -> engine.Evidence:
    """A run whose variants were all timed in the same rounds (blocks 0..n-1)."""
    rec = RunRecord("20261127-000000-mc2-split-abcdef", "mc2-split", {}, {"cpu_logical": 64})
    rec.variants = [VariantResult(k.replace("_", "/"), {}, list(v), True, blocks=list(range(len(v))))
                    for k, v in samples.items()]
    return engine.Evidence(rec, study.NULLS)


def test_gain_is_the_seeds_formula_with_a_ci_and_a_status():
    rng = np.random.default_rng(1)
    serial, fused = 1874 + rng.normal(0, 5, 40), 1262 + rng.normal(0, 5, 40)
    ev = _ev(serial=serial, fused=fused, same=serial + rng.normal(0, 5, 40))
    d = ev.gain("serial", "fused", "g")
    assert d.unit == "%" and d.status == "clear" and d.lo < d.point < d.hi and d.covers == "rounds"
    assert d.point == pytest.approx(100 * (1874 - 1262) / 1874, abs=0.5)
    same = ev.gain("serial", "same", "same")
    assert same.status == "inconclusive" and same.why == "the CI includes 0"
    few = _ev(serial=serial[:3], fused=fused[:3]).gain("serial", "fused", "few")
    assert few.status == "inconclusive"  # too few rounds, whatever the CI


def test_prediction_error_ci_comes_from_the_measured_samples_and_the_fits():
    ev = _ev(op=np.full(30, 500e3) + np.random.default_rng(2).normal(0, 2e3, 30))
    d = prediction_error(ev, "op", 550.0, "e")
    assert d.point == pytest.approx(10, abs=0.5) and d.lo < 10 < d.hi and d.status == "clear"
    # fits made in the same run are uncertain too: their refits widen the CI (issue 30); and
    # they were timed in other blocks of the run, whose drift enters (none measured here: at
    # most inconclusive)
    fitted = prediction_error(ev, "op", 550.0, "e", 550.0 + np.random.default_rng(3).normal(0, 20, 200),
                              fits_measured=True)
    assert fitted.hi - fitted.lo > 2 * (d.hi - d.lo) and fitted.point == pytest.approx(d.point)
    assert fitted.status == "inconclusive" and "drift not measured" in fitted.caveat


def test_committed_prediction_errors_carry_the_fits_uncertainty(committed):
    live = committed["cc88d3"].tables["live"]
    fitted = live[live["err_fit"].notna()]
    assert len(fitted) and (fitted["err_fit_covers"] == "samples and the fits").all()


def test_contention_factor_recovers_a_known_factor_and_refuses_one_chunk():
    model = CostModel(parse_fit("16.5,0.192", "row", "m"), parse_fit("47,16", "MiB", "c"), 8192, 2)
    chunks = [512, 896, 896, 896, 896]
    t = simulate(chunks, model, 1.25).makespan_us
    ev = _ev(op=t * 1e3 * (1 + np.random.default_rng(4).normal(0, 0.01, 20)))
    d = contention_factor(ev, "op", chunks, model, "f", fits_measured=False)
    assert d.point == pytest.approx(1.25, abs=0.02) and d.lo < 1.25 < d.hi and d.status == "clear"
    # the fits timed in other blocks of the run: its drift enters, and none was measured here
    assert contention_factor(ev, "op", chunks, model, "f").caveat.startswith("drift not measured")
    assert contention_factor(ev, "op", [4096], model, "f").status == "not meaningful"


# --- the seed's numbers against its own fits ---------------------------------------------------

def test_the_seeds_1262_us_is_a_model_question_whose_floors_range_over_it():
    """Issue 30: the fits through the full-size 803 / 1071 us put the floor at 1,325 us, above
    1262; but the seed never printed its fits, and lines through its stated chunk figures that
    miss the full-size times by up to 15% give floors on both sides of 1262 (60 us + 13.8 us/MiB
    keeps 143 us at 6 MiB, is 12% off 1071 us and gives 1,254 us)."""
    rows = {r["quantity"]: r["value"] for r in floor_rows()}
    lo, hi = floor_range()
    assert rows[seed.FLOOR_RANGE_ROW] == lo and lo < seed.FUSED_US < hi
    example = seed_model(comm=Fit(60.0, 13.8, "MiB"))
    assert example.comm_us(384) == pytest.approx(143, abs=1)
    assert best_split(seed.M, example, 1.0)["makespan_us"] == pytest.approx(1254.1, abs=1)
    assert rows[seed.FLOOR_ROW] == pytest.approx(1324.8, abs=0.5) and rows[seed.FLOOR_ROW] > seed.FUSED_US
    # over every matmul fit the seed's rounded m1 = 768 allows, the floor stays above 1262 us
    assert rows["model floor over the fits the seed's rounding allows"] > seed.FUSED_US
    assert rows["seed's split under the seed's fits, contention 1.15"] == pytest.approx(1498.4, abs=0.5)
    fixed = rows["all-reduce fixed cost per chunk for 1262 us (seed's split, contention 1)"]
    assert 0 < fixed < seed.COMM_FIT.fixed_us
    model = seed_model(comm=Fit(fixed, 16.0, "MiB"))
    assert simulate(seed.CHUNKS, model, 1.0).makespan_us == pytest.approx(seed.FUSED_US, abs=1.0)
    assert math.isnan(rows["all-reduce fixed cost per chunk for 1262 us (seed's split, contention 1.15)"])
    assert rows["contention factor for 1262 us (seed's split)"] < 1


def test_inflation_preset_reproduces_the_seeds_three_gains_with_its_gantt(store):
    rec = runner.execute(study, {}, store, preset="seed-inflation")
    a = analyse(rec, study)
    assert not a.errors
    key = a.tables["key"]
    assert key["gain_us"].tolist() == [100.0, 50.0, -50.0] == key["seed_gain_us"].tolist()
    assert "gain +100 us (seed: +100)" in a.verdict and "gain -50 us (seed: -50)" in a.verdict
    gantt = a.tables["_gantt"]
    assert gantt["split"].nunique() == 4  # serial and the three cases
    assert set(charts_of(a)) == {"gantt"}


# --- claims on the committed H200 runs ---------------------------------------------------------

#: world size 2: 048de1 to 55c30a are the 2x H200 host of 2026-11-24, the last four a 2x H200 host
#: of 2026-11-27 (issue 35; traces/mc2-split/README.md). Their bound is not testable: the seed ran
#: 8 ranks, and a ring all-reduce on 2 moves 0.57 of the bytes per rank it moves on 8 (issue 30:
#: at 4 ranks, scaled by ring traffic, it holds)
WS2 = {"568a86", "9f0d6f", "c13a18", "969945", "0a9041", "048de1", "06da9a", "90f8bb", "55c30a",
       "64be32", "3cc7ba", "d16a75", "30f366"}
#: the runs with A/A null controls (2026-11-27): the others measured no drift between blocks, so
#: every comparison of two blocks in them is at most inconclusive (issue 41)
WITH_NULLS = {"64be32", "3cc7ba", "d16a75", "30f366", "8a08e7", "d6295b", "ccead5", "89c049", "7d11fe"}


def test_every_committed_bundle_has_the_claims_its_data_supports(committed):
    """Issue 41: a run without null controls states no comparison of two blocks (the gain of its
    unpaired best split, the bound, every contention factor: inconclusive, drift not measured);
    in the runs with them the gain holds in direction but never at the seed's size."""
    assert len(committed) == len(BUNDLES) == 27
    for run, a in committed.items():
        assert not a.errors, (run, a.errors)
        status = dict(zip(a.claims["id"], a.claims["status"]))
        assert status["002-split-rule"] == "holds"
        why = a.claims.set_index("id")["why"]
        assert status["002-comm-bound"] == ("not testable here" if run in WS2 else
                                            "holds" if run in WITH_NULLS else "inconclusive"), run
        if run in WS2:
            assert "8 ranks" in why["002-comm-bound"]
        # the best split's gain over serial NCCL: never the seed's 32.7% (every CI below it, the
        # seed's figure named); 8a08e7 (the first 4-rank run of 2026-11-27) includes 0
        assert status["002-gain"] == ("inconclusive" if run not in WITH_NULLS or run == "8a08e7" else
                                      "direction holds"), run
        assert "the seed's 32.7% is outside the live CI" in why["002-gain"], run
        if run not in WITH_NULLS:
            assert "drift not measured" in why["002-gain"]
        seeds = re.search(r"the seed's split on nccl: ([-\d.]+)%", a.claims.set_index("id").loc["002-gain", "live"])
        assert seeds and float(seeds[1]) < 0, run  # the seed's own split on NCCL as shipped: slower than serial
        # a model result whose floors range over 1262 us (was "contradicted" before issue 30)
        assert status["002-1262-reachable"] == "inconclusive" and "model" in why["002-1262-reachable"]
        # judged on the collectives that run beside the matmul (NCCL as shipped serialises behind
        # it); where every factor lies above 1 (8a08e7), at 1.08-1.79x: never the seed's 1.15 alone
        assert status["002-inflation"] == ("direction holds" if run == "8a08e7" else "inconclusive"), run
        assert "NCCL as shipped left out" in why["002-inflation"]


def test_committed_verdict_names_the_key_tables_best_row(committed):
    for run, a in committed.items():
        key = a.tables["key"]
        best = key[key["row"].str.startswith("best split")].iloc[0]
        assert best["variant"] in a.verdict.replace("\\", ""), run
        live = a.tables["live"]
        # a failed check (one, in run 9f0d6f) is shown, with no time and no gain
        failed = live[~live["correct"].astype(bool)]
        assert failed["measured_us"].isna().all() and failed.get("gain", failed["measured_us"]).isna().all()
        searched = {c for c, v in current_names(a.rec).outputs["live"]["by_provider"].items() if v.get("best")}
        assert set(live[live["is_best"]]["provider"]) == searched


def test_spread_over_runs_groups_by_host_and_picks_no_best_of_n(committed):
    """Issue 41: runs of one host are its units, hosts the units across hosts (a 4x H200 VM of
    2026-11-21 and one of 2026-11-27 are two hosts of one fingerprint); no row is the best of
    each run's configurations."""
    spread, per_run = across_runs([a.rec for a in committed.values()])
    assert not spread["config"].str.contains("best of").any()
    persistent = spread[(spread["world_size"] == 4) & (spread["config"] == "triton-persistent+c16")]
    assert persistent["host"].tolist() == ["4x NVIDIA H200 #b13ad3, 2026-11-21", "4x NVIDIA H200 #b13ad3, 2026-11-27",
                                           "all 2 hosts"]
    first, second, both = persistent.to_dict("records")
    # three runs of 2026-11-21 above 20%, five of 2026-11-27 below it
    assert first["runs"] == 3 and first["min_pct"] > 20 and first["target"].startswith("undecided: only 3 runs")
    assert second["runs"] == 5 and second["across_hi"] < 20 and second["target"] == "missed"
    assert both["runs"] == 8 and both["covers"] == "hosts" and both["target"].startswith("undecided: only 2 hosts")
    ws2 = spread[(spread["world_size"] == 2) & (spread["config"] == "triton-pull+c16")].set_index("host")
    assert len(ws2) == 4 and ws2.loc["all 3 hosts", "runs"] == 10
    # every per-run figure is that run's own: one configuration's gain from its own samples
    assert len(per_run) > 27 and per_run.groupby("run_id")["config"].apply(lambda c: c.is_unique).all()


# --- the CPU preset, live ----------------------------------------------------------------------

def test_cpu_preset_fits_make_the_seeds_rule_split(store):
    params = study.SPACE.defaults("cpu")
    study.validate(params)
    mm, comm = study._fits(params)
    plan = heuristic(params["m"], params["k"], study._model(params, mm, comm), rule=params["rule"])
    assert plan.ok and plan.bound == "communication" and len(plan.chunks) >= 3 and sum(plan.chunks) == 4096
    assert study.requires(params) is None


def test_cpu_preset_runs_live_with_every_ranks_trace_aligned(cpu_run):
    rec = cpu_run
    assert rec.status == "complete" and all(v.correct for v in rec.variants)
    names = sorted(n for n, _, _ in rec.attachments)
    assert "serial_default.rank0.json.gz" in names and "serial_default.rank1.json.gz" in names
    a = analyse(rec, study)
    assert not a.errors
    assert "overlap/default/heuristic" in set(a.tables["live"]["variant"])
    spans = a.tables["_timeline_spans"]
    assert set(spans["rank"].dropna().astype(int)) == {0, 1}
    assert a.tables["trace_alignment"]["alignment"].str.contains("gloo:all_reduce").all()
    status = dict(zip(a.claims["id"], a.claims["status"]))
    assert status["002-split-rule"] == "holds" and status["002-1262-reachable"] == "inconclusive"
    assert status["002-comm-bound"] == "not testable here"  # the fits were given, not measured
    # issue 30: the serial op and its splits are timed in rounds (their gains pair by round), and
    # the serial op again with the best split: the run's A/A null control and its drift
    by = {v.variant: v for v in rec.variants}
    assert by["serial/default"].blocks == by["overlap/default/heuristic"].blocks
    assert "aa:serial/default" in by and not set(by["aa:serial/default"].blocks) & set(by["serial/default"].blocks)
    assert a.tables["drift"]["measured"].iloc[0] and len(a.tables["nulls"]) == 1
    live = a.tables["live"].set_index("variant")
    assert live["gain_paired"].dropna().astype(bool).all()
    # the gain and the inflation are whatever this machine's samples support: the status
    # follows the derived figure's CI (a loaded 2-core machine can put either anywhere)
    derived = a.tables["derived"].set_index("name")
    for cid, name, null in (("002-gain", "gain of overlap/default/best over serial gloo", 0.0),
                            ("002-inflation", "contention factor of overlap/default/heuristic", 1.0)):
        status = a.claims.set_index("id").loc[cid, "status"]
        if name not in derived.index:  # the search kept the op unsplit: the best split is another name
            continue
        d = derived.loc[name]
        expected = ("not testable here" if d["status"] == "not meaningful" else
                    "inconclusive" if d["status"] == "inconclusive" else
                    "holds" if d["lo"] > null else "contradicted")
        assert status == expected, (cid, status, dict(d))
    timeline = charts_of(a)["measured_timeline"].to_dict()
    assert "2 ranks aligned (" in str(timeline)
    assert "by the end of each rank's first marker (gloo:all_reduce)" in str(timeline)


# --- Markdown and charts -------------------------------------------------------------------------

def test_derivation_renders_without_emphasis(store):
    from markdown_it import MarkdownIt

    rec = runner.execute(study, {}, store, preset="seed-example")
    text = "\n\n".join(study.report_sections(study.analyze(rec)))
    assert "`x = 384 × 8192 × 2 B = 6 MiB;" in text
    html = MarkdownIt().render(text)
    assert "<em>" not in html and "<strong>bound</strong>" in html
    assert re.search(r"lies below</strong>|<strong>lies below", html)


def _png(chart):
    import vl_convert as vlc
    from PIL import Image

    return Image.open(io.BytesIO(vlc.vegalite_to_png(chart.to_json(), scale=1))).convert("L")


def test_committed_run_charts_draw_at_a_readable_size(committed):
    a = committed["cc88d3"]
    charts = charts_of(a)
    assert {"key", "configs", "fits", "gantt", "splits", "measured_timeline", "live"} <= set(charts)
    for name, chart in charts.items():
        img = _png(chart)
        assert 300 <= img.width <= 1400 and 150 <= img.height <= 1200, (name, img.size)
        # marks, not only axes: a good share of the pixels is neither white nor near-white
        dark = (np.asarray(img) < 200).mean()
        assert dark > 0.01, (name, dark)
    key = str(charts["key"].to_dict())
    assert "1262" in key and "seed's Ascend NPU" in key
    # the persistent kernel's profiled call waited 15 s (one rank compiling?): flagged, and the
    # timeline is drawn to the other calls' length instead of squeezing them to nothing
    ov = a.tables["trace_overlap"].set_index("trace")
    assert ov.loc["best triton-persistent+c16", "stalled"] and not ov.loc["best default", "stalled"]
    assert "1 call(s) stalled under the profiler (up to 15.2 s)" in str(charts["measured_timeline"].to_dict())


def test_runs_of_one_minute_and_parameters_keep_apart_in_the_run_picker(monkeypatch, tmp_path):
    # 90f8bb and 55c30a: same parameters, machine and minute; the picker flipped from one to the
    # other on the next rerun while both had one title
    from tests.support.pagetest import study_app

    monkeypatch.setenv("WORKBENCH_STORE", str(tmp_path / "wb.sqlite"))
    at = study_app("mc2-split", timeout=120)
    at.query_params["run"] = "20261124-071742-mc2-split-55c30a"
    at.run()
    picker = next(sb for sb in at.selectbox if sb.label.startswith("Run ("))
    assert len(set(picker.options)) == len(picker.options)
    assert picker.value == "20261124-071742-mc2-split-55c30a" and picker.format_func(picker.value).endswith("55c30a")
