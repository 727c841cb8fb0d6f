"""MC² split: how to chunk a matmul + all-reduce so compute and communication overlap.

Question (seed: the Ascend CANN MC² tuning case): given CostMM(m) and CostComm(m), the
matmul and collective times of an m-row slice of an M x K by K x N product, which chunking
of the M rows hides the most communication behind compute, and how close does the seed's
short-block/long-block heuristic get to the best one?

What it does:

- fits CostMM (us per row) and CostComm (us per MiB) to points measured on the live
  machine (m = 256, 512, 768, 1024, 2048 by default), as lines or two-piece lines, or takes
  fits typed in by the user (``mm_fit``, ``comm_fit``);
- applies the seed's split algorithm step by step (``studies/_mc2_split/plan.py`` says how
  its ambiguities were read), simulates the two-engine pipeline with a contention factor for
  the heuristic, uniform splits of 1..16 chunks and the best split found by an exact search
  over 128-row-aligned chunkings;
- live (``live``): runs the chunked matmul + all-reduce with torch.distributed on
  ``world_size`` local processes (gloo on CPUs, NCCL on GPUs) started with torchrun, serial
  vs overlapped, for the heuristic, the uniform and the best splits, each output checked
  against the unsplit matmul + all-reduce first; fits a contention factor to the overlapped
  runs and compares predicted with measured.

Clocks: CUDA events on the compute stream (GPU) or ``perf_counter_ns`` (CPU); each sample
is the slowest rank's time for one whole op. gloo runs use float32: CPU half-precision
matmul is slow or missing, and the seed's fp16 shape is a GPU case.
"""

from __future__ import annotations


import pandas as pd

from studies._mc2_split import plan as planmod
from studies._mc2_split.plan import DTYPE_BYTES, CostModel, Fit, heuristic, parse_fit, uniform_chunks
from studies._mc2_split.search import best_split, unsearchable
from studies._mc2_split.simulate import simulate
from workbench import tables
from workbench.store import RunRecord
from workbench.study import Param, ParamError, ParamSpace, RunContext
from workbench.untrusted import escape as esc

ID = "mc2-split"
TITLE = "MC² split: chunking matmul + all-reduce for overlap"
SEED = "002_f06ad4ccbb701e5b.txt"
SEED_SUMMARY = ("Ascend CANN MC² tuning case: fit CostMM/CostComm, pick a short and a long block so compute "
                "and all-reduce overlap; M=4096 K=3072 N=8192 fp16 gives [512, 896x4], 1874 -> 1262 us (32.7%).")

COMMS = ("default", "limited", "ce", "ce-oneshot", "triton", "triton-pull", "triton-persistent")
UNIFORM_SIM = range(1, 17)  # uniform splits the simulator always shows

