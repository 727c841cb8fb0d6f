"""Trace import and timeline performance against the targets of the traces issue.

    .venv/bin/python benchmarks/traces.py [--spans 200000] [--timeline-spans 1000000] [--streams 20000]
        [--hta-python /tmp/htavenv/bin/python] [--hta-mb 50]

Each import runs in a fresh child process (one core, as the importers are single-threaded)
that first loads a small trace of the same format (warm-up), resets the peak-RSS counter
(/proc/self/clear_refs) and reports wall time and peak RSS over the RSS before the import;
memory is compared with the trace's uncompressed size, time with a bare ``orjson.loads`` of the
same file in the same process (the floor for any JSON importer), as one calls it and with the
cyclic GC paused as the importer pauses it (orjson's 600k dicts otherwise trigger GC passes). Best time of 3 runs is
reported because the machine is shared (the load average is printed). The many-lanes rows
time the CLI's text summary and ``--chrome`` export (the command minus its import). Synthetic Chrome traces are Kineto-shaped (cpu_op,
cuda_runtime and kernel events with args, float us timestamps); the Tracy file is the real
IREE capture in tests/data (about 1.6 MB, the size the issue names).

Against Holistic Trace Analysis (``--hta-python``: an interpreter with HolisticTraceAnalysis
installed, kept out of this environment): a Kineto-shaped trace of about ``--hta-mb`` MB with
NCCL kernels on their own stream and ProfilerSteps is imported by both, each in fresh
processes measured the same way (a warm-up parse of a small trace of the same format, then the
peak-RSS counter reset; best time, worst memory of 3), and the breakdown itself (our
``overlap.breakdown`` against HTA's ``get_temporal_breakdown`` plus ``get_comm_comp_overlap``) is
timed after the import. HTA runs with HTA_DISABLE_NS_ROUNDING=1 and its last step kept.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TRACY = ROOT / "tests" / "data" / "iree_sum_c8" / "sum_c8_6it.tracy"
WARM_CHROME = ROOT / "tests" / "data" / "torch_cpu_small_model" / "torch_cpu.json.gz"
TRACY_BIG = ROOT / "traces" / "examples" / "iree_sum_c8_50it.tracy"

_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[2])
from workbench.traces import load
load(sys.argv[3])  # warm-up on a small file of the same format: lazy imports, allocator pools
def status_kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
with open("/proc/self/clear_refs", "w") as fh:  # "5" resets the peak RSS (VmHWM) to the current RSS
    fh.write("5")
base = status_kb("VmRSS:")
t = time.perf_counter()
df, meta = load(sys.argv[1])
dt = time.perf_counter() - t
peak = status_kb("VmHWM:")
out = {"s": dt, "rows": len(df), "extra_rss_kb": peak - base, "format": meta["format"]}
if sys.argv[1].endswith(".json"):  # the floor: a bare orjson.loads of the same bytes, same process
    import orjson
    del df
    for key, paused in (("orjson_s", False), ("orjson_nogc_s", True)):
        doc = None
        gc.collect()
        if paused:  # as the importer does while it parses (workbench.traces._gc_paused)
            gc.disable()
        t = time.perf_counter()
        doc = orjson.loads(open(sys.argv[1], "rb").read())
        out[key] = time.perf_counter() - t
        gc.enable()
print(json.dumps(out))
"""


_HTA_CHILD = r"""
import json, logging, os, shutil, sys, tempfile, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
def parse(path):
    tmp = tempfile.mkdtemp()
    shutil.copy(path, tmp)
    try:
        return TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
    finally:
        shutil.rmtree(tmp)
parse(sys.argv[2])  # warm-up: imports, allocator pools
def status_kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
base = status_kb("VmRSS:")
t = time.perf_counter()
ta = parse(sys.argv[1])
dt = time.perf_counter() - t
peak = status_kb("VmHWM:")
t = time.perf_counter()
ta.get_temporal_breakdown(visualize=False)
ta.get_comm_comp_overlap(visualize=False)
print(json.dumps({"s": dt, "extra_rss_kb": peak - base, "breakdown_s": time.perf_counter() - t}))
"""

