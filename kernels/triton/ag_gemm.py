"""Fused all-gather + GEMM with an HBM staging buffer (the iris "HBM-buffer" idea, for NVIDIA).

A is row-sharded: rank r holds rows [r*Ms, (r+1)*Ms) of the M x K matrix in a buffer that
every peer can address (PyTorch symmetric memory); B (K x N) is replicated; every rank
computes the full C = A @ B (M x N).

One launch holds two roles:

- *fetchers* pull remote A tiles from the peers' buffers (plain loads over NVLink) into a
  local staging buffer and publish one ready flag per group of ``K_TILES_PER_FLAG`` k-tiles
  of one M-tile;
- *GEMM programs* compute one C tile each; tiles of the local shard read A in place and
  start at once, tiles of a remote shard wait on the flags of the groups they need.

The flag protocol (the one subtle part):

- Roles come from a ticket (an atomic counter), not from the program id. The first
  ``NUM_FETCHERS`` tickets become fetchers, the rest GEMM tiles in consumption order. A
  program that waits on a flag therefore holds a ticket taken after every fetcher ticket,
  so every fetcher is already resident and running; fetchers never wait, so every flag is
  eventually set: no deadlock whatever the grid size or occupancy, and the interpreter
  (which runs programs one after another in ticket order) needs no special case.
- A fetcher stores its tile, then ``debug_barrier`` (a CTA barrier: the stores of every
  warp are done; the atomic below is issued by one thread only) and a release exchange at
  system scope writes the flag. The GEMM side reads it with an acquire atomic at system
  scope before it loads the staged tile.
- Flags hold the launch's *epoch* (1, 2, ...): a flag is ready when it equals the epoch,
  so flags need no reset between launches. The ticket counter is monotonic; each launch
  subtracts ``ticket_base = (epoch - 1) * grid``. The host wraps both before int32 runs out.
- A wait gives up after ``MAX_SPINS`` polls and raises an error word (checked by the
  host) instead of hanging the GPU.

With ``TRACE`` the kernel writes one record per task into ``trace_ptr``
(``TRACE_FIELDS`` int64 each): role, ticket, SM id, start, ready (GEMM: after its first
wait), end, in global-timer ns.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

TRACE_FIELDS = 6  # role, ticket, smid, t_start_ns, t_ready_ns, t_end_ns
ROLE_FETCH = 1
ROLE_GEMM = 2
STAGE_LAYOUTS = ("rows", "tiles")  # staged A row-major like the gathered A, or tile-contiguous
MAX_SPINS = 1 << 26  # about 1-2 s of polling on an H200 before a wait reports a timeout


def _cdiv(a: int, b: int) -> int:
    # Host-side ceil division: triton.cdiv is a constexpr_function in recent triton, and a call
    # from Python goes through its dispatcher (about 10 us; the trace decoder makes thousands).
    return -(-a // b)


@dataclass(frozen=True)
class HbmLayout:
    """Tile, flag and task bookkeeping shared by the kernel launch, the tests and the traces.

    The index maths here mirrors the kernel's exactly: fetch task ``f`` and GEMM tile ``g``
    decode to the same (source rank, M-tile, ...) on both sides.
    """

    m_shard: int
    n: int
    k: int
    world_size: int
    block_m: int
    block_n: int
    block_k: int
    k_tiles_per_flag: int
    group_m: int = 8

    @property
    def tiles_per_shard(self) -> int:
        return _cdiv(self.m_shard, self.block_m)

    @property
    def k_tiles(self) -> int:
        return _cdiv(self.k, self.block_k)

    @property
    def k_groups(self) -> int:
        return _cdiv(self.k_tiles, self.k_tiles_per_flag)

    @property
    def n_tiles(self) -> int:
        return _cdiv(self.n, self.block_n)

    @property
    def num_flags(self) -> int:
        return self.world_size * self.tiles_per_shard * self.k_groups

    @property
    def num_fetch_tasks(self) -> int:
        return (self.world_size - 1) * self.tiles_per_shard * self.k_groups

    @property
    def num_gemm_tiles(self) -> int:
        return self.world_size * self.tiles_per_shard * self.n_tiles

    def stage_elems(self, layout: str) -> int:
        """Elements of the staging buffer (the local shard's slot is allocated but unused)."""
        if layout == "rows":
            return self.world_size * self.m_shard * self.k
        return self.world_size * self.tiles_per_shard * self.k_tiles * self.block_m * self.block_k

    def flag_index(self, src: int, m_tile: int, k_group: int) -> int:
        return (src * self.tiles_per_shard + m_tile) * self.k_groups + k_group

    def fetch_task(self, f: int, rank: int) -> tuple[int, int, int]:
        """Fetch task -> (source rank, M-tile in its shard, k-group); nearest peer first."""
        per_shard = self.tiles_per_shard * self.k_groups
        step, rem = divmod(f, per_shard)
        m_tile, k_group = divmod(rem, self.k_groups)
        return (rank + 1 + step) % self.world_size, m_tile, k_group

    def gemm_tile(self, g: int, rank: int) -> tuple[int, int, int]:
        """GEMM tile -> (source rank, M-tile, N-tile): local shard first, then peers in fetch
        order; inside a shard, groups of ``group_m`` M-tiles share B tiles in L2."""
        per_shard = self.tiles_per_shard * self.n_tiles
        step, within = divmod(g, per_shard)
        per_group = self.group_m * self.n_tiles
        first_m = (within // per_group) * self.group_m
        size_m = min(self.tiles_per_shard - first_m, self.group_m)
        m_tile = first_m + (within % per_group) % size_m
        n_tile = (within % per_group) // size_m
        return (rank + step) % self.world_size, m_tile, n_tile


@triton.jit
def _now_ns(TRACE: tl.constexpr):
    if TRACE:
        t = tl.extra.cuda.globaltimer()
    else:
        t = tl.full((), 0, tl.int64)
    return t


@triton.jit
def _sm_id(TRACE: tl.constexpr):
    if TRACE:
        s = tl.extra.cuda.smid().to(tl.int64)
    else:
        s = tl.full((), 0, tl.int64)
    return s


@triton.jit
def _wait_flag(flag_ptr, epoch, err_ptr, MAX_SPINS: tl.constexpr):
    seen = tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys")
    spins = 0
    while (seen != epoch) & (spins < MAX_SPINS):
        seen = tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys")
        spins += 1
    if seen != epoch:
        tl.atomic_xchg(err_ptr, 1, sem="relaxed", scope="sys")


@triton.jit
def ag_gemm_hbm_kernel(
    a_local_ptr, peer_ptrs_ptr, stage_ptr, b_ptr, c_ptr,
    flags_ptr, ticket_ptr, err_ptr, trace_ptr,
    M_SHARD, N, K, rank, world_size, epoch, ticket_base,
    stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_FETCHERS: tl.constexpr, K_TILES_PER_FLAG: tl.constexpr, TILED_STAGE: tl.constexpr,
    EVEN_K: tl.constexpr, TRACE: tl.constexpr, MAX_SPINS: tl.constexpr,
):
    """A shards (row-major, stride K) in symmetric memory; see the module docstring."""
    ticket = tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu") - ticket_base
    tps = tl.cdiv(M_SHARD, BLOCK_M)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_groups = tl.cdiv(k_tiles, K_TILES_PER_FLAG)
    n_tiles = tl.cdiv(N, BLOCK_N)
    num_fetch = (world_size - 1) * tps * k_groups
    offs_m = tl.arange(0, BLOCK_M)
    offs_k = tl.arange(0, BLOCK_K)
    dtype = a_local_ptr.dtype.element_ty

    if ticket < NUM_FETCHERS:
        for f in range(ticket, num_fetch, NUM_FETCHERS):
            t_start = _now_ns(TRACE)
            step = f // (tps * k_groups)
            rem = f % (tps * k_groups)
            m_tile = rem // k_groups
            k_group = rem % k_groups
            src = (rank + 1 + step) % world_size
            src_ptr = tl.load(peer_ptrs_ptr + src).to(tl.pointer_type(dtype))
            rows = m_tile * BLOCK_M + offs_m
            row_ok = rows < M_SHARD
            k_end = tl.minimum((k_group + 1) * K_TILES_PER_FLAG, k_tiles)
            for kt in range(k_group * K_TILES_PER_FLAG, k_end):
                cols = kt * BLOCK_K + offs_k
                mask = row_ok[:, None] & (cols[None, :] < K)
                tile = tl.load(src_ptr + rows[:, None] * K + cols[None, :], mask=mask, other=0.0)
                if TILED_STAGE:
                    # Padded tiles: the zeros of a partial tile are stored too, so the GEMM
                    # side can read whole tiles.
                    tile_base = ((src * tps + m_tile) * k_tiles + kt) * (BLOCK_M * BLOCK_K)
                    tl.store(stage_ptr + tile_base + offs_m[:, None] * BLOCK_K + offs_k[None, :], tile)
                else:
                    dst = stage_ptr + (src * M_SHARD + rows)[:, None] * K + cols[None, :]
                    tl.store(dst, tile, mask=mask)
            # Every warp's stores must be done before one thread publishes the flag.
            tl.debug_barrier()
            flag = flags_ptr + (src * tps + m_tile) * k_groups + k_group
            tl.atomic_xchg(flag, epoch, sem="release", scope="sys")
            if TRACE:
                rec = trace_ptr + f * 6
                tl.store(rec + 0, 1)
                tl.store(rec + 1, ticket.to(tl.int64))
                tl.store(rec + 2, _sm_id(TRACE))
                tl.store(rec + 3, t_start)
                tl.store(rec + 4, t_start)
                tl.store(rec + 5, _now_ns(TRACE))
    else:
        g = ticket - NUM_FETCHERS
        if g < world_size * tps * n_tiles:
            t_start = _now_ns(TRACE)
            per_shard = tps * n_tiles
            step = g // per_shard
            within = g % per_shard
            per_group = GROUP_M * n_tiles
            first_m = (within // per_group) * GROUP_M
            size_m = tl.minimum(tps - first_m, GROUP_M)
            m_tile = first_m + (within % per_group) % size_m
            n_tile = (within % per_group) // size_m
            src = (rank + step) % world_size

            rows = m_tile * BLOCK_M + offs_m
            row_ok = rows < M_SHARD
            cols_n = n_tile * BLOCK_N + tl.arange(0, BLOCK_N)
            col_ok = cols_n < N
            if TILED_STAGE:
                k_step = tl.where(src == rank, BLOCK_K, BLOCK_M * BLOCK_K)
            else:
                k_step = BLOCK_K
            if src == rank:
                a_ptrs = a_local_ptr + rows[:, None] * K + offs_k[None, :]
            else:
                if TILED_STAGE:
                    tile0 = (src * tps + m_tile) * k_tiles * (BLOCK_M * BLOCK_K)
                    a_ptrs = stage_ptr + tile0 + offs_m[:, None] * BLOCK_K + offs_k[None, :]
                else:
                    a_ptrs = stage_ptr + (src * M_SHARD + rows)[:, None] * K + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * stride_bk + cols_n[None, :] * stride_bn
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            t_ready = t_start
            for k_group in range(0, k_groups):
                if src != rank:
                    _wait_flag(flags_ptr + (src * tps + m_tile) * k_groups + k_group, epoch, err_ptr, MAX_SPINS)
                    if k_group == 0:
                        t_ready = _now_ns(TRACE)
                k_end = tl.minimum((k_group + 1) * K_TILES_PER_FLAG, k_tiles)
                for kt in range(k_group * K_TILES_PER_FLAG, k_end):
                    if EVEN_K:
                        a = tl.load(a_ptrs + kt * k_step, mask=row_ok[:, None], other=0.0)
                        b = tl.load(b_ptrs + kt * BLOCK_K * stride_bk, mask=col_ok[None, :], other=0.0)
                    else:
                        k_ok = kt * BLOCK_K + offs_k < K
                        a = tl.load(a_ptrs + kt * k_step, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
                        b = tl.load(b_ptrs + kt * BLOCK_K * stride_bk, mask=k_ok[:, None] & col_ok[None, :],
                                    other=0.0)
                    acc = tl.dot(a, b, acc)
            out_rows = src * M_SHARD + rows
            c_ptrs = c_ptr + out_rows[:, None] * stride_cm + cols_n[None, :] * stride_cn
            tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])
            if TRACE:
                rec = trace_ptr + (num_fetch + g) * 6
                tl.store(rec + 0, 2)
                tl.store(rec + 1, ticket.to(tl.int64))
                tl.store(rec + 2, _sm_id(TRACE))
                tl.store(rec + 3, t_start)
                tl.store(rec + 4, t_ready)
                tl.store(rec + 5, _now_ns(TRACE))


@dataclass
class HbmKnobs:
    """Launch knobs of the fused kernel."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    fetchers: int = 16
    k_tiles_per_flag: int = 0  # 0: one flag per M-tile (all k-tiles)
    stage_layout: str = "rows"
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3

    def layout(self, m_shard: int, n: int, k: int, world_size: int) -> HbmLayout:
        k_tiles = _cdiv(k, self.block_k)
        kpf = k_tiles if self.k_tiles_per_flag <= 0 else min(self.k_tiles_per_flag, k_tiles)
        return HbmLayout(m_shard, n, k, world_size, self.block_m, self.block_n, self.block_k, kpf, self.group_m)


class HbmBuffer:
    """Device state of the fused kernel for one (shape, rank): staging, flags, ticket, epoch.

    ``peer_ptrs`` is an int64 tensor of every rank's shard address as mapped on this device
    (``rendezvous(...).buffer_ptrs`` on GPUs; plain ``data_ptr()``s when peers are emulated
    in one process under ``TRITON_INTERPRET=1``).
    """

    def __init__(self, a_local, peer_ptrs, b, rank: int, world_size: int, knobs: HbmKnobs, trace: bool = False):
        import torch

        if knobs.stage_layout not in STAGE_LAYOUTS:
            raise ValueError(f"stage_layout must be one of {STAGE_LAYOUTS}, got {knobs.stage_layout!r}")
        if not a_local.is_contiguous():
            raise ValueError("the A shard must be contiguous (row stride K)")
        m_shard, k = a_local.shape
        self.a_local, self.peer_ptrs, self.b = a_local, peer_ptrs, b
        self.rank, self.world_size, self.knobs = rank, world_size, knobs
        self.layout = knobs.layout(m_shard, b.shape[1], k, world_size)
        dev = a_local.device
        self.stage = torch.empty(self.layout.stage_elems(knobs.stage_layout), dtype=a_local.dtype, device=dev)
        self.flags = torch.zeros(max(1, self.layout.num_flags), dtype=torch.int32, device=dev)
        self.ticket = torch.zeros(1, dtype=torch.int32, device=dev)
        self.err = torch.zeros(1, dtype=torch.int32, device=dev)
        self.grid = knobs.fetchers + self.layout.num_gemm_tiles
        records = self.layout.num_fetch_tasks + self.layout.num_gemm_tiles
        self.trace_buf = torch.zeros((records, TRACE_FIELDS) if trace else (1, TRACE_FIELDS), dtype=torch.int64,
                                     device=dev)
        self.trace = trace
        self.epoch = 0

    def _next_epoch(self) -> int:
        # Wrap before the ticket counter (epoch * grid) nears int32's limit; the zeroing is
        # stream-ordered before the launch that uses the new epoch.
        if (self.epoch + 1) * self.grid >= 2**31 - 1:
            self.flags.zero_()
            self.ticket.zero_()
            self.epoch = 0
        self.epoch += 1
        return self.epoch

    def __call__(self, out):
        """Launch once into ``out`` (M x N). The caller makes peers' shards ready first."""
        kn, lay = self.knobs, self.layout
        epoch = self._next_epoch()
        ag_gemm_hbm_kernel[(self.grid,)](
            self.a_local, self.peer_ptrs, self.stage, self.b, out,
            self.flags, self.ticket, self.err, self.trace_buf,
            lay.m_shard, lay.n, lay.k, self.rank, self.world_size, epoch, (epoch - 1) * self.grid,
            self.b.stride(0), self.b.stride(1), out.stride(0), out.stride(1),
            BLOCK_M=kn.block_m, BLOCK_N=kn.block_n, BLOCK_K=kn.block_k, GROUP_M=kn.group_m,
            NUM_FETCHERS=kn.fetchers, K_TILES_PER_FLAG=lay.k_tiles_per_flag,
            TILED_STAGE=kn.stage_layout == "tiles", EVEN_K=lay.k % kn.block_k == 0, TRACE=self.trace,
            MAX_SPINS=MAX_SPINS, num_warps=kn.num_warps, num_stages=kn.num_stages,
        )
        return out

    def timed_out(self) -> bool:
        """True if a flag wait gave up (read after the launch finished)."""
        return bool(self.err.item())

    def trace_records(self):
        """The last launch's trace as an int64 numpy array [tasks, TRACE_FIELDS]."""
        return self.trace_buf.cpu().numpy()
