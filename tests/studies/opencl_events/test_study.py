"""opencl-events: checks catch wrong kernels, bad input is named, refusals are reported, smoke runs."""

from __future__ import annotations

import numpy as np
import pytest

import studies.opencl_events as study
from studies.opencl_events import clrt
from studies.opencl_events import measure
from workbench.running import runner
from workbench.reading.analysis import analyse, charts_of, sections_of
from workbench.seam.study import ParamError, validate


def _skip_without_opencl(params=None):
    reason = study.requires(params or study.SPACE.defaults("smoke"))
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def target():
    _skip_without_opencl()
    return clrt.open_target("", 0)


def test_tree_shapes():
    assert measure.tree_parents(7) == [-1, 0, 0, 1, 1, 2, 2]
    p28 = measure.tree_parents(28)
    # 1 + 3 + 3*2 + 3*2*3: the root has 3 children, each of those 2, each of those 3
    children = [p28.count(w) for w in range(28)]
    assert children[0] == 3 and children[1:4] == [2, 2, 2] and children[4:10] == [3] * 6 and sum(children) == 27


@pytest.mark.parametrize("values, name", [
    ({"sizes": "4098"}, "sizes"),
    ({"combos": "012"}, "combos"),
    ({"workers": "5"}, "workers"),
    ({"experiment": "polling"}, "experiment"),
    ({"experiment": "dependency", "sizes": "1Gi", "workers": "28"}, "sizes"),
    ({"callback_impl": "cffi"}, "callback_impl"),
])
def test_bad_parameters_are_named(values, name):
    with pytest.raises(ParamError) as err:
        validate(study, values)
    assert err.value.param == name


def test_no_platform_says_how_to_install(monkeypatch):
    pytest.importorskip("pyopencl")
    monkeypatch.setattr(clrt, "platforms", lambda: [])
    reason = study.requires(study.SPACE.defaults())
    assert "no OpenCL platform" in reason and "pip install 'pyopencl[pocl]'" in reason


def test_unknown_platform_lists_the_ones_here():
    _skip_without_opencl()
    reason = study.requires(study.SPACE.resolve({"platform": "no-such-vendor"}))
    assert "no-such-vendor" in reason and "platforms here" in reason


def test_cuda_without_gpu_is_explained():
    import importlib.util

    reason = study.requires(study.SPACE.resolve({"experiment": "cuda"}))
    if importlib.util.find_spec("cupy") is None:
        assert "CuPy" in reason and "pip install" in reason
    else:  # CuPy here: runnable (None), or the CUDA runtime's reason naming the GPU/device
        assert reason is None or "GPU" in reason or "device" in reason


def test_wrong_kernel_fails_the_check(target):
    cbs = clrt.Callbacks("ctypes")
    runs = measure.KernelRuns(target, 4096, cbs)
    try:
        runs.kern.set_arg(2, np.float32(measure.GAIN + 1))  # a kernel that scales wrongly
        runs.prime()
        ok, msg = runs.verify()
        assert not ok and "NumPy" in msg
    finally:
        runs.close()


def test_dependency_output_matches_reference_and_catches_a_wrong_tree(target):
    cbs = clrt.Callbacks("ctypes")
    runs = measure.DependencyRuns(target, 4096, 7, cbs)
    try:
        for cond in measure.DEP_CONDITIONS:
            out = runs.time(cond, 3)
            assert out.problem is None, cond
        ok, msg = runs.verify()
        assert ok, msg
        runs.parents = [-1, 0, 0, 1, 1, 2, 1]  # the reference for another tree must not match
        assert not runs.verify()[0]
    finally:
        runs.close()


