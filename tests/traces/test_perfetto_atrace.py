"""Android system traces: atrace markers in ftrace ``print`` events read as slices, as Perfetto's
TraceProcessor reads them.

The fixture (tests/data/android_atrace/make_fixture.py): three frames 16.6 ms apart; on the app's
main thread (tid 1000) ``Choreographer#doFrame N`` (3.5 ms) holding ``traversal`` (3.3 ms), which
holds ``measure`` (1 ms) and ``draw`` (2 ms); on RenderThread (1010) ``DrawFrames N`` (6 ms); an
async ``launching: com.example.app`` slice (S/F, cookie 7) over the whole run; a counter marker;
an ``E`` with no ``B`` on surfaceflinger (malformed) and a ``B`` left open (unclosed).
"""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.traces import load
from tests.support.paths import DATA

ATRACE = DATA / "android_atrace" / "android_atrace_synthetic.pftrace"


def test_atrace_slices_per_thread_nested_as_written():
    df, meta = load(ATRACE)
    assert meta["format"] == "perfetto-pftrace"
    assert list(df["track"].cat.categories) == ["main 1000", "RenderThread 1010",
                                                "com.example.app 1000 · launching: com.example.app (async)",
                                                "surfaceflinger 1200"]
    main = df[df["track"] == "main 1000"].set_index("name")
    assert main.loc["Choreographer#doFrame 1", "dur_ns"] == 3_500_000
    assert main.loc["Choreographer#doFrame 1", "depth"] == 0
    frame = main.loc[main.index == "traversal"]
    assert (frame["dur_ns"] == 3_300_000).all() and (frame["depth"] == 1).all()
    draw = main.loc[main.index == "draw"]
    assert (draw["dur_ns"] == 2_000_000).all() and (draw["depth"] == 2).all()
    assert (df["process"].astype(str).str.startswith("com.example.app 1000")).sum() == 16
    render = df[df["track"] == "RenderThread 1010"]
    assert render["name"].tolist() == ["DrawFrames 0", "DrawFrames 1", "DrawFrames 2"]
    assert (render["dur_ns"] == 6_000_000).all()


def test_async_slices_counters_and_broken_markers():
    df, meta = load(ATRACE)
    launch = df[df["name"] == "launching: com.example.app"]
    assert len(launch) == 1 and launch["dur_ns"].iloc[0] == 500_000 + 2 * 16_600_000 + 9_700_000
    assert meta["atrace_markers_skipped"] == 1  # the counter
    assert meta["malformed_events"] == 1 and meta["unclosed_spans"] == 1
    assert (df["category"] == "atrace").all()


def test_an_android_trace_reads_in_python_with_self_time():
    tr = wb.trace(ATRACE)
    st = tr.breakdown()["by name"].set_index("name")
    assert st.loc["traversal", "total_us"] == pytest.approx(3 * 3_300)
    assert st.loc["traversal", "self_us"] == pytest.approx(3 * 300)  # minus measure and draw
    assert tr.lanes().set_index("track").loc["main 1000", "spans"] == 12
