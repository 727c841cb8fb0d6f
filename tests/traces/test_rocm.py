"""ROCm traces: rocprofv3 CSV kinds (copies, allocations, counter collection, refused kinds)
and rocpd databases (through their views, several sessions, hostile views)."""

from __future__ import annotations

import pytest

from workbench.traces import TraceError, load
from workbench.traces.model import validate
from tests.support.paths import DATA

ROCPROF = DATA / "rocprofv3_csv_versions"


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
    assert df["track"].astype(str).tolist() == ["GPU 2 · memory", "host memory"]


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


ROCPD = DATA / "two_ranks_training_step"


def test_rocpd_through_views_lanes_and_correlation():
    df, meta = load(ROCPD / "rank0.db")
    validate(df)
    assert meta["format"] == "rocpd" and meta["schema_version"] == "3" and len(meta["sessions"]) == 1
    assert list(df["track"].cat.categories) == ["thread 4100", "thread 4107", "GPU 0 · memory", "GPU 0 · stream 0"]
    counts = df["category"].astype(str).value_counts().to_dict()
    assert counts == {"hip_api": 7, "kernel": 2, "gpu_memcpy": 2, "marker": 2, "memory_allocation": 1}
    k = df[df["category"] == "kernel"].set_index("name")
    assert k.loc["gemm_bf16_tn_128x128", "dur_ns"] == 150_000 and (k["device"] == 0).all()
    # each kernel's correlation id is its hipLaunchKernel's
    launches = df[df["name"] == "hipLaunchKernel"]
    assert sorted(k["correlation"]) == sorted(launches["correlation"])
    copies = df[df["category"] == "gpu_memcpy"].sort_values("start_ns")
    assert copies["name"].astype(str).tolist() == ["Memcpy HtoD", "Memcpy DtoH"]
    # roctx: the range is named by its message and encloses the launches; the mark is an instant
    step = df[df["name"] == "step 0"].iloc[0]
    assert step["category"] == "marker" and step["args"]["function"] == "roctxRangePushA"
    assert (launches["depth"] == 1).all()
    mark = df[df["name"] == "checkpoint"].iloc[0]
    assert mark["kind"] == "instant" and mark["dur_ns"] == 0


def test_rocpd_two_sessions_in_one_database_keep_apart():
    df, meta = load(ROCPD / "rank1.db")
    assert len(meta["sessions"]) == 2 and [p["pid"] for p in meta["processes"]] == [4200, 4300]
    tracks = list(df["track"].cat.categories)
    assert tracks[:4] == ["pid 4200 thread 4200", "pid 4200 thread 4207", "pid 4200 GPU 1 · memory",
                          "pid 4200 GPU 1 · stream 0"]
    assert len(tracks) == 8 and (df[df["category"] == "kernel"]["device"] == 1).all()
    assert df["process"].astype(str).nunique() == 2


def _copy(tmp_path, src="rank0.db"):
    import shutil

    p = tmp_path / src
    shutil.copy(ROCPD / src, p)
    return p


def _execute(path, *statements):
    import sqlite3

    con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()


def test_rocpd_unknown_schema_major_is_refused(tmp_path):
    p = _copy(tmp_path)
    table = next(n for n in __import__("sqlite3").connect(p).execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_metadata%'").fetchone())
    _execute(p, f"UPDATE \"{table}\" SET value='4' WHERE tag='schema_version'")
    with pytest.raises(TraceError, match=r"^rocpd: rank0.db: rocpd schema_version 4 is not supported \(read: 3.x\)"):
        load(p)


@pytest.mark.parametrize("view_sql,msg", [
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS id FROM c", "uses WITH/RECURSIVE"),
    ("SELECT * FROM evil", "reads 'evil', which is not part of the profiler's schema"),
    ("SELECT * FROM kernels_inner", "nests views over 6 deep or refers to itself"),
])
def test_rocpd_hostile_views_are_refused_before_they_run(tmp_path, view_sql, msg):
    import time

    p = _copy(tmp_path)
    extra = ["CREATE TABLE evil (x)"]
    if "kernels_inner" in view_sql:  # a chain of views deeper than any schema's
        extra += ["CREATE VIEW rocpd_v0 AS SELECT * FROM rocpd_string"]
        extra += [f"CREATE VIEW rocpd_v{i} AS SELECT * FROM rocpd_v{i - 1}" for i in range(1, 9)]
        view_sql = "SELECT * FROM rocpd_v8"
    _execute(p, *extra, "DROP VIEW kernels", f"CREATE VIEW kernels AS {view_sql}")
    t = time.monotonic()
    with pytest.raises(TraceError, match=f"^rocpd: rank0.db: view '(kernels|rocpd_v\\d)' {msg}"):
        load(p)
    assert time.monotonic() - t < 5


def test_rocpd_runaway_view_is_stopped_by_the_row_cap_and_the_time_budget(tmp_path, monkeypatch):
    p = _copy(tmp_path)
    # no recursion, only rocpd names: a cross join that grows as the product of six tables
    joined = ", ".join(f"rocpd_string s{i}" for i in range(6))
    _execute(p, "DROP VIEW kernels", f"CREATE VIEW kernels AS SELECT s0.id AS start, s1.id AS end FROM {joined}")
    monkeypatch.setenv("WORKBENCH_TRACE_MAX_ROWS", "1000")
    with pytest.raises(TraceError, match=r"view 'kernels' has over 1,000 rows \(limit: WORKBENCH_TRACE_MAX_ROWS\)"):
        load(p)
    monkeypatch.setenv("WORKBENCH_TRACE_MAX_ROWS", "1000000000")
    monkeypatch.setenv("WORKBENCH_TRACE_SQL_SECONDS", "1")
    _execute(p, "DROP VIEW kernels",
             f"CREATE VIEW kernels AS SELECT s0.id AS start, s1.id AS end FROM {joined} ORDER BY s5.string DESC")
    with pytest.raises(TraceError, match=r"took over 1 s \(limit: WORKBENCH_TRACE_SQL_SECONDS\)"):
        load(p)


def test_rocpd_is_detected_by_content(tmp_path):
    from workbench.traces import detect

    p = tmp_path / "results.sqlite"
    p.write_bytes((ROCPD / "rank0.db").read_bytes())
    assert detect(p) == "rocpd"
