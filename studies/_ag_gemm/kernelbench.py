"""The fused kernel's two halves on one GPU: ``mode=kernel`` of the ag-gemm study.

For each dtype and M (all ranks' rows together), on one GPU, every output checked against an
fp32 reference before its time counts and again after the timed calls:

- ``cublas``: ``torch.matmul`` of the whole problem, the reference time;
- ``kernel`` (world size 1): the HBM-buffer kernel with every tile local, read in place;
- ``gemm-path`` (world size W): rank 0 of W with the staging buffer filled beforehand and every
  flag already set, no fetch rows: the GEMM path alone, remote tiles read from staging;
- ``emulated`` (world size W): the whole kernel as rank 0 of W, its fetch rows copying the other
  shards from local buffers that stand in for the peers' symmetric memory, flags set as the
  blocks land. Against ``gemm-path`` it gives the fetch path's cost without NVLink.

Clock: CUDA events around each call, the L2 written over (a 256 MiB buffer zeroed) before every
call as ``triton.testing.do_bench`` does, then a GPU-side spin of about 0.2 ms so that the host
has queued the call before its start event runs (a launch that takes the host longer than the
flush would otherwise count host time: seen on an H200 at M=1024, where the flush takes 55 us
and a launch with TMA descriptors about as long); variants sampled round-robin, the order rotated
each round, so clock drift spreads over all of them. (This module times for itself until
the workbench's GPU timer offers per-call L2 flushing.) A ratio to cuBLAS is the median over
rounds of the round's two samples' ratio, with a bootstrap CI: samples of one round are
taken within a millisecond or two of each other, so the pairing cancels the drift of an
H100's clocks under sustained matrix work (bimodal samples that make the medians' CIs wide).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import pandas as pd

from studies._ag_gemm import methods, spans
from workbench.untrusted import escape as esc

METHODS = ("cublas", "kernel", "gemm-path", "emulated")
#: the issue's targets (N=3584, K=8192): (what, M at least) -> bound. Throughput ratio of the
#: GEMM path (``gemm-path`` at W=2 and ``kernel`` at W=1) to cuBLAS at least the bound; time of
#: the emulated world size 2 over cuBLAS's at most the bound.
TARGETS = {("gemm", 4096): 0.95, ("gemm", 0): 0.85, ("emulated-ws2", 4096): 1.10, ("emulated-ws2", 0): 1.25}
FLUSH_BYTES = 256 << 20  # over the L2 of an H100 (50 MB) or H200 (60 MB)
SPIN_CYCLES = 400_000  # about 0.2 ms at 2 GHz: longer than any launch takes the host


def target(kind: str, m: int, n: int, k: int) -> float | None:
    """The issue's bound for ``kind`` ("gemm" or "emulated-ws2") at this shape, if any."""
    if (n, k) != (3584, 8192):
        return None
    return TARGETS[(kind, 4096 if m >= 4096 else 0)]


def knobs_from(params: dict[str, Any], kmod: ModuleType | None = None):
    """The kernel's knobs from the study parameters that name one of its fields."""
    if kmod is None:
        import kernels.triton.ag_gemm as kmod
    fields = kmod.HbmKnobs.__dataclass_fields__
    return kmod.HbmKnobs(**{k: v for k, v in params.items() if k in fields})


@dataclass
class Problem:
    a: Any  # [M, K]: every rank's rows
    b: Any  # [K, N]
    ref: Any  # fp32 [M, N]
    dtype: str

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.a.shape[0], self.b.shape[1], self.a.shape[1]


def make_problem(m: int, n: int, k: int, dtype: str, seed: int = 0, device: str = "cuda") -> Problem:
    """Random normal A and B (drawn in fp32, rounded to ``dtype``) and the fp32 reference.
    ``device="cpu"`` runs the kernel under Triton's interpreter (tests, dry runs)."""
    import torch

    dt = methods.torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(seed * 7919 + 1000)
    a = torch.randn(m, k, device=device, generator=gen).to(dt)
    b = torch.randn(k, n, device=device, generator=gen).to(dt)
    return Problem(a, b, a.float() @ b.float(), dtype)


