"""Two-engine pipeline simulation of a chunked matmul + collective.

Engines: compute and communication, each running its chunks in order. With
``comm_first=False`` (matmul then all-reduce / reduce-scatter) chunk i's collective starts
after chunk i's matmul and chunk i-1's collective; with ``comm_first=True`` (all-gather then
matmul) chunk i's matmul follows its collective. While both engines are busy each runs
slower: the compute engine by ``f_mm``, the communication engine by ``f_comm`` (the seed's
single 1.15 sets both). A task's length is its fitted solo time; under contention it
progresses at 1/f of its solo rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from . import seed
from .plan import CostModel, Fit


def factors(contention: float | Sequence[float]) -> tuple[float, float]:
    """A scalar contention factor applies to both engines; a pair is (compute, comm)."""
    if isinstance(contention, (int, float)):
        return float(contention), float(contention)
    f_mm, f_comm = contention
    return float(f_mm), float(f_comm)


@dataclass
class Schedule:
    chunks: list[int]
    makespan_us: float
    serial_us: float  # unsplit matmul + unsplit collective, one after the other
    segments: list[dict] = field(default_factory=list)  # {chunk, rows, engine, start_us, end_us}

    @property
    def gain(self) -> float:
        """The seed's MC² gain: (serial - fused) / serial."""
        return (self.serial_us - self.makespan_us) / self.serial_us

    def to_json(self) -> dict:
        return {"chunks": self.chunks, "makespan_us": self.makespan_us, "serial_us": self.serial_us,
                "gain": self.gain, "segments": self.segments}


def stage_times(chunks: Sequence[int], model: CostModel, comm_first: bool) -> tuple[list[float], list[float]]:
    """Solo times of the first and second stage of each chunk."""
    mm = [model.mm_us(c) for c in chunks]
    comm = [model.comm_us(c) for c in chunks]
    return (comm, mm) if comm_first else (mm, comm)


def simulate(chunks: Sequence[int], model: CostModel, contention: float | Sequence[float] = 1.15,
             comm_first: bool = False) -> Schedule:
    """Event simulation of the two engines; returns the makespan and one segment per task.

    Every step finishes at least one task, so it takes at most 2 steps per chunk: times that
    are not finite (NaN would never finish a task) and factors that are not positive raise
    ValueError before the loop, and a step cap stops it should a task ever stay unfinished.
    (A fit with a negative fixed term gives negative times; they are simulated as given.)"""
    f_mm, f_comm = factors(contention)
    first, second = stage_times(chunks, model, comm_first)
    bad = [t for t in [*first, *second, f_mm, f_comm] if not math.isfinite(t)]
    if bad or f_mm <= 0 or f_comm <= 0:
        raise ValueError(f"cannot simulate: a fit gives a time that is not finite, or a contention factor is not "
                         f"positive ({bad[0] if bad else min(f_mm, f_comm)!r})")
    f1, f2 = (f_comm, f_mm) if comm_first else (f_mm, f_comm)
    names = ("comm", "compute") if comm_first else ("compute", "comm")
    n = len(chunks)
    t = 0.0
    i1, i2 = 0, 0  # next unfinished task on each engine
    left1 = first[0] if n else 0.0
    left2 = second[0] if n else 0.0
    start1, start2 = 0.0, None
    segs: list[dict] = []
    steps = 0
    while i2 < n:
        steps += 1
        if steps > 2 * n + 2:
            raise ValueError(f"simulation made no progress after {steps - 1} steps for {n} chunks")
        run1 = i1 < n
        run2 = i2 < i1  # the second stage of chunk i2 waits for its first stage
        if run2 and start2 is None:
            start2 = t
        both = run1 and run2
        r1 = 1.0 / f1 if both else 1.0
        r2 = 1.0 / f2 if both else 1.0
        dt1 = left1 / r1 if run1 else float("inf")
        dt2 = left2 / r2 if run2 else float("inf")
        dt = min(dt1, dt2)
        t += dt
        if run1:
            left1 -= dt * r1
        if run2:
            left2 -= dt * r2
        if run1 and dt1 <= dt:
            segs.append({"chunk": i1, "rows": chunks[i1], "engine": names[0], "start_us": start1, "end_us": t})
            i1 += 1
            if i1 < n:
                left1, start1 = first[i1], t
        if run2 and dt2 <= dt:
            segs.append({"chunk": i2, "rows": chunks[i2], "engine": names[1], "start_us": start2, "end_us": t})
            i2 += 1
            if i2 < n:
                left2, start2 = second[i2], None
    m = sum(chunks)
    serial = model.mm_us(m) + model.comm_us(m)
    return Schedule(list(chunks), t, serial, sorted(segs, key=lambda s: (s["start_us"], s["engine"])))


def fit_contention(runs: Sequence[tuple[Sequence[int], float]], model: CostModel, comm_first: bool = False,
                   lo: float = 1.0, hi: float = 3.0, step: float = 0.01) -> dict:
    """Contention factors that best predict measured makespans.

    ``runs`` are (chunks, measured us). Fits one factor for both engines and a (compute,
    comm) pair on a grid, minimising the worst relative error; returns both with errors.
    """
    grid = [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]

    def worst(pair) -> float:
        return max(abs(simulate(c, model, pair, comm_first).makespan_us - us) / us for c, us in runs)

    single = min(grid, key=lambda f: worst((f, f)))
    coarse = grid[::5]
    pair = min(((a, b) for a in coarse for b in coarse), key=worst)
    # refine the pair on the fine grid around the coarse optimum
    near = [g for g in grid if abs(g - pair[0]) <= 5 * step]
    near2 = [g for g in grid if abs(g - pair[1]) <= 5 * step]
    pair = min(((a, b) for a in near for b in near2), key=worst)
    return {"single": single, "single_worst_err": worst((single, single)),
            "pair": list(pair), "pair_worst_err": worst(pair)}


def inflation_cases() -> list[dict]:
    """The seed's three inflation examples through the simulator: each with its serial and
    pipelined makespan, the gain, the seed's gain and the Gantt segments."""
    rows, half_rows = 1024, 512
    # comm: 150 us per half (1 MiB of 1024 rows x 1024 x 2 B), 300 us unsplit; matmul: 200 us
    # unsplit, `half` per half: a fixed cost per chunk of 2 x half - 200 us (the inflation)
    comm = Fit(0.0, 150.0, "MiB")
    out = []
    for half, seed_gain in seed.INFLATION:
        fixed = 2 * half - 200.0
        mm = Fit(fixed, (200.0 - fixed) / rows, "row")
        sched = simulate([half_rows, half_rows], CostModel(mm, comm, 1024, 2), 1.0)
        out.append({"case": seed.INFLATION_LABELS[half], "half_us": half, "matmul_us": 200.0, "allreduce_us": 300.0,
                    "serial_us": sched.serial_us, "pipelined_us": sched.makespan_us,
                    "gain_us": sched.serial_us - sched.makespan_us, "seed_gain_us": seed_gain,
                    "segments": sched.segments})
    return out
