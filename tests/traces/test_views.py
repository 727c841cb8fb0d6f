"""Several ranks as one trace, the trace diff, p-value adjustment, and the trace CLI's outputs
(text, JSON, --chrome, --phases, diff, several files): what they say and how they fail."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from workbench.evidence import stats
from workbench.traces import analysis, diff, load, ranks
from workbench.traces.cli import trace_main
from workbench.traces.export import write_chrome_json
from workbench.traces.model import from_records, validate, with_depth

from tests.data.two_ranks_allreduce import make_fixture  # the fixture's known truth
from tests.support.paths import DATA, ROOT

RANKS = DATA / "two_ranks_allreduce"
RANK_FILES = [RANKS / f"kineto_2ranks_rank{r}_synthetic.json.gz" for r in (0, 1)]


# --- several ranks --------------------------------------------------------------------------------

def test_ranks_align_on_the_first_collective_and_find_the_straggler():
    df, meta = ranks.load_ranks([str(p) for p in reversed(RANK_FILES)])  # order given does not matter
    validate(df)
    assert [r["rank"] for r in meta["ranks"]] == [0, 1]  # from distributedInfo
    assert meta["alignment"].startswith("end of each rank's first collective (ncclDevKernel_AllReduce")
    # rank 1's wall clock is 3.2 ms ahead: the shift undoes it to within the fixture's 2 us jitter
    assert meta["ranks"][1]["offset_ns"] == pytest.approx(-make_fixture.WALL_ERROR_NS[1], abs=2_500)
    lanes = list(df["track"].cat.categories)
    assert lanes[0].startswith("rank 0 · ") and lanes[-1].startswith("rank 1 · ")  # grouped by rank
    assert df.groupby("rank", observed=True)["track"].nunique().tolist() == [3, 3]
    sk = ranks.collective_skew(df)
    assert len(sk) == make_fixture.STEPS and (sk["last_rank"] == 1).all()  # rank 1 arrives last every time
    assert (sk["end_spread_us"] < 3).all()  # the collectives end together once aligned
    slow = ranks.slowest(df)
    lo, hi = slow["skew_ci_us"]
    # rank 1's GEMM takes 134 us longer (jitter 15 us each side)
    assert slow["rank"] == 1 and lo < make_fixture.GEMM_US[1] - make_fixture.GEMM_US[0] < hi
    assert slow["text"].startswith("slowest rank: 1 (last to arrive at 6 of 6")


def test_ranks_aligned_by_base_times_keep_the_clock_error_and_say_so():
    df, meta = ranks.load_ranks([str(p) for p in RANK_FILES], align="base")
    assert meta["alignment"].startswith("wall-clock times as reported")
    sk = ranks.collective_skew(df)
    assert sk["end_spread_us"].median() == pytest.approx(3_200, abs=5)  # the hosts' 3.2 ms disagreement


def test_rank_summary_and_per_name_spread():
    df, _ = ranks.load_ranks([str(p) for p in RANK_FILES])
    summ = ranks.rank_summary(df).set_index("rank")
    assert summ.loc[1, "computation_us"] > summ.loc[0, "computation_us"]  # the straggler computes longer
    assert summ.loc[0, "communication_us"] > summ.loc[1, "communication_us"]  # rank 0 waits in the collectives
    assert (summ["steps"] == make_fixture.STEPS).all()
    assert (summ["step_ci_lo_us"] <= summ["step_median_us"]).all() and (summ["step_median_us"] <= summ["step_ci_hi_us"]).all()
    per = ranks.rank_name_stats(df).set_index("name")
    assert per.loc[make_fixture.GEMM, "slowest_rank"] == 1
    assert per.loc[make_fixture.GEMM, "spread_us"] == pytest.approx(134, abs=25)


def test_rocpd_databases_of_two_ranks():
    """The importers' rocpd fixtures: one database per rank (rank 1's holds two sessions)."""
    data = DATA / "two_ranks_training_step"
    df, meta = ranks.load_ranks([str(data / "rank0.db"), str(data / "rank1.db")])
    validate(df)
    assert meta["format"] == "rocpd" and [r["rank"] for r in meta["ranks"]] == [0, 1]
    assert meta["alignment"].startswith("end of each rank's first collective (ncclDevKernel_AllReduce")
    sk = ranks.collective_skew(df)
    assert len(sk) == 1 and sk["end_spread_us"].iloc[0] == 0
    slow = ranks.slowest(df)
    # the fixture's kernels start and end alike on both ranks: no rank is blamed
    assert slow["rank"] is None and slow["text"].startswith("no slowest rank")


def test_merge_of_tables_without_collectives_or_clocks():
    a = from_records([{"track": "SM 000", "name": "gemm", "start_ns": 1_000, "dur_ns": 10}], source="x")
    b = from_records([{"track": "SM 000", "name": "gemm", "start_ns": 5_000, "dur_ns": 10}], source="x")
    df, meta = ranks.merge([a, b])
    assert "relative timing is unknown" in meta["alignment"]
    assert df.groupby("rank")["start_ns"].min().tolist() == [1_000, 1_000]
    df, meta = ranks.merge([a, b], align="none")
    assert df.groupby("rank")["start_ns"].min().tolist() == [1_000, 5_000]
    with pytest.raises(ranks.RankError, match="no collective kernel in the trace of rank"):
        ranks.merge([a, b], align="collective")
    with pytest.raises(ranks.RankError, match="same rank"):
        ranks.merge([a, b], ranks=[0, 0])
    df, meta = ranks.merge([a, b], marker="gemm", align="collective")  # a study's own marker
    assert meta["alignment"].startswith("end of each rank's first marker (gemm)")
    assert ranks.slowest(df)["rank"] in (0, 1)  # no collective kernels: decided by compute time


# --- trace diff -----------------------------------------------------------------------------------

def _trace(seed: int, slow: float = 1.0, names=("gemm", "relu"), n: int = 40):
    rng = np.random.default_rng(seed)
    recs, t = [], 0
    for i in range(n):
        for name in names:
            d = int(rng.normal(10_000 if name == "gemm" else 2_000, 300) * (slow if name == "gemm" else 1.0))
            recs.append({"track": "GPU 0 · stream 7", "name": name, "category": "kernel", "start_ns": t, "dur_ns": d})
            t += d + 500
    return from_records(recs, source="test")


def test_diff_finds_the_slower_kernel_and_leaves_the_same_one_alone():
    a, b = _trace(1), _trace(2, slow=1.2)
    t = diff.diff(a, b).set_index("name")
    assert t.loc["gemm", "verdict"] == "slower in b" and t.loc["relu", "verdict"] == "cannot tell apart"
    g = t.loc["gemm"]
    assert g["delta_median_lo_us"] < 2.0 < g["delta_median_hi_us"]  # truth: 10 us x 0.2
    assert g["delta_total_lo_us"] < g["delta_total_us"] < g["delta_total_hi_us"]
    assert g["p_adjusted"] >= g["p_value"]
    assert t.attrs["shared"] == 2 and t.attrs["tested"] == 2 and t.attrs["correction"] == "holm"


def test_diff_lists_names_in_one_trace_and_refuses_traces_without_names_in_common():
    a = _trace(1, names=("gemm", "relu"))
    b = _trace(2, names=("gemm", "softmax"), n=3)
    t = diff.diff(a, b).set_index("name")
    assert t.loc["relu", "verdict"] == "only in a" and t.loc["softmax", "verdict"] == "only in b"
    assert t.loc["gemm", "verdict"] == "too few spans" and np.isnan(t.loc["gemm", "delta_median_lo_us"])
    assert t.loc["gemm", "note"] == "count 40 -> 3"
    shown = diff.display(t.reset_index())
    assert not shown.isna().any().any() and "None" not in shown.to_string() and "nan" not in shown.to_string()
    with pytest.raises(diff.DiffError, match="share no span names"):
        diff.diff(a, _trace(3, names=("iree_vm_invoke",)))


def test_holm_controls_false_verdicts_over_many_unchanged_names():
    names = tuple(f"k{i}" for i in range(40))
    a, b = _trace(1, names=names, n=12), _trace(2, names=names, n=12)  # nothing changed
    holm = diff.diff(a, b, correction="holm")
    # by chance some unadjusted p-values fall below 5%; adjusted, none makes a verdict
    assert (holm["p_value"] < 0.05).sum() >= 1
    assert (holm["verdict"] == "cannot tell apart").all()
    bh = diff.diff(a, b, correction="bh")
    assert (bh["p_adjusted"] >= bh["p_value"]).all()


def test_adjust_pvalues_matches_scipy_and_known_holm_values():
    from scipy.stats import false_discovery_control

    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.random(rng.integers(1, 30)) ** 3
        assert np.allclose(stats.adjust_pvalues(p, "bh"), false_discovery_control(p))
    got = stats.adjust_pvalues([0.01, 0.04, 0.03, np.nan, 0.005], "holm")
    assert np.allclose(got[[0, 1, 2, 4]], [0.03, 0.06, 0.06, 0.02]) and np.isnan(got[3])
    with pytest.raises(ValueError, match="unknown p-value adjustment"):
        stats.adjust_pvalues([0.1], "bonferroni")


# --- lanes, exports, dropped events ---------------------------------------------------------------

def test_lane_summaries_match_a_per_lane_reference():
    rng = np.random.default_rng(3)
    recs = [{"track": f"s{rng.integers(0, 50)}", "name": "k", "start_ns": int(s), "dur_ns": int(d)}
            for s, d in zip(rng.integers(0, 10**6, 3_000), rng.integers(1, 5_000, 3_000))]
    df = from_records(recs, source="t")
    ts = analysis.track_summary(df).set_index("track")
    gaps = analysis.gaps(df)
    for track, g in df.groupby("track", observed=True):
        bs, be = analysis.busy_intervals(g["start_ns"].to_numpy(), (g["start_ns"] + g["dur_ns"]).to_numpy())
        assert ts.loc[track, "busy_us"] == pytest.approx((be - bs).sum() / 1e3)
        assert ts.loc[track, "largest_gap_us"] == pytest.approx(max((bs[1:] - be[:-1]).max(initial=0), 0) / 1e3)
        assert gaps[gaps["track"] == track]["dur_ns"].tolist() == (bs[1:] - be[:-1]).tolist()
    assert list(ts.index) == [t for t in df["track"].cat.categories if t in set(df["track"])]  # lane order


def test_chrome_export_keeps_lane_order_with_interleaved_processes(tmp_path):
    recs = [{"process": p, "track": t, "name": "x", "start_ns": i, "dur_ns": 1}
            for i, (p, t) in enumerate([("gpu", "GPU 0 · stream 7"), ("host", "main"), ("gpu", "GPU 0 · stream 9"),
                                        ("host", "worker")])]
    order = ["GPU 0 · stream 9", "main", "GPU 0 · stream 7", "worker"]
    df = from_records(recs, source="t", track_order=order)
    write_chrome_json(df, tmp_path / "o.json")
    back, _ = load(tmp_path / "o.json")
    assert list(back["track"].cat.categories) == order
    assert dict(zip(back["track"].astype(str), back["process"].astype(str))) == {r["track"]: r["process"] for r in recs}


def test_dropped_events_reach_every_output(tmp_path, capsys):
    events = [{"ph": "X", "name": "a", "cat": "kernel", "ts": i, "dur": 1, "pid": 0, "tid": 7} for i in range(5)]
    events += [{"ph": "X", "name": "bad", "ts": "garbage", "dur": 1, "pid": 0, "tid": 7}, {"ph": "E", "pid": 0, "tid": 3}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    assert trace_main([str(p)]) == 0
    assert "dropped or adjusted events: 2 malformed (dropped)" in capsys.readouterr().out
    assert trace_main([str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dropped"] == {"malformed (dropped)": 2}
    assert trace_main([str(p), str(p)]) == 0  # two ranks: the counts add up
    assert "dropped or adjusted events: 4 malformed (dropped)" in capsys.readouterr().out
    assert analysis.dropped_events({"negative_durations": 3, "timestamp_overflows": 0, "unclosed_spans": 1}) == {
        "negative duration (kept with duration 0)": 3, "unclosed span (kept, closed by the importer)": 1}


def test_text_columns_are_valid_utf8_whatever_the_source_gave():
    df = from_records([{"track": b"lane \xff", "name": b"k\xfe", "start_ns": 0, "dur_ns": 1},
                       {"track": "t", "name": "bad \udc80 surrogate", "start_ns": 1, "dur_ns": 1}], source="t")
    validate(df)
    assert list(df["name"].astype(str)) == ["k\ufffd", "bad ? surrogate"]
    assert str(df["track"].cat.categories[0]) == "lane \ufffd"
    json.dumps(analysis.summary(df, {}), ensure_ascii=False).encode("utf-8")  # printable, exportable


# --- the CLI --------------------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", "trace", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_cli_several_files_are_ranks():
    res = _cli(*map(str, RANK_FILES), "--phases")
    assert res.returncode == 0, res.stderr
    assert "rank 1 · GPU 1 · stream 7" in res.stdout and "slowest rank: 1" in res.stdout
    assert "Phases of rank 0" in res.stdout and "Phases of rank 1" in res.stdout
    res = _cli(*map(str, RANK_FILES), "--json")
    doc = json.loads(res.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["slowest"]["rank"] == 1


def test_cli_diff(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_chrome_json(_trace(1), a)
    write_chrome_json(_trace(2, slow=1.2), b)
    res = _cli("diff", str(a), str(b))
    assert res.returncode == 0, res.stderr
    assert "1 slower, 0 faster" in res.stdout and "slower in b" in res.stdout and "None" not in res.stdout
    doc = json.loads(_cli("diff", str(a), str(b), "--json").stdout)
    assert {n["name"]: n["verdict"] for n in doc["names"]} == {"gemm": "slower in b", "relu": "cannot tell apart"}


@pytest.mark.parametrize("args, message", [
    (["diff", "traces/examples/torch_cuda_h200.json.gz", "traces/examples/iree_sum_c8_50it.tracy"],
     "diff: chrome-json vs tracy: the traces share no span names"),
    (["diff", "traces/examples/torch_cuda_h200.json.gz"], "trace diff takes two files"),
    (["traces/examples/perfetto_trackevent_synthetic.pftrace", "--phases"], "phases: no phase rules"),
    (["traces/examples/torch_cuda_h200.json.gz", "--chrome", "/nonexistent/dir/o.json"], "cannot write"),
    (["traces/examples/torch_cuda_h200.json.gz", "traces/examples/iree_sum_c8_50it.tracy", "--align", "collective"],
     "ranks: no collective kernel"),
    (["traces/examples/torch_cuda_h200.json.gz", "--no-such-option"], "unrecognized arguments"),
])
def test_cli_bad_requests_exit_2_with_one_line(args, message):
    res = _cli(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if "error:" in ln]
    assert "Traceback" not in res.stderr and len(errors) == 1 and message in errors[0]


def test_cli_trace_without_spans_and_the_workbench_subparser(tmp_path, capsys):
    p = tmp_path / "instants.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "i", "name": "a", "ts": 1, "pid": 1, "tid": 1}]}))
    from workbench.cli import main

    assert main(["trace", str(p)]) == 0
    assert "No spans (only instants)" in capsys.readouterr().out
    assert main(["--store", str(tmp_path / "s.sqlite"), "trace", str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["span_count"] == 0
    assert main(["trace"]) == 2  # argparse: FILE is required


def test_phases_on_ireeperf_events_without_submission_id(tmp_path, capsys):
    src = ROOT / "traces" / "examples" / "iree_sum_c8_cpu.ireeperf.jsonl"
    lines = []
    for i, line in enumerate(src.read_text().splitlines()):
        rec = json.loads(line)
        if rec.get("record_type") in ("queue_event", "host_execution_event") and i % 7 == 0:
            rec.pop("submission_id", None)
        lines.append(json.dumps(rec))
    p = tmp_path / "nosub.ireeperf.jsonl"
    p.write_text("\n".join(lines) + "\n")
    rc = trace_main([str(p), "--phases"])
    out = capsys.readouterr()
    assert rc in (0, 2) and "Traceback" not in out.err
    assert rc == 0 and "Phases (median over" in out.out


def test_study_facing_merge_of_per_rank_tables():
    """What a study calls: span tables per rank -> one aligned table -> the shared timeline."""
    pytest.importorskip("altair")
    from workbench.traces import charts

    per_rank = [load(p) for p in RANK_FILES]
    chart, meta = charts.ranks_timeline(per_rank, title="ag-gemm, 2 ranks")
    spec = chart.to_dict()
    assert meta["ranks"][1]["offset_ns"] != 0 and "layer" in spec
    lanes = spec["params"][[p["name"] for p in spec["params"]].index("rowlane")]["value"]
    assert lanes[0].startswith("rank 0 · ") and any(lane.startswith("rank 1 · ") for lane in lanes)
    rows = pd.DataFrame(next(v for v in spec["datasets"].values() if len(v) > 10))
    assert set(rows["kind"]) == {"span"}
    assert validate(with_depth(ranks.merge(per_rank)[0])) is not None