@dataclass
class Contestant:
    fn: Callable[[], Any]
    out: Any
    hbm: Any = None  # the kernel's HbmBuffer (timeout word, trace)
    peers: Any = None  # the emulated peers' shards: alive as long as the kernel reads them


def build(method: str, prob: Problem, world_size: int, knobs, trace: bool = False,
          kmod: ModuleType | None = None) -> Contestant:
    """One variant as rank 0 of ``world_size``; ``kmod`` is the kernel module (the sweep
    script passes an older version for its ablation baseline)."""
    import torch

    m, n, k = prob.shape
    dev = prob.a.device
    out = torch.empty(m, n, device=dev, dtype=prob.a.dtype)
    if method == "cublas":
        return Contestant(lambda: torch.matmul(prob.a, prob.b, out=out), out)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if kmod is None:
        import kernels.triton.ag_gemm as kmod
    if method == "kernel":
        world_size = 1
    if m % world_size:
        raise ValueError(f"M={m} is not divisible by world size {world_size}")
    ms = m // world_size
    # Each shard in its own allocation, as every rank's symmetric-memory buffer is (row blocks
    # of one A start off 16-byte boundaries when K*2 is not a multiple of 16).
    shards = [prob.a] if world_size == 1 else [prob.a[r * ms:(r + 1) * ms].clone() for r in range(world_size)]
    ptrs = torch.tensor([s.data_ptr() for s in shards], dtype=torch.int64, device=dev)
    extra = {"fetch": False} if method == "gemm-path" else {}
    hb = kmod.HbmBuffer(shards[0], ptrs, prob.b, 0, world_size, knobs, trace=trace, **extra)
    if method == "gemm-path":
        for src in range(1, world_size):
            hb.stage_rows(src).copy_(shards[src])
    return Contestant(lambda: hb(out), out, hb, shards)


def check(c: Contestant, prob: Problem) -> tuple[bool, str]:
    """Poison the output, run once, compare with the fp32 reference; a flag wait that gave
    up fails the check too."""
    import torch

    c.out.fill_(float("nan"))
    c.fn()
    if c.out.is_cuda:
        torch.cuda.synchronize()
    ok, msg = methods.check(c.out, prob.ref, prob.dtype)
    if c.hbm is not None and c.hbm.timed_out():
        ok, msg = False, f"a flag wait timed out; {msg}"
    return ok, msg


def time_interleaved(fns: list[Callable[[], Any]], repeat: int, warmup: int = 3) -> list[list[float]]:
    """Per-call ns of every fn, ``repeat`` samples each: CUDA events around each call, L2
    written over before it; one sample of each fn per round, the order rotated each round."""
    import torch

    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    for fn in fns:
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
              for _ in fns]
    for r in range(repeat):
        for i in [(r + j) % len(fns) for j in range(len(fns))]:
            flush.zero_()
            torch.cuda._sleep(SPIN_CYCLES)
            start, end = events[i][r]
            start.record()
            fns[i]()
            end.record()
    torch.cuda.synchronize()
    return [[start.elapsed_time(end) * 1e6 for start, end in evs] for evs in events]


def entries(params: dict[str, Any]) -> list[tuple[str, int]]:
    """(method, world size) of one shape, cuBLAS first."""
    out = [("cublas", 1), ("kernel", 1)]
    for ws in params["emulate"]:
        out += [("gemm-path", ws), ("emulated", ws)]
    return out


def variant_name(method: str, ws: int, dtype: str, m: int) -> str:
    return f"{method}/{dtype}/m{m}" if method in ("cublas", "kernel") else f"{method}-ws{ws}/{dtype}/m{m}"


