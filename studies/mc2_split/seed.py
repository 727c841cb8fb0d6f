"""The seed's worked example as data, and what its own numbers allow.

Seed 002 (the Ascend CANN MC² tuning case, "验证优化方案性能收益") gives M=4096, K=3072,
N=8192 half: matmul 803 us, all-reduce 1071 us, serial 1874 us, the split [512, 896 x 4] and
a fused operator of 1262 us, (1874 - 1262) / 1874 = 32.7% faster. It does not print its fits;
CostMM = 16.5 us + 0.192 us/row and CostComm = 47 us + 16 us/MiB reproduce every number it
derives (803, 1071, 143 us at 6 MiB, m1 = 768). The comm fit is fixed by two of them (143 us
at 6 MiB, 1071 us at 64 MiB); the matmul fit by 803 us at 4096 rows and CostMM(m1) = 164 us,
where the seed's m1 = 768 is a rounded multiple of 128, so any raw m1 in [704, 832) fits its
text too (:data:`M1_RAW_RANGE`).

:func:`floor_rows` asks whether 1262 us is reachable under those fits with the study's own
pipeline model: the least makespan of any 128-row split with no contention at all (factor
1), and what would have to change for 1262 us (a smaller fixed cost per chunk's all-reduce,
more bandwidth, or engines that speed each other up). :func:`inflation_cases` are the seed's three
"执行时间膨胀" examples: a 200 us matmul split in two at 100, 150 and 200 us per half beside a
300 us all-reduce (150 us per half; the only all-reduce that gives the seed's gains of 100,
50 and -50 us).
"""

from __future__ import annotations

from typing import Callable

from .plan import CostModel, Fit, heuristic
from .search import best_split
from .simulate import simulate

M, K, N, DTYPE_BYTES = 4096, 3072, 8192, 2
MM_FIT = Fit(16.5, 0.192, "row")
COMM_FIT = Fit(47.0, 16.0, "MiB")
CHUNKS = [512, 896, 896, 896, 896]
MATMUL_US, ALLREDUCE_US, SERIAL_US, FUSED_US = 803.0, 1071.0, 1874.0, 1262.0
GAIN = (SERIAL_US - FUSED_US) / SERIAL_US  # 32.7%
CONTENTION = 1.15
#: raw m1 values the seed's "m1 = 768" (aligned to 128) may have come from
M1_RAW_RANGE = (704.0, 831.99)
MACHINE = "Ascend NPU, CANN MC² MatmulAllReduce sample (tiling rankDim = 8), msProf"
#: the seed's inflation examples: per-half matmul us -> the seed's gain in us
INFLATION = ((100.0, 100.0), (150.0, 50.0), (200.0, -50.0))
FLOOR_ROW = "model floor: best split, no contention"
INFLATION_LABELS = {100.0: "no inflation", 150.0: "moderate inflation", 200.0: "severe inflation"}


def model(mm: Fit = MM_FIT, comm: Fit = COMM_FIT) -> CostModel:
    return CostModel(mm, comm, N, DTYPE_BYTES)


def mm_fit_for(m1_raw: float) -> Fit:
    """The matmul line through (4096 rows, 803 us) and (m1_raw, 164 us): the seed's two matmul
    figures, with its long block before rounding."""
    t1 = COMM_FIT(384 * N * DTYPE_BYTES / 2**20) * CONTENTION  # CostComm(384 rows = 6 MiB) x 1.15 = 164 us
    slope = (MATMUL_US - t1) / (M - m1_raw)
    return Fit(MATMUL_US - slope * M, slope, "row")


