"""Fused all-gather + GEMM with an HBM staging buffer (the iris "HBM-buffer" idea, for NVIDIA).

A is row-sharded: rank r holds rows [r*Ms, (r+1)*Ms) of the M x K matrix in a buffer that
every peer can address (PyTorch symmetric memory); B (K x N) is replicated; every rank
computes the full C = A @ B (M x N).

One persistent launch (one program per SM) works through a queue of *tickets*, built on the
host (:meth:`HbmLayout.schedule`) and taken in order from an atomic counter. A ticket is a
run of *rows* of work (one row each in the schedules built today; the textbook stream-K that
was measured and dropped gave a program several rows):

- a *fetch* row pulls one M-tile x k-group block of a peer's shard (plain loads over NVLink)
  into a local staging buffer and publishes one ready flag for it;
- a *GEMM* row computes one C tile, or a k-range of one (stream-K: the tiles of the last,
  partial wave are cut into equal k-ranges so every SM finishes at about the same time).
  Tiles of the local shard read A in place; tiles of a peer's shard read the staging buffer
  once the flags of the k-groups they need are set.

With ``HbmKnobs(fetch="ce")`` there are no fetch rows: copy engines on side streams copy the
peers' rows into the staging buffer chunk by chunk and each chunk's flag is written by its
stream behind the copy (kernels/triton/copyengine.py); a flag may then cover several M-tiles
(``m_tiles_per_flag``), and the GEMM tiles are queued in the order the chunks land
(:meth:`HbmLayout.arrival_tiles`). The GEMM side is the same code either way.

Queue order: the first ``fetchers`` fetch rows, then the local shard's tiles with the other
fetch rows spread among them (a fetching SM is memory-bound while GEMM SMs are compute-bound,
so few fetchers at a time cost less SM time than all at once), then the peers' tiles in fetch
order, then the stream-K pieces. A and B tiles are read with the tensor-memory accelerator
(TMA descriptors) where the strides allow, else with pointer loads.

The flag protocol (the one subtle part):

- Every fetch row a GEMM row waits on sits in an earlier ticket, and a program takes a new
  ticket only when its previous one is done; a fetch row never waits. So whatever GEMM row a
  program waits in, the fetch rows it needs were taken by running programs that will finish
  them: no deadlock whatever the grid size or occupancy, and the interpreter (which runs
  programs one after another) needs no special case.
- A fetch row stores its block, then ``debug_barrier`` (a CTA barrier: the stores of every
  warp are done; the atomic below is issued by one thread only) and a release exchange at
  system scope writes the flag. The GEMM side reads it with an acquire atomic at system
  scope, then a proxy fence (the staged tile is read next by TMA, the async proxy), before
  it loads the staged tile.
- Flags hold the launch's *epoch* (1, 2, ...): a flag is ready when it is at least the epoch,
  so flags need no reset between launches. The ticket counter is monotonic; each launch
  subtracts ``ticket_base = (epoch - 1) * tickets_per_launch``. The host wraps both before
  int32 runs out.
- A wait gives up after ``MAX_SPINS`` polls and raises an error word (checked by the
  host) instead of hanging the GPU.
- Stream-K partial tiles never wait on each other: every piece writes its fp32 partial to a
  workspace, then (barrier, acq_rel atomic at GPU scope) counts itself in; the piece that
  completes the count adds the others' partials and stores the tile.

With ``TRACE`` the kernel writes one record per row into ``trace_ptr`` (``TRACE_FIELDS``
int64 each): role, ticket, SM id, start, ready (GEMM: after its flag waits), end, in
global-timer ns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import triton
import triton.language as tl

TRACE_FIELDS = 6  # role, ticket, smid, t_start_ns, t_ready_ns, t_end_ns
ROLE_FETCH = 1
ROLE_GEMM = 2
#: a schedule row: kind (ROLE_*), source rank, M-tile in its shard, N-tile (GEMM) or k-group
#: (fetch), first and end k-tile, stream-K slot (-1: the row stores its tile), pieces of its tile
ITEM_FIELDS = ("kind", "src", "m_tile", "n_tile_or_k_group", "k_begin", "k_end", "sk_slot", "sk_pieces")
STAGE_LAYOUTS = ("rows", "tiles")  # staged A row-major like the gathered A, or tile-contiguous
# Polls before a wait reports a timeout. Every legitimate wait ends within milliseconds (a fetch
# row sits in an earlier ticket; a copy-engine chunk lands within ~100 us of its copy); with
# every program polling at once a poll takes microseconds: two checks that deadlocked with
# 2^26 polls (copies within one GPU that needed the SMs the kernel held; H100, 2026-11-27) took
# most of a 300 s call. 2^22 polls is seconds at most.
MAX_SPINS = 1 << 22
FLAG_PRESET = 2**31 - 1  # flags of a buffer built with fetch=False: every wait is already satisfied


def _cdiv(a: int, b: int) -> int:
    # Host-side ceil division: triton.cdiv is a constexpr_function in recent triton, and a call
    # from Python goes through its dispatcher (about 10 us; the trace decoder makes thousands).
    return -(-a // b)


@dataclass(frozen=True)
class Schedule:
    """The ticket queue of one rank: ``rows`` [R, len(ITEM_FIELDS)] and ``offsets`` [T + 1]
    (ticket t is rows offsets[t]..offsets[t+1]), plus the stream-K workspace it needs."""

    rows: np.ndarray
    offsets: np.ndarray
    sk_tiles: int
    max_pieces: int

    @property
    def num_tickets(self) -> int:
        return len(self.offsets) - 1


@dataclass(frozen=True)
class HbmLayout:
    """Tile, flag and task bookkeeping shared by the kernel launch, the tests and the traces.

    ``fetch_task`` and ``gemm_tile`` give the orders in which the schedule lists the fetch
    rows and the GEMM tiles; they also decode traces recorded before the schedule existed.
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
    #: M-tiles per flag: 1 for the SM fetch rows; a copy-engine chunk of several M-tiles sets one
    m_tiles_per_flag: int = 1
    #: order of the fetch rows (FETCH_ORDERS): "m", each M-tile's k-groups in turn; "k", k-group g of
    #: every peer's every M-tile before k-group g + 1
    fetch_order: str = "m"

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
    def flags_per_shard_m(self) -> int:
        return _cdiv(self.tiles_per_shard, self.m_tiles_per_flag)

    @property
    def num_flags(self) -> int:
        return self.world_size * self.flags_per_shard_m * self.k_groups

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
        return (src * self.flags_per_shard_m + m_tile // self.m_tiles_per_flag) * self.k_groups + k_group

    def fetch_task(self, f: int, rank: int) -> tuple[int, int, int]:
        """Fetch task -> (source rank, M-tile in its shard, k-group); nearest peer first.

        ``fetch_order="k"`` lists the first k-group of every peer's M-tiles, then the second, ...:
        in one wave (M=1024) every remote tile then has its first k-group early, and with
        ``wait_per_group`` computes it while the later groups are still on their way, instead of
        waiting for its whole row (the committed 4-rank traces at M=1024: remote tiles start
        only when the fetch ends, about 38 us into a 127 us kernel)."""
        if self.fetch_order == "k":
            per_group = (self.world_size - 1) * self.tiles_per_shard
            k_group, rem = divmod(f, per_group)
            step, m_tile = divmod(rem, self.tiles_per_shard)
            return (rank + 1 + step) % self.world_size, m_tile, k_group
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

    def arrival_tiles(self, rank: int) -> list[tuple[int, int, int]]:
        """GEMM tiles in the order copy-engine chunks land (``fetch="ce"``): the local shard
        first (as :meth:`gemm_tile`), then chunk row j of every peer (nearest first) before
        chunk row j+1, since every peer's copies run at once on their own streams; inside a
        chunk, M fastest (tiles side by side share a B tile in L2)."""
        per_shard = self.tiles_per_shard * self.n_tiles
        out = [self.gemm_tile(g, rank) for g in range(per_shard)]
        mpf = self.m_tiles_per_flag
        for j in range(self.flags_per_shard_m):
            for step in range(1, self.world_size):
                src = (rank + step) % self.world_size
                rows = range(j * mpf, min((j + 1) * mpf, self.tiles_per_shard))
                out += [(src, m, nt) for nt in range(self.n_tiles) for m in rows]
        return out

    def schedule(self, rank: int, programs: int, fetch: bool = True, fetchers: int = 16, stream_k: int = 1,
                 sk_split: int = 0, tiles: list[tuple[int, int, int]] | None = None) -> Schedule:
        """The ticket queue of ``rank`` for ``programs`` persistent programs.

        ``fetch=False`` leaves the fetch rows out (the staging buffer is filled by the caller, or
        by copy engines); ``tiles`` gives the GEMM tiles' order (default :meth:`gemm_tile`'s).
        ``stream_k=1`` cuts the tiles of the last, partial wave (and, if the cost model below
        says so, one full wave more) into ``sk_split`` equal k-ranges (0: chosen by
        :func:`stream_k_plan`); each piece is a ticket of its own. Pieces are listed piece
        by piece (every tile's first k-range, then every tile's second, ...): pieces that run
        together then read the same k-slices of A and B, as whole tiles do, and share them
        in L2 (contiguous per-program k-ranges across tile boundaries, the textbook stream-K,
        scattered the k-offsets and ran at half speed out of DRAM on an H100).
        """
        kt, kpf = self.k_tiles, self.k_tiles_per_flag
        fetch_rows = []
        if fetch:
            for f in range(self.num_fetch_tasks):
                src, m_tile, kg = self.fetch_task(f, rank)
                fetch_rows.append((ROLE_FETCH, src, m_tile, kg, kg * kpf, min((kg + 1) * kpf, kt), -1, 1))
        if tiles is None:
            tiles = [self.gemm_tile(g, rank) for g in range(self.num_gemm_tiles)]
        n_sk, split = stream_k_plan(len(tiles), programs, min(sk_split, kt)) if stream_k and kt > 1 else (0, 1)
        split = min(split, kt)
        whole = tiles[:len(tiles) - n_sk]
        sk = tiles[len(tiles) - n_sk:]

        tickets: list[list[tuple]] = [[r] for r in fetch_rows[:fetchers]]
        rest = fetch_rows[fetchers:]
        local = [t for t in whole if t[0] == rank]
        placed = 0
        for i, (src, m_tile, n_tile) in enumerate(local):
            tickets.append([(ROLE_GEMM, src, m_tile, n_tile, 0, kt, -1, 1)])
            upto = (i + 1) * len(rest) // len(local)
            tickets += [[r] for r in rest[placed:upto]]
            placed = upto
        tickets += [[r] for r in rest[placed:]]
        tickets += [[(ROLE_GEMM, s, m, n, 0, kt, -1, 1)] for s, m, n in whole[len(local):]]
        bounds = [j * kt // split for j in range(split + 1)]
        for j in range(split):
            for t, (src, m_tile, n_tile) in enumerate(sk):
                slot, pieces = (t * split + j, split) if split > 1 else (-1, 1)
                tickets.append([(ROLE_GEMM, src, m_tile, n_tile, bounds[j], bounds[j + 1], slot, pieces)])
        rows = np.array([r for t in tickets for r in t], dtype=np.int32).reshape(-1, len(ITEM_FIELDS))
        offsets = np.concatenate([[0], np.cumsum([len(t) for t in tickets])]).astype(np.int32)
        return Schedule(rows, offsets, len(sk) if split > 1 else 0, split)


#: cost of one more stream-K piece of a tile, in tile times (its fp32 partial written, and read
#: by the tile's last piece)
SK_PIECE_COST = 0.04


def stream_k_plan(tiles: int, programs: int, split: int = 0) -> tuple[int, int]:
    """(tiles to cut, pieces per tile): the last partial wave alone or with one full wave
    more, each tile cut into ``split`` pieces (0: 1 to 8, whichever the model says is
    fastest). Model: rounds of ``programs`` pieces run in lockstep, a piece takes 1/split of
    a tile plus ``SK_PIECE_COST`` per extra piece; (0, 1) when no cut beats whole tiles."""
    best = (float(-(-tiles // programs)), 0, 1)
    for extra in (0, 1):
        n_sk = tiles % programs + extra * programs
        if not tiles % programs or n_sk > tiles:
            continue
        for s in ([split] if split else range(2, 9)):
            cost = (tiles - n_sk) // programs + -(-n_sk * s // programs) / s + SK_PIECE_COST * (s - 1)
            if cost < best[0] - 1e-9:
                best = (cost, n_sk, s)
    return (best[1], best[2]) if best[1] else (0, 1)


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
def _wait_flags(flag_ptr, count, epoch, err_ptr, MAX_FLAGS: tl.constexpr, MAX_SPINS: tl.constexpr):
    """Wait until flags [0, count) reach ``epoch``: one acquire atomic per flag, all of them
    in flight at once (one round trip per poll, however many k-groups a tile spans)."""
    offs = tl.arange(0, MAX_FLAGS)
    mask = offs < count
    seen = tl.atomic_add(flag_ptr + offs, 0, mask=mask, sem="acquire", scope="sys")
    low = tl.min(tl.where(mask, seen, epoch), axis=0)
    spins = 0
    while (low < epoch) & (spins < MAX_SPINS):
        seen = tl.atomic_add(flag_ptr + offs, 0, mask=mask, sem="acquire", scope="sys")
        low = tl.min(tl.where(mask, seen, epoch), axis=0)
        spins += 1
    if low < epoch:
        tl.atomic_xchg(err_ptr, 1, sem="relaxed", scope="sys")


@triton.jit
def _fence_async(x, FENCE: tl.constexpr):
    # Generic-proxy writes (the fetchers' stores) seen through an acquire, read next by TMA
    # (the async proxy): PTX asks for a proxy fence in between.
    if FENCE:
        tl.inline_asm_elementwise("fence.proxy.async.global;\n mov.u32 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def _mma(acc, a, a_base, a_row, row_step, col_step, a_stride, row_ok, b, off_n, col_ok, kb, ke, K,
         stride_bk, stride_bn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
         USE_TMA: tl.constexpr, EVEN_K: tl.constexpr):
    """acc += A @ B over k-tiles [kb, ke). k-tile kt of A is the BLOCK_M x BLOCK_K block at row
    ``a_row + kt*row_step``, column ``kt*col_step`` of a matrix with row stride ``a_stride``
    (row-major A: steps 0, BLOCK_K; tile-contiguous: BLOCK_M, 0); ``a`` is its TMA
    descriptor, ``a_base`` its pointer; ``b`` B's descriptor or pointer."""
    if USE_TMA:
        for kt in range(kb, ke):
            a_t = a.load([a_row + kt * row_step, kt * col_step])
            b_t = b.load([kt * BLOCK_K, off_n])
            acc = tl.dot(a_t, b_t, acc)
    else:
        offs_m = tl.arange(0, BLOCK_M)
        offs_k = tl.arange(0, BLOCK_K)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        for kt in range(kb, ke):
            a_ptrs = a_base + (a_row + kt * row_step + offs_m)[:, None] * a_stride + (kt * col_step + offs_k)[None, :]
            b_ptrs = b + (kt * BLOCK_K + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn
            if EVEN_K:
                a_t = tl.load(a_ptrs, mask=row_ok[:, None], other=0.0)
                b_t = tl.load(b_ptrs, mask=col_ok[None, :], other=0.0)
            else:
                k_ok = kt * BLOCK_K + offs_k < K
                a_t = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
                b_t = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            acc = tl.dot(a_t, b_t, acc)
    return acc


@triton.jit
def _fetch(src_ptr, stage_ptr, src, m_tile, kb, ke, M_SHARD, K, tps, k_tiles,
           BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, FETCH_K: tl.constexpr, TILED: tl.constexpr,
           EVEN_K: tl.constexpr, FETCH_EVICT: tl.constexpr):
    """Copy k-tiles [kb, ke) of M-tile ``m_tile`` of shard ``src`` into the staging buffer."""
    offs_m = tl.arange(0, BLOCK_M)
    rows = m_tile * BLOCK_M + offs_m
    row_ok = rows < M_SHARD
    if TILED:
        offs_k = tl.arange(0, BLOCK_K)
        for kt in range(kb, ke):
            cols = kt * BLOCK_K + offs_k
            tile = tl.load(src_ptr + rows[:, None] * K + cols[None, :], mask=row_ok[:, None] & (cols < K)[None, :],
                           other=0.0)
            # Padded tiles: the zeros of a partial tile are stored too, so the GEMM side can
            # read whole tiles.
            base = ((src * tps + m_tile) * k_tiles + kt) * (BLOCK_M * BLOCK_K)
            tl.store(stage_ptr + base + offs_m[:, None] * BLOCK_K + offs_k[None, :], tile)
    else:
        offs_f = tl.arange(0, FETCH_K)
        c_end = tl.minimum(ke * BLOCK_K, K)
        if EVEN_K:
            c_end = tl.multiple_of(c_end, BLOCK_K)  # the column mask is constant over 16-byte vectors
        for c0 in range(kb * BLOCK_K, c_end, FETCH_K):
            cols = tl.multiple_of(c0, BLOCK_K if BLOCK_K < FETCH_K else FETCH_K) + offs_f
            mask = row_ok[:, None] & (cols < c_end)[None, :]
            if FETCH_EVICT:  # the peer's rows are read once: keep them from pushing A/B tiles out of L2
                block = tl.load(src_ptr + rows[:, None] * K + cols[None, :], mask=mask, eviction_policy="evict_first")
            else:
                block = tl.load(src_ptr + rows[:, None] * K + cols[None, :], mask=mask)
            tl.store(stage_ptr + (src * M_SHARD + rows)[:, None] * K + cols[None, :], block, mask=mask)


@triton.jit
def _store_tile(c, c_ptr, acc, out_row, m_row, off_n, M_SHARD, N, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, TMA_STORE: tl.constexpr):
    val = acc.to(c_ptr.dtype.element_ty)
    if TMA_STORE:
        # Two half-width stores: half the epilogue's shared memory, room for a 4th stage.
        left, right = tl.split(tl.permute(tl.reshape(val, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        c.store([out_row, off_n], left)
        c.store([out_row, off_n + BLOCK_N // 2], right)
    else:
        offs_m = tl.arange(0, BLOCK_M)
        cols = off_n + tl.arange(0, BLOCK_N)
        mask = ((m_row + offs_m) < M_SHARD)[:, None] & (cols < N)[None, :]
        tl.store(c_ptr + (out_row + offs_m)[:, None] * stride_cm + cols[None, :] * stride_cn, val, mask=mask)


@triton.jit
def _sk_finish(part_ptr, first_slot, pieces, c_ptr, out_row, m_row, off_n, M_SHARD, N, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SUB_M: tl.constexpr = 32):
    """The last stream-K piece of a tile: sum every piece's fp32 partial (its own included,
    just written) and store the tile, SUB_M rows at a time (holding the accumulator and a
    whole partial at once would not fit the registers)."""
    cols = off_n + tl.arange(0, BLOCK_N)
    for r0 in tl.static_range(0, BLOCK_M, SUB_M):
        offs_r = r0 + tl.arange(0, SUB_M)
        offs = offs_r[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        total = tl.zeros((SUB_M, BLOCK_N), dtype=tl.float32)
        for j in range(0, pieces):
            total += tl.load(part_ptr + (first_slot + j).to(tl.int64) * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
        mask = ((m_row + offs_r) < M_SHARD)[:, None] & (cols < N)[None, :]
        tl.store(c_ptr + (out_row + offs_r)[:, None] * stride_cm + cols[None, :] * stride_cn,
                 total.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _fetch_row(peer_ptrs_ptr, stage_ptr, flag_ptr, src, m_tile, kb, ke, epoch, M_SHARD, K, tps, k_tiles,
               BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, FETCH_K: tl.constexpr, TILED_STAGE: tl.constexpr,
               EVEN_K: tl.constexpr, FETCH_EVICT: tl.constexpr, FLAG_BARRIER: tl.constexpr):
    """A fetch row: copy k-tiles [kb, ke) of a peer's M-tile into the stage, then publish its flag."""
    # A peer's address comes from memory, so Triton cannot see its alignment: without the hint
    # (the host checks it) every load is 2 bytes wide, 7-11 GB/s per SM.
    src_ptr = tl.multiple_of(tl.load(peer_ptrs_ptr + src).to(tl.pointer_type(stage_ptr.dtype.element_ty)), 16)
    _fetch(src_ptr, stage_ptr, src, m_tile, kb, ke, M_SHARD, K, tps, k_tiles,
           BLOCK_M, BLOCK_K, FETCH_K, TILED_STAGE, EVEN_K, FETCH_EVICT)
    # Every warp's stores must be done before one thread publishes the flag (the seed's review:
    # validation failures without it). Off only for that experiment.
    if FLAG_BARRIER:
        tl.debug_barrier()
    tl.atomic_xchg(flag_ptr, epoch, sem="release", scope="sys")


@triton.jit
def _a_source(a_local_ptr, stage_ptr, src, remote, m_tile, off_m, M_SHARD, K, tps, k_tiles,
              BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, TILED_STAGE: tl.constexpr):
    """Where a GEMM row's A comes from: the local shard in place, or the peer's staged copy
    (row-major, or tile by tile with ``TILED_STAGE``): its base, rows and row stride, the first
    row, and how far one K block moves along rows and along columns."""
    a_base = a_local_ptr
    a_rows = M_SHARD
    a_stride = K
    a_row = off_m
    row_step = 0
    col_step = BLOCK_K
    if remote:
        if TILED_STAGE:
            a_base = stage_ptr + (src * tps + m_tile) * k_tiles * (BLOCK_M * BLOCK_K)
            a_rows = k_tiles * BLOCK_M
            a_stride = BLOCK_K
            a_row = 0
            row_step = BLOCK_M
            col_step = 0
        else:
            a_base = stage_ptr + src * M_SHARD * K
    return a_base, a_rows, a_stride, a_row, row_step, col_step


@triton.jit
def _sk_publish(part_ptr, count_ptr, acc, slot, pieces, max_pieces, epoch, c_ptr, out_row, off_m, off_n, M_SHARD, N,
                stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A stream-K piece: publish its fp32 partial; the last piece of the tile adds them up."""
    part_offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(part_ptr + slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + part_offs, acc, cache_modifier=".cg")
    tl.debug_barrier()
    sk_tile = slot // max_pieces
    seen = tl.atomic_add(count_ptr + sk_tile, 1, sem="acq_rel", scope="gpu")
    if seen == epoch * pieces - 1:
        _sk_finish(part_ptr, sk_tile * max_pieces, pieces, c_ptr, out_row, off_m, off_n, M_SHARD, N,
                   stride_cm, stride_cn, BLOCK_M, BLOCK_N)


@triton.jit
def _trace_row(rec, kind, t, t_start, t_ready, TRACE: tl.constexpr):
    """A row's trace record: its role, ticket, SM, start, inputs ready and end (ns)."""
    tl.store(rec + 0, kind.to(tl.int64))
    tl.store(rec + 1, t.to(tl.int64))
    tl.store(rec + 2, _sm_id(TRACE))
    tl.store(rec + 3, t_start)
    tl.store(rec + 4, t_ready)
    tl.store(rec + 5, _now_ns(TRACE))


# Ints that differ between calls, ranks or shapes are not specialised (Triton compiles a variant
# for ints equal to 1 or divisible by 16): one compile serves every launch.
@triton.jit(do_not_specialize=["M_SHARD", "rank", "epoch", "ticket_base", "num_tickets", "max_pieces",
                               "k_tiles_per_flag", "m_tiles_per_flag"])
def ag_gemm_hbm_kernel(
    b, c,
    a_local_ptr, peer_ptrs_ptr, stage_ptr, c_ptr, rows_ptr, offsets_ptr, flags_ptr, ticket_ptr, err_ptr, trace_ptr,
    part_ptr, count_ptr,
    M_SHARD, N, K, rank, epoch, ticket_base, num_tickets, max_pieces, k_tiles_per_flag, m_tiles_per_flag,
    stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    FETCH_K: tl.constexpr, FETCH_EVICT: tl.constexpr, TILED_STAGE: tl.constexpr, USE_TMA: tl.constexpr,
    TMA_STORE: tl.constexpr,
    WAIT_PER_GROUP: tl.constexpr, FENCE_ASYNC: tl.constexpr, EVEN_K: tl.constexpr, TRACE: tl.constexpr,
    MAX_FLAGS: tl.constexpr, MAX_SPINS: tl.constexpr, FLAG_BARRIER: tl.constexpr = True,
):
    """``b``, ``c``: TMA descriptors (``USE_TMA``, ``TMA_STORE``) or the tensors; ``*_ptr``:
    plain pointers; see the module docstring."""
    tps = tl.cdiv(M_SHARD, BLOCK_M)
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_groups = tl.cdiv(k_tiles, k_tiles_per_flag)
    fpm = tl.cdiv(tps, m_tiles_per_flag)  # flags per shard along M
    offs_m = tl.arange(0, BLOCK_M)

    t = tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu") - ticket_base
    while t < num_tickets:
        row_begin = tl.load(offsets_ptr + t)
        row_end = tl.load(offsets_ptr + t + 1)
        for r in range(row_begin, row_end):
            t_start = _now_ns(TRACE)
            item = rows_ptr + r * 8
            kind = tl.load(item + 0)
            src = tl.load(item + 1)
            m_tile = tl.load(item + 2)
            nk = tl.load(item + 3)
            kb = tl.load(item + 4)
            ke = tl.load(item + 5)
            t_ready = t_start
            if kind == 1:  # ROLE_FETCH: nk is the k-group
                _fetch_row(peer_ptrs_ptr, stage_ptr, flags_ptr + (src * fpm + m_tile // m_tiles_per_flag) * k_groups + nk,
                           src, m_tile, kb, ke, epoch, M_SHARD, K, tps, k_tiles,
                           BLOCK_M, BLOCK_K, FETCH_K, TILED_STAGE, EVEN_K, FETCH_EVICT, FLAG_BARRIER)
            else:  # ROLE_GEMM: nk is the N-tile
                slot = tl.load(item + 6)
                pieces = tl.load(item + 7)
                off_m = m_tile * BLOCK_M
                off_n = nk * BLOCK_N
                row_ok = off_m + offs_m < M_SHARD
                col_ok = off_n + tl.arange(0, BLOCK_N) < N
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                # One matrix-multiply loop for the local shard and a peer's staged copy (a loop
                # per source would double the pipeline's shared memory), so A's TMA descriptor
                # is made here, per row.
                remote = src != rank
                a_base, a_rows, a_stride, a_row, row_step, col_step = _a_source(
                    a_local_ptr, stage_ptr, src, remote, m_tile, off_m, M_SHARD, K, tps, k_tiles,
                    BLOCK_M, BLOCK_K, TILED_STAGE)
                g_first = kb // k_tiles_per_flag
                tile_flags = flags_ptr + (src * fpm + m_tile // m_tiles_per_flag) * k_groups
                segments = 1
                if remote:
                    if WAIT_PER_GROUP:
                        # Compute each k-group as soon as it lands (a pipeline refill per group).
                        segments = tl.cdiv(ke, k_tiles_per_flag) - g_first
                    else:
                        _wait_flags(tile_flags + g_first, tl.cdiv(ke, k_tiles_per_flag) - g_first, epoch, err_ptr,
                                    MAX_FLAGS, MAX_SPINS)
                        _fence_async(kb, FENCE_ASYNC)
                        t_ready = _now_ns(TRACE)
                if USE_TMA:
                    a = tl.make_tensor_descriptor(a_base, shape=[a_rows, a_stride], strides=[a_stride, 1],
                                                  block_shape=[BLOCK_M, BLOCK_K])
                else:
                    a = a_base
                for s in range(segments):
                    seg_kb = kb
                    seg_ke = ke
                    if remote:
                        if WAIT_PER_GROUP:
                            g = g_first + s
                            _wait_flags(tile_flags + g, 1, epoch, err_ptr, MAX_FLAGS, MAX_SPINS)
                            _fence_async(g, FENCE_ASYNC)
                            if s == 0:
                                t_ready = _now_ns(TRACE)
                            seg_kb = tl.maximum(kb, g * k_tiles_per_flag)
                            seg_ke = tl.minimum(ke, (g + 1) * k_tiles_per_flag)
                    acc = _mma(acc, a, a_base, a_row, row_step, col_step, a_stride, row_ok, b, off_n, col_ok,
                               seg_kb, seg_ke, K, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, EVEN_K)
                out_row = src * M_SHARD + off_m
                if pieces == 1:
                    _store_tile(c, c_ptr, acc, out_row, off_m, off_n, M_SHARD, N, stride_cm, stride_cn,
                                BLOCK_M, BLOCK_N, TMA_STORE)
                else:
                    _sk_publish(part_ptr, count_ptr, acc, slot, pieces, max_pieces, epoch, c_ptr, out_row, off_m,
                                off_n, M_SHARD, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)
            if TRACE:
                _trace_row(trace_ptr + r * 6, kind, t, t_start, t_ready, TRACE)
        t = tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu") - ticket_base


@dataclass
class HbmKnobs:
    """Launch knobs of the fused kernel."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    fetchers: int = 16  # fetch rows at the head of the queue; the others spread among local tiles
    k_tiles_per_flag: int = -1  # per flag and fetch row; 0: a whole M-tile; -1: by shape (layout)
    stage_layout: str = "rows"
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 4
    programs: int = 0  # persistent programs; 0: one per SM
    stream_k: int = 1  # 0: whole tiles only; 1: the partial last wave cut into k-ranges (stream_k_plan)
    sk_split: int = 0  # stream-K pieces per tile; 0: chosen by stream_k_plan
    tma: bool = True  # TMA descriptors for A, B (and C) where strides and alignment allow
    tma_store: bool = True
    wait_per_group: bool = False  # GEMM rows compute each k-group as it lands (else wait for all first)
    fetch_k: int = 256  # columns per load of a fetch row
    fetch_evict: bool = False  # fetch rows load the peer's rows with an evict-first L2 policy
    # The CTA barrier between a fetch row's stores and its flag release. False only for the
    # seed review's experiment (how often the check fails without it): never for results.
    flag_barrier: bool = True
    # Who moves the peers' rows into staging: "sm", the kernel's own fetch rows (SM loads over
    # NVLink, the seed's design); "ce", copy engines on side streams, a flag per chunk written
    # by the stream behind its copy (kernels/triton/copyengine.py), no SM taken.
    fetch: str = "sm"
    ce_chunks: int = 0  # fetch="ce": chunks (row blocks of whole M-tiles) per peer shard; 0: by shape
    fetch_order: str = "m"  # fetch rows M-tile by M-tile ("m") or k-group by k-group ("k"): HbmLayout.fetch_task

    def layout(self, m_shard: int, n: int, k: int, world_size: int, programs: int = 132) -> HbmLayout:
        """``k_tiles_per_flag=-1``: when every tile has its own program (one wave), the fetch
        is the critical path (remote tiles wait for it), so it is cut into many small rows
        (``SMALL_FETCH_K_TILES``, 128 KiB at 128 x 64 fp16 tiles) that idle programs take at
        once; otherwise one row per M-tile (whole 2 MiB rows at K=8192; each row's flag release
        costs a system-scope fence, and there is time to spare before remote tiles run).
        ``fetch="ce"``: whole rows, one k-group; row blocks by :func:`ce_granularity`."""
        k_tiles = _cdiv(k, self.block_k)
        one_wave = world_size * _cdiv(m_shard, self.block_m) * _cdiv(n, self.block_n) <= programs
        mpf = 1
        if self.fetch == "ce":
            kpf, mpf = k_tiles, ce_granularity(_cdiv(m_shard, self.block_m), one_wave, self.ce_chunks)
        else:
            kpf = self.k_tiles_per_flag
            if kpf < 0:
                kpf = SMALL_FETCH_K_TILES if one_wave else 0
            kpf = k_tiles if kpf == 0 else min(kpf, k_tiles)
        return HbmLayout(m_shard, n, k, world_size, self.block_m, self.block_n, self.block_k, kpf, self.group_m, mpf,
                         self.fetch_order)


#: k-tiles per fetch row when the fetch is on the critical path (see HbmKnobs.layout); on an
#: H100 at M=1024, N=3584, K=8192, world size 2: 8 -> 1.20x cuBLAS's time, 16 -> 1.26x, 32 -> 1.36x
SMALL_FETCH_K_TILES = 8
FETCH_MODES = ("sm", "ce")
FETCH_ORDERS = ("m", "k")
#: copy-engine chunks per peer shard when the tiles take several waves (the local shard's
#: tiles run first, so the first chunk has that long to land)
CE_CHUNKS_PER_PEER = 4


def ce_granularity(tiles_per_shard: int, one_wave: bool, chunks: int = 0) -> int:
    """M-tiles per flag (and per copy) of the copy-engine fetch: every chunk is whole rows,
    one contiguous block (each chunk costs the host a copy and a flag write; a chunk cut along
    K would also be a 2-D copy: see kernels/triton/copyengine.py). ``chunks`` row blocks per
    peer shard; by default one per M-tile when the tiles fit one wave (remote tiles wait from
    the start, each for its own rows only), else ``CE_CHUNKS_PER_PEER`` (the local shard's
    tiles run first, so the first block has that long to land)."""
    chunks = chunks or (tiles_per_shard if one_wave else CE_CHUNKS_PER_PEER)
    return _cdiv(tiles_per_shard, min(chunks, tiles_per_shard))


def _num_sms(device) -> int:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter runs programs one after another; a few exercise the queue


def _set_scratch_allocator() -> None:
    """Device-side TMA descriptors (A's, made per GEMM row) live in global scratch memory
    that Triton asks the host for at launch."""
    import torch

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, dtype=torch.int8, device="cuda")

    if os.environ.get("TRITON_INTERPRET") != "1":
        triton.set_allocator(alloc)


def _tma_ok(*tensors) -> bool:
    """TMA needs 16-byte aligned bases and row strides and a contiguous last dimension."""
    for t in tensors:
        esize = t.element_size()
        if t.data_ptr() % 16 or t.stride(-1) != 1 or any((s * esize) % 16 for s in t.stride()[:-1]):
            return False
    return True


class HbmBuffer:
    """Device state of the fused kernel for one (shape, rank): staging, flags, queue, epoch.

    ``peer_ptrs`` is an int64 tensor of every rank's shard address as mapped on this device
    (``rendezvous(...).buffer_ptrs`` on GPUs; plain ``data_ptr()``s of local buffers when
    peers are emulated in one process). ``fetch=False`` builds the GEMM path alone: no fetch
    rows, every flag already set; the caller fills the staging buffer (:meth:`stage_rows`).
    ``knobs.fetch="ce"``: copy engines fill the staging buffer (kernels/triton/copyengine.py)
    from ``peers``, every rank's shard as a tensor on this device.
    """

    def __init__(self, a_local, peer_ptrs, b, rank: int, world_size: int, knobs: HbmKnobs, trace: bool = False,
                 fetch: bool = True, peers=None):
        import torch

        from kernels.triton import copyengine

        if knobs.stage_layout not in STAGE_LAYOUTS:
            raise ValueError(f"stage_layout must be one of {STAGE_LAYOUTS}, got {knobs.stage_layout!r}")
        if knobs.fetch not in FETCH_MODES:
            raise ValueError(f"fetch must be one of {FETCH_MODES}, got {knobs.fetch!r}")
        if knobs.fetch_order not in FETCH_ORDERS:
            raise ValueError(f"fetch_order must be one of {FETCH_ORDERS}, got {knobs.fetch_order!r}")
        ce = fetch and knobs.fetch == "ce" and world_size > 1
        if not a_local.is_contiguous():
            raise ValueError("the A shard must be contiguous (row stride K)")
        m_shard, k = a_local.shape
        if world_size * m_shard * k >= 2**31:
            raise ValueError("M x K must stay under 2^31 elements (the kernel indexes A with int32)")
        if world_size > 1 and bool((peer_ptrs.cpu() % 16).any()):
            raise ValueError("every peer's shard must be 16-byte aligned (the fetch rows load 16 bytes at a time)")
        self.a_local, self.peer_ptrs, self.b = a_local, peer_ptrs, b
        self.rank, self.world_size, self.knobs = rank, world_size, knobs
        dev = a_local.device
        self.programs = knobs.programs or _num_sms(dev)
        self.layout = lay = knobs.layout(m_shard, b.shape[1], k, world_size, self.programs)
        sched = lay.schedule(rank, self.programs, fetch=fetch and not ce, fetchers=knobs.fetchers,
                             stream_k=knobs.stream_k, sk_split=knobs.sk_split,
                             tiles=lay.arrival_tiles(rank) if ce else None)
        self.schedule = sched
        self.rows = torch.from_numpy(sched.rows.reshape(-1)).to(dev)
        self.offsets = torch.from_numpy(sched.offsets).to(dev)
        self.tickets_per_launch = sched.num_tickets + self.programs  # each program's last ticket finds none
        stage_elems = lay.stage_elems(knobs.stage_layout) if world_size > 1 else 1
        self.stage = torch.empty(stage_elems, dtype=a_local.dtype, device=dev)
        self.flag_reset = 0 if fetch else FLAG_PRESET
        self.flags = torch.full((max(1, lay.num_flags),), self.flag_reset, dtype=torch.int32, device=dev)
        self.ticket = torch.zeros(1, dtype=torch.int32, device=dev)
        self.err = torch.zeros(1, dtype=torch.int32, device=dev)
        self.part = torch.empty(max(1, sched.sk_tiles * sched.max_pieces) * lay.block_m * lay.block_n,
                                dtype=torch.float32, device=dev)
        self.counts = torch.zeros(max(1, sched.sk_tiles), dtype=torch.int32, device=dev)
        # ROCm: no TMA descriptors and no global timer / SM id reads (NVIDIA-only), so pointer
        # loads and no per-program trace; the flag protocol is the same
        rocm = copyengine.is_rocm()
        trace = trace and not rocm
        self.trace_buf = torch.zeros((len(sched.rows), TRACE_FIELDS) if trace else (1, TRACE_FIELDS),
                                     dtype=torch.int64, device=dev)
        self.trace = trace
        self.epoch = 0
        self.use_tma = knobs.tma and not rocm and _tma_ok(a_local, b) and (world_size == 1 or _tma_ok(self.stage))
        if self.use_tma:
            from triton.tools.tensor_descriptor import TensorDescriptor

            _set_scratch_allocator()
            self._b_arg = TensorDescriptor.from_tensor(b, [lay.block_k, lay.block_n])
        else:
            self._b_arg = b
        self._c_desc: tuple = (None, None)
        self.ce = copyengine.CopyEngineFetch(self, peers if peers is not None else []) if ce else None
        self.wait_per_group = knobs.wait_per_group

    @property
    def mechanism(self) -> dict[str, str]:
        """How this kernel moves A and computes (the study's mechanism tags)."""
        loads = "TMA descriptors" if self.use_tma else "pointer loads (no TMA)"
        if self.world_size == 1 or self.flag_reset == FLAG_PRESET:
            fetch = "none (staged beforehand)" if self.world_size > 1 else "none (one rank)"
        elif self.ce is not None:
            fetch = self.ce.mechanism
        else:
            rows = int((self.schedule.rows[:, 0] == ROLE_FETCH).sum())
            fetch = (f"SM loads over NVLink: {rows} fetch rows of the same persistent kernel "
                     f"({self.knobs.fetchers} at the head of its queue), flags by release atomics")
        sms = "0 (copy engines)" if self.ce is not None else (
            "shared: any of the kernel's programs takes fetch rows" if self.flag_reset != FLAG_PRESET else "0")
        return {"fetch": fetch, "gemm": f"persistent Triton GEMM, local shard first, {loads}",
                "sms_for_comm": sms}

    def stage_rows(self, src: int):
        """The staging buffer's rows for shard ``src`` (row-major layout only)."""
        if self.knobs.stage_layout != "rows":
            raise ValueError("stage_rows needs stage_layout='rows'")
        ms, k = self.layout.m_shard, self.layout.k
        return self.stage.view(self.world_size * ms, k)[src * ms:(src + 1) * ms]

    def _next_epoch(self) -> int:
        # Wrap before the ticket counter (epoch * tickets) nears int32's limit; the zeroing is
        # stream-ordered before the launch that uses the new epoch.
        if (self.epoch + 1) * self.tickets_per_launch >= 2**31 - 1:
            self.flags.fill_(self.flag_reset)
            self.ticket.zero_()
            self.counts.zero_()
            self.epoch = 0
        self.epoch += 1
        return self.epoch

    def _c_arg(self, out):
        lay = self.layout
        tma_store = (self.use_tma and self.knobs.tma_store and lay.m_shard % lay.block_m == 0 and _tma_ok(out))
        if not tma_store:
            return out, False
        if self._c_desc[0] != (out.data_ptr(), tuple(out.shape), tuple(out.stride())):
            from triton.tools.tensor_descriptor import TensorDescriptor

            self._c_desc = ((out.data_ptr(), tuple(out.shape), tuple(out.stride())),
                            TensorDescriptor.from_tensor(out, [lay.block_m, lay.block_n // 2]))
        return self._c_desc[1], True

    def launch_args(self, out) -> tuple[tuple, dict]:
        """Positional and keyword arguments of one launch into ``out`` (advances the epoch)."""
        kn, lay = self.knobs, self.layout
        epoch = self._next_epoch()
        c, tma_store = self._c_arg(out)
        args = (self._b_arg, c, self.a_local, self.peer_ptrs, self.stage, out, self.rows, self.offsets, self.flags, self.ticket,
                self.err, self.trace_buf, self.part, self.counts,
                lay.m_shard, lay.n, lay.k, self.rank, epoch, (epoch - 1) * self.tickets_per_launch,
                self.schedule.num_tickets, self.schedule.max_pieces, lay.k_tiles_per_flag, lay.m_tiles_per_flag,
                self.b.stride(0), self.b.stride(1), out.stride(0), out.stride(1))
        kwargs = dict(BLOCK_M=kn.block_m, BLOCK_N=kn.block_n, BLOCK_K=kn.block_k,
                      FETCH_K=kn.fetch_k, FETCH_EVICT=kn.fetch_evict, TILED_STAGE=kn.stage_layout == "tiles",
                      USE_TMA=self.use_tma,
                      TMA_STORE=tma_store, WAIT_PER_GROUP=self.wait_per_group,
                      FENCE_ASYNC=self.use_tma and os.environ.get("TRITON_INTERPRET") != "1",
                      EVEN_K=lay.k % kn.block_k == 0, TRACE=self.trace and len(self.trace_buf) == len(self.schedule.rows), MAX_FLAGS=triton.next_power_of_2(lay.k_groups),
                      MAX_SPINS=MAX_SPINS, FLAG_BARRIER=kn.flag_barrier,
                      num_warps=kn.num_warps, num_stages=kn.num_stages)
        return args, kwargs

    def __call__(self, out):
        """Launch once into ``out`` (M x N). The caller makes peers' shards ready first.
        Copy-engine fetch: the copies are queued first, from where the call starts, and run
        while the host launches the kernel (see kernels/triton/copyengine.py)."""
        args, kwargs = self.launch_args(out)
        if self.ce is not None:
            self.ce.mark_start()
            self.ce.issue(self.epoch)
        ag_gemm_hbm_kernel[(self.programs,)](*args, **kwargs)
        if self.ce is not None:
            self.ce.join()
        return out

    def timed_out(self) -> bool:
        """True if a flag wait gave up (read after the launch finished)."""
        return bool(self.err.item())

    def trace_records(self):
        """The last launch's trace, one int64 row per schedule row: the TRACE_FIELDS, then the
        row's ITEM_FIELDS (what it computed)."""
        if not self.trace:
            raise ValueError("this buffer records no trace (built with trace=False)")
        return np.concatenate([self.trace_buf.cpu().numpy(), self.schedule.rows.astype(np.int64)], axis=1)
