"""cpu-reduction study: programs, validation, correctness checks, failures, smoke run, analysis."""

from __future__ import annotations

import json

import numpy as np
import pytest

import studies.cpu_reduction as study
from kernels.iree.sum_programs import Program, aligned_tile, program
from studies.cpu_reduction import analysis, data, iree_tools, measure, plan, profiles
from workbench.running import runner
from workbench.reading.analysis import analyse
from workbench.running.harness import ExternalCommandError
from workbench.data.record import RunRecord, VariantResult
from workbench.seam.study import ParamError, validate
from tests.support.paths import DATA, ROOT

TRACE = DATA / "iree_sum_c8" / "sum_c8.ireeperf.jsonl"
TRACY = ROOT / "traces" / "examples" / "iree_sum_c8_50it.tracy"


def test_split_program_shapes():
    p = program(1_000_000, 8, "even")
    assert (p.m, p.padded_n, p.pad, p.dispatches, p.shards) == (125_000, 1_000_000, 0, 2, 8)
    assert "tensor.pad" not in p.mlir and "tensor<8x125000xf32>" in p.mlir
    q = program(1001, 4, "even")  # 4 does not divide 1001: pad to 4 * 251
    assert (q.m, q.padded_n, q.pad) == (251, 1004, 3)
    assert "high[3]" in q.mlir and "tensor<4x251xf32>" in q.mlir
    assert program(5000, 1).dispatches == 1
    with pytest.raises(ValueError, match="chunks"):
        program(10, 11)


def test_aligned_split_is_the_seeds_c8_fixed():
    """1M = 8 x 124,992 + 64 (the seed's 'c=8 fixed' tiles); c=2 tiles exactly; partial-tile has 9 shards."""
    a = program(1_000_000, 8, "aligned")
    assert (a.m, a.rem, a.shards, a.pad, a.dispatches) == (124_992, 64, 8, 0, 2)
    assert a.m % 16 == 0 and "split_reduction = [124992 : index]" in a.mlir and "[999936]" in a.mlir
    assert a.label == "8 x 124,992 + 64 in dispatch 1"
    b = program(1_000_000, 2, "aligned")
    assert (b.m, b.rem) == (500_000, 0) and "extract_slice" not in b.mlir
    s = program(1_000_000, 8, "partial-tile")
    assert (s.shards, s.m) == (9, 124_992) and s.label == "9 tiles of 124,992 (last 64)"
    assert aligned_tile(100, 8) == 0
    with pytest.raises(ValueError, match="16"):
        program(100, 8, "aligned")


def test_no_split_template_is_the_seeds_program():
    """kernels/iree/sum_1m.mlir is the seed's program verbatim; the template must stay it at N = 1M."""
    from kernels.iree.sum_programs import HERE

    ours = [line for line in program(1_000_000, 1).mlir.splitlines() if not line.startswith("//")]
    assert ours == (HERE / "sum_1m.mlir").read_text().splitlines()


@pytest.mark.parametrize("n,c,split", [(1000, 3, "even"), (4099, 7, "even"), (2048, 1, "aligned"),
                                       (1000, 3, "aligned"), (4099, 7, "aligned"), (4099, 7, "partial-tile"),
                                       (4096, 4, "aligned")])
def test_compiled_programs_sum_exactly_and_have_the_written_dispatches(tmp_path, n, c, split):
    prog = program(n, c, split)
    mod = iree_tools.compile_program(prog)
    assert mod.info["dispatches"] == prog.dispatches
    if prog.pad:
        assert mod.info["copies"] >= 1  # IREE 3.13 materialises the pad as a copy
    if split == "aligned":
        assert mod.info["copies"] == 0  # the slices of the aligned split are views, never copies
    x = data.make_input(n, seed=3)
    np.save(tmp_path / "x.npy", x)
    value = iree_tools.run_module(mod.vmfb, tmp_path / "x.npy", "local-task", 2)
    assert data.check(value, data.reference(x))[0]


def test_dispatch_names_come_whole_from_the_module_json():
    """The console listing truncates long names ('...'); the flatbuffer JSON has them whole."""
    mod = iree_tools.compile_program(program(1_000_000, 8, "aligned"))
    assert mod.info["dispatch_names"] == ["sum_dispatch_0_reduction_124992_f32", "sum_dispatch_1_reduction_64_f32"]


