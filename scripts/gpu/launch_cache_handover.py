"""Where the locked cache's extra real time goes with long kernels (GPU 0, about a minute).

The 256-launch run of 2026-11-24 (8 threads, kernels that fill the GPU for ~8 ms), measured
before each phase varied its block's placement, put the locked cache's real time above
per-launch allocation's. This times the same kernel (a) with CUDA events, back to back on one
thread, with the same block and with a fresh block each time, (b) as short launch phases of
both policies with 1 and 8 host threads, alternated round by round and left to the allocator's
placement (no spacers: the study's phases hold them), with the kernel alone on each
locked-cache phase's own block, so the GPU's share and the host threads' share can be told
apart, and (c) on 32 blocks allocated at once, by address. Every phase's and every
back-to-back run's checksums are checked against the closed form before its time counts.

Prints its environment, the command and each figure as median [min, max] over its launches or
rounds (ranges, not confidence intervals: a handful of rounds on one GPU). The printout is
committed as ``traces/launch-cache/handover-<GPU>.txt`` and the README shows it through a
generated block; run from the repository root:

    python3 scripts/gpu/launch_cache_handover.py [passes] [rounds] > handover-<GPU>.txt
"""

import datetime
import os
import subprocess
import sys

import cupy
import numpy as np

from studies.launch_cache import gpu
from studies.launch_cache.measure import check_checksums

PASSES = int(sys.argv[1]) if len(sys.argv) > 1 else 212  # launch_cache.sh's calibration to 8 ms on an H100
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
LAUNCHES, SCRATCH_BYTES, PAGES, POOL_K = 64, 50_000_000, 256, 3
POLICIES = ("locked_cache", "per_call")


def spread(x) -> str:
    """median [min, max] of ``x``, two decimals."""
    x = np.asarray(x, float)
    return f"{np.median(x):.2f} [{x.min():.2f}, {x.max():.2f}]"


def back_to_back(fresh: bool, n: int = 30) -> np.ndarray:
    """CUDA-event time of n kernels launched one after another on one thread (ms), checked."""
    salt = 7
    ph = gpu._LaunchPhase(cupy, 1, n, SCRATCH_BYTES, PAGES, PASSES, salt, 0)
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
    ok, msg = check_checksums(ph.out.get(), salt, PAGES, PASSES, ph.grid[0])
    ph.release()
    if not ok:
        raise SystemExit(f"back-to-back kernels wrong: {msg}")
    return np.asarray(out)


def kernel_on(ptrs: list[int], n: int = 5) -> list[float]:
    """The kernel on each block of ``ptrs``, ``n`` launches each, checked: median CUDA-event ms."""
    salt = 11
    ph = gpu._LaunchPhase(cupy, 1, len(ptrs) * n, SCRATCH_BYTES, PAGES, PASSES, salt, 0)
    s, out = ph.streams[0], []
    with s:
        for ptr in ptrs:
            times = []
            for _ in range(n):
                a, b = cupy.cuda.Event(), cupy.cuda.Event()
                a.record(s)
                ph.kern(ph.grid, (gpu.BLOCK_THREADS,), ph.args(0, ptr))
                b.record(s)
                b.synchronize()
                times.append(cupy.cuda.get_elapsed_time(a, b))
            out.append(float(np.median(times)))
    ok, msg = check_checksums(ph.out.get(), salt, PAGES, PASSES, ph.grid[0])
    ph.release()
    if not ok:
        raise SystemExit(f"kernels by address wrong: {msg}")
    return out


def print_by_address(when: str, blocks: int = 32) -> None:
    """The kernel on ``blocks`` scratch blocks allocated at once, so at different addresses."""
    ptrs = [cupy.cuda.runtime.malloc(SCRATCH_BYTES) for _ in range(blocks)]
    try:
        times = kernel_on(ptrs)
    finally:
        for ptr in ptrs:
            cupy.cuda.runtime.free(ptr)
    print(f"the kernel on {blocks} blocks allocated at once, {when} (address: median ms of 5); over the blocks "
          f"{spread(times)}:")
    cells = [f"{ptr:#x}: {ms:.2f}" for ptr, ms in zip(ptrs, times)]
    for i in range(0, blocks, 4):
        print("  " + "  ".join(cells[i:i + 4]))
    print()


