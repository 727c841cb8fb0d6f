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
    def time_fn(self, fn, repeat: int, min_sample_ms: float = 5.0) -> list[float]:
        """Per-call ns, CUDA events around ``loops`` back-to-back calls after a barrier; the
        same ``loops`` on every rank; each sample is the max over ranks."""
        import torch
        import torch.distributed as dist

        fn()
        torch.cuda.synchronize()
        dist.barrier(group=self.group)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            fn()
        end.record()
        end.synchronize()
        est = torch.tensor([start.elapsed_time(end) / 3], device="cuda")
        dist.all_reduce(est, op=dist.ReduceOp.MAX, group=self.group)
        loops = max(1, min(64, math.ceil(min_sample_ms / max(est.item(), 1e-3))))
        cuda_timer = harness.cuda_event_timer(fn)

        def timer(n: int) -> float:
            dist.barrier(group=self.group)  # line the ranks up; not inside the timed window
            return cuda_timer(n)

        m = harness.measure(timer, repeat=repeat, warmup=1, loops=loops, clock="cuda-event")
        samples = torch.tensor(m.samples_ns, device="cuda", dtype=torch.float64)
        dist.all_reduce(samples, op=dist.ReduceOp.MAX, group=self.group)
        return samples.tolist()

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
        import torch

        cfg = self.cfg
        n, k = cfg["n"], cfg["k"]
        inp = methods.make_inputs(m, n, k, dtype, self.rank, self.ws, self.group, seed=cfg.get("seed", 0))
        ref = methods.reference(inp)
        # Upper-case matrix dims: a variant param "n" would clash with the sample count column.
        base = {"dtype": dtype, "M": m, "N": n, "K": k, "world_size": self.ws}
        for name in cfg["methods"]:
            self.progress(f"{dtype} M={m}: {name}")
            try:
                if name == "auto":
                    self.run_auto(inp, ref, base)
                elif name in methods.PARTS:
                    fn, _, _ = methods.build(name, inp, {})
                    samples = self.time_fn(fn, cfg["repeat"])
                    self.say("variant", VariantResult(f"{name}/{dtype}/m{m}", {**base, "method": name}, samples, True,
                                                      "part of the overlap bound; output not checked").to_json())
                else:
                    knobs = self.knobs_for(name)
                    self.measure_method(name, knobs, inp, ref, base, f"{name}/{dtype}/m{m}")
            except Exception as exc:  # recorded as a failed variant; the sweep goes on
                msg = f"error: {type(exc).__name__}: {exc}"
                print(traceback.format_exc(), file=sys.stderr, flush=True)
                self.say("variant", VariantResult(f"{name}/{dtype}/m{m}", {**base, "method": name}, [], False,
                                                  msg[:500]).to_json())
            self.steps_done += 1
            torch.cuda.empty_cache()

    def knobs_for(self, name: str) -> dict[str, Any]:
        if name == "ce-chunked":
            return {"chunks": self.cfg["chunks"]}
        if name == "hbm-buffer":
            return dict(self.cfg["hbm"])
        return {}

    def measure_method(self, name, knobs, inp, ref, base, variant, params_extra=None) -> float:
        cfg = self.cfg
        trace_programs = name == "hbm-buffer" and cfg["trace"] != "off"
        fn, out, extra = methods.build(name, inp, knobs, trace=trace_programs)
        ok, msg = self.checked(fn, out, ref, base["dtype"], extra)
        params = {**base, "method": name, **knobs, **(params_extra or {})}
        if not ok:
            self.say("variant", VariantResult(variant, params, [], False, msg).to_json())
            return float("nan")
        if trace_programs:
            fn()  # the trace kept is a warm launch's, not the first one's
            self.save_program_trace(extra["hbm"], base)
        samples = self.time_fn(fn, cfg["repeat"])
        # Checked again after the timed calls: a flag/epoch race shows up under back-to-back calls.
        ok2, msg2 = self.checked(fn, out, ref, base["dtype"], extra)
        if not ok2:
            msg = f"after timing: {msg2}"
        self.say("variant", VariantResult(variant, params, samples if ok2 else [], ok2, msg).to_json())
        if cfg["trace"] == "all" and base["M"] == max(cfg["m"]) and base["dtype"] == cfg["dtype"][0]:
            self.save_profile(name, fn, base)
        return sorted(samples)[len(samples) // 2] / 1e6 if ok2 else float("nan")

    def run_auto(self, inp, ref, base) -> None:
        """Time every candidate briefly (after its check), pick, then measure the pick."""
        cands = autoconfig.candidates(base["M"], base["N"], base["K"], self.ws)
        timings: dict[str, float] = {}
        chosen: dict[str, tuple[str, dict]] = {}
        for method, knobs in cands:
            lab = autoconfig.label(method, knobs)
            chosen[lab] = (method, knobs)
            fn, out, extra = methods.build(method, inp, knobs)
            ok, _ = self.checked(fn, out, ref, base["dtype"], extra)
            timings[lab] = float("nan")
            if ok:
                s = self.time_fn(fn, 5, min_sample_ms=2.0)
                timings[lab] = sorted(s)[len(s) // 2] / 1e6
            del fn, out, extra
        pick = autoconfig.choose(timings)
        method, knobs = chosen[pick]
        self.measure_method(method, knobs, inp, ref, base, f"auto/{base['dtype']}/m{base['M']}",
                            {"method": "auto", "picked": pick,
                             "tuning_ms": json.dumps({k: round(v, 4) for k, v in timings.items()})})

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
        self.steps = max(1, len(shapes) * len(cfg["methods"]))
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
