"""Timelines and tables a performance engineer reads at a glance: communication recognised where
engineers put it (DeepEP, and a suggestion when names only look like it), self time and shares
that never pass 100%, envelope spans off the axis, lanes named by device and stream, and the
busiest streams of a many-stream GPU first."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

import workbench as wb
from workbench.traces import analysis, charts, load, overlap
from workbench.traces.cli import trace_main
from tests.support.paths import DATA, ROOT

DEEPEP = DATA / "deepseek_deepep" / "deepep_h800_synthetic.json.gz"
MANY = DATA / "rocprofv3_many_streams" / "908_every100.json.gz"
EXAMPLES = sorted(p for p in (ROOT / "traces" / "examples").iterdir() if p.suffix in (".gz", ".tracy", ".sqlite"))


def test_deepep_kernels_are_communication_without_a_pattern():
    tr = wb.trace(DEEPEP)
    ov = tr.overlap().iloc[0]
    # per step: 350 us dispatch + 200 us combine; all but the combine's last 50 us under a GEMM
    assert ov["communication_us"] == pytest.approx(4 * 550.0)
    assert ov["overlap_pct"] == pytest.approx(100 * 500 / 550)
    k = tr.kernels()
    comm, comp = k.loc[k["type"] == "communication", "name"], k.loc[k["type"] == "computation", "name"]
    assert len(comm) == 2 and comm.str.contains("dpsk::ep::internode::").all()
    assert len(comp) == 1 and comp.str.contains("deep_gemm::").all()  # DeepGEMM is computation
    assert tr.suggest_comm() is None


def _renamed(tmp_path, names: dict[str, str]):
    doc = json.loads(gzip.open(DEEPEP).read())
    for e in doc["traceEvents"]:
        for old, new in names.items():
            if e.get("name", "").startswith(old):
                e["name"] = new
    p = tmp_path / "renamed.json"
    p.write_text(json.dumps(doc))
    return p


def test_names_that_look_like_communication_are_offered(tmp_path, capsys):
    p = _renamed(tmp_path, {"void dpsk::ep::internode::dispatch": "moe_dispatch_kernel<8>",
                            "void dpsk::ep::internode::combine": "moe_combine_kernel<8>"})
    tr = wb.trace(p)
    assert tr.overlap().iloc[0]["communication_us"] == 0
    s = tr.suggest_comm()
    assert (s["pattern"], s["kernels"], s["names"], s["words"]) == ("(?i)dispatch|combine", 8, 2, ["dispatch", "combine"])
    # one argument counts them: the same figures as DeepEP's names under the built-in rule
    assert tr.overlap(comm=s["pattern"]).iloc[0]["overlap_pct"] == pytest.approx(100 * 500 / 550)
    assert trace_main([str(p)]) == 0
    out = capsys.readouterr().out
    assert "8 kernels (2 names) look like communication (dispatch, combine): count them with --comm '(?i)dispatch|combine'" in out
    assert trace_main([str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu_time"]["comm_suggestion"]["pattern"] == "(?i)dispatch|combine"
    # the page's wording names its field, not a flag
    tables = overlap.summary(load(p)[0])
    line = overlap.headlines(tables, surface="page", suggestion=s)[0]
    assert "8 kernels (2 names) look like communication" in line and "--comm" not in line


def test_no_suggestion_for_names_that_do_not_look_like_communication():
    df, _ = load(ROOT / "traces" / "examples" / "torch_cuda_h200.json.gz")
    assert overlap.suggest_comm(df) is None


@pytest.mark.parametrize("path", [DEEPEP, *EXAMPLES], ids=lambda p: p.name)
def test_no_per_name_share_passes_100_percent(path):
    st = analysis.name_stats(load(path)[0])
    assert (st["share_pct"] <= 100 + 1e-9).all() and (st["self_us"] <= st["total_us"] + 1e-9).all()


def test_self_time_of_a_name_nested_in_itself():
    st = analysis.name_stats(load(DEEPEP)[0]).set_index("name")
    call = st.loc["nn.Module: _call_impl"]
    # three nested calls per step: their durations add up to about 3x the time, self time to 1x
    assert call["total_us"] > 2.9 * call["self_us"] and call["share_pct"] < 100
    assert st.index[0] == "nn.Module: _call_impl"  # most self time first
    assert "PyTorch Profiler (0)" not in st.index  # the envelope is not a name's time


def test_envelope_spans_stay_off_the_axis_and_draw_as_a_band():
    df, _ = load(DEEPEP)
    env = analysis.envelopes(df)
    assert df.loc[env, "name"].astype(str).tolist() == ["PyTorch Profiler (0)"]
    rows, info = charts.timeline_data(df)
    # the four steps (8 ms) fill the axis, not the profiler's 18 ms
    assert info["end"] - info["start"] == pytest.approx(7.98, abs=0.01) and info["unit"] == "ms"
    band = rows[rows["kind"] == "band"]
    assert len(band) == 1 and band["start"].iloc[0] == 0 and band["end"].iloc[0] == pytest.approx(info["end"])
    assert not (rows["kind"] == "span").any() or "PyTorch Profiler (0)" not in set(rows["name"].dropna()) - {
        band["name"].iloc[0]}


@pytest.mark.parametrize("path", EXAMPLES + [DEEPEP, MANY], ids=lambda p: p.name)
def test_lanes_are_named_never_raw_ids(path):
    lanes = [str(t) for t in load(path)[0]["track"].cat.categories]
    assert not [t for t in lanes if re.fullmatch(r"-?\d+\s*/\s*-?\d+", t)]
    gpu = [t for t in lanes if t.startswith("GPU ")]
    assert all(re.match(r"GPU \d+ · ", t) for t in gpu), gpu[:5]


def test_the_busiest_stream_of_a_many_stream_gpu_is_among_the_first_lanes(capsys):
    df, _ = load(MANY)
    kernels = df[df["category"] == "kernel"]
    most = kernels["track"].astype(str).value_counts().index[0]
    assert most == "GPU 0 · stream 567" and kernels["stream"].nunique() == 567
    lanes = [str(t) for t in df["track"].cat.categories]
    assert lanes.index(most) < 3  # id order had it last of 567
    assert trace_main([str(MANY)]) == 0  # the CLI lists the first 40 lanes
    listed = capsys.readouterr().out.split("Top ")[0]
    assert most in listed
    _, info = charts.timeline_data(df, max_rows=20)  # the page draws the first lanes that fit
    assert most in set(info["rows"]["label"])
    # the first lanes shown hold most of the work: 3 of 567 lanes, over half of the busy time
    busy = analysis.track_summary(df).set_index("track")["busy_us"]
    assert busy.loc[lanes[:3]].sum() > 0.5 * busy.sum()


def test_few_streams_keep_the_source_order():
    df, _ = load(ROOT / "traces" / "examples" / "torch_cuda_h200.json.gz")
    gpu = [str(t) for t in df["track"].cat.categories if str(t).startswith("GPU ")]
    assert gpu == ["GPU 0 · stream 7", "GPU 0 · stream 7 annotations", "GPU 0 · stream 18",
                   "GPU 0 · stream 18 annotations"]


def test_lanes_offsets_from_the_trace_start():
    lanes = wb.trace(DEEPEP).lanes().set_index("track")
    assert lanes["first_us"].min() == 0 and lanes.loc["GPU 0 · stream 7", "first_us"] == pytest.approx(6000.0)
    assert np.isfinite(lanes["last_us"]).all() and lanes["last_us"].max() < 1e6  # not epoch ns
