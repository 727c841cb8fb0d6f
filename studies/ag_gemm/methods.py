"""The compared all-gather + matmul methods, built for one rank inside a process group.

Contract shared by every method: rank r holds its A shard and the replicated B (K x N); a call
leaves the full C = A @ B (M x N) in the method's output. Two formulations (``shard``):

- ``rows`` (this study's): the shard is rows r*M/ws ... of A (M/ws x K), so the gathered A is
  the shards stacked, which is exactly the flat layout ``all_gather_into_tensor`` writes;
- ``k`` (the seed's): the shard is columns r*K/ws ... of A (M x K/ws), gathered by
  concatenating along K. ``all_gather_into_tensor`` into an (M, K) buffer still writes the
  shards one after another in memory, which is NOT a concatenation along K: the seed's RCCL
  baseline computed another matrix (its review). Here that baseline is the ``nccl`` provider
  of ``shard=k`` and fails its check; ``all-gather-cat`` (``all_gather`` into a list, then
  ``cat(dim=1)``, the seed's test reference) passes. Only the methods that run on any backend
  take ``shard=k`` (:data:`K_SHARD_PROVIDERS`); the fused kernels gather rows.
Methods that read peers' memory (``ce-chunked``, ``hbm-buffer``, ``hbm-buffer-ce``) take the shard already in
a symmetric-memory buffer, as iris takes it on its heap: a producer writes it there; no
copy-in is timed. Each of their calls starts with a symmetric-memory barrier, so a call
never reads a peer's shard before the peer reached the same call. ``torch-fused`` copies
the shard into its own workspace inside the op (its own cost), ``nccl`` gathers from a
plain tensor.

``build(name, ...)`` returns ``(fn, out, extra)``: ``fn()`` runs one call on the current
stream, ``out`` is where C lands, ``extra`` holds objects the worker needs (trace buffers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

METHODS = ("nccl", "all-gather-cat", "torch-fused", "ce-chunked", "hbm-buffer", "hbm-buffer-ce")
#: measured alone for the perfect-overlap bound max(all-gather, matmul)
PARTS = ("all-gather", "matmul")
#: the providers that run on any torch.distributed backend (gloo on CPUs too)
ANY_BACKEND = ("nccl", "all-gather-cat") + PARTS
#: the providers of the seed's K-sharded formulation
K_SHARD_PROVIDERS = ANY_BACKEND
SHARDS = ("rows", "k")
#: tolerance on max|C - ref| / max|ref| against an fp32 reference (K=8192 sums of products)
REL_TOL = {"fp16": 5e-3, "bf16": 2e-2}


def torch_dtype(name: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}[name]


@dataclass
class Inputs:
    """One rank's inputs and the shared reference."""

    rank: int
    world_size: int
    a_shard: Any  # plain tensor: [M/ws, K] (shard="rows") or [M, K/ws] (shard="k")
    b: Any  # [K, N]
    m: int
    group: Any
    dim: int = 0  # the sharded dimension of A: 0 rows, 1 K
    symm: Any = None  # symmetric-memory copy of a_shard
    handle: Any = None  # its rendezvous handle
    cache: dict = field(default_factory=dict)


