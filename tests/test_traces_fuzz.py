"""Truncated, corrupted and fuzzed inputs: every importer either reads a valid table or
raises TraceError with one line; nothing else escapes (no traceback, no hang)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.traces import TraceError, load
from workbench.traces.model import validate

DATA = Path(__file__).parent / "data" / "traces"
FIXTURES = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix not in (".md", ".py", ".mlir")
                  and p.name != "sum_c8.ireeprof")  # .ireeprof goes through iree-profile (a subprocess)


def _check(path: Path) -> None:
    try:
        df, _ = load(path)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(exc).split(":", 1)[0]  # "<format>: ..." on one line
        return
    validate(df)


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: p.name)
def test_truncated_copies(tmp_path, src):
    data = src.read_bytes()
    for frac in (0.02, 0.3, 0.71, 0.995):
        p = tmp_path / src.name
        p.write_bytes(data[: max(1, int(len(data) * frac))])
        _check(p)


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: p.name)
def test_corrupted_copies(tmp_path, src):
    data = bytearray(src.read_bytes())
    rng = random.Random(src.name)
    for trial in range(4):
        bad = bytearray(data)
        for _ in range(1 + trial * 3):  # flip bytes past the magic so detection still picks the format
            i = rng.randrange(min(16, len(bad) - 1), len(bad))
            bad[i] ^= 1 << rng.randrange(8)
        p = tmp_path / src.name
        p.write_bytes(bytes(bad))
        _check(p)


def test_truncated_tracy_ireeprof(tmp_path):
    src = DATA / "iree_cpu_sum_c8" / "sum_c8.ireeprof"
    p = tmp_path / "cut.ireeprof"
    p.write_bytes(src.read_bytes()[:5000])
    with pytest.raises(TraceError, match="^ireeprof: cut.ireeprof: iree-profile export failed"):
        load(p)


PREFIXES = [b"tr\xfdP\x01\x04", b"tr\xfdP\x00\x02", b"tracy\x00\x0b\x02", b'{"traceEvents": [', b"[{",
            b'{"schema_version":15,"record_type":"schema"}\n', b"SQLite format 3\x00",
            b'"Kind","Agent_Id","Queue_Id","Kernel_Name","Start_Timestamp","End_Timestamp"\n', b"\n\x02\x08\x01"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(PREFIXES), body=st.binary(max_size=600))
def test_fuzzed_bytes(tmp_path, prefix, body):
    p = tmp_path / "fuzz.bin"
    p.write_bytes(prefix + body)
    _check(p)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(["X", "B", "E", "i", "M", "b", "e", "C", 3, None]),
    "ts": st.one_of(st.floats(allow_nan=True), st.integers(-2**70, 2**70), st.text(max_size=4), st.none()),
    "dur": st.one_of(st.floats(), st.integers(-5, 10**6), st.text(max_size=3)),
    "pid": st.one_of(st.integers(-3, 3), st.text(max_size=3), st.lists(st.integers(), max_size=2)),
    "tid": st.one_of(st.integers(0, 3), st.none()),
    "name": st.one_of(st.text(max_size=5), st.integers(), st.none()),
    "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "Kernel"]), st.integers(), st.none()),
    "args": st.one_of(st.none(), st.dictionaries(st.sampled_from(["correlation", "device", "stream", "name"]),
                                                 st.one_of(st.integers(-2**70, 2**70), st.text(max_size=3)))),
}), max_size=12))
def test_fuzzed_chrome_events(tmp_path, events):
    import json

    p = tmp_path / "ev.json"
    p.write_text(json.dumps({"traceEvents": events}))
    _check(p)
