"""Exact search for the chunking with the least simulated makespan.

Chunk boundaries lie on ``align``-row tiles; at most ``max_chunks`` chunks. The search is a
dynamic programme over (tiles used, chunks used) whose state is the pair (C, W): the time
the first-stage engine finishes its last chunk, and the second-stage work (solo us) still
queued then. That pair is all the future depends on: every queued second-stage task is
ready by C, so that engine drains W without a gap. The makespan grows with C and with W, so
keeping the Pareto front of (C, W) per state loses no optimum. The transition is the
closed form of :func:`simulate.simulate` for one more chunk (tests check they agree).

States whose lower bound (C plus the remaining first-stage work at its smallest slope, or
C + W plus the remaining second-stage work likewise) cannot beat the best known makespan
(seeded with the uniform splits) are dropped, which keeps the search exact. Above
``max_tiles`` tiles the tile is widened to a multiple of ``align`` (the answer says which),
since the fronts grow with the square of the tile count.
"""

from __future__ import annotations

import math
from typing import Sequence

from .plan import CostModel, uniform_chunks
from .simulate import factors, simulate


def _step(c: float, w: float, x: float, y: float, f1: float, f2: float) -> tuple[float, float]:
    """Add a chunk with first-stage work x and second-stage work y (solo us)."""
    if x * f1 <= w * f2:  # the new first stage ends while the queued work still runs
        return c + x * f1, w - x * f1 / f2 + y
    # the queue drains after w*f2; the rest of x runs alone
    return c + w * f2 + (x - w * f2 / f1), y


def _pareto(points: list[tuple[float, float, object]]) -> list[tuple[float, float, object]]:
    points.sort(key=lambda p: (p[0], p[1]))
    out = []
    best_w = math.inf
    for p in points:
        if p[1] < best_w - 1e-9:
            out.append(p)
            best_w = p[1]
    return out


def _lower_bound_fn(fit, rows_to_x):
    """A function r -> a lower bound of the summed solo time of any split of r rows
    into at most k chunks (the smallest slope; a negative fixed term counted k times)."""
    s_min = max(0.0, min(fit.slope, fit.slope + fit.slope2) if fit.knot is not None else fit.slope)
    fixed = fit.fixed_us

    def lb(r: int, k_left: int) -> float:
        if r <= 0:
            return 0.0
        return max(0.0, s_min * rows_to_x(r) + (fixed if fixed > 0 else fixed * k_left))

    return lb


def unsearchable(model: CostModel, align: int = 128) -> str | None:
    """Why the search cannot run on this model, or None: its bounds assume costs that grow
    with the rows and are positive from one tile on (a fit can give neither: a noisy slope,
    a negative fixed term)."""
    if not (model.mm.increasing() and model.comm.increasing()):
        return "a fit does not grow with size"
    tile_mm_us, tile_comm_us = model.mm_us(align), model.comm_us(align)
    if tile_mm_us <= 0 or tile_comm_us <= 0:
        return (f"a fit gives a non-positive time for one {align}-row tile (CostMM = {tile_mm_us:.1f} us, "
                f"CostComm = {tile_comm_us:.1f} us)")
    return None


def best_split(m: int, model: CostModel, contention: float | Sequence[float] = 1.15, comm_first: bool = False,
               align: int = 128, max_chunks: int = 16, max_tiles: int = 64) -> dict:
    """The chunking of M rows (tile-aligned, <= max_chunks) with the least simulated makespan."""
    f_mm, f_comm = factors(contention)
    f1, f2 = (f_comm, f_mm) if comm_first else (f_mm, f_comm)
    align_used = align * math.ceil(math.ceil(m / align) / max_tiles)
    align = align_used
    tiles = math.ceil(m / align)
    mm_lb = _lower_bound_fn(model.mm, lambda r: r)
    comm_lb = _lower_bound_fn(model.comm, model.mib)
    lb1, lb2 = (comm_lb, mm_lb) if comm_first else (mm_lb, comm_lb)
    uniform = [u for u in (uniform_chunks(m, k, align) for k in range(1, max_chunks + 1)) if u]
    # The best uniform split bounds the search and is the answer if no state beats it.
    seed = min((simulate(u, model, (f_mm, f_comm), comm_first).makespan_us, u) for u in uniform)
    upper = seed[0]
    rows = [min(s * align, m) for s in range(tiles + 1)]  # rows covered by the first s tiles
    stage1 = (lambda r: model.comm_us(r)) if comm_first else (lambda r: model.mm_us(r))
    stage2 = (lambda r: model.mm_us(r)) if comm_first else (lambda r: model.comm_us(r))
    cost = {}
    # fronts[u] holds (C, W, chunks) for exactly u tiles, for the current chunk count
    fronts: list[list] = [[] for _ in range(tiles + 1)]
    fronts[0] = [(0.0, 0.0, ())]
    best = None
    states = 0
    for _count in range(1, max_chunks + 1):
        nxt: list[list] = [[] for _ in range(tiles + 1)]
        for u in range(tiles):
            for c, w, chunks in fronts[u]:
                for v in range(u + 1, tiles + 1):
                    size = rows[v] - rows[u]
                    if size not in cost:
                        cost[size] = (stage1(size), stage2(size))
                    x, y = cost[size]
                    c2, w2 = _step(c, w, x, y, f1, f2)
                    left, k_left = m - rows[v], max_chunks - _count
                    if left and k_left == 0:
                        continue
                    bound = max(c2 + lb1(left, k_left), c2 + w2 + lb2(left, k_left))
                    if bound > upper * (1 + 1e-9):
                        continue
                    nxt[v].append((c2, w2, chunks + (size,)))
        fronts = [_pareto(f) for f in nxt]
        states += sum(len(f) for f in fronts)
        for c, w, chunks in fronts[tiles]:
            if best is None or c + w < best[0] - 1e-9:
                best = (c + w, list(chunks))
                upper = min(upper, c + w)
        fronts[tiles] = []
    if best is None:  # only when the uniform seed itself is optimal and every state tied with it
        best = seed
    sched = simulate(best[1], model, (f_mm, f_comm), comm_first)
    return {"chunks": best[1], "makespan_us": sched.makespan_us, "dp_makespan_us": best[0],
            "states": states, "max_chunks": max_chunks, "align": align_used}
