"""MLIR sources of the IREE sum programs (seed 000): no split, and split into C chunks.

``program(n, c, split)`` fills the templates beside this file:

- ``c == 1``: ``sum_nosplit.mlir.in``, the seed's program (``sum_1m.mlir`` is its verbatim
  copy for N = 1,000,000): one ``linalg.reduce`` over ``tensor<N x f32>``, one dispatch.
- ``split="aligned"`` (the seed's "c=8 fixed"): tiles of ``T = 16 * floor(N / (16 C))``
  elements, a multiple of the 16-lane vector, and the remainder ``R = N - C T`` apart (1M,
  C = 8: 8 x 124,992 + 64). IREE's split-reduction attribute
  (``iree_linalg_ext.split_reduction``) tiles the first ``C T`` elements: dispatch 0 has C
  workgroups of static shape; the R remainder elements are summed with the C partials in
  dispatch 1 (``sum_aligned.mlir.in``; no template when R = 0: the attribute on the seed's
  program). The seed's IREE (with codegen fix #24010) kept the remainder as a 9th, partial
  workgroup of dispatch 0; IREE 3.13 compiles a partial tile through a much slower
  dynamic-shape path (``split="partial-tile"`` is that program, for comparison; figures in
  ``traces/cpu-reduction/README.md``, "The seed's c=8 fixed").
- ``split="partial-tile"``: the split-reduction attribute with tile T on the whole input:
  ``ceil(N / T)`` workgroups in dispatch 0, the last one partial when T does not divide N
  (the seed's shape of "c=8 fixed": 9 shards, dispatch 1 reduces 9 -> 1).
- ``split="even"``: ``sum_split.mlir.in``: ``expand_shape`` to ``C x M`` with
  ``M = ceil(N / C)``, reduce dimension 1 (dispatch 0, C workgroups), then reduce the C
  partials (dispatch 1). When C does not divide N the input is zero-padded to ``C * M``
  first; IREE 3.13 materialises that pad as a fill + copy of the whole input before
  dispatch 0 (two more command-buffer operations), and an M that is not a multiple of 16
  takes its slow reduction codegen (1M, C = 8: M = 125,000).

Usable as a script: ``python kernels/iree/sum_programs.py N C [SPLIT] > sum.mlir``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = ("aligned", "even", "partial-tile")
LANES = 16  # f32 lanes of a 512-bit vector: tiles that are multiples of it keep the fast codegen


@dataclass(frozen=True)
class Program:
    n: int  # elements summed
    c: int  # chunks (1 = no split)
    m: int  # elements per tile (ceil(n / c) for "even")
    padded_n: int  # elements after zero padding (== n unless "even" pads)
    mlir: str
    split: str = "even"
    shards: int = 1  # workgroups of dispatch 0
    rem: int = 0  # "aligned": elements summed in dispatch 1 beside the partials

    @property
    def dispatches(self) -> int:
        """Dispatches the program is written to produce (checked against the compiled module)."""
        return 1 if self.c == 1 else 2

    @property
    def pad(self) -> int:
        return self.padded_n - self.n

    @property
    def label(self) -> str:
        """How the program splits, in a few words (tables, program info)."""
        if self.c == 1:
            return "no split"
        if self.split == "aligned":
            tail = f" + {self.rem} in dispatch 1" if self.rem else ""
            return f"{self.c} x {self.m:,}{tail}"
        if self.split == "partial-tile":
            last = self.n - (self.shards - 1) * self.m
            return f"{self.shards} tiles of {self.m:,}" + (f" (last {last:,})" if last != self.m else "")
        return f"{self.c} x {self.m:,}" + (f" (padded by {self.pad})" if self.pad else "")


def aligned_tile(n: int, c: int) -> int:
    """Tile of the aligned split: the largest multiple of 16 with c tiles fitting in n (0: none)."""
    return (n // c) // LANES * LANES


def program(n: int, c: int, split: str = "aligned") -> Program:
    """The sum program over ``n`` float32 split into ``c`` chunks (``1 <= c <= n``)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 1 <= c <= n:
        raise ValueError(f"chunks must be in 1..n ({n}), got {c}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    nosplit = (HERE / "sum_nosplit.mlir.in").read_text()
    if c == 1:
        return Program(n, 1, n, n, nosplit.format(n=n, attrs="", what=""), split)
    if split == "even":
        return _even(n, c)
    tile = aligned_tile(n, c)
    if tile == 0:
        raise ValueError(f"split={split} needs n >= 16 * c (a tile of at least 16 elements); n={n}, c={c}")
    rem = n - c * tile
    attrs = f" {{iree_linalg_ext.split_reduction = [{tile} : index]}}"
    if split == "partial-tile":
        shards = -(-n // tile)
        what = f", tiled by {tile}: {shards} workgroups in dispatch 0" + (", the last partial" if rem else "")
        return Program(n, c, tile, n, nosplit.format(n=n, attrs=attrs, what=what), split, shards)
    if rem == 0:
        what = f", tiled by {tile}: {c} workgroups in dispatch 0"
        return Program(n, c, tile, n, nosplit.format(n=n, attrs=attrs, what=what), split, c)
    text = (HERE / "sum_aligned.mlir.in").read_text().format(n=n, c=c, m=tile, rem=rem, main=c * tile)
    return Program(n, c, tile, n, text, split, c, rem)


def _even(n: int, c: int) -> Program:
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
    return Program(n, c, m, p, text, "even", c)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: sum_programs.py N C [aligned|even|partial-tile]")
    print(program(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:]).mlir, end="")
