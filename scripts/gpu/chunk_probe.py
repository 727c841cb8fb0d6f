"""Where does a slow overlapped call lose its time? Per-chunk CUDA events of the mc2-split pipeline.

    torchrun --nproc-per-node=4 scripts/gpu/chunk_probe.py --comm triton-pull --carveout 24 --chunks 1024,1024,1024,1024

Runs the study's overlapped op (matmul of each chunk on the compute stream, the chunk's
all-reduce on the collective's stream) ``reps`` times, with CUDA events around every matmul
and every all-reduce launch on every rank. The output is checked against the unsplit
matmul + all-reduce first. Rank 0 prints one line per call: the call's time (slowest rank),
then per chunk the matmul's and the all-reduce's durations (slowest rank) and the gap between
a chunk's matmul end and its all-reduce start, so the slow calls of a bimodal distribution
can be told apart from the fast ones.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import _probe  # first: it puts this checkout on sys.path
from kernels.triton.collectives import TritonPushComm, set_matmul_carveout
from workbench.running import harness


def main() -> None:
    ap = _probe.arguments(__doc__)
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--comm", choices=("triton", "triton-pull"), default="triton-pull")
    ap.add_argument("--carveout", type=int, default=24)
    ap.add_argument("--ctas", type=int, default=0, help="the all-reduce's grid (0: one CTA per carve-out SM)")
    ap.add_argument("--warps", type=int, default=16)
    ap.add_argument("--chunks", default="1024,1024,1024,1024")
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args()
    with _probe.nccl_rank() as (dev, rank, _world):
        probe(args, dev, rank)


def probe(args, dev, rank: int) -> None:
    chunks = [int(c) for c in args.chunks.split(",")]
    if sum(chunks) != args.m:
        raise SystemExit(f"chunks {chunks} do not add up to m={args.m}")
    gen = torch.Generator(device="cpu").manual_seed(rank)
    a = (torch.randn(args.m, args.k, generator=gen) / args.k ** 0.5).to(dev, torch.float16)
    b = torch.randn(args.k, args.n, generator=gen).to(dev, torch.float16)
    ctas = args.ctas or args.carveout
    comm = TritonPushComm(args.m, args.n, torch.float16, dev, dist.group.WORLD.group_name, ctas,
                          args.warps, pull=args.comm == "triton-pull")
    set_matmul_carveout(args.carveout, torch.backends.cuda.preferred_blas_library())
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731

    def call(marks=None):
        r0 = 0
        for i, c in enumerate(chunks):
            if marks:
                marks["mm0"][i].record()
            torch.matmul(a[r0:r0 + c], b, out=comm.out[r0:r0 + c])
            if marks:
                marks["mm1"][i].record()
            comm.start(r0, r0 + c)
            if marks:
                with torch.cuda.stream(comm.stream):
                    marks["ar1"][i].record()
            r0 += c
        comm.wait()

    ref = a.float() @ b.float()
    dist.all_reduce(ref)
    call()
    torch.cuda.synchronize()
    err = float((comm.out.float() - ref).abs().max() / ref.pow(2).mean().sqrt())
    if err > 2e-2:
        raise SystemExit(f"rank {rank}: output check failed ({err:.2e}): no timings")
    for _ in range(3):
        call()
    timer = harness.DistTimer(sleep_cycles=harness.SLEEP_CYCLES)  # the whole call queued before the GPU starts it
    rows = []
    for _ in range(args.reps):
        marks = {k: [ev() for _ in chunks] for k in ("mm0", "mm1", "ar1")}
        row = [timer.elapsed_s(lambda: call(marks)) * 1e3]  # ms, like elapsed_time
        t0 = marks["mm0"][0]
        for i in range(len(chunks)):
            mm = marks["mm0"][i].elapsed_time(marks["mm1"][i])
            # ar start ~ max(mm end, previous ar end): the launch waits for both
            ar_start = marks["mm1"][i] if i == 0 else max(
                (marks["mm1"][i], marks["ar1"][i - 1]), key=lambda x: t0.elapsed_time(x))
            row += [mm, ar_start.elapsed_time(marks["ar1"][i])]
        rows.append(row)
    worst = timer.max_over_ranks([v * 1e3 for row in rows for v in row])  # us, slowest rank per entry
    t = [worst[i:i + len(rows[0])] for i in range(0, len(worst), len(rows[0]))]
    if rank == 0:
        print(f"{args.comm} carve-out {args.carveout} CTAs {ctas} warps {args.warps} chunks {chunks}: us, max over ranks")
        print("call | " + " | ".join(f"mm{i} ar{i}" for i in range(len(chunks))))
        for row in sorted(t):
            print(f"{row[0]:6.1f} | " + " | ".join(f"{row[1 + 2 * i]:5.1f} {row[2 + 2 * i]:5.1f}"
                                                 for i in range(len(chunks))))


if __name__ == "__main__":
    main()