def test_native_dependency_loop_matches_the_python_one(target):
    """The C loop (the seed's C++ setting) runs every condition, counts its callbacks and waits,
    and leaves the same checked output as the Python loop."""
    if clrt.native_unavailable():
        pytest.skip(clrt.native_unavailable())
    cbs = clrt.Callbacks("native")
    for workers in (7, 28):
        runs = measure.DependencyRuns(target, 4096, workers, cbs, host="native")
        try:
            runs.prime()
            for cond in measure.DEP_CONDITIONS:
                out = runs.time(cond, 5)
                assert out.problem is None and out.ns_per_run > 0, cond
            ok, msg = runs.verify()
            assert ok, msg
        finally:
            runs.close()
    with pytest.raises(ValueError, match="callback_impl=native"):
        measure.DependencyRuns(target, 4096, 7, clrt.Callbacks("ctypes"), host="native")


def test_target_ms_sets_the_runs_per_measurement():
    assert measure.reps_for(50_000, 5.0, 1024) == 100  # 5 ms of 50 us runs
    assert measure.reps_for(10_000, 5.0, 256) == 256  # never more than reps
    assert measure.reps_for(3_000_000, 5.0, 256) == measure.MIN_REPS  # never fewer than MIN_REPS
    with pytest.raises(ParamError, match="host"):
        validate(study, {"experiment": "dependency", "host": "native", "callback_impl": "ctypes"})


@pytest.mark.parametrize("impl", ["native", "ctypes", "pyopencl"])
def test_every_callback_runs_once(target, impl):
    if impl == "native" and clrt.native_unavailable():
        pytest.skip(clrt.native_unavailable())
    cbs = clrt.Callbacks(impl)
    runs = measure.KernelRuns(target, 4096, cbs)
    try:
        out = runs.time("111", 8)
        assert out.problem is None
        assert cbs.count() == 8 * 3
        assert runs.time("wait", 8).problem is None
    finally:
        runs.close()


@pytest.mark.opencl
def test_smoke_preset(store):
    _skip_without_opencl()
    rec = runner.execute(study, {}, store, preset="smoke")
    assert rec.status == "complete"
    # 2 sizes x 3 conditions, and the A/A twins: the first and last baselines again, last, each in a block of its own
    assert len(rec.variants) == 2 * 3 + 2 and all(v.correct for v in rec.variants), [v.check for v in rec.variants]
    assert all(len(v.samples_ns) == 5 and min(v.samples_ns) > 0 for v in rec.variants)
    assert {v.params["provider"] for v in rec.variants} == {"(0,0,0)", "(0,0,1)", "(1,1,1)", "aa"}
    by = {v.variant: v for v in rec.variants}
    assert by["(0,0,0) 4096B"].blocks == by["(0,0,1) 4096B"].blocks  # the conditions of a point pair by round
    assert len(set(by["aa:(0,0,0) 4096B"].blocks)) == 1 and by["aa:(0,0,0) 4096B"].params["twin_of"] == "(0,0,0) 4096B"
    a = analyse(rec)
    assert not a.errors, a.errors
    tbls = a.tables
    assert tbls["drift"]["measured"].iloc[0] and len(tbls["nulls"]) == 2
    ov = tbls["overhead"]
    assert set(ov["provider"]) == {"(0,0,1)", "(1,1,1)"} and set(ov["bucket"]) == {"4-64 KiB"}
    dv = tbls["derived"]
    assert (dv["lo"] <= dv["hi"]).all() and set(dv["status"]) <= {"clear", "inconclusive"}
    assert len(tbls["key"]) == 1 and "(0,0,1) - (0,0,0) (us)" in tbls["key"].columns  # both sizes: 4-64 KiB
    assert len(tbls["per_size"]) == 2
    text = "\n".join(sections_of(a))
    assert "What is measured" in text and "per size range" in text
    claims = dict(zip(a.claims["id"], a.claims["status"]))
    assert claims.pop("001-callbacks-cost-at-small-sizes") in ("holds", "inconclusive")  # 5 rounds on a busy CPU
    assert set(claims.values()) == {"not testable here"}  # no large buffer, no wait thread, no chains
    pytest.importorskip("altair")
    assert len(tbls["_samples"]) == 2 * 3 * 5 and tbls["_samples"]["time_us"].gt(0).all()
    assert {study.KEY_CHART, "relative", "timing"} <= set(charts_of(a))


