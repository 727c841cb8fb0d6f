"""Write a synthetic DeepSeek-style torch.profiler (Kineto) trace: DeepEP expert-parallel
dispatch/combine beside DeepGEMM computation, as DeepSeek-V3 training traces name them.

    .venv/bin/python tests/data/deepseek_deepep/make_fixture.py [OUT_DIR]

The layout (metadata events, categories, args, ``baseTimeNanoseconds``, the profiler's own
"PyTorch Profiler (0)" span on the "Spans" lane, ts in microseconds) follows a real torch 2.x
Kineto trace (traces/examples/torch_cuda_h200.json.gz); names follow DeepSeek's kernels:
DeepEP's ``dpsk::ep::internode::dispatch``/``combine`` (NVSHMEM) on a communication stream,
DeepGEMM's ``deep_gemm::fp8_gemm_kernel`` (computation, though its namespace starts "deep_")
on the compute stream. The timings are made up, with a known truth the tests check:

- 4 steps (``ProfilerStep#0..3``, 2,000 us apart); per step two GEMMs on stream 7, [0, 900)
  and [910, 1,800) us from the step's start; a dispatch on stream 20 at [50, 400) and a combine
  at [1,650, 1,850): 500 of the 550 us of communication run under a GEMM (90.9% hidden);
- the host thread runs ``nn.Module: _call_impl`` nested in itself three deep around the
  launches (a model's modules), so summed durations reach 3x the step: self time does not;
- the profiler's envelope span starts 6 ms before the first step and ends 4 ms after the last.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

GEMM = "void deep_gemm::fp8_gemm_kernel<128u, 128u, 128u, 4u, 8u>(__nv_bfloat16*, float*, int*, int)"
DISPATCH = "void dpsk::ep::internode::dispatch<false, 8, 4, 3, 1, 8, 7168>(int4*, float*, int*, int64_t*, void*)"
COMBINE = "void dpsk::ep::internode::combine<__nv_bfloat16, 8, 4, 3, 7168, 2, 6>(int4*, float*, int*, void*)"
STEPS = 4
STEP_US = 2000.0
T0 = 4_382_108_402_000.0  # us on the host's monotonic clock
#: per step: (stream, name, start us from the step, duration us)
KERNELS = [(7, GEMM, 0.0, 900.0), (7, GEMM, 910.0, 890.0), (20, DISPATCH, 50.0, 350.0), (20, COMBINE, 1650.0, 200.0)]


def events() -> list[dict]:
    pid, tid = 9206, 9206
    ev = [{"name": "process_name", "ph": "M", "ts": T0, "pid": pid, "tid": 0, "args": {"name": "python3"}},
          {"name": "process_labels", "ph": "M", "ts": T0, "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
          {"name": "process_name", "ph": "M", "ts": T0, "pid": 0, "tid": 0, "args": {"name": "python3"}},
          {"name": "process_labels", "ph": "M", "ts": T0, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
          {"name": "process_sort_index", "ph": "M", "ts": T0, "pid": 0, "tid": 0, "args": {"sort_index": 5000000}},
          {"name": "thread_name", "ph": "M", "ts": T0, "pid": pid, "tid": tid, "args": {"name": "thread 9206 (python3)"}}]
    for s in (7, 20):
        ev += [{"name": "thread_name", "ph": "M", "ts": T0, "pid": 0, "tid": s, "args": {"name": f"stream {s} "}},
               {"name": "thread_sort_index", "ph": "M", "ts": T0, "pid": 0, "tid": s, "args": {"sort_index": s}}]
    corr = 1000
    for step in range(STEPS):
        t = T0 + step * STEP_US
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": tid,
                   "ts": t - 40.0, "dur": STEP_US - 20.0, "args": {"External id": corr}})
        for depth in range(3):  # nn.Module forward calls nested in one another
            ev.append({"ph": "X", "cat": "python_function", "name": "nn.Module: _call_impl", "pid": pid, "tid": tid,
                       "ts": t - 30.0 + depth, "dur": STEP_US - 60.0 - 2 * depth, "args": {"Python id": corr + depth}})
        for i, (stream, name, start, dur) in enumerate(KERNELS):
            corr += 1
            launch = t - 20.0 + 5 * i
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                       "ts": launch, "dur": 3.5, "args": {"correlation": corr, "External id": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": t + start, "dur": dur,
                       "args": {"device": 0, "stream": stream, "correlation": corr, "grid": [132, 1, 1],
                                "block": [256, 1, 1]}})
    ev.append({"ph": "X", "cat": "Trace", "ts": T0 - 6000.0, "dur": STEPS * STEP_US + 10000.0, "pid": "Spans",
               "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
    ev.append({"name": "process_sort_index", "ph": "M", "ts": T0, "pid": "Spans", "tid": 0,
               "args": {"sort_index": 536870912}})
    return ev


def write(out: Path) -> Path:
    path = out / "deepep_h800_synthetic.json.gz"
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H800"}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 16},
           "traceEvents": events(), "baseTimeNanoseconds": 1_790_000_000_000_000_000}
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as f:
        f.write(json.dumps(doc).encode())  # no name or time in the gzip header: reproducible
    return path


if __name__ == "__main__":
    print(write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent))
