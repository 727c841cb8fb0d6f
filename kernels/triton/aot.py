"""Ahead-of-time compilation of the ag-gemm and mc2-split studies' Triton kernels for AMD GPUs
(gfx942: MI300X/MI325X, gfx950: MI350X/MI355X) on any machine, no GPU needed: Triton's AMD
backend compiles to AMDGCN and links a code object (hsaco) with the ``ld.lld`` it ships.

Every kernel is compiled with the arguments its host code passes on ROCm, captured rather
than written out by hand: the fused kernel's from ``HbmBuffer.launch_args`` built on CPU
tensors with ROCm's settings (no TMA descriptors, no trace; SM fetch, copy-engine fetch whose
flags a one-thread kernel writes, the GEMM path, tile-contiguous staging, the review's
barrier-off experiment), the all-reduces' and the flag kernel's by swapping their modules'
``launch`` for a recorder while the real host functions run. Each capture then goes through
Triton's own binder for the AMD target (argument types and alignment as the JIT on an AMD
GPU would see them), then ``triton.compile``.

    python -m kernels.triton.aot            # compile everything for gfx942 and gfx950, print a table
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

ARCHS = ("gfx942", "gfx950")
WARP_SIZE = 64  # a wavefront on CDNA


@dataclass
class Launch:
    """One kernel launch as the host code makes it."""

    name: str
    fn: Any  # the @triton.jit function
    args: tuple
    kwargs: dict = field(default_factory=dict)


@contextmanager
def _recording(modules, into: list[Launch], label: str):
    saved = [(m, m.launch) for m in modules]

    def record(kernel, grid, *args, **kwargs):
        into.append(Launch(f"{label}: {kernel.fn.__name__}", kernel, args, kwargs))

    try:
        for m in modules:
            m.launch = record
        yield
    finally:
        for m, fn in saved:
            m.launch = fn


def _hbm_launches(dtype: str, quick: bool = False) -> list[Launch]:
    import torch

    from kernels.triton import copyengine
    from kernels.triton.ag_gemm import HbmBuffer, HbmKnobs, ag_gemm_hbm_kernel

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    ws, m_shard, n, k = 2, 256, 512, 1024
    shards = [torch.randn(m_shard, k).to(dt) for _ in range(ws)]
    b = torch.randn(k, n).to(dt)
    ptrs = torch.tensor([s.data_ptr() for s in shards], dtype=torch.int64)
    out = torch.empty(ws * m_shard, n, dtype=dt)
    variants = {"SM fetch": ({}, {}), "tile-contiguous staging": ({"stage_layout": "tiles"}, {}),
                "barrier off (review)": ({"flag_barrier": False}, {}), "GEMM path": ({}, {"fetch": False}),
                "copy-engine fetch": ({"fetch": "ce", "ce_chunks": 2, "programs": 64}, {"peers": shards})}
    # another dtype changes only element types: its default build is enough
    keep = {"SM fetch", "copy-engine fetch"} if quick else set(variants) if dtype == "fp16" else {"SM fetch"}
    got = []
    for label, (knobs, extra) in variants.items():
        if label not in keep:
            continue
        buf = HbmBuffer(shards[0], ptrs, b, 0, ws, HbmKnobs(tma=False, **knobs), **extra)
        args, kwargs = buf.launch_args(out)
        got.append(Launch(f"ag-gemm hbm kernel, {label}, {dtype}", ag_gemm_hbm_kernel, args, kwargs))
        if buf.ce is not None:  # its flags, as ROCm writes them: a one-thread kernel
            with _recording([copyengine], got, "ag-gemm copy-engine flags"):
                copyengine.write_by_kernel(buf.flags, 0, 1)
    return got


def _allreduce_launches() -> list[Launch]:
    import torch

    import kernels.triton.allreduce as ar

    got: list[Launch] = []
    rows, n, w = 64, 256, 2
    out = torch.randn(rows, n).half()
    peer = [out.clone()]
    cnt = [torch.zeros(1, dtype=torch.int64)]
    me = torch.zeros(1, dtype=torch.int64)
    table = torch.tensor([0, rows // w], dtype=torch.int32)
    ready = torch.zeros(1, dtype=torch.int32)
    progress = torch.zeros(4 + 3, dtype=torch.int64)
    with _recording([ar], got, "mc2-split all-reduce"):
        ar.two_shot([(out.clone(), out)], cnt, me, 4, out, [out.clone()], [out.clone()], 4)
        ar.two_shot_pull(cnt, me, 1, out, peer, peer, 4)
        for fallback in (False, True):
            ar.pull_persistent(out, peer, cnt, me, ready, 1, 0, table, 4, progress, 0, fallback=fallback)
    for launch in got:
        launch.name += " (fallback)" if launch.kwargs.get("FALLBACK") else ""
    return got


def launches(quick: bool = False) -> list[Launch]:
    """Every Triton kernel of the two studies, as its host code launches it on ROCm.
    ``quick``: each kernel function once (the fused kernel with SM fetch and with copy-engine
    fetch, fp16), not every constexpr variant and dtype (what the CPU tests compile)."""
    return _hbm_launches("fp16", quick) + ([] if quick else _hbm_launches("bf16")) + _allreduce_launches()


def unavailable() -> str | None:
    """Why Triton's AMD backend cannot compile here, or None: one line."""
    try:
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler import make_backend

        make_backend(GPUTarget("hip", ARCHS[0], WARP_SIZE))
    except Exception as exc:  # a missing backend, an old triton
        return f"triton's AMD backend is not usable here ({type(exc).__name__}: {exc})"
    return None


def compile_for(launch: Launch, arch: str):
    """``triton.compile`` of one launch for ``arch`` (through Triton's binder for that target)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("hip", arch, WARP_SIZE)
    backend = make_backend(target)
    fn = launch.fn
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*launch.args, **launch.kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, launch.kwargs, bound, specialization, options)
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)


def compile_all(archs=ARCHS, quick: bool = False) -> list[dict[str, Any]]:
    """Every launch for every arch: name, arch, ok, the code object's bytes, seconds, error."""
    rows = []
    for launch in launches(quick):
        for arch in archs:
            t0 = time.perf_counter()
            try:
                k = compile_for(launch, arch)
                rows.append({"kernel": launch.name, "arch": arch, "ok": True, "hsaco_bytes": len(k.asm["hsaco"]),
                             "amdgcn_lines": k.asm["amdgcn"].count("\n"), "s": time.perf_counter() - t0, "error": ""})
            except Exception as exc:  # reported per kernel: one failure does not hide the others
                rows.append({"kernel": launch.name, "arch": arch, "ok": False, "hsaco_bytes": 0, "amdgcn_lines": 0,
                             "s": time.perf_counter() - t0, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
    return rows


def main() -> int:
    why = unavailable()
    if why:
        print(why)
        return 0
    rows = compile_all()
    print("| kernel | arch | hsaco bytes | s | |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kernel']} | {r['arch']} | {r['hsaco_bytes']} | {r['s']:.1f} | {'ok' if r['ok'] else r['error']} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
