"""Make the CUDA fixtures on a GPU machine: torch.profiler Chrome JSON with kernels, memcpy
and NVTX ranges on two streams, and (when nsys exists there) an Nsight Systems SQLite export.

Run from the repo root on the GPU machine: ``python3 tests/data/torch_cuda_two_streams/make_traces.py OUTDIR``.
With ``--workload`` it only runs the workload (what nsys profiles).
"""

import glob
import gzip
import os
import shutil
import subprocess
import sys

import torch


def workload(steps: int = 3) -> None:
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    a = torch.randn(1024, 1024, device=dev)
    side = torch.cuda.Stream()
    host = torch.randn(1 << 20).pin_memory()
    for _ in range(steps):
        torch.cuda.nvtx.range_push("step")
        with torch.profiler.record_function("step"):
            b = a @ a
            c = torch.relu(b).sum()
            with torch.cuda.stream(side):
                d = host.to(dev, non_blocking=True)
                e = (d * 2).sum()
            torch.cuda.current_stream().wait_stream(side)
            (c + e).item()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    workload(1)  # warm up (cuBLAS handles, allocator)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        workload(3)
    path = os.path.join(out, "torch_cuda.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    nsys = shutil.which("nsys") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-systems*/bin/nsys")
                                                    + glob.glob("/usr/local/cuda*/bin/nsys")
                                                    + glob.glob("/usr/local/cuda*/nsight-systems*/bin/nsys"))), None)
    print("nsys:", nsys)
    if nsys:
        rep = os.path.join(out, "nsys_run")
        res = subprocess.run([nsys, "profile", "--trace=cuda,nvtx,osrt", "--force-overwrite=true", "-o", rep,
                              "--export=sqlite", sys.executable, __file__, "--workload"],
                             capture_output=True, text=True, timeout=240)
        print(res.stdout[-2000:], res.stderr[-2000:])
    print(torch.__version__, torch.cuda.get_device_name(0))


if __name__ == "__main__":
    if sys.argv[1:] == ["--workload"]:
        workload(3)
    else:
        main(sys.argv[1])
