"""SM-lean two-shot all-reduces over symmetric memory: one fixed-grid Triton launch per chunk.

The mc2-split study's ``triton`` and ``triton-pull`` collectives reduce output rows of a
chunked matmul while the next chunk's matmul runs. NCCL's all-reduce there either waits for
the matmul to end (its CTA clusters find no free SMs) or slows down when limited; copy engines
take no SMs but reach only about 190 GB/s into each of 4 GPUs. These kernels move the data
with a small fixed grid (one CTA per SM of the matmul's carve-out).

Two-shot push (``two_shot``), for one chunk of rows split into W blocks (rank r reduces block r):

1. every program stores its share of this rank's partial rows of peer p's block into p's
   staging buffer (``stage[rank]`` on p), for every peer; then (all its warps' stores done:
   ``debug_barrier``) adds 1 to every peer's arrival counter with a release atomic at system
   scope;
2. every program waits (acquire, system scope) until this rank's counter reaches ``target``
   (every program of every peer has arrived for this chunk), sums its share of the block and
   the W-1 staged partials in float32, writes the sum into the block and stores it into
   every peer's output.

Only stores cross NVLink there: a store is posted, where a remote load holds its CTA for a
link round trip. But per byte of its partial a rank's HBM sees about 3.5 bytes (the pushes
read 0.75, staged rows land 0.75, the sum reads 1 and writes 0.25, the peers' sums land
0.75), beside a matmul that shares that memory system.

Two-shot pull (``two_shot_pull``): the launch starts after the chunk's matmul, so it first
signals every peer (one program, one arrival per peer: nothing was written yet), waits for
every peer's signal, then *loads* the peers' partial rows of its block over NVLink, sums and
pushes the sum into every output as above. No staging buffer, one HBM read of every partial
and one write of every sum: 2 bytes per byte; the loads keep 3 x 16 KB per program in flight
to cover the link's round trip. Overwriting a peer's partial rows with the sum is safe: only
this rank reads them, and each program stores an offset only after loading it.

Persistent pull (``pull_persistent``): the pull for every chunk of an op in one launch, queued
before the first matmul. The compute stream sets chunk c's ready flag behind its matmul
(cuStreamWriteValue32: no kernel); program 0 waits for it, then signals every peer *and this
rank* (the launch runs beside the matmul, so this rank's own rows are ready only then); every
program waits for all W arrivals and pulls the chunk as above. A chunk then costs no launch,
ramp-up or tail.

Why it could hang, and what keeps it from hanging: the launch's programs sit on SMs while they
wait for matmuls queued *after* them on another stream, an order CUDA cannot see. A matmul that
needs the SMs these programs hold (cuBLAS can pick persistent and stream-K kernels sized to the
SMs it believes free, in clusters of 2 that need two free SMs in one GPC; without a carve-out it
believes all are) then waits for them while they wait for its flag: a deadlock that only the
wait's poll limit (``MAX_SPINS``, about a minute) broke, after which the sum was made of rows
not yet written. That is what the committed runs show: at world size 2 the heuristic split
without a carve-out (its 640- and 896-row chunks, partial waves) failed its check in 3 of 5
runs, 2 of which then stalled past their 120 s limit (traces/mc2-split/README.md); none of the
3 runs at world size 4 failed. A one-GPU test forces the cycle (every SM holds the launch's
programs; studies/mc2_split/emulate.py's ``starved_persistent``). So the op now takes two
launches on the collective's stream: the *optimistic* one, queued before the first matmul,
whose every wait gives up after ``YIELD_SPINS`` polls (a few ms) and then *stops* the program
(its SMs go back to the matmul), and the *fallback* one, queued behind an event after the last
matmul (an order CUDA sees: it starts only when every local matmul is done), which resumes every
program where it stopped: ``progress`` holds, per program, the last chunk it reduced and, for
program 0, the last one it signalled, as absolute chunk numbers (they only grow, like the
counter), so nothing is signalled or reduced twice. When the optimistic launch finished the op,
the fallback finds nothing to do and exits (a few us at the op's end). ``progress[grid]`` counts
the programs that stopped early (the op then ran partly serialised: slower, still correct);
``progress[grid + 2]`` the waits of the fallback that gave up after ``MAX_SPINS`` (a lost
arrival: the check then fails).

Counters only grow (int64): the host passes the cumulative target, ``chunks so far x peers x
grid`` (pull: ``chunks so far x peers``; persistent: ``x W``), so nothing is reset between
chunks or calls. One counter per rank (not one per peer) is enough because a peer's arrival
for chunk i+1 comes from its launch i+1, which starts only after its launch i has seen every
peer's arrival for chunk i: no peer runs two chunks ahead of another, so a sum that reaches
the target means every peer has arrived for this chunk (persistent: program 0 signals chunk c+1 only after its
wait for chunk c). A variant that signalled from the compute stream, where nothing holds a fast
rank back, broke exactly this: see traces/mc2-split/README.md.

One launch replaces the push kernel, barrier kernel and reduce kernel of a three-launch
version: fitted per-chunk fixed cost 10-27 us against 17-41 us on 4 H200s. A wait gives up
after ``MAX_SPINS`` polls rather than hang the GPU; the caller's check against a reference
then fails.

The caller gives plain tensors: a peer's buffer is a tensor on this device whose pointer
addresses the peer's memory (``torch.distributed._symmetric_memory``), so the kernel knows
nothing of ranks; the tests emulate peers with local tensors under Triton's interpreter, one
phase at a time (``phases``), since the interpreter runs programs one after another.
"""

