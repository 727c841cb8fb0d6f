"""Inputs, reference and correctness check shared by every cpu-reduction variant.

Inputs are seeded random integers in [-8, -1] U [1, 8] stored as float32. Every partial sum
any summation order can form stays far below 2**24 in magnitude (a random walk of 64M
steps of size <= 8 strays about 1e5 from 0), so float32 arithmetic on them is exact and
every correct kernel returns exactly the float64 reference, whatever its chunking, lane
layout or thread count. The check therefore allows |result - reference| <= 0.5: exact
up to rounding, while a dropped, doubled or padded-with-garbage element (each nonzero,
|x| >= 1) moves the sum by at least 1 and fails.
"""

from __future__ import annotations

import numpy as np

TOLERANCE_ABS = 0.5
TOLERANCE_TEXT = ("|result - float64 reference| <= 0.5 (inputs are nonzero integers in [-8, 8] as float32, "
                  "so every correct summation order is exact and any lost or extra element moves the sum by >= 1)")


def make_input(n: int, seed: int) -> np.ndarray:
    """``n`` float32 values, nonzero integers in [-8, 8], from a seeded generator."""
    x = np.random.default_rng(seed).integers(-8, 8, size=n, dtype=np.int8)
    x[x == 0] = 8
    return x.astype(np.float32)


def reference(x: np.ndarray) -> float:
    return float(x.sum(dtype=np.float64))


def check(value: float, ref: float) -> tuple[bool, str]:
    """(ok, text) comparing one variant's result with the float64 reference."""
    err = abs(float(value) - ref)
    ok = bool(err <= TOLERANCE_ABS)
    return ok, f"result {float(value):.1f} vs float64 reference {ref:.1f}: |error| {err:.3g} " + (
        "<= 0.5" if ok else "> 0.5: WRONG RESULT")
