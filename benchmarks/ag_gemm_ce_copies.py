"""The copy-engine fetch's copies on one GPU (kernels/triton/copyengine.py): what one chunk costs
the copy engine as a 1-D copy (whole rows, one contiguous block) and as a 2-D copy (a k-group:
strided rows), from pinned host memory and from device memory, and what issuing a call's
copies and flag writes costs the host, per operation.

    python benchmarks/ag_gemm_ce_copies.py            # K=8192 fp16 rows (16 KiB), 128-row M-tiles
    python benchmarks/ag_gemm_ce_copies.py --k 4096 --repeat 96

Device time: CUDA events around ``--batch`` copies queued back to back on one stream (so the
host's issue time is not in it: a GPU-side spin runs first), median over ``--repeat`` batches,
with the range; every copy's destination is compared with its source once before timing.
Host time: ``time.perf_counter`` around each operation (``--repeat`` calls in blocks of 8, the
GPU synchronised between blocks), and around a whole call of the fetch as built.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPIN_CYCLES = 2_000_000  # about 1 ms at 2 GHz: longer than the host takes to queue a batch


def _runtime():
    """cuda-python's runtime bindings, or None."""
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return None
    return rt


def copy_2d(rt, dst, dpitch, src, spitch, width, height, stream) -> None:
    err, = rt.cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, rt.cudaMemcpyKind.cudaMemcpyDefault,
                                stream)
    if err != rt.cudaError_t.cudaSuccess:
        raise RuntimeError(f"cudaMemcpy2DAsync failed: {err}")


def copy_1d(rt, dst, src, nbytes, stream) -> None:
    err, = rt.cudaMemcpyAsync(dst, src, nbytes, rt.cudaMemcpyKind.cudaMemcpyDefault, stream)
    if err != rt.cudaError_t.cudaSuccess:
        raise RuntimeError(f"cudaMemcpyAsync failed: {err}")


