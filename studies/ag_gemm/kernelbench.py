"""The fused kernel's two halves on one GPU: ``mode=kernel`` of the ag-gemm study.

For each dtype and M (all ranks' rows together), on one GPU, every output checked against an
fp32 reference before its time counts and again after the timed calls:

- ``cublas``: ``torch.matmul`` of the whole problem, the reference time;
- ``kernel`` (world size 1): the HBM-buffer kernel with every tile local, read in place;
- ``gemm-path`` (world size W): rank 0 of W with the staging buffer filled beforehand and every
  flag already set, no fetch rows: the GEMM path alone, remote tiles read from staging;
- ``emulated`` (world size W): the whole kernel as rank 0 of W, its fetch rows copying the other
  shards from local buffers that stand in for the peers' symmetric memory, flags set as the
  blocks land. Against ``gemm-path`` it gives the fetch path's cost without NVLink;
- ``emulated-ce`` (world size W): the same with the copy-engine fetch (``fetch="ce"``: copies
  on side streams, a flag per chunk written by the stream), no fetch rows. The emulated peers'
  shards sit in pinned host memory here: a copy within one GPU may run as a kernel on the SMs
  the persistent GEMM holds (seen on an H100: at M=4096 the kernel's waits ran out), while a
  copy from host memory is always a copy engine's, as a pull from a peer over NVLink is. Same
  engines, streams and flags; PCIe's bandwidth instead of NVLink's;
- ``ce-copy`` (world size W): those copies and flag writes alone, no GEMM: the all-gather half
  of the perfect-overlap bound max(copies, cuBLAS) on one GPU (each round's own maximum).

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

from workbench.evidence import engine, stats
from workbench.evidence.derived import Derived
from workbench.data.record import VariantResult
from workbench.base.untrusted import escape as esc

from . import methods, spans

METHODS = ("cublas", "kernel", "gemm-path", "emulated", "emulated-ce", "ce-copy")
CE_METHODS = ("emulated-ce", "ce-copy")
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
    copies_only: bool = False  # ce-copy: checked on the staging buffer, not on C


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
    if method in ("emulated-ce", "ce-copy"):
        knobs = dataclasses.replace(knobs, fetch="ce")
    if m % world_size:
        raise ValueError(f"M={m} is not divisible by world size {world_size}")
    ms = m // world_size
    # Each shard in its own allocation, as every rank's symmetric-memory buffer is (row blocks
    # of one A start off 16-byte boundaries when K*2 is not a multiple of 16).
    shards = [prob.a] if world_size == 1 else [prob.a[r * ms:(r + 1) * ms].clone() for r in range(world_size)]
    ptrs = torch.tensor([s.data_ptr() for s in shards], dtype=torch.int64, device=dev)
    extra = {"fetch": False} if method == "gemm-path" else {}
    if method in CE_METHODS:  # the peers in pinned host memory: see the module doc
        extra["peers"] = [shards[0]] + [s.cpu().pin_memory() if s.is_cuda else s for s in shards[1:]]
    hb = kmod.HbmBuffer(shards[0], ptrs, prob.b, 0, world_size, knobs, trace=trace, **extra)
    if method == "gemm-path":
        for src in range(1, world_size):
            hb.stage_rows(src).copy_(shards[src])
    if method == "ce-copy":
        def copies():
            epoch = hb._next_epoch()
            hb.ce.mark_start()
            hb.ce.issue(epoch)
            hb.ce.join()
        return Contestant(copies, None, hb, shards, copies_only=True)
    return Contestant(lambda: hb(out), out, hb, shards)


def check(c: Contestant, prob: Problem) -> tuple[bool, str]:
    """Poison the output, run once, compare with the fp32 reference; a flag wait that gave
    up fails the check too."""
    import torch

    if c.copies_only:
        return _check_staged(c)
    c.out.fill_(float("nan"))
    c.fn()
    if c.out.is_cuda:
        torch.cuda.synchronize()
    ok, msg = methods.check(c.out, prob.ref, prob.dtype)
    if c.hbm is not None and c.hbm.timed_out():
        ok, msg = False, f"a flag wait timed out; {msg}"
    return ok, msg


def _check_staged(c: Contestant) -> tuple[bool, str]:
    """The copies alone: staging poisoned, copied, every peer's rows equal to its shard and
    every flag at the launch's epoch."""
    import torch

    c.hbm.stage.fill_(float("nan"))
    c.fn()
    if c.hbm.stage.is_cuda:
        torch.cuda.synchronize()
    bad = [src for src in range(1, c.hbm.world_size) if not torch.equal(c.hbm.stage_rows(src), c.peers[src])]
    flags = int((c.hbm.flags[:c.hbm.layout.num_flags] < c.hbm.epoch).sum())
    flags -= c.hbm.layout.flags_per_shard_m * c.hbm.layout.k_groups  # the local shard's flags are never set
    if bad or flags:
        return False, f"MISMATCH: staged rows of peers {bad} differ, {flags} flags not set"
    return True, (f"ok: {c.hbm.world_size - 1} peers' rows staged bit-exact, {len(c.hbm.ce.order)} chunk flags set "
                  f"({c.hbm.ce.flag.how})")


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


