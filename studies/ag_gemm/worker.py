"""torchrun worker of the ag-gemm study: one process per GPU (or per CPU core with gloo).

Started by ``workbench.running.launcher``, which calls :func:`main` on every rank; one rank reports
(progress, each variant, attachments, outputs) through the launcher's event stream. Every
rank runs the same sequence of collectives; per-call samples are the max over ranks (a call
is done when the slowest rank is), each rank's own samples kept beside them
(``rank_samples_ns``, same rounds: the skew between ranks per round). Traces (the fused
kernel's per-program records, torch.profiler) are taken on every rank and gathered to the
reporting rank, one attachment per rank (``..._rank<r>``), so the page shows them aligned.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from studies.ag_gemm import autoconfig, methods, spans
from studies.ag_gemm.autoconfig import BASELINE
from studies.ag_gemm.kernelbench import EXPERIMENT_ENTRIES, SUFFIX
from workbench.running import harness
from workbench.running.rank import init_rank
from workbench.seam.events import Emitter
from workbench.data.record import VariantResult
from workbench.seam.study import expand

#: the fused kernel's providers (knobs from the run's hbm parameters; per-program traces)
HBM_PROVIDERS = ("hbm-buffer", "hbm-buffer-ce")
#: the declared grid of a multi-GPU run (crossed in this order); the compared dimension is
#: ``providers`` (studies/ag_gemm/__init__.py)
GRID = ("shard", "dtype", "m")


def variant_name(provider: str, shard: str, dtype: str, m: int) -> str:
    """``nccl/fp16/m4096``; the seed's K-sharded formulation: ``nccl/k-shard/fp16/m4096``."""
    return f"{provider}/{dtype}/m{m}" if shard == "rows" else f"{provider}/k-shard/{dtype}/m{m}"


