"""More hostile and unlucky inputs to the surfaces of issue 42, beyond the cases it lists: control
characters and odd Unicode in patterns, mentions and huge names in trace reports, deep nesting,
links where a store should be, and a signal while a run queues for the machine."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys

import pytest

from tests.safety.hostile import cli, refused
from tests.support.paths import ROOT
from workbench.traces.analysis import search_mask
from workbench.base.untrusted import PatternError, user_regex

UNSAFE = ("\x1b", "\u202e", "\x00", "\x07")


@pytest.mark.parametrize("pattern", ["\x1b]0;title\x07(", "\u202e(", "(\x00", "a{1001}\u2067"])
def test_a_refused_pattern_is_shown_without_its_control_characters(pattern, tmp_path):
    with pytest.raises(PatternError) as exc:
        user_regex(pattern, "--comm")
    assert not any(c in str(exc.value) for c in UNSAFE)
    if "\x00" in pattern:
        return  # no command line holds a NUL; the page and the API take it, above
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "k", "cat": "kernel", "ts": 1, "dur": 1,
                                                  "pid": 0, "tid": 7}]}))
    got = cli("trace", str(trace), "--comm", pattern)
    refused(got, "--comm")
    assert not any(c in got.err for c in UNSAFE)


@pytest.mark.parametrize("pattern, names, hits", [
    ("(?i)straße", ["STRASSE", "Straße", "strasse"], [False, True, False]),  # RE2 folds simply, as re does
    ("é+$", ["café", "cafe\u0301"], [True, False]),  # no normalisation: the name's code points are matched
    ("🚀", ["launch 🚀 kernel", "launch"], [True, False]),
    ("^$", ["", "x"], [True, False]),
    ("\\x00", ["a\x00b", "ab"], [True, False]),
])
def test_odd_unicode_matches_as_written(pattern, names, hits):
    import pandas as pd

    assert list(search_mask(user_regex(pattern), pd.Series(names))) == hits


def _kernels(path, names):
    ev = [{"ph": "X", "name": n, "cat": "kernel", "ts": 10 * i, "dur": 5, "pid": 0, "tid": 7,
           "args": {"device": 0, "stream": 7}} for i, n in enumerate(names)]
    path.write_text(json.dumps({"traceEvents": ev}))
    return str(path)


def test_trace_markdown_keeps_mentions_inert_and_huge_names_short(tmp_path):
    trace = _kernels(tmp_path / "t.json", ["@octocat_kernel #12", "k" * 300_000, "ncclDevKernel_AllReduce"])
    got = cli("trace", trace, "--markdown")
    assert got.code == 0, got.err
    assert "@octocat" not in got.out.replace("@&#8203;octocat", "") and "#12" not in got.out.replace("#&#8203;12", "")
    assert len(got.out) < 20_000


def test_a_deeply_nested_rocprofv3_document_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"rocprofiler-sdk-tool": ' + "[" * 200_000 + "]" * 200_000 + "}")
    got = cli("trace", str(path))
    refused(got, "deep.json")


@pytest.mark.parametrize("target", ["/dev/zero", "loop"])
def test_a_store_path_that_links_to_a_device_or_loops_is_one_line(target, tmp_path):
    link = tmp_path / "results.sqlite"
    link.symlink_to(target if target.startswith("/") else link)
    got = cli("runs", store=link)
    refused(got, str(link))
    assert "corrupt" not in got.err


QUEUED = """
import sys, workbench as wb
def said(fraction, message):
    print(message, flush=True)
try:
    wb.run("calibration", preset="smoke", store=sys.argv[1], progress=said)
except wb.Interrupted as exc:
    print("INTERRUPTED", exc, flush=True)
    sys.exit(130)
"""


def test_sigterm_while_a_run_queues_for_the_machine_stores_nothing(tmp_path):
    """The machine lock is held here; the run queues, says so, and the signal comes then (the
    order is fixed by reading its line, not by timing)."""
    lock = tmp_path / "machine.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    store = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", QUEUED, str(store)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ | {"WORKBENCH_LOCK": str(lock)})
    try:
        for line in proc.stdout:
            if line.startswith("queued"):
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
        os.close(fd)
    assert proc.returncode == 130, err[-2000:]
    assert "INTERRUPTED interrupted before the run started; nothing was stored" in out
    from tests.safety.hostile import stored_runs

    assert stored_runs(store) == 0