@dataclass(frozen=True)
class Entry:
    """One variant of a shape: a method at a world size, with knob overrides (the review's
    experiments: ``flag_barrier=False``, ``stage_layout="tiles"``) named by ``suffix``."""

    method: str
    world_size: int
    overrides: tuple = ()  # ((knob, value), ...)
    suffix: str = ""

    def name(self, dtype: str, m: int) -> str:
        if self.method in ("cublas", "kernel"):
            return f"{self.method}/{dtype}/m{m}"
        return f"{self.method}-ws{self.world_size}{self.suffix}/{dtype}/m{m}"


#: the review's experiments at the first emulated world size: knob overrides against the default
EXPERIMENT_ENTRIES = {"barrier": (("flag_barrier", False),), "layout": (("stage_layout", "tiles"),)}
SUFFIX = {"barrier": "-nobarrier", "layout": "-tiles"}


def entries(params: dict[str, Any]) -> list[Entry]:
    """The variants of one shape, cuBLAS first: the breakdown (``experiments`` has
    ``breakdown``), and per review experiment the whole kernel at the first emulated world
    size with that knob changed beside the default (which the breakdown times too)."""
    exps = params.get("experiments", ["breakdown"])
    out = [Entry("cublas", 1)]
    if "breakdown" in exps:
        out.append(Entry("kernel", 1))
        for ws in params["emulate"]:
            out += [Entry("gemm-path", ws), Entry("emulated", ws), Entry("emulated-ce", ws), Entry("ce-copy", ws)]
    elif params["emulate"]:
        out.append(Entry("emulated", params["emulate"][0]))
    for exp in ("barrier", "layout"):
        if exp in exps and params["emulate"]:
            out.append(Entry("emulated", params["emulate"][0], EXPERIMENT_ENTRIES[exp], SUFFIX[exp]))
    return out


def variant_name(method: str, ws: int, dtype: str, m: int) -> str:
    return Entry(method, ws).name(dtype, m)


def flag_trials(c: Contestant, prob: Problem, trials: int) -> dict[str, Any]:
    """``trials`` launches, each into a staging buffer and output filled with NaN first (a
    tile read before its fetch row's stores landed shows as NaN or a wrong value), each
    checked: how often the flag protocol lets a GEMM row read an incomplete block."""
    failures, first = 0, ""
    for _ in range(trials):
        c.hbm.stage.fill_(float("nan"))
        ok, msg = check(c, prob)
        if not ok:
            failures += 1
            first = first or msg
    return {"trials": trials, "failures": failures, "first_failure": first[:300]}


