"""Does a collective run at the same time as a matmul on this machine? A two-kernel probe.

    torchrun --nproc-per-node=2 scripts/gpu/overlap_probe.py [--rows 2048]

Per (collective, SM carve-out): the matmul of ``rows`` rows of the mc2-split seed shape alone,
an all-reduce of another buffer of the same size alone, then both queued at once behind a
sleep kernel (so both are ready together; no dependency between them). Prints the medians
and the overlap ratio (sum - both) / min(mm, ar): 1 = the shorter one hides completely,
0 = the GPU ran them one after the other. The "sleep" rows put a one-thread spin kernel in
the all-reduce's place: whether the GPU runs two streams at once at all; the "triton-<CTAs>x<warps>" rows
run the mc2-split study's fixed-grid Triton all-reduce (kernels/triton/allreduce.py). Both outputs are
checked against float references first. Rank 0 prints; every rank runs. The NCCL_* settings
in the environment apply (the header line shows the ones that matter here).
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

import _probe  # first: it puts this checkout on sys.path
from kernels.triton.collectives import TritonPushComm, set_matmul_carveout
from workbench.running import harness


def main() -> None:
    ap = _probe.arguments(__doc__)
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--triton", nargs="*", default=["16x8", "16x16"],
                    help="grids of the Triton rows, CTAsxWARPS")
    ap.add_argument("--carveouts", type=int, nargs="*", default=[0, 16], help="SMs the matmul leaves free")
    ap.add_argument("--soak-s", type=float, default=0.0,
                    help="then run the first Triton row at the last carve-out this long per mode (clock log)")
    args = ap.parse_args()
    with _probe.nccl_rank() as (dev, rank, world):
        probe(args, dev, rank, world)


def probe(args, dev, rank: int, world: int) -> None:
    a = torch.randn(args.rows, args.k, device=dev, dtype=torch.float16)
    b = torch.randn(args.k, args.n, device=dev, dtype=torch.float16)
    c = torch.empty(args.rows, args.n, device=dev, dtype=torch.float16)
    buf = torch.randn(args.rows, args.n, device=dev, dtype=torch.float16)

    from torch.distributed.distributed_c10d import ProcessGroupNCCL

    def limited(ctas):
        opts = ProcessGroupNCCL.Options(is_high_priority_stream=True)
        opts.config.max_ctas, opts.config.min_ctas = ctas, 1
        return dist.new_group(list(range(world)), backend="nccl", pg_options=opts)

    def triton(spec):
        # the mc2-split study's two-shot push all-reduce of a fixed grid (its own symmetric buffer)
        ctas, warps = map(int, spec.split("x"))
        return TritonPushComm(args.rows, args.n, torch.float16, dev, dist.group.WORLD.group_name, ctas, warps)

    # "sleep": a one-thread spin kernel on a side stream instead of the all-reduce: whether this
    # GPU runs kernels of two streams at once at all
    groups = {"sleep": "sleep", "default": None, "limited-16": limited(16), "limited-8": limited(8),
              **{f"triton-{g}": triton(g) for g in args.triton}}
    blas = torch.backends.cuda.preferred_blas_library()
    side = torch.cuda.Stream()

    def check(group):
        """Both kernels' outputs against float references before any timing (the timed runs then
        reduce `buf` again and again: its values grow, its speed does not change)."""
        mm()
        ref = a.float() @ b.float()
        err = float((c.float() - ref).abs().max() / ref.abs().max())
        if group != "sleep":
            data = reduced(group)
            data.normal_()
            parts = [torch.empty_like(data) for _ in range(world)]
            dist.all_gather(parts, data)
            run(group, "ar-only")
            want = torch.stack([p.float() for p in parts]).sum(0)
            err = max(err, float((data.float() - want).abs().max() / want.abs().max()))
        torch.cuda.synchronize()
        if err > 1e-2:
            raise SystemExit(f"rank {rank}: output check failed ({err:.2e} relative): no timings")

    # the sleep kernel: both kernels (or the whole op) are queued before the GPU starts them
    timer = harness.DistTimer(sleep_cycles=harness.SLEEP_CYCLES)

    def timed(fn):
        """Median us of one call, slowest rank (3 untimed calls first)."""
        return timer.samples(fn, args.reps, warmup=3).median_ns / 1e3

    if rank == 0:
        print(f"world {world}, {args.rows}x{args.k} @ {args.k}x{args.n} fp16, all-reduce {c.numel() * 2 / 2**20:.0f} MiB; "
              f"CUDA_DEVICE_MAX_CONNECTIONS={os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS', 'unset')} "
              f"NCCL_PROTO={os.environ.get('NCCL_PROTO', 'unset')} "
              f"NCCL_CGA_CLUSTER_SIZE={os.environ.get('NCCL_CGA_CLUSTER_SIZE', 'unset')}")
        print("| collective | carve-out | mm us | ar us | both us | overlap |")
        print("|---|---|---|---|---|---|")
    class Spun:
        """Stands for the all-reduce's Work in the 'sleep' row."""

        def wait(self):
            torch.cuda.current_stream().wait_stream(side)

    def reduced(group):
        """The buffer the collective reduces in place."""
        return group.out if isinstance(group, TritonPushComm) else buf

    def collective(group):
        if group == "sleep":
            torch.cuda._sleep(280_000)  # ~140 us at 1.98 GHz
            return Spun()
        if isinstance(group, TritonPushComm):
            group.start(0, args.rows)
            return group  # its wait() joins its stream into the current one
        return dist.all_reduce(buf, group=group, async_op=True)

    def mm():
        torch.matmul(a, b, out=c)

    def run(group, order):
        # the collective's stream waits only for what precedes this op (the sleep), so with the
        # matmul both become ready together; `order` is only the order the host queues them in
        ready = torch.cuda.Event()
        ready.record()
        side.wait_event(ready)
        if order == "mm-first":
            mm()
        with torch.cuda.stream(side):
            work = collective(group)
        if order == "ar-first":
            mm()
        work.wait()

    def soak(group, cv):
        """Each of matmul alone, all-reduce alone, both, back to back for soak_s seconds with
        wall-clock stamps, so a clock/power log taken beside (nvidia-smi -lms 100) shows
        whether running both lowers the SM clock (the matmul slows beside the all-reduce)."""
        set_matmul_carveout(cv, blas)
        for mode, fn in (("mm", mm), ("ar", lambda: run(group, "ar-only")), ("both", lambda: run(group, "ar-first"))):
            dist.barrier()
            torch.cuda.synchronize()
            t0, iters = time.time(), 0
            while time.time() - t0 < args.soak_s:
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
                iters += 20
            t1 = time.time()
            if rank == 0:
                print(f"soak {mode} carve-out {cv}: {time.strftime('%H:%M:%S', time.localtime(t0))}.{int(t0 % 1 * 1000):03d}"
                      f" to {time.strftime('%H:%M:%S', time.localtime(t1))}.{int(t1 % 1 * 1000):03d}, "
                      f"{(t1 - t0) / iters * 1e6:.1f} us per call (host time, no sleep kernel)")

    for name, group in groups.items():
        for cv in args.carveouts:
            set_matmul_carveout(cv, blas)
            check(group)
            t_mm, t_ar = timed(mm), timed(lambda: run(group, "ar-only"))
            for order in ("ar-first", "mm-first"):
                t_both = timed(lambda: run(group, order))
                ov = (t_mm + t_ar - t_both) / min(t_mm, t_ar)
                if rank == 0:
                    print(f"| {name} ({order}) | {cv} | {t_mm:.1f} | {t_ar:.1f} | {t_both:.1f} | {ov:.2f} |")
    if args.soak_s:
        soak(groups[f"triton-{args.triton[0]}"], args.carveouts[-1])


if __name__ == "__main__":
    main()