def test_compile_cache_is_reused(tmp_path):
    prog = program(4096, 2)
    first = iree_tools.compile_program(prog, cache_dir=tmp_path)
    second = iree_tools.compile_program(prog, cache_dir=tmp_path)
    assert not first.info["cached"] and second.info["cached"] and first.vmfb == second.vmfb
    other = iree_tools.compile_program(prog, flags=("--iree-opt-level=O1",), cache_dir=tmp_path)
    assert other.vmfb != first.vmfb  # flags are part of the key


def test_runtime_only_machine_uses_modules_compiled_elsewhere(tmp_path, monkeypatch):
    prog = program(4096, 2)
    flags = iree_tools.seed_flags("x86-64-v3")
    built = iree_tools.compile_program(prog, flags, cache_dir=tmp_path)
    monkeypatch.setattr(iree_tools, "compiler_installed", lambda: False)
    found = iree_tools.compile_program(prog, flags, cache_dir=tmp_path)
    assert found.vmfb == built.vmfb and found.info["cached"] and "x86-64-v3" in " ".join(found.info["flags"])
    with pytest.raises(iree_tools.NotPrecompiled, match="pip install iree-base-compiler"):
        iree_tools.compile_program(prog, iree_tools.seed_flags("x86-64-v4"), cache_dir=tmp_path)
    assert iree_tools.not_precompiled([(4096, 2, "aligned"), (4096, 1, None)], "x86-64-v3", tmp_path) == [
        "N=4096 c=1 (no split)"]
    monkeypatch.setattr(iree_tools, "CACHE_DIR", tmp_path)
    params = study.SPACE.resolve({"n": 4096, "chunks": [2], "workers": [1], "experiments": ["grid"],
                                  "providers": ["iree-bench"], "target_cpu": "x86-64-v3"})
    assert study.requires(params) is None
    reason = study.requires(params | {"chunks": [1, 2]})
    assert "iree-base-compiler is not installed" in reason and "N=4096 c=1" in reason


def test_inputs_make_every_element_count():
    x = data.make_input(10_000, seed=1)
    assert x.dtype == np.float32 and np.all(x != 0) and np.all(np.abs(x) <= 8)
    ref = data.reference(x)
    assert data.check(float(np.float32(x.sum())), ref)[0]
    assert not data.check(ref - x[-1], ref)[0]  # a dropped tail element is caught
    assert "WRONG" in data.check(ref + 1, ref)[1]


def test_wrong_kernel_is_recorded_as_failed_without_samples(tmp_path):
    good = program(2048, 1)
    bad = Program(2048, 1, 2048, 2048, good.mlir.replace("arith.constant 0.0", "arith.constant 1.0"))
    mod = iree_tools.compile_program(bad, cache_dir=tmp_path)
    x = data.make_input(2048, seed=0)
    np.save(tmp_path / "x.npy", x)
    res = measure.iree_bench(plan.Point("iree-bench", 2048, 1, 1), mod, tmp_path / "x.npy", data.reference(x),
                             repeat=3, min_time_s=0.001)
    assert not res.correct and res.samples_ns == [] and "WRONG" in res.check


def test_compile_failure_shows_iree_text_and_command(tmp_path):
    broken = Program(16, 1, 16, 16, "func.func @sum(%x: tensor<16xf32>) -> tensor<f32> { bogus }")
    with pytest.raises(ExternalCommandError) as info:
        iree_tools.compile_program(broken, cache_dir=tmp_path)
    text = str(info.value)
    assert "iree-compile" in text and "error" in text.lower()