from __future__ import annotations

import triton
import triton.language as tl

ELEMS_PER_THREAD = 16  # per program step: two 16-byte stores per thread in fp16
NUM_WARPS = 8
# Polls before a wait gives up (seconds of polling): longer than a peer's host may take to reach
# its launch, e.g. compiling a kernel for a new chunk shape while this rank already waits for it.
MAX_SPINS = 1 << 26
#: polls before a wait of the persistent all-reduce's optimistic launch stops its program (a
#: few ms: longer than a matmul chunk and the ranks' skew, far shorter than a stall)
YIELD_SPINS = 1 << 13
# Arguments that change from call to call are not specialised on: a new value (divisible by 16
# or not) would otherwise compile a new kernel on one rank while its peers wait for it
# (``do_not_specialize`` below).


@triton.jit
def _wait_at_least(counter, target, MAX_SPINS: tl.constexpr):
    """Poll ``counter`` (acquire, system scope) until it reaches ``target`` or MAX_SPINS polls
    pass; returns the last value seen."""
    seen = tl.atomic_add(counter, 0, sem="acquire", scope="sys")
    spins = 0
    while (seen < target) & (spins < MAX_SPINS):
        seen = tl.atomic_add(counter, 0, sem="acquire", scope="sys")
        spins += 1
    return seen


@triton.jit
def _sum_and_push(block, partials, out_dsts, offs, mask, NPEERS: tl.constexpr, REMOTE: tl.constexpr,
                  LIVE: tl.constexpr):
    """Sum ``block`` and the partials at ``offs`` in float32; store the sum into ``block`` and
    every output. REMOTE: the partials are peers' memory read over NVLink; LIVE: ``block`` is
    written by a kernel running beside this one. Either is loaded with .cg (not from this SM's
    L1, which may hold the same addresses from earlier); staged or finished rows stream
    (evict_first)."""
    if LIVE:
        acc = tl.load(block + offs, mask=mask, cache_modifier=".cg").to(tl.float32)
    else:
        acc = tl.load(block + offs, mask=mask, eviction_policy="evict_first").to(tl.float32)
    for j in tl.static_range(NPEERS):
        if REMOTE:
            acc += tl.load(partials[j] + offs, mask=mask, cache_modifier=".cg").to(tl.float32)
        else:
            acc += tl.load(partials[j] + offs, mask=mask, eviction_policy="evict_first").to(tl.float32)
    total = acc.to(block.dtype.element_ty)
    tl.store(block + offs, total, mask=mask, cache_modifier=".cs")
    for j in tl.static_range(NPEERS):
        tl.store(out_dsts[j] + offs, total, mask=mask, cache_modifier=".cs")


@triton.jit
def _signal(arrive, NPEERS: tl.constexpr):
    """One arrival at every peer's counter (release, system scope: what this rank wrote before
    is visible to the peer that sees it)."""
    for j in tl.static_range(NPEERS):
        tl.atomic_add(arrive[j], 1, sem="release", scope="sys")


