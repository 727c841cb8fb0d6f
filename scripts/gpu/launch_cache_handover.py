"""Where the locked cache's extra real time goes with long kernels (GPU 0, about 30 s).

The committed 256-launch run (8 threads, kernels that fill the GPU for ~8 ms) put the locked
cache at ~10.5 ms a launch against ~8.7 ms for per-launch allocation. This times the same
kernel (a) with CUDA events, back to back on one thread, with the same block and with a fresh
block each time, and (b) as short launch phases of both policies with 1 and 8 host threads, so
the GPU's share and the host threads' share can be told apart. Prints its findings; run from
the repository root: python3 scripts/gpu/launch_cache_handover.py [passes]
"""

import sys

import cupy
import numpy as np

from studies.launch_cache import gpu

PASSES = int(sys.argv[1]) if len(sys.argv) > 1 else 212  # the committed run's calibration on an H100


def back_to_back(fresh: bool, n: int = 30) -> np.ndarray:
    """CUDA-event time of n kernels launched one after another on one thread (ms)."""
    ph = gpu._LaunchPhase(cupy, 1, n, 50_000_000, 256, PASSES, 7, 0)
    ph.prepare("per_call" if fresh else "locked_cache", 1)
    s, out = ph.streams[0], []
    with s:
        for _ in range(n):
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record(s)
            blk = ph.pol.acquire(s, True)
            ph.kern(ph.grid, (gpu.BLOCK_THREADS,), ph.args(0, ph.pol.ptr(blk)))
            b.record(s)
            b.synchronize()
            ph.pol.release(blk, s, True)
            out.append(cupy.cuda.get_elapsed_time(a, b))
    ph.release()
    return np.round(out, 2)


print(f"kernel_ms({PASSES}):", round(gpu.kernel_ms(PASSES), 3))
print("same block, one thread (ms):", back_to_back(False))
print("fresh block, one thread (ms):", back_to_back(True))
for threads in (1, 8):
    for policy in ("locked_cache", "per_call"):
        p = gpu.run_phase(policy, threads, 64, 50_000_000, 3, 256, PASSES, True, 9, blocks=0)
        print(f"{policy} {threads} threads: real/launch ms {p.real_ns / 64 / 1e6:.2f}, sync p50 ms "
              f"{float(np.median(p.segments_ns['sync'])) / 1e6:.2f}")