def run(params: dict[str, Any], ctx) -> dict[str, Any]:
    """Check and time every entry of every shape on GPU 0 (see the module docstring)."""
    import torch

    knobs = knobs_from(params)
    n, k = params["n"], params["k"]
    shapes = [(d, m) for d in params["dtype"] for m in params["m"]]
    steps = ctx.steps(len(shapes), unit="shapes")
    trial_entries = "barrier" in params.get("experiments", ()) and params["trials"] > 0
    for dtype, m in shapes:
        steps.say(f"{dtype} M={m}: checking")
        prob = make_problem(m, n, k, dtype, params["rng_seed"])
        contestants = []
        for e in entries(params):
            variant = e.name(dtype, m)
            ekn = dataclasses.replace(knobs, **dict(e.overrides))
            vparams = {"mode": "kernel", "method": e.method, "world_size": e.world_size, "dtype": dtype, "M": m,
                       "N": n, "K": k}
            if e.method != "cublas":
                vparams |= dataclasses.asdict(ekn) | ({"fetch": "ce"} if e.method in CE_METHODS else {})
            extra: dict[str, Any] = {}
            try:
                c = build(e.method, prob, e.world_size, ekn)
                if c.hbm is not None:
                    extra["mechanism"] = c.hbm.mechanism
                ok, msg = check(c, prob)
                if trial_entries and e.method == "emulated" and e.world_size == params["emulate"][0] and \
                        (e.suffix in ("", SUFFIX["barrier"])):
                    steps.say(f"{dtype} M={m}: {params['trials']} checked launches of {variant}")
                    extra |= flag_trials(c, prob, params["trials"])
            except Exception as exc:  # recorded as a failed variant; the sweep goes on
                ok, msg = False, f"error: {type(exc).__name__}: {exc}"[:500]
            if ok:
                contestants.append((variant, vparams, c, msg, extra))
            else:
                ctx.record(VariantResult(variant, vparams, [], False, msg, extra))
        steps.say(f"{dtype} M={m}: timing {len(contestants)} variants interleaved")
        samples = time_interleaved([c.fn for _, _, c, _, _ in contestants], params["repeat"])
        for (variant, vparams, c, msg, extra), s in zip(contestants, samples):
            ok, msg2 = check(c, prob)  # a flag or epoch race shows under back-to-back calls
            ctx.record(VariantResult(variant, vparams, s if ok else [], ok, msg if ok else f"after timing: {msg2}",
                                     extra))
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
        steps.tick(f"{dtype} M={m} done")
    props = torch.cuda.get_device_properties(0)
    return {"device": torch.cuda.get_device_name(0), "multiprocessors": props.multi_processor_count,
            "knobs": dataclasses.asdict(knobs),
            "timer": "CUDA events per call, 256 MiB L2 flush before each, round-robin over variants"}


# --- analysis ----------------------------------------------------------------------------------

def _kernel_variants(rec) -> dict[tuple, dict[str, Any]]:
    """Kernel-mode variants by (dtype, M), then by (method, world size, experiment); the
    experiment is "" for the default knobs, else the review experiment it belongs to."""
    by_shape: dict[tuple, dict[tuple, Any]] = {}
    for v in rec.variants:
        p = v.params
        if p.get("mode") != "kernel":
            continue
        head = v.variant.split("/")[0]
        exp = next((e for e, suf in SUFFIX.items() if head.endswith(suf)), "")
        by_shape.setdefault((p["dtype"], p["M"]), {})[(p["method"], p["world_size"], exp)] = v
    return by_shape


def _positional(ev: engine.Evidence, v) -> engine.Series:
    """A variant's samples in round order (kernel mode times the variants of a shape round-robin)."""
    return ev.series(v.samples_ns, v.variant, v.variant, rounds=range(len(v.samples_ns)), sources=[v.variant],
                     timeline=f"round-robin of {v.params.get('dtype')} M={v.params.get('M')}")


def paired_ratio(ev: engine.Evidence, base, v, name: str = "time ratio") -> Derived:
    """``median(v_r / base_r)`` over rounds with its order-statistic CI (samples of one round
    are taken within a few ms of each other: the pairing cancels clock drift); a ratio of
    medians with the run's drift when the counts differ (a variant that lost samples)."""
    if len(base.samples_ns) == len(v.samples_ns):
        return ev.ratio(_positional(ev, base), _positional(ev, v), name)
    return ev.ratio(base.variant, v.variant, name)