_OUR_BREAKDOWN = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from workbench.traces import load, overlap
df, _ = load(sys.argv[1])
t = time.perf_counter()
overlap.breakdown(df)
print(json.dumps({"breakdown_s": time.perf_counter() - t}))
"""


def _kernel_launch(i: int, corr: int, t: float) -> list[dict]:
    """A cpu_op at ``t`` (us), its cudaLaunchKernel and the kernel on stream 7 (Kineto-shaped)."""
    return [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 40}", "pid": 1, "tid": 1, "ts": t, "dur": 12.345,
             "args": {"External id": corr, "Sequence number": corr}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2.5,
             "dur": 4.125, "args": {"correlation": corr, "External id": corr}},
            {"ph": "X", "cat": "kernel", "name": f"kernel_{i % 25}", "pid": 0, "tid": 7, "ts": t + 9.75, "dur": 7.5,
             "args": {"device": 0, "stream": 7, "correlation": corr, "grid": [128, 1, 1]}}]


def synthetic_nccl_job(target_mb: float, path: Path) -> int:
    """A Kineto-shaped trace of one rank of about ``target_mb`` MB (uncompressed): per step a
    ProfilerStep range, cpu_ops launching GEMM-like kernels on stream 7 and an NCCL all-reduce
    on stream 20 overlapping them, with distributedInfo so HTA finds the rank. Returns its size."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
          {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    per_step, t, corr, step = 200, 1.0e6, 0, 0
    size = 0
    while size < target_mb * 2**20:
        start = t
        for i in range(per_step):
            corr += 1
            ev += _kernel_launch(i, corr, t)
            if i % 20 == 0:  # an all-reduce every 20 kernels, overlapping the next ones
                corr += 1
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": t + 7.0, "dur": 2.0, "args": {"correlation": corr, "External id": corr}})
                ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0,
                           "tid": 20, "ts": t + 10.0, "dur": 150.0,
                           "args": {"device": 0, "stream": 20, "correlation": corr}})
            t += 20.0
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": start, "dur": t - start, "args": {"External id": corr + 1}})
        step += 1
        size += per_step * 530  # about 530 bytes of JSON per kernel with its op and launch
    text = json.dumps({"traceEvents": ev, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
                       "baseTimeNanoseconds": 1_700_000_000_000_000_000})
    path.write_text(text)
    return len(text.encode())


