"""Distributed worker of the mc2-split study: chunked matmul + all-reduce, serial vs overlapped.

Started by ``workbench.running.launcher`` (torchrun), which calls :func:`main` on every rank. Every
rank computes the same thing; one rank reports (progress, fits, plans, each measured variant)
through the launcher's event stream as soon as it has them.

Each rank holds A_r (M x K) and B_r (K x N), seeded by rank; the result is
sum_r A_r @ B_r on every rank (matmul, then all-reduce of the output). Variants:

- ``mm/m<m>``: the matmul of the first m rows (CostMM points; m = M too: the full-size time
  that decides the bound, as in the seed);
- ``comm/<provider>/m<m>``: the all-reduce of m output rows (CostComm points, m = M too);
- ``serial/<provider>``: the unsplit matmul, then the unsplit all-reduce;
- ``overlap/<provider>/<split>``: per chunk, the matmul on the compute stream and the
  chunk's all-reduce started asynchronously behind it; the op ends when the last
  all-reduce is done;
- ``aa:serial/<provider>``: the serial op again, timed in rounds with the best split (the
  config's A/A null control; the best split's gain pairs with it).

A config's serial op and its splits are timed in interleaved rounds (one sample of each per
round, the order rotated), so their gains pair by round; each sample records its round
(``VariantResult.blocks``). Cost points are timed one after the other, a block each.

Collective implementations (``providers``, the compared dimension):

- ``default``: the backend's all-reduce (NCCL on GPUs, gloo on CPUs), ``async_op=True``
  (NCCL runs it on its own stream; gloo on its own thread);
- ``limited``: NCCL in a communicator limited to as many CTAs as the matmul leaves SMs free
  (the carve-out; ``nccl_ctas`` without one) (NCCLConfig.max_ctas), in CTA clusters of
  ``nccl_cga`` (1: NCCL's default 4-CTA clusters cannot start beside a running matmul), on a
  high-priority stream, so its kernels run beside the matmul and take few SMs from it;
- ``ce``: a copy-engine all-reduce through symmetric memory (cudaMemcpy over NVLink: copy
  engines, no SMs), in place: each rank pushes its rows of every peer's block into that peer's
  staging buffer, one barrier, each rank adds the staged rows into its block, then pushes the
  reduced block into every peer's output (one more barrier closes the op). Pushes go in
  rotated peer order, one stream per peer, so several copy engines run at once;
- ``ce-oneshot``: every rank's block is the whole chunk: (W-1)/W more bytes pushed and W
  times the add work of ``ce``, but no push back, which pays where the per-chunk latency
  dominates (W = 2);
- ``triton``: the same two-shot push as ``ce``, moved by one Triton launch per chunk of a
  fixed grid (one CTA of ``triton_warps`` warps per SM of the carve-out; ``triton_ctas``
  without one) on a high-priority stream: its programs push the rows to every peer, meet the
  peers' programs through arrival counters in symmetric memory, sum the staged rows and push
  the sum back. Only stores cross NVLink, so a few SMs keep the links busy
  (kernels/triton/allreduce.py). No more CTAs than the carve-out: a matmul CTA needs a whole
  SM's registers, so every SM holding a collective CTA is one the next chunk's matmul waits
  for (measured: traces/mc2-split/README.md);
- ``triton-pull``: the same launch, but each rank signals its peers that its chunk is ready,
  then loads the peers' partial rows of its block over NVLink (no staging buffer: about 2
  instead of 3.5 bytes of HBM traffic per byte, beside the matmul), sums and pushes the sum;
- ``triton-persistent``: the pull, but one launch per op for all its chunks, queued before the
  first matmul: the compute stream sets a flag after each chunk's matmul (cuStreamWriteValue32,
  no kernel) and the launch's programs move on to that chunk, so a chunk costs no launch, no
  kernel ramp-up and tail, and the next chunk's pulls start as soon as every rank's flag is set.

Each collective can run with an SM carve-out (``carveouts``): matmuls go through cuBLASLt
told to leave that many SMs free (``torch._C._set_sm_carveout_experimental``), so the collective's
kernels (NCCL's CTAs, the Triton kernels, the copy-engine path's barrier and add kernels) find SMs at once
instead of waiting behind matmul CTAs. A (collective, carve-out) pair is one config,
labelled ``<provider>`` or ``<provider>+c<SMs>``; the matmul cost points are measured per carve-out.

Timing: ``workbench.running.harness.DistTimer``: per sample, all ranks meet (barrier + device sync);
on GPUs a ~2 ms sleep kernel is queued first so the host enqueues the whole op before the GPU
reaches it (the host's launch cost is not timed), then CUDA events bracket the op on the
compute stream; on CPUs ``perf_counter_ns``. A sample is the maximum over ranks; each rank's
median is kept beside it. Each variant's output is checked against the unsplit matmul +
all-reduce before it is timed, and every rank takes the check's verdict of the worst rank.

Traces: one extra call of each config's serial op and best split runs under torch.profiler
on every rank; the ranks' Chrome traces (gzipped) are gathered to the reporting rank, which
attaches each as ``<op>.rank<r>.json.gz``, so the study can draw the ranks' measured
timelines, aligned, beside the simulated one. A profiler failure is reported as a
note and costs nothing else.
"""