def sweep_ratio(base_ns, ns, name: str = "time ratio") -> Derived:
    """:func:`paired_ratio` of two series of a committed kernel sweep (no run record: a sweep's
    rows are its variants, timed round-robin, measured on a lent GPU host with no load sampled)."""
    from workbench.data.record import RunRecord

    rec = RunRecord("sweep", "ag-gemm", {}, {})
    rec.variants = [VariantResult("base", {}, list(base_ns), True), VariantResult("variant", {}, list(ns), True)]
    ev = engine.Evidence(rec, interleaved=True)
    return paired_ratio(ev, rec.variants[0], rec.variants[1], name)


def _ratio_cols(prefix: str, d: Derived) -> dict[str, float]:
    return {prefix: d.point, f"{prefix}_lo": d.lo, f"{prefix}_hi": d.hi}


def breakdown(rec, ev: engine.Evidence) -> tuple[pd.DataFrame, list[dict]]:
    """The kernel-mode table and its derived rows.

    Table: one row per default-knob variant: median us with its CI, TFLOP/s, its time over
    cuBLAS's (same dtype and M) and cuBLAS's throughput ratio (GEMM efficiency), each the
    median of per-round ratios with a bootstrap CI; ``target`` and ``met`` where the issue
    sets one (met only when the whole CI clears it). Derived rows (``workbench.evidence.derived``,
    extra columns ``table, dtype, M, method, world_size``): those ratios, and the fetch
    path's overhead (whole kernel over its GEMM path alone, same emulated world size)."""
    rows, items = [], []
    for (dtype, m), vs in sorted(_kernel_variants(rec).items()):
        base = vs.get(("cublas", 1, ""))
        default = {key[:2]: v for key, v in vs.items() if not key[2]}
        for (method, ws), v in sorted(default.items(), key=lambda kv: (METHODS.index(kv[0][0]), kv[0][1])):
            n, k = v.params["N"], v.params["K"]
            s = stats.summarize(v.samples_ns)
            flops = 2.0 * m * n * k
            row = {"dtype": dtype, "M": m, "method": method, "world_size": ws, "correct": v.correct,
                   "median_us": s.median / 1e3, "ci_lo_us": s.ci_lo / 1e3, "ci_hi_us": s.ci_hi / 1e3, "noise": s.noise,
                   "tflops": flops / (s.median * 1e-9) / 1e12 if s.n and method != "ce-copy" else float("nan")}
            tag = dict(dtype=dtype, M=m, method=method, world_size=ws)
            ok = base is not None and base.correct and v.correct and method != "cublas"
            time_r = paired_ratio(ev, base, v, f"time over cuBLAS's: {method} ws{ws}, {dtype} "
                                  f"M={m}") if ok else engine.not_meaningful("time over cuBLAS's", "no valid pair", "x", 1)
            thr_r = paired_ratio(ev, v, base, f"GEMM efficiency (cuBLAS time / time): {method} "
                                 f"ws{ws}, {dtype} M={m}") if ok else time_r
            row |= _ratio_cols("time_ratio", time_r) | _ratio_cols("throughput_ratio", thr_r)
            if ok and method != "ce-copy":  # the copies alone are a part of the bound, not a GEMM
                items.append(time_r.row(table="kernel", **tag))
                if method in ("kernel", "gemm-path"):
                    items.append(thr_r.row(table="kernel", **tag))
            # the bound of the copy-engine kernel: max(its copies alone, cuBLAS), per round. (The
            # SM-fetch kernel copies inside itself; its bound is cuBLAS's time: cuBLAS / time.)
            frac = (bound_fraction(ev, base, default.get(("ce-copy", ws)), v, f"fraction of the perfect-overlap bound "
                                   f"max(copies, cuBLAS) / time: {method} ws{ws}, {dtype} M={m}")
                    if method == "emulated-ce" else engine.not_meaningful("bound", "not a copy-engine kernel", "x", 1))
            row |= _ratio_cols("bound_fraction", frac)
            if frac.status != "not meaningful":
                items.append(frac.row(table="bound", **tag))
            gemm = default.get(("gemm-path", ws))
            if method in ("emulated", "emulated-ce") and gemm is not None and gemm.correct and v.correct:
                items.append(paired_ratio(ev, gemm, v, f"fetch overhead (whole kernel / GEMM path "
                                          f"alone): {method} ws{ws}, {dtype} M={m}").row(table="fetch", **tag))
            kind = ("gemm" if (method, ws) in (("kernel", 1), ("gemm-path", 2)) else
                    "emulated-ws2" if (method, ws) == ("emulated", 2) else None)
            bound = target(kind, m, n, k) if kind else None
            met = None
            if bound is not None:  # throughput >= bound, or time <= bound, judged by the engine on the CI
                met = (engine.target(thr_r, at_least=bound) if kind == "gemm" else
                       engine.target(time_r, at_most=bound))
            row |= {"target": bound, "target_kind": kind, "met": met, "check": v.check}
            rows.append(row)
    return pd.DataFrame(rows), items