def sm_clock() -> str:
    """GPU 0's SM clock now (MHz), from nvidia-smi ("?" without it): a kernel's time follows it."""
    try:
        out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out or "?"


def phase_ms(policy: str, threads: int, salt: int) -> tuple[float, float, float]:
    """One checked launch phase: (real time per launch, median sync per launch, the kernel alone
    on the phase's own block: locked_cache only, else nan), in ms."""
    ph = gpu._LaunchPhase(cupy, threads, LAUNCHES, SCRATCH_BYTES, PAGES, PASSES, salt, 0)
    try:
        ph.prepare(policy, POOL_K)
        real_ns, r0, r1 = ph.run(True)
        own = kernel_on([ph.pol.block.ptr])[0] if policy == "locked_cache" else float("nan")
    finally:
        ph.release()
    p = ph.result(real_ns, r0, r1, 0)
    ok, msg = check_checksums(p.checksum, salt, PAGES, PASSES, ph.grid[0])
    if not ok or not p.extra["seq_ok"]:
        raise SystemExit(f"{policy}, {threads} threads: {msg}")
    return p.real_ns / LAUNCHES / 1e6, float(np.median(p.segments_ns["sync"])) / 1e6, own


def main() -> None:
    env = gpu.device_text()
    print(f"# {env['gpu']}: CUDA driver {env['cuda_driver']}, runtime {env['cuda_runtime']}, CuPy {env['cupy']}; "
          f"{os.cpu_count()} host CPUs; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"# python3 scripts/gpu/launch_cache_handover.py {PASSES} {ROUNDS}")
    print(f"# ms: median [min, max]; kernels of {PASSES} passes filling the GPU ({gpu.resolve_blocks(0)} blocks)")
    print()
    print("one kernel by CUDA events, 30 launched back to back on one thread:")
    print(f"  same block   {spread(back_to_back(False))}")
    print(f"  fresh block  {spread(back_to_back(True))}")
    print()
    print_by_address("first")
    real = {(t, p): [] for t in (1, 8) for p in POLICIES}
    sync = {k: [] for k in real}
    own = {t: [] for t in (1, 8)}
    salt = 9
    print("per round: the kernel alone (5 back to back on a block of its own) and the SM clock before the round's")
    print("phases, then each phase's real time per launch; for the locked cache also the kernel alone on the")
    print("phase's own block, timed right after the phase (ms)")
    print("  round  kernel  SM MHz  " + "  ".join(f"{p} x{t}" + ("  its block" if p == "locked_cache" else "")
                                              for t, p in real))
    for r in range(ROUNDS):
        alone, clock = float(np.median(back_to_back(False, 5))), sm_clock()
        for threads in (1, 8):
            for policy in POLICIES if r % 2 == 0 else POLICIES[::-1]:  # order alternates by round
                salt += 1
                real_ms, sync_ms, own_ms = phase_ms(policy, threads, salt)
                real[threads, policy].append(real_ms)
                sync[threads, policy].append(sync_ms)
                if policy == "locked_cache":
                    own[threads].append(own_ms)
        cells = [f"{real[t, p][-1]:<{len(p) + 3}.2f}" + (f"  {own[t][-1]:<9.2f}" if p == "locked_cache" else "")
                 for t, p in real]
        print(f"  {r:<5}  {alone:<6.2f}  {clock:<6}  " + "  ".join(cells))
    print()
    print_by_address("after the rounds")
    print(f"launch phases of {LAUNCHES} launches, {ROUNDS} rounds (each round's phases back to back):")
    print("  threads  policy        real per launch      sync per launch      real / per_call's    real - its block's kernel")
    for threads in (1, 8):
        ratio = np.asarray(real[threads, "locked_cache"]) / np.asarray(real[threads, "per_call"])
        extra = np.asarray(real[threads, "locked_cache"]) - np.asarray(own[threads])
        for policy in POLICIES:
            locked = policy == "locked_cache"
            print(f"  {threads:<7}  {policy:<12}  {spread(real[threads, policy]):<19}  "
                  f"{spread(sync[threads, policy]):<19}  {spread(ratio) if locked else '1':<19}  "
                  f"{spread(extra) if locked else ''}".rstrip())


if __name__ == "__main__":
    main()