from __future__ import annotations

import gzip
import os
import statistics
import tempfile
from typing import Callable

import torch
import torch.distributed as dist

from kernels.triton.collectives import CopyEngineComm, TritonPersistentComm, TritonPushComm, set_matmul_carveout
from studies.mc2_split.plan import DTYPE_BYTES, CostModel, Fit, fit_points, heuristic, uniform_chunks
from studies.mc2_split.search import best_split, unsearchable
from studies.mc2_split.simulate import fit_contention
from workbench.running import harness
from workbench.running.rank import init_rank
from workbench.seam.events import Emitter
from workbench.data.record import VariantResult

TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4}  # max |err| / rms(ref)
#: the kind (and name prefix) of an A/A twin: an op timed again in a later group of rounds
AA = "aa"
#: the parameter that sets the CTAs of a CTA-limited collective without a carve-out
CTAS_PARAM = {"limited": "nccl_ctas", "triton": "triton_ctas", "triton-pull": "triton_ctas",
              "triton-persistent": "triton_ctas"}


class BackendComm:
    """The backend's own all-reduce, in place on the output rows."""

    def __init__(self, group, out: torch.Tensor):
        self.group, self.out = group, out
        self.works = []

    def plan(self, chunks: list[int]) -> None:
        """Nothing to prepare: each chunk's all-reduce starts on its own."""

    def start(self, r0: int, r1: int) -> None:
        self.works.append(dist.all_reduce(self.out[r0:r1], group=self.group, async_op=True))

    def wait(self) -> None:
        for w in self.works:
            w.wait()
        self.works.clear()

    def result(self) -> torch.Tensor:
        return self.out


def instance_of(cfg: dict, name: str, cv: int) -> str:
    """The collective instance a (collective, carve-out) config runs on: one per collective,
    and per CTA count for the CTA-limited ones."""
    return f"{name}-{cv or cfg[CTAS_PARAM[name]]}" if name in CTAS_PARAM else name


def label(name: str, cv: int) -> str:
    return name if cv == 0 else f"{name}+c{cv}"


