"""Python zones in a real Tracy capture, beside IREE's: the cpu-reduction study's Python-runtime
profile (:mod:`studies.cpu_reduction.traced` under :func:`workbench.running.capture.run`).

Counts and nesting only (no durations), generous timeouts: these run on a loaded 2-core machine.
They skip, saying why, where the IREE wheel has no Tracy runtime or no capture tool."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from kernels.iree.sum_programs import program
from studies.cpu_reduction import data, iree_tools, measure, profiles
from workbench.running import capture
from workbench import traces
from workbench.traces.phases import DISPATCH_TILES, VM_INVOKE, zone_names
from tests.support.paths import ROOT

ITERATIONS = 100
N = 65_536


def _tracy_or_skip() -> None:
    if importlib.util.find_spec("iree._runtime_libs_tracy") is None:
        pytest.skip("iree-base-runtime has no Tracy runtime (iree._runtime_libs_tracy) here")
    try:
        capture.capture_tool()
    except FileNotFoundError as exc:
        pytest.skip(f"no Tracy capture tool: {exc}")
    if not iree_tools.compiler_installed():
        pytest.skip("iree-base-compiler is not installed (the test compiles its program)")


def _capture(tmp_path, via: str):
    _tracy_or_skip()
    x = data.make_input(N, seed=0)
    np.save(tmp_path / "x.npy", x)
    vmfb = iree_tools.compile_program(program(N, 2)).vmfb if via == "python" else None
    path, cmd = measure.capture_profile("tracy", via, vmfb, tmp_path / "x.npy", data.reference(x), 2, tmp_path,
                                 ITERATIONS, timeout_s=600)
    return path, cmd


def _contained(inner: pd.DataFrame, outer: pd.DataFrame) -> np.ndarray:
    """For each inner span: is it whole inside one outer span (any thread)?"""
    st = np.sort(outer["start_ns"].to_numpy())
    order = np.argsort(outer["start_ns"].to_numpy())
    en = (outer["start_ns"] + outer["dur_ns"]).to_numpy()[order]
    i = np.searchsorted(st, inner["start_ns"].to_numpy(), side="right") - 1
    ok = i >= 0
    return ok & ((inner["start_ns"] + inner["dur_ns"]).to_numpy() <= en[np.maximum(i, 0)])


@pytest.mark.slow
def test_python_zones_hold_irees_zones_one_per_iteration(tmp_path):
    path, cmd = _capture(tmp_path, "python")
    assert "TRACY_PORT=" in cmd and " -p " in cmd
    # the CLI reads it back
    cli = subprocess.run([sys.executable, "-m", "workbench", "trace", str(path)], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert cli.returncode == 0 and "format: tracy" in cli.stdout
    spans, _ = traces.load(path)
    zones = zone_names(spans)
    count = zones.value_counts()
    for name in ("py.iteration", "py.invoke", "py.to_host"):
        assert count.get(name, 0) == ITERATIONS, name
    assert count.get("py.module_load", 0) == 1
    it, inv, vm = (spans[zones == z] for z in ("py.iteration", "py.invoke", VM_INVOKE))
    vm = vm[vm["depth"] == vm["depth"].min()]  # the VM invokes itself again inside: the outermost call
    # py.invoke directly under py.iteration, iree_vm_invoke directly under py.invoke, same thread
    assert set(it["track"]) == set(inv["track"]) == set(vm["track"])
    assert (inv["depth"] == it["depth"].iloc[0] + 1).all() and (vm["depth"] == inv["depth"].iloc[0] + 1).all()
    assert _contained(inv, it).all() and _contained(vm, inv).all() and len(vm) == ITERATIONS
    # every dispatch zone (on the workers) runs inside a py.invoke window
    tiles = spans[zones == DISPATCH_TILES]
    assert len(tiles) >= ITERATIONS and _contained(tiles, inv).all()
    # the study's reading: one Python iteration per IREE iteration, keyed to it
    py = profiles.python_iterations(spans)
    assert len(py) == ITERATIONS and py["call"].eq("py.invoke").all() and py["runtime_ns"].notna().all()
    assert (py["call_ns"] >= py["runtime_ns"]).all() and (py["total_ns"] >= py["call_ns"]).all()


@pytest.mark.slow
def test_torch_sum_has_a_capture_of_its_own(tmp_path):
    path, _ = _capture(tmp_path, "torch")
    spans, _ = traces.load(path)
    count = zone_names(spans).value_counts()
    assert count.get("py.iteration", 0) == count.get("py.torch_sum", 0) == ITERATIONS
    assert count.get(VM_INVOKE, 0) == 0
    py = profiles.python_iterations(spans)
    assert len(py) == ITERATIONS and py["call"].eq("py.torch_sum").all() and py["runtime_ns"].isna().all()
