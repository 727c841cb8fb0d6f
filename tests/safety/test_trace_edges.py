"""Trace importers at their edges (issue 42): impossible timestamps counted as dropped (Nsight
Systems 2.x exports with NaN, infinities and -2^63; rocprofv3 spans from -2^63 to 2^63-1),
malformed rocprofv3 documents named for what is wrong, and a memory limit that stops an import
said in one line."""

from __future__ import annotations

import copy
import gzip
import json
import shutil
import sqlite3
import sys
import warnings
from pathlib import Path

import pytest

from tests.safety.hostile import cli, refused
from tests.support.paths import DATA, ROOT
from workbench.traces import TraceError, load
from workbench.traces.analysis import dropped_events

NSYS2 = DATA / "nsys_2x" / "nsys_schema2_synthetic.sqlite"
ROCPROF = DATA / "rocprofv3_json" / "908_results_20ms.json.gz"
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


# --- Nsight Systems 2.x: NaN, infinities, -2^63 ----------------------------------------------------

def _nsys_with(tmp_path: Path, rows: list[tuple]) -> Path:
    """The 2.x fixture with kernels of these (start, end) added (copies of its first kernel)."""
    path = tmp_path / "bad.sqlite"
    shutil.copy(NSYS2, path)
    con = sqlite3.connect(path)
    with con:
        first = list(con.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone())
        for start, end in rows:
            con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * len(first))})",
                        [start, end, *first[2:]])
    con.close()
    return path


IMPOSSIBLE_NSYS = [("NaN", 5), (float("inf"), 5), (float("-inf"), 5), (I64_MIN, 5), (5, float("inf")),
                   (-9.0e18, 9.0e18), (1e30, 1e30 + 5)]