def test_validation_names_the_parameter(monkeypatch):
    with pytest.raises(ParamError, match="'chunks'.*larger than n=2000"):
        validate(study, {"n": 2000, "chunks": [1, 4096]})
    with pytest.raises(ParamError, match="'workers'.*beyond"):
        validate(study, {"workers": [1, study.CORES + 1]})
    with pytest.raises(ParamError, match="'profile_workers'.*beyond"):
        validate(study, {"profile_workers": [study.CORES + 1]})
    with pytest.raises(ParamError, match="'sizes'.*smaller than the largest chunk"):
        validate(study, {"chunks": [1, 4096], "sizes": [2048, 8192], "split": ["even"]})
    with pytest.raises(ParamError, match="'split'.*at least 16"):
        validate(study, {"chunks": [1, 512], "sizes": [4096], "experiments": ["sizes"]})
    with pytest.raises(ParamError, match="'target_cpu'"):
        validate(study, {"target_cpu": "x86; rm -rf /"})
    with pytest.raises(ParamError, match="'n'"):
        validate(study, {"n": 10})
    monkeypatch.setattr(study, "_mem_available_bytes", lambda: 100 << 20)
    with pytest.raises(ParamError, match="'n'.*GiB"):
        validate(study, {"n": "64Mi", "experiments": ["grid"]})


def test_declared_sweep_covers_every_experiment_without_duplicates():
    params = study.SPACE.resolve({"n": 4096, "chunks": [1, 2], "workers": [1, 2], "sizes": [4096, 8192],
                                  "experiments": ["grid", "sizes", "grain", "alloc", "forkjoin"],
                                  "grain_sizes": [16_384, 32_768], "alloc_sizes": [4096]})
    pts = study.points(params)
    names = [p.name for p in pts]
    assert len(names) == len(set(names))
    assert {p.w for p in pts if p.provider in ("numpy", "iree-sync")} == {1}
    assert all(p.c is None for p in pts if p.provider.startswith("torch") or p.provider == "numpy")
    assert "iree-task/n=8192/c=2/aligned/w=2" in names and "iree-task/n=8192/c=2/aligned/w=1" not in names
    assert {"torch/n=32768/w=1", "torch/n=32768/w=2"} <= set(names)  # grain at w=1 and the largest w
    assert {"alloc:torch/n=4096/w=1", "alloc:torch-out/n=4096/w=1"} <= set(names)
    assert {"forkjoin:torch/n=32768/w=1", "forkjoin:torch/n=32768/w=2"} <= set(names)
    assert {"iree-bench/n=32/c=2/aligned/w=1", "iree-bench/n=32/c=2/aligned/w=2", "iree-bench/n=32/c=1/w=1"} <= set(names)
    assert all(set(p.params) >= {"provider", "n", "c", "split", "w"} for p in pts)


def test_interleaved_rounds_pair_samples_and_keep_failed_checks_out():
    x = data.make_input(4096, seed=0)
    pts = [plan.Point("torch", 4096, None, 1, experiment="alloc"),
           plan.Point("torch-out", 4096, None, 1, experiment="alloc")]
    res = measure.interleaved_torch(pts, {4096: x}, {4096: data.reference(x)}, rounds=4)
    assert [len(r.samples_ns) for r in res] == [4, 4] and all(r.correct for r in res)
    assert res[0].extra["interleaved_with"] == [pts[1].name]
    bad = measure.interleaved_torch(pts[:1], {4096: x}, {4096: data.reference(x) + 3}, rounds=4)
    assert not bad[0].correct and bad[0].samples_ns == []


def test_smoke_run_records_checked_variants(store):
    rec = runner.execute(study, {}, store, preset="smoke")
    assert rec.status == "complete"
    providers = {v.params["provider"] for v in rec.variants}
    assert providers == set(study.PROVIDERS)
    for v in rec.variants:
        assert {"provider", "n", "c", "split", "w"} <= set(v.params)
        assert v.correct, v.check
        assert v.samples_ns
    assert rec.outputs["programs"]["n=16384/c=3/even"]["copies"] >= 1  # 3 does not divide 16384: padded
    assert rec.outputs["programs"]["n=16384/c=3/aligned"]["copies"] == 0
    tables = study.analyze(rec)
    assert set(tables["overview"]["series"]) >= {"torch", "iree-bench c=1", "iree-bench c=3 aligned",
                                                 "iree-bench c=3 even"}
    assert len(tables["alloc"]) == 1 and tables["alloc"]["rounds"].iloc[0] == 5
    assert "vs torch" in "\n".join(study.report_sections(tables))
    # the smoke preset (n = 16,384, one worker) tests no claim: each says what it needs (the
    # allocation: the seed's two-pass path, which one worker never takes)
    from workbench.reading.analysis import analyse

    claims = analyse(rec, study).claims.set_index("id")
    assert "two-pass" in claims.loc["000-torch-alloc-2us", "why"] and "[" in claims.loc["000-torch-alloc-2us", "live"]
    others = claims.drop(index="000-torch-alloc-2us")
    assert (claims["status"] == "not testable here").all() and others["why"].str.startswith("needs").all()
    # the A/A twins of the grid are the run's declared null controls: the run measures its drift
    assert {v.params.get("experiment") for v in rec.variants} >= {"aa"}
    assert tables["drift"]["measured"].iloc[0] and len(tables["nulls"]) >= 2
    assert all(v.blocks and len(v.blocks) == len(v.samples_ns) for v in rec.variants if v.correct)
    assert "n = 1,000,000" in claims.loc["000-torch-beats-iree", "why"]


