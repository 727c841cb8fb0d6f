"""Cost fits and the seed's MC² split rule, step by step.

Fits map a row count m to microseconds: ``CostMM(m)`` is the matmul of an m-row slice
(m x K by K x N), ``CostComm(m)`` the collective of its output, x = m * N * sizeof(dtype)
bytes. A fit is a line, or a continuous two-piece line (a hinge at a knot) where one line
does not fit the measured points (the seed: "若不满足线性关系,可以采用分段拟合").

The split rule is the seed's ("切分算法步骤"), with two readings made explicit:

- The short block: the text says m0 = min(a, b, c), but the worked example (M=4096,
  K=3072, N=8192) uses m0 = 384 = c while a = 171 and b = 192. ``rule="example"`` takes
  max(a, b, c), which reproduces the example; ``rule="text"`` takes the minimum as written.
- The seed's figures 1 and 2 (the two balance pictures) are missing from the text. They are
  read as: communication-bound, the short block leads (the text says so: "短块为头块") and
  the long block's compute is set equal to the short block's communication,
  CostMM(m1) = CostComm(m0) * f; compute-bound, the mirror image: the short block trails
  and the long block's communication equals the short block's compute,
  CostComm(m1) = CostMM(m0) * f. For collectives that run before the matmul (all-gather
  then matmul) the order of the chunks is reversed, since the exposed ends swap.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

MIB = 1 << 20
GIB = 1 << 30
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
SEED_CONTENTION = 1.15  # the seed's "按经验 ... 乘以1.15的系数"
MAX_LINEAR_RESIDUAL = 0.10  # worst relative residual a single line may leave before a hinge is fitted


class SplitError(ValueError):
    """The split rule has no valid answer; ``step`` names the step that failed."""

    def __init__(self, step: str, message: str):
        self.step = step
        super().__init__(f"step '{step}': {message}")


@dataclass(frozen=True)
class Fit:
    """t(x) = fixed_us + slope * x, plus slope2 * max(0, x - knot) when ``knot`` is set.

    ``unit`` is what x counts: "row" for CostMM, "MiB" for CostComm.
    """

    fixed_us: float
    slope: float
    unit: str
    knot: float | None = None
    slope2: float = 0.0
    points: tuple[tuple[float, float], ...] = ()  # the (x, us) points it was fitted to
    source: str = "given"  # "given" by the user or "measured"

    def __call__(self, x: float) -> float:
        t = self.fixed_us + self.slope * x
        if self.knot is not None and x > self.knot:
            t += self.slope2 * (x - self.knot)
        return t

    def inverse(self, t_us: float) -> float:
        """x with fit(x) = t_us on an increasing fit (the slopes are checked by the caller)."""
        if self.knot is None or t_us <= self(self.knot):
            return (t_us - self.fixed_us) / self.slope
        return self.knot + (t_us - self(self.knot)) / (self.slope + self.slope2)

    def increasing(self) -> bool:
        return self.slope > 0 and (self.knot is None or self.slope + self.slope2 > 0)

    def describe(self) -> str:
        text = f"{self.fixed_us:.4g} us + {self.slope:.4g} us/{self.unit}"
        if self.knot is not None:
            text += f", slope {self.slope + self.slope2:.4g} us/{self.unit} above {self.knot:.4g} {self.unit}"
        return text

    def to_json(self) -> dict:
        d = asdict(self)
        d["points"] = [list(p) for p in self.points]
        d["text"] = self.describe()
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Fit":
        return cls(fixed_us=d["fixed_us"], slope=d["slope"], unit=d["unit"], knot=d.get("knot"),
                   slope2=d.get("slope2", 0.0), points=tuple(tuple(p) for p in d.get("points", ())),
                   source=d.get("source", "given"))


def parse_fit(text: str, unit: str, name: str) -> Fit:
    """``"16.5,0.192"`` -> Fit(16.5 us fixed, 0.192 us per ``unit``)."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2:
        raise ValueError(f"{name}: expected 'fixed_us,us_per_{unit.lower()}', got {text!r}")
    try:
        fixed, slope = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"{name}: expected two numbers, got {text!r}") from None
    if not (math.isfinite(fixed) and math.isfinite(slope)):
        raise ValueError(f"{name}: {text!r} is not two finite numbers")
    return Fit(fixed, slope, unit)


def _lstsq(xs: Sequence[float], ys: Sequence[float], knot: float | None) -> tuple[tuple[float, ...], float]:
    """Least squares for y = a + b x (+ c max(0, x - knot)); returns (coefficients, SSE)."""
    import numpy as np

    x = np.asarray(xs, float)
    cols = [np.ones_like(x), x] + ([np.maximum(0.0, x - knot)] if knot is not None else [])
    design = np.stack(cols, axis=1)
    coef, *_ = np.linalg.lstsq(design, np.asarray(ys, float), rcond=None)
    sse = float(((design @ coef - ys) ** 2).sum())
    return tuple(float(c) for c in coef), sse


