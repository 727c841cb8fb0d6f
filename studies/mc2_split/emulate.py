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
                 persistent: bool = False, late_ready: int | None = None, early_reduce: bool = False,
                 yield_spins: int | None = None) -> dict:
    """``skip_push_from``: that rank never pushes or signals (a peer that did not arrive), so
    every other rank's wait must give up after ``max_spins`` polls and its check fail.
    ``pull``: the ``triton-pull`` kernel instead of the push one; ``persistent``: the
    ``triton-persistent`` kernel, one chunk per launch here (the GPU runs every chunk of an op in
    one), its ready flags set by this loop where the compute stream sets them.

    The persistent kernel's two launches (the hang's fix): ``late_ready``: that rank's
    optimistic launch runs before its matmul's flag is set (the deadlock: its matmul waits for
    the SMs the launch holds), so it must give up after ``yield_spins`` polls and stop, and the
    fallback launch, run once the flag is set, signals; ``early_reduce``: every rank's
    optimistic reduce runs before any rank signalled, must stop, and the fallback launches
    reduce each chunk once (a second reduction would add the partials again)."""
    import torch

    import kernels.triton.allreduce as kmod
    from kernels.triton.collectives import row_blocks

    if max_spins is not None:
        kmod.MAX_SPINS = max_spins
    if yield_spins is not None:
        kmod.YIELD_SPINS = yield_spins
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(world * 100 + rows)
    parts = [torch.randn(rows, n, generator=gen).to(dt) for _ in range(world)]
    out = [p.clone() for p in parts]
    # NaN in the staging buffers: a reduce that reads rows no peer pushed shows as NaN
    stage = [torch.full((world, rows, n), float("nan"), dtype=dt) for _ in range(world)]
    counter = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    pull = pull or persistent
    ready = [torch.zeros(len(chunks), dtype=torch.int32) for _ in range(world)]
    progress = [torch.zeros(ctas + 3, dtype=torch.int64) for _ in range(world)]
    tables = [torch.tensor([v for c0, c1 in zip([0, *itertools.accumulate(chunks)], itertools.accumulate(chunks))
                            for a, b in [row_blocks(c0, c1, world)[r]] for v in (a, b - a)], dtype=torch.int32)
              for r in range(world)]
    if pull and skip_push_from is not None:
        out[skip_push_from].fill_(float("nan"))  # a rank that never signalled has no rows ready to load
    r0 = 0
    for seq, c in enumerate(chunks, 1):
        blocks = row_blocks(r0, r0 + c, world)
        phases = ("signal" if pull else "push", "reduce")
        if persistent and early_reduce:
            phases = ("early-reduce",) + phases
        for phase in phases:
            for r in range(world):
                if phase != "reduce" and r == skip_push_from:
                    continue
                peers = [(r + i) % world for i in range(1, world)]
                s0, s1 = blocks[r]
                outs = [out[p][s0:s1] for p in peers]
                if persistent:
                    def launch(ph, fallback):
                        kmod.pull_persistent(out[r], [out[p] for p in peers], [counter[p] for p in peers], counter[r],
                                             ready[r], 1, 0, tables[r], ctas, progress[r], 0, first=seq - 1, count=1,
                                             fallback=fallback, num_warps=1, phases=ph)
                    if phase == "early-reduce":  # before any signal: every program must stop
                        launch("reduce", False)
                        continue
                    if phase == "signal" and r == late_ready:  # the matmul not done: the launch gives up
                        launch(phase, False)
                    ready[r][seq - 1] = 1  # this rank's matmul of the chunk is done
                    # optimistic, then the fallback (which finds nothing left when the first finished)
                    launch(phase, False)
                    launch(phase, True)
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
            "counters": [int(c) for c in counter],
            "early_stops": [int(p[ctas + 1]) for p in progress], "timeouts": [int(p[ctas + 2]) for p in progress],
            "progress": [p[:ctas + 1].tolist() for p in progress]}