def bound_fraction(ev: engine.Evidence, cublas, copies, v, name: str) -> Derived:
    """The emulated kernel's time against the perfect-overlap bound on one GPU: per round,
    max(cuBLAS of the whole problem, the copies alone) over the kernel's time, median over
    rounds with a bootstrap CI (1: the kernel hides every copy behind a GEMM as fast as
    cuBLAS's). Not meaningful without the two halves timed in the same rounds."""
    import numpy as np

    parts = [cublas, copies]
    if any(p is None or not p.correct or len(p.samples_ns) != len(v.samples_ns) for p in parts) or not v.correct:
        return engine.not_meaningful(name, "needs cuBLAS, the copies alone and this variant checked and timed in "
                                           "the same rounds", "x", 1.0)
    bound = np.maximum(np.asarray(cublas.samples_ns, float), np.asarray(copies.samples_ns, float))
    b = ev.series(bound, "max(copies, cuBLAS)", "bound rounds", rounds=range(bound.size),
                  sources=[cublas.variant, copies.variant],
                  timeline=f"round-robin of {v.params.get('dtype')} M={v.params.get('M')}")
    return ev.ratio(_positional(ev, v), b, name)


def failure_rate(trials: int, failures: int, name: str) -> Derived:
    """The share of checked launches that failed, with its exact (Clopper-Pearson) 95% CI:
    clear when the CI excludes 0 (:func:`workbench.evidence.engine.rate`)."""
    return engine.rate(name, failures, trials)


def _multi_gpu_experiment_variants(rec) -> dict[tuple, dict[tuple, Any]]:
    """The fused kernel's variants of a multi-GPU run (row-sharded) in the form of
    :func:`_kernel_variants`: method ``hbm-buffer``, the experiment from the variant's
    ``experiment`` parameter ("" for the provider with the default knobs)."""
    by_shape: dict[tuple, dict[tuple, Any]] = {}
    for v in rec.variants:
        p = v.params
        prov = str(p.get("provider", p.get("method", "")))
        if p.get("mode") == "kernel" or p.get("shard", "rows") != "rows" or not prov.startswith("hbm-buffer"):
            continue
        if prov != "hbm-buffer" and "experiment" not in p:
            continue
        by_shape.setdefault((p["dtype"], p["M"]), {})[("hbm-buffer", int(p["world_size"]), p.get("experiment", ""))] = v
    return by_shape


def where_label(method: str, ws: int) -> str:
    """Where an experiment ran: across ranks (multi-GPU) or on one GPU with emulated peers."""
    return f"{ws} ranks" if method == "hbm-buffer" else f"emulated ws{ws}, one GPU"


