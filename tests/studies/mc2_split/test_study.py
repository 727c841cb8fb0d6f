"""mc2-split: the seed's split rule, the pipeline simulator, the exact search, validation."""

from __future__ import annotations

import itertools
import random
import shlex

import pytest
import torch

import studies.mc2_split as study
from studies.mc2_split.analysis import trace_tables
from tests.support.interpreted import run_interpreted
from studies.mc2_split.plan import CostModel, Fit, fit_points, heuristic, parse_fit, uniform_chunks
from studies.mc2_split.search import _step, best_split
from studies.mc2_split.simulate import fit_contention, simulate
from workbench.running import runner
from workbench.seam.study import ParamError
from tests.support.paths import ROOT


def seed_model(mm="16.5,0.192", comm="47,16", n=8192, dbytes=2) -> CostModel:
    return CostModel(parse_fit(mm, "row", "mm_fit"), parse_fit(comm, "MiB", "comm_fit"), n, dbytes)


def test_seed_example_reproduced_step_by_step():
    plan = heuristic(4096, 3072, seed_model())
    assert plan.ok and plan.bound == "communication"
    assert plan.chunks == [512, 896, 896, 896, 896]
    steps = {s["step"]: s for s in plan.steps}
    assert round(steps["bound"]["mm_full_us"]) == 803 and round(steps["bound"]["comm_full_us"]) == 1071
    assert (steps["short block"]["a"], steps["short block"]["b"], steps["short block"]["c"]) == (171, 192, 384)
    assert steps["short block"]["m0"] == 384 and "min, which gives 171" in steps["short block"]["text"]
    assert steps["short block times"]["mib"] == 6 and round(steps["short block times"]["t1_us"]) == 164
    assert steps["balance"]["m1"] == 768
    assert steps["count"]["count"] == 4 and round(steps["count"]["count_raw"], 2) == 4.83
    assert steps["adjust long"]["m1_even"] == 928 and steps["adjust long"]["m1"] == 896
    assert steps["adjust short"]["m0"] == 512


def test_text_rule_takes_the_minimum():
    plan = heuristic(4096, 3072, seed_model(), rule="text")
    assert plan.ok and plan.steps[1]["m0"] == 171
    assert plan.chunks != [512, 896, 896, 896, 896] and sum(plan.chunks) == 4096


def test_compute_bound_puts_the_short_block_last_and_balances_comm():
    model = seed_model(mm="16.5,0.5", comm="47,4")
    plan = heuristic(4096, 3072, model)
    assert plan.ok and plan.bound == "compute"
    assert plan.chunks[-1] == plan.m0 and plan.chunks[:-1] == [plan.m1] * plan.count
    bal = next(s for s in plan.steps if s["step"] == "balance")
    t0 = model.mm_us(384) * 1.15
    assert model.comm_us(bal["m1_raw"]) == pytest.approx(t0)
    # all-gather then matmul: the exposed ends swap, so does the short block
    assert heuristic(4096, 3072, model, comm_first=True).chunks[0] == plan.m0


@pytest.mark.parametrize("m, mm, comm, step, words", [
    (300, "16.5,0.192", "47,16", "short block", "smaller than the short block"),
    (4096, "16.5,0.192", "47,16000", "count", "longer than the"),
    (4096, "-200,0.192", "-300,16", "short block times", "non-positive"),
    (4096, "16.5,-0.1", "47,16", "fits", "does not grow"),
    (4096, "200,0.05", "47,16", "balance", "no positive solution"),
])
def test_bad_fits_or_shapes_name_the_failed_step_and_leave_the_unsplit_case(m, mm, comm, step, words):
    model = seed_model(mm, comm)
    plan = heuristic(m, 3072, model)
    assert not plan.ok and plan.failed_step == step and words in plan.reason
    assert plan.chunks == [m]
    assert simulate(plan.chunks, CostModel(Fit(16.5, 0.192, "row"), Fit(47, 16, "MiB"), 8192, 2)).gain == 0


def test_uniform_chunks_cover_m_on_tiles():
    assert uniform_chunks(4096, 4) == [1024] * 4
    assert uniform_chunks(1000, 3) == [384, 384, 232]
    assert uniform_chunks(256, 3) is None