def run(params: dict[str, Any], ctx) -> dict[str, Any]:
    """Check and time every entry of every shape on GPU 0 (see the module docstring)."""
    import torch
    from workbench.study import VariantResult

    knobs = knobs_from(params)
    n, k = params["n"], params["k"]
    shapes = [(d, m) for d in params["dtype"] for m in params["m"]]
    for step, (dtype, m) in enumerate(shapes):
        ctx.progress(step / len(shapes), f"{dtype} M={m}: checking")
        prob = make_problem(m, n, k, dtype, params["seed"])
        contestants = []
        for method, ws in entries(params):
            variant = variant_name(method, ws, dtype, m)
            vparams = {"mode": "kernel", "method": method, "world_size": ws, "dtype": dtype, "M": m, "N": n, "K": k}
            if method != "cublas":
                vparams |= dataclasses.asdict(knobs)
            try:
                c = build(method, prob, ws, knobs)
                ok, msg = check(c, prob)
            except Exception as exc:  # recorded as a failed variant; the sweep goes on
                ok, msg = False, f"error: {type(exc).__name__}: {exc}"[:500]
            if ok:
                contestants.append((variant, vparams, c, msg))
            else:
                ctx.record(VariantResult(variant, vparams, [], False, msg))
        ctx.progress((step + 0.5) / len(shapes), f"{dtype} M={m}: timing {len(contestants)} variants interleaved")
        samples = time_interleaved([c.fn for _, _, c, _ in contestants], params["repeat"])
        for (variant, vparams, c, msg), s in zip(contestants, samples):
            ok, msg2 = check(c, prob)  # a flag or epoch race shows under back-to-back calls
            ctx.record(VariantResult(variant, vparams, s if ok else [], ok, msg if ok else f"after timing: {msg2}"))
        if params["trace"] != "off" and params["emulate"]:
            ws = params["emulate"][0]
            c = build("emulated", prob, ws, knobs, trace=True)
            if check(c, prob)[0]:
                c.fn()  # a warm launch's trace, not the first one's
                torch.cuda.synchronize()
                meta = {"dtype": dtype, "M": m, "N": n, "K": k, "world_size": ws, "emulated": True,
                        "knobs": dataclasses.asdict(knobs), "clock": "globaltimer ns"}
                ctx.attach(f"programs_{dtype}_m{m}_emulated_ws{ws}.json", spans.ATTACH_KIND,
                           spans.encode(c.hbm.trace_records(), dataclasses.asdict(c.hbm.layout), 0, meta))
        del contestants, prob
        torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(0)
    return {"device": torch.cuda.get_device_name(0), "multiprocessors": props.multi_processor_count,
            "knobs": dataclasses.asdict(knobs),
            "timer": "CUDA events per call, 256 MiB L2 flush before each, round-robin over variants"}


# --- analysis ----------------------------------------------------------------------------------

def breakdown(rec) -> pd.DataFrame:
    """One row per kernel-mode variant: median us with its CI, TFLOP/s, and its time over
    cuBLAS's (same dtype and M) with a bootstrap CI; the throughput ratio is its inverse.
    ``target`` and ``met`` where the issue sets one (a target counts as met only when the
    whole CI clears it)."""
    from workbench import stats

    by_shape: dict[tuple, dict[str, Any]] = {}
    for v in rec.variants:
        p = v.params
        if p.get("mode") != "kernel":
            continue
        by_shape.setdefault((p["dtype"], p["M"]), {})[(p["method"], p["world_size"])] = v
    rows = []
    for (dtype, m), vs in sorted(by_shape.items()):
        base = vs.get(("cublas", 1))
        for (method, ws), v in sorted(vs.items(), key=lambda kv: (METHODS.index(kv[0][0]), kv[0][1])):
            n, k = v.params["N"], v.params["K"]
            row = {"dtype": dtype, "M": m, "method": method, "world_size": ws, "correct": v.correct}
            s = stats.summarize(v.samples_ns)
            row |= {"median_us": s.median / 1e3, "ci_lo_us": s.ci_lo / 1e3, "ci_hi_us": s.ci_hi / 1e3,
                    "noise": s.noise, "tflops": 2.0 * m * n * k / (s.median * 1e-9) / 1e12 if s.n else float("nan")}
            nan = float("nan")
            ratio = (nan, nan, nan)
            if base is not None and base.correct and v.correct and method != "cublas":
                ratio = paired_ratio(base.samples_ns, v.samples_ns)
            row |= {"time_ratio": ratio[0], "time_ratio_lo": ratio[1], "time_ratio_hi": ratio[2],
                    "throughput_ratio": 1 / ratio[0] if ratio[0] == ratio[0] else nan}
            kind = ("gemm" if (method, ws) in (("kernel", 1), ("gemm-path", 2)) else
                    "emulated-ws2" if (method, ws) == ("emulated", 2) else None)
            bound = target(kind, m, n, k) if kind else None
            met = None
            if bound is not None:
                # throughput >= bound  <=>  time ratio <= 1/bound; the CI's far end must clear it
                limit = 1 / bound if kind == "gemm" else bound
                met = bool(ratio[2] == ratio[2] and ratio[2] <= limit)
            row |= {"target": bound, "target_kind": kind, "met": met, "check": v.check}
            rows.append(row)
    return pd.DataFrame(rows)