SPACE = ParamSpace(
    params=(
        Param("m", "int", 4096, "rows M of the M x K input (the split axis)", "rows", min=1, max=1 << 20),
        Param("k", "int", 3072, "inner dimension K", min=1, max=1 << 20),
        Param("n", "int", 8192, "columns N of the output", min=1, max=1 << 20),
        Param("dtype", "str", "auto", "element type; auto: float16 (the seed's half) except float32 on CPUs "
              "(gloo), where half-precision matmul is slow or missing", choices=("auto",) + tuple(DTYPE_BYTES)),
        Param("mm_fit", "str", "", "CostMM fit 'fixed_us,us_per_row' (empty: measure it)"),
        Param("comm_fit", "str", "", "CostComm fit 'fixed_us,us_per_MiB' (empty: measure it)"),
        Param("contention", "float", planmod.SEED_CONTENTION, "slowdown of each engine while both run (seed: 1.15)",
              min=1.0, max=5.0),
        Param("rule", "str", "example", "short block: max(a,b,c) reproduces the seed example; 'text' takes "
              "min(a,b,c) as the seed text says", choices=("example", "text")),
        Param("op", "str", "allreduce", "matmul then all-reduce / reduce-scatter, or all-gather then matmul "
              "(simulation; the live check runs allreduce)", choices=("allreduce", "reduce_scatter", "allgather")),
        Param("live", "str", "auto", "run it with torch.distributed: auto = only when a fit is not given",
              choices=("auto", "on", "off")),
        Param("backend", "str", "auto", "auto: nccl when there are world_size GPUs, else gloo on CPUs",
              choices=("auto", "gloo", "nccl")),
        Param("world_size", "int", 2, "processes (ranks), all nodes together; one GPU each with nccl", min=2, max=64),
        Param("comms", "str", ["default"], "all-reduce implementations: the backend's own; NCCL limited to "
              "nccl_ctas CTAs on a high-priority stream; copy-engine pushes through symmetric memory (reduce-scatter + "
              "all-gather, or one-shot: every rank adds the whole chunk); the same two-shot push in one fixed-grid "
              "Triton launch per chunk, one CTA per SM of the carve-out; or that launch loading the peers' partials "
              "over NVLink instead of staging them (triton-pull); or that pull for all chunks in one launch per op "
              "(triton-persistent)",
              choices=COMMS, multi=True),
        Param("nccl_ctas", "int", 16, "CTA limit of the 'limited' NCCL communicator without a carve-out (with "
              "one, its CTA limit is the carve-out)", min=1, max=64),
        Param("triton_ctas", "int", 16, "CTAs of the Triton collectives' kernels without a carve-out (with one, "
              "one CTA per SM of the carve-out)", min=1, max=1024),
        Param("triton_warps", "int", 16, "warps per CTA of the Triton collectives' kernels", choices=(4, 8, 16, 32)),
        Param("nccl_cga", "int", 1, "CTA cluster size of the 'limited' NCCL communicator (NCCL's Hopper default 4 "
              "keeps its kernels from starting beside a running matmul)", min=1, max=8),
        Param("carveout", "int", [0], "SMs the matmul leaves free for the collective (cuBLAS SM carve-out); "
              "each value runs every collective", "SMs", min=0, max=128, multi=True),
        Param("points", "int", [256, 512, 768, 1024, 2048], "row counts m measured for the fits", "rows",
              min=1, multi=True),
        Param("uniform", "int", [2, 4, 8], "uniform chunk counts run live (1..16 are always simulated)",
              min=1, max=64, multi=True),
        Param("max_chunks", "int", 16, "largest chunk count of the best-split search", min=1, max=64),
        Param("align", "int", 128, "row alignment of the chunks (the seed: 128)", "rows", min=1, max=4096),
        Param("reps", "int", 20, "timed repetitions per variant", min=1, max=10_000),
        Param("inner", "int", 4, "back-to-back calls per sample of the cost points (amortises the ranks' "
              "start skew, which a pipelined op pays once, not per chunk)", min=1, max=1000),
        Param("warmup", "int", 3, "untimed runs per variant", min=0, max=1000),
        Param("trace", "bool", True, "torch.profiler trace of one serial and one best-split call per collective"),
        Param("timeout_s", "int", 900, "the distributed run is killed after this", "s", min=10, max=86_400),
        Param("seed", "int", 0, "random inputs' seed"),
    ),
    presets={
        "smoke": {"m": 512, "k": 128, "n": 256, "dtype": "float32", "backend": "gloo", "live": "on",
                  "points": [128, 256], "uniform": [2, 4], "reps": 3, "warmup": 1, "max_chunks": 8},
        # quick: a shape a 2-core CPU (gloo, float32) runs in about a minute; the seed shape is the
        # default (and the 'h200' preset) for GPU nodes
        "quick": {"m": 2048, "k": 512, "n": 1024, "points": [256, 512, 1024], "uniform": [4], "reps": 10},
        "seed-example": {"mm_fit": "16.5,0.192", "comm_fit": "47,16", "live": "off"},
        "cpu": {"m": 2048, "k": 512, "n": 1024, "dtype": "float32", "backend": "gloo", "live": "on",
                "points": [256, 512, 1024], "uniform": [2, 4], "reps": 10},
        "h200": {"backend": "nccl", "live": "on", "comms": ["default", "limited", "ce", "ce-oneshot", "triton", "triton-pull",
                          "triton-persistent"],
                 "carveout": [0, 16, 24],
                 "reps": 20},
    },
)

SEED_FIGURES = {
    "source": f"seed {SEED}: the MatmulAllReduce worked example (验证优化方案性能收益)",
    "machine": "Ascend NPU, CANN MC² MatmulAllReduce sample (tiling rankDim = 8), profiled with msProf",
    "tables": {
        "example": [
            {"quantity": "shape", "seed": "M=4096, K=3072, N=8192, half"},
            {"quantity": "matmul alone", "seed": "803 us"},
            {"quantity": "all-reduce alone", "seed": "1071 us"},
            {"quantity": "serial", "seed": "1874 us (communication-bound)"},
            {"quantity": "short block m0", "seed": "384 rows (6 MB)"},
            {"quantity": "CostComm(6 MB)", "seed": "143 us; x1.15 = 164 us"},
            {"quantity": "long block from CostMM(m1) = 164 us", "seed": "768 rows"},
            {"quantity": "count", "seed": "(4096-384)/768 = 4.83 -> 4"},
            {"quantity": "long block adjusted", "seed": "(4096-384)/4 = 928 -> 896"},
            {"quantity": "short block adjusted", "seed": "4096 - 896*4 = 512"},
            {"quantity": "chunks", "seed": "[512, 896, 896, 896, 896]"},
            {"quantity": "fused MC² op", "seed": "1262 us"},
            {"quantity": "gain", "seed": "(1874-1262)/1874 = 32.7%"},
        ],
    },
    "notes": [
        "The seed's fits are not printed; mm_fit = 16.5 us + 0.192 us/row and comm_fit = 47 us + 16 us/MiB "
        "reproduce every number of its example (803, 1071, 143, 768) and are the 'seed-example' preset.",
        "The seed text says m0 = min(a, b, c), but its example uses 384 = c while a = 171 and b = 192: "
        "rule=example takes max(a, b, c); rule=text takes the minimum.",
        "The seed's tiling code sets rankK = 4096 although its text says K = 3072.",
        "Figures 1 and 2 (the two balance pictures) are missing from the seed's text: communication-bound is "
        "read as 'short block first, CostMM(m1) = CostComm(m0)*f', compute-bound as the mirror image "
        "'short block last, CostComm(m1) = CostMM(m0)*f'.",
    ],
}


