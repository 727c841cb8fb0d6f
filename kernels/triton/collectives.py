"""Two-shot all-reduces of a chunked matmul's output rows through symmetric memory, by copy
engines or by the Triton kernels of :mod:`kernels.triton.allreduce`: the ``ce``, ``ce-oneshot``,
``triton``, ``triton-pull`` and ``triton-persistent`` collectives of the mc2-split study
(``studies/mc2_split/worker.py`` says what each does and how it is timed), and of the GPU
probes in ``scripts/gpu/``.

One interface: ``out`` is the buffer the matmul writes (symmetric memory, reduced in place);
``plan(chunks)`` prepares an op of those chunks, ``start(r0, r1)`` queues the all-reduce of
rows r0:r1 behind the current stream's work (the chunk's matmul) on the collective's own
high-priority ``stream``, ``wait()`` joins it into the current stream, ``result()`` is the
reduced output. Rank r reduces block r of every chunk (:func:`row_blocks`); peers go in
rotated order, so the ranks' first pushes go to different GPUs. GPUs only (CUDA, NVLink).
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist


def row_blocks(r0: int, r1: int, world: int) -> list[tuple[int, int]]:
    """Each rank's block of rows r0:r1 (the rows it reduces in a two-shot all-reduce)."""
    edges = [r0 + (r1 - r0) * i // world for i in range(world + 1)]
    return list(zip(edges[:-1], edges[1:]))


class SymmPushComm:
    """In-place two-shot all-reduce of output rows through symmetric memory, the sums pushed
    (the ``ce`` collective of ``studies/mc2_split/worker.py``'s module doc): the buffers, peers
    and the closing barrier; subclasses move the bytes. ``staged``: the partials are pushed too,
    into a staging buffer on their owner."""

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
    ``kernels/triton/allreduce.py``). ``plan`` queues the optimistic launch on the collective's
    stream before the first matmul; each ``start`` sets the chunk's ready flag on the compute
    stream, behind its matmul, and the last one queues the fallback launch behind an event after
    that flag (it resumes whatever the optimistic launch gave up; see the kernel's module doc
    for the deadlock this avoids). A ``start`` without a plan (the cost points, the serial op)
    plans one chunk."""

    def __init__(self, m, n, dtype, device, group, ctas: int, warps: int):
        from kernels.triton.copyengine import FlagWriter

        super().__init__(m, n, dtype, device, group, ctas, warps, pull=True)
        # cuStreamWriteValue32 (no kernel, no SM) on CUDA; a one-thread kernel on ROCm
        self.write_flag = FlagWriter(device_is_cuda=True)
        self.ready = torch.zeros(m, dtype=torch.int32, device=device)  # per chunk; at most m chunks
        # per program the last chunk reduced, program 0's last signalled, then early stops and
        # fallback time-outs: absolute chunk numbers that only grow, like the counter
        self.progress = torch.zeros(ctas + 3, dtype=torch.int64, device=device)
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
        self.op_key, self.op_base = key, self.chunks
        self._launch(fallback=False)
        self.chunks += len(rows)
        self.rows, self.next = rows, 0

    def _launch(self, fallback: bool) -> None:
        """One launch for the planned op on the collective's stream; its counter base: the
        arrivals of every chunk before the op, ``world`` each."""
        with torch.cuda.stream(self.stream):
            self.kernels.pull_persistent(self.out, [self.peer_out[p] for p in self.peers], self.peer_counter,
                                         self.counter, self.ready, self.epoch, self.op_base * self.world,
                                         self.tables[self.op_key], self.ctas, self.progress, self.op_base,
                                         fallback=fallback, num_warps=self.warps)

    def stats(self) -> dict[str, int]:
        """Programs that gave their SM back early (ops that ran partly serialised) and fallback
        waits that gave up, over this collective's life (synchronises)."""
        tail = self.progress[self.ctas + 1:].tolist()
        return {"persistent_early_stops": int(tail[0]), "persistent_wait_timeouts": int(tail[1])}

    def start(self, r0: int, r1: int) -> None:
        """Mark rows r0:r1 ready behind the current stream's work (the chunk's matmul)."""
        if self.next == len(self.rows):
            self.plan([r1 - r0], r0)
        if self.rows[self.next] != (r0, r1):
            raise ValueError(f"rows {r0}:{r1} started where the plan has {self.rows[self.next]}")
        self.write_flag(self.ready, self.next, self.epoch)
        self.next += 1
        if self.next == len(self.rows):
            # every local matmul of the op is queued: the fallback launch waits for all of them
            done = torch.cuda.Event()
            done.record()
            self.stream.wait_event(done)
            self._launch(fallback=True)


def set_matmul_carveout(sms: int, blas_default) -> None:
    """Have the matmuls of this process leave ``sms`` SMs free for a collective beside them (0:
    none, and ``blas_default``, the BLAS library torch preferred before, back)."""
    # torch applies the carve-out only on its cuBLASLt path (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET);
    # a plain fp16 matmul goes through cuBLAS unless cuBLASLt is preferred. A first H200 run
    # without this switch showed no effect of the carve-out at all.
    torch._C._set_sm_carveout_experimental(sms or None)
    torch.backends.cuda.preferred_blas_library("cublaslt" if sms else blas_default)
