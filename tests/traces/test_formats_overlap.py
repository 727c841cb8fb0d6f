"""Formats added or read again for the overlap issue: rocprofv3 JSON, Nsight Systems export
schema 2.x, and refusals that say what the file looks like."""

from __future__ import annotations

import copy
import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from workbench.traces import TraceError, detect, load, overlap
from workbench.traces.model import validate

from tests.support.paths import DATA
ROCPROF_JSON = DATA / "rocprofv3_json" / "908_results_20ms.json.gz"
NSYS2 = DATA / "nsys_2x" / "nsys_schema2_synthetic.sqlite"


def _doc() -> dict:
    return json.loads(gzip.open(ROCPROF_JSON).read())


def _write(tmp_path: Path, doc: dict, name: str = "results.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


# --- rocprofv3 JSON ---------------------------------------------------------------------------------

def test_rocprofv3_json_kernels():
    assert detect(ROCPROF_JSON) == "rocprofv3-json"
    df, meta = load(ROCPROF_JSON)
    validate(df)
    assert meta["format"] == "rocprofv3-json" and meta["processes"] == [908]
    assert len(df) == 495 and set(df["category"].astype(str)) == {"kernel"}
    # the MI350X's first GPU agent is GPU 0; lanes per HIP stream
    assert set(df["device"].dropna()) == {0}
    assert all(t.startswith("GPU 0 · stream ") for t in df["track"].astype(str))
    names = df["name"].astype(str)
    assert names.str.startswith("ncclDevKernel_Generic").any()  # from kernel_symbols, not ids
    assert df["correlation"].notna().all()
    b = overlap.breakdown(df).iloc[0]
    assert b["communication_us"] > 0 and b["computation_us"] > 0 and 0 < b["overlap_pct"] < 100


def test_rocprofv3_json_copies_and_markers(tmp_path):
    """Copies and roctx markers added with the record fields of rocprofiler-sdk's schema."""
    doc = _doc()
    entry = doc["rocprofiler-sdk-tool"][0]
    kinds = [k["kind"] for k in entry["strings"]["buffer_records"]]
    copy_kind, marker_kind = kinds.index("MEMORY_COPY"), kinds.index("MARKER_CORE_RANGE_API")
    ops = entry["strings"]["buffer_records"][copy_kind]["operations"]
    gpus = [a["id"] for a in entry["agents"] if a["type"] == 2]
    cpu = next(a["id"] for a in entry["agents"] if a["type"] == 1)
    t0 = min(r["start_timestamp"] for r in entry["buffer_records"]["kernel_dispatch"])

    def rec(kind, op, start, end, **extra):
        return {"size": 64, "kind": kind, "operation": op, "thread_id": 908, "correlation_id": {"internal": 9_000 + start,
                                                                                               "external": 0},
                "start_timestamp": t0 + start, "end_timestamp": t0 + end, **extra}

    entry["buffer_records"]["memory_copy"] = [
        rec(copy_kind, ops.index("MEMORY_COPY_HOST_TO_DEVICE"), 0, 4_000, src_agent_id=cpu, dst_agent_id=gpus[0],
            bytes=1 << 20),
        rec(copy_kind, ops.index("MEMORY_COPY_DEVICE_TO_DEVICE"), 5_000, 9_000, src_agent_id=gpus[1],
            dst_agent_id=gpus[0], bytes=1 << 20)]
    entry["buffer_records"]["marker_api"] = [rec(marker_kind, 0, -1_000, 20_000)]
    entry["strings"]["marker_api"] = [{"key": 9_000 - 1_000, "value": "step"}]
    df, _ = load(_write(tmp_path, doc))
    copies = df[df["category"] == "gpu_memcpy"].sort_values("start_ns")
    assert list(copies["name"].astype(str)) == ["Memcpy HtoD", "Memcpy PtoP"]  # GPU 1 -> GPU 0 is a peer copy
    assert set(copies["track"].astype(str)) == {"GPU 0 · copies"}
    assert list(overlap.classify(copies)) == ["memory", "communication"]
    marker = df[df["category"] == "marker"]
    assert list(marker["name"].astype(str)) == ["step"] and list(marker["track"].astype(str)) == ["thread 908"]
    assert list(df["track"].cat.categories)[0] == "thread 908"  # threads first, then the GPU lanes


def test_rocprofv3_json_refusals(tmp_path):
    doc = _doc()
    del doc["rocprofiler-sdk-tool"][0]["buffer_records"]
    with pytest.raises(TraceError, match=r"^rocprofv3-json: old.json: a rocprofv3 JSON document of an unsupported "
                                         r"version \(no 'buffer_records' object\)"):
        load(_write(tmp_path, doc, "old.json"))
    empty = _doc()
    entry = empty["rocprofiler-sdk-tool"][0]
    entry["buffer_records"] = {k: [] for k in entry["buffer_records"]}
    entry["buffer_records"]["pc_sample_host_trap"] = [{"x": 1}]
    with pytest.raises(TraceError, match="without kernel dispatches, memory copies, markers or API calls "
                                         r"\(it holds: pc_sample_host_trap\)"):
        load(_write(tmp_path, empty, "pc.json"))
    # a JSON schema that describes the document is not one
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"rocprofiler-sdk-tool": {}}}
    with pytest.raises(TraceError, match=r'^unknown: schema.json: not a supported trace format: a JSON object '
                                         r'\(keys: "\$schema", "properties", "rocprofiler-sdk-tool"\)'):
        load(_write(tmp_path, schema, "schema.json"))


