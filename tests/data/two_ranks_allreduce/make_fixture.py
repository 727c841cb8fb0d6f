"""Write two synthetic torch.profiler (Kineto) traces of one 2-rank data-parallel job.

    .venv/bin/python tests/data/two_ranks_allreduce/make_fixture.py [OUT_DIR]

The event layout (categories, names, args, metadata events, ``distributedInfo``,
``baseTimeNanoseconds``, ts in microseconds on the host's monotonic clock) copies a real
torch 2.11 / NCCL 2.28 trace of rank 0 from the ag-gemm study (committed bundle
``traces/ag-gemm/bench-ws2-...-1bdd7b``, attachment ``torch_nccl_fp16_m16384_ws2``). The
timings are simulated, with a known truth the tests check against:

- 6 steps (``ProfilerStep#0..5``); per step each rank runs a GEMM kernel on stream 7, then
  an all-reduce (``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``) on stream 20 that starts when
  its rank's GEMM ends and ends, on every rank, 350 us after the *last* rank arrived (plus
  0-2 us of per-rank jitter): no rank leaves a collective before all joined.
- Rank 1 is the straggler: its GEMM takes 1,400 us +/- 15 against rank 0's 1,266 us +/- 15,
  so rank 1 arrives last at every all-reduce and rank 0 waits ~134 us in each.
- The ranks ran on two hosts whose clocks disagree: rank 1's monotonic clock is 1,234,567.891 s
  ahead (another boot time), and its wall clock (baseTimeNanoseconds + ts) is 3.2 ms ahead
  of rank 0's (an NTP error). Aligning by base times therefore leaves a 3.2 ms error;
  aligning by the first all-reduce's end recovers the truth to within the jitter.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

GEMM = "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
STEPS = 6
#: true-time -> rank-local clocks (us): monotonic offset, and wall-clock error of the base time (ns)
MONO_OFFSET_US = {0: 4382894064000.0, 1: 4382894064000.0 + 1_234_567_891_000.0 / 1e3}
WALL_ERROR_NS = {0: 0, 1: 3_200_000}
TRUE_WALL_NS = 1_790_857_026_000_000_000  # true wall-clock ns at true time 0
GEMM_US = {0: 1266.0, 1: 1400.0}


def simulate(seed: int = 7) -> dict[int, list[dict]]:
    """Events per rank in true time (us from the job's start)."""
    rng = np.random.default_rng(seed)
    ev: dict[int, list[dict]] = {0: [], 1: []}
    corr = {0: 100, 1: 100}
    t = 50.0
    for step in range(STEPS):
        arrive, launch = {}, {}
        for r in (0, 1):
            host = t + rng.uniform(0, 4)
            ext = 10 * step
            corr[r] += 10
            c = corr[r]
            gemm_start = host + 30 + rng.uniform(0, 3)
            gemm_dur = GEMM_US[r] + rng.normal(0, 15)
            arrive[r] = gemm_start + gemm_dur + 4 + rng.uniform(0, 2)
            launch[r] = (host, c, ext, gemm_start, gemm_dur)
        done = max(arrive.values()) + 350
        for r in (0, 1):
            host, c, ext, gemm_start, gemm_dur = launch[r]
            pid, gpu = 1148 + r, r
            end_r = done + rng.uniform(0, 2)
            step_end = end_r + 20
            ev[r] += [
                {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": pid,
                 "ts": host - 5, "dur": step_end - host + 5, "args": {"External id": ext, "Record function id": 0}},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": pid, "ts": host,
                 "dur": 24.0 + rng.uniform(0, 2), "args": {"External id": ext + 1, "Sequence number": step}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": pid, "ts": host + 6,
                 "dur": 5.5, "args": {"External id": ext + 1, "cbid": 211, "correlation": c}},
                {"ph": "X", "cat": "kernel", "name": GEMM, "pid": gpu, "tid": 7, "ts": gemm_start, "dur": gemm_dur,
                 "args": {"External id": ext + 1, "queued": 0, "device": gpu, "context": 1, "stream": 7,
                          "correlation": c, "grid": [132, 1, 1], "block": [384, 1, 1]}},
                {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": pid, "tid": pid, "ts": host + 40,
                 "dur": 35.0, "args": {"External id": ext + 2, "Sequence number": step}},
                {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": pid, "tid": pid, "ts": host + 42,
                 "dur": 31.0, "args": {"External id": ext + 3, "Process Group Name": "0", "Collective name": "allreduce",
                                       "In msg nelems": 16777216, "Out msg nelems": 16777216, "dtype": "BFloat16",
                                       "Group size": 2, "Process Group Ranks": "[0, 1]", "Rank": r}},
                {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": pid, "tid": pid, "ts": host + 50,
                 "dur": 20.0, "args": {"External id": ext + 4}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": pid, "ts": host + 55,
                 "dur": 6.0, "args": {"External id": ext + 4, "cbid": 211, "correlation": c + 1}},
                {"ph": "X", "cat": "kernel", "name": ALLREDUCE, "pid": gpu, "tid": 20, "ts": arrive[r],
                 "dur": end_r - arrive[r], "args": {"External id": ext + 4, "queued": 0, "device": gpu, "context": 1,
                                                    "stream": 20, "correlation": c + 1, "grid": [2, 1, 1]}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": pid, "tid": pid,
                 "ts": host + 80, "dur": step_end - 5 - (host + 80), "args": {"External id": ext + 4, "cbid": 131,
                                                                              "correlation": c + 2}},
            ]
        t = done + 60
    return ev


def write(out_dir: Path) -> list[Path]:
    paths = []
    for r, events in simulate().items():
        pid = 1148 + r
        meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "python3"}},
                {"name": "process_labels", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
                {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"sort_index": pid}},
                {"name": "process_name", "ph": "M", "ts": 0, "pid": r, "tid": 0, "args": {"name": "python3"}},
                {"name": "process_labels", "ph": "M", "ts": 0, "pid": r, "tid": 0, "args": {"labels": f"GPU {r}"}},
                {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": r, "tid": 0,
                 "args": {"sort_index": 5000000 + r}},
                {"name": "thread_name", "ph": "M", "ts": 0, "pid": r, "tid": 7, "args": {"name": "stream 7 "}},
                {"name": "thread_name", "ph": "M", "ts": 0, "pid": r, "tid": 20, "args": {"name": "stream 20 "}},
                {"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": pid,
                 "args": {"name": f"thread {pid} (python3)"}}]
        off = MONO_OFFSET_US[r]
        for e in events + meta:
            e["ts"] = round(e["ts"] + off, 3)
            if "dur" in e:
                e["dur"] = round(e["dur"], 3)
        # Kineto: wall-clock ns = baseTimeNanoseconds + ts * 1000; rank r's wall clock is off by WALL_ERROR_NS[r]
        base = TRUE_WALL_NS + WALL_ERROR_NS[r] - int(round(off * 1000))
        doc = {"schemaVersion": 1, "deviceProperties": [{"id": r, "name": "NVIDIA H200", "numSms": 132}],
               "distributedInfo": {"backend": "nccl", "rank": r, "world_size": 2, "nccl_version": "2.28.9"},
               "traceEvents": sorted(events, key=lambda e: e["ts"]) + meta, "baseTimeNanoseconds": base,
               "displayTimeUnit": "ms", "traceName": f"rank{r}.json"}
        p = out_dir / f"kineto_2ranks_rank{r}_synthetic.json.gz"
        p.write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
        paths.append(p)
    return paths


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent):
        print(path)