def test_simulator_matches_hand_schedule_without_contention():
    model = seed_model()
    s = simulate([2048, 2048], model, 1.0)
    mm, comm = model.mm_us(2048), model.comm_us(2048)
    assert comm > mm  # communication-bound: the second matmul hides under the first all-reduce
    assert s.makespan_us == pytest.approx(mm + 2 * comm)
    assert s.serial_us == pytest.approx(model.mm_us(4096) + model.comm_us(4096))


@pytest.mark.parametrize("seed", range(20))
def test_dp_step_agrees_with_event_simulation(seed):
    rng = random.Random(seed)
    model = seed_model(f"{rng.uniform(0, 50)},{rng.uniform(0.05, 0.5)}", f"{rng.uniform(0, 80)},{rng.uniform(2, 30)}")
    chunks = [rng.choice([128, 256, 384, 512, 1024]) for _ in range(rng.randint(1, 7))]
    f = (rng.uniform(1, 2), rng.uniform(1, 2))
    for comm_first in (False, True):
        c = w = 0.0
        for ch in chunks:
            x, y = (model.comm_us(ch), model.mm_us(ch)) if comm_first else (model.mm_us(ch), model.comm_us(ch))
            f1, f2 = (f[1], f[0]) if comm_first else f
            c, w = _step(c, w, x, y, f1, f2)
        assert c + w == pytest.approx(simulate(chunks, model, f, comm_first).makespan_us, rel=1e-9)


def _compositions(tiles: int):
    for cuts in itertools.product([0, 1], repeat=tiles - 1):
        sizes, run = [], 1
        for cut in cuts:
            if cut:
                sizes.append(run)
                run = 1
            else:
                run += 1
        yield sizes + [run]


@pytest.mark.parametrize("mm, comm, f", [("16.5,0.192", "47,16", 1.15), ("30,0.5", "10,4", 1.3),
                                         ("5,0.3", "60,20", (1.05, 1.6))])
def test_best_split_is_exact_against_brute_force(mm, comm, f):
    model = seed_model(mm, comm)
    m = 1280  # 10 tiles: 512 chunkings
    brute = min(simulate([t * 128 for t in c], model, f).makespan_us for c in _compositions(10))
    best = best_split(m, model, f, max_chunks=10)
    assert best["makespan_us"] == pytest.approx(brute, rel=1e-9)
    assert sum(best["chunks"]) == m
    assert best["makespan_us"] <= simulate(heuristic(m, 3072, model).chunks, model, f).makespan_us + 1e-9


def test_best_split_beats_the_seed_heuristic_on_the_seed_example():
    model = seed_model()
    best = best_split(4096, model, 1.15)
    heur = simulate([512, 896, 896, 896, 896], model, 1.15).makespan_us
    assert best["makespan_us"] < heur and best["chunks"] != [512, 896, 896, 896, 896]


def test_fits_line_and_hinge():
    line = fit_points([256, 512, 1024, 2048], [66, 115, 213, 410], "row")
    assert line.knot is None and line.slope == pytest.approx(0.1919, abs=2e-3)
    xs = [256, 512, 768, 1024, 2048, 4096]
    ys = [50.0 if x <= 1024 else 50 + 0.2 * (x - 1024) for x in xs]  # flat, then rising
    hinge = fit_points(xs, ys, "row")
    assert hinge.knot == 1024 and hinge(3000) == pytest.approx(50 + 0.2 * 1976, rel=1e-6)
    assert hinge.inverse(hinge(3000)) == pytest.approx(3000)


def test_fit_contention_recovers_a_known_factor():
    model = seed_model()
    runs = [(c, simulate(c, model, (1.3, 1.1)).makespan_us) for c in
            ([2048, 2048], [1024] * 4, [512] * 8, [512, 896, 896, 896, 896])]
    fit = fit_contention(runs, model)
    assert fit["pair_worst_err"] < 0.005


def test_cli_shaped_run_with_fits_and_no_live_run(store):
    rec = runner.execute(study, {"m": "4096", "k": "3072", "n": "8192", "dtype": "float16", "mm_fit": "16.5,0.192",
                                 "comm_fit": "47,16", "contention": "1.15"}, store)
    out = rec.to_json()["outputs"]
    assert out["chunks"] == [512, 896, 896, 896, 896] and rec.variants == []
    assert out["best"]["chunks"] and out["predicted"]["best_us"] < out["predicted"]["heuristic_us"]
    assert "live" not in out
    tables = study.analyze(rec)
    assert {"derivation", "simulated", "_gantt", "key", "seed_floor"} <= set(tables)
    text = "\n".join(study.report_sections(tables))
    assert "512, 896, 896, 896, 896" in text and "m0 = max(a, b, c) = 384" in text
    for chart in study.charts(tables).values():
        chart.to_dict()