def test_nsys_impossible_times_are_dropped_counted_and_said(tmp_path, recwarn):
    good, _ = load(NSYS2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning ("invalid value encountered in cast") fails it
        df, meta = load(_nsys_with(tmp_path, IMPOSSIBLE_NSYS))
    assert len(df) == len(good)  # none of the seven kept
    assert df["start_ns"].min() >= 0 and df["start_ns"].max() < 1 << 62
    assert meta["malformed_events"] == 1 and meta["timestamp_overflows"] == 6
    assert dropped_events(meta) == {"malformed (dropped)": 1, "timestamp overflow (dropped)": 6}


def test_nsys_cli_says_what_was_dropped_and_nothing_else_on_stderr(tmp_path):
    got = cli("trace", str(_nsys_with(tmp_path, IMPOSSIBLE_NSYS)))
    assert got.code == 0 and got.err == "", got.err
    assert "1 malformed (dropped), 6 timestamp overflow (dropped)" in got.out


def test_nsys_export_whose_every_row_is_impossible_says_so(tmp_path):
    path = tmp_path / "only.sqlite"
    shutil.copy(NSYS2, path)
    con = sqlite3.connect(path)
    with con:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            if "start" in cols:
                con.execute(f"UPDATE {table} SET start = ?", (float("inf"),))
    con.close()
    with pytest.raises(TraceError, match="impossible times dropped"):
        load(path)


# --- rocprofv3 JSON ----------------------------------------------------------------------------

def _rocprof() -> dict:
    return json.loads(gzip.decompress(ROCPROF.read_bytes()))


def _write(tmp_path: Path, doc, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_rocprofv3_spans_beyond_any_time_are_counted_as_dropped(tmp_path):
    doc = _rocprof()
    recs = doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
    n = len(recs)
    for start, end in ((I64_MIN, I64_MAX), (0, I64_MAX), (I64_MIN, 0), (I64_MAX, I64_MAX), (1 << 64, 5),
                       (-(1 << 70), 5)):
        recs.append(dict(copy.deepcopy(recs[0]), start_timestamp=start, end_timestamp=end))
    recs.append(dict(copy.deepcopy(recs[0]), start_timestamp="12", end_timestamp=None))
    df, meta = load(_write(tmp_path, doc))
    assert len(df) == n and (df["dur_ns"] > 0).all()
    # 2^64 and -2^70 may reach the reader as floats (orjson), then they are malformed, not overflows
    assert meta["timestamp_overflows"] >= 4 and meta["timestamp_overflows"] + meta["malformed_events"] == 7


def test_rocprofv3_document_of_only_impossible_spans_says_so(tmp_path):
    doc = _rocprof()
    entry = doc["rocprofiler-sdk-tool"][0]
    entry["buffer_records"]["kernel_dispatch"] = [dict(entry["buffer_records"]["kernel_dispatch"][0],
                                                       start_timestamp=I64_MIN, end_timestamp=I64_MAX)]
    with pytest.raises(TraceError, match="every record of the document has unusable timestamps"):
        load(_write(tmp_path, doc))


def _spoiled(where: tuple, value) -> dict:
    doc = _rocprof()
    node = doc["rocprofiler-sdk-tool"][0]
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return doc


# Each of these gave "unreadable (TypeError: ...)" or another exception's text.
MALFORMED = [
    (("strings", "marker_api"), -1, "'strings.marker_api' is a number, not a list"),
    (("strings", "marker_api"), True, "'strings.marker_api' is a boolean, not a list"),
    (("strings",), [1], "'strings' is a list, not an object"),
    (("agents",), {"a": 1}, "'agents' is an object, not a list"),
    (("kernel_symbols",), "x", "'kernel_symbols' is a string, not a list or an object"),
    (("buffer_records", "kernel_dispatch"), {"a": 1}, "'buffer_records.kernel_dispatch' is an object, not a list"),
]


@pytest.mark.parametrize("where, value, message", MALFORMED)
def test_malformed_rocprofv3_parts_are_named(where, value, message, tmp_path):
    with pytest.raises(TraceError) as exc:
        load(_write(tmp_path, _spoiled(where, value)))
    assert message in str(exc.value) and "unreadable" not in str(exc.value)


ODD_IDS = [(("buffer_records", "kernel_dispatch", 0, "correlation_id"), {"internal": "x"}),
           (("buffer_records", "kernel_dispatch", 0, "correlation_id"), {"internal": [1]}),
           (("buffer_records", "kernel_dispatch", 0, "correlation_id"), {"internal": 1 << 70}),
           (("buffer_records", "kernel_dispatch", 0, "dispatch_info", "kernel_id"), [1]),
           (("buffer_records", "kernel_dispatch", 0, "dispatch_info", "agent_id"), {"handle": {"a": 1}}),
           (("buffer_records", "kernel_dispatch", 0, "stream_id"), {"handle": "s"}),
           (("strings", "marker_api"), [{"key": [1], "value": "m"}, {"key": {"a": 1}}, 7]),
           (("kernel_symbols",), [{"kernel_id": [1], "kernel_name": "k"}, 3]),
           (("agents",), [{"id": {"handle": [1]}, "type": 2, "gpu_index": 1 << 40}])]


@pytest.mark.parametrize("where, value", ODD_IDS)
def test_ids_of_the_wrong_type_are_read_as_missing(where, value, tmp_path):
    df, meta = load(_write(tmp_path, _spoiled(where, value)))
    assert len(df) == 495


@pytest.mark.parametrize("text, message", [
    ('{"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": [{"start_timestamp": 1,', "truncated"),
    ('{"rocprofiler-sdk-tool": 5}', "neither a list of process entries nor one entry"),
    ('{"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": [{"a": [{"b": 1}]}, {"c": "}]"}]}}]}',
     "every record of the document has unusable timestamps (2 not integers"),
])
def test_broken_documents_are_one_line(text, message, tmp_path):
    with pytest.raises(TraceError) as exc:
        load(_write(tmp_path, text))
    assert message in str(exc.value) and "unreadable" not in str(exc.value), str(exc.value)


def test_a_record_list_of_an_unexpected_shape_is_read_whole(tmp_path):
    """A cut at '}]' inside a nested list does not parse: the document is parsed whole, the
    same records come out."""
    doc = _rocprof()
    recs = doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
    recs[3]["nested"] = [{"x": 1}, {"y": "}, {"}]
    df, _ = load(_write(tmp_path, doc))
    assert len(df) == 495


def test_a_record_list_read_in_pieces_gives_the_table_parsed_whole(tmp_path, monkeypatch):
    from workbench.traces import rocprofjson

    path = _write(tmp_path, _rocprof())
    whole, _ = load(path)
    monkeypatch.setattr(rocprofjson, "CHUNK_BYTES", 1000)  # ~100 pieces
    pieces, _ = load(path)
    assert pieces.equals(whole)


def test_a_memory_limit_that_stops_an_import_is_one_line(tmp_path):
    """A 70 MB document under an address-space limit far below what its import takes (the
    process itself starts within it): exit 2, one line naming the limit, no crash."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from rocprofjson_memory import generate
    finally:
        sys.path.pop(0)
    path = tmp_path / "big.json"
    generate(path, 200_000)
    small = tmp_path / "small.json"
    generate(small, 100)
    probe = cli("trace", str(small), "--json", mem_mb=560)
    if probe.code != 0:
        pytest.skip(f"the CLI does not start within 560 MiB of address space here: {probe.err_lines[-1:]}")
    got = cli("trace", str(path), "--json", mem_mb=560, timeout_s=600)
    if got.code == 0:
        pytest.skip("the import fitted in 560 MiB of address space")
    refused(got, "big.json", "out of memory", "address-space limit of 560 MiB")
