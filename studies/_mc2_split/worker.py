"""Distributed worker of the mc2-split study: chunked matmul + all-reduce, serial vs overlapped.

Launched by the study with ``python -m torch.distributed.run --nproc-per-node=W worker.py
--config cfg.json --out events.jsonl``. Every rank computes the same thing; rank 0 writes
one JSON event per line to ``--out`` as soon as it has it (progress, fits, plans, each
measured variant), which the study tails to record points and show progress.

Each rank holds A_r (M x K) and B_r (K x N), seeded by rank; the result is
sum_r A_r @ B_r on every rank (matmul, then all-reduce of the output). Variants:

- ``mm/m<m>``: the matmul of the first m rows (CostMM points; m = M too: the full-size time
  that decides the bound, as in the seed);
- ``comm/<comm>/m<m>``: the all-reduce of m output rows (CostComm points, m = M too);
- ``serial/<comm>``: the unsplit matmul, then the unsplit all-reduce;
- ``overlap/<comm>/<split>``: per chunk, the matmul on the compute stream and the
  chunk's all-reduce started asynchronously behind it; the op ends when the last
  all-reduce is done.

Collective implementations (``comm``):

- ``default``: the backend's all-reduce (NCCL on GPUs, gloo on CPUs), ``async_op=True``
  (NCCL runs it on its own stream; gloo on its own thread);
- ``limited``: NCCL in a communicator limited to as many CTAs as the matmul leaves SMs free
  (the carve-out; ``nccl_ctas`` without one) (NCCLConfig.max_ctas), in CTA clusters of
  ``nccl_cga`` (1: NCCL's default 4-CTA clusters cannot start beside a running matmul), on a
  high-priority stream, so its kernels run beside the matmul and take few SMs from it;
- ``ce``: a copy-engine all-reduce through symmetric memory (cudaMemcpy over NVLink: copy
  engines, no SMs), in place: each rank pushes its rows of every peer's block into that peer's
  staging buffer, one barrier, each rank adds the staged rows into its block, then pushes the
  reduced block into every peer's output (one more barrier closes the op). Pushes go in
  rotated peer order, one stream per peer, so several copy engines run at once;
- ``ce-oneshot``: every rank's block is the whole chunk: (W-1)/W more bytes pushed and W
  times the add work of ``ce``, but no push back, which pays where the per-chunk latency
  dominates (W = 2);
- ``triton``: the same two-shot push as ``ce``, moved by one Triton launch per chunk of a
  fixed grid (one CTA of ``triton_warps`` warps per SM of the carve-out; ``triton_ctas``
  without one) on a high-priority stream: its programs push the rows to every peer, meet the
  peers' programs through arrival counters in symmetric memory, sum the staged rows and push
  the sum back. Only stores cross NVLink, so a few SMs keep the links busy
  (kernels/triton/allreduce.py). No more CTAs than the carve-out: a matmul CTA needs a whole
  SM's registers, so every SM holding a collective CTA is one the next chunk's matmul waits
  for (64 CTAs beside a 16-SM carve-out slowed the matmul by 1.56x on 4 H200s);
- ``triton-pull``: the same launch, but each rank signals its peers that its chunk is ready,
  then loads the peers' partial rows of its block over NVLink (no staging buffer: about 2
  instead of 3.5 bytes of HBM traffic per byte, beside the matmul), sums and pushes the sum;
- ``triton-persistent``: the pull, but one launch per op for all its chunks, queued before the
  first matmul: the compute stream sets a flag after each chunk's matmul (cuStreamWriteValue32,
  no kernel) and the launch's programs move on to that chunk, so a chunk costs no launch, no
  kernel ramp-up and tail, and the next chunk's pulls start as soon as every rank's flag is set.

Each collective can run with an SM carve-out (``carveouts``): matmuls go through cuBLASLt
told to leave that many SMs free (``torch._C._set_sm_carveout_experimental``), so the collective's
kernels (NCCL's CTAs, the Triton kernels, the copy-engine path's barrier and add kernels) find SMs at once
instead of waiting behind matmul CTAs. A (collective, carve-out) pair is one config,
labelled ``<comm>`` or ``<comm>+c<SMs>``; the matmul cost points are measured per carve-out.

Timing: per sample, all ranks meet (barrier + device sync); on GPUs a ~2 ms sleep kernel is
queued first so the host enqueues the whole op before the GPU reaches it (the host's launch
cost is not timed), then CUDA events bracket the op on the compute stream; on CPUs
``perf_counter_ns``. A sample is the maximum over ranks. Each variant's output is checked
against the unsplit matmul + all-reduce before it is timed.

Traces: one extra call of each config's serial op and best split runs under torch.profiler
(all ranks; rank 0 keeps its Chrome trace, gzipped, next to the event file) so the study can
draw the measured timeline beside the simulated one. A profiler failure is reported as a
note and costs nothing else.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from studies._mc2_split.plan import DTYPE_BYTES, CostModel, Fit, fit_points, heuristic, uniform_chunks  # noqa: E402
from studies._mc2_split.search import best_split, unsearchable  # noqa: E402
from studies._mc2_split.simulate import fit_contention  # noqa: E402

SLEEP_CYCLES = 4_000_000  # ~2 ms at the H200's 1.98 GHz: longer than the host needs to enqueue 16 chunks
TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4}  # max |err| / rms(ref)


class Events:
    """Rank 0's JSONL event stream; other ranks write nothing."""

    def __init__(self, path: str, rank: int):
        self.fh = open(path, "a") if rank == 0 else None

    def emit(self, event: str, **data) -> None:
        if self.fh:
            self.fh.write(json.dumps({"type": event, **data}) + "\n")
            self.fh.flush()