class Worker:
    def __init__(self, cfg: dict[str, Any], emit: Emitter):
        import torch.distributed as dist

        self.cfg, self.emit = cfg, emit
        self.rank = int(os.environ["RANK"])
        self.ws = int(os.environ["WORLD_SIZE"])
        self.cuda = cfg.get("backend", "nccl") == "nccl"
        self.device = init_rank(cfg.get("backend", "nccl"), float(cfg.get("timeout_s", 600)),
                                         profiled=cfg.get("trace", "off") == "all").type
        self.group = dist.group.WORLD
        self.timer = harness.DistTimer(self.device, group=self.group)
        self.steps = emit.steps(1)
        self.next_block = 0  # the run's block numbers (VariantResult.blocks), the same on every rank

    def new_blocks(self, k: int) -> list[int]:
        """``k`` new block numbers of the run (one per round of an interleaved group)."""
        self.next_block += k
        return list(range(self.next_block - k, self.next_block))

    def progress(self, message: str) -> None:
        self.steps.say(message)

    def sync(self) -> None:
        self.timer.sync()

    # --- timing ------------------------------------------------------------------------
    def time_interleaved(self, fns: list, repeat: int, min_sample_ms: float = 5.0) -> list[harness.Timing]:
        """Per-call samples of every fn, round-robin (``DistTimer.interleaved``: H200s slow down
        by 10-15% over a minute of back-to-back GEMMs, and the rotation spreads that over every
        method), each sample ``loops`` back-to-back calls, with the same ``loops`` on every rank."""
        loops = self.timer.loops_for(fns, min_sample_ms * 1e-3)
        return self.timer.interleaved(fns, repeat, loops)

    def checked(self, fn, out, ref, dtype: str, extra: dict) -> tuple[bool, str]:
        import torch
        import torch.distributed as dist

        fn()
        self.sync()
        ok, msg = methods.check(methods.output(out), ref, dtype)
        hb = extra.get("hbm")
        if hb is not None and hb.timed_out():
            ok, msg = False, f"a flag wait timed out (fetchers never published); {msg}"
        # The verdict is collective: every rank must agree before a time counts.
        flag = torch.tensor([0 if ok else 1], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        if flag.item() and ok:
            ok, msg = False, "another rank's output failed the check"
        return ok, msg

    # --- one shape ---------------------------------------------------------------------
    def run_shape(self, shard: str, dtype: str, m: int) -> None:
        """Build and check every provider, then time the correct ones together (interleaved),
        check them again, and record each."""
        import torch

        cfg = self.cfg
        n, k = cfg["n"], cfg["k"]
        inp = methods.make_inputs(m, n, k, dtype, self.rank, self.ws, self.group, seed=cfg.get("rng_seed", 0),
                                  device=self.device, shard=shard)
        ref = methods.reference(inp)
        # Upper-case matrix dims: a variant param "n" would clash with the sample count column.
        base = {"shard": shard, "dtype": dtype, "M": m, "N": n, "K": k, "world_size": self.ws}
        contestants = []  # (variant, params, fn, out, extra, check message)
        for name in self.providers(shard):
            self.progress(f"{shard} {dtype} M={m}: checking {name}")
            variant = variant_name(name, shard, dtype, m)
            params = {**base, "provider": name}
            try:
                if name in methods.PARTS:
                    fn, _, _ = methods.build(name, inp, {})
                    contestants.append((variant, params, fn, None, {}, "part of the overlap bound; output not checked"))
                    continue
                if name == "auto":
                    method, knobs, tuning = self.tune_auto(inp, ref, base)
                    params |= {"picked": autoconfig.label(method, knobs), **knobs, "tuning_ms": tuning}
                else:
                    method, knobs = name, self.knobs_for(name)
                    params |= knobs
                trace = method in HBM_PROVIDERS and cfg["trace"] != "off" and name != "auto"
                fn, out, extra = methods.build(method, inp, knobs, trace=trace)
                ok, msg = self.checked(fn, out, ref, dtype, extra)
                if not ok:
                    self.emit.record(VariantResult(variant, params, [], False, msg))
                    continue
                if trace and extra["hbm"].trace:  # ROCm's kernel records no trace (NVIDIA-only clock reads)
                    fn()  # the trace kept is a warm launch's, not the first one's
                    self.save_program_trace(extra["hbm"], base, method)
                contestants.append((variant, params, fn, out, extra, msg))
            except Exception as exc:  # recorded as a failed variant; the sweep goes on
                print(traceback.format_exc(), file=sys.stderr, flush=True)
                self.emit.record(VariantResult(variant, params, [], False, f"error: {type(exc).__name__}: {exc}"[:500]))
        if shard == "rows":
            contestants += self.experiment_contestants(inp, ref, base, contestants)
        self.progress(f"{shard} {dtype} M={m}: timing {len(contestants)} providers interleaved")
        timings = self.time_interleaved([c[2] for c in contestants], cfg["repeat"])
        rounds = self.new_blocks(cfg["repeat"])  # the rounds are the blocks: the providers pair by round
        for (variant, params, fn, out, extra, msg), t in zip(contestants, timings):
            ok = True
            if out is not None:
                # Checked again after the timed calls: a flag/epoch race shows under back-to-back calls.
                ok, msg2 = self.checked(fn, out, ref, dtype, extra)
                msg = msg if ok else f"after timing: {msg2}"
            trials = extra.get("trials", {})  # the barrier experiment's checked launches, kept either way
            mech = {"mechanism": extra["hbm"].mechanism} if "hbm" in extra else {}
            self.emit.record(VariantResult(variant, params, t.samples_ns if ok else [], ok, msg,
                                           ({"rank_median_ns": t.rank_medians_ns(), "rank_samples_ns": t.rank_samples_ns,
                                             "loops": t.loops} if ok else {}) | trials | mech, rounds if ok else None))
        # the A/A null control: the baseline again, alone, in a block of its own after the rounds
        for (variant, params, fn, out, extra, msg), t in zip(contestants, timings):
            if params.get("provider") == BASELINE and "experiment" not in params:
                twin = self.timer.samples(fn, cfg["repeat"], loops=t.loops)
                self.emit.record(VariantResult(f"aa:{variant}", {**params, "twin_of": variant}, twin.samples_ns, True,
                                               msg, {"loops": t.loops, "rank_median_ns": twin.rank_medians_ns(),
                                                     "rank_samples_ns": twin.rank_samples_ns},
                                               self.new_blocks(1) * len(twin.samples_ns)))
        if cfg["trace"] == "all" and m == max(cfg["m"]) and dtype == cfg["dtype"][0]:
            for variant, params, fn, out, _, _ in contestants:
                if out is not None and params["provider"] != "auto" and "experiment" not in params:
                    self.save_profile(params["provider"], fn, base)
        self.steps.tick(f"{shard} {dtype} M={m} done")
        del contestants
        if self.cuda:
            torch.cuda.empty_cache()

    def experiment_contestants(self, inp, ref, base: dict, contestants: list) -> list:
        """The seed review's experiments on the fused kernel (``experiments``, rows only): with
        ``barrier``, ``trials`` checked launches of the kernel with and without the barrier
        before its flag release, each from a NaN-filled staging buffer and output (a GEMM row
        that read a block before all of its stores landed fails), and the kernel without the
        barrier timed beside the others; with ``layout``, tile-contiguous staging timed beside.
        Returns the experiment variants that passed their first check (failed ones are
        recorded here; their time never counts)."""
        exps = [e for e in self.cfg.get("experiments", []) if e in EXPERIMENT_ENTRIES]
        default = next((c for c in contestants if c[1]["provider"] == "hbm-buffer"), None)
        if not exps or default is None:
            return []
        trials = int(self.cfg.get("trials", 0))
        tag = f"{base['dtype']} M={base['M']}"
        if "barrier" in exps and trials:
            self.progress(f"{tag}: {trials} checked launches of hbm-buffer")
            default[4]["trials"] = self.flag_trials(default[2], default[3], ref, base["dtype"], default[4]["hbm"], trials)
        out = []
        for exp in exps:
            name = "hbm-buffer" + SUFFIX[exp]
            knobs = dict(self.cfg["hbm"]) | dict(EXPERIMENT_ENTRIES[exp])
            variant = variant_name(name, "rows", base["dtype"], base["M"])
            params = {**base, "provider": name, "experiment": exp, **knobs}
            self.progress(f"{tag}: checking {name}")
            try:
                fn, res, extra = methods.build("hbm-buffer", inp, knobs)
                ok, msg = self.checked(fn, res, ref, base["dtype"], extra)
                if exp == "barrier" and trials:
                    self.progress(f"{tag}: {trials} checked launches of {name}")
                    extra["trials"] = self.flag_trials(fn, res, ref, base["dtype"], extra["hbm"], trials)
            except Exception as exc:  # recorded as a failed variant; the sweep goes on
                print(traceback.format_exc(), file=sys.stderr, flush=True)
                ok, msg, extra = False, f"error: {type(exc).__name__}: {exc}"[:500], {}
            if ok:
                out.append((variant, params, fn, res, extra, msg))
            else:
                self.emit.record(VariantResult(variant, params, [], False, msg, extra.get("trials", {})))
        return out

    def flag_trials(self, fn, out, ref, dtype: str, hb, trials: int) -> dict[str, Any]:
        """``trials`` launches, each after the staging buffer and the output were filled with
        NaN on every rank, each checked (the verdict collective): how often the flag protocol
        let a GEMM row read a block before it was complete."""
        failures, first = 0, ""
        for _ in range(trials):
            hb.stage.fill_(float("nan"))
            out.fill_(float("nan"))
            ok, msg = self.checked(fn, out, ref, dtype, {"hbm": hb})
            if not ok:
                failures += 1
                first = first or msg
        return {"trials": trials, "failures": failures, "first_failure": first[:300]}

    def providers(self, shard: str) -> list[str]:
        """The configured providers that take this formulation (the fused ones gather rows)."""
        if shard == "rows":
            return list(self.cfg["providers"])
        return [p for p in self.cfg["providers"] if p in methods.K_SHARD_PROVIDERS]

    def knobs_for(self, name: str) -> dict[str, Any]:
        if name == "ce-chunked":
            return {"chunks": self.cfg["chunks"]}
        if name in HBM_PROVIDERS:
            return dict(self.cfg["hbm"])
        return {}

    def tune_auto(self, inp, ref, base) -> tuple[str, dict, str]:
        """Check and briefly time every candidate (interleaved), pick with the auto-config."""
        cands, fns = [], []
        for method, knobs in autoconfig.candidates(base["M"], base["N"], base["K"], self.ws):
            fn, out, extra = methods.build(method, inp, knobs)
            if self.checked(fn, out, ref, base["dtype"], extra)[0]:
                cands.append((method, knobs))
                fns.append(fn)
        samples = self.time_interleaved(fns, 5, min_sample_ms=2.0)
        timings = {autoconfig.label(mth, kn): t.median_ns / 1e6 for (mth, kn), t in zip(cands, samples)}
        pick = autoconfig.choose(timings)
        method, knobs = next((mth, kn) for mth, kn in cands if autoconfig.label(mth, kn) == pick)
        return method, knobs, json.dumps({k: round(v, 4) for k, v in timings.items()})

    # --- traces ------------------------------------------------------------------------
    def gather_to_reporter(self, name: str, kind: str, payload: bytes) -> None:
        """Every rank's ``payload`` attached by the reporting rank as ``<name>_rank<r>``
        (before the extension): one trace per rank, for the aligned view."""
        import torch.distributed as dist

        parts: list = [None] * self.ws
        dist.all_gather_object(parts, payload, group=self.group)
        stem, dot, ext = name.partition(".")
        for r, data in enumerate(parts):
            self.emit.attach(f"{stem}_rank{r}{dot}{ext}", kind, data)

    def save_program_trace(self, hb, base, provider: str = "hbm-buffer") -> None:
        self.sync()
        rec = hb.trace_records()
        meta = {**base, "provider": provider, "knobs": dataclasses.asdict(hb.knobs), "clock": "globaltimer ns",
                "mechanism": hb.mechanism}
        fetch = "" if provider == "hbm-buffer" else "ce_"
        self.gather_to_reporter(f"programs_{fetch}{base['dtype']}_m{base['M']}_ws{self.ws}.json", spans.ATTACH_KIND,
                                spans.encode(rec, dataclasses.asdict(hb.layout), self.rank, meta))
        hb.trace = False  # timed calls run without the trace stores

    def save_profile(self, name: str, fn, base) -> None:
        """torch.profiler Chrome trace of 3 calls on every rank, each rank's kept (gzipped)."""
        from torch.profiler import ProfilerActivity, profile

        self.sync()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        with profile(activities=acts) as prof:
            for _ in range(3):
                fn()
            self.sync()
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp, "trace.json")
            prof.export_chrome_trace(str(raw))
            data = gzip.compress(raw.read_bytes())
        shard = "" if base["shard"] == "rows" else "_k-shard"
        self.gather_to_reporter(f"torch_{name}{shard}_{base['dtype']}_m{base['M']}_ws{self.ws}.json.gz",
                                "trace/chrome-json", data)

    def main(self) -> None:
        cfg = self.cfg
        shapes = expand(cfg, GRID)
        self.steps = self.emit.steps(len(shapes), unit="shapes")
        skipped = sorted(set(cfg["providers"]) - set(methods.K_SHARD_PROVIDERS))
        if "k" in cfg["shard"] and skipped:
            self.emit.note(f"shard=k (the seed's K-sharded A): {', '.join(skipped)} gather A by rows and were not run")
        t0 = time.time()
        for point in shapes:
            self.run_shape(point["shard"], point["dtype"], point["m"])
        self.progress("done")
        self.emit.outputs(world_size=self.ws, backend="nccl" if self.cuda else "gloo",
                          worker_s=round(time.time() - t0, 1))


def main(cfg: dict[str, Any], emit: Emitter) -> None:
    """Every rank's entry (started by ``workbench.running.launcher``)."""
    import torch.distributed as dist

    try:
        Worker(cfg, emit).main()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
