"""cpu-reduction study: programs, validation, correctness checks, failures, smoke run, analysis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import studies.cpu_reduction as study
from kernels.iree.sum_programs import Program, program
from studies._cpu_reduction import data, iree_tools, measure
from workbench import runner
from workbench.harness import ExternalCommandError
from workbench.store import RunRecord
from workbench.study import ParamError, validate

TRACE = Path(__file__).parent / "data" / "traces" / "iree_cpu_sum_c8" / "sum_c8.ireeperf.jsonl"


def test_split_program_shapes():
    p = program(1_000_000, 8)
    assert (p.m, p.padded_n, p.pad, p.dispatches) == (125_000, 1_000_000, 0, 2)
    assert "tensor.pad" not in p.mlir and "tensor<8x125000xf32>" in p.mlir
    q = program(1001, 4)  # 4 does not divide 1001: pad to 4 * 251
    assert (q.m, q.padded_n, q.pad) == (251, 1004, 3)
    assert "high[3]" in q.mlir and "tensor<4x251xf32>" in q.mlir
    assert program(5000, 1).dispatches == 1
    with pytest.raises(ValueError, match="chunks"):
        program(10, 11)


def test_no_split_template_is_the_seeds_program():
    """kernels/iree/sum_1m.mlir is the seed's program verbatim; the template must stay it at N = 1M."""
    from kernels.iree.sum_programs import HERE

    ours = [line for line in program(1_000_000, 1).mlir.splitlines() if not line.startswith("//")]
    assert ours == (HERE / "sum_1m.mlir").read_text().splitlines()


@pytest.mark.parametrize("n,c", [(1000, 3), (4099, 7), (2048, 1)])
def test_compiled_programs_sum_exactly_and_have_the_written_dispatches(tmp_path, n, c):
    prog = program(n, c)
    mod = iree_tools.compile_program(prog)
    assert mod.info["dispatches"] == prog.dispatches
    if prog.pad:
        assert mod.info["copies"] >= 1  # IREE 3.13 materialises the pad as a copy
    x = data.make_input(n, seed=3)
    np.save(tmp_path / "x.npy", x)
    value = iree_tools.run_module(mod.vmfb, tmp_path / "x.npy", "local-task", 1)
    assert data.check(value, data.reference(x))[0]


