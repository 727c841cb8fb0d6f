"""IREE importers (ireeperf-jsonl, .ireeprof) and the IREE phase breakdown on real captures."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.traces import TraceError, detect, load, phases
from workbench.traces.model import validate
from tests.support.paths import DATA

C8 = DATA / "iree_sum_c8"


def test_jsonl_spans_and_lanes():
    df, meta = load(C8 / "sum_c8.ireeperf.jsonl")
    validate(df)
    assert meta["format"] == "ireeperf-jsonl" and meta["schema_version"] == 15
    assert list(df["track"].cat.categories[:3]) == ["queue 0 submit", "queue 0 host-execution",
                                                   "queue 0 command regions"]
    disp = df[df["category"] == "dispatch"]
    assert set(disp["name"].astype(str)) == {"sum_dispatch_0_reduction_8x125000_f32", "sum_dispatch_1_reduction_8_f32"}
    # dispatches nest inside their execute span
    assert (disp["depth"] == 1).all()
    assert (df[df["kind"] == "instant"]["dur_ns"] == 0).all()


def test_ireeprof_is_exported_through_iree_profile():
    a, _ = load(C8 / "sum_c8.ireeprof")
    b, _ = load(C8 / "sum_c8.ireeperf.jsonl")
    assert len(a) == len(b) and (a["start_ns"].to_numpy() == b["start_ns"].to_numpy()).all()


def test_jsonl_phases_tile_each_iteration():
    df, _ = load(C8 / "sum_c8.ireeperf.jsonl")
    it = phases.iterations(df)
    assert len(it) == 6
    assert (it[list(phases.PHASES)].sum(axis=1) == it["total_ns"]).all()
    assert (it[list(phases.PHASES)] >= 0).all().all()
    summ = phases.summarize(it)
    assert np.isclose(summ[summ.phase != "total"]["share_pct"].sum(), 100.0)


def test_truncated_jsonl_is_a_clear_error(tmp_path):
    data = (C8 / "sum_c8.ireeperf.jsonl").read_bytes()
    p = tmp_path / "cut.jsonl"
    p.write_bytes(data[: len(data) // 2])
    assert detect(p) == "ireeperf-jsonl"
    with pytest.raises(TraceError, match="ireeperf-jsonl: cut.jsonl: truncated"):
        load(p)


def test_unsupported_schema_version(tmp_path):
    data = (C8 / "sum_c8.ireeperf.jsonl").read_bytes().replace(b'"schema_version":15', b'"schema_version":99')
    p = tmp_path / "v99.jsonl"
    p.write_bytes(data)
    with pytest.raises(TraceError, match="schema_version 99 is not supported"):
        load(p)


def test_gpu_dispatch_ticks_map_to_host_time_through_clock_fit(tmp_path):
    # No IREE GPU capture here: a minimal export with the documented GPU records. Device ticks
    # run at 100 MHz (10 ns/tick) with the host clock offset by 1 ms.
    import json

    recs = [{"schema_version": 15, "record_type": "schema", "clock_fit": {"basis": "first_last_clock_correlation"}},
            {"schema_version": 15, "record_type": "session", "event": "begin"}]
    for tick in (0, 50_000, 100_000):
        host = 1_000_000 + tick * 10
        recs.append({"schema_version": 15, "record_type": "clock_correlation", "physical_device_ordinal": 0,
                     "device_tick": tick, "host_time_begin_ns": host - 20, "host_time_end_ns": host + 20})
    recs.append({"schema_version": 15, "record_type": "dispatch_event", "physical_device_ordinal": 0,
                 "queue_ordinal": 0, "submission_id": 3, "key": "matmul_dispatch_0", "start_tick": 1_000,
                 "end_tick": 1_500})
    recs.append({"schema_version": 15, "record_type": "session", "event": "end"})
    p = tmp_path / "gpu.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    df, meta = load(p)
    k = df[df["category"] == "kernel"].iloc[0]
    assert (k["start_ns"], k["dur_ns"], k["track"], k["device"]) == (1_010_000, 5_000, "device 0 queue 0", 0)


def test_jsonl_scheduling_delay_starts_at_the_last_submit_of_the_iteration():
    # the host issues alloca, alloca, execute, dealloca, then waits: as in the Tracy rule, VM setup
    # holds the whole submission and the delay starts at the dealloca submit (module docstring)
    df, _ = load(C8 / "sum_c8.ireeperf.jsonl")
    subs = df[df["name"].astype(str).str.startswith("submit ")].sort_values("start_ns")
    first_iter = subs.iloc[:4]
    assert first_iter["name"].astype(str).tolist() == ["submit alloca", "submit alloca", "submit execute",
                                                       "submit dealloca"]
    it = phases.iterations(df)
    t0, t_last = int(first_iter["start_ns"].iloc[0]), int(first_iter["start_ns"].iloc[3])
    first_dispatch = int(df[(df["category"] == "dispatch") & (df["correlation"] == first_iter["correlation"].iloc[2])]
                         ["start_ns"].min())
    assert it.loc[0, "VM setup"] == t_last - t0
    assert it.loc[0, "scheduling delay"] == first_dispatch - t_last