# --- parameters ------------------------------------------------------------------------

#: largest fixed time or slope a given fit may have (17 minutes): beyond it the simulated
#: times overflow to inf
MAX_FIT_US = 1e9


def _fits(params) -> tuple[Fit | None, Fit | None]:
    out = []
    for name, unit in (("mm_fit", "row"), ("comm_fit", "MiB")):
        text = params[name].strip()
        if not text:
            out.append(None)
            continue
        example = "16.5,0.192" if unit == "row" else "47,16"
        try:
            fit = parse_fit(text, unit, name)
        except ValueError as exc:
            raise ParamError(name, f"{exc}; e.g. {example}") from None
        # A given fit must be a cost that grows with the size: a zero slope cannot be inverted
        # to balance a block (division by zero), a negative one gives negative times.
        if fit.slope <= 0:
            raise ParamError(name, f"the slope {fit.slope:g} us/{unit} must be positive (a cost that does not grow "
                                   f"with the size cannot balance a block); e.g. {example}")
        if max(abs(fit.fixed_us), fit.slope) > MAX_FIT_US:
            raise ParamError(name, f"{text!r} is beyond {MAX_FIT_US:g} us: not a plausible cost; e.g. {example}")
        out.append(fit)
    return out[0], out[1]


def _live(params) -> bool:
    mm, comm = _fits(params)
    return params["live"] == "on" or (params["live"] == "auto" and (mm is None or comm is None))


def _cuda_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _backend(params) -> str:
    if params["backend"] != "auto":
        return params["backend"]
    from workbench.launcher import local_share

    # the ranks of this node: all of them, unless the run spans nodes (a topology error: requires() names it)
    local = local_share(params["world_size"], "nccl")[0] or params["world_size"]
    return "nccl" if _cuda_count() >= local else "gloo"


def _dtype(params) -> str:
    if params["dtype"] != "auto":
        return params["dtype"]
    return "float32" if _live(params) and _backend(params) == "gloo" else "float16"


def validate(params) -> None:
    mm, comm = _fits(params)
    if (mm is None) != (comm is None):
        raise ParamError("comm_fit" if comm is None else "mm_fit", "give both fits or neither (neither: they are "
                                                                    "measured live)")
    if params["live"] == "off" and mm is None:
        raise ParamError("live", "without mm_fit and comm_fit the fits must be measured: set live=auto or on, "
                                 "or give both fits")
    if not _live(params):
        return
    if params["op"] != "allreduce":
        raise ParamError("op", f"the live check runs matmul + all-reduce only; use live=off for {params['op']}")
    too_big = [p for p in params["points"] if p > params["m"]]
    if too_big:
        raise ParamError("points", f"{too_big} exceed M = {params['m']} rows (allowed 1..{params['m']})")
    backend = _backend(params)
    if backend == "gloo" and _dtype(params) != "float32":
        raise ParamError("dtype", f"{params['dtype']} on CPUs (gloo) is not supported here: CPU half-precision "
                                  "matmul is slow or missing; use dtype=float32, or backend=nccl on GPUs")
    if backend == "gloo" and any(params["carveout"]):
        raise ParamError("carveout", "an SM carve-out needs GPUs (nccl); with gloo use carveout=0")
    if backend == "gloo" and set(params["comms"]) - {"default"}:
        raise ParamError("comms", "'limited', the copy-engine and the Triton collectives need NCCL on GPUs; with gloo use "
                                  "comms=default")


def requires(params) -> str | None:
    if not _live(params):
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return "torch is not installed: pip install torch"
    from workbench.launcher import local_share

    ws = params["world_size"]
    local, reason = local_share(ws, _backend(params))  # the ranks of this node (several nodes: WORKBENCH_NNODES)
    if reason:
        return reason
    if _backend(params) == "nccl":
        gpus = _cuda_count()
        if gpus < local:
            return (f"world_size={ws} needs {local} GPUs on this node with backend=nccl; this machine has {gpus}. "
                    f"Lower world_size, run on a machine with {local} GPUs, or use backend=gloo (CPU, float32)")
        if not dist.is_nccl_available():
            return "this torch build has no NCCL: install a CUDA build of torch"
    elif not dist.is_gloo_available():
        return "this torch build has no gloo backend"
    return None


# --- planning ----------------------------------------------------------------------------

def _model(params, mm: Fit, comm: Fit) -> CostModel:
    return CostModel(mm, comm, params["n"], DTYPE_BYTES[_dtype(params)])