@triton.jit
def _sum_rows(block, partials, out_dsts, first, numel, NPEERS: tl.constexpr, REMOTE: tl.constexpr,
              LIVE: tl.constexpr, BLOCK: tl.constexpr):
    """This program's share of :func:`_sum_and_push` over ``numel`` elements from offset
    ``first``: BLOCK at a time, strided by the grid, so the programs cover the rows between them."""
    pid, nprog = tl.program_id(0), tl.num_programs(0)
    for start in range(pid * BLOCK, numel, nprog * BLOCK):
        rel = start + tl.arange(0, BLOCK)
        _sum_and_push(block, partials, out_dsts, first + rel, rel < numel, NPEERS, REMOTE, LIVE)


@triton.jit
def _reduce_when_arrived(my_counter, target, block, partials, out_dsts, numel, NPEERS: tl.constexpr,
                         REMOTE: tl.constexpr, MAX_SPINS: tl.constexpr, BLOCK: tl.constexpr):
    """The two-shot kernels' second half: wait until every peer has arrived for this chunk
    (``target``), then sum this program's share of the block and push it to every peer."""
    _wait_at_least(my_counter, target, MAX_SPINS)
    tl.debug_barrier()
    _sum_rows(block, partials, out_dsts, 0, numel, NPEERS, REMOTE, False, BLOCK)


@triton.jit(do_not_specialize=["target"])
def _two_shot_kernel(srcs, stage_dsts, push_numels, arrive, my_counter, target,
                     block, partials, out_dsts, numel,
                     NPEERS: tl.constexpr, PUSH: tl.constexpr, REDUCE: tl.constexpr,
                     MAX_SPINS: tl.constexpr, BLOCK: tl.constexpr):
    pid, nprog = tl.program_id(0), tl.num_programs(0)
    if PUSH:
        # Every program walks every peer: the peers' transfers interleave instead of one
        # peer waiting for another's tail.
        for j in tl.static_range(NPEERS):
            src, dst, n = srcs[j], stage_dsts[j], push_numels[j]
            for start in range(pid * BLOCK, n, nprog * BLOCK):
                offs = start + tl.arange(0, BLOCK)
                mask = offs < n
                tl.store(dst + offs, tl.load(src + offs, mask=mask, eviction_policy="evict_first"), mask=mask,
                         cache_modifier=".cs")
        # every warp's stores are done before one thread publishes them
        tl.debug_barrier()
        _signal(arrive, NPEERS)
    if REDUCE:
        _reduce_when_arrived(my_counter, target, block, partials, out_dsts, numel, NPEERS, False, MAX_SPINS, BLOCK)


