"""Regular expressions typed by a user (issue 42): ``trace --comm``/``--marker``, the Traces page's
fields and the API's ``comm=``/``marker=`` are matched by one linear-time engine
(:func:`workbench.base.untrusted.user_regex`), and a pattern it refuses is one line naming the option.

Catastrophic patterns run against names built to make a backtracking engine take 2^60 steps:
with a linear-time engine they finish at once, and a regression hangs until the CLI helper's
time-out (minutes away from the milliseconds they take), so nothing here depends on load."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.safety.hostile import cli, refused
from workbench.traces import overlap, ranks
from workbench.traces.analysis import search_mask
from workbench.base.untrusted import MAX_PATTERN_CHARS, PatternError, user_regex

EVIL = "a" * 60 + "!"  # (a+)+$ backtracks 2^60 times over it in Python's re
CATASTROPHIC = ["(a+)+$", "(a|aa)+$", "(a*)*b", "(.*a){20}$", "((a+)+)+$"]


def _trace(path, rank: int | None = None, names=(EVIL, EVIL, "ncclDevKernel_AllReduce_Sum")) -> str:
    ev = [{"ph": "X", "name": n, "cat": "kernel", "ts": 10 * i, "dur": 5, "pid": 0, "tid": 7,
           "args": {"device": 0, "stream": 7}} for i, n in enumerate(names)]
    doc = {"traceEvents": ev} | ({"distributedInfo": {"rank": rank}} if rank is not None else {})
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_match_in_linear_time_and_correctly(pattern):
    import re

    rx = user_regex(pattern, "--comm")
    short = ["aaab", "aaaaaaaaaaaaaaaaaaaaa", "aa!", "b"]  # short enough for Python's backtracking
    got = search_mask(rx, pd.Series(pd.Categorical([EVIL, *short, None])))
    assert list(got[1:-1]) == [re.search(pattern, n) is not None for n in short]  # the same answers
    assert not got[0] and not got[-1]  # none of them matches "a...a!"; a missing name matches nothing


@pytest.mark.parametrize("pattern, why", [
    ("a{4294967296}", "counts past 1000"), ("a{2,99999}", "counts past 1000"), ("(a)\\1", "backreferences"),
    ("(?=a)b", "lookaround"), ("(?<!a)b", "lookaround"), ("(", "missing )"), ("[z-a]", "invalid character class range"),
    ("x" * (MAX_PATTERN_CHARS + 1), "characters long"), ("\ud800", "lone surrogate"),
    ("((((((((((a{1000}){1000}){1000}))))))))", "repetition"),
])
def test_refused_patterns_say_why_in_one_line(pattern, why):
    with pytest.raises(PatternError) as exc:
        user_regex(pattern, "--comm")
    text = str(exc.value)
    assert text.startswith("--comm") and why in text and "\n" not in text
    assert len(text) < 400  # the pattern is shown cut short, whatever its length


def test_an_escaped_brace_is_not_a_repetition():
    assert user_regex(r"x\{99999}", "--comm").search("x{99999}")


def test_one_engine_for_comm_and_marker():
    df = pd.DataFrame({"name": pd.Categorical(["a"])})
    with pytest.raises(overlap.OverlapError, match="^--comm"):
        overlap.comm_pattern("(a)\\1")
    with pytest.raises(ranks.RankError, match="^--marker"):
        ranks.first_collective(df.assign(kind="span"), marker="(?=a)")
    assert type(overlap.comm_pattern("x")) is type(user_regex("x"))


def test_cli_comm_marker_catastrophic_and_refused(tmp_path):
    one, two = _trace(tmp_path / "r0.json", 0), _trace(tmp_path / "r1.json", 1)
    for args in (["--comm", "(a+)+$"], ["--comm", "(a|aa)+$"]):
        got = cli("trace", one, "--json", *args)
        assert got.code == 0 and not got.err_lines, got.err
        gpu = json.loads(got.out)["gpu_time"]
        assert gpu["breakdown"][0]["communication_us"] > 0  # the NCCL kernel; the "a...!" names are not (no $ match)
    got = cli("trace", one, two, "--json", "--marker", "(a+)+$")
    assert got.code == 0 and got.err == "", got.err  # no pandas warning about match groups either
    refused(cli("trace", one, "--comm", "a{4294967296}"), "--comm", "counts past 1000")
    refused(cli("trace", one, "--comm", "(a)\\1"), "--comm", "backreferences")
    refused(cli("trace", one, two, "--marker", "(?<=a)b"), "--marker", "lookaround")


def test_api_trace_marker_refused_as_bad_input(tmp_path):
    import workbench as wb

    one, two = _trace(tmp_path / "r0.json", 0), _trace(tmp_path / "r1.json", 1)
    assert wb.trace(one, two, marker="(a+)+$").meta["alignment"]
    with pytest.raises(wb.BadInput, match="--marker .* lookaround"):
        wb.trace(one, two, marker="(?=a)")


def test_the_traces_page_lane_filter_uses_the_same_engine():
    from streamlit.testing.v1 import AppTest

    from tests.support.paths import ROOT

    at = AppTest.from_file(str(ROOT / "pages" / "traces.py"), default_timeout=120).run()
    at.selectbox(key="pick").set_value("examples/torch_cuda_h200.json.gz").run()
    lanes = next(t for t in at.text_input if t.key.startswith("lanes"))
    lanes.set_value("(a+)+$").run()
    assert not at.exception and not at.error
    lanes.set_value("(a)\\1").run()
    assert any("The lane filter" in e.value and "backreferences" in e.value for e in at.error)
    assert not at.exception
