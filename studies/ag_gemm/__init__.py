"""Fused all-gather + GEMM on NVIDIA GPUs (and AMD's, compiled for; see below): the iris HBM-buffer idea
against strong baselines.

Question: with A sharded over W GPUs and B replicated, how much faster than "all-gather, then
matmul" can every rank get the full C = A @ B, and how close to the perfect-overlap bound
max(all-gather alone, matmul alone)? Does the seed's HBM-buffer kernel deliver what it claims?

Formulations (``shard``, a grid axis): ``rows`` (A row-sharded, M/W rows each: this study's)
and ``k`` (the seed's: each rank holds M x K/W, gathered along K; its review found the RCCL
baseline gathered wrongly, see ``studies/ag_gemm/methods.py``).

Providers (the compared dimension, ``providers``), all timed in the same run, round-robin,
after the same correctness check (fp32 reference from ``all_gather`` into a list,
concatenated along the sharded dim; relative max error within the dtype's tolerance, on
every rank):

- ``nccl``: ``all_gather_into_tensor`` into a preallocated buffer, then ``torch.matmul`` (the
  baseline; with ``shard=k`` the seed's wrong baseline, shown failing its check);
- ``all-gather-cat``: ``all_gather`` into a list, ``cat`` along the sharded dim, matmul (the
  seed's corrected baseline);
- ``torch-fused``: ``torch.ops.symm_mem.fused_all_gather_matmul``;
- ``ce-chunked``: copy-engine pulls of the peers' shards from symmetric memory on a side
  stream, overlapped with cuBLAS matmuls of the local shard and of each arrived piece;
- ``hbm-buffer``: one Triton kernel whose fetch rows pull remote A blocks into a local
  staging buffer and publish per-block flags while GEMM rows compute (the seed's design,
  ``kernels/triton/ag_gemm.py``), with per-program tracing;
- ``hbm-buffer-ce``: the same kernel and flags, its staging filled by copy engines instead
  (copies on one side stream per peer, a flag per chunk written by the stream behind its
  copy, ``kernels/triton/copyengine.py``): no SM takes part in communication;
- ``auto``: times the candidates of ``studies/ag_gemm/autoconfig.py`` briefly, keeps the
  fastest only if it beats ``nccl`` by 2%, and is measured again;
- ``all-gather`` and ``matmul`` alone, for the bound.

``mode=kernel`` measures the fused kernel's two halves on one GPU instead (no torchrun):
cuBLAS, the kernel with every tile local, its GEMM path alone and the whole kernel at an
emulated world size (peers' shards in local buffers), and the seed review's experiments
(``experiments=barrier,layout``: the barrier before the flag release on and off, the two
staging layouts); see ``studies/ag_gemm/kernelbench.py``.

Clock: ``workbench.running.harness.DistTimer``: CUDA events around back-to-back calls after a
barrier; each per-call sample is the maximum over ranks, every rank's own samples kept (the
slowest rank and the skew). The run starts torchrun through ``workbench.running.launcher`` (worker
``studies/ag_gemm/worker.py``; several nodes too), which keeps NVLink multicast off and
kills every rank on a timeout, a cancel or an error. ``backend=gloo`` runs the providers
that need no GPU on CPU processes (both formulations), and ``interpret=true`` checks the fused
kernel under Triton's interpreter with the peers emulated in one process: a check of the
launcher, the references and the analysis on any machine, not a GPU result. Findings on the
committed runs: ``traces/ag-gemm/README.md``.

ROCm: the launcher and providers take no NVIDIA-only path (torch's ``nccl`` backend is RCCL
there, ``copy_`` from a peer's buffer is ``hipMemcpyAsync``); the fused kernel drops TMA
descriptors and its trace, and the copy-engine fetch writes its flags with a one-thread kernel
(PyTorch binds no ``hipStreamWriteValue32``). Every Triton kernel of this study and of
mc2-split is compiled for gfx942 and gfx950 on the CPU in the tests (``kernels/triton/aot.py``);
none has run on an AMD GPU here (``docs/gpu.md``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import lru_cache
from typing import Any

from workbench.running import launcher
from workbench.base import procs
from workbench.base.env import REPO_ROOT
from workbench.running.launcher import local_share
from workbench.seam.study import Param, ParamError, ParamSpace, RunContext

from . import kernelbench
from . import methods as _methods
# the hooks and the seed's data (workbench.seam.study lists them)
from .analysis import NULLS, analyze  # noqa: F401 (NULLS: the declared null controls, workbench.evidence.engine)
from .claims import SEED_CLAIMS  # noqa: F401
from .report import README_BLOCKS, TITLES, charts, findings, report_sections  # noqa: F401
from .seed import SEED_FIGURES  # noqa: F401
# what its page draws beside the generic page (pages/ag_gemm.py): the run's attached traces
from .analysis import TRACE_KINDS, attachment_spans, merged_ranks, rank_groups  # noqa: F401
from .spans import ATTACH_KIND as PROGRAMS_KIND  # noqa: F401

ID = "ag-gemm"
TITLE = "Fused all-gather + GEMM (HBM-buffer kernel vs NCCL, PyTorch symmetric memory, copy engine)"
SEED = "004_7d53943015c21e67.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "ROCm/iris PR #346, a fused all-gather + GEMM kernel"
SEED_SUMMARY = ("iris PR #346: fetcher/GEMM workgroup split with an HBM staging buffer and per-tile flags; "
                "2.1-3.4x over an all-gather barrier baseline on 8x MI325X (a baseline later found unfair).")
RUNS_ON = "2+ NVIDIA GPUs; committed H200 results anywhere"
KEY_TABLE = "seed_table"
KEY_CHART = "speedup"
#: the committed run a page without a run of its own opens on: the benchmark at the most ranks
#: lent (4, issue #35's shapes, every provider), not the review run that has more checked variants
HEADLINE_RUN = "bench-ws4"

PROVIDERS = _methods.METHODS + ("auto",) + _methods.PARTS
#: the providers that run on any torch.distributed backend (gloo on CPUs too)
ANY_BACKEND_PROVIDERS = _methods.ANY_BACKEND
KERNEL_EXPERIMENTS = ("breakdown", "barrier", "layout")
#: the fused kernel's shape under the interpreter (interpret=true): small tiles, fp16 (the
#: interpreter's bf16 dot is wrong in triton 3.9), shapes off the tile sizes
INTERPRET_KNOBS = {"block_m": 16, "block_n": 16, "block_k": 16, "fetchers": 2, "k_tiles_per_flag": 1}

SPACE = ParamSpace(
    params=(
        Param("m", "int", [1024, 4096, 16384], "rows of A (and C), all ranks together", min=1, max=1 << 20, multi=True),
        Param("n", "int", 3584, "columns of B and C", min=1, max=1 << 18),
        Param("k", "int", 8192, "inner dimension", min=1, max=1 << 18),
        Param("dtype", "str", ["fp16"], "element type", choices=("fp16", "bf16"), multi=True),
        Param("shard", "str", ["rows"], "how A is sharded: rows (M/ws x K each) or k (the seed's: M x K/ws each, "
              "gathered along K; only nccl, all-gather-cat and the parts run)", choices=_methods.SHARDS, multi=True),
        Param("world_size", "int", 2, "GPUs (ranks), one process each; all nodes together", min=1, max=64),
        Param("backend", "str", "nccl", "nccl: NVIDIA GPUs (RCCL on AMD GPUs under ROCm); gloo: CPU processes, the "
              "providers that need no GPU "
              "(checks the launcher and the analysis, not a GPU result)", choices=("nccl", "gloo")),
        Param("providers", "str", list(PROVIDERS), "providers to time (the compared dimension; older runs call it "
              "method)", choices=PROVIDERS, multi=True),
        Param("interpret", "bool", False, "also check the fused kernel under Triton's interpreter on this CPU, peers "
              "emulated in one process (correctness only, not timed)"),
        Param("chunks", "int", 1, "ce-chunked: pieces per peer shard", min=1, max=64),
        Param("block_m", "int", 128, "hbm-buffer: tile rows", choices=(16, 32, 64, 128, 256)),
        Param("block_n", "int", 256, "hbm-buffer: tile columns", choices=(16, 32, 64, 128, 256)),
        Param("block_k", "int", 64, "hbm-buffer: tile depth", choices=(16, 32, 64, 128)),
        Param("fetchers", "int", 16, "hbm-buffer: fetch rows at the head of the work queue (the others are "
              "spread among the local tiles)", min=0, max=1 << 20),
        Param("k_tiles_per_flag", "int", -1, "hbm-buffer: k-tiles per fetch row and ready flag (0: all of an "
              "M-tile; -1: by shape, small rows when all tiles fit one wave)", min=-1),
        Param("stage_layout", "str", "rows", "hbm-buffer: staged A row-major or tile-contiguous",
              choices=("rows", "tiles")),
        Param("num_stages", "int", 4, "hbm-buffer: software-pipeline stages", min=1, max=6),
        Param("num_warps", "int", 8, "hbm-buffer: warps per program", choices=(4, 8)),
        Param("programs", "int", 0, "hbm-buffer: persistent programs (0: one per SM)", min=0, max=4096),
        Param("stream_k", "int", 1, "hbm-buffer: 0 whole tiles; 1 the last partial wave split along K over "
              "every SM; 2 that plus one full wave", min=0, max=2),
        Param("sk_split", "int", 0, "hbm-buffer: stream-K pieces per cut tile (0: by a cost model)", min=0, max=16),
        Param("tma", "bool", True, "hbm-buffer: TMA descriptors for A, B, C (else pointer loads)"),
        Param("fetch_evict", "bool", False, "hbm-buffer: fetch rows read the peer's rows with an evict-first "
              "L2 policy"),
        Param("ce_chunks", "int", 0, "hbm-buffer-ce: chunks per peer shard, row blocks of whole M-tiles, one "
              "copy and one flag each (0: by shape: one per M-tile when the tiles fit one wave, else 4)",
              min=0, max=256),
        Param("wait_per_group", "bool", False, "hbm-buffer: a remote tile computes each k-group as its flag "
              "is set (else it waits for all of its flags first)"),
        Param("fetch_order", "str", "m", "hbm-buffer: fetch rows M-tile by M-tile (m) or k-group by k-group "
              "across every peer's M-tiles (k: with wait_per_group, a remote tile starts on its first k-group)",
              choices=("m", "k")),
        Param("mode", "str", "multi-gpu", "multi-gpu: every provider across world_size GPUs (torchrun); "
              "kernel: the fused kernel's GEMM and fetch paths on one GPU against cuBLAS",
              choices=("multi-gpu", "kernel")),
        Param("emulate", "int", [2, 4], "mode=kernel: world sizes emulated on one GPU (peers' shards in "
              "local buffers)", min=2, max=8, multi=True),
        Param("experiments", "str", ["breakdown"], "mode=kernel: breakdown (cuBLAS, kernel, GEMM path, emulated "
              "peers); both modes: barrier (the barrier before the flag release off, and checked launches with "
              "and without it); layout (tile-contiguous staging beside row-major); multi-gpu mode needs the "
              "hbm-buffer provider for them", choices=KERNEL_EXPERIMENTS, multi=True),
        Param("trials", "int", 200, "experiments=barrier: checked launches (staging poisoned before each) with "
              "and without the barrier, per shape", min=0, max=100_000),
        Param("repeat", "int", 20, "samples per provider", min=3, max=1000),
        Param("trace", "str", "programs", "per-program trace of hbm-buffer; 'all' adds torch.profiler traces "
              "of every provider at the largest M (every rank's)", choices=("off", "programs", "all")),
        Param("timeout_s", "int", 600, "kill the run after this long", unit="s", min=10, max=7200),
        Param("rng_seed", "int", 0, "input seed (A shards add the rank)", min=0),
    ),
    presets={
        # Runs anywhere (CPU processes under gloo): the launcher, both references and the analysis.
        "smoke": {"backend": "gloo", "m": [64], "n": 48, "k": 32, "dtype": ["bf16"],
                  "providers": ["nccl", "all-gather-cat", "matmul"], "repeat": 3, "trace": "off", "timeout_s": 120},
        "quick": {"m": [4096, 16384], "repeat": 10},
        "cpu": {"backend": "gloo", "m": [64], "n": 48, "k": 32, "dtype": ["bf16"], "shard": ["rows", "k"],
                "providers": list(ANY_BACKEND_PROVIDERS), "interpret": True, "repeat": 5, "trace": "all",
                "timeout_s": 180},
        "kernel": {"mode": "kernel", "dtype": ["fp16", "bf16"], "repeat": 30},
        # The seed review's experiments on one GPU, at an emulated world size 2.
        "review": {"mode": "kernel", "dtype": ["fp16"], "emulate": [2], "experiments": ["barrier", "layout"],
                   "trials": 200, "repeat": 30, "trace": "off"},
    },
    headline=("backend", "m", "dtype", "world_size", "providers", "repeat"),
    gpu_only=("interpret", "chunks", "block_m", "block_n", "block_k", "fetchers", "k_tiles_per_flag", "stage_layout",
              "num_stages", "num_warps", "programs", "stream_k", "sk_split", "tma", "fetch_evict", "ce_chunks",
              "wait_per_group", "fetch_order", "mode", "emulate", "experiments", "trials"),
    purposes={
        "smoke": "the tests' gloo run on CPUs: m=64, checks the launcher and the analysis, times nothing of the seed",
        "quick": "the seed's shapes at M=4096 and 16384, fewer samples (2+ GPUs)",
        "cpu": "gloo on CPU processes, rows and k sharding, the fused kernel checked under Triton's interpreter: "
               "the code path anywhere (the seed's baseline fails its check, as the seed's did)",
        "kernel": "one GPU: the fused kernel's GEMM and fetch paths against cuBLAS, 2 and 4 ranks emulated",
        "review": "one GPU: the seed review's barrier and layout experiments at an emulated world size 2",
    },
    renamed={"seed": "rng_seed"},  # "seed" means the report a study reproduces
)


def validate(params: dict[str, Any]) -> None:
    ws = params["world_size"]
    if params["mode"] == "kernel":
        for m in params["m"]:
            for e in params["emulate"]:
                if m % e:
                    raise ParamError("m", f"{m} is not divisible by the emulated world size {e} (use a multiple of {e})")
    else:
        if params["backend"] == "gloo" and set(params["providers"]) - set(ANY_BACKEND_PROVIDERS):
            raise ParamError("providers", f"with backend=gloo only {', '.join(ANY_BACKEND_PROVIDERS)} run (the others "
                                          "need NVIDIA GPUs)")
        if params["shard"] == ["k"] and not set(params["providers"]) & set(_methods.K_SHARD_PROVIDERS):
            raise ParamError("providers", f"with shard=k only {', '.join(_methods.K_SHARD_PROVIDERS)} run")
        if "k" in params["shard"] and params["k"] % ws:
            raise ParamError("k", f"{params['k']} is not divisible by world_size={ws}: shard=k splits A's columns into "
                                  f"equal shards (use a multiple of {ws})")
        if set(params["experiments"]) - {"breakdown"} and not ("hbm-buffer" in params["providers"]
                                                                and "rows" in params["shard"]):
            raise ParamError("experiments", "the review's experiments (barrier, layout) change the fused kernel: "
                                            "add the hbm-buffer provider and shard=rows")
        for m in params["m"]:
            if "rows" in params["shard"] and m % ws:
                raise ParamError("m", f"{m} is not divisible by world_size={ws}: A is split into equal row shards "
                                      f"(use a multiple of {ws})")
    if params["block_m"] * params["block_k"] * 2 > 64 * 1024 or params["block_k"] * params["block_n"] * 2 > 64 * 1024:
        raise ParamError("block_k", "tiles of A or B over 64 KiB do not fit shared memory with pipelining")


@lru_cache(maxsize=1)
def gpu_probe() -> dict[str, Any]:
    """GPU count, names and the peer-access matrix, read in a child process so this process
    (the app, the CLI) never creates a CUDA context that would sit on GPU 0 during the run.
    Cached: the hardware does not change while the app runs, and the child takes seconds."""
    code = ("import json, torch\n"
            "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
            "print(json.dumps({'count': n, 'names': [torch.cuda.get_device_name(i) for i in range(n)],"
            " 'peer': [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(n)] for i in range(n)]}))")
    try:
        proc = procs.run([sys.executable, "-c", code], 120)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        return {"count": 0, "names": [], "peer": [], "error": str(exc)}


def answers_seed(params: dict[str, Any]) -> bool:
    """Only GPUs answer the seed: a gloo run on CPUs checks the code path (its baseline fails
    its check, as the seed's did), it times nothing the seed asks about."""
    return params.get("backend") != "gloo"


def runs_on_gpu(params) -> bool:
    """gloo runs on CPU processes: named by their CPUs; nccl by the GPUs."""
    return params.get("backend") != "gloo"


#: where the results of GPU machines are, said by every refusal (a page and a terminal alike)
COMMITTED = ("the runs committed from GPU machines read anywhere: python -m workbench runs --all --study ag-gemm, or "
             "this study's page")


def requires(params: dict[str, Any]) -> str | None:
    try:
        import torch
    except ImportError:
        return f"PyTorch is not installed (pip install torch with CUDA); {COMMITTED}"
    if params["mode"] == "kernel":  # one process on the current GPU: no launcher, no peers
        return None if torch.cuda.is_available() else (
            "no CUDA GPU on this machine: mode=kernel needs one NVIDIA GPU (torch with CUDA, triton; an AMD GPU under "
            f"ROCm takes the kernel's path without TMA); {COMMITTED}")
    if params["interpret"]:
        if importlib.util.find_spec("triton") is None:
            return "interpret=true needs triton (pip install triton; its interpreter runs on any CPU)"
    ws = params["world_size"]
    local, reason = local_share(ws, params["backend"])  # the ranks of this node (several nodes: WORKBENCH_NNODES)
    if reason or params["backend"] == "gloo":
        return reason
    if not torch.cuda.is_available():
        return ("no CUDA GPU on this machine: this study needs NVIDIA GPUs linked by NVLink, or AMD GPUs under ROCm "
                f"(torch with CUDA or ROCm, triton); {COMMITTED}")
    probe = gpu_probe()
    if local > probe["count"]:
        return f"world_size={ws} needs {local} GPUs but {probe['count']} are present on this node; lower world_size"
    for i in range(local):
        for j in range(local):
            if not probe["peer"][i][j]:
                return (f"GPU {i} cannot map GPU {j}'s memory (no peer access): the symmetric-memory methods "
                        "need NVLink or PCIe peer-to-peer between all ranks")
    return None


def _worker_config(params: dict[str, Any]) -> dict[str, Any]:
    hbm = {k: params[k] for k in ("block_m", "block_n", "block_k", "fetchers", "k_tiles_per_flag",
                                  "stage_layout", "num_stages", "num_warps", "programs", "stream_k", "sk_split",
                                  "tma", "fetch_evict", "wait_per_group", "ce_chunks", "fetch_order")}
    return {k: params[k] for k in ("m", "n", "k", "dtype", "shard", "providers", "chunks", "repeat", "trace",
                                   "timeout_s", "rng_seed", "backend", "experiments", "trials")} | {"hbm": hbm}


def interpreter_check(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The fused kernel under Triton's interpreter at the run's world size (at least 2), peers
    emulated in one process (``studies/ag_gemm/emulate.py`` in a child: the interpreter must
    be on before triton is imported); one row per emulated rank. Correctness only."""
    ws = max(2, params["world_size"])
    m = min(params["m"])
    m = max(ws, m - m % ws)
    scenario = {"world_size": ws, "m": m, "n": params["n"], "k": params["k"], "dtype": "fp16",
                "knobs": INTERPRET_KNOBS, "launches": 2}
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = procs.run([sys.executable, "-m", "studies.ag_gemm.emulate", json.dumps([scenario])], params["timeout_s"],
                     env=env, cwd=str(REPO_ROOT))
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return [{"world_size": ws, "M": m, "N": params["n"], "K": params["k"], "dtype": "fp16", "rank": "all",
                 "ok": False, "check": f"the interpreter run failed: {tail[0][:300]}"}]
    ranks = json.loads(proc.stdout.strip().splitlines()[-1])[0]
    return [{"world_size": ws, "M": m, "N": params["n"], "K": params["k"], "dtype": "fp16", "rank": r,
             "ok": bool(c["ok"]) and not c["timed_out"], "check": c["check"]} for r, c in enumerate(ranks)]


def run(params: dict[str, Any], ctx: RunContext) -> dict:
    if params["mode"] == "kernel":
        return kernelbench.run(params, ctx)
    ctx.progress(0.0, f"starting torchrun with {params['world_size']} processes ({params['backend']})")
    got = launcher.launch(ID, _worker_config(params), params["world_size"], ctx,
                          timeout_s=params["timeout_s"])
    out = got.outputs | ({"notes": got.notes} if got.notes else {})
    if params["backend"] == "nccl":  # the baseline's all-gather: each M and dtype, each rank's M x K / ws
        ctx.progress(0.96, "the collective library's provenance (a short launch of its own)")
        dtypes = {"fp16": "float16", "bf16": "bfloat16"}
        out["collective"] = launcher.probe_collectives(
            [{"op": "all_gather", "numel": m * params["k"] // params["world_size"], "dtype": dtypes[d]}
             for m in params["m"] for d in params["dtype"]], params["world_size"], ctx)
    if params["interpret"]:
        ctx.progress(0.97, "the fused kernel under Triton's interpreter")
        out["interpreter_check"] = interpreter_check(params)
    ctx.progress(1.0, "done")
    return out

