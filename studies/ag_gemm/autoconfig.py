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
    The fused Triton kernel is tried with its defaults (128x256x64 tiles, k-tiles per flag by
    shape) and, when its tiles fit one wave (the fetch is then on the critical path), with
    16 k-tiles per flag as well: over NVLink the best fetch-row size may differ from the one
    measured on one GPU (8 k-tiles; 16 was next, traces/ag-gemm/README.md). The same kernel
    with its staging filled by copy engines (``hbm-buffer-ce``) is tried wherever there are peers.
    """
    m_shard = m // world_size
    out: list[tuple[str, dict[str, Any]]] = [(BASELINE, {})]
    out.append(("ce-chunked", {"chunks": 1}))  # with one rank: the local matmul alone
    if m_shard >= 4096 and world_size > 1:
        out.append(("ce-chunked", {"chunks": 2}))
    out.append(("hbm-buffer", {}))
    if world_size > 1:
        out.append(("hbm-buffer-ce", {}))
    tiles = math.ceil(m_shard / 128) * math.ceil(n / 256) * world_size
    if tiles <= 132 and world_size > 1:
        out.append(("hbm-buffer", {"k_tiles_per_flag": 16}))
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
