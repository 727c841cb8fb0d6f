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


class Spun:
    """Stands for the all-reduce's Work in the 'sleep' row: joins the side stream."""

    def __init__(self, side):
        self.side = side

    def wait(self):
        torch.cuda.current_stream().wait_stream(self.side)


class Probe:
    """One rank's matmul, its collectives and their timings (every rank runs; rank 0 prints)."""

    def __init__(self, args, dev, rank: int, world: int):
        self.args, self.rank, self.world = args, rank, world
        self.a = torch.randn(args.rows, args.k, device=dev, dtype=torch.float16)
        self.b = torch.randn(args.k, args.n, device=dev, dtype=torch.float16)
        self.c = torch.empty(args.rows, args.n, device=dev, dtype=torch.float16)
        self.buf = torch.randn(args.rows, args.n, device=dev, dtype=torch.float16)
        # "sleep": a one-thread spin kernel on a side stream instead of the all-reduce: whether
        # this GPU runs kernels of two streams at once at all
        self.groups = {"sleep": "sleep", "default": None, "limited-16": self.limited(16),
                       "limited-8": self.limited(8), **{f"triton-{g}": self.triton(g, dev) for g in args.triton}}
        self.blas = torch.backends.cuda.preferred_blas_library()
        self.side = torch.cuda.Stream()
        # the sleep kernel: both kernels (or the whole op) are queued before the GPU starts them
        self.timer = harness.DistTimer(sleep_cycles=harness.SLEEP_CYCLES)

    def limited(self, ctas: int):
        # NCCL's group options exist only in a CUDA build of torch (the probe imports without one)
        from torch.distributed.distributed_c10d import ProcessGroupNCCL

        opts = ProcessGroupNCCL.Options(is_high_priority_stream=True)
        opts.config.max_ctas, opts.config.min_ctas = ctas, 1
        return dist.new_group(list(range(self.world)), backend="nccl", pg_options=opts)

    def triton(self, spec: str, dev):
        """The mc2-split study's two-shot push all-reduce of a fixed grid (its own symmetric buffer)."""
        ctas, warps = map(int, spec.split("x"))
        return TritonPushComm(self.args.rows, self.args.n, torch.float16, dev, dist.group.WORLD.group_name,
                              ctas, warps)

    def mm(self):
        torch.matmul(self.a, self.b, out=self.c)

    def reduced(self, group):
        """The buffer the collective reduces in place."""
        return group.out if isinstance(group, TritonPushComm) else self.buf

    def collective(self, group):
        if group == "sleep":
            torch.cuda._sleep(280_000)  # ~140 us at 1.98 GHz
            return Spun(self.side)
        if isinstance(group, TritonPushComm):
            group.start(0, self.args.rows)
            return group  # its wait() joins its stream into the current one
        return dist.all_reduce(self.buf, group=group, async_op=True)

    def run(self, group, order: str):
        # the collective's stream waits only for what precedes this op (the sleep), so with the
        # matmul both become ready together; `order` is only the order the host queues them in
        ready = torch.cuda.Event()
        ready.record()
        self.side.wait_event(ready)
        if order == "mm-first":
            self.mm()
        with torch.cuda.stream(self.side):
            work = self.collective(group)
        if order == "ar-first":
            self.mm()
        work.wait()

    def check(self, group):
        """Both kernels' outputs against float references before any timing (the timed runs then
        reduce the buffer again and again: its values grow, its speed does not change)."""
        self.mm()
        ref = self.a.float() @ self.b.float()
        err = float((self.c.float() - ref).abs().max() / ref.abs().max())
        if group != "sleep":
            data = self.reduced(group)
            data.normal_()
            parts = [torch.empty_like(data) for _ in range(self.world)]
            dist.all_gather(parts, data)
            self.run(group, "ar-only")
            want = torch.stack([p.float() for p in parts]).sum(0)
            err = max(err, float((data.float() - want).abs().max() / want.abs().max()))
        torch.cuda.synchronize()
        if err > 1e-2:
            raise SystemExit(f"rank {self.rank}: output check failed ({err:.2e} relative): no timings")

    def timed(self, fn) -> float:
        """Median us of one call, slowest rank (3 untimed calls first)."""
        return self.timer.samples(fn, self.args.reps, warmup=3).median_ns / 1e3

    def say(self, text: str):
        if self.rank == 0:
            print(text)

    def table(self):
        """Per collective and carve-out: each alone, then both in each queueing order."""
        self.say(f"world {self.world}, {self.args.rows}x{self.args.k} @ {self.args.k}x{self.args.n} fp16, all-reduce "
                 f"{self.c.numel() * 2 / 2**20:.0f} MiB; "
                 f"CUDA_DEVICE_MAX_CONNECTIONS={os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS', 'unset')} "
                 f"NCCL_PROTO={os.environ.get('NCCL_PROTO', 'unset')} "
                 f"NCCL_CGA_CLUSTER_SIZE={os.environ.get('NCCL_CGA_CLUSTER_SIZE', 'unset')}")
        self.say("| collective | carve-out | mm us | ar us | both us | overlap |")
        self.say("|---|---|---|---|---|---|")
        for name, group in self.groups.items():
            for cv in self.args.carveouts:
                set_matmul_carveout(cv, self.blas)
                self.check(group)
                t_mm, t_ar = self.timed(self.mm), self.timed(lambda: self.run(group, "ar-only"))
                for order in ("ar-first", "mm-first"):
                    t_both = self.timed(lambda: self.run(group, order))
                    ov = (t_mm + t_ar - t_both) / min(t_mm, t_ar)
                    self.say(f"| {name} ({order}) | {cv} | {t_mm:.1f} | {t_ar:.1f} | {t_both:.1f} | {ov:.2f} |")

    def soak(self, group, cv: int):
        """Each of matmul alone, all-reduce alone, both, back to back for soak_s seconds with
        wall-clock stamps, so a clock/power log taken beside (nvidia-smi -lms 100) shows
        whether running both lowers the SM clock (the matmul slows beside the all-reduce)."""
        set_matmul_carveout(cv, self.blas)
        for mode, fn in (("mm", self.mm), ("ar", lambda: self.run(group, "ar-only")),
                         ("both", lambda: self.run(group, "ar-first"))):
            dist.barrier()
            torch.cuda.synchronize()
            t0, iters = time.time(), 0
            while time.time() - t0 < self.args.soak_s:
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
                iters += 20
            t1 = time.time()
            self.say(f"soak {mode} carve-out {cv}: {_stamp(t0)} to {_stamp(t1)}, "
                     f"{(t1 - t0) / iters * 1e6:.1f} us per call (host time, no sleep kernel)")


def _stamp(t: float) -> str:
    return f"{time.strftime('%H:%M:%S', time.localtime(t))}.{int(t % 1 * 1000):03d}"


def probe(args, dev, rank: int, world: int) -> None:
    p = Probe(args, dev, rank, world)
    p.table()
    if args.soak_s:
        p.soak(p.groups[f"triton-{args.triton[0]}"], args.carveouts[-1])


if __name__ == "__main__":
    main()