def test_rocprofv3_json_one_entry_object_and_two_processes(tmp_path):
    doc = _doc()
    single = {"rocprofiler-sdk-tool": doc["rocprofiler-sdk-tool"][0]}  # early releases: one object
    assert len(load(_write(tmp_path, single, "one.json"))[0]) == 495
    second = copy.deepcopy(doc["rocprofiler-sdk-tool"][0])
    second["metadata"]["pid"] = 909
    doc["rocprofiler-sdk-tool"].append(second)
    df, meta = load(_write(tmp_path, doc, "two.json"))
    assert meta["processes"] == [908, 909] and len(df) == 990
    assert {t.split(" · ")[0] for t in df["track"].astype(str)} == {"process 908", "process 909"}


# --- Nsight Systems export schema 2.x ---------------------------------------------------------------

def test_nsys_export_schema_2_is_read():
    """Layout of a 2.9.1 export (EXPORT_META_DATA, no ENUM_* tables, VM id in the global ids'
    high bits); the rows are the generator's (tests/data/nsys_2x/make_fixture.py)."""
    df, meta = load(NSYS2)
    validate(df)
    assert meta["export_schema_version"] == "2.9.1" and meta["export"]["EXPORT_PRODUCT_VERSION"] == "2022.2.1.31"
    assert meta["gpus"] == ["NVIDIA A100-SXM4-80GB"]
    cats = df["category"].astype(str).value_counts().to_dict()
    assert cats == {"cuda_runtime": 9, "kernel": 3, "gpu_memcpy": 3, "gpu_memset": 1, "cuda_sync": 1, "nvtx": 3,
                    "osrt": 2}
    # host lanes from ThreadNames, pid and tid taken from below the VM id; GPU lanes per stream
    assert list(df["track"].cat.categories) == ["cuda-EvtHandlr (7316)", "saxpy_pipeline (7311)",
                                                "NVTX saxpy_pipeline (7311)", "GPU 0 · stream 13", "GPU 0 · stream 14"]
    assert set(df["process"].astype(str)) == {"process 7311", "GPU 0"}
    kernels = df[df["category"] == "kernel"].sort_values("start_ns")
    assert [str(n) for n in kernels["name"]] == ["saxpy(int, float, const float *, float *)",
                                                 "scale_rows(float *, int)",
                                                 "saxpy(int, float, const float *, float *)"]
    assert [str(t) for t in kernels["track"]] == ["GPU 0 · stream 13", "GPU 0 · stream 14", "GPU 0 · stream 14"]
    copies = df[df["category"] == "gpu_memcpy"].sort_values("start_ns")
    assert [str(n) for n in copies["name"]] == ["Memcpy HtoD", "Memcpy HtoD", "Memcpy DtoH"]
    runtime = df[df["category"] == "cuda_runtime"]
    gpu_work = df[df["category"].isin(["kernel", "gpu_memcpy", "gpu_memset"])]
    assert set(gpu_work["correlation"]) <= set(runtime["correlation"])  # every launch links to its GPU work
    # without ENUM_CUPTI_SYNC_TYPE the sync kind comes from CUPTI's code; it sits inside the call that waited
    sync, call = df[df["category"] == "cuda_sync"].iloc[0], df[df["name"] == "cudaDeviceSynchronize"].iloc[0]
    assert str(sync["name"]) == "Context synchronize" and sync["track"] == call["track"]
    assert sync["depth"] == call["depth"] + 1
    # without ENUM_NSYS_EVENT_TYPE, push/pop ranges and marks come from the event-type codes
    nvtx = df[df["category"] == "nvtx"].sort_values("start_ns")
    assert [(str(n), k) for n, k in zip(nvtx["name"], nvtx["kind"])] == [
        ("setup", "span"), ("iteration 0", "span"), ("results copied", "instant")]
    assert meta["unclosed_spans"] == 0  # a mark's missing end is not an open range
    b = overlap.breakdown(df).iloc[0]
    # kernels 630-910, 815-960, 965-1245 us; copies 3 x 180 us and a 4 us memset
    assert b["computation_us"] == pytest.approx(610) and b["memory_us"] == pytest.approx(544)