@pytest.mark.opencl
def test_refused_callback_type_is_reported_not_raised(store, monkeypatch):
    _skip_without_opencl()
    refusal = "clSetEventCallback returned -30 (CL_INVALID_VALUE)"
    monkeypatch.setattr(clrt, "probe_exec_types",
                        lambda target, cbs: {clrt.CL_SUBMITTED: None, clrt.CL_RUNNING: refusal, clrt.CL_COMPLETE: None})
    rec = runner.execute(study, {"combos": "000,010,001"}, store, preset="smoke")
    assert rec.status == "complete"
    by = {v.params["provider"]: v for v in rec.variants}
    assert not by["(0,1,0)"].correct and "does not support a callback on CL_RUNNING" in by["(0,1,0)"].check
    assert by["(0,1,0)"].samples_ns == []
    assert by["(0,0,1)"].correct and by["(0,0,0)"].correct


@pytest.mark.opencl
def test_dependency_charts_per_worker_count(store):
    _skip_without_opencl()
    rec = runner.execute(study, {"experiment": "dependency", "sizes": "4096", "reps": 8, "measurements": 2,
                                 "workers": "7", "target_ms": 0.001}, store, preset="smoke")
    # 8 conditions at one size, and the A/A twin of the baseline
    assert rec.status == "complete" and len(rec.variants) == 9 and all(v.correct for v in rec.variants)
    a = analyse(rec)
    pts = a.tables["points"]
    assert len(pts) == 8  # the twin is a null control, not a point
    assert (pts["total_bytes"] == 7 * 4096).all() and (pts["reps"] == measure.MIN_REPS).all()
    assert "Runs per measurement chosen per point" in "\n".join(sections_of(a))
    pytest.importorskip("altair")
    assert {"overhead", "timing_w7", "per_worker_size"} <= set(charts_of(a))


def test_cuda_path_records_checked_and_unchecked_points_without_a_gpu(monkeypatch):
    """The CUDA experiment's host logic (check, interleaved rounds, recording) with a fake runner:
    a point whose kernel check fails is recorded failed for every condition, with no samples."""
    import sys
    import types

    from studies.opencl_events import cuda
    from workbench.seam.study import RunContext

    class FakeRuns:
        def __init__(self, size_bytes, device):
            self.good = size_bytes == 4096  # the 8 KiB point's kernel is "wrong"

        def prime(self):
            pass

        def verify(self):
            return self.good, "fake check"

        def time(self, condition, reps):
            return measure.Outcome(1000.0 + 10 * cuda.CONDITIONS.index(condition))

        def close(self):
            pass

    runtime = types.SimpleNamespace(runtimeGetVersion=lambda: 0, driverGetVersion=lambda: 0)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(__version__="fake",
                                                                   cuda=types.SimpleNamespace(runtime=runtime)))
    monkeypatch.setattr(cuda, "CudaRuns", FakeRuns)
    monkeypatch.setattr(cuda, "device_name", lambda device: "Fake GPU")
    ctx = RunContext()
    params = validate(study, {"experiment": "cuda", "sizes": "4096,8192", "reps": 4, "measurements": 3})
    out = study.run(params, ctx)
    assert out["device"] == "Fake GPU"
    by = {v.variant: v for v in ctx.variants}
    assert len(by) == 2 * len(cuda.CONDITIONS) + 2 and by["aa:none 4096B"].params["twin_of"] == "none 4096B"
    assert all(by[f"{c} 4096B"].correct and len(by[f"{c} 4096B"].samples_ns) == 3 for c in cuda.CONDITIONS)
    bad = [by[f"{c} 8192B"] for c in cuda.CONDITIONS]
    assert all(not v.correct and v.samples_ns == [] and "failed before timing" in v.check for v in bad)
