"""The copy-engine fetch's copies on one GPU (kernels/triton/copyengine.py): what one chunk costs
the copy engine as a 1-D copy (whole rows, one contiguous block) and as a 2-D copy (a k-group:
strided rows), from pinned host memory and from device memory, and what issuing a call's
copies and flag writes costs the host.

    python benchmarks/ag_gemm_ce_copies.py            # K=8192 fp16 rows (16 KiB), 128-row M-tiles
    python benchmarks/ag_gemm_ce_copies.py --k 4096 --repeat 50

Device time: CUDA events around ``--batch`` copies queued back to back on one stream (so the
host's issue time is not in it: a GPU-side spin runs first), median over ``--repeat`` batches,
with the range; every copy's destination is compared with its source once before timing.
Host time: ``time.perf_counter`` around issuing one call's chunks (``--repeat`` calls), the
GPU synchronised between calls.
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


def issue_cost(m: int, k: int, world_size: int, repeat: int) -> list[tuple[str, int, list[float]]]:
    """Host us to queue one call's copies and flags: the fetch as built (cuda-python driver
    calls where present), and the same chunks through PyTorch (``copy_`` and its stream-write
    op under a stream switch), for the kernel-mode shapes (peers in pinned host memory)."""
    import torch

    from kernels.triton import copyengine
    from kernels.triton.ag_gemm import HbmBuffer, HbmKnobs

    ms = m // world_size
    shards = [torch.randn(ms, k, device="cuda").half() for _ in range(world_size)]
    peers = [shards[0]] + [s.cpu().pin_memory() for s in shards[1:]]
    ptrs = torch.tensor([s.data_ptr() for s in shards], dtype=torch.int64, device="cuda")
    buf = HbmBuffer(shards[0], ptrs, torch.randn(k, 3584, device="cuda").half(), 0, world_size,
                    HbmKnobs(fetch="ce"), peers=peers)
    fetch = buf.ce
    rows = []
    for label, driver in (("as built: " + ("cuda-python driver calls" if fetch.driver else "PyTorch"), fetch.driver),
                          ("PyTorch copy_ + stream-write op", None)):
        fetch.driver = driver
        samples = []
        for r in range(repeat + 2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fetch.mark_start()
            fetch.issue(r + 1)
            fetch.join()
            samples.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        ok = all(torch.equal(buf.stage_rows(s).cpu(), peers[s].cpu()) for s in range(1, world_size))
        if not ok:
            raise RuntimeError(f"{label}: staged rows differ from the peers' shards")
        rows.append((label, len(fetch.order), samples[2:]))
    fetch.driver = copyengine._driver()
    return rows


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):,.1f} [{min(xs):,.1f}, {max(xs):,.1f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--block-m", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--m", default="1024,4096,16384", help="problem sizes for the host issue cost")
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
    from workbench.env import capture, summary_line

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
    print(f"\n## host us to issue one call's copies and flag writes (kernel mode, N=3584, K={k}, fp16, "
          f"world size 2, peers in pinned host memory; median [min, max] of {args.repeat} calls)\n")
    print("| M | path | chunks | host us per call |")
    print("|---|---|---|---|")
    for m in [int(x) for x in args.m.split(",")]:
        for label, chunks, us in issue_cost(m, k, 2, args.repeat):
            print(f"| {m} | {label} | {chunks} | {fmt(us)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
