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
from tests.support.paths import DATA, ROOT

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
    src = DATA / "iree_sum_c8" / "sum_c8.ireeprof"
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


# --- every output of `workbench trace`, not only load() ------------------------------------------

MODES = [[], ["--json"], ["--phases"], ["--chrome", "{out}"], ["--json", "--phases", "--chrome", "{out}"]]


def _run_cli(tmp_path: Path, files: list[Path], mode: list[str]) -> None:
    """The CLI on ``files`` in one output mode: exit 0, or exit 2 with one error line; never a
    traceback or the catch-all's 'internal error'; a written Chrome export reads back."""
    import contextlib
    import io

    from workbench.traces.cli import trace_main

    out = tmp_path / "out.json"
    out.unlink(missing_ok=True)
    args = [str(f) for f in files] + [a.format(out=out) for a in mode]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = trace_main(args)
    err = stderr.getvalue()
    assert "internal error" not in err and "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert (rc, len(errors)) in ((0, 0), (2, 1)), (rc, err)
    if rc == 0 and "--chrome" in mode:
        if "--phases" not in mode or out.exists():
            validate(load(out)[0])
    stdout.getvalue().encode("utf-8")  # printable


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(PREFIXES), body=st.binary(max_size=400), mode=st.sampled_from(MODES))
def test_fuzzed_bytes_through_every_output(tmp_path, prefix, body, mode):
    p = tmp_path / "fuzz.bin"
    p.write_bytes(prefix + body)
    _run_cli(tmp_path, [p], mode)


NAMES = st.one_of(st.text(max_size=6), st.sampled_from(["ProfilerStep#1", "ncclDevKernel_AllReduce", "step",
                                                        "\udc80bad", "submit execute", ""]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "X", "B", "E", "i"]),
    "ts": st.one_of(st.floats(-1e6, 1e9, allow_nan=False), st.integers(-5, 10**9)),
    "pid": st.integers(0, 2), "tid": st.integers(0, 3),
    "name": NAMES,
    "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "user_annotation", "gpu_memcpy"]),
}, optional={"dur": st.one_of(st.floats(0, 1e6, allow_nan=False), st.integers(-3, 10**6)),
             "args": st.fixed_dictionaries({}, optional={"correlation": st.integers(-2, 5),
                                                         "stream": st.integers(0, 3)})}),
    min_size=1, max_size=30), mode=st.sampled_from(MODES), ranks=st.booleans())
def test_fuzzed_chrome_traces_through_every_output(tmp_path, events, mode, ranks):
    """Valid-looking traces (names from every rule the outputs key on: steps, collectives)
    through the summary, --json, --phases and --chrome, alone and as two ranks."""
    import json

    files = []
    for r in range(2 if ranks else 1):
        p = tmp_path / f"r{r}.json"
        p.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": r}}))
        files.append(p)
    _run_cli(tmp_path, files, mode)


@pytest.mark.parametrize("src", sorted(p for p in (ROOT / "traces" / "examples").iterdir()
                                       if p.suffix != ".md"), ids=lambda p: p.name)
def test_examples_through_every_output(tmp_path, src):
    for mode in MODES:
        _run_cli(tmp_path, [src], mode)