def test_nsys_unknown_major_names_the_release(tmp_path):
    p = tmp_path / "report.sqlite"
    shutil.copy(NSYS2, p)
    con = sqlite3.connect(p)
    con.execute("UPDATE EXPORT_META_DATA SET value = '1.4.0' WHERE name = 'EXPORT_SCHEMA_VERSION'")
    con.commit()
    con.close()
    with pytest.raises(TraceError, match=r"^nsys-sqlite: report.sqlite: an Nsight Systems export of schema version "
                                         r"1.4.0 \(Nsight Systems 2022.2.1.31\), which this reader does not know "
                                         r"\(it reads 2.x, 3.x"):
        load(p)


def test_nsys_export_with_nothing_traced(tmp_path):
    p = tmp_path / "empty.sqlite"
    shutil.copy(NSYS2, p)
    con = sqlite3.connect(p)
    traced = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                         "(name LIKE 'CUPTI_ACTIVITY_KIND_%' OR name IN ('NVTX_EVENTS', 'OSRT_API'))").fetchall()
    assert len(traced) == 7
    for (t,) in traced:
        con.execute(f"DROP TABLE {t}")
    con.commit()
    con.close()
    with pytest.raises(TraceError, match=r"an Nsight Systems export \(Nsight Systems 2022.2.1.31\) without kernel, "
                                         "memcpy, memset, CUDA runtime, synchronization, OS runtime or NVTX tables"):
        load(p)


# --- refusals that say what the file is -------------------------------------------------------------

def _packet(**fields) -> bytes:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    pkt = pb.TracePacket(**fields)
    body = pkt.SerializeToString()
    n, out = len(body), bytearray([0x0A])
    while True:  # the framing of a trace: field 1, length-delimited
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out) + body


def test_android_system_trace_without_slices_is_refused(tmp_path):
    pytest.importorskip("perfetto")
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    log = pb.AndroidLogPacket(events=[pb.AndroidLogPacket.LogEvent(tag="ActivityManager", message="start")])
    p = tmp_path / "boot.perfetto-trace"
    p.write_bytes(_packet(timestamp=1, android_log=log) * 3 + _packet(timestamp=2, ftrace_events=pb.FtraceEventBundle(cpu=0)))
    with pytest.raises(TraceError, match=r"^perfetto-pftrace: boot.perfetto-trace: an Android system trace without "
                                         r"TrackEvent or atrace slices \(4 packets: android_log \(3\), ftrace_events \(1\)\)"):
        load(p)


@pytest.mark.parametrize("content,said", [
    (b'{"context": {"host_name": "x"}, "benchmarks": []}', "a google-benchmark JSON result"),
    (b"Kind,Agent,Start\n1,2,3\n", "a CSV file with columns Kind, Agent, Start"),
    (b"\x00\x01\x02\x03binary", "a binary file starting 00 01 02 03"),
    (b"hello\n", 'a text file starting "hello"'),
])
def test_unknown_files_are_described(tmp_path, content, said):
    p = tmp_path / "input.dat"
    p.write_bytes(content)
    with pytest.raises(TraceError, match="^unknown: input.dat: not a supported trace format: ") as exc:
        load(p)
    assert said in str(exc.value)
