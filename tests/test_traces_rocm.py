"""ROCm traces: rocprofv3 CSV kinds (copies, allocations, counter collection, refused kinds)
and rocpd databases (through their views, several sessions, hostile views)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.traces import TraceError, load
from workbench.traces.model import validate

DATA = Path(__file__).parent / "data" / "traces"
ROCPROF = DATA / "rocprof"


def test_rocprof_copies_are_gpu_memcpy_and_a_last_line_without_newline_is_complete():
    df, _ = load(ROCPROF / "1234_memory_copy_trace.csv")
    assert not (ROCPROF / "1234_memory_copy_trace.csv").read_bytes().endswith(b"\n")
    assert len(df) == 2 and (df["category"] == "gpu_memcpy").all()
    assert sorted(df["name"].astype(str)) == ["Memcpy DtoH", "Memcpy HtoD"]
    marks, _ = load(ROCPROF / "1234_marker_api_trace.csv")
    assert len(marks) == 2


def test_rocprof_row_with_missing_fields_is_truncation(tmp_path):
    text = (ROCPROF / "1234_kernel_trace.csv").read_text()
    p = tmp_path / "1234_kernel_trace.csv"
    p.write_text(text.rstrip("\n")[:-40])  # cut inside the last row
    with pytest.raises(TraceError, match=r"^rocprof-csv: 1234_kernel_trace.csv: truncated \(the last row has"):
        load(p)


def test_rocprof_counter_collection_one_kernel_span_per_dispatch():
    df, meta = load(ROCPROF / "9012_counter_collection.csv")
    validate(df)
    assert meta["rocprof_kind"] == "counter_collection"
    assert df["name"].astype(str).tolist() == ["gemm_kernel", "reduce_kernel"]
    assert (df["category"] == "kernel").all() and df["device"].tolist() == [2, 2]
    assert df["dur_ns"].tolist() == [150_000, 15_000]
    assert df["args"].iloc[0]["counters"] == {"SQ_WAVES": 256.0, "GRBM_GUI_ACTIVE": 301234.0}


def test_rocprof_memory_allocations():
    df, _ = load(ROCPROF / "9012_memory_allocation_trace.csv")
    assert (df["category"] == "memory_allocation").all()
    assert df["track"].astype(str).tolist() == ["GPU 2 memory", "host memory"]


@pytest.mark.parametrize("name,header,msg", [
    ("9012_kernel_stats.csv", None, "stats CSV"),
    ("agent_info.csv", '"Node_Id","Logical_Node_Id","Agent_Type","Cpu_Cores_Count"\n0,0,"CPU",64\n', "agent_info.csv"),
    ("1_counter_collection.csv", '"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Kernel_Name",'
     '"Counter_Name","Counter_Value"\n1,1,2,1,"k","SQ_WAVES",3\n', "without Start/End_Timestamp"),
])
def test_rocprof_files_without_spans_are_refused_by_kind(tmp_path, name, header, msg):
    p = ROCPROF / name
    if header is not None:
        p = tmp_path / name
        p.write_text(header)
    with pytest.raises(TraceError, match=f"^rocprof-csv: {name}: .*{msg}"):
        load(p)
