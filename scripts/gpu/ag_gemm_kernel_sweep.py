"""Ablation sweep of the fused all-gather + GEMM kernel on one GPU (the numbers behind the
ablation table in traces/ag-gemm/README.md).

    python scripts/gpu/ag_gemm_kernel_sweep.py --plan gemm,fetch --old OLD_KERNEL.py --out DIR

Each plan is a list of variants (label, method, world size, knobs); for each dtype and M every
variant is built and checked against the fp32 reference (a failed check or an error is
reported, never timed), the correct ones are timed together (``kernelbench.time_interleaved``:
CUDA events per call, L2 flushed before each, round-robin) and checked again. ``--old`` is a
file holding an earlier ``kernels/triton/ag_gemm.py`` (e.g. ``git show 9250dc7:kernels/...``)
timed beside the current one as the baseline. Results: DIR/sweep.jsonl (one line per variant,
raw samples included, written as each shape finishes) and a table on stdout, sorted by time.
``--dry-run`` checks every variant at tiny shapes on the CPU under Triton's interpreter.
``--pick`` reads DIR/sweep.jsonl instead and prints, as ``--set`` arguments for
``benchmarks/ag_gemm_kernel.py``, the knobs of the emulated world-size-2 variant with the lowest
mean time over cuBLAS's (over dtypes and M), unless the defaults are within 0.3% of it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

#: the GEMM path at world size 1: what each change to the kernel buys (knobs over the defaults)
BASE = {"block_m": 128, "block_n": 256, "block_k": 64, "num_warps": 8, "num_stages": 4, "stream_k": 1, "tma": True}
FETCH = BASE | {"k_tiles_per_flag": 16, "fetchers": 16}
PLANS = {
    "gemm": [
        ("old kernel (before this issue)", "kernel", 1, "old", {}),
        ("persistent queue, pointer loads, whole tiles, 3 stages", "kernel", 1, "new",
         BASE | {"tma": False, "stream_k": 0, "num_stages": 3}),
        ("+ TMA loads/stores, 3 stages", "kernel", 1, "new", BASE | {"stream_k": 0, "num_stages": 3}),
        ("+ 4 stages", "kernel", 1, "new", BASE | {"stream_k": 0}),
        ("+ stream-K (k-aligned pieces)", "kernel", 1, "new", BASE),
        ("stream-K, 3 stages", "kernel", 1, "new", BASE | {"num_stages": 3}),
        ("stream-K, 2 pieces per tile", "kernel", 1, "new", BASE | {"sk_split": 2}),
        ("stream-K, 4 pieces per tile", "kernel", 1, "new", BASE | {"sk_split": 4}),
        ("stream-K, pointer loads, 3 stages", "kernel", 1, "new", BASE | {"tma": False, "num_stages": 3}),
        ("stream-K, C stored without TMA", "kernel", 1, "new", BASE | {"tma_store": False}),
        ("stream-K, group_m 16", "kernel", 1, "new", BASE | {"group_m": 16}),
        ("GEMM path at ws2 (staged, flags set)", "gemm-path", 2, "new", BASE),
        ("GEMM path at ws4 (staged, flags set)", "gemm-path", 4, "new", BASE),
    ],
    "fetch": [
        ("old kernel, emulated ws2", "emulated", 2, "old", {}),
        *[(f"emulated ws{ws}: {kpf or 'all'} k-tiles per flag, {fe} fetch rows first", "emulated", ws, "new",
           FETCH | {"k_tiles_per_flag": kpf, "fetchers": fe})
          for ws in (2, 4) for kpf in (0, 32, 16, 8) for fe in (16, 100000) if not (ws == 4 and (kpf == 0 or fe > 16))],
        ("emulated ws2: wait per group", "emulated", 2, "new", FETCH | {"wait_per_group": True}),
        ("emulated ws2: fetch loads of 128 columns", "emulated", 2, "new", FETCH | {"fetch_k": 128}),
        ("emulated ws2: fetch loads of 512 columns", "emulated", 2, "new", FETCH | {"fetch_k": 512}),
        ("emulated ws2: 3 stages", "emulated", 2, "new", FETCH | {"num_stages": 3}),
        ("emulated ws2: tile-contiguous staging", "emulated", 2, "new", FETCH | {"stage_layout": "tiles"}),
    ],
    # k-tiles per flag by shape (the default) against fixed sizes and more rows at the head
    "flags": [
        *[(f"emulated ws{ws}: flags by shape", "emulated", ws, "new", BASE) for ws in (2, 4)],
        *[(f"emulated ws2: {kpf or 'all'} k-tiles per flag, {fe} fetch rows first", "emulated", 2, "new",
           BASE | {"k_tiles_per_flag": kpf, "fetchers": fe}) for kpf in (0, 4, 8, 16) for fe in (16, 64)],
    ],
    # the fetch path at M >= 4096: where fetch rows sit, their L2 policy, finer stream-K cuts
    "queue": [
        ("emulated ws2: flags by shape", "emulated", 2, "new", BASE),
        *[(f"emulated ws2: {fe} fetch rows first", "emulated", 2, "new", BASE | {"fetchers": fe}) for fe in (0, 4, 8)],
        ("emulated ws2: evict-first fetch loads", "emulated", 2, "new", BASE | {"fetch_evict": True}),
        ("emulated ws2: evict-first, 4 fetch rows first", "emulated", 2, "new",
         BASE | {"fetch_evict": True, "fetchers": 4}),
        *[(f"emulated ws2: stream-K {s} pieces", "emulated", 2, "new", BASE | {"sk_split": s}) for s in (3, 4)],
        ("emulated ws2: 64 k-tiles per flag", "emulated", 2, "new", BASE | {"k_tiles_per_flag": 64}),
        ("emulated ws4: flags by shape", "emulated", 4, "new", BASE),
        ("emulated ws4: evict-first fetch loads", "emulated", 4, "new", BASE | {"fetch_evict": True}),
        ("emulated ws4: 4 fetch rows first", "emulated", 4, "new", BASE | {"fetchers": 4}),
    ],
    # issue 47, M=1024 (one wave: 112 tiles of 128 x 256 on 132 SMs, so every remote tile's fetch is
    # exposed): more, smaller tiles; k-groups computed as they land; fetch order and flag size
    "small-m": [
        ("GEMM path ws1: 64-row tiles", "kernel", 1, "new", BASE | {"block_m": 64}),
        *[(f"emulated ws{ws}: flags by shape", "emulated", ws, "new", BASE) for ws in (2, 4)],
        *[(f"emulated ws{ws}: 64-row tiles", "emulated", ws, "new", BASE | {"block_m": 64}) for ws in (2, 4)],
        ("emulated ws4: wait per group", "emulated", 4, "new", BASE | {"wait_per_group": True}),
        ("emulated ws4: 64-row tiles, wait per group", "emulated", 4, "new",
         BASE | {"block_m": 64, "wait_per_group": True}),
        ("emulated ws4: every fetch row first", "emulated", 4, "new", BASE | {"fetchers": 100000}),
        ("emulated ws4: 4 k-tiles per flag", "emulated", 4, "new", BASE | {"k_tiles_per_flag": 4}),
        ("emulated ws4: whole tiles (no stream-K)", "emulated", 4, "new", BASE | {"stream_k": 0}),
        ("emulated ws4: k-group-major fetch, wait per group", "emulated", 4, "new",
         BASE | {"fetch_order": "k", "wait_per_group": True}),
        ("emulated ws4: k-group-major fetch, wait per group, 32 k-tiles per flag", "emulated", 4, "new",
         BASE | {"fetch_order": "k", "wait_per_group": True, "k_tiles_per_flag": 32}),
    ],
}
TRACED = ("GEMM path at ws2 (staged, flags set)", "emulated ws2: 16 k-tiles per flag, 16 fetch rows first")


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def pick(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    ratios: dict[str, list[float]] = {}
    knobs: dict[str, dict] = {}
    for r in rows:
        if r.get("ok") and r["label"].startswith("emulated ws2") and "time_ratio" in r:
            ratios.setdefault(r["label"], []).append(r["time_ratio"])
            knobs[r["label"]] = r["knobs"]
    full = max(map(len, ratios.values()))
    mean = {label: sum(v) / len(v) for label, v in ratios.items() if len(v) == full}
    for label, value in sorted(mean.items(), key=lambda kv: kv[1]):
        print(f"{value:.4f}  {label}", file=sys.stderr)
    best = min(mean, key=mean.get)
    default = "emulated ws2: flags by shape"
    if default in mean and mean[best] > mean[default] - 0.003:
        best = default
    print(f"picked: {best}", file=sys.stderr)
    return " ".join(f"--set {k}={v}" for k, v in knobs[best].items() if k not in BASE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="gemm,fetch")
    ap.add_argument("--m", default="1024,4096,16384")
    ap.add_argument("--n", type=int, default=3584)
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--old", type=Path, help="an earlier kernels/triton/ag_gemm.py, timed as the baseline")
    ap.add_argument("--only", default="", help="run only the variants whose label contains this text")
    ap.add_argument("--trace", action="store_true", help="also save per-row traces of the TRACED variants")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter, tiny shapes, checks only")
    ap.add_argument("--pick", action="store_true", help="print the best emulated-ws2 knobs of OUT/sweep.jsonl")
    args = ap.parse_args(argv)
    if args.pick:
        print(pick(args.out / "sweep.jsonl"))
        return 0
    if args.dry_run and os.environ.get("TRITON_INTERPRET") != "1":
        print("--dry-run needs TRITON_INTERPRET=1 in the environment", file=sys.stderr)
        return 2
    import numpy as np
    import torch

    import kernels.triton.ag_gemm as new
    from studies.ag_gemm import kernelbench as kb

    mods = {"new": new, "old": load_module(args.old, "old_ag_gemm") if args.old else None}
    variants = [v for p in args.plan.split(",") for v in PLANS[p] if args.only in v[0]]
    variants = [v for v in variants if mods[v[3]] is not None]
    device = "cpu" if args.dry_run else "cuda"
    args.out.mkdir(parents=True, exist_ok=True)
    log = open(args.out / "sweep.jsonl", "a")
    if not args.dry_run:
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
              f"triton {__import__('triton').__version__}", flush=True)
    rows = []
    traces: dict = {}
    for dtype in args.dtype.split(","):
        for m in map(int, args.m.split(",")):
            n, k = args.n, args.k
            prob = kb.make_problem(m, n, k, dtype, device=device)
            built = [("cuBLAS", "cublas", 1, "new", {}, kb.build("cublas", prob, 1, None))]
            for label, method, ws, which, knobs in variants:
                t0 = time.perf_counter()
                try:
                    c = kb.build(method, prob, ws, kb.knobs_from(knobs, mods[which]), kmod=mods[which])
                    ok, msg = kb.check(c, prob)
                except Exception as exc:
                    traceback.print_exc()
                    ok, msg, c = False, f"error: {type(exc).__name__}: {exc}"[:400], None
                print(f"  {dtype} M={m} {label}: {msg} ({time.perf_counter() - t0:.1f} s)", flush=True)
                if ok:
                    built.append((label, method, ws, which, knobs, c))
                else:
                    rows.append({"label": label, "dtype": dtype, "M": m, "ok": False, "check": msg})
                    log.write(json.dumps(rows[-1]) + "\n")
            if args.dry_run:
                continue
            samples = kb.time_interleaved([b[-1].fn for b in built], args.repeat)
            base = samples[0]
            for (label, method, ws, which, knobs, c), s in zip(built, samples):
                ok, msg = kb.check(c, prob)
                r = kb.paired_ratio(base, s)
                ratio, lo, hi = r.point, r.lo, r.hi
                row = {"label": label, "method": method, "world_size": ws, "kernel": which, "knobs": knobs,
                       "dtype": dtype, "M": m, "N": n, "K": k, "ok": ok, "check": msg,
                       "median_us": float(np.median(s)) / 1e3, "time_ratio": ratio, "ratio_ci": [lo, hi],
                       "samples_ns": s}
                rows.append(row)
                log.write(json.dumps(row) + "\n")
            log.flush()
            if args.trace:
                for label, method, ws, which, knobs, c in built:
                    if label in TRACED:
                        t = kb.build(method, prob, ws, kb.knobs_from(knobs, new), trace=True)
                        t.fn()
                        kb.check(t, prob)
                        traces[f"{dtype}_m{m}_{TRACED.index(label)}"] = t.hbm.trace_records()
                np.savez_compressed(args.out / "traces.npz", **traces)
            del built, prob
            torch.cuda.empty_cache()
    print("\n| dtype | M | variant | median us | time / cuBLAS [95% CI] |\n|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["dtype"], r["M"], r.get("time_ratio", 9e9))):
        if not r["ok"]:
            print(f"| {r['dtype']} | {r['M']} | {r['label']} | FAILED: {r['check'][:60]} | |")
        elif "median_us" in r:
            print(f"| {r['dtype']} | {r['M']} | {r['label']} | {r['median_us']:.1f} | {r['time_ratio']:.3f} "
                  f"[{r['ratio_ci'][0]:.3f}, {r['ratio_ci'][1]:.3f}] |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
