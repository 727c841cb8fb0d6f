"""Chrome/Kineto, rocprof, nsys and Perfetto importers on their fixtures, and the CLI contract."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workbench.traces import TraceError, detect, load
from workbench.traces.cli import trace_main
from workbench.traces.model import validate
from tests.support.paths import DATA, ROOT



def test_torch_cuda_kernels_on_gpu_stream_lanes():
    df, meta = load(DATA / "torch_cuda_two_streams" / "torch_cuda.json.gz")
    validate(df)
    k = df[df["category"] == "kernel"]
    assert len(k) > 0 and (k["device"] == 0).all()
    assert set(k["track"].astype(str)) <= {"GPU 0 · stream 7", "GPU 0 · stream 18"}
    # runtime launches and kernels share Kineto's correlation ids
    rt = df[df["category"] == "cuda_runtime"]
    assert set(k["correlation"].dropna()) <= set(rt["correlation"].dropna())
    # baseTimeNanoseconds is added back: wall-clock ns
    assert meta["base_time_ns"] > 0 and df["start_ns"].min() > meta["base_time_ns"]


def test_plain_and_gzip_and_bare_unterminated_array_agree(tmp_path):
    a, _ = load(DATA / "torch_cpu_small_model" / "torch_cpu.json")
    b, _ = load(DATA / "torch_cpu_small_model" / "torch_cpu.json.gz")
    assert len(a) == len(b) and (a["start_ns"].to_numpy() == b["start_ns"].to_numpy()).all()
    events = json.loads((DATA / "torch_cpu_small_model" / "torch_cpu.json").read_text())["traceEvents"]
    text = json.dumps(events)
    p = tmp_path / "bare.json"
    p.write_text(text[:-1].rstrip() + ",\n")  # bare array without its closing bracket (allowed by the format)
    c, meta = load(p)
    assert len(c) == len(a) and meta["base_time_ns"] == 0


def test_chrome_b_e_pairs_instants_and_float_ns(tmp_path):
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "worker"}},
              {"ph": "B", "name": "outer", "pid": 1, "tid": 2, "ts": 10.0},
              {"ph": "X", "name": "inner", "pid": 1, "tid": 2, "ts": 10.5006, "dur": 1.25},
              {"ph": "E", "pid": 1, "tid": 2, "ts": 20.0},
              {"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": 15, "s": "t"},
              {"ph": "C", "name": "counter", "pid": 1, "ts": 1, "args": {"v": 1}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    df, meta = load(p)
    outer = df[df["name"] == "outer"].iloc[0]
    inner = df[df["name"] == "inner"].iloc[0]
    assert (outer["start_ns"], outer["dur_ns"], outer["depth"]) == (10_000, 10_000, 0)
    assert (inner["start_ns"], inner["dur_ns"], inner["depth"]) == (10_501, 1_250, 1)  # ns fraction kept
    assert df[df["name"] == "mark"]["kind"].iloc[0] == "instant"
    assert list(df["track"].cat.categories) == ["worker"] and meta["skipped_phases"] == {"C": 1}


def test_rocprof_v1_json_quirks():
    df, _ = load(DATA / "rocprofv3_csv_versions" / "results.json")
    assert df["category"].astype(str).value_counts().to_dict() == {"hip_api": 2, "kernel": 2, "gpu_memcpy": 1}
    k = df[df["category"] == "kernel"].sort_values("start_ns")
    assert k["start_ns"].tolist() == [510_000, 661_500]  # string ts parsed, empty first event skipped


@pytest.mark.parametrize("name,cat,n,tracks", [
    ("1234_kernel_trace.csv", "kernel", 4, ["GPU 2 · queue 1", "GPU 3 · queue 2"]),
    ("5678_kernel_trace.csv", "kernel", 3, ["GPU 2 · stream 0", "GPU 3 · stream 1"]),
    ("1234_hip_api_trace.csv", "hip_api", 6, ["thread 1234", "thread 1240"]),
    ("1234_marker_api_trace.csv", "marker", 2, ["thread 1234"]),
    ("1234_memory_copy_trace.csv", "gpu_memcpy", 2, ["copy stream 0"]),
    ("results.csv", "kernel", 2, ["GPU 2 · queue 0"]),
])
def test_rocprof_csv_column_sets(name, cat, n, tracks):
    df, meta = load(DATA / "rocprofv3_csv_versions" / name)
    validate(df)
    assert meta["format"] == "rocprof-csv"
    assert (df["category"] == cat).sum() == n
    assert list(df["track"].cat.categories) == tracks


def test_rocprof_new_columns_agent_strings_and_nesting():
    df, _ = load(DATA / "rocprofv3_csv_versions" / "5678_kernel_trace.csv")
    assert sorted(df["device"].tolist()) == [2, 2, 3]  # "Agent 2" -> 2
    hip, _ = load(DATA / "rocprofv3_csv_versions" / "1234_hip_api_trace.csv")
    assert hip.set_index("name").loc["hipDeviceSynchronize", "depth"] == 0


def test_nsys_sqlite_tables():
    df, meta = load(DATA / "two_streams_gpu0" / "nsys_small.sqlite")
    validate(df)
    counts = df["category"].astype(str).value_counts().to_dict()
    assert counts == {"cuda_runtime": 6, "kernel": 3, "nvtx": 3, "gpu_memcpy": 1, "gpu_memset": 1, "cuda_sync": 1,
                      "osrt": 2}
    assert list(df["track"].cat.categories) == ["python3 (4242)", "NVTX python3 (4242)", "GPU 0 · stream 7",
                                               "GPU 0 · stream 18"]
    nv = df[df["category"] == "nvtx"]
    assert set(nv["name"].astype(str)) == {"step", "marker"}  # text and textId names
    assert (nv[nv["name"] == "marker"]["kind"] == "instant").all()
    k = df[df["category"] == "kernel"]
    rt = df[df["category"] == "cuda_runtime"]
    assert set(k["correlation"]) <= set(rt["correlation"])
    assert meta["gpus"] == ["NVIDIA H200"]


def test_sqlite_without_nsys_tables_is_explained(tmp_path):
    import sqlite3

    p = tmp_path / "rocpd.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE rocpd_kernel_dispatch (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(TraceError, match="nsys-sqlite: rocpd.db: a rocpd database .*without its views: not an "
                                         "Nsight Systems export"):
        load(p)


def test_perfetto_trackevent_slices():
    df, meta = load(DATA / "thread_tracks_gpu_queue" / "trackevent_small.pftrace")
    validate(df)
    assert list(df["track"].cat.categories) == ["main", "worker", "GPU 0 queue"]
    by = df.set_index("name")
    assert by.loc["step", "dur_ns"] == 3_600 and by.loc["launch", "depth"] == 1
    assert by.loc["gemm_kernel", "category"] == "kernel" and by.loc["gemm_kernel", "args"] == {"grid": "132x1x1"}
    assert (df[df["kind"] == "instant"]["name"] == "sync").all()


def test_detection_uses_content_not_name(tmp_path):
    for src, fmt in [(DATA / "thread_tracks_gpu_queue" / "trackevent_small.pftrace", "perfetto-pftrace"),
                     (DATA / "two_streams_gpu0" / "nsys_small.sqlite", "nsys-sqlite"),
                     (DATA / "rocprofv3_csv_versions" / "1234_kernel_trace.csv", "rocprof-csv"),
                     (DATA / "torch_cpu_small_model" / "torch_cpu.json", "chrome-json"),
                     (DATA / "iree_sum_c8" / "sum_c8.ireeperf.jsonl", "ireeperf-jsonl"),
                     (DATA / "iree_sum_c8" / "sum_c8_6it.tracy", "tracy")]:
        p = tmp_path / "renamed.bin"
        p.write_bytes(src.read_bytes())
        assert detect(p) == fmt


def test_cli_json_contract(capsys):
    assert trace_main([str(DATA / "torch_cuda_two_streams" / "torch_cuda.json.gz"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"format", "span_count", "by_category", "tracks", "start_ns", "end_ns"} <= set(doc)
    assert doc["format"] == "chrome-json" and doc["by_category"]["kernel"] == 19
    assert doc["end_ns"] > doc["start_ns"]


def test_cli_phases_and_chrome_export(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert trace_main([str(DATA / "iree_sum_c8" / "sum_c8.ireeperf.jsonl"), "--json", "--phases",
                       "--chrome", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    phases = {r["phase"]: r for r in doc["phases"]}
    assert abs(sum(r["share_pct"] for k, r in phases.items() if k != "total") - 100) < 1e-6
    back, meta = load(out)
    assert meta["format"] == "chrome-json" and len(back) == doc["span_count"] + doc["instant_count"]


def test_cli_bad_files_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "cut.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}, {"ph": "X", "na')
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    for path, msg in [(bad, "chrome-json: cut.json: truncated"), (unknown, "unknown: notes.txt: not a supported"),
                      (tmp_path / "missing.json", "no such file")]:
        res = subprocess.run([sys.executable, "-m", "workbench.traces.cli", str(path)], capture_output=True,
                             text=True, cwd=ROOT)
        assert res.returncode == 2
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0] and "Traceback" not in res.stderr


def test_gpu_step_phases_from_kineto_trace():
    from workbench.traces import phases

    df, _ = load(DATA / "torch_cuda_two_streams" / "torch_cuda.json.gz")
    it = phases.iterations(df)
    assert len(it) == 3 and phases.phase_columns(it) == list(phases.GPU_STEP_PHASES)
    assert (it[list(phases.GPU_STEP_PHASES)].sum(axis=1) == it["total_ns"]).all()
    assert (it[list(phases.GPU_STEP_PHASES)] >= 0).all().all()
    assert (it["GPU busy"] > 0).all()


def test_chrome_import_works_without_orjson(monkeypatch, tmp_path):
    """The GPU nodes have no orjson: the importer falls back to the json module."""
    import json
    import sys

    from workbench import traces

    monkeypatch.setitem(sys.modules, "orjson", None)  # makes `import orjson` raise ImportError
    events = [{"ph": "X", "name": f"k{i}", "cat": "kernel", "ts": i * 2.0, "dur": 1.5, "pid": 0, "tid": 7,
               "args": {"correlation": i}} for i in range(50)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    spans, meta = traces.load(path)
    assert len(spans) == 50 and (spans["category"] == "kernel").all()


def test_chrome_pieces_and_args_batches_match_the_whole_document_path(monkeypatch, tmp_path):
    """Parsed a few events at a time with args packed in small batches, the table is the one
    the plain json path builds (args in row order, non-dict args as None, bad rows dropped)."""
    import json
    import sys

    from workbench import traces
    from workbench.traces import chrome

    events = [{"ph": "X", "name": f"k{i % 7}", "cat": "kernel", "ts": i * 2.0, "dur": 1.5, "pid": 0, "tid": 7,
               "args": {"correlation": i, "grid": [i, 1, 1]} if i % 5 else "not a dict"} for i in range(400)]
    events[123]["ts"] = "garbage"  # dropped as malformed, with its args
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(chrome, "CHUNK_BYTES", 2_000)
    monkeypatch.setattr(chrome, "_ARGS_BATCH", 37)
    pieces, _ = traces.load(path)
    monkeypatch.setitem(sys.modules, "orjson", None)
    whole, _ = traces.load(path)
    assert len(pieces) == len(whole) == 399
    assert pieces["args"].tolist() == whole["args"].tolist()
    assert pieces.drop(columns="args").equals(whole.drop(columns="args"))
    assert pieces["args"].iloc[125] == {"correlation": 126, "grid": [126, 1, 1]} and pieces["args"].iloc[0] is None


def test_formats_listed_once_and_the_manual_table_matches():
    from workbench import traces

    ids = [f.id for f in traces.formats()]
    assert len(ids) == len(set(ids)) and ids[-1] == "chrome-json"  # chrome accepts any JSON: last
    assert all(f.label and f.suffixes and f.versions and f.reads for f in traces.formats())
    assert "tracy" in traces.suffixes() and "json.gz" in traces.suffixes()
    manual = (ROOT / "docs" / "traces.md").read_text()
    assert traces.formats_markdown() in manual


def test_perfetto_non_utf8_names_are_str(tmp_path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    pkts = []
    td = pb.TracePacket()
    td.track_descriptor.uuid = 1
    td.track_descriptor.name = "lane"
    pkts.append(td)
    for ts, kind in ((10, 1), (20, 2)):
        p = pb.TracePacket()
        p.timestamp, p.trusted_packet_sequence_id = ts, 1
        p.track_event.type, p.track_event.track_uuid = kind, 1
        if kind == 1:
            p.track_event.name = "NAME"
            p.track_event.debug_annotations.add(name="k", string_value="VALUE")
        pkts.append(p)
    raw = b"".join(b"\x0a" + _varint(len(b)) + b for b in (x.SerializeToString() for x in pkts))
    path = tmp_path / "bad.pftrace"
    path.write_bytes(raw.replace(b"NAME", b"\xff\xfeAM").replace(b"VALUE", b"\xc3\x28LUE").replace(b"lane", b"l\xffne"))
    df, _ = load(path)
    assert isinstance(df["name"].iloc[0], str) and df["name"].iloc[0].endswith("AM")
    assert isinstance(df["args"].iloc[0]["k"], str) and isinstance(df["track"].iloc[0], str)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def test_chrome_counts_dropped_overflowing_and_negative_events(tmp_path):
    events = [{"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0},
              {"ph": "X", "name": "neg", "pid": 1, "tid": 1, "ts": 5.0, "dur": -3.0},
              {"ph": "X", "name": "huge", "pid": 1, "tid": 1, "ts": 1e17, "dur": 1.0},
              {"ph": "X", "name": "nan", "pid": 1, "tid": 1, "ts": "soon", "dur": 1.0},
              {"ph": "E", "pid": 1, "tid": 9, "ts": 3.0}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    df, meta = load(p)
    assert sorted(df["name"].astype(str)) == ["neg", "ok"]
    assert (meta["malformed_events"], meta["timestamp_overflows"], meta["negative_durations"]) == (2, 1, 1)
    assert df.set_index("name").loc["neg", "dur_ns"] == 0


def test_chrome_lane_order_follows_sort_indices_then_first_appearance(tmp_path):
    events = [{"ph": "X", "name": "k", "pid": 1, "tid": i, "ts": float(i), "dur": 1.0} for i in range(3000)]
    events += [{"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": i, "args": {"sort_index": -i}}
               for i in range(0, 3000, 7)]
    p = tmp_path / "lanes.json"
    p.write_text(json.dumps({"traceEvents": events}))
    df, _ = load(p)
    cats = list(df["track"].cat.categories)
    sorted_tids = list(range(2996, -1, -7))  # most negative sort index first
    # no process or thread names: "process 1 · thread 2996", never a raw "1/2996"
    assert len(cats) == 3000 and cats[:len(sorted_tids)] == [f"process 1 · thread {t}" for t in sorted_tids]
    assert cats[len(sorted_tids)] == "thread 1"  # then unsorted lanes in order of appearance (pid = tid: main)