def test_reproduce_commands_of_runs_stored_before_the_renames_still_read(capsys):
    """The committed runs' reproduce commands say --set comms=... (now providers) and --set
    seed=... (now rng_seed): both still resolve, each with a deprecation line."""
    from workbench.cli import main
    from workbench.results.store import committed_runs

    old = [r for r in committed_runs(study.ID) if "--set comms=" in r.reproduce and "--set seed=" in r.reproduce]
    assert old, "no committed mc2-split run with the old names left to check"
    for rec in old:
        sets = shlex.split(rec.reproduce)[shlex.split(rec.reproduce).index("mc2-split") + 1:]
        values = study.SPACE.parse_sets(v for flag, v in zip(sets[::2], sets[1::2]) if flag == "--set")
        params = study.SPACE.resolve(values)
        assert params["providers"] == values["comms"].split(",") and params["rng_seed"] == int(values["seed"])
        assert {line.split("'")[1] for line in study.SPACE.deprecated(values)} == {"comms", "seed"}
    # on the command line: read under the new name, said to be old (m=0 then stops it as bad input)
    assert main(["run", "mc2-split", "--set", "comms=default", "--set", "m=0"]) == 2
    err = capsys.readouterr().err
    assert "deprecated: parameter 'comms' is now 'providers'" in err and "parameter 'm'" in err and "unknown" not in err


def test_failed_split_still_simulates_unsplit(store):
    rec = runner.execute(study, {"m": "256", "mm_fit": "16.5,0.192", "comm_fit": "47,16"}, store)
    assert rec.outputs["chunks"] is None and rec.outputs["plan"]["failed_step"] == "short block"
    sims = {s["split"]: s for s in rec.outputs["simulated"]}
    assert sims["unsplit"]["gain"] == 0


def test_negative_fitted_time_says_why_the_best_split_was_not_searched(store):
    # CostMM(128 rows) = -50 + 0.192*128 < 0; the heuristic's own blocks (384+ rows) stay positive.
    rec = runner.execute(study, {"mm_fit": "-50,0.192", "comm_fit": "47,16"}, store)
    out = rec.outputs
    assert out["best"] is None and "non-positive time for one 128-row tile" in out["best_skipped"]
    assert out["best_skipped"] in out["warnings"]
    assert "non-positive time for one 128-row tile" in "\n".join(study.report_sections(study.analyze(rec)))


def test_search_refuses_a_falling_fit():
    from studies.mc2_split.plan import CostModel, Fit
    from studies.mc2_split.search import unsearchable

    falling = CostModel(Fit(5, 0.02, "row"), Fit(1000, -400, "MiB"), 256, 4)
    assert unsearchable(falling) == "a fit does not grow with size"
    assert unsearchable(CostModel(Fit(5, 0.02, "row"), Fit(50, 100, "MiB"), 256, 4)) is None


@pytest.mark.parametrize("values, param, fragment", [
    ({"mm_fit": "16.5"}, "mm_fit", "fixed_us,us_per_row"),
    ({"mm_fit": "16.5,0.2"}, "comm_fit", "both fits or neither"),
    ({"live": "off"}, "live", "must be measured"),
    ({"op": "allgather", "backend": "gloo", "dtype": "float32"}, "op", "all-reduce only"),
    ({"backend": "gloo", "dtype": "float16"}, "dtype", "use dtype=float32"),
    ({"backend": "gloo", "providers": "ce"}, "providers", "need NCCL"),
    ({"backend": "gloo", "m": "100", "points": "128"}, "points", "exceed M"),
])
def test_validation_names_the_parameter(values, param, fragment):
    with pytest.raises(ParamError) as exc:
        study.validate(study.SPACE.resolve(values))
    assert exc.value.param == param and fragment in str(exc.value)


