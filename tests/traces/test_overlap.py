"""The GPU-time breakdown and overlap (workbench.traces.overlap): Holistic Trace Analysis's
figures on real traces, annotations never counted as GPU work, the classification rules and
--comm, per-step distributions, the trace diff of the breakdown, and the CLI's outputs."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from workbench.traces import analysis, diff, load, overlap, ranks
from workbench.traces.cli import trace_main
from workbench.traces.model import concat, from_records
from workbench.traces.ranks import load_ranks

from tests.support.paths import DATA, ROOT
PAIR = [DATA / "kineto_2rank_nccl_hta" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]
STEPS = DATA / "kineto_steps_nccl_hta"
AMD = DATA / "kineto_rocm_annotations" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"

#: Holistic Trace Analysis 0.5.0 on the committed (trimmed) files, run on the whole file:
#: TraceAnalysis(include_last_profiler_step=True) with its filter of GPU work launched after the
#: last step switched off and HTA_DISABLE_NS_ROUNDING=1. Per rank: get_temporal_breakdown's
#: kernel_time, idle_time, compute_time, non_compute_time (us), get_comm_comp_overlap's
#: comp_comm_overlap_pctg (rounded to 0.01 by HTA) and the kernel-type breakdown's exclusive
#: times (_get_gpu_kernel_type_time with memory kernels, us).
HTA = {
    "pair": {
        0: {"total": 1_222_847, "idle": 675_191, "computation": 210_320, "non_compute": 337_336, "overlap_pct": 14.95,
            "states": {"communication": 336_033, "communication + memory": 950, "computation": 151_094,
                       "computation + communication": 59_204, "computation + communication + memory": 12,
                       "computation + memory": 10, "memory": 353}},
        1: {"total": 1_231_186, "idle": 651_136, "computation": 271_973, "non_compute": 308_077, "overlap_pct": 19.93,
            "states": {"communication": 299_495, "communication + memory": 4_028, "computation": 196_425,
                       "computation + communication": 67_626, "computation + communication + memory": 7_904,
                       "computation + memory": 18, "memory": 4_554}}},
    "test_3steps": {"total": 388_575, "idle": 38_611, "computation": 256_239, "non_compute": 93_725,
                    "overlap_pct": 67.79,
                    "states": {"communication": 33_050, "communication + memory": 3_752, "computation": 157_940,
                               "computation + communication": 77_458, "computation + communication + memory": 6,
                               "computation + memory": 20_835, "memory": 56_923}},
    "control_3steps": {"total": 228_181, "idle": 42_175, "computation": 140_493, "non_compute": 45_513,
                       "overlap_pct": 47.00,
                       "states": {"communication": 35_820, "communication + memory": 679, "computation": 95_687,
                                  "computation + communication": 27_430, "computation + communication + memory": 4_937,
                                  "computation + memory": 12_439, "memory": 9_014}},
}


def _check_against_hta(row: pd.Series, states: pd.DataFrame, hta: dict) -> None:
    # the bar is 1%; on these files the figures agree to the microsecond
    assert row["total_us"] == pytest.approx(hta["total"], rel=1e-6)
    assert row["idle_us"] == pytest.approx(hta["idle"], rel=1e-6)
    assert row["computation_us"] == pytest.approx(hta["computation"], rel=1e-6)
    assert row["busy_us"] - row["computation_us"] == pytest.approx(hta["non_compute"], rel=1e-6)
    assert round(row["overlap_pct"], 2) == pytest.approx(hta["overlap_pct"], abs=0.006)
    ours = dict(zip(states["state"], states["time_us"]))
    assert ours.pop("idle") == pytest.approx(hta["idle"], rel=1e-6)
    assert ours.keys() == hta["states"].keys()
    for k, v in hta["states"].items():
        assert ours[k] == pytest.approx(v, rel=1e-6), k


def test_two_ranks_match_hta():
    df, meta = load_ranks([str(p) for p in PAIR])
    b = overlap.breakdown(df).set_index("rank")
    st = overlap.states(df)
    assert list(b.index) == [0, 1] and list(b["device"]) == [0, 1]
    for rank in (0, 1):
        _check_against_hta(b.loc[rank], st[st["rank"] == rank], HTA["pair"][rank])
    # the shares of communication hidden and of computation under communication are one intersection
    r = b.loc[0]
    assert r["comm_hidden_us"] == pytest.approx(r["overlap_pct"] / 100 * r["communication_us"])
    assert r["comm_hidden_us"] == pytest.approx(r["comp_overlapped_pct"] / 100 * r["computation_us"])
    assert r["comm_exposed_us"] == pytest.approx(r["communication_us"] - r["comm_hidden_us"])


@pytest.mark.parametrize("name", ["test_3steps", "control_3steps"])
def test_single_rank_traces_match_hta(name):
    df, _ = load(STEPS / f"{name}.json.gz")
    b = overlap.breakdown(df)
    assert len(b) == 1
    _check_against_hta(b.iloc[0], overlap.states(df), HTA[name])


def test_rank_summary_uses_the_breakdown():
    df, _ = load_ranks([str(p) for p in PAIR])
    summ = ranks.rank_summary(df).set_index("rank")
    assert summ.loc[1, "computation_us"] == pytest.approx(HTA["pair"][1]["computation"], rel=1e-6)
    assert summ.loc[0, "overlap_pct"] == pytest.approx(14.95, abs=0.006)


# --- annotations and lanes -------------------------------------------------------------------------

def test_annotation_ranges_have_their_own_lane_and_never_change_busy_or_idle():
    df, _ = load(AMD)
    ann = df["category"] == "gpu_user_annotation"
    assert ann.sum() == 2
    lanes = set(df.loc[ann, "track"].astype(str))
    assert lanes == {"GPU 2 · stream 0 annotations"}  # beside the stream's lane, not on it
    cats = list(df["track"].cat.categories)
    assert cats.index("GPU 2 · stream 0 annotations") == cats.index("GPU 2 · stream 0") + 1
    without = df[~ann]
    pd.testing.assert_frame_equal(overlap.breakdown(df), overlap.breakdown(without))
    lane = analysis.track_summary(df).set_index("track").loc["GPU 2 · stream 0"]
    lane_without = analysis.track_summary(without).set_index("track").loc["GPU 2 · stream 0"]
    assert lane["busy_us"] == lane_without["busy_us"] and lane["idle_us"] == lane_without["idle_us"]
    # the annotations span 12% of the stream's range; its kernels and copies keep it 1.7% busy
    assert lane["busy_pct"] == pytest.approx(1.67, abs=0.01)


def test_an_annotation_over_everything_changes_nothing():
    df, _ = load(STEPS / "control_3steps.json.gz")
    t0, t1 = int(df["start_ns"].min()), int((df["start_ns"] + df["dur_ns"]).max())
    gpu = df[df["category"] == "kernel"].iloc[0]
    cover = from_records([{"track": str(gpu["track"]), "name": "ProfilerStep#0", "category": "gpu_user_annotation",
                           "device": int(gpu["device"]), "stream": int(gpu["stream"]), "start_ns": t0 - 10,
                           "dur_ns": t1 - t0 + 20}], source="test")
    pd.testing.assert_frame_equal(overlap.breakdown(df), overlap.breakdown(concat([df, cover])))


def test_lanes_of_a_trace_without_metadata_are_named_by_device_and_stream(tmp_path):
    doc = json.loads(gzip.open(AMD).read())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    p = tmp_path / "no_metadata.json"
    p.write_text(json.dumps(doc))
    df, _ = load(p)
    kernel_lanes = set(df.loc[df["category"] == "kernel", "track"].astype(str))
    assert kernel_lanes == {"GPU 2 · stream 0"}
    assert set(df.loc[df["category"] == "gpu_user_annotation", "track"].astype(str)) == {"GPU 2 · stream 0 annotations"}


# --- classification ----------------------------------------------------------------------------------

def _kernels(names: list[str], category: str = "kernel") -> pd.DataFrame:
    return from_records([{"track": "GPU 0 · stream 7", "name": n, "category": category, "device": 0, "stream": 7,
                          "start_ns": 1000 * i, "dur_ns": 500} for i, n in enumerate(names)], source="test")


def test_builtin_rules():
    names = ["ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
             "mscclKernel_Sum_float_LL128(int, int, int, mscclAlgo*)",
             "c10d::symmetric_memory::barrier_kernel(unsigned int**, int, int, int, unsigned long)",
             "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16, 8>(...)",
             "ag_gemm_hbm_kernel", "void cutlass::Kernel<flux::GemmRS_Kernel>(...)",
             "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", "void deep_ep::intranode::dispatch<8, 768>(...)",
             "void dpsk::ep::internode::combine<false, 8, 4>(...)", "nvshmemi_transfer_kernel",
             "void vllm::cross_device_reduce_1stage<half, 8>(...)"]
    got = list(overlap.classify(_kernels(names)))
    assert got == ["communication"] * 5 + ["fused"] * 2 + ["computation"] + ["communication"] * 4
    copies = _kernels(["Memcpy HtoD (Pinned -> Device)", "Memcpy PtoP (Device -> Device)", "Memset (Device)"],
                      "gpu_memcpy")
    assert list(overlap.classify(copies)) == ["memory", "communication", "memory"]
    # annotations, host calls and syncs are not GPU work
    other = concat([_kernels(["ProfilerStep#1"], "gpu_user_annotation"), _kernels(["cudaLaunchKernel"], "cuda_runtime"),
                    _kernels(["Stream Sync"], "cuda_sync")])
    assert overlap.classify(other).isna().all()
    # the user's pattern comes first, even over a built-in fused kernel
    assert list(overlap.classify(_kernels(names[5:9]), comm="nvjet|hbm")) == [
        "communication", "fused", "communication", "communication"]


def test_comm_moves_a_kernel_family_into_communication():
    """A real trace (the ag-gemm study's all-gather + cat provider, a committed H200 run): the
    concatenation after the all-gather is computation by the rules; --comm makes it
    communication, and the breakdown moves exactly its time."""
    from workbench.results.store import read_bundle
    from workbench.base.untrusted import attachment_file

    rec = read_bundle(ROOT / "traces" / "ag-gemm" / "bench-ws2-20261124-070656-ag-gemm-a1c4d2.bundle.json")
    name, _, data = next(a for a in rec.attachments if a[0] == "torch_all-gather-cat_fp16_m16384_ws2_rank0.json.gz")
    with attachment_file(name, data) as path:
        df, _ = load(path)
    family = "CatArrayBatchedCopy"
    hit = df["name"].astype(str).str.contains(family)
    assert hit.sum() == 3
    before, after = overlap.breakdown(df).iloc[0], overlap.breakdown(df, comm=family).iloc[0]
    assert set(overlap.classify(df)[hit.to_numpy()]) == {"computation"}
    assert set(overlap.classify(df, comm=family)[hit.to_numpy()]) == {"communication"}
    moved = analysis.busy_intervals(df.loc[hit, "start_ns"].to_numpy(), (df.loc[hit, "start_ns"]
                                                                         + df.loc[hit, "dur_ns"]).to_numpy())
    moved_us = (moved[1] - moved[0]).sum() / 1e3
    assert after["computation_us"] == pytest.approx(before["computation_us"] - moved_us, abs=1e-6)
    assert after["communication_us"] == pytest.approx(before["communication_us"] + moved_us, abs=1e-6)
    assert after["busy_us"] == before["busy_us"] and after["idle_us"] == before["idle_us"]
    with pytest.raises(overlap.OverlapError, match="not a regular expression"):
        overlap.breakdown(df, comm="(")


def test_roles_make_per_program_records_count():
    recs = [{"track": f"SM {i:03d}", "name": f"fetch {i}", "category": "fetch", "start_ns": 0, "dur_ns": 1000}
            for i in range(2)]
    recs += [{"track": "SM 002", "name": "gemm", "category": "gemm", "start_ns": 500, "dur_ns": 1000},
             {"track": "SM 003", "name": "wait", "category": "wait", "start_ns": 0, "dur_ns": 500}]
    df = from_records(recs, source="ag-gemm-programs")
    assert overlap.breakdown(df).empty  # unknown categories are not GPU work
    b = overlap.breakdown(df, roles={"fetch": "communication", "gemm": "computation"}).iloc[0]
    assert (b["total_us"], b["communication_us"], b["computation_us"], b["comm_hidden_us"]) == (1.5, 1.0, 1.0, 0.5)
    assert b["overlap_pct"] == 50.0 and b["idle_us"] == 0.0
    with pytest.raises(overlap.OverlapError, match="unknown types"):
        overlap.classify(df, roles={"fetch": "network"})


# --- the sweep against brute force ------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_figures_equal_a_brute_force_count_per_nanosecond(seed):
    rng = np.random.default_rng(seed)
    n = 60
    kinds = rng.choice(["compute", "ncclKernel_x", "copy", "ag_gemm_hbm_kernel"], n)
    start = rng.integers(0, 2_000, n)
    dur = rng.integers(0, 300, n)
    recs = [{"track": f"GPU {d} stream {s}", "name": k if k != "copy" else "Memcpy HtoD",
             "category": "gpu_memcpy" if k == "copy" else "kernel", "device": int(d), "stream": int(s),
             "start_ns": int(t), "dur_ns": int(u)}
            for k, t, u, d, s in zip(kinds, start, dur, rng.integers(0, 2, n), rng.integers(0, 3, n))]
    df = from_records(recs, source="test")
    b = overlap.breakdown(df).set_index("device")
    for dev in (0, 1):
        rows = [r for r in recs if r["device"] == dev]
        grid = {t: np.zeros(2_400, dtype=bool) for t in overlap.TYPES}
        types = overlap.classify(from_records(rows, source="test"))
        for r, t in zip(rows, types):
            grid[t][r["start_ns"]:r["start_ns"] + r["dur_ns"]] = True
        lo = min(r["start_ns"] for r in rows)
        hi = max(r["start_ns"] + r["dur_ns"] for r in rows)
        busy = np.logical_or.reduce(list(grid.values()))
        got = b.loc[dev]
        assert got["total_us"] * 1e3 == pytest.approx(hi - lo)
        assert got["busy_us"] * 1e3 == pytest.approx(busy.sum())
        assert got["computation_us"] * 1e3 == pytest.approx(grid["computation"].sum())
        assert got["communication_us"] * 1e3 == pytest.approx(grid["communication"].sum())
        assert got["fused_us"] * 1e3 == pytest.approx(grid["fused"].sum())
        assert got["comm_hidden_us"] * 1e3 == pytest.approx((grid["computation"] & grid["communication"]).sum())
        st = overlap.states(df)
        assert st.loc[st["device"] == dev, "time_us"].sum() * 1e3 == pytest.approx(hi - lo)  # states tile the total


# --- steps and the diff -------------------------------------------------------------------------------

def test_per_step_figures_and_their_distribution():
    df, _ = load(STEPS / "test_3steps.json.gz")
    per = overlap.steps(df)
    assert list(per["name"]) == ["ProfilerStep#1009", "ProfilerStep#1010", "ProfilerStep#1011"]
    # every GPU op of the trimmed file was launched inside one of its three steps
    assert per["spans"].sum() == overlap.breakdown(df)["spans"].iloc[0]
    assert (per["comm_hidden_us"] <= per[["computation_us", "communication_us"]].min(axis=1) + 1e-9).all()
    summ = overlap.step_summary(per).set_index("figure")
    ov = summ.loc["overlap_pct"]
    assert ov["steps"] == 3 and ov["ci_lo"] <= ov["median"] <= ov["ci_hi"]
    assert ov["min"] == per["overlap_pct"].min() and ov["max"] == per["overlap_pct"].max()
    # fewer than three steps: no interval pretending to be one
    two = overlap.step_summary(per.iloc[:2]).set_index("figure")
    assert np.isnan(two.loc["overlap_pct", "ci_lo"])


def test_gpu_time_diff_with_cis_over_steps():
    a, _ = load(STEPS / "control_3steps.json.gz")
    b, _ = load(STEPS / "test_3steps.json.gz")
    t = diff.gpu_time_diff(a, b).set_index("figure")
    assert t.attrs["paired"]  # rank 3 / GPU 3 against rank 1 / GPU 1: the one GPU of each trace
    ov = t.loc["overlap_pct"]
    assert ov["basis"] == "median over steps" and (ov["steps_a"], ov["steps_b"]) == (3, 3)
    assert ov["delta_lo"] <= ov["delta"] <= ov["delta_hi"]
    assert ov["verdict"] == "too few steps for a verdict"  # 3 steps a side: a CI, no verdict
    same = diff.gpu_time_diff(b, b).set_index("figure")
    assert (same["delta"] == 0).all() and not same.attrs["paired"]


def test_gpu_time_diff_without_steps_compares_whole_traces():
    df, _ = load(AMD)
    no_steps = df[~df["name"].astype(str).str.startswith("ProfilerStep")]
    t = diff.gpu_time_diff(no_steps, no_steps)
    assert (t["basis"] == "whole trace (no steps on both sides)").all() and t["delta_lo"].isna().all()
    with pytest.raises(diff.DiffError, match="trace b has no GPU kernels"):
        diff.gpu_time_diff(df, df[df["category"] == "cpu_op"])


# --- CLI ---------------------------------------------------------------------------------------------

def test_cli_json_text_and_markdown(capsys):
    files = [str(p) for p in PAIR]
    assert trace_main(files + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    gpu = doc["gpu_time"]
    assert gpu["comm"] is None and [r["rank"] for r in gpu["breakdown"]] == [0, 1]
    assert gpu["breakdown"][0]["computation_us"] == pytest.approx(210_320, rel=1e-6)
    assert doc["rank_summary"][1]["overlap_pct"] == pytest.approx(19.93, abs=0.006)
    assert trace_main(files) == 0
    text = capsys.readouterr().out
    assert "GPU time per rank and device:" in text and "rank 1 GPU 1: 19.9% of communication" in text
    assert trace_main(files + ["--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("### GPU-time breakdown and overlap") and "| rank 0 GPU 0 |" in md


def test_cli_refuses_bad_input_in_one_line(capsys):
    assert trace_main([str(PAIR[0]), "--comm", "("]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a regular expression" in err[0]
    cpu = DATA / "torch_cpu_small_model" / "torch_cpu.json.gz"
    assert trace_main([str(cpu), "--markdown"]) == 2
    assert "no GPU kernels, copies or memsets" in capsys.readouterr().err


def test_cli_diff_reports_the_breakdown(capsys):
    a, b = str(STEPS / "control_3steps.json.gz"), str(STEPS / "test_3steps.json.gz")
    assert trace_main(["diff", a, b, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    figs = {r["figure"]: r for r in doc["gpu_time"]["figures"]}
    assert figs["overlap_pct"]["steps_a"] == 3 and doc["gpu_time"]["paired"] is True
    assert trace_main(["diff", a, "vs", b]) == 0
    out = capsys.readouterr().out
    assert "GPU time, b against a, per rank" in out and "overlap_pct" in out
    assert trace_main(["diff", a, "vs"]) == 2