class Mc2Worker:
    """One rank of the live run (see the module doc): inputs and reference, the collectives,
    then the cost points (unless the fits are given) and, per config, the serial op, the
    heuristic and uniform splits and the best split. Rank-reporting goes through ``emit``."""

    def __init__(self, cfg: dict, emit: Emitter):
        self.cfg, self.emit = cfg, emit
        self.cuda = cfg["backend"] == "nccl"
        self.device = init_rank(cfg["backend"], profiled=cfg.get("trace", True))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        # the rank that writes the events (local rank 0 of the storing node, whatever its global
        # rank): every rank's trace is gathered there
        active = [None] * self.world
        dist.all_gather_object(active, emit.active)
        self.reporter = active.index(True) if True in active else 0
        self.m, self.k, self.n = cfg["m"], cfg["k"], cfg["n"]
        self.dtype, self.tol = getattr(torch, cfg["dtype"]), TOL[cfg["dtype"]]
        self.dbytes = DTYPE_BYTES[cfg["dtype"]]
        gen = torch.Generator(device="cpu").manual_seed(cfg["rng_seed"] * 1000 + self.rank)
        self.a = (torch.randn(self.m, self.k, generator=gen) / self.k ** 0.5).to(device=self.device, dtype=self.dtype)
        self.b = torch.randn(self.k, self.n, generator=gen).to(device=self.device, dtype=self.dtype)
        self.timer = harness.DistTimer("cuda" if self.cuda else "cpu",
                                       sleep_cycles=harness.SLEEP_CYCLES if self.cuda else 0)
        self.blas_default = torch.backends.cuda.preferred_blas_library() if self.cuda else None
        self.carveouts = cfg.get("carveouts") or [0]
        self.points = list(cfg["points"]) + ([] if self.m in cfg["points"] else [self.m])
        emit.progress(0.02, f"{self.world} ranks up ({cfg['backend']}); computing the reference")
        # the reference: the unsplit matmul + all-reduce, in float32 for a tight check
        self.ref = self.a.float() @ self.b.float()
        dist.all_reduce(self.ref)
        self.ref_rms = float(self.ref.pow(2).mean().sqrt())
        self.comms = self._build_comms()
        self.next_block = 0  # the run's block numbers (VariantResult.blocks), counted on every rank alike
        self.configs = [(c, cv) for c in cfg["providers"] for cv in self.carveouts if instance_of(cfg, c, cv) in self.comms]
        per_config = len(cfg["uniform"]) + 3
        self.steps = emit.steps(len(self.configs) * per_config +
                                (0 if cfg["fits_given"] else len(self.points) * (len(self.carveouts) + len(self.comms))))

    # --- the collectives -------------------------------------------------------------
    def _limited_group(self, ctas: int):
        from torch.distributed.distributed_c10d import ProcessGroupNCCL

        opts = ProcessGroupNCCL.Options(is_high_priority_stream=True)
        opts.config.max_ctas = ctas
        opts.config.min_ctas = 1
        # NCCL launches its CTAs in clusters (4 on Hopper by default); a cluster needs that many
        # free SMs in one GPC, which a running matmul rarely leaves, so the all-reduce waited for
        # the matmul to end: on H200s a matmul and an all-reduce queued together took the sum of
        # their times whatever the CTA limit or carve-out (scripts/gpu/overlap_probe.py).
        opts.config.cga_cluster_size = self.cfg["nccl_cga"]
        return dist.new_group(list(range(self.world)), backend="nccl", pg_options=opts)

    def _comm(self, name: str, cv: int):
        """The collective ``name`` for carve-out ``cv``, or None (and a note) where symmetric
        memory or Triton is missing on this build or machine."""
        m, n, dtype, device = self.m, self.n, self.dtype, self.device
        if name == "default":
            return BackendComm(None, torch.empty(m, n, dtype=dtype, device=device))
        if name == "limited":
            return BackendComm(self._limited_group(cv or self.cfg["nccl_ctas"]), torch.empty(m, n, dtype=dtype,
                                                                                             device=device))
        if name not in ("ce", "ce-oneshot", "triton", "triton-pull", "triton-persistent"):
            raise ValueError(f"unknown comm {name!r}")
        group = dist.group.WORLD.group_name
        ctas, warps = cv or self.cfg["triton_ctas"], self.cfg["triton_warps"]
        try:
            if name == "triton-persistent":
                return TritonPersistentComm(m, n, dtype, device, group, ctas, warps)
            if name.startswith("triton"):
                return TritonPushComm(m, n, dtype, device, group, ctas, warps, pull=name == "triton-pull")
            return CopyEngineComm(m, n, dtype, device, group, name == "ce-oneshot")
        except Exception as exc:  # symmetric memory or triton missing on this build/machine: go on
            self.emit.note(f"{name}: symmetric-memory collective unavailable here ({type(exc).__name__}: {exc})")
            return None

    def _build_comms(self) -> dict:
        comms = {}
        for name in self.cfg["providers"]:
            for cv in self.carveouts:
                inst = instance_of(self.cfg, name, cv)
                if inst not in comms:
                    comms[inst] = self._comm(name, cv)
        return {inst: comm for inst, comm in comms.items() if comm is not None}

    def set_carveout(self, cv: int) -> None:
        if self.cuda:
            set_matmul_carveout(cv, self.blas_default)

    # --- the ops -------------------------------------------------------------------------
    def matmul(self, out: torch.Tensor, r0: int, r1: int) -> None:
        torch.matmul(self.a[r0:r1], self.b, out=out[r0:r1])

    def serial(self, comm) -> None:
        self.matmul(comm.out, 0, self.m)
        comm.start(0, self.m)
        comm.wait()

    def overlap(self, comm, chunks: list[int]) -> None:
        comm.plan(chunks)
        r0 = 0
        for c in chunks:
            self.matmul(comm.out, r0, r0 + c)
            comm.start(r0, r0 + c)
            r0 += c
        comm.wait()

    # --- checking, timing, reporting -----------------------------------------------------
    def _verdict(self, err: torch.Tensor, what: str) -> tuple[bool, str]:
        """The largest error over all ranks against the tolerance: every rank takes the same
        decision, so all time the variant or none does (a rank alone would wait forever)."""
        dist.all_reduce(err, op=dist.ReduceOp.MAX)
        rel = float(err) / self.ref_rms
        ok = rel <= self.tol
        return ok, f"{what} = {rel:.2e} on all ranks ({'<=' if ok else '>'} {self.tol:g} for {self.cfg['dtype']})"

    def check(self, out: torch.Tensor, rows: int) -> tuple[bool, str]:
        return self._verdict((out[:rows].float() - self.ref[:rows]).abs().max(),
                             f"max|out-ref|/rms(ref) over {rows} rows")

    def record(self, name: str, params: dict, timing: harness.Timing | None, ok: bool, msg: str,
               stats: dict | None = None, blocks: list[int] | None = None) -> list[float]:
        """Report one variant; ``stats``: the collective's counters while it was timed;
        ``blocks``: the round of each sample (interleaved), else the variant gets a block of its
        own (timed alone)."""
        samples = timing.samples_ns if timing else []
        extra = {"backend": self.cfg["backend"], "world_size": self.world} | (stats or {})
        if timing:
            extra["rank_median_ns"] = timing.rank_medians_ns()
            blocks = blocks if blocks is not None else [self.new_blocks(1)[0]] * len(samples)
        self.emit.record(VariantResult(name, params, samples, ok, msg, extra, blocks if samples else None))
        return samples

    def new_blocks(self, k: int) -> list[int]:
        """``k`` new block numbers of the run (one per round of an interleaved group)."""
        first = self.next_block
        self.next_block += k
        return list(range(first, first + k))

    def interleaved(self, ops: list[tuple[str, dict, Callable[[], None]]], comm, rows: int) -> dict[str, list[float]]:
        """Check each op (run once, its output rows against the reference), then time the
        correct ones in rounds, one sample of each per round with the order rotated
        (``DistTimer.interleaved``), so drift between them falls on all alike and their
        samples pair by round (the rounds are their blocks). Returns name -> samples. The
        persistent all-reduce's early stops and time-outs are counted over the whole group (its
        ops share the collective and alternate): each variant of the group carries the group's."""
        self.timer.barrier()
        before = _stats(comm)
        passed = []
        for name, params, fn in ops:
            self.timer.barrier()
            fn()
            self.timer.sync()
            ok, msg = self.check(comm.result(), rows)
            if ok:
                passed.append((name, params, fn, msg))
            else:
                self.record(name, params, None, False, msg)
        if not passed:
            return {}
        for _ in range(self.cfg["warmup"]):
            for _name, _params, fn, _msg in passed:
                fn()
        timings = self.timer.interleaved([fn for _, _, fn, _ in passed], self.cfg["reps"], [1] * len(passed))
        blocks = self.new_blocks(self.cfg["reps"])
        stats = {k: v - before[k] for k, v in _stats(comm).items()}
        return {name: self.record(name, params, t, True, msg, stats, blocks)
                for (name, params, _fn, msg), t in zip(passed, timings)}

    def time_op(self, fn, inner: int = 1) -> harness.Timing:
        """Samples of ``inner`` back-to-back calls each, per call. Cost points use inner > 1 so
        the ranks' start skew (paid once per op in the pipelined runs) is not fitted as a
        per-chunk fixed cost."""
        return self.timer.samples(fn, self.cfg["reps"], loops=inner, warmup=self.cfg["warmup"])

    def variant(self, name: str, params: dict, fn, comm, rows: int, inner: int = 1) -> list[float]:
        """Run ``fn`` once, check ``comm``'s output rows against the reference, time it if correct."""
        self.timer.barrier()
        before = _stats(comm)
        fn()
        self.timer.sync()
        ok, msg = self.check(comm.result(), rows)
        timing = self.time_op(fn, inner) if ok else None
        # the persistent all-reduce's early stops and time-outs during this variant's calls
        stats = {k: v - before[k] for k, v in _stats(comm).items()}
        return self.record(name, params, timing, ok, msg, stats)

    def profile_op(self, name: str, fn) -> None:
        """One call of ``fn`` under torch.profiler on every rank; every rank's trace (gzipped)
        goes to the reporting rank, which attaches it as ``<name>.rank<r>.json.gz``, so the
        study can show the ranks aligned (a rank's failure is a note; the run goes on)."""
        if not self.cfg.get("trace", True):
            return
        self.timer.barrier()
        data, error = b"", ""
        try:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
            with profile(activities=acts) as prof:
                fn()
                self.timer.sync()
            with tempfile.TemporaryDirectory() as tmp:
                raw = os.path.join(tmp, "trace.json")
                prof.export_chrome_trace(raw)
                with open(raw, "rb") as fh:
                    data = gzip.compress(fh.read())
        except Exception as exc:  # a trace is a bonus: never lose the run for it
            error = f"{type(exc).__name__}: {exc}"
        # outside the try: every rank joins the gather, whatever happened to its own trace
        got = [None] * self.world if self.rank == self.reporter else None
        dist.gather_object((data, error), got, dst=self.reporter)
        for rank, (trace, why) in enumerate(got or []):
            if trace:
                self.emit.attach(f"{name}.rank{rank}.json.gz", "trace/chrome-json", trace)
            else:
                self.emit.note(f"trace of {name} on rank {rank} failed: {why}")

    # --- cost points ----------------------------------------------------------------------
    def mm_points(self, cv: int) -> list[tuple[int, float]]:
        """(rows, median us) of the local matmul per point, checked against the local product's
        rows (no all-reduce yet)."""
        out = next(iter(self.comms.values())).out
        pts = []
        for p in self.points:
            self.timer.barrier()
            self.matmul(out, 0, p)
            self.timer.sync()
            ok, msg = self._verdict((out[:p].float() - (self.a[:p].float() @ self.b.float())).abs().max(),
                                    "max|out-local ref|/rms(ref)")
            fn = lambda p=p: self.matmul(out, 0, p)  # noqa: E731
            samples = self.record(f"mm/m{p}" if cv == 0 else f"mm/c{cv}/m{p}",
                                  {"kind": "cost-mm", "provider": "-", "carveout": cv, "m": p},
                                  self.time_op(fn, self.cfg["inner"]) if ok else None, ok, msg)
            pts.append((p, _median(samples) / 1e3))
            self.steps.tick(f"CostMM point m={p} carve-out {cv}")
        return pts

    def comm_points(self, cname: str, comm) -> list[tuple[float, float]]:
        """(MiB, median us) of the collective alone per point."""
        pts = []
        for p in self.points:
            def op(p=p):
                comm.start(0, p)
                comm.wait()
            # input: the full local product, so the first reduction equals the reference; timed
            # repetitions then reduce in place again (values grow; the speed does not depend on them)
            self.matmul(comm.out, 0, self.m)
            mib = p * self.n * self.dbytes / 2**20
            samples = self.variant(f"comm/{cname}/m{p}", {"kind": "cost-comm", "provider": cname, "m": p, "mib": mib},
                                   op, comm, p, self.cfg["inner"])
            pts.append((mib, _median(samples) / 1e3))
            self.steps.tick(f"CostComm point {cname} m={p}")
        return pts

    def measured_models(self) -> tuple[dict[str, CostModel], dict[str, tuple[float, float]]]:
        """Fits from the cost points: per config label, the cost model and the measured
        full-size (matmul, all-reduce) us that decide the bound."""
        mm_fits, full_mm, comm_fits, full_comm = {}, {}, {}, {}
        for cv in self.carveouts:
            self.set_carveout(cv)
            pts = self.mm_points(cv)
            mm_fits[cv] = fit_points([x for x, _ in pts], [y for _, y in pts], "row")
            full_mm[cv] = dict(pts)[self.m]
        self.set_carveout(0)
        for cname, comm in self.comms.items():
            pts = self.comm_points(cname, comm)
            comm_fits[cname] = fit_points([x for x, _ in pts], [y for _, y in pts], "MiB")
            full_comm[cname] = pts[self.points.index(self.m)][1]
        models, full = {}, {}
        for cname, cv in self.configs:
            lbl, inst = label(cname, cv), instance_of(self.cfg, cname, cv)
            models[lbl] = CostModel(mm_fits[cv], comm_fits[inst], self.n, self.dbytes)
            full[lbl] = (full_mm[cv], full_comm[inst])
            self.emit.outputs(by_provider={lbl: {"fits": {"mm": models[lbl].mm.to_json(), "comm": comm_fits[inst].to_json()},
                                             "instance": inst,
                                             "full": {"full_mm_us": full_mm[cv], "full_comm_us": full_comm[inst]}}})
        return models, full

    # --- one config: serial, splits, best -------------------------------------------------
    def run_config(self, cname: str, cv: int, model: CostModel, full: tuple[float, float] | None) -> None:
        cfg, m = self.cfg, self.m
        inst, lbl = instance_of(cfg, cname, cv), label(cname, cv)
        comm = self.comms[inst]
        self.set_carveout(cv)
        base = {"provider": lbl, "collective": cname, "instance": inst, "carveout": cv,
                "blas": "cublaslt" if cv and self.cuda else "default"}
        serial = (f"serial/{lbl}", {"kind": "serial", **base, "split": "unsplit", "chunks": str(m), "n_chunks": 1},
                  lambda: self.serial(comm))
        mm_full, comm_full = full or (None, None)
        plan = heuristic(m, self.k, model, cfg["contention"], cfg["rule"], cfg["align"], full_mm_us=mm_full,
                         full_comm_us=comm_full)
        self.emit.outputs(by_provider={lbl: {"plan": plan.to_json()}})
        splits = [("heuristic", plan.chunks)] if plan.ok else []
        splits += [(f"uniform-{u}", uniform_chunks(m, u, cfg["align"])) for u in cfg["uniform"]
                   if uniform_chunks(m, u, cfg["align"])]
        # the serial op and every split in one group of interleaved rounds: their gains pair by round
        got = self.interleaved([serial] + [(f"overlap/{lbl}/{split}", _params(base, split, chunks),
                                            lambda ch=chunks: self.overlap(comm, ch)) for split, chunks in splits],
                               comm, m)
        self.profile_op(f"serial_{lbl}", lambda: self.serial(comm))
        self.steps.tick(f"serial {lbl}")
        measured = [(chunks, _median(got[f"overlap/{lbl}/{split}"]) / 1e3) for split, chunks in splits
                    if got.get(f"overlap/{lbl}/{split}")]
        for split, _chunks in splits:
            self.steps.tick(f"overlap {lbl} {split}")
        self.run_best(comm, lbl, base, model, measured, splits, serial)
        self.steps.tick(f"overlap {lbl} best")

    def run_best(self, comm, lbl: str, base: dict, model: CostModel, measured: list, splits: list,
                 serial: tuple) -> None:
        """Fit the contention to the measured splits, search the best split, trace it and time
        it in rounds with the serial op again: that serial twin (``aa:serial/<config>``) is the
        config's A/A null control (the same op in another group of blocks), and the best
        split's gain pairs with it by round."""
        cfg = self.cfg
        if measured:
            cont = fit_contention(measured, model)
            self.emit.outputs(by_provider={lbl: {"contention": cont}})
            factors = tuple(cont["pair"])
        else:
            factors = (cfg["contention"], cfg["contention"])
        skipped = unsearchable(model, cfg["align"])
        if skipped:
            self.emit.note(f"{lbl}: best split not searched: {skipped}")
            return
        best = best_split(self.m, model, factors, align=cfg["align"], max_chunks=cfg["max_chunks"])
        self.emit.outputs(by_provider={lbl: {"best": {"contention": list(factors), **best}}})
        self.profile_op(f"best_{lbl}", lambda: self.overlap(comm, best["chunks"]))
        name, params, fn = serial
        ops = [(f"{AA}:{name}", {**params, "kind": AA, "twin_of": name}, fn)]
        same = [sp for sp, c in splits if c == best["chunks"]]
        if same:
            self.emit.note(f"{lbl}: the best split {best['chunks']} was already measured as {same[0]}")
        else:
            ops.append((f"overlap/{lbl}/best", _params(base, "best", best["chunks"]),
                        lambda: self.overlap(comm, best["chunks"])))
        self.interleaved(ops, comm, self.m)

    def run(self) -> None:
        cfg = self.cfg
        if cfg["fits_given"]:
            given = CostModel(Fit.from_json(cfg["mm_fit"]), Fit.from_json(cfg["comm_fit"]), self.n, self.dbytes)
            models, full = {label(c, cv): given for c, cv in self.configs}, {}
        else:
            models, full = self.measured_models()
        for cname, cv in self.configs:
            self.run_config(cname, cv, models[label(cname, cv)], full.get(label(cname, cv)))
        self.set_carveout(0)


def main(cfg: dict, emit: Emitter) -> None:
    """Every rank's entry (started by ``workbench.running.launcher``)."""
    try:
        Mc2Worker(cfg, emit).run()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _params(base: dict, split: str, chunks) -> dict:
    return {"kind": "overlap", **base, "split": split, "chunks": ",".join(map(str, chunks)),
            "n_chunks": len(chunks)}


def _stats(comm) -> dict[str, int]:
    return comm.stats() if hasattr(comm, "stats") else {}


def _median(samples) -> float:
    """Median of the per-call samples; NaN for a variant that failed its check (no samples)."""
    return statistics.median(samples) if samples else float("nan")
