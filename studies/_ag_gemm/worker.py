"""torchrun worker of the ag-gemm study: one process per GPU.

    torchrun --nproc-per-node=W -m studies._ag_gemm.worker CONFIG.json OUTDIR

Rank 0 talks to the parent on stdout, one line per event, each ``@@<kind> <json>``:
``progress`` {fraction, message}, ``variant`` {VariantResult}, ``attach`` {name, kind, path},
``outputs`` {...}. Every rank runs the same sequence of collectives; per-call samples are
the max over ranks (a call is done when the slowest rank is).
"""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from studies._ag_gemm import autoconfig, methods, spans
from workbench import harness
from workbench.study import VariantResult


class Worker:
    def __init__(self, cfg: dict[str, Any], outdir: Path):
        import torch
        import torch.distributed as dist

        self.cfg, self.outdir = cfg, outdir
        self.rank = int(os.environ["RANK"])
        self.ws = int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", self.rank))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local),
                                timeout=datetime.timedelta(seconds=float(cfg.get("timeout_s", 600))))
        self.group = dist.group.WORLD
        self.steps_done, self.steps = 0, 1

    # --- messages to the parent (rank 0 only) -------------------------------------------
    def say(self, kind: str, doc: dict[str, Any]) -> None:
        if self.rank == 0:
            print(f"@@{kind} {json.dumps(doc, default=str)}", flush=True)

    def progress(self, message: str) -> None:
        self.say("progress", {"fraction": self.steps_done / self.steps, "message": message})

    def attach(self, name: str, kind: str, data: bytes) -> None:
        if self.rank == 0:
            path = self.outdir / name
            path.write_bytes(data)
            self.say("attach", {"name": name, "kind": kind, "path": str(path)})

    # --- timing ------------------------------------------------------------------------
    def time_interleaved(self, fns: list, repeat: int, min_sample_ms: float = 5.0) -> list[list[float]]:
        """Per-call ns of every fn, sampled round-robin: one sample of each per round, the order
        rotated each round, so clock drift (H200s slow down by 10-15% over a minute of
        back-to-back GEMMs) is spread over every method instead of penalising the ones timed
        last. A sample is CUDA events around ``loops`` back-to-back calls after a barrier,
        with the same ``loops`` on every rank; each sample is the max over ranks."""
        import torch
        import torch.distributed as dist

        loops = []
        for fn in fns:
            fn()
            torch.cuda.synchronize()
            dist.barrier(group=self.group)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(3):
                fn()
            end.record()
            end.synchronize()
            loops.append(start.elapsed_time(end) / 3)
        est = torch.tensor(loops, device="cuda")
        dist.all_reduce(est, op=dist.ReduceOp.MAX, group=self.group)
        loops = [max(1, min(64, math.ceil(min_sample_ms / max(t, 1e-3)))) for t in est.tolist()]
        timers = [harness.cuda_event_timer(fn) for fn in fns]
        samples = [[] for _ in fns]
        for r in range(repeat + 1):  # round 0 is a warm-up round
            order = list(range(len(fns)))
            order = order[r % len(order):] + order[:r % len(order)]
            for i in order:
                dist.barrier(group=self.group)  # line the ranks up; not inside the timed window
                elapsed_s = timers[i](loops[i])
                if r:
                    samples[i].append(elapsed_s * 1e9 / loops[i])
        t = torch.tensor(samples, device="cuda", dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return t.tolist()

    def checked(self, fn, out, ref, dtype: str, extra: dict) -> tuple[bool, str]:
        import torch
        import torch.distributed as dist

        fn()
        torch.cuda.synchronize()
        ok, msg = methods.check(methods.output(out), ref, dtype)
        hb = extra.get("hbm")
        if hb is not None and hb.timed_out():
            ok, msg = False, f"a flag wait timed out (fetchers never published); {msg}"
        # The verdict is collective: every rank must agree before a time counts.
        flag = torch.tensor([0 if ok else 1], device="cuda")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        if flag.item() and ok:
            ok, msg = False, "another rank's output failed the check"
        return ok, msg

    # --- one shape ---------------------------------------------------------------------
    def run_shape(self, dtype: str, m: int) -> None:
        """Build and check every method, then time the correct ones together (interleaved),
        check them again, and record each."""
        import torch

        cfg = self.cfg
        n, k = cfg["n"], cfg["k"]
        inp = methods.make_inputs(m, n, k, dtype, self.rank, self.ws, self.group, seed=cfg.get("seed", 0))
        ref = methods.reference(inp)
        # Upper-case matrix dims: a variant param "n" would clash with the sample count column.
        base = {"dtype": dtype, "M": m, "N": n, "K": k, "world_size": self.ws}
        contestants = []  # (variant, params, fn, out, extra, check message)
        for name in cfg["methods"]:
            self.progress(f"{dtype} M={m}: checking {name}")
            variant = f"{name}/{dtype}/m{m}"
            params = {**base, "method": name}
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
                trace = method == "hbm-buffer" and cfg["trace"] != "off" and name != "auto"
                fn, out, extra = methods.build(method, inp, knobs, trace=trace)
                ok, msg = self.checked(fn, out, ref, dtype, extra)
                if not ok:
                    self.say("variant", VariantResult(variant, params, [], False, msg).to_json())
                    continue
                if trace:
                    fn()  # the trace kept is a warm launch's, not the first one's
                    self.save_program_trace(extra["hbm"], base)
                contestants.append((variant, params, fn, out, extra, msg))
            except Exception as exc:  # recorded as a failed variant; the sweep goes on
                print(traceback.format_exc(), file=sys.stderr, flush=True)
                self.say("variant", VariantResult(variant, params, [], False,
                                                  f"error: {type(exc).__name__}: {exc}"[:500]).to_json())
        self.progress(f"{dtype} M={m}: timing {len(contestants)} methods interleaved")
        samples = self.time_interleaved([c[2] for c in contestants], cfg["repeat"])
        for (variant, params, fn, out, extra, msg), s in zip(contestants, samples):
            ok = True
            if out is not None:
                # Checked again after the timed calls: a flag/epoch race shows under back-to-back calls.
                ok, msg2 = self.checked(fn, out, ref, dtype, extra)
                msg = msg if ok else f"after timing: {msg2}"
            self.say("variant", VariantResult(variant, params, s if ok else [], ok, msg).to_json())
        if cfg["trace"] == "all" and m == max(cfg["m"]) and dtype == cfg["dtype"][0]:
            for variant, params, fn, out, _, _ in contestants:
                if out is not None and params["method"] != "auto":
                    self.save_profile(params["method"], fn, base)
        self.steps_done += 1
        del contestants
        torch.cuda.empty_cache()

    def knobs_for(self, name: str) -> dict[str, Any]:
        if name == "ce-chunked":
            return {"chunks": self.cfg["chunks"]}
        if name == "hbm-buffer":
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
        timings = {autoconfig.label(mth, kn): sorted(s)[len(s) // 2] / 1e6 for (mth, kn), s in zip(cands, samples)}
        pick = autoconfig.choose(timings)
        method, knobs = next((mth, kn) for mth, kn in cands if autoconfig.label(mth, kn) == pick)
        return method, knobs, json.dumps({k: round(v, 4) for k, v in timings.items()})

    # --- traces ------------------------------------------------------------------------
    def save_program_trace(self, hb, base) -> None:
        import torch

        torch.cuda.synchronize()
        rec = hb.trace_records()
        meta = {**base, "knobs": dataclasses.asdict(hb.knobs), "clock": "globaltimer ns"}
        self.attach(f"programs_{base['dtype']}_m{base['M']}_ws{self.ws}.json", spans.ATTACH_KIND,
                    spans.encode(rec, dataclasses.asdict(hb.layout), self.rank, meta))
        hb.trace = False  # timed calls run without the trace stores

    def save_profile(self, name: str, fn, base) -> None:
        """torch.profiler Chrome trace of 3 calls on every rank; rank 0's file is kept (gzipped)."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
        if self.rank == 0:
            tmp = self.outdir / f"_prof_{name}.json"
            prof.export_chrome_trace(str(tmp))
            data = gzip.compress(tmp.read_bytes())
            tmp.unlink()
            self.attach(f"torch_{name}_{base['dtype']}_m{base['M']}_ws{self.ws}.json.gz", "trace/chrome-json", data)

    def main(self) -> None:
        import torch.distributed as dist

        cfg = self.cfg
        shapes = [(d, m) for d in cfg["dtype"] for m in cfg["m"]]
        self.steps = max(1, len(shapes))
        t0 = time.time()
        for dtype, m in shapes:
            self.run_shape(dtype, m)
        self.steps_done = self.steps
        self.progress("done")
        self.say("outputs", {"world_size": self.ws, "worker_s": round(time.time() - t0, 1)})
        dist.destroy_process_group()


def main(argv: list[str]) -> int:
    cfg = json.loads(Path(argv[0]).read_text())
    outdir = Path(argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    Worker(cfg, outdir).main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
