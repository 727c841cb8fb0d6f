"""The fused kernel on a CPU: Triton's interpreter with every rank emulated in one process.

Peers' shards are plain CPU tensors whose addresses stand in for the symmetric-memory
mappings; each rank's launch runs in turn (the interpreter runs programs one after another
in ticket order, so fetchers finish before GEMM programs wait). ``TRITON_INTERPRET=1`` must
be set before triton is first imported (``@triton.jit`` and triton's own helpers read it
then), so callers run this module as a child process:

    TRITON_INTERPRET=1 python -m studies.ag_gemm.emulate '[{"world_size": 2, "m": 40, ...}]'

prints one JSON list with, per scenario, per rank: ok, check message, timed_out, epoch.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def run_scenario(world_size: int, m: int, n: int, k: int, knobs: dict[str, Any], dtype: str = "fp16",
                 launches: int = 2, swap_peers: bool = False, skip_fetchers: bool = False,
                 gemm_path: bool = False, max_spins: int | None = None, drop_chunks: int = 0) -> list[dict[str, Any]]:
    """``swap_peers`` maps the peers' addresses in the wrong order (a broken rendezvous);
    ``skip_fetchers`` builds the queue without its fetch rows and clears the flags, so every
    remote wait must give up after ``max_spins`` polls; ``gemm_path`` builds it without fetch
    rows and fills the staging buffer beforehand (the GEMM path alone, as the benchmark times it);
    ``drop_chunks``: with ``fetch="ce"``, the copy engines never copy the last chunks (their
    flags stay unset, so the tiles that need them must give up after ``max_spins`` polls)."""
    import torch

    import kernels.triton.ag_gemm as kmod
    from studies.ag_gemm import methods

    if max_spins is not None:
        kmod.MAX_SPINS = max_spins
    dt = methods.torch_dtype(dtype)
    ms = m // world_size
    shards = [torch.randn(ms, k, generator=torch.Generator().manual_seed(1000 + r)).to(dt) for r in range(world_size)]
    b = torch.randn(k, n, generator=torch.Generator().manual_seed(17)).to(dt)
    order = list(range(world_size))[::-1] if swap_peers else list(range(world_size))
    ptrs = torch.tensor([shards[i].data_ptr() for i in order], dtype=torch.int64)
    ref = torch.cat(shards, dim=0).float() @ b.float()
    out_ranks = []
    for rank in range(world_size):
        buf = kmod.HbmBuffer(shards[rank], ptrs, b, rank, world_size, kmod.HbmKnobs(**knobs),
                             fetch=not (skip_fetchers or gemm_path), peers=[shards[i] for i in order])
        if skip_fetchers:
            buf.flags.zero_()
        if drop_chunks:
            buf.ce.ops = buf.ce.ops[:-drop_chunks]
        # NaN in the staging buffer: a GEMM that reads a tile no fetcher wrote shows as NaN
        # (a reused allocation could otherwise hold the right data by chance).
        buf.stage.fill_(float("nan"))
        if gemm_path:
            for src in range(world_size):
                if src != rank:
                    buf.stage_rows(src).copy_(shards[src])
        out = torch.full((m, n), float("nan"), dtype=dt)
        for _ in range(launches):
            buf(out)
        ok, msg = methods.check(out, ref, dtype)
        out_ranks.append({"ok": ok, "check": msg, "timed_out": buf.timed_out(), "epoch": buf.epoch,
                          "flags": buf.layout.num_flags, "chunks": len(buf.ce.order) if buf.ce else 0,
                          "k_groups": buf.layout.k_groups, "m_tiles_per_flag": buf.layout.m_tiles_per_flag,
                          "mechanism": buf.mechanism})
    return out_ranks


def kernelbench_entries(m: int, n: int, k: int, knobs: dict[str, Any], experiments: list[str],
                        trials: int = 2, dtype: str = "fp16") -> list[dict[str, Any]]:
    """The variants of one shape of ``mode=kernel`` (``kernelbench.entries``: the review's
    experiments' knob overrides included), built, checked and, for the barrier experiment,
    launched ``trials`` times from a poisoned staging buffer, as the GPU run does: the CPU
    test of that path (the interpreter runs programs one after another, so the missing
    barrier cannot race here)."""
    import dataclasses

    from studies.ag_gemm import kernelbench as kb

    params = {"experiments": experiments, "emulate": [2]}
    prob = kb.make_problem(m, n, k, dtype, device="cpu")
    out = []
    for e in kb.entries(params):
        c = kb.build(e.method, prob, e.world_size, dataclasses.replace(kb.knobs_from(knobs), **dict(e.overrides)))
        ok, msg = kb.check(c, prob)
        row = {"variant": e.name(dtype, m), "ok": ok, "check": msg}
        if c.hbm is not None and e.method == "emulated" and not c.copies_only:
            row |= kb.flag_trials(c, prob, trials) | {"stage_layout": c.hbm.knobs.stage_layout,
                                                       "flag_barrier": c.hbm.knobs.flag_barrier}
        out.append(row)
    return out


def main(argv: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("set TRITON_INTERPRET=1 (before triton is imported)", file=sys.stderr)
        return 2
    scenarios = json.loads(argv[0])
    print(json.dumps([kernelbench_entries(**sc["kernelbench"]) if "kernelbench" in sc else run_scenario(**sc)
                      for sc in scenarios]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