def row_blocks(r0: int, r1: int, world: int) -> list[tuple[int, int]]:
    """Each rank's block of rows r0:r1 (the rows it reduces in a two-shot all-reduce)."""
    edges = [r0 + (r1 - r0) * i // world for i in range(world + 1)]
    return list(zip(edges[:-1], edges[1:]))


class BackendComm:
    """The backend's own all-reduce, in place on the output rows."""

    def __init__(self, group, out: torch.Tensor):
        self.group, self.out = group, out
        self.works = []

    def plan(self, chunks: list[int]) -> None:
        """Nothing to prepare: each chunk's all-reduce starts on its own."""

    def start(self, r0: int, r1: int) -> None:
        self.works.append(dist.all_reduce(self.out[r0:r1], group=self.group, async_op=True))

    def wait(self) -> None:
        for w in self.works:
            w.wait()
        self.works.clear()

    def result(self) -> torch.Tensor:
        return self.out


class SymmPushComm:
    """In-place two-shot all-reduce of output rows through symmetric memory, the sums pushed
    (see the module doc): the buffers, peers and the closing barrier; subclasses move the
    bytes. ``staged``: the partials are pushed too, into a staging buffer on their owner."""

    def __init__(self, m: int, n: int, dtype, device, group, staged: bool = True):
        import torch.distributed._symmetric_memory as symm_mem

        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.out = symm_mem.empty((m, n), dtype=dtype, device=device)  # matmul writes here; reduced in place
        self.handle = symm_mem.rendezvous(self.out, group)
        # Peers in rotated order (rank+1, rank+2, ...): the ranks' first pushes go to different
        # GPUs rather than all to rank 0.
        self.peers = [(self.rank + i) % self.world for i in range(1, self.world)]
        self.peer_out = {p: self.handle.get_buffer(p, (m, n), dtype) for p in self.peers}
        if staged:
            self.stage = symm_mem.empty((self.world, m, n), dtype=dtype, device=device)  # stage[p]: rows from p
            h_stage = symm_mem.rendezvous(self.stage, group)
            self.peer_stage = {p: h_stage.get_buffer(p, (self.world, m, n), dtype) for p in self.peers}
        self.stream = torch.cuda.Stream(priority=-1)  # high priority: its kernels jump the matmul queue

    def blocks(self, r0: int, r1: int) -> list[tuple[int, int]]:
        return row_blocks(r0, r1, self.world)

    def plan(self, chunks: list[int]) -> None:
        """Nothing to prepare: each chunk's all-reduce is queued on its own."""

    def pushes(self, parts) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(dst, src) per peer: this rank's rows of the peer's block, into the peer's stage."""
        return [(self.peer_stage[p][self.rank, a:b], self.out[a:b]) for p in self.peers for a, b in [parts[p]]]

    def wait(self) -> None:
        # the last chunk's pushes into the peers may still be landing, and the next op's matmul
        # rewrites `out`: one closing barrier per op (each chunk's own sync covers the ones before)
        with torch.cuda.stream(self.stream):
            self.handle.barrier(channel=0)
        torch.cuda.current_stream().wait_stream(self.stream)

    def result(self) -> torch.Tensor:
        return self.out


class CopyEngineComm(SymmPushComm):
    """Copies by cudaMemcpy over NVLink (copy engines, no SMs); adds by torch on the comm stream."""

    def __init__(self, m, n, dtype, device, group, oneshot: bool = False):
        super().__init__(m, n, dtype, device, group)
        # one stream per peer: copies on different streams can use different copy engines at once
        self.copy_streams = [torch.cuda.Stream(priority=-1) for _ in self.peers]
        self.oneshot = oneshot

    def blocks(self, r0, r1):
        # one-shot: every rank's block is the whole chunk, so there is nothing to push back
        return [(r0, r1)] * self.world if self.oneshot else super().blocks(r0, r1)

    def start(self, r0: int, r1: int) -> None:
        """Queue the all-reduce of rows r0:r1 behind the current stream's work (the chunk's matmul):
        push this rank's rows of every peer's block into the peer's stage, barrier (every peer's
        rows of this rank's block have landed), add them into the block in place, push the
        reduced block into every peer's output (a peer's own rows of this block went out before
        it reached the barrier: safe to overwrite)."""
        self.stream.wait_stream(torch.cuda.current_stream())
        parts = self.blocks(r0, r1)
        s0, s1 = parts[self.rank]
        with torch.cuda.stream(self.stream):
            self._copy(self.pushes(parts))
            self.handle.barrier(channel=0)
            block = self.out[s0:s1]
            for p in self.peers:
                block.add_(self.stage[p, s0:s1])
            if not self.oneshot:
                self._copy([(self.peer_out[p][s0:s1], block) for p in self.peers])

    def _copy(self, jobs):
        """Each (dst, src) copy on its own copy stream after what ``self.stream`` has queued so
        far; ``self.stream`` then waits for all of them."""
        jobs = [(dst, src) for dst, src in jobs if dst.numel()]
        for (dst, src), cs in zip(jobs, self.copy_streams):
            cs.wait_stream(self.stream)
            with torch.cuda.stream(cs):
                dst.copy_(src)
        for cs in self.copy_streams[:len(jobs)]:
            self.stream.wait_stream(cs)


class TritonPushComm(SymmPushComm):
    """The same two-shot push in one fixed-grid Triton launch per chunk, ``ctas`` programs of
    ``warps`` warps, synchronised by arrival counters in symmetric memory instead of barrier
    kernels (kernels/triton/allreduce.py). ``pull``: the peers' partials are loaded over NVLink
    instead of pushed into a staging buffer (``triton-pull``)."""

    def __init__(self, m, n, dtype, device, group, ctas: int, warps: int, pull: bool = False):
        import torch.distributed._symmetric_memory as symm_mem
        from kernels.triton import allreduce

        super().__init__(m, n, dtype, device, group, staged=not pull)
        self.kernels, self.ctas, self.warps, self.pull = allreduce, ctas, warps, pull
        self.counter = symm_mem.empty((1,), dtype=torch.int64, device=device)
        self.counter.zero_()
        handle = symm_mem.rendezvous(self.counter, group)
        self.peer_counter = [handle.get_buffer(p, (1,), torch.int64) for p in self.peers]
        self.chunks = 0  # chunks started: the counter's target grows by the arrivals per chunk
        torch.cuda.synchronize()
        handle.barrier(channel=0)  # every rank's counter is zero before any peer adds to it

    def start(self, r0: int, r1: int) -> None:
        """Queue the all-reduce of rows r0:r1 behind the current stream's work (the chunk's matmul)."""
        self.stream.wait_stream(torch.cuda.current_stream())
        parts = self.blocks(r0, r1)
        s0, s1 = parts[self.rank]
        self.chunks += 1
        block, outs = self.out[s0:s1], [self.peer_out[p][s0:s1] for p in self.peers]
        with torch.cuda.stream(self.stream):
            if self.pull:
                self.kernels.two_shot_pull(self.peer_counter, self.counter, self.chunks * len(self.peers), block,
                                           outs, outs, self.ctas, self.warps)
            else:
                self.kernels.two_shot(self.pushes(parts), self.peer_counter, self.counter,
                                      self.chunks * len(self.peers) * self.ctas, block,
                                      [self.stage[p, s0:s1] for p in self.peers], outs, self.ctas, self.warps)


class TritonPersistentComm(TritonPushComm):
    """The pull all-reduce of all of an op's chunks in one launch (``triton-persistent``,
    ``kernels/triton/allreduce.py``). ``plan`` queues the launch on the collective's stream before
    the first matmul; each ``start`` sets the chunk's ready flag on the compute stream, behind its
    matmul. A ``start`` without a plan (the cost points, the serial op) plans one chunk."""

    def __init__(self, m, n, dtype, device, group, ctas: int, warps: int):
        from torch._C._distributed_c10d import _SymmetricMemory

        super().__init__(m, n, dtype, device, group, ctas, warps, pull=True)
        self.write_flag = _SymmetricMemory.stream_write_value32  # cuStreamWriteValue32: no kernel, no SM
        self.ready = torch.zeros(m, dtype=torch.uint32, device=device)  # per chunk; at most m chunks
        self.epoch = 0  # ops planned: a flag is set when it equals the op's epoch, so none is ever reset
        self.tables: dict[tuple, torch.Tensor] = {}
        self.rows: list[tuple[int, int]] = []  # the planned op's chunks
        self.next = 0  # its first chunk not started yet

    def plan(self, chunks: list[int], r0: int = 0) -> None:
        rows = [(a, a + c) for a, c in zip(itertools.accumulate([r0, *chunks[:-1]]), chunks)]
        key = tuple(rows)
        if key not in self.tables:
            # built once per chunk list (the first, untimed call): a host-to-device copy would
            # wait for the GPU and so stall the pre-queued op
            blocks = [self.blocks(a, b)[self.rank] for a, b in rows]
            self.tables[key] = torch.tensor([v for s0, s1 in blocks for v in (s0, s1 - s0)], dtype=torch.int32,
                                            device=self.out.device)
        self.epoch += 1
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            self.kernels.pull_persistent(self.out, [self.peer_out[p] for p in self.peers], self.peer_counter,
                                         self.counter, self.ready.view(torch.int32), self.epoch,
                                         self.chunks * self.world, self.tables[key], self.ctas, num_warps=self.warps)
        self.chunks += len(rows)
        self.rows, self.next = rows, 0

    def start(self, r0: int, r1: int) -> None:
        """Mark rows r0:r1 ready behind the current stream's work (the chunk's matmul)."""
        if self.next == len(self.rows):
            self.plan([r1 - r0], r0)
        if self.rows[self.next] != (r0, r1):
            raise ValueError(f"rows {r0}:{r1} started where the plan has {self.rows[self.next]}")
        self.write_flag(self.ready, self.next, self.epoch)
        self.next += 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ev = Events(args.out, rank)
    try:
        run(cfg, rank, world, ev, os.path.dirname(os.path.abspath(args.out)))
    except Exception as exc:  # report to the study, then fail the process
        ev.emit("error", rank=rank, text=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc(limit=8))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def run(cfg: dict, rank: int, world: int, ev: Events, outdir: str) -> None:
    cuda = cfg["backend"] == "nccl"
    local = int(os.environ.get("LOCAL_RANK", rank))
    if cuda:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
    else:
        torch.set_num_threads(max(1, cfg.get("threads", 1)))
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    m, k, n = cfg["m"], cfg["k"], cfg["n"]
    dtype = getattr(torch, cfg["dtype"])
    gen = torch.Generator(device="cpu").manual_seed(cfg["seed"] * 1000 + rank)
    a = (torch.randn(m, k, generator=gen) / k ** 0.5).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
    ev.emit("progress", frac=0.02, msg=f"{world} ranks up ({cfg['backend']}); computing the reference")

    # the reference: the unsplit matmul + all-reduce, in float32 for a tight check
    ref = (a.float() @ b.float())
    dist.all_reduce(ref)
    ref_rms = float(ref.pow(2).mean().sqrt())

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def barrier():
        sync()
        dist.barrier()
        sync()

    def check(out: torch.Tensor, rows: int) -> tuple[bool, str]:
        err = (out[:rows].float() - ref[:rows]).abs().max()
        dist.all_reduce(err, op=dist.ReduceOp.MAX)
        rel = float(err) / ref_rms
        ok = rel <= TOL[cfg["dtype"]]
        return ok, (f"max|out-ref|/rms(ref) = {rel:.2e} over {rows} rows on all ranks "
                    f"({'<=' if ok else '>'} {TOL[cfg['dtype']]:g} for {cfg['dtype']})")

    def time_op(fn, inner: int = 1) -> list[float]:
        """Samples of ``inner`` back-to-back calls each, per call. Cost points use inner > 1 so
        the ranks' start skew (paid once per op in the pipelined runs) is not fitted as a
        per-chunk fixed cost."""
        def run():
            for _ in range(inner):
                fn()

        for _ in range(cfg["warmup"]):
            barrier()
            run()
        sync()
        samples = []
        for _ in range(cfg["reps"]):
            barrier()
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(SLEEP_CYCLES)
                start.record()
                run()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e6 / inner)
            else:
                t0 = time.perf_counter_ns()
                run()
                samples.append(float(time.perf_counter_ns() - t0) / inner)
        worst = torch.tensor(samples, dtype=torch.float64, device=device)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        return worst.cpu().tolist()

    def profile_op(name: str, fn) -> None:
        """One call of ``fn`` under torch.profiler on every rank; rank 0 attaches its trace."""
        if not cfg.get("trace", True):
            return
        try:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            barrier()
            with profile(activities=acts) as prof:
                fn()
                sync()
            if rank == 0:
                raw = os.path.join(outdir, f"{name}.json")
                prof.export_chrome_trace(raw)
                path = raw + ".gz"
                with open(raw, "rb") as src, open(path, "wb") as dst:
                    dst.write(gzip.compress(src.read()))
                os.unlink(raw)
                ev.emit("attach", name=f"{name}.json.gz", kind="trace/chrome-json", path=path)
        except Exception as exc:  # a trace is a bonus: never lose the run for it
            ev.emit("note", text=f"trace of {name} failed: {type(exc).__name__}: {exc}")

    # collective instances: one per collective, and per CTA count for the CTA-limited ones
    carveouts = cfg.get("carveouts") or [0]
    ctas_param = {"limited": "nccl_ctas", "triton": "triton_ctas", "triton-pull": "triton_ctas",
                  "triton-persistent": "triton_ctas"}

    def instance_of(name: str, cv: int) -> str:
        return f"{name}-{cv or cfg[ctas_param[name]]}" if name in ctas_param else name

    def limited_group(ctas: int):
        from torch.distributed.distributed_c10d import ProcessGroupNCCL

        opts = ProcessGroupNCCL.Options(is_high_priority_stream=True)
        opts.config.max_ctas = ctas
        opts.config.min_ctas = 1
        # NCCL launches its CTAs in clusters (4 on Hopper by default); a cluster needs that many
        # free SMs in one GPC, which a running matmul rarely leaves, so the all-reduce waited for
        # the matmul to end: on H200s a matmul and an all-reduce queued together took the sum of
        # their times whatever the CTA limit or carve-out (scripts/gpu/overlap_probe.py).
        opts.config.cga_cluster_size = cfg["nccl_cga"]
        return dist.new_group(list(range(world)), backend="nccl", pg_options=opts)

    comms = {}
    for name in cfg["comms"]:
        for cv in carveouts:
            inst = instance_of(name, cv)
            if inst in comms:
                continue
            if name == "default":
                comms[inst] = BackendComm(None, torch.empty(m, n, dtype=dtype, device=device))
            elif name == "limited":
                comms[inst] = BackendComm(limited_group(cv or cfg["nccl_ctas"]),
                                          torch.empty(m, n, dtype=dtype, device=device))
            elif name in ("ce", "ce-oneshot", "triton", "triton-pull", "triton-persistent"):
                group = dist.group.WORLD.group_name
                ctas, warps = cv or cfg["triton_ctas"], cfg["triton_warps"]
                try:
                    if name == "triton-persistent":
                        comms[inst] = TritonPersistentComm(m, n, dtype, device, group, ctas, warps)
                    elif name.startswith("triton"):
                        comms[inst] = TritonPushComm(m, n, dtype, device, group, ctas, warps, pull=name == "triton-pull")
                    else:
                        comms[inst] = CopyEngineComm(m, n, dtype, device, group, name == "ce-oneshot")
                except Exception as exc:  # symmetric memory or triton missing on this build/machine: go on
                    ev.emit("note", text=f"{name}: symmetric-memory collective unavailable here "
                                         f"({type(exc).__name__}: {exc})")
            else:
                raise ValueError(f"unknown comm {name!r}")
    configs = [(c, cv) for c in cfg["comms"] for cv in carveouts if instance_of(c, cv) in comms]

    def matmul(out, r0, r1):
        torch.matmul(a[r0:r1], b, out=out[r0:r1])

    def variant(name, params, fn, result, rows, inner=1):
        barrier()
        fn()
        sync()
        ok, msg = check(result(), rows)
        samples = time_op(fn, inner) if ok else []
        ev.emit("variant", variant=name, params=params, samples_ns=samples, correct=ok, check=msg)
        return samples

    points = list(cfg["points"]) + ([] if m in cfg["points"] else [m])
    total = len(configs) * (len(cfg["uniform"]) + 3) + \
        (0 if cfg["fits_given"] else len(points) * (len(carveouts) + len(comms)))
    done = [0]

    def tick(msg):
        done[0] += 1
        ev.emit("progress", frac=0.05 + 0.9 * done[0] / max(1, total), msg=msg)

    dbytes = DTYPE_BYTES[cfg["dtype"]]

    def label(c, cv):
        return c if cv == 0 else f"{c}+c{cv}"

    blas_default = torch.backends.cuda.preferred_blas_library() if cuda else None

    def set_carveout(cv):
        # torch applies the carve-out only on its cuBLASLt path (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET);
        # a plain fp16 matmul goes through cuBLAS unless cuBLASLt is preferred. A first H200 run
        # without this switch showed no effect of the carve-out at all.
        if cuda:
            torch._C._set_sm_carveout_experimental(cv or None)
            torch.backends.cuda.preferred_blas_library("cublaslt" if cv else blas_default)

    models, full = {}, {}  # full: measured full-size (matmul, all-reduce) us per config
    if cfg["fits_given"]:
        given = CostModel(Fit.from_json(cfg["mm_fit"]), Fit.from_json(cfg["comm_fit"]), n, dbytes)
        models = {label(c, cv): given for c, cv in configs}
    else:
        mm_fits, comm_fits, full_mm, full_comm = {}, {}, {}, {}
        anyc = next(iter(comms.values()))
        for cv in carveouts:
            set_carveout(cv)
            mm_pts = []
            for p in points:
                # the local matmul is checked against the local product's rows (no all-reduce yet)
                out = anyc.out
                barrier()
                matmul(out, 0, p)
                sync()
                err = float((out[:p].float() - (a[:p].float() @ b.float())).abs().max()) / ref_rms
                ok = err <= TOL[cfg["dtype"]]
                samples = time_op(lambda p=p: matmul(out, 0, p), cfg["inner"]) if ok else []
                name = f"mm/m{p}" if cv == 0 else f"mm/c{cv}/m{p}"
                ev.emit("variant", variant=name, params={"kind": "cost-mm", "comm": "-", "carveout": cv, "m": p},
                        samples_ns=samples, correct=ok, check=f"max|out-local ref|/rms = {err:.2e}")
                mm_pts.append((p, _median(samples) / 1e3))
                tick(f"CostMM point m={p} carve-out {cv}")
            mm_fits[cv] = fit_points([x for x, _ in mm_pts], [y for _, y in mm_pts], "row")
            full_mm[cv] = dict(mm_pts)[m]
        set_carveout(0)
        for cname, comm in comms.items():
            pts = []
            for p in points:
                def op(p=p, comm=comm):
                    comm.start(0, p)
                    comm.wait()
                # input: the full local product, so the first reduction equals the reference; timed
                # repetitions then reduce in place again (values grow; the speed does not depend on them)
                matmul(comm.out, 0, m)
                samples = variant(f"comm/{cname}/m{p}", {"kind": "cost-comm", "comm": cname, "m": p,
                                                          "mib": p * n * dbytes / 2**20},
                                  op, comm.result, p, cfg["inner"])
                pts.append((p * n * dbytes / 2**20, _median(samples) / 1e3))
                tick(f"CostComm point {cname} m={p}")
            comm_fits[cname] = fit_points([x for x, _ in pts], [y for _, y in pts], "MiB")
            full_comm[cname] = dict(zip(points, (y for _, y in pts)))[m]
        for cname, cv in configs:
            lbl, inst = label(cname, cv), instance_of(cname, cv)
            models[lbl] = CostModel(mm_fits[cv], comm_fits[inst], n, dbytes)
            full[lbl] = (full_mm[cv], full_comm[inst])
            ev.emit("fits", comm=lbl, instance=inst, mm=models[lbl].mm.to_json(), comm_fit=comm_fits[inst].to_json(),
                    full_mm_us=full_mm[cv], full_comm_us=full_comm[inst])

    for cname, cv in configs:
        inst = instance_of(cname, cv)
        comm, lbl, model = comms[inst], label(cname, cv), models[label(cname, cv)]
        set_carveout(cv)
        base = {"comm": lbl, "collective": cname, "instance": inst, "carveout": cv,
                "blas": "cublaslt" if cv and cuda else "default"}

        def serial(comm=comm):
            matmul(comm.out, 0, m)
            comm.start(0, m)
            comm.wait()

        variant(f"serial/{lbl}", {"kind": "serial", **base, "split": "unsplit", "chunks": str(m), "n_chunks": 1},
                serial, comm.result, m)
        profile_op(f"serial_{lbl}", serial)
        tick(f"serial {lbl}")

        def overlap(chunks, comm=comm):
            comm.plan(chunks)
            r0 = 0
            for c in chunks:
                matmul(comm.out, r0, r0 + c)
                comm.start(r0, r0 + c)
                r0 += c
            comm.wait()

        mm_full, comm_full = full.get(lbl, (None, None))
        plan = heuristic(m, k, model, cfg["contention"], cfg["rule"], cfg["align"], full_mm_us=mm_full,
                         full_comm_us=comm_full)
        ev.emit("plan", comm=lbl, plan=plan.to_json())
        splits = [("heuristic", plan.chunks)] if plan.ok else []
        splits += [(f"uniform-{u}", uniform_chunks(m, u, cfg["align"])) for u in cfg["uniform"]
                   if uniform_chunks(m, u, cfg["align"])]
        measured = []
        for split, chunks in splits:
            s = variant(f"overlap/{lbl}/{split}", _params(base, split, chunks),
                        lambda ch=chunks: overlap(ch), comm.result, m)
            if s:
                measured.append((chunks, _median(s) / 1e3))
            tick(f"overlap {lbl} {split}")
        if measured:
            cont = fit_contention(measured, model)
            ev.emit("contention", comm=lbl, **cont)
            factors = tuple(cont["pair"])
        else:
            factors = (cfg["contention"], cfg["contention"])
        skipped = unsearchable(model, cfg["align"])
        if skipped:
            ev.emit("note", text=f"{lbl}: best split not searched: {skipped}")
            tick(f"overlap {lbl} best")
            continue
        best = best_split(m, model, factors, align=cfg["align"], max_chunks=cfg["max_chunks"])
        ev.emit("best", comm=lbl, contention=list(factors), **best)
        profile_op(f"best_{lbl}", lambda ch=best["chunks"]: overlap(ch))
        if best["chunks"] not in [c for _, c in splits]:
            variant(f"overlap/{lbl}/best", _params(base, "best", best["chunks"]),
                    lambda ch=best["chunks"]: overlap(ch), comm.result, m)
        else:
            ev.emit("note", text=f"{lbl}: the best split {best['chunks']} was already measured as "
                                 f"{[sp for sp, c in splits if c == best['chunks']][0]}")
        tick(f"overlap {lbl} best")
    set_carveout(0)
    ev.emit("done")


def _params(base: dict, split: str, chunks) -> dict:
    return {"kind": "overlap", **base, "split": split, "chunks": ",".join(map(str, chunks)),
            "n_chunks": len(chunks)}


def _median(samples) -> float:
    """Median of the per-call samples; NaN for a variant that failed its check (no samples)."""
    return statistics.median(samples) if samples else float("nan")


if __name__ == "__main__":
    sys.exit(main())