def experiments(rec, ev: engine.Evidence) -> tuple[pd.DataFrame, list[dict]]:
    """The seed review's experiments, at an emulated world size on one GPU (kernel mode) or
    across the ranks of a multi-GPU run: the barrier before the flag release on and off
    (checked launches that failed, time with over without) and the two staging layouts (tiles
    over rows). One row per experiment and shape; derived rows with ``table`` "barrier" /
    "layout" / "failures"."""
    rows, items = [], []
    by_shape = _kernel_variants(rec)
    for key, vs in _multi_gpu_experiment_variants(rec).items():
        by_shape.setdefault(key, {}).update(vs)
    for (dtype, m), vs in sorted(by_shape.items()):
        for (method, ws, exp), v in vs.items():
            if not exp:
                continue
            ref = vs.get((method, ws, ""))
            where = where_label(method, ws)
            tag = dict(dtype=dtype, M=m, method=method, world_size=ws, where=where)
            row = {"experiment": exp, "dtype": dtype, "M": m, "world_size": ws, "where": where, "variant": v.variant,
                   "correct": v.correct, "check": v.check, "reference_correct": bool(ref is not None and ref.correct)}
            if exp == "barrier":
                name = f"barrier cost (time with / without): {where}, {dtype} M={m}"
                d = (paired_ratio(ev, v, ref, name) if ref is not None and ref.correct and v.correct
                     else engine.not_meaningful(name, "without the barrier the kernel failed its check: its time does "
                                                      "not count" if not v.correct else "no valid barrier-on time", "x", 1))
                for flag, var in (("on", ref), ("off", v)):
                    ex = var.extra if var is not None and isinstance(var.extra, dict) else {}
                    if "trials" in ex:
                        fr = failure_rate(int(ex["trials"]), int(ex["failures"]),
                                          f"failed checks, barrier {flag}: {where}, {dtype} M={m}")
                        row |= {f"trials_{flag}": int(ex["trials"]), f"failures_{flag}": int(ex["failures"]),
                                f"failure_pct_{flag}": fr.point, f"failure_pct_{flag}_hi": fr.hi,
                                f"first_failure_{flag}": ex.get("first_failure", "")}
                        items.append(fr.row(table="failures", barrier=flag, **tag))
            else:
                name = f"tile-contiguous over row-major staging (time): {where}, {dtype} M={m}"
                d = (paired_ratio(ev, ref, v, name) if ref is not None and ref.correct and v.correct
                     else engine.not_meaningful(name, "a layout failed its check", "x", 1))
            row |= _ratio_cols("ratio", d) | {"status": d.status}
            items.append(d.row(table=exp, **tag))
            rows.append(row)
    return pd.DataFrame(rows), items


LABELS = {"cublas": "cuBLAS (torch.matmul)", "kernel": "kernel, every tile local",
          "gemm-path": "GEMM path alone (staged, flags set)", "emulated": "whole kernel, emulated peers, SM fetch",
          "emulated-ce": "whole kernel, emulated peers, copy-engine fetch",
          "ce-copy": "copy-engine copies alone (no GEMM)"}