def hta_rows(hta_python: str, mb: float) -> list[tuple]:
    """Import time, peak memory and breakdown time: ours against HTA's on one ~``mb`` MB trace."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        big, warm = Path(tmp) / "rank0.json", Path(tmp) / "warm.json"
        size = synthetic_nccl_job(mb, big)
        synthetic_nccl_job(0.2, warm)
        ours = child_load(big, warm)
        theirs = []
        for _ in range(3):
            out = subprocess.run([hta_python, "-c", _HTA_CHILD, str(big), str(warm)], capture_output=True, text=True,
                                 check=True, env={**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"})
            theirs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        hta_s = min(r["s"] for r in theirs)
        hta_kb = max(r["extra_rss_kb"] for r in theirs)
        ours_bd = min(json.loads(subprocess.run([sys.executable, "-c", _OUR_BREAKDOWN, str(big), str(ROOT)],
                                                capture_output=True, text=True, check=True).stdout.strip()
                                 .splitlines()[-1])["breakdown_s"] for _ in range(3))
        label = f"{ours['rows']:,} events, {size / 2**20:.0f} MB"
        rows.append(("Kineto import vs HTA parse", label, f"{ours['s']:.2f} s", f"HTA {hta_s:.2f} s "
                     f"({ours['s'] / hta_s:.2f}x)", "<= HTA", ours["s"] <= hta_s))
        rows.append(("  ... peak memory", "same file", f"{ours['extra_rss_kb'] / 1024:.0f} MB",
                     f"HTA {hta_kb / 1024:.0f} MB", "<= HTA", ours["extra_rss_kb"] <= hta_kb))
        rows.append(("  ... breakdown after import", "overlap.breakdown vs HTA temporal + overlap",
                     f"{ours_bd:.3f} s", f"HTA {min(r['breakdown_s'] for r in theirs):.3f} s", "(info)", None))
    return rows


def synthetic_chrome(n_spans: int, path: Path) -> int:
    """Write a Kineto-shaped trace with ``n_spans`` X events; returns its uncompressed size."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
          {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    t = 1.0e6
    for i in range(n_spans // 3):
        ev += _kernel_launch(i, i, t)
        t += 20.0
    text = json.dumps({"traceEvents": ev, "baseTimeNanoseconds": 1_700_000_000_000_000_000})
    path.write_text(text)
    return len(text.encode())


def child_load(path: Path, warmup: Path, repeat: int = 3) -> dict:
    """Best time and worst memory of ``repeat`` fresh-process imports (the machine is shared)."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(ROOT), str(warmup)], capture_output=True,
                             text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["s"])
    out = {**best, "extra_rss_kb": max(r["extra_rss_kb"] for r in runs), "all_s": [r["s"] for r in runs]}
    for key in ("orjson_s", "orjson_nogc_s"):
        if key in best:
            out[key] = min(r[key] for r in runs)
    return out


def streams_bench(n_streams: int, per_stream: int = 5, repeat: int = 2) -> dict:
    """The CLI's text summary and --chrome export of a trace with many lanes (one per stream):
    the whole command on a table imported beforehand (best of ``repeat``)."""
    import contextlib
    import io

    from workbench.traces import cli, load

    ev = [{"ph": "X", "cat": "kernel", "name": f"k{k}", "pid": 0, "tid": s, "ts": s * 0.5 + k * 10.0, "dur": 3.0,
           "args": {"stream": s}} for s in range(n_streams) for k in range(per_stream)]
    out: dict = {"spans": len(ev)}
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "streams.json"
        p.write_text(json.dumps({"traceEvents": ev}))
        loaded = load(p)
        real_load, cli.load = cli.load, lambda path: loaded  # time the outputs, not the import
        try:
            for mode, extra in (("text", []), ("chrome", ["--chrome", str(Path(tmp) / "out.json")])):
                best = float("inf")
                for _ in range(repeat):
                    t = time.perf_counter()
                    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                        assert cli.trace_main([str(p)] + extra) == 0
                    best = min(best, time.perf_counter() - t)
                out[mode] = best
        finally:
            cli.load = real_load
    return out


def timeline_bench(n: int) -> tuple[float, int, dict]:
    import numpy as np

    from workbench.traces import charts
    from workbench.traces.model import from_columns

    rng = np.random.default_rng(0)
    # 16 lanes; per lane, bursts of ~100 back-to-back spans (a step's kernels) separated by idle
    # gaps, so the full view still has thousands of distinct blocks to draw
    lanes, per_lane = 16, n // 16
    dur = rng.integers(500, 30_000, per_lane * lanes)
    gap = np.where(rng.random(per_lane * lanes) < 0.01, rng.integers(20_000_000, 60_000_000, per_lane * lanes),
                   rng.integers(100, 2_000, per_lane * lanes))
    step = (dur + gap).reshape(lanes, per_lane)
    start = (np.cumsum(step, axis=1) - step).ravel()
    track = np.repeat(np.array([f"GPU {i // 4} stream {i % 4}" for i in range(lanes)]), per_lane)
    df = from_columns({"track": track, "name": np.array([f"k{i}" for i in range(60)])[rng.integers(0, 60, len(dur))],
                       "category": np.array(["kernel", "gpu_memcpy", "gpu_memset"])[rng.integers(0, 3, len(dur))],
                       "start_ns": start, "dur_ns": dur}, source="synthetic")
    t = time.perf_counter()
    spec = charts.timeline(df).to_json()
    dt = time.perf_counter() - t
    _, info = charts.timeline_data(df)
    return dt, len(spec), info


def charts_max() -> int:
    from workbench.traces import charts

    return charts.MAX_MARKS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spans", type=int, default=200_000)
    ap.add_argument("--timeline-spans", type=int, default=1_000_000)
    ap.add_argument("--streams", type=int, default=20_000, help="lanes of the many-lanes trace")
    ap.add_argument("--hta-python", metavar="PYTHON",
                    help="an interpreter with HolisticTraceAnalysis installed: compare import time and memory with it")
    ap.add_argument("--hta-mb", type=float, default=50, help="size of the trace compared with HTA (MB, default 50)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "synthetic.json"
        size = synthetic_chrome(args.spans, p)
        r = child_load(p, WARM_CHROME)
        rate = r["rows"] / r["s"]
        rows.append(("Chrome JSON import", f"{r['rows']:,} spans, {size / 2**20:.1f} MB", f"{r['s']:.2f} s",
                     f"{rate / 1e3:,.0f}k spans/s", ">= 200k spans/s", rate >= 200_000))
        ratio = r["s"] / r["orjson_s"]
        rows.append(("Chrome import / bare orjson.loads", "same file, same process", f"{r['orjson_s']:.2f} s",
                     f"{ratio:.2f}x", "<= 1.5x", ratio <= 1.5))
        rows.append(("  ... orjson.loads with GC paused", "as the importer runs", f"{r['orjson_nogc_s']:.2f} s",
                     f"{r['s'] / r['orjson_nogc_s']:.2f}x", "(info)", None))
        mem = r["extra_rss_kb"] * 1024 / size
        rows.append(("Chrome JSON peak memory", "same file", f"{r['extra_rss_kb'] / 1024:.0f} MB",
                     f"{mem:.1f}x file", "< 4x uncompressed", mem < 4))
        gz = Path(tmp) / "synthetic.json.gz"
        gz.write_bytes(gzip.compress(p.read_bytes(), compresslevel=1))
        r = child_load(gz, WARM_CHROME)
        rows.append(("Chrome JSON.gz import", f"{r['rows']:,} spans", f"{r['s']:.2f} s",
                     f"{r['rows'] / r['s'] / 1e3:,.0f}k spans/s", "(info)", None))
    for path in (TRACY, TRACY_BIG):
        if not path.exists():
            continue
        r = child_load(path, TRACY)
        from workbench.traces import tracy

        raw = len(tracy.decompress(path.read_bytes()))
        mem = r["extra_rss_kb"] * 1024 / raw
        rows.append(("Tracy import", f"{path.name}: {path.stat().st_size / 2**20:.1f} MB, {r['rows']:,} zones",
                     f"{r['s']:.2f} s", f"{r['rows'] / r['s'] / 1e3:,.0f}k zones/s",
                     "< 1 s" if path == TRACY else "(info)", r["s"] < 1 if path == TRACY else None))
        rows.append(("Tracy peak memory", f"uncompressed {raw / 2**20:.1f} MB", f"{r['extra_rss_kb'] / 1024:.0f} MB",
                     f"{mem:.1f}x", "< 4x uncompressed", mem < 4))
    sb = streams_bench(args.streams)
    rows.append(("Text summary, many lanes", f"{args.streams:,} streams, {sb['spans']:,} spans",
                 f"{sb['text']:.2f} s", "imported beforehand", "< 1 s", sb["text"] < 1))
    rows.append(("--chrome export, many lanes", "same trace", f"{sb['chrome']:.2f} s", "imported beforehand", "< 2 s",
                 sb["chrome"] < 2))
    if args.hta_python:
        rows += hta_rows(args.hta_python, args.hta_mb)
    dt, spec_bytes, info = timeline_bench(args.timeline_spans)
    rows.append(("Timeline view", f"{args.timeline_spans:,} spans, 16 lanes", f"{dt:.2f} s",
                 f"{info['marks']:,} rows to the browser (<= {charts_max():,}), spec {spec_bytes / 2**20:.1f} MB",
                 "< 3 s", dt < 3))

    from tabulate import tabulate

    print(tabulate([(a, b, c, d, e, "-" if ok is None else ("PASS" if ok else "FAIL")) for a, b, c, d, e, ok in rows],
                   headers=["measure", "input", "time/size", "rate", "target", "verdict"]))
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} CPUs visible, load average "
          f"{os.getloadavg()[0]:.1f}; each import: best of 3 fresh processes (time), worst of 3 (memory)")


if __name__ == "__main__":
    main()