def test_a_failing_program_does_not_stop_the_others(store, monkeypatch):
    real = iree_tools.compile_program

    def flaky(prog, *a, **kw):
        if prog.c == 2:
            raise ExternalCommandError(["iree-compile", "x.mlir"], 1, "error: simulated compiler failure")
        return real(prog, *a, **kw)

    monkeypatch.setattr(iree_tools, "compile_program", flaky)
    rec = runner.execute(study, {"n": 4096, "chunks": [1, 2], "workers": [1], "repeat": 3,
                                 "providers": ["iree-sync", "iree-bench"], "experiments": ["grid"]}, store)
    by_c = {(v.params["provider"], v.params["c"]): v for v in rec.variants}
    assert by_c[("iree-bench", 1)].correct and by_c[("iree-sync", 1)].correct
    bad = by_c[("iree-bench", 2)]
    assert not bad.correct and "simulated compiler failure" in bad.check and "iree-compile" in bad.check


def _rec(params: dict, variants: list, attachments=()) -> RunRecord:
    rec = RunRecord("r", study.ID, study.SPACE.resolve(params), env={}, outputs={}, floor_ns=30.0)
    rec.variants = variants
    rec.attachments = list(attachments)
    return rec


def _v(name, params, samples, correct=True):
    return VariantResult(name, params, list(samples), correct, "ok")


def test_phases_per_iteration_sum_to_the_total_and_overhead_comes_from_one_capture():
    """An ireeperf capture attached under the old name (before the split existed): phases per
    iteration tile it, overhead = total - compute of each iteration of that capture, never
    against the separate timing run."""
    rec = _rec({"n": 1_000_000, "chunks": [8], "workers": [2]}, [
        _v("iree-bench/n=1000000/c=8/w=2", {"impl": "iree-bench", "n": 1_000_000, "c": 8, "w": 2}, [5e5, 5.1e5, 4.9e5]),
        _v("torch/n=1000000/w=2", {"impl": "torch", "n": 1_000_000, "c": None, "w": 2}, [1e5, 1.1e5, 0.9e5])],
        [("profile_n1000000_c8_w2_bench.ireeperf.jsonl", "trace/ireeperf-jsonl", TRACE.read_bytes())])
    tables = study.analyze(rec)
    it = tables["_phase_iterations"]
    phases = ["VM setup", "scheduling delay", "dispatch compute", "inter-dispatch", "cleanup + wake-up"]
    assert np.allclose(it[phases].sum(axis=1), it["total_us"])
    assert np.allclose(it["overhead_us"], it["total_us"] - it["compute_us"])
    ph = tables["phases"]
    assert set(ph["iterations"]) == {len(it) - profiles.WARMUP_ITERATIONS}
    ov = tables["overview"].set_index("series")
    row = ov.loc["iree-bench c=8 even"]  # the old record's c=8 was the even split
    steady = it[~it["warmup"]]
    assert row["overhead_us"] == pytest.approx(float(steady["overhead_us"].median()))
    assert row["total_us"] == pytest.approx(500) and row["overhead_us"] < row["profile_total_us"]
    assert row["vs_torch"] == pytest.approx(5.0)
    text = "\n".join(study.report_sections(tables))
    assert "Breakdown per iteration: ireeperf c=8 even w=2" in text and "D0" in text