def solve(f: Callable[[float], float], target: float, lo: float, hi: float, tol: float = 1e-4) -> float | None:
    """x in [lo, hi] with f(x) = target for an increasing f, or None when target lies outside
    [f(lo), f(hi)]."""
    f_lo, f_hi = f(lo), f(hi)
    if not f_lo <= target <= f_hi:
        return None
    while hi - lo > tol * max(1.0, abs(hi)):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def floor_rows() -> list[dict]:
    """The seed's measured figures beside what its fits allow (see the module doc)."""
    mod = model()
    seed_split = [simulate(CHUNKS, mod, f).makespan_us for f in (CONTENTION, 1.0)]
    best_seed_f = best_split(M, mod, CONTENTION)
    floor = best_split(M, mod, 1.0)
    floors_over_rounding = [best_split(M, model(mm_fit_for(m1)), 1.0)["makespan_us"] for m1 in M1_RAW_RANGE]

    def with_comm_fixed(fixed: float, f: float) -> float:
        return simulate(CHUNKS, model(comm=Fit(fixed, COMM_FIT.slope, "MiB")), f).makespan_us

    def with_comm_slope(slope: float) -> float:
        return simulate(CHUNKS, model(comm=Fit(COMM_FIT.fixed_us, slope, "MiB")), CONTENTION).makespan_us

    fixed_at = {f: solve(lambda c, f=f: with_comm_fixed(c, f), FUSED_US, 0.0, COMM_FIT.fixed_us) for f in
                (CONTENTION, 1.0)}
    slope = solve(with_comm_slope, FUSED_US, 0.0, COMM_FIT.slope)
    factor = solve(lambda f: simulate(CHUNKS, mod, f).makespan_us, FUSED_US, 0.25, 1.0)
    plan = heuristic(M, K, mod)
    rows = [
        ("serial (seed, measured)", SERIAL_US, "matmul 803 us + all-reduce 1071 us"),
        ("fused MC² op (seed, measured)", FUSED_US, f"the seed's gain {GAIN:.1%}"),
        ("seed's split under the seed's fits, contention 1.15", seed_split[0],
         f"{plan.chunks}; the gain this model predicts: {1 - seed_split[0] / SERIAL_US:.1%}"),
        ("seed's split, no contention (factor 1)", seed_split[1], "the least this split can take under the fits"),
        ("best split under the seed's fits, contention 1.15", best_seed_f["makespan_us"], str(best_seed_f["chunks"])),
        (FLOOR_ROW, floor["makespan_us"],
         f"{floor['chunks']}: no 128-row split of at most 16 chunks is faster under the seed's fits"),
        ("model floor over the fits the seed's rounding allows", min(floors_over_rounding),
         f"to {max(floors_over_rounding):.0f} us: raw m1 from {M1_RAW_RANGE[0]:.0f} to {M1_RAW_RANGE[1]:.0f} rows"),
    ]
    for f, fixed in fixed_at.items():
        rows.append((f"all-reduce fixed cost per chunk for 1262 us (seed's split, contention {f:g})",
                     float("nan") if fixed is None else fixed,
                     f"the fit has {COMM_FIT.fixed_us:g} us" if fixed is not None else "not reachable with any fixed cost >= 0"))
    rows.append(("all-reduce us/MiB for 1262 us (seed's split, contention 1.15, 47 us per chunk)",
                 float("nan") if slope is None else slope,
                 f"the fit has {COMM_FIT.slope:g} us/MiB" + (f": {COMM_FIT.slope / slope:.2f}x the bandwidth"
                                                             if slope else "")))
    rows.append(("contention factor for 1262 us (seed's split)", float("nan") if factor is None else factor,
                 "below 1: the engines would have to speed each other up" if factor is not None
                 else "not reachable with any factor >= 0.25"))
    return [{"quantity": q, "value": v, "note": note} for q, v, note in rows]


def inflation_cases() -> list[dict]:
    """The seed's three inflation examples through the simulator: each with its serial and
    pipelined makespan, the gain, the seed's gain and the Gantt segments."""
    rows, half_rows = 1024, 512
    # comm: 150 us per half (1 MiB of 1024 rows x 1024 x 2 B), 300 us unsplit; matmul: 200 us
    # unsplit, `half` per half: a fixed cost per chunk of 2 x half - 200 us (the inflation)
    comm = Fit(0.0, 150.0, "MiB")
    out = []
    for half, seed_gain in INFLATION:
        fixed = 2 * half - 200.0
        mm = Fit(fixed, (200.0 - fixed) / rows, "row")
        sched = simulate([half_rows, half_rows], CostModel(mm, comm, 1024, 2), 1.0)
        out.append({"case": INFLATION_LABELS[half], "half_us": half, "matmul_us": 200.0, "allreduce_us": 300.0,
                    "serial_us": sched.serial_us, "pipelined_us": sched.makespan_us,
                    "gain_us": sched.serial_us - sched.makespan_us, "seed_gain_us": seed_gain,
                    "segments": sched.segments})
    return out


def rule_row(rule: str) -> dict:
    """The seed's split rule on the seed's shape and fits, read as ``rule`` (see :mod:`.plan`)."""
    plan = heuristic(M, K, model(), CONTENTION, rule)
    return {"chunks": ",".join(map(str, plan.chunks)) if plan.ok else "", "m0": plan.steps[1].get("m0"),
            "ok": plan.ok, "reason": plan.reason or ""}
