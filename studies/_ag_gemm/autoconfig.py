"""Auto-config: which method and knobs to use for a shape and world size.

The choice is made on timings taken in the same run (the worker times every candidate
briefly, after its correctness check), never on a table from another machine: the same
configuration differed by up to 45% between two machines of one kind here. ``choose``
keeps the NCCL baseline unless a candidate beats it by ``margin``, so auto is never
slower than all-gather + matmul by more than the noise of its own re-measurement.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

BASELINE = "nccl"
#: a candidate must be this much faster than the baseline to replace it (noise guard)
MARGIN = 0.02


def label(method: str, knobs: Mapping[str, Any]) -> str:
    """Stable name of a candidate, e.g. ``ce-chunked[chunks=2]``."""
    if not knobs:
        return method
    return f"{method}[{','.join(f'{k}={v}' for k, v in sorted(knobs.items()))}]"


def candidates(m: int, n: int, k: int, world_size: int) -> list[tuple[str, dict[str, Any]]]:
    """Methods and knobs worth timing for this shape (baseline first).

    Copy-engine chunking: one piece per peer when each piece's matmul is large; at small
    M the pieces' matmuls are short and splitting only adds launches, so only 1 is tried.
    The fused Triton kernel is tried with its default tiles (128x256x64) and, for small
    shards that fill few SMs with 128-row tiles, with 64-row tiles and with finer flags
    (16 k-tiles per flag, 32 fetchers): the H200 traces show that with one flag per M-tile
    a 512-row shard gives only 4 fetch tasks, so 4 SMs pull 8 MB and GEMM programs wait.
    """
    m_shard = m // world_size
    out: list[tuple[str, dict[str, Any]]] = [(BASELINE, {})]
    out.append(("ce-chunked", {"chunks": 1}))  # with one rank: the local matmul alone
    if m_shard >= 4096 and world_size > 1:
        out.append(("ce-chunked", {"chunks": 2}))
    out.append(("hbm-buffer", {}))
    tiles = math.ceil(m_shard / 128) * math.ceil(n / 256) * world_size
    if tiles < 4 * 132:
        out.append(("hbm-buffer", {"block_m": 64, "block_n": 256, "num_warps": 4}))
        out.append(("hbm-buffer", {"k_tiles_per_flag": 16, "fetchers": 32}))
    if world_size > 1:
        out.append(("torch-fused", {}))
    return out


def choose(timings_ms: Mapping[str, float], margin: float = MARGIN) -> str:
    """The fastest label, unless it is not ``margin`` faster than the baseline (then the
    baseline). Labels whose timing is missing or not finite (failed check) are ignored."""
    if BASELINE not in timings_ms or not math.isfinite(timings_ms[BASELINE]):
        raise ValueError("auto-config needs a valid timing of the nccl baseline")
    valid = {k: v for k, v in timings_ms.items() if v is not None and math.isfinite(v) and v > 0}
    best = min(valid, key=valid.get)
    base = valid[BASELINE]
    return best if valid[best] <= base * (1 - margin) else BASELINE