def test_a_capture_with_few_iterations_is_never_called_a_median():
    lines = TRACE.read_text().splitlines()
    rec = _rec({"n": 1_000_000, "chunks": [8], "workers": [2]}, [],
               [("profile_n1000000_c8_even_w2_bench.ireeperf.jsonl", "trace/ireeperf-jsonl", TRACE.read_bytes())])
    ph = study.analyze(rec)["phases"]
    k = int(ph["iterations"].iloc[0])
    assert k < profiles.MIN_FOR_MEDIAN, f"the test trace has {k} steady-state iterations; the test needs < 5"
    assert ph["statistic"].iloc[0] == f"only {k} steady-state iteration(s): not a median"
    assert "median" not in ph["statistic"].iloc[0].replace("not a median", "")
    assert lines  # the trace is the committed 6-iteration one


def test_trimmed_tracy_capture_reads_like_the_capture(tmp_path):
    blob = profiles.trim_tracy(TRACY, keep=8)
    assert len(blob) < TRACY.stat().st_size / 10
    rec = _rec({"n": 1_000_000, "chunks": [8], "workers": [2]}, [],
               [("profile_n1000000_c8_even_w2_bench.tracy.json.gz", "trace/chrome-json", blob)])
    tables = study.analyze(rec)
    ph = tables["phases"]
    assert set(ph["iterations"]) == {8} and ph["statistic"].iloc[0] == "median of 8 steady-state iterations"
    kt = tables["key_times"]
    events = list(kt["event"])
    assert events[0] == "iteration starts (vm_invoke)" and events[-1] == "iteration ends (vm_end_invoke)"
    assert "first dispatch_0 shard starts" in events and "semaphore signal (wakes the main thread)" in events
    assert kt["t_us"].is_monotonic_increasing or kt["t_us"].iloc[-1] == kt["t_us"].max()
    al = tables["iree_allocs"].set_index("group")
    parts = al.drop(index="total")["median_us"]
    assert al.loc["total", "median_us"] > 0 and al.loc["semaphores", "calls_per_iteration"] >= 1
    assert al.loc["total", "median_us"] <= parts.sum() * 1.5  # groups of outermost zones, counted once
    assert "per-call allocations" in set(tables["dispatch_model"][""])


def test_alloc_grain_and_forkjoin_tables_from_samples():
    rng = np.random.default_rng(1)
    base = 1000 + rng.normal(0, 5, 30)
    vs = [
        _v("alloc:torch/n=4096/w=1", {"provider": "torch", "n": 4096, "c": None, "w": 1, "experiment": "alloc"},
           base + 500),
        _v("alloc:torch-out/n=4096/w=1", {"provider": "torch-out", "n": 4096, "c": None, "w": 1,
                                          "experiment": "alloc"}, base),
        _v("forkjoin:torch/n=32768/w=1", {"provider": "torch", "n": 32768, "c": None, "w": 1,
                                          "experiment": "forkjoin"}, base),
        _v("forkjoin:torch/n=32768/w=2", {"provider": "torch", "n": 32768, "c": None, "w": 2,
                                          "experiment": "forkjoin"}, base + 3000),
    ]
    for n, slow in ((16_384, 0), (32_768, 2000)):
        vs += [_v(f"torch/n={n}/w=1", {"provider": "torch", "n": n, "c": None, "w": 1}, base),
               _v(f"torch/n={n}/w=2", {"provider": "torch", "n": n, "c": None, "w": 2}, base + slow + rng.normal(0, 5, 30))]
    # the grain's sides are two blocks: the run's A/A twins measure its drift between blocks
    vs += [_v(f"aa:torch/n={n}/w=1", {"provider": "torch", "n": n, "c": None, "w": 1, "experiment": "aa"},
              base + rng.normal(0, 5, 30)) for n in (16_384, 32_768)]
    rec = _rec({"n": 16_384, "workers": [1, 2], "experiments": ["grain", "alloc", "forkjoin"],
                "grain_sizes": [16_384, 32_768], "alloc_sizes": [4096]}, vs)
    t = study.analyze(rec)
    assert t["drift"]["measured"].iloc[0]
    a = t["alloc"].iloc[0]
    assert a["point"] == pytest.approx(0.5, abs=0.01) and a["status"] == "clear" and a["unit"] == "us"
    g = t["grain"].set_index("n")
    assert g.loc[16_384, "status"] == "inconclusive" and g.loc[32_768, "status"] == "clear"
    assert g.loc[32_768, "torch_path"].startswith("parallel")
    fj = t["forkjoin"]
    assert fj["point"].iloc[0] == pytest.approx(3.0, abs=0.05) and fj["pairing"].iloc[0] == "per interleaved round"
    d = t["derived"]
    assert {"alloc", "grain", "forkjoin"} <= set(d["table"])
    v = analyse(rec, study).verdict
    # in the unit its magnitude calls for
    assert "OpenMP's fork/join, 1 -> 2 workers: 3.0" in v and "allocation at w=1, n=4,096: 500 ns" in v
    # an inconclusive derived result is never stated as a finding: shown as not clear, with why
    vs[0] = _v(vs[0].variant, vs[0].params, base + rng.normal(0, 5, 30))
    v = analyse(_rec(rec.params, vs), study).verdict
    assert "allocation at w=1, n=4,096: 500 ns" not in v and "not clear (the CI includes 0)" in v