def test_compile_cache_is_reused(tmp_path):
    prog = program(4096, 2)
    first = iree_tools.compile_program(prog, cache_dir=tmp_path)
    second = iree_tools.compile_program(prog, cache_dir=tmp_path)
    assert not first.info["cached"] and second.info["cached"] and first.vmfb == second.vmfb
    other = iree_tools.compile_program(prog, flags=("--iree-opt-level=O1",), cache_dir=tmp_path)
    assert other.vmfb != first.vmfb  # flags are part of the key


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
    res = measure.iree_bench(measure.Point("iree-bench", 2048, 1, 1), mod, tmp_path / "x.npy", data.reference(x),
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
    with pytest.raises(ParamError, match="'sizes'.*smaller than the largest chunk"):
        validate(study, {"chunks": [1, 4096], "sizes": [2048, 8192]})
    with pytest.raises(ParamError, match="'n'"):
        validate(study, {"n": 10})
    monkeypatch.setattr(study, "_mem_available_bytes", lambda: 100 << 20)
    with pytest.raises(ParamError, match="'n'.*GiB"):
        validate(study, {"n": "64Mi", "experiments": ["grid"]})


def test_points_cover_grid_and_sweep_without_duplicates():
    params = study.SPACE.resolve({"n": 4096, "chunks": [1, 2], "workers": [1, 2], "sizes": [4096, 8192],
                                  "experiments": ["grid", "sizes"]})
    pts = study.points(params)
    names = [p.name for p in pts]
    assert len(names) == len(set(names))
    assert {p.w for p in pts if p.impl in study.SINGLE_THREAD} == {1}
    assert all(p.c is None for p in pts if p.impl.startswith("torch") or p.impl == "numpy")
    assert "iree-task/n=8192/c=2/w=2" in names and "iree-task/n=8192/c=2/w=1" not in names


def test_smoke_run_records_checked_variants(store):
    rec = runner.execute(study, {}, store, preset="smoke")
    assert rec.status == "complete"
    impls = {v.params["impl"] for v in rec.variants}
    assert impls == set(study.IMPLS)
    for v in rec.variants:
        assert set(v.params) == {"impl", "n", "c", "w"}
        assert v.correct, v.check
        assert v.samples_ns
    assert rec.outputs["programs"]["n=16384/c=3"]["copies"] >= 1  # 3 does not divide 16384: padded
    tables = study.analyze(rec)
    assert set(tables["overview"]["series"]) >= {"torch", "iree-bench c=1", "iree-bench c=3"}
    assert "vs torch" in "\n".join(study.report_sections(rec, tables))


def test_a_failing_program_does_not_stop_the_others(store, monkeypatch):
    real = iree_tools.compile_program

    def flaky(prog, *a, **kw):
        if prog.c == 2:
            raise ExternalCommandError(["iree-compile", "x.mlir"], 1, "error: simulated compiler failure")
        return real(prog, *a, **kw)

    monkeypatch.setattr(iree_tools, "compile_program", flaky)
    rec = runner.execute(study, {"n": 4096, "chunks": [1, 2], "workers": [1], "repeat": 3,
                                 "variants": ["iree-sync", "iree-bench"], "experiments": ["grid"]}, store)
    by_c = {(v.params["impl"], v.params["c"]): v for v in rec.variants}
    assert by_c[("iree-bench", 1)].correct and by_c[("iree-sync", 1)].correct
    bad = by_c[("iree-bench", 2)]
    assert not bad.correct and "simulated compiler failure" in bad.check and "iree-compile" in bad.check


def test_phase_breakdown_from_an_attached_ireeperf_profile():
    rec = RunRecord("r", study.ID, study.SPACE.resolve({"n": 1_000_000, "chunks": [8], "workers": [2]}), env={},
                    outputs={}, floor_ns=30.0)
    from workbench.study import VariantResult

    rec.variants = [VariantResult("iree-bench/n=1000000/c=8/w=2", {"impl": "iree-bench", "n": 1_000_000, "c": 8,
                                                                    "w": 2}, [5e5, 5.1e5, 4.9e5], True, "ok"),
                    VariantResult("torch/n=1000000/w=2", {"impl": "torch", "n": 1_000_000, "c": None, "w": 2},
                                  [1e5, 1.1e5, 0.9e5], True, "ok")]
    rec.attachments = [("profile_n1000000_c8_w2_bench.ireeperf.jsonl", "trace/ireeperf-jsonl", TRACE.read_bytes())]
    tables = study.analyze(rec)
    ph = tables["phases"]
    parts = ph[ph["phase"].isin(["VM setup", "scheduling delay", "dispatch compute", "inter-dispatch",
                                 "cleanup + wake-up"])]
    assert abs(parts["share_pct"].sum() - 100) < 1e-6
    ov = tables["overview"].set_index("series")
    assert ov.loc["iree-bench c=8", "compute_us"] > 0
    assert ov.loc["iree-bench c=8", "overhead_us"] == pytest.approx(500 - ov.loc["iree-bench c=8", "compute_us"])
    assert ov.loc["iree-bench c=8", "vs_torch"] == pytest.approx(5.0)
    text = "\n".join(study.report_sections(rec, tables))
    assert "Breakdown of one steady-state iteration: c=8" in text and "D0" in text


@pytest.mark.slow
def test_tracy_capture_is_readable(tmp_path):
    mod = iree_tools.compile_program(program(65_536, 2))
    x = data.make_input(65_536, seed=0)
    np.save(tmp_path / "x.npy", x)
    # google-benchmark stops after one iteration when that one outlasts min_time: 50 ms keeps a
    # loaded machine's slow first iteration (several ms) from leaving a single-iteration capture.
    path, cmd = iree_tools.capture_tracy(tmp_path, iree_tools.traced_benchmark(mod.vmfb, tmp_path / "x.npy", 1,
                                                                              min_time_s=0.05))
    from workbench import traces
    from workbench.traces import phases

    spans, _ = traces.load(path)
    assert "TRACY_NO_EXIT=1" in cmd and len(phases.iterations(spans)) > 3


def test_page_shows_a_stored_run_with_profiles(store):
    from streamlit.testing.v1 import AppTest

    from workbench.study import VariantResult

    rec = RunRecord("20260101-000000-cpu-reduction-aaaaaa", study.ID,
                    study.SPACE.resolve({"n": 1_000_000, "chunks": [8], "workers": [2]}),
                    env={"fingerprint": "f00", "cpu_model": "Test CPU", "cpu_logical": 2}, status="complete",
                    created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run cpu-reduction",
                    outputs={"loadavg_start": [0.1, 0.1, 0.1], "cores": 2}, floor_ns=30.0)
    rec.variants = [VariantResult("iree-bench/n=1000000/c=8/w=2", {"impl": "iree-bench", "n": 1_000_000, "c": 8,
                                                                    "w": 2}, [5e5, 5.1e5, 4.9e5], True, "ok"),
                    VariantResult("torch/n=1000000/w=2", {"impl": "torch", "n": 1_000_000, "c": None, "w": 2},
                                  [1e5, 1.1e5, 0.9e5], True, "ok")]
    rec.attachments = [("profile_n1000000_c8_w2_bench.ireeperf.jsonl", "trace/ireeperf-jsonl", TRACE.read_bytes())]
    store.save(rec)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "pages" / "cpu_reduction.py"),
                           default_timeout=60).run()
    assert not at.exception