def plan_outputs(params, model: CostModel, contention, full: dict | None = None) -> dict:
    """The heuristic, the simulated splits and the best split for one cost model; ``full``
    holds measured full-size times (``full_mm_us``, ``full_comm_us``) that decide the bound."""
    comm_first = params["op"] == "allgather"
    m = params["m"]
    full = full or {}
    plan = heuristic(m, params["k"], model, params["contention"], params["rule"], params["align"], comm_first,
                     full.get("full_mm_us"), full.get("full_comm_us"))
    sims = []

    def add(label, chunks):
        s = simulate(chunks, model, contention, comm_first)
        sims.append({"split": label, "chunks": chunks, "n_chunks": len(chunks), "makespan_us": s.makespan_us,
                     "serial_us": s.serial_us, "gain": s.gain})

    add("unsplit", [m])
    if plan.ok:
        add("heuristic", plan.chunks)
    for u in UNIFORM_SIM:
        chunks = uniform_chunks(m, u, params["align"])
        if chunks and u > 1:
            add(f"uniform-{u}", chunks)
    best = None
    best_skipped = unsearchable(model, params["align"])
    if best_skipped is None:
        best = best_split(m, model, contention, comm_first, params["align"], params["max_chunks"])
        add("best", best["chunks"])
    by = {s["split"]: s for s in sims}
    predicted = {"serial_us": by["unsplit"]["serial_us"], "unsplit_us": by["unsplit"]["makespan_us"]}
    if plan.ok:
        predicted |= {"heuristic_us": by["heuristic"]["makespan_us"], "heuristic_gain": by["heuristic"]["gain"]}
    if best:
        predicted |= {"best_us": by["best"]["makespan_us"], "best_gain": by["best"]["gain"]}
        if plan.ok:
            predicted["heuristic_over_best"] = by["heuristic"]["makespan_us"] / by["best"]["makespan_us"] - 1
    return {"plan": plan.to_json(), "chunks": plan.chunks if plan.ok else None, "best": best,
            "best_skipped": best_skipped and f"best split not searched: {best_skipped}",
            "predicted": predicted, "simulated": sims, "contention": contention,
            "fits": {"mm": model.mm.to_json(), "comm": model.comm.to_json()},
            "candidates": planmod.short_block_candidates(params["k"], params["n"])}


# --- run ---------------------------------------------------------------------------------

def run(params, ctx: RunContext) -> dict:
    mm, comm = _fits(params)
    out: dict = {"notes": SEED_FIGURES["notes"][1:]}
    if mm is not None:
        out["given"] = plan_outputs(params, _model(params, mm, comm), params["contention"])
    live = {}
    if _live(params):
        live = _run_live(params, ctx, mm, comm)
        out["live"] = live
    # the headline plan: given fits, else the fits measured for the first collective
    head = out.get("given") or next((v["planned"] for v in live.get("by_comm", {}).values() if "planned" in v), None)
    if head:
        out |= {k: head[k] for k in ("plan", "chunks", "best", "best_skipped", "predicted", "simulated", "fits",
                                     "candidates", "contention")}
        warnings = [] if head["plan"]["ok"] else [f"the seed's split failed at {head['plan']['reason']}; "
                                                  "simulated unsplit"]
        if head["best_skipped"]:
            warnings.append(head["best_skipped"])
        if warnings:
            out["warnings"] = warnings
    ctx.progress(1.0, "done")
    return out


def _run_live(params, ctx: RunContext, mm: Fit | None, comm: Fit | None) -> dict:
    from workbench import launcher

    backend = _backend(params)
    cfg = {k: params[k] for k in ("m", "k", "n", "points", "reps", "inner", "trace", "warmup", "uniform", "contention",
                                  "rule", "align", "max_chunks", "nccl_ctas", "triton_ctas", "triton_warps", "nccl_cga", "seed")}
    cfg |= {"backend": backend, "dtype": _dtype(params), "comms": params["comms"], "carveouts": params["carveout"], "fits_given": mm is not None,
            "mm_fit": mm.to_json() if mm else None, "comm_fit": comm.to_json() if comm else None}
    ctx.progress(0.0, f"starting {params['world_size']} {backend} processes (torchrun)")
    got = launcher.launch("studies._mc2_split.worker", cfg, params["world_size"], ctx, timeout_s=params["timeout_s"])
    by_comm: dict[str, dict] = got.outputs.get("by_comm", {})
    for info in by_comm.values():
        fits = info.get("fits") or {"mm": mm.to_json(), "comm": comm.to_json()}
        model = _model(params, Fit.from_json(fits["mm"]), Fit.from_json(fits["comm"]))
        info["planned"] = plan_outputs(params, model, params["contention"], info.get("full"))
    return {"backend": backend, "dtype": _dtype(params), "world_size": params["world_size"], "by_comm": by_comm,
            "notes": got.notes, "launch": got.outputs.get("launch", {})}


# --- analysis ----------------------------------------------------------------------------

def _model_of(rec: RunRecord, fits: dict) -> CostModel:
    return _model(rec.params, Fit.from_json(fits["mm"]), Fit.from_json(fits["comm"]))


