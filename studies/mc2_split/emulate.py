"""The Triton collectives' kernels on a CPU: Triton's interpreter with every rank emulated in one process.

Peers' buffers are plain CPU tensors whose addresses stand in for the symmetric-memory
mappings. The interpreter runs a launch's programs one after another, so a rank's wait for
its peers would never end inside one launch: each chunk runs as every rank's push (pull:
signal) phase, then every rank's reduce phase (the GPU runs both in one launch). ``TRITON_INTERPRET=1`` must
be set before triton is first imported, so callers run this module as a child process:

    TRITON_INTERPRET=1 python -m studies.mc2_split.emulate '[{"world": 3, "rows": 10, ...}]'

prints one JSON list with, per scenario: ok, the worst error, every rank's counter.
"""

from __future__ import annotations

import itertools
import json
import sys


def run_scenario(world: int, rows: int, n: int, chunks: list[int], ctas: int = 2, dtype: str = "float16",
                 skip_push_from: int | None = None, max_spins: int | None = None, pull: bool = False,
                 persistent: bool = False) -> dict:
    """``skip_push_from``: that rank never pushes or signals (a peer that did not arrive), so
    every other rank's wait must give up after ``max_spins`` polls and its check fail.
    ``pull``: the ``triton-pull`` kernel instead of the push one; ``persistent``: the
    ``triton-persistent`` kernel, one chunk per launch here (the GPU runs every chunk of an op in
    one), its ready flags set by this loop where the compute stream sets them."""
    import torch

    import kernels.triton.allreduce as kmod
    from studies.mc2_split.worker import row_blocks

    if max_spins is not None:
        kmod.MAX_SPINS = max_spins
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(world * 100 + rows)
    parts = [torch.randn(rows, n, generator=gen).to(dt) for _ in range(world)]
    out = [p.clone() for p in parts]
    # NaN in the staging buffers: a reduce that reads rows no peer pushed shows as NaN
    stage = [torch.full((world, rows, n), float("nan"), dtype=dt) for _ in range(world)]
    counter = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    pull = pull or persistent
    ready = [torch.zeros(len(chunks), dtype=torch.int32) for _ in range(world)]
    tables = [torch.tensor([v for c0, c1 in zip([0, *itertools.accumulate(chunks)], itertools.accumulate(chunks))
                            for a, b in [row_blocks(c0, c1, world)[r]] for v in (a, b - a)], dtype=torch.int32)
              for r in range(world)]
    if pull and skip_push_from is not None:
        out[skip_push_from].fill_(float("nan"))  # a rank that never signalled has no rows ready to load
    r0 = 0
    for seq, c in enumerate(chunks, 1):
        blocks = row_blocks(r0, r0 + c, world)
        for phase in ("signal" if pull else "push", "reduce"):
            for r in range(world):
                if phase != "reduce" and r == skip_push_from:
                    continue
                peers = [(r + i) % world for i in range(1, world)]
                s0, s1 = blocks[r]
                outs = [out[p][s0:s1] for p in peers]
                if persistent:
                    ready[r][seq - 1] = 1  # this rank's matmul of the chunk is done
                    kmod.pull_persistent(out[r], [out[p] for p in peers], [counter[p] for p in peers], counter[r],
                                         ready[r], 1, 0, tables[r], ctas, first=seq - 1, count=1, num_warps=1,
                                         phases=phase)
                    continue
                if pull:
                    kmod.two_shot_pull([counter[p] for p in peers], counter[r], seq * len(peers), out[r][s0:s1],
                                       outs, outs, ctas, num_warps=1, phases=phase)
                    continue
                kmod.two_shot([(stage[p][r, a:b], out[r][a:b]) for p in peers for a, b in [blocks[p]]],
                              [counter[p] for p in peers], counter[r], seq * len(peers) * ctas, out[r][s0:s1],
                              [stage[r][p, s0:s1] for p in peers], outs, ctas, num_warps=1, phases=phase)
        r0 += c
    ref = sum(p.float() for p in parts)
    err = max(float((o[:r0].float() - ref[:r0]).abs().max()) for o in out)
    untouched = all(torch.equal(o[r0:], p[r0:]) for o, p in zip(out, parts))
    tol = {"float16": 1e-2, "float32": 1e-5}[dtype] * float(ref.abs().max())
    return {"ok": err <= tol and untouched, "err": err, "untouched": untouched,
            "counters": [int(c) for c in counter]}


def main(argv: list[str]) -> int:
    print(json.dumps([run_scenario(**s) for s in json.loads(argv[0])]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
