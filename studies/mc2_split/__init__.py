"""MC² split: how to chunk a matmul + all-reduce so compute and communication overlap.

Question (seed: the Ascend CANN MC² tuning case): given CostMM(m) and CostComm(m), the
matmul and collective times of an m-row slice of an M x K by K x N product, which chunking
of the M rows hides the most communication behind compute, and how close does the seed's
short-block/long-block heuristic get to the best one?

What it does:

- fits CostMM (us per row) and CostComm (us per MiB) to points measured on the live
  machine (m = 256, 512, 768, 1024, 2048 by default), as lines or two-piece lines, or takes
  fits typed in by the user (``mm_fit``, ``comm_fit``);
- applies the seed's split algorithm step by step (``studies/mc2_split/plan.py`` says how
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

The analysis (``studies/mc2_split/analysis.py``) states every gain over serial, prediction
error and contention factor with a 95% CI from the raw samples, checks the seed's claims
(``claims.py``; the seed's 1262 us against the floor of its own fits: ``seed.py``) and gives
the spread over repeated runs (``spread.py``). Presets: ``cpu`` (gloo, a shape and fits where
the seed's rule splits), ``seed-example`` (the seed's fits), ``seed-inflation`` (the seed's
three inflation examples), ``h200``. Measured findings: ``traces/mc2-split/README.md``.
"""

from __future__ import annotations

from workbench.running import launcher
from workbench.running.launcher import local_share
from workbench.seam.study import Param, ParamError, ParamSpace, RunContext

from . import plan as planmod
from .plan import DTYPE_BYTES, CostModel, Fit, heuristic, parse_fit, uniform_chunks
from .search import best_split, unsearchable
# (the function under another name: ``simulate`` names the submodule)
from .simulate import inflation_cases, simulate as simulate_split
# the hooks and the seed's data (workbench.seam.study lists them)
from .analysis import NULLS, analyze  # noqa: F401 (NULLS: the declared null controls, workbench.evidence.engine)
from .claims import SEED_CLAIMS  # noqa: F401
from .report import README_BLOCKS, TITLES, charts, findings, report_sections  # noqa: F401
from .spread import TARGET  # noqa: F401
from .seed import SEED_FIGURES
# what its page shows beside the generic page (pages/mc2_split.py): the spread over repeated runs
from .spread import TARGET_PCT, across_runs, display as spread_display  # noqa: F401

ID = "mc2-split"
TITLE = "MC² split: chunking matmul + all-reduce for overlap"
SEED = "002_f06ad4ccbb701e5b.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "Ascend CANN's MC² operator tuning case"
SEED_SUMMARY = ("Ascend CANN MC² tuning case: fit CostMM/CostComm, pick a short and a long block so compute "
                "and all-reduce overlap; M=4096 K=3072 N=8192 fp16 gives [512, 896x4], 1874 -> 1262 us (32.7%).")
RUNS_ON = "gloo on any CPU; NCCL on GPUs"

KEY_TABLE = "key"
#: what the study holds its figures to (workbench.evidence.engine.Target), judged on the CIs
TARGETS = (TARGET,)
KEY_CHART = "key"

PROVIDERS = ("default", "limited", "ce", "ce-oneshot", "triton", "triton-pull", "triton-persistent")
UNIFORM_SIM = range(1, 17)  # uniform splits the simulator always shows

SPACE = ParamSpace(
    params=(
        Param("m", "int", 4096, "rows M of the M x K input (the split axis)", "rows", min=1, max=1 << 20),
        Param("k", "int", 3072, "inner dimension K", min=1, max=1 << 20),
        Param("n", "int", 8192, "columns N of the output", min=1, max=1 << 20),
        Param("dtype", "str", "auto", "element type; auto: float16 (the seed's half) except float32 on CPUs "
              "(gloo), where half-precision matmul is slow or missing", choices=("auto",) + tuple(DTYPE_BYTES)),
        Param("scenario", "str", "split", "split: plan, simulate and (live) measure the split of this shape; "
              "inflation: the seed's three inflation examples (a 200 us matmul split in halves of 100, 150 and "
              "200 us beside a 300 us all-reduce) through the simulator", choices=("split", "inflation")),
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
        Param("providers", "str", ["default"], "all-reduce implementations (the compared dimension): the backend's "
              "own; NCCL limited to nccl_ctas CTAs on a high-priority stream; copy-engine pushes through symmetric memory (reduce-scatter + "
              "all-gather, or one-shot: every rank adds the whole chunk); the same two-shot push in one fixed-grid "
              "Triton launch per chunk, one CTA per SM of the carve-out; or that launch loading the peers' partials "
              "over NVLink instead of staging them (triton-pull); or that pull for all chunks in one launch per op "
              "(triton-persistent)",
              choices=PROVIDERS, multi=True),
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
        Param("rng_seed", "int", 0, "random inputs' seed"),
    ),
    presets={
        # the seed's text rule (m0 = min(a, b, c) = 384 here): its example's max(a, b, c) needs
        # K x N >= 4 GiB / M, a shape a 2-core CPU cannot time in a minute
        "smoke": {"m": 1024, "k": 64, "n": 256, "dtype": "float32", "backend": "gloo", "live": "on", "rule": "text",
                  "points": [256, 512], "uniform": [2, 4], "reps": 3, "warmup": 1, "max_chunks": 8},
        # quick: the cpu preset's shape with its fits measured live (the split then varies from run to
        # run with the machine's noise); the seed shape is the default (and 'h200') for GPU nodes
        "quick": {"m": 4096, "k": 64, "n": 256, "rule": "text", "points": [256, 512, 1024, 2048], "uniform": [4],
                  "reps": 10},
        # cpu: fits typical of a 2-core x86 VM under gloo (traces/mc2-split/README.md, "CPU preset"),
        # communication-bound as the seed's case; the rule gives [512, 1792, 1792]; about 10 s
        "cpu": {"m": 4096, "k": 64, "n": 256, "dtype": "float32", "backend": "gloo", "live": "on", "rule": "text",
                "mm_fit": "20,0.4", "comm_fit": "200,900", "uniform": [2, 4, 8], "reps": 10},
        "seed-example": {"mm_fit": "16.5,0.192", "comm_fit": "47,16", "live": "off"},
        "seed-inflation": {"scenario": "inflation", "live": "off"},
        "h200": {"backend": "nccl", "live": "on", "providers": ["default", "limited", "ce", "ce-oneshot", "triton", "triton-pull",
                          "triton-persistent"],
                 "carveout": [0, 16, 24],
                 "reps": 20},
    },
    headline=("m", "k", "n", "scenario", "live", "world_size", "providers", "reps"),
    gpu_only=("nccl_ctas", "triton_ctas", "triton_warps", "nccl_cga", "carveout"),
    purposes={
        "smoke": "the tests' gloo run: a tiny shape, two chunkings; seconds",
        "quick": "the cpu preset's shape with its fits measured live (the split varies with the machine's noise)",
        "cpu": "gloo, 2 processes, a small shape with fits given under which the seed's rule splits; well under "
               "a minute",
        "seed-example": "the seed's own fits: plan and simulation of its worked example (nothing timed)",
        "seed-inflation": "the seed's three 200 us matmul examples, whose gains the seed states as 100, 50 and "
                          "-50 us, with their Gantt (simulated)",
        "h200": "NCCL on GPUs, every collective, carve-outs 0, 16 and 24",
    },
    # "seed" means the report a study reproduces; "comms" was the compared dimension's name before
    # every study called it providers (a reproduce command of an older run still reads)
    renamed={"seed": "rng_seed", "comms": "providers"},
)

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
    if params["scenario"] == "inflation":
        return False
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
    # the ranks of this node: all of them, unless the run spans nodes (a topology error: requires() names it)
    local = local_share(params["world_size"], "nccl")[0] or params["world_size"]
    return "nccl" if _cuda_count() >= local else "gloo"