def test_too_few_processes_or_gpus_is_refused_before_starting(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    reason = study.requires(study.SPACE.resolve({"backend": "gloo", "world_size": "4"}))
    assert "need 4 CPU cores" in reason and "has 2" in reason
    monkeypatch.setattr(study, "_cuda_count", lambda: 1)
    reason = study.requires(study.SPACE.resolve({"backend": "nccl", "world_size": "2"}))
    assert "needs 2 GPUs" in reason and "has 1" in reason
    assert study.requires(study.SPACE.resolve({"mm_fit": "1,1", "comm_fit": "1,1", "world_size": "8"})) is None


# --- the Triton collectives' kernels under the interpreter -----------------------------------

TWO_SHOT = {
    # uneven blocks, a chunk smaller than the world (empty blocks), several counter rounds
    "ws3-uneven": dict(world=3, rows=20, n=24, chunks=[2, 7, 5]),
    # more elements than one pass of the grid: every program loops
    "ws4-loop": dict(world=4, rows=64, n=64, chunks=[16, 40, 8], ctas=1),
    "ws2-fp32": dict(world=2, rows=8, n=16, chunks=[8], dtype="float32"),
    "peer-missing": dict(world=3, rows=8, n=16, chunks=[8], skip_push_from=1, max_spins=5),
}
TWO_SHOT.update({f"{kind}-{k}": dict(v, **{kind: True}) for kind in ("pull", "persistent")
                 for k, v in list(TWO_SHOT.items())})


@pytest.fixture(scope="module")
def two_shot():
    """All scenarios in one child process."""
    return dict(zip(TWO_SHOT, run_interpreted("studies.mc2_split.emulate", list(TWO_SHOT.values()))))


@pytest.mark.parametrize("name", ["ws3-uneven", "ws4-loop", "ws2-fp32",
                                  "pull-ws3-uneven", "pull-ws4-loop", "pull-ws2-fp32",
                                  "persistent-ws3-uneven", "persistent-ws4-loop", "persistent-ws2-fp32"])
def test_two_shot_kernel_reduces_every_chunk_with_emulated_peers(two_shot, name):
    res, sc = two_shot[name], TWO_SHOT[name]
    assert res["ok"], res
    # push: every program of every peer arrived once per chunk; pull: one arrival per peer per
    # chunk; persistent: one per rank, this one included; nothing else touched the counters
    arrivals = sc["world"] if sc.get("persistent") else (sc["world"] - 1) * (1 if sc.get("pull") else sc.get("ctas", 2))
    assert res["counters"] == [len(sc["chunks"]) * arrivals] * sc["world"]


@pytest.mark.parametrize("name, counters", [("peer-missing", [2, 4, 2]), ("pull-peer-missing", [1, 2, 1]),
                                                  ("persistent-peer-missing", [2, 2, 2])])
def test_two_shot_wait_gives_up_and_the_check_fails_when_a_peer_never_arrives(two_shot, name, counters):
    res = two_shot[name]
    assert not res["ok"] and res["counters"] == counters, res


def test_two_shot_refuses_mismatched_lists():
    from kernels.triton.allreduce import two_shot, two_shot_pull

    block = torch.zeros(4, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match="one push, counter, partial and output per peer"):
        two_shot([], [], torch.zeros(1, dtype=torch.int64), 0, block, [block], [block], 1)
    with pytest.raises(ValueError, match="contiguous tensors of one shape"):
        two_shot([(block, block)], [torch.zeros(1, dtype=torch.int64)], torch.zeros(1, dtype=torch.int64), 0, block,
                 [block.t()], [block], 1)
    with pytest.raises(ValueError, match="one counter, peer block and output per peer"):
        two_shot_pull([], torch.zeros(1, dtype=torch.int64), 0, block, [block], [block], 1)


@pytest.mark.multigpu
def test_nccl_variants_are_correct_on_two_gpus(store):
    rec = runner.execute(study, {"backend": "nccl", "world_size": "2", "m": "1000", "k": "512", "n": "1024",
                                 "providers": "default,limited,ce,ce-oneshot,triton,triton-pull,triton-persistent", "carveout": "0,8", "points": "256,512",
                                 "uniform": "3", "reps": "3", "warmup": "1"}, store)
    assert rec.status == "complete" and rec.variants
    assert all(v.correct for v in rec.variants), [v.check for v in rec.variants if not v.correct]
    # the persistent all-reduce's fallback never gave up waiting (a lost arrival); early stops of
    # its optimistic launch (an op partly serialised) are allowed: the sums are checked above
    persistent = [v for v in rec.variants if "triton-persistent" in v.variant]
    assert persistent and all((v.extra or {}).get("persistent_wait_timeouts", 0) == 0 for v in persistent)


def test_page_shows_the_verdict_and_the_spread_over_committed_runs(store):

    from streamlit.testing.v1 import AppTest

    runner.execute(study, {"mm_fit": "16.5,0.192", "comm_fit": "47,16"}, store)
    page = ROOT / "pages" / "mc2_split.py"
    at = AppTest.from_file(str(page), default_timeout=90).run()
    assert not at.exception
    assert any("No split beats 1,324.8 us" in m.value for m in at.markdown)
    shown = next(s for s in at.selectbox if s.label.startswith("Run (")).value
    at.session_state[f"mc2-split:tabs:{shown}"] = "Details"  # the tabs are lazy: open the page's own
    at.run()
    assert any("Across runs" in h.value for h in at.subheader)


def test_measured_overlap_from_a_gpu_like_profiler_trace(tmp_path):
    import gzip
    import json

    from workbench.data.record import RunRecord

    def kernel(name, tid, ts, dur):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": tid, "ts": ts, "dur": dur, "args": {}}

    events = [kernel("nvjet_hsh_256x128_2cta", 7, 0.0, 100.0), kernel("nvjet_hsh_256x128_2cta", 7, 100.0, 100.0),
              kernel("ncclDevKernel_AllReduce_Sum_f16_RING_LL", 20, 100.0, 150.0),
              kernel("ncclDevKernel_AllReduce_Sum_f16_RING_LL", 20, 250.0, 150.0),
              {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP", "pid": 0, "tid": 21, "ts": 150.0, "dur": 10.0}]
    data = gzip.compress(json.dumps({"traceEvents": events}).encode())
    rec = RunRecord(run_id="r", study=study.ID, params=study.SPACE.defaults(), env={},
                    attachments=[("best_default.json.gz", "trace/chrome-json", data)])
    tables = trace_tables(rec)
    spans, summary = tables["_measured_timeline"], tables["trace_overlap"]
    assert (spans.groupby("engine").size().to_dict()) == {"compute": 2, "comm": 3}
    row = summary.iloc[0]
    assert row["trace"] == "best default" and row["span_us"] == pytest.approx(400)
    assert row["compute_busy_us"] == pytest.approx(200) and row["comm_busy_us"] == pytest.approx(300)
    assert row["overlap_us"] == pytest.approx(100)


def test_benchmark_run_without_gpus_shows_the_committed_runs_and_refuses_bad_parameters(store, capsys):
    from benchmarks._run import run_benchmark
    from workbench.results.store import committed_runs

    shown = []
    status = run_benchmark(study, {"backend": "nccl", "live": "on", "world_size": "2"},
                           lambda rec: shown.append(rec.run_id) or True, unavailable_status=7)
    if torch.cuda.device_count() < 2:
        assert status == 7 and shown == [r.run_id for r in committed_runs(study.ID)] and shown
        assert "cannot run here" in capsys.readouterr().out
    assert run_benchmark(study, {"world_size": "1"}, lambda rec: True) == 2
    assert "parameter 'world_size'" in capsys.readouterr().err


def test_chunk_lists_fold_runs_of_one_size():
    from studies.mc2_split.plan import short_chunks

    assert short_chunks("128," * 29 + "384") == "128 x 29, 384"
    assert short_chunks("[512, 896, 896, 896, 896]") == "512, 896 x 4"
    assert short_chunks("4096") == "4096" and short_chunks("a,b") == "a,b"


def test_a_gain_over_the_serial_twin_names_the_twin_and_its_time():
    """The key table's gain is over serial/default's twin timed in the same rounds where there
    is one; under load the two serial timings differ widely, so the cell says which one."""
    from studies.mc2_split.analysis import _gain_cell

    row = {"gain": 40.3, "gain_lo": 30.9, "gain_hi": 52.7, "gain_status": "inconclusive",
           "gain_base": "aa:serial/default", "gain_base_us": 1540.2}
    assert _gain_cell(row) == "+40.3% [+30.9, +52.7] (inconclusive) over aa:serial/default, timed in the same rounds: 1,540.2 us"
    assert _gain_cell(row | {"gain_base": "serial/default"}) == "+40.3% [+30.9, +52.7] (inconclusive)"