def fit_points(xs: Sequence[float], ys: Sequence[float], unit: str) -> Fit:
    """A line through the points, or a hinge at the interior point that fits best when a
    line leaves a relative residual above 10% (needs 4+ points)."""
    if len(xs) < 2:
        raise ValueError("a fit needs at least two points")
    pts = tuple(sorted(zip(map(float, xs), map(float, ys))))
    (a, b), _ = _lstsq(xs, ys, None)
    worst = max(abs(a + b * x - y) / y for x, y in pts if y > 0)
    if worst <= MAX_LINEAR_RESIDUAL or len(pts) < 4:
        return Fit(a, b, unit, points=pts, source="measured")
    best = None
    for knot, _ in pts[1:-2]:
        coef, sse = _lstsq(xs, ys, knot)
        if best is None or sse < best[1]:
            best = (coef, sse, knot)
    (a, b, c), _, knot = best
    return Fit(a, b, unit, knot=knot, slope2=c, points=pts, source="measured")


@dataclass(frozen=True)
class CostModel:
    """CostMM and CostComm in us as functions of the row count m."""

    mm: Fit  # x = rows
    comm: Fit  # x = MiB moved
    n: int
    dtype_bytes: int

    def mib(self, m: float) -> float:
        return m * self.n * self.dtype_bytes / MIB

    def mm_us(self, m: float) -> float:
        return self.mm(m)

    def comm_us(self, m: float) -> float:
        return self.comm(self.mib(m))

    def rows_for_mm(self, t_us: float) -> float:
        return self.mm.inverse(t_us)

    def rows_for_comm(self, t_us: float) -> float:
        return self.comm.inverse(t_us) * MIB / (self.n * self.dtype_bytes)


def short_block_candidates(k: int, n: int) -> dict[str, int]:
    """The seed's empirical a, b, c: the smallest integers satisfying its three inequalities."""
    return {
        "a": math.ceil(4 * GIB / (k * n)),  # a*K*N >= 4 GiB
        "b": math.ceil(6 * MIB / (k * n / 1024 + n)),  # b*K*N/1024 + b*N >= 6 MiB
        "c": 3 * 128,  # c >= 3*128
    }


@dataclass
class Plan:
    """The heuristic's answer: chunks (rows, in execution order) and its derivation."""

    ok: bool
    chunks: list[int]
    bound: str  # "communication" | "compute"
    steps: list[dict] = field(default_factory=list)  # {"step", "text", **numbers}
    failed_step: str | None = None
    reason: str | None = None
    m0: int | None = None
    m1: int | None = None
    count: int | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _align_nearest(x: float, align: int) -> int:
    return max(align, int(round(x / align)) * align)


def heuristic(m: int, k: int, model: CostModel, contention: float = SEED_CONTENTION, rule: str = "example",
              align: int = 128, comm_first: bool = False, full_mm_us: float | None = None,
              full_comm_us: float | None = None) -> Plan:
    """The seed's split algorithm. Never raises for bad fits or shapes: a failed step gives
    ``ok=False``, its name and reason, and the unsplit chunk list [M] so a simulation still
    shows the unsplit case."""
    steps: list[dict] = []
    mm_full = model.mm_us(m) if full_mm_us is None else full_mm_us
    comm_full = model.comm_us(m) if full_comm_us is None else full_comm_us
    bound = "communication" if comm_full > mm_full else "compute"
    steps.append({"step": "bound", "mm_full_us": mm_full, "comm_full_us": comm_full, "bound": bound,
                  "text": f"full-size matmul {mm_full:.1f} us vs collective {comm_full:.1f} us "
                          f"(serial {mm_full + comm_full:.1f} us): {bound}-bound"})
    plan = Plan(ok=False, chunks=[m], bound=bound, steps=steps)
    try:
        _derive(plan, m, k, model, contention, rule, align, comm_first)
    except SplitError as exc:
        plan.ok, plan.chunks, plan.failed_step, plan.reason = False, [m], exc.step, str(exc)
        steps.append({"step": exc.step, "text": f"FAILED: {exc}"})
    return plan