def _dtype(params) -> str:
    if params["dtype"] != "auto":
        return params["dtype"]
    return "float32" if _live(params) and _backend(params) == "gloo" else "float16"


def validate(params) -> None:
    if params["scenario"] == "inflation":
        if params["live"] == "on":
            raise ParamError("live", "scenario=inflation is the seed's worked examples through the simulator: "
                                     "nothing to run live; use live=off")
        return
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
    if backend == "gloo" and set(params["providers"]) - {"default"}:
        raise ParamError("providers", "'limited', the copy-engine and the Triton collectives need NCCL on GPUs; with gloo "
                                      "use providers=default")


def runs_on_gpu(params) -> bool:
    """gloo runs on CPU processes: named by their CPUs; nccl (and auto, on a GPU node) by the GPUs."""
    return params.get("backend") != "gloo"


def requires(params) -> str | None:
    if not _live(params):
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return "torch is not installed: pip install torch"
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
        s = simulate_split(chunks, model, contention, comm_first)
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
    if params["scenario"] == "inflation":
        ctx.progress(1.0, "done")
        return {"inflation": inflation_cases()}
    mm, comm = _fits(params)
    out: dict = {"notes": SEED_FIGURES["notes"][1:]}
    if mm is not None:
        out["given"] = plan_outputs(params, _model(params, mm, comm), params["contention"])
    live = {}
    if _live(params):
        live = _run_live(params, ctx, mm, comm)
        out["live"] = live
    # the headline plan: given fits, else the fits measured for the first collective
    head = out.get("given") or next((v["planned"] for v in live.get("by_provider", {}).values() if "planned" in v), None)
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
    backend = _backend(params)
    cfg = {k: params[k] for k in ("m", "k", "n", "points", "reps", "inner", "trace", "warmup", "uniform", "contention",
                                  "rule", "align", "max_chunks", "nccl_ctas", "triton_ctas", "triton_warps", "nccl_cga", "rng_seed")}
    cfg |= {"backend": backend, "dtype": _dtype(params), "providers": params["providers"], "carveouts": params["carveout"], "fits_given": mm is not None,
            "mm_fit": mm.to_json() if mm else None, "comm_fit": comm.to_json() if comm else None}
    ctx.progress(0.0, f"starting {params['world_size']} {backend} processes (torchrun)")
    got = launcher.launch(ID, cfg, params["world_size"], ctx, timeout_s=params["timeout_s"])
    by_provider: dict[str, dict] = got.outputs.get("by_provider", {})
    for info in by_provider.values():
        fits = info.get("fits") or {"mm": mm.to_json(), "comm": comm.to_json()}
        model = _model(params, Fit.from_json(fits["mm"]), Fit.from_json(fits["comm"]))
        info["planned"] = plan_outputs(params, model, params["contention"], info.get("full"))
    live = {"backend": backend, "dtype": _dtype(params), "world_size": params["world_size"], "by_provider": by_provider,
            "notes": got.notes, "launch": got.outputs.get("launch", {})}
    if backend == "nccl":  # the serial baseline's library: the full-size all-reduce and the cost points' sizes
        ctx.progress(0.99, "the collective library's provenance (a short launch of its own)")
        live["collective"] = launcher.probe_collectives(
            [{"op": "all_reduce", "numel": m * params["n"], "dtype": _dtype(params)}
             for m in sorted(set(params["points"]) | {params["m"]})], params["world_size"], ctx)
    return live


