"""Reference figures of Holistic Trace Analysis (``traceinsight`` 0.6.1 on PyPI) on the public
Kineto traces under tests/data, for tests/traces/test_hta_parity.py.

    python -m venv /tmp/tivenv && /tmp/tivenv/bin/pip install traceinsight==0.6.1
    /tmp/tivenv/bin/python tests/data/hta_reference/make_reference.py > tests/data/hta_reference/traceinsight-0.6.1.json

traceinsight is not a dependency of the workbench: this script runs in a virtual environment of
its own, and its output is committed. HTA runs on each whole file: ``TraceAnalysis(...,
include_last_profiler_step=True)`` with its filter of GPU work launched outside the profiled
steps switched off (``Trace._filter_irrelevant_gpu_kernels``) and ``HTA_DISABLE_NS_ROUNDING=1``,
so both tools see the same kernels at the same nanoseconds. Per rank (the ranks of one run in
one trace folder, as HTA reads them):

- ``temporal``: ``get_temporal_breakdown``'s idle, compute, non-compute and kernel time (us);
- ``overlap_pct``: ``get_comm_comp_overlap``'s ``comp_comm_overlap_pctg`` (HTA rounds it to 0.01);
- ``kernel_types``: ``get_gpu_kernel_breakdown(include_memory_kernels=True)``'s exclusive
  kernel-type times (us; "COMPUTATION overlapping COMMUNICATION", ...), run on each rank alone;
- ``kernels``: the same call's per-name count, sum, min, max, mean and std (us) with no name
  folded into "others", the :data:`TOP_NAMES` names with most time of each rank;
- ``idle``: ``get_idle_time_breakdown``'s idle time per stream and category (us), and per
  stream the sum of HTA's negative "gaps" (``overlap_us``: the start of a piece of work minus the
  previous piece's end where that is negative, as its ``_analyze_idle_time_for_stream`` measures
  them), which HTA adds to kernel wait.
"""
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
logging.disable(logging.WARNING)

from hta.analyzers.breakdown_analysis import BreakdownAnalysis  # noqa: E402
from hta.common.trace import Trace  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

DATA = Path(__file__).resolve().parent.parent
#: scenario -> trace files (the ranks of one run)
SCENARIOS = {
    "kineto_2rank_nccl_hta": ["kineto_2rank_nccl_hta/sampled_rank-0.json.gz", "kineto_2rank_nccl_hta/sampled_rank-1.json.gz"],
    "test_3steps": ["kineto_steps_nccl_hta/test_3steps.json.gz"],
    "control_3steps": ["kineto_steps_nccl_hta/control_3steps.json.gz"],
}

#: names per rank kept in ``kernels`` (the file stays small: kernel names are long)
TOP_NAMES = 25

Trace._filter_irrelevant_gpu_kernels = lambda self, include_last_profiler_step=False: None
_overlaps: dict = {}
_analyze = BreakdownAnalysis._analyze_idle_time_for_stream.__func__


def _capture(cls, stream, gpu_kernels, consecutive_kernel_delay, show_idle_interval_stats=False):
    s = gpu_kernels[gpu_kernels.stream == stream].sort_values(by="ts")
    interval = s["ts"] - (s["ts"] + s["dur"]).shift(1)
    _overlaps[int(stream)] = float(-interval[interval < 0].sum()) + 0.0  # never -0.0
    return _analyze(cls, stream, gpu_kernels, consecutive_kernel_delay, show_idle_interval_stats)


BreakdownAnalysis._analyze_idle_time_for_stream = classmethod(_capture)


def analysis(files):
    tmp = tempfile.mkdtemp()
    for f in files:
        shutil.copy(DATA / f, tmp)
    try:
        return TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
    finally:
        shutil.rmtree(tmp)


def scenario(files):
    ta = analysis(files)
    out = {}
    temporal = ta.get_temporal_breakdown(visualize=False).set_index("rank")
    overlap = ta.get_comm_comp_overlap(visualize=False).set_index("rank")
    for rank in sorted(ta.t.traces):
        r = {"temporal": {k: float(temporal.loc[rank, f"{k}(us)"])
                          for k in ("idle_time", "compute_time", "non_compute_time", "kernel_time")},
             "overlap_pct": float(overlap.loc[rank, "comp_comm_overlap_pctg"])}
        _overlaps.clear()
        idle, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
        r["idle"] = {str(int(s)): {"overlap_us": _overlaps[int(s)],
                                   **{c: float(v) for c, v in zip(g["idle_category"], g["idle_time"])}}
                     for s, g in idle.groupby("stream")}
        out[str(rank)] = r
    for f in files:  # kernel-type times per rank: HTA sums them over the ranks it loads
        one = analysis([f])
        rank = next(iter(one.t.traces))
        types, names = one.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True,
                                                    num_kernels=10**9, duration_ratio=1.0)
        out[str(rank)]["kernel_types"] = {t: float(v) for t, v in zip(types["kernel_type"], types["sum"])}
        counts = one.t.get_trace(rank)
        sym = one.t.symbol_table.get_sym_table()
        gpu = counts[counts["stream"].ne(-1)]
        n = gpu.groupby(gpu["name"].map(lambda i: sym[i])).size()
        out[str(rank)]["kernels"] = {row["name"]: {"count": int(n[row["name"]]), "sum": float(row["sum (us)"]),
                                                   "min": float(row["min (us)"]), "max": float(row["max (us)"]),
                                                   "mean": float(row["mean (us)"]), "std": float(row["stddev"])}
                                     for _, row in names.nlargest(TOP_NAMES, "sum (us)").iterrows()}
    return out


if __name__ == "__main__":
    import hta.version

    doc = {"tool": f"traceinsight {getattr(hta.version, '__version__', '?')}",
           "made_by": "tests/data/hta_reference/make_reference.py", "scenarios": {}}
    for name, files in SCENARIOS.items():
        doc["scenarios"][name] = {"files": files, "ranks": scenario(files)}
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    print()