@pytest.mark.slow
def test_tracy_capture_is_readable(tmp_path):
    mod = iree_tools.compile_program(program(65_536, 2))
    x = data.make_input(65_536, seed=0)
    np.save(tmp_path / "x.npy", x)
    path, cmd = iree_tools.capture_tracy(tmp_path, iree_tools.traced_benchmark(mod.vmfb, tmp_path / "x.npy", 1,
                                                                              iterations=20))
    from workbench import traces
    from workbench.traces import phases

    spans, _ = traces.load(path)
    assert "TRACY_NO_EXIT=1" in cmd and len(phases.iterations(spans)) > 3


def test_page_shows_a_stored_run_with_profiles(store):
    from streamlit.testing.v1 import AppTest

    rec = RunRecord("20260101-000000-cpu-reduction-aaaaaa", study.ID,
                    study.SPACE.resolve({"n": 1_000_000, "chunks": [8], "workers": [2]}),
                    env={"fingerprint": "f00", "cpu_model": "Test CPU", "cpu_logical": 2}, status="complete",
                    created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run cpu-reduction",
                    outputs={"loadavg_start": [0.1, 0.1, 0.1], "cores": 2}, floor_ns=30.0)
    rec.variants = [_v("iree-bench/n=1000000/c=8/aligned/w=2", {"provider": "iree-bench", "n": 1_000_000, "c": 8,
                                                               "split": "aligned", "w": 2}, [5e5, 5.1e5, 4.9e5]),
                    _v("torch/n=1000000/w=2", {"provider": "torch", "n": 1_000_000, "c": None, "w": 2},
                       [1e5, 1.1e5, 0.9e5])]
    rec.attachments = [("profile_n1000000_c8_aligned_w2_bench.ireeperf.jsonl", "trace/ireeperf-jsonl",
                        TRACE.read_bytes())]
    store.save(rec)
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    assert any("Verdict" in m.value for m in at.markdown)


def _page():
    import studies.cpu_reduction
    from pages._ui import study_page

    study_page(studies.cpu_reduction)


def test_committed_many_core_bundles_analyse():
    """The committed 16-core runs (traces/cpu-reduction/) analyse: scaling over 5 worker
    counts, the fork/join and allocation rows, and c=2 | c=8 phases with 8+ worker lanes."""
    from workbench.results.store import committed_runs

    recs = committed_runs(study.ID)
    if not recs:
        pytest.skip("no committed cpu-reduction bundles")
    tables = {r.params.get("experiments", [""])[0]: study.analyze(r) for r in recs}
    grid = [study.analyze(r) for r in recs if "grid" in r.params["experiments"] and len(r.params["workers"]) == 5]
    assert grid and set(grid[0]["scaling"]["w"]) == {1, 2, 4, 8, 16}
    assert len(grid[0]["forkjoin"]) and len(grid[0]["alloc"])
    ph = [study.analyze(r) for r in recs if r.params["experiments"] == ["phases"]]
    assert ph and {2, 8} <= set(ph[0]["phases"]["c"]) and {8, 16} <= set(ph[0]["phases"]["w"])
    lanes = ph[0]["timeline"].groupby("capture")["track"].nunique()
    assert lanes.max() >= 9  # main thread + 8 or more worker lanes, as the seed's T1..T10
    assert tables and json.dumps(len(recs))