def fit_points_table(rec: RunRecord, vt: pd.DataFrame | None = None) -> pd.DataFrame:
    """Measured cost points beside their fits (CostMM per row, CostComm per MiB). ``vt``: the
    run's ``variants_table`` when the caller has it (it bootstraps a CI per variant)."""
    live = rec.outputs.get("live", {}).get("by_comm", {})
    summary = (tables.variants_table(rec) if vt is None else vt).set_index("variant")
    rows = []
    for v in rec.valid_variants():
        kind = v.params.get("kind")
        if kind not in ("cost-mm", "cost-comm"):
            continue
        s = summary.loc[v.variant]
        comm, cv = v.params["comm"], v.params.get("carveout", 0)
        if kind == "cost-comm":  # the fit of any config using this collective instance
            fits = next((c["fits"] for lbl, c in live.items() if "fits" in c and c.get("instance", lbl) == comm), None)
        else:  # the matmul fit of any config with this carve-out
            fits = next((c["fits"] for lbl, c in live.items() if "fits" in c and
                         (lbl.endswith(f"+c{cv}") if cv else "+c" not in lbl)), None)
        if not fits:
            continue
        fit = Fit.from_json(fits["mm" if kind == "cost-mm" else "comm"])
        x = v.params["m"] if kind == "cost-mm" else v.params["mib"]
        rows.append({"cost": (f"CostMM (carve-out {cv})" if cv else "CostMM") if kind == "cost-mm"
                     else f"CostComm ({comm})", "m": v.params["m"], "x": x,
                     "unit": fit.unit, "measured_us": s["median_ns"] / 1e3, "ci_lo_us": s["ci_lo_ns"] / 1e3,
                     "ci_hi_us": s["ci_hi_ns"] / 1e3, "fit_us": fit(x), "fit": fit.describe()})
    return pd.DataFrame(rows)


def live_table(rec: RunRecord, vt: pd.DataFrame | None = None) -> pd.DataFrame:
    """Serial and overlapped runs: measured median vs predicted (seed factor and fitted factor)."""
    live = rec.outputs.get("live", {})
    by_comm = live.get("by_comm", {})
    vt = tables.variants_table(rec) if vt is None else vt
    if not len(vt) or "kind" not in vt:
        return pd.DataFrame()
    vt = vt[vt["kind"].isin(["serial", "overlap"])]
    serial = {r["comm"]: r["median_ns"] / 1e3 for _, r in vt[vt["kind"] == "serial"].iterrows() if r["correct"]}
    base = serial.get("default")
    rows = []
    for _, r in vt.iterrows():
        info = by_comm.get(r["comm"], {})
        fits = info.get("fits") or (rec.outputs.get("given") or {}).get("fits")
        chunks = [int(c) for c in str(r["chunks"]).split(",")]
        best = (info.get("best") or {}).get("chunks")
        # the search's split, also where it equals a split already run under another name (the
        # worker then does not run it twice: uniform-4 can be the best split)
        row = {"variant": r["variant"], "comm": r["comm"], "split": r["split"], "chunks": r["chunks"],
               "is_best": r["kind"] == "overlap" and (r["split"] == "best" or chunks == best),
               "n_chunks": len(chunks), "measured_us": r["median_ns"] / 1e3, "ci_lo_us": r["ci_lo_ns"] / 1e3,
               "ci_hi_us": r["ci_hi_ns"] / 1e3, "noise": r["noise"], "correct": r["correct"], "check": r["check"]}
        if fits:
            model = _model_of(rec, fits)
            pred = simulate(chunks, model, rec.params["contention"]).makespan_us
            row |= {"predicted_us": pred, "err": pred / row["measured_us"] - 1}
            cont = info.get("contention")
            if cont:
                fitted = simulate(chunks, model, tuple(cont["pair"])).makespan_us
                row |= {"predicted_fit_us": fitted, "err_fit": fitted / row["measured_us"] - 1,
                        "contention_fit": f"{cont['pair'][0]:.2f} / {cont['pair'][1]:.2f}"}
        if base:
            row["speedup_vs_serial_default"] = 1 - row["measured_us"] / base
        if r["comm"] in serial:
            row["speedup_vs_serial_same_comm"] = 1 - row["measured_us"] / serial[r["comm"]]
        rows.append(row)
    return pd.DataFrame(rows)


def gantt_table(rec: RunRecord) -> pd.DataFrame:
    """Simulated segments of every simulated split; ``shown`` marks the unsplit, heuristic and
    best splits and the fastest uniform one (the chart's default view and the report's)."""
    fits = rec.outputs.get("fits")
    if not fits:
        return pd.DataFrame()
    model = _model_of(rec, fits)
    comm_first = rec.params["op"] == "allgather"
    sims = pd.DataFrame(rec.outputs.get("simulated", []))
    picks = [s for s in ("unsplit", "heuristic", "best") if s in set(sims.get("split", []))]
    uni = sims[sims["split"].str.startswith("uniform")] if len(sims) else sims
    if len(uni):
        picks.append(uni.sort_values("makespan_us").iloc[0]["split"])
    rows = []
    for order, (label, chunks) in enumerate(zip(sims.get("split", []), sims.get("chunks", []))):
        sched = simulate(chunks, model, rec.outputs["contention"], comm_first)
        for seg in sched.segments:
            rows.append({"split": f"{label} {sched.makespan_us:.0f} us", "shown": label in picks, "order": order,
                         **seg})
    return pd.DataFrame(rows)


_MATMUL_HINTS = ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "ampere_", "cublas")


