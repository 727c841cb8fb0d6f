"""Mechanism tags of the ag-gemm providers: how each one moves A between GPUs, how it computes,
and what communication takes from the SMs, shown beside every number of the study.

The fused kernel's tags come from the kernel instance that ran (``HbmBuffer.mechanism``,
recorded in the variant's ``extra``: TMA or pointer loads, the copy call and how flags were
written there); the others are fixed by the provider. On ROCm the libraries' names change
(RCCL for NCCL, hipBLASLt for cuBLAS, hipMemcpyAsync for cudaMemcpyAsync), which ``vendor``
says.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

COLUMNS = ("fetch", "gemm", "sms_for_comm")
#: provider -> (how A moves, how C is computed, SMs taken by communication), NVIDIA names
_FIXED = {
    "nccl": ("NCCL all-gather kernels (SM loads and stores over NVLink), then the matmul", "cuBLAS (torch.matmul)",
             "NCCL's CTAs, while no matmul runs (no overlap)"),
    "all-gather-cat": ("NCCL all_gather into a list, then a cat (a copy kernel)", "cuBLAS (torch.matmul)",
                       "NCCL's CTAs and the cat's, while no matmul runs"),
    "torch-fused": ("copy engine: PyTorch's symmetric-memory pulls on a backend stream, stream-written signals",
                    "cuBLAS per shard (torch.ops.symm_mem.fused_all_gather_matmul)", "0 for the copies"),
    "ce-chunked": ("copy engine: cudaMemcpyAsync from symmetric memory on a side stream, an event per piece",
                   "cuBLAS per piece on the caller's stream", "0 (copy engines)"),
    "hbm-buffer": ("SM loads over NVLink: fetch rows of the persistent kernel, flags by release atomics",
                   "persistent Triton GEMM, local shard first", "shared: any of the kernel's programs takes fetch rows"),
    "hbm-buffer-ce": ("copy engine: copies on a side stream per peer, a flag per chunk written by the stream",
                      "persistent Triton GEMM, local shard first", "0 (copy engines)"),
    "all-gather": ("NCCL all-gather alone (a part of the bound)", "none", "NCCL's CTAs"),
    "matmul": ("none (A already gathered)", "cuBLAS alone (a part of the bound)", "0"),
}
_ROCM = {"NCCL": "RCCL", "cuBLAS": "hipBLASLt", "cudaMemcpyAsync": "hipMemcpyAsync", "NVLink": "Infinity Fabric",
         "cudaMemcpy2DAsync": "hipMemcpy2DAsync"}


def vendor(env: dict[str, Any] | None) -> str:
    """"rocm" for a run whose environment names a HIP runtime, else "cuda"."""
    return "rocm" if (env or {}).get("hip_runtime") else "cuda"


def tags(provider: str, extra: dict[str, Any] | None = None, vend: str = "cuda") -> dict[str, str]:
    """The provider's tags; the fused kernel's as recorded by the run where it has them."""
    rec = (extra or {}).get("mechanism")
    if isinstance(rec, dict) and all(isinstance(rec.get(c), str) for c in COLUMNS):
        out = {c: rec[c] for c in COLUMNS}
    else:
        base = provider.split("-nobarrier")[0].split("-tiles")[0]
        out = dict(zip(COLUMNS, _FIXED.get(base, ("", "", ""))))
    if vend == "rocm":
        for c in COLUMNS:
            for a, b in _ROCM.items():
                out[c] = out[c].replace(a, b)
    return out


def short(t: dict[str, str]) -> str:
    """One cell: "SM loads" / "copy engine" / "NCCL", the GEMM, the SMs taken."""
    f = t["fetch"]
    how = ("copy engine" if f.startswith("copy engine") else "SM loads" if f.startswith("SM loads")
           else "NCCL/RCCL" if f.startswith(("NCCL", "RCCL")) else f.split(" (")[0])
    gemm = ("Triton, TMA" if "TMA" in t["gemm"] else "Triton" if "Triton" in t["gemm"]
            else t["gemm"].split(" ")[0])
    return f"{how}; {gemm}; comm SMs: {t['sms_for_comm'].split(' (')[0]}"


def table(rec) -> pd.DataFrame:
    """One row per provider measured in the run (the first variant that names it): its tags."""
    seen: dict[str, dict] = {}
    vend = vendor(rec.env)
    for v in rec.variants:
        p = v.params
        if p.get("mode") == "kernel":
            continue
        prov = str(p.get("provider", p.get("method", "")))
        if prov == "auto" and p.get("picked"):
            prov_tags = tags(str(p["picked"]).split("[")[0], v.extra if isinstance(v.extra, dict) else None, vend)
        else:
            prov_tags = tags(prov, v.extra if isinstance(v.extra, dict) else None, vend)
        if prov not in seen or (isinstance(v.extra, dict) and "mechanism" in v.extra):
            seen[prov] = {"provider": prov, **prov_tags}
    return pd.DataFrame(list(seen.values()))