def format_breakdown(df: pd.DataFrame) -> str:
    """The benchmark's printed table (Markdown)."""
    if df.empty:
        return "(no kernel-mode variants)"
    f = lambda x, d=1: "n/a" if x is None or x != x else f"{x:.{d}f}"
    lines = ["| dtype | M | what | ws | median us [95% CI] | TFLOP/s | time / cuBLAS [95% CI] | cuBLAS / time [95% CI] | "
             "bound / time [95% CI] | target | |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in df.iterrows():
        if not r["correct"]:
            lines.append(f"| {esc(r['dtype'], 'cell')} | {esc(r['M'], 'cell')} | {LABELS[r['method']]} | "
                         f"{esc(r['world_size'], 'cell')} | FAILED CHECK: {esc(r['check'][:80], 'cell')} | | | | | | |")
            continue
        tr = "" if r["method"] == "cublas" else (f"{f(r['time_ratio'], 3)}x [{f(r['time_ratio_lo'], 3)}, "
                                                 f"{f(r['time_ratio_hi'], 3)}]")
        thr = "" if r["method"] == "cublas" else (f"{f(r['throughput_ratio'], 3)}x [{f(r['throughput_ratio_lo'], 3)}, "
                                                  f"{f(r['throughput_ratio_hi'], 3)}]")
        fr = r.get("bound_fraction", float("nan"))
        frac = "" if fr != fr else f"{f(fr, 3)} [{f(r['bound_fraction_lo'], 3)}, {f(r['bound_fraction_hi'], 3)}]"
        tgt, verdict = "", ""
        if r["target"] is not None and r["target"] == r["target"]:
            tgt = (f"throughput >= {r['target']:.2f}x" if r["target_kind"] == "gemm" else f"time <= {r['target']:.2f}x")
            verdict = r["met"]
        lines.append(f"| {esc(r['dtype'], 'cell')} | {esc(r['M'], 'cell')} | {LABELS[r['method']]} | "
                     f"{esc(r['world_size'], 'cell')} | {f(r['median_us'])} "
                     f"[{f(r['ci_lo_us'])}, {f(r['ci_hi_us'])}] | {f(r['tflops'], 0)} | {tr} | {thr} | {frac} | {tgt} | "
                     f"{verdict} |")
    return "\n".join(lines)


def verdict(df: pd.DataFrame) -> str:
    """One line over the targets of a kernel-mode run."""
    t = df[df["target"].notna()] if not df.empty else df
    if t.empty:
        return "No shape with one of the issue's targets (N=3584, K=8192) was measured."
    missed, undecided = t[t["met"] == "MISSED"], t[~t["met"].isin(["met", "MISSED"])]
    parts = [f"{esc(r['dtype'])} M={esc(r['M'])} {esc(r['method'])} ws{esc(r['world_size'])}: "
             f"{r['throughput_ratio'] if r['target_kind'] == 'gemm' else r['time_ratio']:.3f}x"
             for _, r in t.iterrows()]
    head = ("All targets met" if missed.empty and undecided.empty else
            f"{len(missed)} of {len(t)} targets missed, {len(undecided)} undecided (the CI includes the bound)")
    return (f"{head} (GEMM path: throughput over cuBLAS's; emulated ws2: time over cuBLAS's; "
            f"met only when the 95% CI clears the bound): " + "; ".join(parts) + ".")



def _where(r) -> str:
    w = r.get("where")
    return w if isinstance(w, str) and w else f"emulated ws{r['world_size']}, one GPU"


def format_experiments(df: pd.DataFrame) -> str:
    """The review's experiments as Markdown: barrier on/off (failed checks out of checked
    launches, with the failure rate's upper 95% bound; time with over without) and the
    staging layouts (tiles over rows)."""
    if df.empty:
        return "(no review experiments in this run)"
    f = lambda x, d=3: "n/a" if x is None or x != x else f"{x:.{d}f}"
    out = []
    bar = df[df["experiment"] == "barrier"]
    if len(bar):
        lines = ["| dtype | M | where | failed checks, barrier on | failed checks, barrier off | time with / without "
                 "[95% CI] | |", "|---|---|---|---|---|---|---|"]
        for _, r in bar.iterrows():
            fails = []
            for flag in ("on", "off"):
                n = r.get(f"trials_{flag}")
                fails.append("not run" if n is None or n != n else
                             f"{int(r[f'failures_{flag}'])} of {int(n)} (rate <= {r[f'failure_pct_{flag}_hi']:.2g}%)")
            ratio = (f"{f(r['ratio'])}x [{f(r['ratio_lo'])}, {f(r['ratio_hi'])}]" if r["ratio"] == r["ratio"]
                     else f"n/a: {esc(r['check'][:80], 'cell')}")
            lines.append(f"| {esc(r['dtype'], 'cell')} | {esc(r['M'], 'cell')} | {esc(_where(r), 'cell')} | "
                         f"{fails[0]} | {fails[1]} | {ratio} | {esc(r['status'], 'cell')} |")
        out.append("\n".join(lines))
    lay = df[df["experiment"] == "layout"]
    if len(lay):
        lines = ["| dtype | M | where | tile-contiguous / row-major staging, time [95% CI] | |", "|---|---|---|---|---|"]
        for _, r in lay.iterrows():
            ratio = (f"{f(r['ratio'])}x [{f(r['ratio_lo'])}, {f(r['ratio_hi'])}]" if r["ratio"] == r["ratio"]
                     else f"n/a: {esc(r['check'][:80], 'cell')}")
            lines.append(f"| {esc(r['dtype'], 'cell')} | {esc(r['M'], 'cell')} | {esc(_where(r), 'cell')} | "
                         f"{ratio} | {esc(r['status'], 'cell')} |")
        out.append("\n".join(lines))
    return "\n\n".join(out)