def _engine_spans(df: pd.DataFrame) -> pd.DataFrame:
    """Spans of one trace as (engine, name, start_ns, end_ns): GPU kernels and copies when the
    trace has any (matmul kernels on the compute stream vs everything else), else the CPU's
    ``aten::mm`` vs the gloo collective."""
    gpu = df[df["category"].isin(["kernel", "gpu_memcpy", "gpu_memset"])]
    if len(gpu):
        names = gpu["name"].astype(str)
        is_mm = names.str.lower().str.contains("|".join(_MATMUL_HINTS)) & ~names.str.contains("nccl", case=False)
        compute_track = gpu[is_mm]["track"].astype(str).mode()
        on_compute = gpu["track"].astype(str) == (compute_track.iloc[0] if len(compute_track) else "")
        engine = pd.Series("comm", index=gpu.index).where(~(is_mm & on_compute), "compute")
        rows = gpu.assign(engine=engine)
    else:
        names = df["name"].astype(str)
        mm = df[names == "aten::mm"].assign(engine="compute")
        comm = df[names.str.startswith("gloo:")].assign(engine="comm")
        rows = pd.concat([mm, comm])
    return pd.DataFrame({"engine": rows["engine"].values, "name": rows["name"].astype(str).values,
                         "start_ns": rows["start_ns"].values, "end_ns": (rows["start_ns"] + rows["dur_ns"]).values})


def _busy_ns(*spans: pd.DataFrame) -> int:
    """Time covered by the union of the spans' [start, end) intervals."""
    from workbench.traces.analysis import busy_intervals

    starts, ends = busy_intervals(pd.concat([d["start_ns"] for d in spans]).to_numpy(),
                                  pd.concat([d["end_ns"] for d in spans]).to_numpy())
    return int((ends - starts).sum())


