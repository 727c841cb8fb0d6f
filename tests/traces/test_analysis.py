"""Span model constructor, analyses, exports and chart data on small hand-made tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from workbench.traces import analysis, charts, export, load, phases
from workbench.traces.model import SpanTableError, concat, from_columns, from_records, validate, with_depth
from tests.support.paths import ROOT

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
    # "step" covers every other row: an envelope, kept out of the per-name table
    assert "step" not in st.index and analysis.envelopes(df).tolist() == [True, False, False, False, False]
    assert st.loc["gemm", "self_us"] == 60.0 and st.loc["gemm", "share_pct"] == 75.0  # of the 80 us from the first to the last row inside the envelope
    gaps = analysis.gaps(df)
    assert gaps.to_dict("records") == [{"track": "GPU 0 stream 7", "start_ns": 60_000, "dur_ns": 10_000}]
    ts = analysis.track_summary(df).set_index("track")
    assert ts.loc["GPU 0 stream 7", "busy_us"] == 60.0 and ts.loc["GPU 0 stream 7", "idle_us"] == 10.0


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


def test_timeline_data_sends_real_spans_or_bounded_cells():
    rng = np.random.default_rng(1)
    n = 30_000
    start = np.sort(rng.integers(0, 10_000_000, n))
    df = from_records([{"track": f"t{i % 3}", "name": f"k{i % 7}", "category": "kernel", "start_ns": int(s),
                        "dur_ns": 200} for i, s in enumerate(start)], source="test")
    full, info = charts.timeline_data(df, max_marks=10**6)
    assert info["real"] and info["levels"] == [0.0] and len(full) == n and (full["kind"] == "span").all()
    assert set(full["name"]) == {f"k{i}" for i in range(7)} and info["color_by"] == "name"
    rows, info = charts.timeline_data(df, max_marks=2_000, width_px=600)
    assert len(rows) <= 2_000 and not info["real"] and len(info["levels"]) >= 2
    cells = rows[rows["level"] == 0]
    # level 0: one cell per lane row and 3-px column with spans; every span is counted once
    assert cells["count"].sum() == n and cells["busy"].between(0, 1).all()
    assert (np.diff(info["levels"]) < 0).all()  # each level finer than the one before
    # the cells' busy shares add up to the spans' time (busy is rounded to 0.1% per cell)
    assert cells["busy"].sum() * info["levels"][0] == pytest.approx(n * 200 / info["scale"], rel=2e-3)
    small, info2 = charts.timeline_data(df, start_ns=0, end=50_000)
    assert info2["real"] and info2["spans_in_window"] == len(small)


def test_timeline_colours_by_self_time_and_by_category_for_per_tile_names():
    # an enclosing zone must not take a colour from the work inside it
    recs = [{"track": "main", "name": "run", "start_ns": 0, "dur_ns": 1_000}]
    recs += [{"track": "main", "name": f"op{i % 2}", "start_ns": 10 + 100 * i, "dur_ns": 90} for i in range(10)]
    rows, info = charts.timeline_data(with_depth(from_records(recs, source="t")), top_names=2)
    assert info["keys"][:2] == ["op0", "op1"] and rows.loc[rows["name"] == "run", "key"].iloc[0] == charts.OTHER
    # per-tile names (ag-gemm): too many to colour, so colour by category
    tiles = [{"track": f"SM {i % 4}", "name": f"gemm m{i}", "category": "gemm" if i % 3 else "wait",
              "start_ns": i * 10, "dur_ns": 9} for i in range(200)]
    _, info = charts.timeline_data(from_records(tiles, source="t"))
    assert info["color_by"] == "category" and set(info["keys"]) == {"gemm", "wait"}


def test_python_zones_keep_a_colour_of_their_own():
    """The workbench's py.* zones (workbench.running.tracy) are coloured whatever their self time (an
    enclosing py.iteration has almost none), from their own colour family, nested as usual."""
    recs = [{"track": "main", "name": "py.iteration", "start_ns": 0, "dur_ns": 1_000},
            {"track": "main", "name": "py.invoke", "start_ns": 5, "dur_ns": 990}]
    recs += [{"track": "main", "name": f"op{i % 3}", "start_ns": 10 + 100 * i, "dur_ns": 90} for i in range(9)]
    rows, info = charts.timeline_data(with_depth(from_records(recs, source="t")), top_names=2)
    assert info["keys"][:2] == ["op0", "op1"] and {"py.iteration", "py.invoke"} <= set(info["keys"])
    assert rows.loc[rows["name"] == "py.iteration", "key"].iloc[0] == "py.iteration"
    by = rows.groupby("name", observed=True)["row"].first()
    assert by["py.iteration"] < by["py.invoke"] < by["op0"]  # nested rows, outermost first
    colours = dict(zip(info["keys"], charts._colors(info["keys"])))
    assert colours["py.iteration"] in charts.PY_ZONE_COLORS and colours["py.invoke"] in charts.PY_ZONE_COLORS
    assert colours["op0"] not in charts.PY_ZONE_COLORS


def test_self_time_subtracts_children():
    from workbench.traces.analysis import self_time

    lane = np.array([0, 0, 0, 1])
    st = np.array([0, 10, 50, 0])
    en = np.array([100, 40, 60, 30])
    depth = np.array([0, 1, 1, 0])
    assert self_time(lane, st, en, depth).tolist() == [60, 30, 10, 30]


def test_timeline_chart_builds():
    pytest.importorskip("altair")
    spec = charts.timeline(table()).to_dict()
    assert "layer" in spec
    params = {p["name"] for p in spec["params"]}
    assert {"zoom", "lo", "hi", "lvl"} <= params  # zoom and level choice happen in the browser


def test_timeline_chart_of_a_million_spans_stays_bounded():
    pytest.importorskip("altair")
    rng = np.random.default_rng(0)
    n = 1_000_000
    lanes = np.repeat(np.arange(16), n // 16)
    start = np.cumsum(rng.integers(600, 3_000, n))
    df = validate(with_depth(from_columns(
        {"track": np.array([f"GPU {i // 4} stream {i % 4}" for i in range(16)])[lanes],
         "name": np.array([f"k{i}" for i in range(60)])[rng.integers(0, 60, n)], "category": np.full(n, "kernel"),
         "start_ns": start, "dur_ns": rng.integers(500, 600, n)}, source="synthetic")))
    rows, info = charts.timeline_data(df)
    assert len(rows) <= charts.MAX_MARKS and not info["real"]
    assert rows.loc[rows["level"] == 0, "count"].sum() == n  # the overview accounts for every span
    assert set(info["rows"]["label"]) == {f"GPU {i // 4} stream {i % 4}" for i in range(16)}


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
    assert max(len(v) for v in spec["datasets"].values()) == 6_000


def test_traces_page_switches_traces_with_fresh_lanes_and_window():
    """Picking another example shows all of its lanes (lane/window widgets are per trace)."""
    from streamlit.testing.v1 import AppTest

    page = ROOT / "pages" / "traces.py"
    at = AppTest.from_file(str(page), default_timeout=60).run()
    examples = [o for o in at.selectbox(key="pick").options if o.startswith("examples/")]
    tracy_ex = next(o for o in examples if o.endswith(".tracy"))
    chrome_ex = next(o for o in examples if ".json" in o)
    for pick in (tracy_ex, chrome_ex):
        at.selectbox(key="pick").set_value(pick).run()
        assert not at.exception
        assert not [i.value for i in at.info], pick  # "No lanes selected." after a switch was the bug
        assert "Phases" in [h.value for h in at.subheader], pick