def chunk_cases(k: int, block_m: int) -> list[tuple[str, int, int]]:
    """(label, rows, columns) of the chunks the fetch has cut or cuts: whole rows of an M-tile
    and of 4 M-tiles (1-D), a k-group of a quarter of K and of half of it (2-D, strided)."""
    return [(f"{block_m} rows x all of K (1-D)", block_m, k), (f"{4 * block_m} rows x all of K (1-D)", 4 * block_m, k),
            (f"{block_m // 4} rows x all of K (1-D)", block_m // 4, k),
            (f"{block_m} rows x K/4 (2-D)", block_m, k // 4), (f"{block_m} rows x K/2 (2-D)", block_m, k // 2),
            (f"{4 * block_m} rows x K/4 (2-D)", 4 * block_m, k // 4)]


def time_copies(rt, src, dst, rows: int, cols: int, batch: int, repeat: int) -> list[float]:
    """Per-copy device us of ``batch`` copies of rows x cols from ``src`` into ``dst`` (both
    row-major, row length K), median batch of ``repeat``; checked once first."""
    import torch

    es, k = src.element_size(), src.shape[1]
    stream = torch.cuda.current_stream().cuda_stream

    def one():
        if cols == k:
            copy_1d(rt, dst.data_ptr(), src.data_ptr(), rows * k * es, stream)
        else:
            copy_2d(rt, dst.data_ptr(), k * es, src.data_ptr(), k * es, cols * es, rows, stream)

    dst.zero_()
    one()
    torch.cuda.synchronize()
    if not torch.equal(dst[:rows, :cols].cpu(), src[:rows, :cols].cpu()):
        raise RuntimeError(f"copy of {rows} x {cols} does not match its source")
    out = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        for _ in range(batch):
            one()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / batch)
    return out


def host_ops(k: int, block_m: int, repeat: int) -> list[tuple[str, list[float]]]:
    """Host us per operation of issuing one chunk (2 MiB of pinned host rows into device
    memory, one flag), each op ``repeat`` times in blocks of 8 (the GPU synchronised between
    blocks, outside the timer): the PyTorch calls the fetch made per chunk before and the
    driver calls it makes now; then a whole call of the fetch as built (kernel mode, M=1024,
    world size 2: 4 chunks)."""
    import torch
    import torch.distributed._symmetric_memory  # noqa: F401  (registers the stream-write op)
    from torch._C._distributed_c10d import _SymmetricMemory

    from kernels.triton import copyengine
    from kernels.triton.ag_gemm import HbmBuffer, HbmKnobs

    rt = _runtime()
    src = torch.randn(4 * block_m, k, device="cuda").half().cpu().pin_memory()
    dst = torch.empty(4 * block_m, k, device="cuda", dtype=torch.half)
    flags = torch.zeros(64, dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    h = side.cuda_stream
    nbytes = block_m * k * 2
    ev = torch.cuda.Event()
    ops = [("view slicing (2 row slices, as the old per-chunk views)", lambda: (dst[0:block_m], src[0:block_m])),
           ("torch.cuda.stream(side) enter + exit", lambda: _enter_exit(side)),
           ("torch copy_(non_blocking) of the chunk", lambda: dst[:block_m].copy_(src[:block_m], non_blocking=True)),
           ("torch symm-mem stream_write_value32", lambda: _SymmetricMemory.stream_write_value32(
               flags.view(torch.uint32), 1, 1)),
           ("cudaMemcpy2DAsync (cuda-python) of a k-group, 128 rows x K/4",
            lambda: copy_2d(rt, dst.data_ptr(), k * 2, src.data_ptr(), k * 2, k // 2, block_m, h)),
           ("event record + side stream wait", lambda: (ev.record(), side.wait_event(ev)))]
    drv = copyengine._driver()
    if drv:
        ops += [("cuMemcpyAsync (cuda-python driver) of the chunk", lambda: drv[0](dst.data_ptr(), src.data_ptr(),
                                                                                   nbytes, h)),
                ("cuStreamWriteValue32 (cuda-python driver)", lambda: drv[1](h, flags.data_ptr() + 4, 1))]
    ms = 512
    shards = [torch.randn(ms, k, device="cuda").half() for _ in range(2)]
    peers = [shards[0], shards[1].cpu().pin_memory()]
    ptrs = torch.tensor([t.data_ptr() for t in shards], dtype=torch.int64, device="cuda")
    buf = HbmBuffer(shards[0], ptrs, torch.randn(k, 3584, device="cuda").half(), 0, 2, HbmKnobs(fetch="ce"),
                    peers=peers)

    def call():
        buf.ce.mark_start()
        buf.ce.issue(buf._next_epoch())
        buf.ce.join()
    ops.append((f"a whole call as built, M=1024 world size 2 ({len(buf.ce.order)} chunks)", call))
    out = []
    for label, fn in ops:
        fn()
        samples = []
        for _ in range(max(1, repeat // 8)):
            torch.cuda.synchronize()
            for _ in range(8):
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        out.append((label, samples))
    if not torch.equal(buf.stage_rows(1).cpu(), peers[1]):
        raise RuntimeError("the fetch's staged rows differ from the peer's shard")
    return out


def _enter_exit(stream) -> None:
    import torch

    with torch.cuda.stream(stream):
        pass


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):,.1f} [{min(xs):,.1f}, {max(xs):,.1f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--block-m", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=48)
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("cannot run here: no PyTorch")
        return 0
    if not torch.cuda.is_available():
        print("cannot run here: no CUDA GPU")
        return 0
    rt = _runtime()
    if rt is None:
        print("cannot run here: cuda-python (cuda.bindings) is not installed")
        return 0
    from workbench.base.env import capture, summary_line

    env = capture()
    print(f"machine: {summary_line(env)}; torch {torch.__version__}, CUDA {torch.version.cuda}\n")
    k, bm = args.k, args.block_m
    rows_max = 4 * bm
    a = torch.randn(rows_max, k, device="cuda").half()
    sources = {"pinned host": a.cpu().pin_memory(), "device (same GPU)": a.clone()}
    dst = torch.empty_like(a)
    print(f"## one chunk's copy, fp16 rows of K={k} ({k * 2 // 1024} KiB), device us per copy "
          f"(median [min, max] of {args.repeat} batches of {args.batch})\n")
    print("| source | chunk | MiB | us per copy | GB/s (median) | us per row |")
    print("|---|---|---|---|---|---|")
    for name, src in sources.items():
        for label, rows, cols in chunk_cases(k, bm):
            try:
                us = time_copies(rt, src, dst, rows, cols, args.batch, args.repeat)
            except RuntimeError as exc:
                print(f"| {name} | {label} | | failed: {exc} | | |")
                continue
            nbytes = rows * cols * 2
            med = statistics.median(us)
            print(f"| {name} | {label} | {nbytes / 2**20:.2f} | {fmt(us)} | {nbytes / med / 1e3:,.1f} | "
                  f"{med / rows:.3f} |")
    print(f"\n## host us per operation of issuing a chunk (median [min, max] of {args.repeat // 8 * 8} calls, "
          f"the GPU synchronised every 8)\n")
    print("| operation | host us |")
    print("|---|---|")
    for label, us in host_ops(k, bm, args.repeat):
        print(f"| {label} | {fmt(us)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