def make_inputs(m: int, n: int, k: int, dtype: str, rank: int, world_size: int, group, seed: int = 0,
                device: str = "cuda", shard: str = "rows") -> Inputs:
    """Random normal inputs: A shard seeded per rank, B seeded the same on every rank."""
    import torch

    dt = torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(seed * 7919 + 1000 + rank)
    shape = (m // world_size, k) if shard == "rows" else (m, k // world_size)
    a = torch.randn(*shape, device=device, generator=gen, dtype=torch.float32).to(dt)
    gen_b = torch.Generator(device=device).manual_seed(seed * 7919 + 17)
    b = torch.randn(k, n, device=device, generator=gen_b, dtype=torch.float32).to(dt)
    return Inputs(rank, world_size, a, b, m, group, dim=SHARDS.index(shard))


def gather_cat(inp: Inputs):
    """The gathered A by ``all_gather`` into a list, concatenated along the sharded dim."""
    import torch
    import torch.distributed as dist

    parts = [torch.empty_like(inp.a_shard) for _ in range(inp.world_size)]
    dist.all_gather(parts, inp.a_shard, group=inp.group)
    return torch.cat(parts, dim=inp.dim)


def reference(inp: Inputs):
    """fp32 C from :func:`gather_cat` (the seed's test reference): independent of
    ``all_gather_into_tensor``, which the nccl method uses."""
    return gather_cat(inp).float() @ inp.b.float()


def check(out, ref, dtype: str) -> tuple[bool, str]:
    """Max error relative to max|ref|, against the dtype's tolerance."""
    import torch

    if out.shape != ref.shape:
        return False, f"output shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    o = out.float()
    if not torch.isfinite(o).all():
        return False, "output has NaN/Inf"
    err = ((o - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    tol = REL_TOL[dtype]
    verdict = "ok" if err <= tol else "MISMATCH"
    return err <= tol, f"{verdict}: max|C-ref|/max|ref| = {err:.2e} (tol {tol:.0e}, fp32 reference)"


def ensure_symm(inp: Inputs) -> None:
    """Put the shard into a symmetric-memory buffer and rendezvous (once per inputs)."""
    import torch.distributed._symmetric_memory as symm_mem

    if inp.symm is None:
        buf = symm_mem.empty(tuple(inp.a_shard.shape), dtype=inp.a_shard.dtype, device=inp.a_shard.device)
        buf.copy_(inp.a_shard)
        inp.handle = symm_mem.rendezvous(buf, inp.group.group_name)
        inp.symm = buf
        inp.handle.barrier(channel=0)


def build(name: str, inp: Inputs, knobs: dict[str, Any], trace: bool = False) -> tuple[Callable[[], Any], Any, dict]:
    import torch
    import torch.distributed as dist

    m, (k, n) = inp.m, inp.b.shape
    dt = inp.a_shard.dtype
    if name in ANY_BACKEND:  # gloo on CPUs too
        gathered = torch.empty(m, k, device=inp.a_shard.device, dtype=dt)
        out = torch.empty(m, n, device=inp.a_shard.device, dtype=dt)
        if name == "matmul":
            gathered.copy_(gather_cat(inp))
            return (lambda: torch.matmul(gathered, inp.b, out=out)), out, {}
        if name == "all-gather-cat":
            return (lambda: torch.matmul(gather_cat(inp), inp.b, out=out)), out, {}
        if name == "all-gather":  # alone, for the bound: the gather each formulation needs
            if inp.dim:
                return (lambda: gather_cat(inp)), None, {}
            return (lambda: dist.all_gather_into_tensor(gathered, inp.a_shard, group=inp.group)), None, {}

        # Row-sharded A: the flat [rank0 rows; rank1 rows; ...] layout of
        # all_gather_into_tensor along dim 0 is exactly the gathered A. K-sharded A: the seed
        # gathered into an (M, K) buffer, which NCCL/RCCL fill with the same flat layout, here
        # written through a (ws*M, K/ws) view of that buffer (gloo checks the shape; the bytes
        # are the same) and read as (M, K): not [A_0 | A_1 | ...] (the seed's bug).
        into = gathered.view(-1, inp.a_shard.shape[1]) if inp.dim else gathered

        def fn():
            dist.all_gather_into_tensor(into, inp.a_shard, group=inp.group)
            torch.matmul(gathered, inp.b, out=out)
        return fn, out, {}
    if inp.dim:
        raise ValueError(f"{name} gathers A by rows; with shard=k only {', '.join(K_SHARD_PROVIDERS)} run")
    if name == "torch-fused":
        import torch.distributed._symmetric_memory  # noqa: F401  (registers torch.ops.symm_mem)

        res: dict[str, Any] = {}

        def fn():
            _, outs = torch.ops.symm_mem.fused_all_gather_matmul(inp.a_shard, [inp.b], gather_dim=0,
                                                                 group_name=inp.group.group_name)
            res["out"] = outs[0]
        fn()
        torch.cuda.synchronize()
        return fn, _Lazy(res), {}
    ensure_symm(inp)
    if name == "ce-chunked":
        return _ce_chunked(inp, int(knobs.get("chunks", 1)))
    if name in ("hbm-buffer", "hbm-buffer-ce"):
        from kernels.triton.ag_gemm import HbmBuffer, HbmKnobs

        kn = HbmKnobs(**{k2: v for k2, v in knobs.items() if k2 in HbmKnobs.__dataclass_fields__})
        if name == "hbm-buffer-ce":  # the same kernel, its staging filled by copy engines
            kn.fetch = "ce"
        ptrs = torch.tensor(inp.handle.buffer_ptrs, dtype=torch.int64, device="cuda")
        ms, k = inp.symm.shape
        peers = [inp.handle.get_buffer(p, (ms, k), dt) for p in range(inp.world_size)]
        hb = HbmBuffer(inp.symm, ptrs, inp.b, inp.rank, inp.world_size, kn, trace=trace, peers=peers)
        out = torch.empty(m, n, device="cuda", dtype=dt)

        def fn():
            inp.handle.barrier(channel=0)
            hb(out)
        return fn, out, {"hbm": hb}
    raise ValueError(f"unknown provider {name!r}; known: {', '.join(METHODS + PARTS)}")


class _Lazy:
    """The torch op allocates its output per call: resolve it when checked."""

    def __init__(self, res: dict):
        self.res = res

    def get(self):
        return self.res["out"]


def output(out):
    return out.get() if isinstance(out, _Lazy) else out


def _ce_chunked(inp: Inputs, chunks: int):
    """Copy-engine all-gather overlapped with per-chunk cuBLAS matmuls on two streams.

    The local shard's matmul starts at once on the caller's stream, reading the shard in
    place; a side stream pulls each peer's shard (nearest first) in ``chunks`` pieces with
    cudaMemcpyAsync from its symmetric buffer (a copy engine, no SMs), recording an event
    per piece; the caller's stream waits on each event and multiplies that piece.
    """
    import torch

    ws, rank, ms = inp.world_size, inp.rank, inp.a_shard.shape[0]
    k, n = inp.b.shape
    dt = inp.a_shard.dtype
    gathered = torch.empty(inp.m, k, device="cuda", dtype=dt)
    out = torch.empty(inp.m, n, device="cuda", dtype=dt)
    peers = [inp.handle.get_buffer(p, (ms, k), dt) for p in range(ws)]
    side = torch.cuda.Stream()
    bounds = [(c * ms // chunks, (c + 1) * ms // chunks) for c in range(chunks)]
    pieces = [((rank + s) % ws, r0, r1) for s in range(1, ws) for r0, r1 in bounds if r1 > r0]
    events = [torch.cuda.Event() for _ in pieces]

    def fn():
        main = torch.cuda.current_stream()
        inp.handle.barrier(channel=0)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            for (p, r0, r1), ev in zip(pieces, events):
                gathered[p * ms + r0: p * ms + r1].copy_(peers[p][r0:r1])
                ev.record(side)
        torch.matmul(inp.symm, inp.b, out=out[rank * ms:(rank + 1) * ms])
        for (p, r0, r1), ev in zip(pieces, events):
            main.wait_event(ev)
            torch.matmul(gathered[p * ms + r0: p * ms + r1], inp.b, out=out[p * ms + r0: p * ms + r1])
        main.wait_stream(side)
    return fn, out, {}
