"""MLIR sources of the IREE sum programs (seed 000): no split, and split into C chunks.

``program(n, c)`` fills the templates beside this file:

- ``c == 1``: ``sum_nosplit.mlir.in``, the seed's program (``sum_1m.mlir`` is its verbatim
  copy for N = 1,000,000): one ``linalg.reduce`` over ``tensor<N x f32>``, one dispatch.
- ``c > 1``: ``sum_split.mlir.in``: ``expand_shape`` to ``C x M`` with ``M = ceil(N / C)``,
  reduce dimension 1 (dispatch 0, C workgroups), then reduce the C partials (dispatch 1).
  When C does not divide N the input is zero-padded to ``C * M`` first; the extra zeros do
  not change the sum. IREE 3.13 materialises that pad as a fill + copy of the whole input
  before dispatch 0 (two more command-buffer operations, measured, not hidden), so
  non-dividing C pays an N-element copy per call.

Usable as a script: ``python kernels/iree/sum_programs.py N C > sum.mlir``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Program:
    n: int  # elements summed
    c: int  # chunks (1 = no split)
    m: int  # elements per chunk (ceil(n / c))
    padded_n: int  # c * m: elements after zero padding (== n when c divides n)
    mlir: str

    @property
    def dispatches(self) -> int:
        """Dispatches the program is written to produce (checked against the compiled module)."""
        return 1 if self.c == 1 else 2

    @property
    def pad(self) -> int:
        return self.padded_n - self.n


def program(n: int, c: int) -> Program:
    """The sum program over ``n`` float32 split into ``c`` chunks (``1 <= c <= n``)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 1 <= c <= n:
        raise ValueError(f"chunks must be in 1..n ({n}), got {c}")
    if c == 1:
        text = (HERE / "sum_nosplit.mlir.in").read_text().format(n=n)
        return Program(n, 1, n, n, text)
    m = -(-n // c)
    p = c * m
    if p == n:
        pad, source, note = "", "%input", f"C = {c} divides N: no padding."
    else:
        pad = (f"\n  %padded = tensor.pad %input low[0] high[{p - n}] {{\n  ^bb0(%i: index):\n"
               f"    tensor.yield %cst : f32\n  }} : tensor<{n}xf32> to tensor<{p}xf32>")
        source, note = "%padded", f"C = {c} does not divide N: zero-padded by {p - n} elements."
    text = (HERE / "sum_split.mlir.in").read_text().format(
        n=n, c=c, m=m, p=p, pad=pad, source=source, pad_comment=note)
    return Program(n, c, m, p, text)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: sum_programs.py N C")
    print(program(int(sys.argv[1]), int(sys.argv[2])).mlir, end="")