@triton.jit(do_not_specialize=["target"])
def _two_shot_pull_kernel(arrive, my_counter, target, block, peer_blocks, out_dsts, numel,
                          NPEERS: tl.constexpr, SIGNAL: tl.constexpr, REDUCE: tl.constexpr,
                          MAX_SPINS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if SIGNAL:
        # The launch starts after the chunk's matmul (stream order), so this rank's rows are
        # final: one arrival per peer says so. Nothing was written to a peer before it, so one
        # program signals for the grid.
        if pid == 0:
            _signal(arrive, NPEERS)
    if REDUCE:
        _reduce_when_arrived(my_counter, target, block, peer_blocks, out_dsts, numel, NPEERS, True, MAX_SPINS, BLOCK)


@triton.jit(do_not_specialize=["epoch", "base", "first", "count", "chunk_base"])
def _pull_persistent_kernel(out, peer_outs, arrive, my_counter, ready, epoch, base, table, first, count, n_cols,
                            progress, chunk_base,
                            NPEERS: tl.constexpr, SIGNAL: tl.constexpr, REDUCE: tl.constexpr,
                            SPINS: tl.constexpr, FALLBACK: tl.constexpr, BLOCK: tl.constexpr):
    pid, nprog = tl.program_id(0), tl.num_programs(0)
    c = first
    stop = 0
    while (c < first + count) & (stop == 0):
        if SIGNAL:
            if pid == 0:
                if chunk_base + c >= tl.load(progress + nprog):  # not signalled by an earlier launch
                    # this rank's matmul of chunk c is done once the compute stream has set its flag
                    if _wait_at_least(ready + c, epoch, SPINS) >= epoch:
                        _signal(arrive, NPEERS)
                        # this rank's own arrival too: its programs must not sum rows its matmul still writes
                        tl.atomic_add(my_counter, 1, sem="release", scope="sys")
                        tl.store(progress + nprog, chunk_base + c + 1)
                    else:
                        stop = 1
        if REDUCE:
            if (stop == 0) & (chunk_base + c >= tl.load(progress + pid)):  # not reduced by an earlier launch
                target = base + (c + 1) * (NPEERS + 1)
                if _wait_at_least(my_counter, target, SPINS) >= target:
                    tl.debug_barrier()
                    row0 = tl.load(table + 2 * c).to(tl.int64)
                    numel = tl.load(table + 2 * c + 1).to(tl.int64) * n_cols
                    _sum_rows(out, peer_outs, peer_outs, row0 * n_cols, numel, NPEERS, True, True, BLOCK)
                    tl.debug_barrier()  # every warp's loads of this chunk done before it counts as reduced
                    tl.store(progress + pid, chunk_base + c + 1)
                else:
                    stop = 1
        c += 1
    if stop:
        # optimistic launch: this program gave its SM back; the fallback launch resumes it.
        # Fallback: a wait gave up after MAX_SPINS polls (a lost arrival; the check fails).
        tl.atomic_add(progress + nprog + 1 + FALLBACK, 1, sem="relaxed", scope="gpu")


def two_shot(pushes, arrive, my_counter, target: int, block, partials, out_dsts, ctas: int,
             num_warps: int = NUM_WARPS, phases: str = "both") -> None:
    """One chunk of the two-shot all-reduce (see the module doc) in one launch of ``ctas``
    programs of ``num_warps`` warps on the current stream.

    ``pushes``: per peer, (dst in the peer's stage, src rows of this rank's partial); ``arrive``:
    per peer, a one-element int64 tensor, the peer's arrival counter; ``my_counter``: this rank's;
    ``target``: the value this rank's counter reaches once every peer's programs have pushed this
    chunk; ``block``: this rank's rows, reduced in place; ``partials``: the staged rows from each
    peer; ``out_dsts``: the block's rows in each peer's output. Tensors of one list are
    contiguous, of one dtype, and (but for the pushes) of the block's shape. ``phases``: "both",
    or "push" / "reduce" alone (for the interpreter)."""
    npeers = len(partials)
    if not (npeers == len(pushes) == len(arrive) == len(out_dsts)) or not npeers:
        raise ValueError(f"two_shot needs one push, counter, partial and output per peer, got {len(pushes)}, "
                         f"{len(arrive)}, {npeers}, {len(out_dsts)}")
    _check_like(block, list(partials) + list(out_dsts))
    for dst, src in pushes:
        _check_like(src, [dst])
    if phases not in ("both", "push", "reduce"):
        raise ValueError(f"phases must be both, push or reduce, got {phases!r}")
    stage_dsts, srcs = zip(*pushes)
    launch(_two_shot_kernel, (ctas,),
        tuple(srcs), tuple(stage_dsts), tuple(s.numel() for s in srcs), tuple(arrive), my_counter, target,
        block, tuple(partials), tuple(out_dsts), block.numel(),
        NPEERS=npeers, PUSH=phases != "reduce", REDUCE=phases != "push", MAX_SPINS=MAX_SPINS,
        BLOCK=32 * num_warps * ELEMS_PER_THREAD, num_warps=num_warps)


def two_shot_pull(arrive, my_counter, target: int, block, peer_blocks, out_dsts, ctas: int,
                  num_warps: int = NUM_WARPS, phases: str = "both") -> None:
    """One chunk of the pull variant (see the module doc): signal, wait, then sum this rank's
    block with the peers' partial rows of it, *loaded* over NVLink, and push the sum back.

    ``arrive``/``my_counter`` as for ``two_shot``, but ``target`` grows by the peer count per
    chunk (one arrival per rank, not per program); ``peer_blocks``: this block's rows in each
    peer's output (their partials, read; then overwritten by the sum, as ``out_dsts``).
    ``phases``: "both", or "signal" / "reduce" alone (for the interpreter)."""
    npeers = len(peer_blocks)
    if not (npeers == len(arrive) == len(out_dsts)) or not npeers:
        raise ValueError(f"two_shot_pull needs one counter, peer block and output per peer, got {len(arrive)}, "
                         f"{npeers}, {len(out_dsts)}")
    _check_like(block, list(peer_blocks) + list(out_dsts))
    if phases not in ("both", "signal", "reduce"):
        raise ValueError(f"phases must be both, signal or reduce, got {phases!r}")
    launch(_two_shot_pull_kernel, (ctas,),
        tuple(arrive), my_counter, target, block, tuple(peer_blocks), tuple(out_dsts), block.numel(),
        NPEERS=npeers, SIGNAL=phases != "reduce", REDUCE=phases != "signal", MAX_SPINS=MAX_SPINS,
        BLOCK=32 * num_warps * ELEMS_PER_THREAD, num_warps=num_warps)


def pull_persistent(out, peer_outs, arrive, my_counter, ready, epoch: int, base: int, table, ctas: int,
                    progress, chunk_base: int, first: int = 0, count: int | None = None, fallback: bool = False,
                    num_warps: int = NUM_WARPS, phases: str = "both") -> None:
    """One launch of the pull all-reduce of every chunk of one op (see the module doc): the
    optimistic one (``fallback=False``: waits give up after ``YIELD_SPINS`` polls and stop the
    program) or the fallback (waits up to ``MAX_SPINS`` polls; queue it where every local
    matmul of the op is done, with the same ``ctas``).

    ``out``: this rank's whole output (matmul rows, reduced in place); ``peer_outs``: each
    peer's; ``table``: int32, per chunk (first row, rows) of this rank's block; ``ready``:
    int32 flags, chunk c's set to ``epoch`` by the compute stream once its matmul is done;
    ``base``: this rank's counter before the op (it grows by peers + 1 per chunk);
    ``progress``: int64, ``ctas + 3`` values kept across ops (zeros at first; see the module
    doc), ``chunk_base``: chunks of earlier ops (absolute number of this op's first chunk).
    ``first``/``count``: the chunks this launch handles (all by default); ``phases``: "both",
    or "signal" / "reduce" alone (for the interpreter)."""
    npeers = len(peer_outs)
    if npeers != len(arrive) or not npeers:
        raise ValueError(f"pull_persistent needs one counter and output per peer, got {len(arrive)}, {npeers}")
    _check_like(out, list(peer_outs))
    chunks = table.numel() // 2
    count = chunks - first if count is None else count
    if table.dtype != ready.dtype or table.dtype.itemsize != 4 or not 0 <= first <= first + count <= chunks \
            or ready.numel() < chunks:
        raise ValueError(f"pull_persistent needs int32 table and flags covering chunks {first}..{first + count} "
                         f"of {chunks}, got {table.dtype} {tuple(table.shape)} and {ready.dtype} {tuple(ready.shape)}")
    if progress.dtype.itemsize != 8 or progress.numel() < ctas + 3:
        raise ValueError(f"pull_persistent needs int64 progress of ctas + 3 = {ctas + 3} values, got {progress.dtype} "
                         f"{tuple(progress.shape)}")
    if phases not in ("both", "signal", "reduce"):
        raise ValueError(f"phases must be both, signal or reduce, got {phases!r}")
    launch(_pull_persistent_kernel, (ctas,),
        out, tuple(peer_outs), tuple(arrive), my_counter, ready, epoch, base, table, first, count, out.shape[-1],
        progress, chunk_base,
        NPEERS=npeers, SIGNAL=phases != "reduce", REDUCE=phases != "signal",
        SPINS=MAX_SPINS if fallback else YIELD_SPINS, FALLBACK=int(fallback),
        BLOCK=32 * num_warps * ELEMS_PER_THREAD, num_warps=num_warps)


def launch(kernel, grid, *args, **kwargs) -> None:
    """Every launch of this module goes through here (kernels/triton/aot.py swaps it for a
    recorder to compile the launches ahead of time for another GPU)."""
    kernel[grid](*args, **kwargs)


def _check_like(ref, tensors) -> None:
    for t in [ref, *tensors]:
        if not t.is_contiguous() or t.shape != ref.shape or t.dtype != ref.dtype:
            raise ValueError(f"the all-reduce needs contiguous tensors of one shape and dtype, got "
                             f"{tuple(t.shape)} {t.dtype} beside {tuple(ref.shape)} {ref.dtype}")