def main(argv: list[str]) -> int:
    print(json.dumps([run_scenario(**s) for s in json.loads(argv[0])]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def starved_persistent(chunks: int = 4, rows: int = 2048, n: int = 4096, mm: int = 4096, ctas_per_sm: int = 4,
                       fallback: bool = True, yield_spins: int | None = None, max_spins: int | None = None,
                       limit_s: float = 60.0) -> dict:
    """The ``triton-persistent`` hang on ONE GPU, on purpose: the optimistic launch gets
    ``ctas_per_sm`` programs per SM, queued before ``chunks`` matmuls (``mm`` cubed, fp16) on the
    compute stream whose ready flags it waits for; every SM then holds its programs, so no matmul
    CTA (a whole SM's registers) can start: the cycle of the committed hangs, without the luck
    they needed. A peer is emulated (its arrivals are in the counter from the start, its rows a
    local tensor). With ``fallback`` the ops' two launches run as the study runs them; without,
    the optimistic launch alone with waits of ``yield_spins`` polls (the old protocol when that
    is large: a deadlock that only the poll limit breaks). Returns the wall time, whether the
    sums are right, the early stops and time-outs, and whether the host gave up waiting
    (``limit_s``)."""
    import time

    import torch

    import kernels.triton.allreduce as kmod
    from kernels.triton.copyengine import FlagWriter

    if yield_spins is not None:
        kmod.YIELD_SPINS = yield_spins
    if max_spins is not None:
        kmod.MAX_SPINS = max_spins
    dev = torch.device("cuda")
    ctas = ctas_per_sm * torch.cuda.get_device_properties(dev).multi_processor_count
    gen = torch.Generator(device=dev).manual_seed(0)
    mine = torch.randn(rows, n, device=dev, generator=gen).half()
    peer = torch.randn(rows, n, device=dev, generator=gen).half()
    ref = mine.float() + peer.float()
    out, peer_out = mine.clone(), peer.clone()
    step = rows // chunks
    table = torch.tensor([v for c in range(chunks) for v in (c * step, step)], dtype=torch.int32, device=dev)
    counter = torch.full((1,), chunks, dtype=torch.int64, device=dev)  # the peer's arrivals, every chunk
    arrive = [torch.zeros(1, dtype=torch.int64, device=dev)]  # this rank's arrivals at the peer (unread)
    ready = torch.zeros(chunks, dtype=torch.int32, device=dev)
    progress = torch.zeros(ctas + 3, dtype=torch.int64, device=dev)
    a = torch.randn(mm, mm, device=dev, generator=gen).half()
    scratch = torch.empty_like(a)
    flag = FlagWriter(device_is_cuda=True)
    comm = torch.cuda.Stream(priority=-1)
    torch.cuda.synchronize()

    def launch(fb: bool):
        kmod.pull_persistent(out, [peer_out], arrive, counter, ready, 1, 0, table, ctas, progress, 0,
                             fallback=fb, num_warps=8)

    t0 = time.perf_counter()
    comm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(comm):
        launch(False)
    for c in range(chunks):
        torch.matmul(a, a, out=scratch)  # needs SMs the launch holds
        flag(ready, c, 1)
    if fallback:
        done = torch.cuda.Event()
        done.record()
        comm.wait_event(done)
        with torch.cuda.stream(comm):
            launch(True)
    end = torch.cuda.Event()
    end.record(comm)
    gave_up = False
    while not end.query():
        if time.perf_counter() - t0 > limit_s:
            gave_up = True
            break
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    if gave_up:
        return {"wall_s": wall, "gave_up": True, "ok": False, "ctas": ctas}
    torch.cuda.synchronize()
    err = float((out.float() - ref).abs().max()) / float(ref.abs().max())
    return {"wall_s": wall, "gave_up": False, "ok": err < 1e-2 and torch.equal(out, peer_out), "err": err,
            "ctas": ctas, "early_stops": int(progress[ctas + 1]), "timeouts": int(progress[ctas + 2]),
            "flag": flag.how}