def trace_tables(rec: RunRecord) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From the attached torch.profiler traces (rank 0): every engine span, and per trace the
    span from first to last engine activity, each engine's busy time and their overlap."""
    from workbench.traces import chrome
    from workbench.untrusted import attachment_file

    spans, summary = [], []
    for name, kind, data in rec.attachments:
        if kind != "trace/chrome-json":
            continue
        with attachment_file(name, data) as path:  # never a path built from the bundle's name
            eng = _engine_spans(chrome.load(path)[0])
        if not len(eng):
            continue
        label = name.removesuffix(".json.gz").replace("_", " ", 1)
        t0 = int(eng["start_ns"].min())
        spans.append(eng.assign(trace=label, start_us=(eng["start_ns"] - t0) / 1e3,
                                end_us=(eng["end_ns"] - t0) / 1e3))
        compute, comm = eng[eng["engine"] == "compute"], eng[eng["engine"] == "comm"]
        compute_ns, comm_ns = _busy_ns(compute), _busy_ns(comm)
        # Time both engines ran = each one's busy time minus what their union covers once.
        summary.append({"trace": label, "span_us": (int(eng["end_ns"].max()) - t0) / 1e3,
                        "compute_busy_us": compute_ns / 1e3, "comm_busy_us": comm_ns / 1e3,
                        "overlap_us": (compute_ns + comm_ns - _busy_ns(compute, comm)) / 1e3, "spans": len(eng)})
    cols = ["trace", "engine", "name", "start_us", "end_us"]
    return (pd.concat(spans)[cols] if spans else pd.DataFrame(columns=cols)), pd.DataFrame(summary)


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    out = rec.outputs
    vt = tables.variants_table(rec)
    result = {"variants": tables.with_us(vt)}
    if out.get("fits"):
        result["fits"] = pd.DataFrame([{"cost": name, **{k: v for k, v in f.items() if k != "points"}}
                                       for name, f in out["fits"].items()])
    result["fit_points"] = fit_points_table(rec, vt)
    result["derivation"] = pd.DataFrame([{"step": s["step"], "derivation": s["text"]}
                                         for s in out.get("plan", {}).get("steps", [])])
    sims = pd.DataFrame(out.get("simulated", []))
    if len(sims):
        best = sims["makespan_us"].min()
        sims = sims.assign(chunks=sims["chunks"].map(lambda c: ",".join(map(str, c))),
                           over_best=sims["makespan_us"] / best - 1)
    result["simulated"] = sims
    result["gantt"] = gantt_table(rec)
    result["live"] = live_table(rec, vt)
    result["measured_timeline"], result["trace_overlap"] = trace_tables(rec)
    return result


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    import altair as alt

    from workbench import charts as wbcharts

    out = {}
    pts = tbls.get("fit_points")
    if pts is not None and len(pts):
        base = alt.Chart(pts).encode(x=alt.X("x:Q", title="rows (CostMM) or MiB (CostComm)"),
                                     color=alt.Color("cost:N"))
        dots = base.mark_circle(size=60).encode(y=alt.Y("measured_us:Q", title="us"),
                                                tooltip=["cost", "m", "measured_us", "fit_us", "fit"])
        bars = base.mark_errorbar().encode(y=alt.Y("ci_lo_us:Q", title="us"), y2="ci_hi_us:Q")
        line = base.mark_line(strokeDash=[4, 3]).encode(y="fit_us:Q")
        out["fits"] = (dots + bars + line).facet(column=alt.Column("unit:N", title=None)).resolve_scale(
            x="independent", y="independent").properties(title="Measured cost points (median, 95% CI) and fits")
    gantt = tbls.get("gantt")
    if gantt is not None and len(gantt):
        g = gantt.assign(group=gantt["shown"].map({True: "default", False: "other"}))
        options = list(dict.fromkeys(g.loc[~g["shown"], "split"]))
        pick = alt.param(name="other_split", value=options[0] if options else "",
                         bind=alt.binding_select(options=options or [""], name="also show "))
        out["gantt"] = alt.Chart(g).mark_bar(stroke="white").add_params(pick).transform_filter(
            "datum.shown || datum.split == other_split").encode(
            x=alt.X("start_us:Q", title="simulated time (us)"), x2="end_us:Q",
            y=alt.Y("engine:N", title=None, sort=["compute", "comm"]),
            color=alt.Color("chunk:N", title="chunk"),
            row=alt.Row("split:N", title=None, sort=alt.EncodingSortField("order", op="min"),
                        header=alt.Header(labelAngle=0, labelAlign="left")),
            tooltip=["split", "engine", "chunk", "rows", alt.Tooltip("start_us:Q", format=".1f"),
                     alt.Tooltip("end_us:Q", format=".1f")],
        ).properties(width=560, height=50, title="Simulated pipeline (Gantt)")
    sims = tbls.get("simulated")
    if sims is not None and len(sims):
        uni = sims[sims["split"].str.startswith("uniform") | (sims["split"] == "unsplit")]
        line = alt.Chart(uni).mark_line(point=True).encode(
            x=alt.X("n_chunks:Q", title="chunks"), y=alt.Y("makespan_us:Q", title="simulated makespan (us)"),
            tooltip=["split", "chunks", alt.Tooltip("makespan_us:Q", format=".1f"), alt.Tooltip("gain:Q", format=".1%")])
        marks = alt.Chart(sims[sims["split"].isin(["heuristic", "best"])]).mark_point(size=120, filled=True).encode(
            x="n_chunks:Q", y="makespan_us:Q", color=alt.Color("split:N"),
            tooltip=["split", "chunks", alt.Tooltip("makespan_us:Q", format=".1f"), alt.Tooltip("gain:Q", format=".1%")])
        out["splits"] = (line + marks).properties(title="Uniform splits vs the heuristic and the best split",
                                                  width=420, height=260)
    tl = tbls.get("measured_timeline")
    if tl is not None and len(tl):
        out["measured_timeline"] = alt.Chart(tl).mark_bar().encode(
            x=alt.X("start_us:Q", title="measured time on rank 0 (us, torch.profiler)"), x2="end_us:Q",
            y=alt.Y("engine:N", title=None, sort=["compute", "comm"]), color=alt.Color("engine:N"),
            row=alt.Row("trace:N", title=None),
            tooltip=["trace", "engine", "name", alt.Tooltip("start_us:Q", format=".1f"),
                     alt.Tooltip("end_us:Q", format=".1f")],
        ).properties(width=560, height=40, title="Measured timeline (one profiled call, rank 0)")
    live = tbls.get("live")
    if live is not None and len(live) and "predicted_us" in live:
        preds = [c for c in ("predicted_us", "predicted_fit_us") if c in live]
        long = live.melt(id_vars=["variant", "comm", "split", "measured_us"], value_vars=preds,
                         var_name="model", value_name="predicted")
        long["model"] = long["model"].map({"predicted_us": "given contention", "predicted_fit_us": "fitted contention"})
        lo, hi = float(live["measured_us"].min()) * 0.85, float(live["measured_us"].max()) * 1.1
        diag = pd.DataFrame({"measured_us": [lo, hi], "predicted": [lo, hi], "lo": [lo * 0.9, hi * 0.9],
                             "hi": [lo * 1.1, hi * 1.1]})
        band = alt.Chart(diag).mark_area(opacity=0.15, color="gray").encode(
            x=alt.X("measured_us:Q", scale=alt.Scale(domain=[lo, hi]), title="measured median (us)"),
            y=alt.Y("lo:Q", scale=alt.Scale(domain=[lo, hi]), title="predicted (us)"), y2="hi:Q")
        line = alt.Chart(diag).mark_line(color="gray").encode(x="measured_us:Q", y="predicted:Q")
        dots = alt.Chart(long).mark_point(size=60, filled=True).encode(
            x="measured_us:Q", y="predicted:Q", color=alt.Color("comm:N"), shape=alt.Shape("model:N"),
            tooltip=["variant", "model", alt.Tooltip("measured_us:Q", format=".1f"),
                     alt.Tooltip("predicted:Q", format=".1f")])
        out["live"] = (band + line + dots).properties(
            title="Predicted vs measured (band: within 10%)", width=420, height=360)
    vt = tbls.get("variants")
    if vt is not None and len(vt):
        out["variants"] = wbcharts.median_ci_bars(vt, title="Every measured variant (median, 95% CI)")
    return out


def _md(df: pd.DataFrame, cols: list[str]) -> str:
    """The columns of ``cols`` that the table has, as a GitHub Markdown table."""
    from workbench.report import md_table

    return md_table(df[[c for c in cols if c in df]])


