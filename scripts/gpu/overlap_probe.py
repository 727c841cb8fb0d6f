"""Does a collective run at the same time as a matmul on this machine? A two-kernel probe.

    torchrun --nproc-per-node=2 scripts/gpu/overlap_probe.py [--rows 2048]

Per (collective, SM carve-out): the matmul of ``rows`` rows of the mc2-split seed shape alone,
an all-reduce of another buffer of the same size alone, then both queued at once behind a
sleep kernel (so both are ready together; no dependency between them). Prints the medians
and the overlap ratio (sum - both) / min(mm, ar): 1 = the shorter one hides completely,
0 = the GPU ran them one after the other. The "sleep" rows put a one-thread spin kernel in
the all-reduce's place: whether the GPU runs two streams at once at all. Both outputs are
checked against float references first. Rank 0 prints; every rank runs. The NCCL_* settings
in the environment apply (the header line shows the ones that matter here).
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--k", type=int, default=3072)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    a = torch.randn(args.rows, args.k, device=dev, dtype=torch.float16)
    b = torch.randn(args.k, args.n, device=dev, dtype=torch.float16)
    c = torch.empty(args.rows, args.n, device=dev, dtype=torch.float16)
    buf = torch.randn(args.rows, args.n, device=dev, dtype=torch.float16)

    from torch.distributed.distributed_c10d import ProcessGroupNCCL

    def limited(ctas):
        opts = ProcessGroupNCCL.Options(is_high_priority_stream=True)
        opts.config.max_ctas, opts.config.min_ctas = ctas, 1
        return dist.new_group(list(range(world)), backend="nccl", pg_options=opts)

    # "sleep": a one-thread spin kernel on a side stream instead of the all-reduce: whether this
    # GPU runs kernels of two streams at once at all
    groups = {"sleep": "sleep", "default": None, "limited-16": limited(16), "limited-8": limited(8)}
    blas = torch.backends.cuda.preferred_blas_library()
    side = torch.cuda.Stream()

    def check(group):
        """Both kernels' outputs against float references before any timing (the timed runs then
        reduce `buf` again and again: its values grow, its speed does not change)."""
        mm()
        ref = a.float() @ b.float()
        err = float((c.float() - ref).abs().max() / ref.abs().max())
        if group != "sleep":
            buf.normal_()
            parts = [torch.empty_like(buf) for _ in range(world)]
            dist.all_gather(parts, buf)
            run(group, "ar-only")
            want = torch.stack([p.float() for p in parts]).sum(0)
            err = max(err, float((buf.float() - want).abs().max() / want.abs().max()))
        torch.cuda.synchronize()
        if err > 1e-2:
            raise SystemExit(f"rank {rank}: output check failed ({err:.2e} relative): no timings")

    def timed(fn):
        out = []
        for i in range(args.reps + 3):
            torch.cuda.synchronize()
            dist.barrier()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(2_000_000)
            s.record()
            fn()
            e.record()
            e.synchronize()
            if i >= 3:
                out.append(s.elapsed_time(e) * 1e3)
        t = torch.tensor(out, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return statistics.median(t.tolist())

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

    def collective(group):
        if group == "sleep":
            torch.cuda._sleep(280_000)  # ~140 us at 1.98 GHz
            return Spun()
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

    for name, group in groups.items():
        for cv in (0, 16):
            torch._C._set_sm_carveout_experimental(cv or None)
            torch.backends.cuda.preferred_blas_library("cublaslt" if cv else blas)
            check(group)
            t_mm, t_ar = timed(mm), timed(lambda: run(group, "ar-only"))
            for order in ("ar-first", "mm-first"):
                t_both = timed(lambda: run(group, order))
                ov = (t_mm + t_ar - t_both) / min(t_mm, t_ar)
                if rank == 0:
                    print(f"| {name} ({order}) | {cv} | {t_mm:.1f} | {t_ar:.1f} | {t_both:.1f} | {ov:.2f} |")
    torch._C._set_sm_carveout_experimental(None)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