def paired_ratio(base_ns, ns) -> tuple[float, float, float]:
    """Median and 95% CI of the per-round ratio ns[r] / base_ns[r] (samples in round order);
    unpaired (ratio of medians, bootstrap) when the counts differ."""
    import numpy as np

    from workbench import stats

    if len(base_ns) != len(ns):
        cmp = stats.compare(base_ns, ns)
        return cmp.ratio, cmp.ratio_ci_lo, cmp.ratio_ci_hi
    r = np.asarray(ns, dtype=float) / np.asarray(base_ns, dtype=float)
    return (float(np.median(r)), *stats.median_ci(r))


def format_breakdown(df: pd.DataFrame) -> str:
    """The benchmark's printed table (Markdown)."""
    if df.empty:
        return "(no kernel-mode variants)"
    f = lambda x, d=1: "n/a" if x is None or x != x else f"{x:.{d}f}"
    lines = ["| dtype | M | what | ws | median us [95% CI] | TFLOP/s | time / cuBLAS [95% CI] | cuBLAS / time | "
             "target | |", "|---|---|---|---|---|---|---|---|---|---|"]
    labels = {"cublas": "cuBLAS (torch.matmul)", "kernel": "kernel, every tile local",
              "gemm-path": "GEMM path alone (staged, flags set)", "emulated": "whole kernel, emulated peers"}
    for _, r in df.iterrows():
        if not r["correct"]:
            lines.append(f"| {esc(r['dtype'], 'cell')} | {esc(r['M'], 'cell')} | {labels[r['method']]} | "
                         f"{esc(r['world_size'], 'cell')} | FAILED CHECK: {esc(r['check'][:80], 'cell')} | | | | | |")
            continue
        tr = "" if r["method"] == "cublas" else (f"{f(r['time_ratio'], 3)}x [{f(r['time_ratio_lo'], 3)}, "
                                                 f"{f(r['time_ratio_hi'], 3)}]")
        thr = "" if r["method"] == "cublas" else f"{f(r['throughput_ratio'], 3)}x"
        tgt, verdict = "", ""
        if r["target"] is not None and r["target"] == r["target"]:
            tgt = (f"throughput >= {r['target']:.2f}x" if r["target_kind"] == "gemm" else f"time <= {r['target']:.2f}x")
            verdict = "met" if r["met"] else "MISSED"
        lines.append(f"| {esc(r['dtype'], 'cell')} | {esc(r['M'], 'cell')} | {labels[r['method']]} | "
                     f"{esc(r['world_size'], 'cell')} | {f(r['median_us'])} "
                     f"[{f(r['ci_lo_us'])}, {f(r['ci_hi_us'])}] | {f(r['tflops'], 0)} | {tr} | {thr} | {tgt} | "
                     f"{verdict} |")
    return "\n".join(lines)


def verdict(df: pd.DataFrame) -> str:
    """One line over the targets of a kernel-mode run."""
    t = df[df["target"].notna()] if not df.empty else df
    if t.empty:
        return "No shape with one of the issue's targets (N=3584, K=8192) was measured."
    missed = t[t["met"] != True]  # noqa: E712 (None: not measured)
    parts = [f"{esc(r['dtype'])} M={esc(r['M'])} {esc(r['method'])} ws{esc(r['world_size'])}: "
             f"{r['throughput_ratio'] if r['target_kind'] == 'gemm' else r['time_ratio']:.3f}x"
             for _, r in t.iterrows()]
    head = "All targets met" if missed.empty else f"{len(missed)} of {len(t)} targets missed"
    return (f"{head} (GEMM path: throughput over cuBLAS's; emulated ws2: time over cuBLAS's; "
            f"met only when the 95% CI clears the bound): " + "; ".join(parts) + ".")