def report_sections(rec: RunRecord, tbls: dict[str, pd.DataFrame]) -> list[str]:
    out = rec.outputs
    secs = []
    if out.get("fits"):
        f = out["fits"]
        secs.append("## Cost fits\n\n"
                    f"- CostMM(m) = {esc(f['mm']['text'])} ({esc(f['mm']['source'])})\n"
                    f"- CostComm(x) = {esc(f['comm']['text'])} ({esc(f['comm']['source'])}), x = m\\*N\\*sizeof(dtype)\n"
                    f"- contention factor {esc(out.get('contention'))}\n")
    if len(tbls.get("fit_points", [])):
        secs.append("### Measured points\n\n" + _md(tbls["fit_points"], ["cost", "m", "x", "unit", "measured_us",
                                                                          "ci_lo_us", "ci_hi_us", "fit_us"]))
    if len(tbls.get("derivation", [])):
        plan = out["plan"]
        head = (f"Result: **{esc(plan['chunks'])}**" if plan["ok"] else
                f"**No valid split**: {esc(plan['reason'])}. The simulator shows the unsplit case.")
        lines = "\n".join(f"{i + 1}. **{esc(r.step)}**: {esc(r.derivation)}"
                          for i, r in enumerate(tbls["derivation"].itertuples()))
        secs.append("## The seed's split, step by step\n\n" + lines + "\n\n" + head +
                    "\n\nReadings: " + " ".join(SEED_FIGURES["notes"][1:]))
    sims = tbls.get("simulated")
    if sims is not None and len(sims):
        skipped = f"\n\n{esc(out['best_skipped'])}." if out.get("best_skipped") else ""
        secs.append("## Simulated splits\n\n" + _md(sims, ["split", "chunks", "n_chunks", "makespan_us", "serial_us",
                                                           "gain", "over_best"]) + skipped)
    gantt = tbls.get("gantt")
    if gantt is not None and len(gantt):
        secs.append("## Gantt (simulated, ASCII)\n\n" + esc(ascii_gantt(gantt[gantt["shown"]]), "block"))
    ov = tbls.get("trace_overlap")
    if ov is not None and len(ov):
        secs.append("## Measured overlap (torch.profiler, one call, rank 0)\n\n" +
                    _md(ov, ["trace", "span_us", "compute_busy_us", "comm_busy_us", "overlap_us", "spans"]) +
                    "\n\nA profiled call runs a little slower than a timed one; the busy times show how much "
                    "of the collective actually ran under the matmul.")
    live = tbls.get("live")
    if live is not None and len(live):
        lv = out.get("live", {})
        secs.append(f"## Predicted vs measured ({esc(lv.get('backend'))}, world size {esc(lv.get('world_size'))})\n\n" +
                    _md(live, ["variant", "chunks", "measured_us", "ci_lo_us", "ci_hi_us", "predicted_us", "err",
                               "predicted_fit_us", "err_fit", "contention_fit", "speedup_vs_serial_default",
                               "correct"]) +
                    "\n\n`err` uses the given contention factor; `err_fit` the (compute, comm) factors fitted to "
                    "the heuristic and uniform runs of the same collective (the best split is then searched with "
                    "them, so its error is out of sample).")
    return secs


def ascii_gantt(gantt: pd.DataFrame, width: int = 72) -> str:
    """One text line per split and engine; digits mark the chunk running."""
    end = gantt["end_us"].max()
    lines = []
    for split, g in gantt.groupby("split", sort=False):
        lines.append(split)
        for engine in ("compute", "comm"):
            row = [" "] * width
            for seg in g[g["engine"] == engine].itertuples():
                a, b = int(seg.start_us / end * width), max(int(seg.start_us / end * width) + 1,
                                                            int(seg.end_us / end * width))
                for i in range(a, min(b, width)):
                    row[i] = str(seg.chunk % 10)
            lines.append(f"  {engine:>7} |{''.join(row)}|")
    return "\n".join(lines)



def verdict(rec: RunRecord) -> str:
    """One line: the seed heuristic's split and, where measured, the best overlap against serial."""
    failed = [v.variant for v in rec.variants if not v.correct]
    tail = f" {len(failed)} variant(s) FAILED their check: {esc(', '.join(failed))}." if failed else ""
    # Only the two tables it needs: analyze() would also parse every attached trace.
    sims = {s["split"]: s for s in rec.outputs.get("simulated", [])}
    parts = [f"{label} [{esc(','.join(map(str, sims[name]['chunks'])))}]: simulated gain {sims[name]['gain']:.1%}"
             for name, label in (("heuristic", "seed heuristic"), ("best", "best split")) if name in sims]
    text = ("; ".join(parts) + ".") if parts else ""
    live = live_table(rec)
    over = live[live["variant"].str.startswith("overlap/") & live["correct"]] if len(live) else live
    if len(over):
        top = over.sort_values("measured_us").iloc[0]
        # Against the backend's own serial op when the run has it, else the same collective's serial.
        backend = esc(rec.outputs.get("live", {}).get("backend", "default"))
        for col, against in (("speedup_vs_serial_default", f"serial {backend.upper() if backend == 'nccl' else backend}"),
                             ("speedup_vs_serial_same_comm", f"serial {esc(top['comm'])}")):
            if pd.notna(top.get(col)):
                text += (f" Measured: fastest overlap {esc(top['variant'])} [{esc(top['chunks'])}] "
                         f"{top['measured_us']:.0f} us, "
                         f"{top[col]:+.1%} against {against} (same run)")
                if pd.notna(top.get("err_fit")):
                    text += f", prediction error {top['err_fit']:+.1%} with fitted contention"
                text += "."
                break
    return (text.strip() or "No split could be planned; see the derivation.") + tail