def _derive(plan: Plan, m: int, k: int, model: CostModel, f: float, rule: str, align: int,
            comm_first: bool) -> None:
    steps = plan.steps
    for name, fit in (("mm_fit", model.mm), ("comm_fit", model.comm)):
        if not fit.increasing():
            raise SplitError("fits", f"{name} ({fit.describe()}) does not grow with size, so it cannot be "
                                     "inverted to balance a block")
    cand = short_block_candidates(k, model.n)
    pick = max if rule == "example" else min
    m0 = pick(cand.values())
    if rule == "example":
        why = f"max reproduces the seed example; the seed text says min, which gives {min(cand.values())}"
    else:
        why = f"min as the seed text says; the seed example uses max, {max(cand.values())}"
    steps.append({"step": "short block", **cand, "m0": m0, "rule": rule,
                  "text": f"a = {cand['a']} (a × K × N ≥ 4 GiB), b = {cand['b']} (b × K × N / 1024 + b × N ≥ 6 MiB), "
                          f"c = {cand['c']} (c ≥ 3 × 128); m0 = {pick.__name__}(a, b, c) = {m0} ({why})"})
    if m0 > m:
        raise SplitError("short block", f"M = {m} rows is smaller than the short block m0 = {m0}")
    t0 = model.mm_us(m0) * f
    t1 = model.comm_us(m0) * f
    steps.append({"step": "short block times", "t0_us": t0, "t1_us": t1, "mib": model.mib(m0),
                  "text": f"x = {m0} × {model.n} × {model.dtype_bytes} B = {model.mib(m0):.3g} MiB; "
                          f"t0 = CostMM({m0}) × {f:g} = {model.mm_us(m0):.1f} × {f:g} = {t0:.1f} us; "
                          f"t1 = CostComm({model.mib(m0):.3g} MiB) × {f:g} = {model.comm_us(m0):.1f} × {f:g} = {t1:.1f} us"})
    if t0 <= 0 or t1 <= 0:
        raise SplitError("short block times", f"a fit gives a non-positive time for m0 = {m0} rows "
                                              f"(t0 = {t0:.1f} us, t1 = {t1:.1f} us)")
    if plan.bound == "communication":
        raw = model.rows_for_mm(t1)
        how = f"CostMM(m1) = t1 = {t1:.1f} us"
    else:
        raw = model.rows_for_comm(t0)
        how = f"CostComm(m1) = t0 = {t0:.1f} us"
    if raw <= 0:
        raise SplitError("balance", f"{how} has no positive solution (m1 = {raw:.1f} rows): the fit's fixed "
                                    "time is already longer than the short block's time")
    m1 = _align_nearest(raw, align)
    steps.append({"step": "balance", "m1_raw": raw, "m1": m1,
                  "text": f"{how} → m1 = {raw:.1f} rows, aligned to {align}: {m1}"})
    rest = m - m0
    count = rest // m1
    steps.append({"step": "count", "count_raw": rest / m1, "count": count,
                  "text": f"count = floor((M − m0) / m1) = floor(({m} − {m0}) / {m1}) = floor({rest / m1:.2f}) = {count}"})
    if count < 1:
        raise SplitError("count", f"the long block m1 = {m1} rows is longer than the {rest} rows left after "
                                  f"the short block")
    m1_even = rest / count
    m1 = int(m1_even // align) * align
    steps.append({"step": "adjust long", "m1_even": m1_even, "m1": m1,
                  "text": f"m1 = (M − m0) / count = {rest} / {count} = {m1_even:.1f}, down to a multiple of {align}: {m1}"})
    if m1 < align:
        raise SplitError("adjust long", f"(M - m0)/count = {m1_even:.1f} rows is below one {align}-row tile")
    m0 = m - m1 * count
    steps.append({"step": "adjust short", "m0": m0,
                  "text": f"m0 = M − m1 × count = {m} − {m1} × {count} = {m0}"})
    short_first = (plan.bound == "communication") != comm_first
    chunks = [m0] + [m1] * count if short_first else [m1] * count + [m0]
    steps.append({"step": "chunks", "chunks": chunks,
                  "text": f"{len(chunks)} blocks, short block {'first' if short_first else 'last'}: {chunks}"})
    plan.ok, plan.chunks, plan.m0, plan.m1, plan.count = True, chunks, m0, m1, count


def uniform_chunks(m: int, count: int, align: int = 128) -> list[int] | None:
    """``count`` chunks of whole ``align``-row tiles as equal as possible (last one takes a
    partial tile); None when M has fewer tiles than ``count``."""
    tiles = math.ceil(m / align)
    if count < 1 or count > tiles:
        return None
    sizes = [(tiles // count + (1 if i < tiles % count else 0)) * align for i in range(count)]
    sizes[-1] -= tiles * align - m
    return sizes


def short_chunks(chunks: str) -> str:
    """A chunk list as people write it, runs of one size folded: "256,256,256,512" ->
    "256 x 3, 512" (a 30-chunk split otherwise fills a page's table cell); anything that is
    not a comma-separated list of integers comes back unchanged."""
    parts = [p.strip() for p in str(chunks).strip("[]").split(",")]
    if not all(p.isdigit() for p in parts):
        return str(chunks)
    runs: list[list] = []
    for p in parts:
        if runs and runs[-1][0] == p:
            runs[-1][1] += 1
        else:
            runs.append([p, 1])
    return ", ".join(p if n == 1 else f"{p} x {n}" for p, n in runs)
