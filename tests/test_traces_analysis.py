"""Span model constructor, analyses, exports and chart data on small hand-made tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.traces import analysis, charts, export, load, phases
from workbench.traces.model import SpanTableError, concat, from_records, validate, with_depth

REC = [
    {"track": "cpu", "name": "step", "category": "cpu_op", "start_ns": 0, "dur_ns": 100_000},
    {"track": "cpu", "name": "launch", "category": "cuda_runtime", "start_ns": 10_000, "dur_ns": 5_000,
     "correlation": 1},
    {"track": "GPU 0 stream 7", "name": "gemm", "category": "kernel", "start_ns": 20_000, "dur_ns": 40_000,
     "correlation": 1, "device": 0, "stream": 7, "grid": [132, 1, 1]},
    {"track": "GPU 0 stream 7", "name": "gemm", "category": "kernel", "start_ns": 70_000, "dur_ns": 20_000},
    {"track": "cpu", "name": "mark", "category": "marker", "start_ns": 50_000, "kind": "instant"},
]


def table():
    return with_depth(from_records(REC, source="test", track_order=["cpu", "GPU 0 stream 7"]))


def test_from_records_types_and_extra_keys_in_args():
    df = validate(table())
    assert list(df["track"].cat.categories) == ["cpu", "GPU 0 stream 7"] and df["track"].cat.ordered
    assert df["start_ns"].dtype == np.int64 and str(df["correlation"].dtype) == "Int64"
    assert df.loc[2, "args"] == {"grid": [132, 1, 1]}
    assert df["device"].isna().sum() == 4  # NA for missing, not 0 or -1
    assert df.loc[1, "depth"] == 1 and df.loc[0, "depth"] == 0


def test_validate_rejects_bad_tables():
    df = table()
    with pytest.raises(SpanTableError, match="negative durations"):
        validate(df.assign(dur_ns=-df["dur_ns"]))
    with pytest.raises(SpanTableError, match="instants must have dur_ns == 0"):
        validate(df.assign(dur_ns=5))
    with pytest.raises(SpanTableError, match="lacks columns"):
        validate(df.drop(columns=["kind"]))


def test_name_stats_and_track_gaps():
    df = table()
    st = analysis.name_stats(df).set_index("name")
    assert st.loc["gemm", "count"] == 2 and st.loc["gemm", "total_us"] == 60.0
    assert st.loc["gemm", "min_us"] == 20.0 and st.loc["gemm", "max_us"] == 40.0
    assert st.loc["step", "share_pct"] == 100.0  # wall = 0..100 us
    gaps = analysis.gaps(df)
    assert gaps.to_dict("records") == [{"track": "GPU 0 stream 7", "start_ns": 60_000, "dur_ns": 10_000}]
    ts = analysis.track_summary(df).set_index("track")
    assert ts.loc["GPU 0 stream 7", "busy_us"] == 60.0 and ts.loc["GPU 0 stream 7", "idle_us"] == 10.0


def test_compare_gives_per_name_deltas():
    a = table()
    b = a.copy()
    b.loc[b["name"] == "gemm", "dur_ns"] = [30_000, 20_000]
    cmp = analysis.compare(a, b).set_index("name")
    assert cmp.loc["gemm", "delta_total_us"] == -10.0
    assert cmp.loc["gemm", "ratio_mean"] == pytest.approx(25 / 30)
    assert cmp.index[0] == "gemm"  # largest change first


def test_chrome_export_round_trips(tmp_path):
    df = table()
    p = tmp_path / "out.json"
    export.write_chrome_json(df, p)
    back, meta = load(p)
    assert meta["base_time_ns"] == 0 or meta["base_time_ns"] == df["start_ns"].min()
    assert list(back["track"].cat.categories) == ["cpu", "GPU 0 stream 7"]
    key = ["name", "start_ns", "dur_ns", "depth"]
    assert back[key].sort_values(key).to_numpy().tolist() == df[key].sort_values(key).to_numpy().tolist()
    assert set(back[back["category"] == "kernel"]["correlation"].dropna()) == {1}


def test_chrome_export_keeps_ns_with_wall_clock_times(tmp_path):
    df = table()
    df["start_ns"] += 1_795_239_134_402_010_945  # absolute ns: float us would lose the ns digits
    p = tmp_path / "abs.json"
    export.write_chrome_json(df, p)
    back, _ = load(p)
    assert sorted(back["start_ns"]) == sorted(df["start_ns"])


def test_ascii_timeline_draws_lanes_labels_and_idle():
    text = export.ascii_timeline(table(), width=50, names={"gemm": "G"}, track_labels=["T1", "T2"])
    lines = text.splitlines()
    assert lines[0].strip().startswith("0 us")
    t1 = next(l for l in lines if l.startswith("T1 "))
    t2 = next(l for l in lines if l.startswith("T2 "))
    assert "step(100.0)" in t1 and t1.count("[") == 1
    assert t2.count("[") == 2 and "G" in t2 and "·" in t2
    assert "T2: GPU 0 stream 7" in lines and "G: gemm" in lines


def test_mermaid_gantt_block():
    text = export.mermaid_gantt(table(), title="a: b")
    assert text.startswith("```mermaid\ngantt") and text.endswith("```")
    assert "    section GPU 0 stream 7" in text and "    gemm :20, 60" in text
    assert "title a∶ b" in text  # ':' would end the title field


def test_timeline_data_downsamples_but_keeps_time_coverage():
    rng = np.random.default_rng(1)
    n = 30_000
    start = np.sort(rng.integers(0, 10_000_000, n))
    df = from_records([{"track": f"t{i % 3}", "name": f"k{i % 7}", "category": "kernel", "start_ns": int(s),
                        "dur_ns": 200} for i, s in enumerate(start)], source="test")
    rows, info = charts.timeline_data(df, max_marks=2_000)
    assert info["merged"] and len(rows) <= 2_000 and rows["count"].sum() == n
    # every span lies inside some drawn block of its lane
    full, _ = charts.timeline_data(df, max_marks=10**6)
    assert not _["merged"] and len(full) == n
    small, info2 = charts.timeline_data(df, start_ns=0, end=50_000)
    assert not info2["merged"] and info2["spans_in_window"] == len(small)
    # labels: a merged block names its longest span and how many it stands for
    block = rows[rows["count"] > 1].iloc[0]
    assert block["category"] == "kernel" and block["name"].startswith("k")
    assert block["name"].endswith(f"(+{block['count'] - 1} more)")
    assert set(full["name"]) == {f"k{i}" for i in range(7)} and set(full["category"]) == {"kernel"}


def test_timeline_chart_builds():
    pytest.importorskip("altair")
    spec = charts.timeline(table()).to_dict()
    assert "layer" in spec or "mark" in spec


def test_phase_spans_tile_iterations():
    per_iter = pd.DataFrame([{"iteration": 0, "start_ns": 0, "total_ns": 100, "VM setup": 10,
                              "scheduling delay": 20, "dispatch compute": 40, "inter-dispatch": 5,
                              "cleanup + wake-up": 25}])
    sp = phases.phase_spans(per_iter)
    assert sp["dur_ns"].sum() == 100 and (sp["start_ns"].diff().dropna() > 0).all()
    summ = phases.summarize(per_iter)
    assert summ[summ.phase != "total"]["share_pct"].sum() == pytest.approx(100)


def test_concat_keeps_lane_order():
    a = table()
    b = from_records([{"track": "phases", "name": "x", "start_ns": 0, "dur_ns": 1}], source="p")
    c = concat([b, a])
    assert list(c["track"].cat.categories) == ["phases", "cpu", "GPU 0 stream 7"]
    assert json.dumps(analysis.summary(c, {"format": "x"}))  # JSON-serialisable


def test_timeline_chart_with_more_rows_than_altairs_default_limit():
    pytest.importorskip("altair")
    df = from_records([{"track": f"t{i % 4}", "name": "k", "start_ns": i * 1_000, "dur_ns": 500}
                       for i in range(6_000)], source="test")
    spec = charts.timeline(df).to_dict()  # 6000 marks > altair's 5000-row guard
    assert len(spec["datasets"][next(iter(spec["datasets"]))]) == 6_000


def test_traces_page_switches_traces_with_fresh_lanes_and_window():
    """Picking another example shows all of its lanes (lane/window widgets are per trace)."""
    from streamlit.testing.v1 import AppTest

    page = Path(__file__).resolve().parent.parent / "pages" / "traces.py"
    at = AppTest.from_file(str(page), default_timeout=60).run()
    examples = [o for o in at.selectbox(key="pick").options if o.startswith("examples/")]
    tracy_ex = next(o for o in examples if o.endswith(".tracy"))
    chrome_ex = next(o for o in examples if ".json" in o)
    for pick in (tracy_ex, chrome_ex):
        at.selectbox(key="pick").set_value(pick).run()
        assert not at.exception
        assert not [i.value for i in at.info], pick  # "No lanes selected." after a switch was the bug
        assert "Phases" in [h.value for h in at.subheader], pick
