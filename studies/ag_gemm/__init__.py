"""Fused all-gather + GEMM on NVIDIA GPUs: the iris HBM-buffer idea against strong baselines.

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
- ``auto``: times the candidates of ``studies/ag_gemm/autoconfig.py`` briefly, keeps the
  fastest only if it beats ``nccl`` by 2%, and is measured again;
- ``all-gather`` and ``matmul`` alone, for the bound.

``mode=kernel`` measures the fused kernel's two halves on one GPU instead (no torchrun):
cuBLAS, the kernel with every tile local, its GEMM path alone and the whole kernel at an
emulated world size (peers' shards in local buffers), and the seed review's experiments
(``experiments=barrier,layout``: the barrier before the flag release on and off, the two
staging layouts); see ``studies/ag_gemm/kernelbench.py``.

Clock: ``workbench.harness.DistTimer``: CUDA events around back-to-back calls after a
barrier; each per-call sample is the maximum over ranks, every rank's own samples kept (the
slowest rank and the skew). The run starts torchrun through ``workbench.launcher`` (worker
``studies/ag_gemm/worker.py``; several nodes too), which keeps NVLink multicast off and
kills every rank on a timeout, a cancel or an error. ``backend=gloo`` runs the providers
that need no GPU on CPU processes (both formulations), and ``interpret=true`` checks the fused
kernel under Triton's interpreter with the peers emulated in one process: a check of the
launcher, the references and the analysis on any machine, not a GPU result. Findings on the
committed runs: ``traces/ag-gemm/README.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from typing import Any

import pandas as pd

from studies.ag_gemm import analysis, kernelbench, spans
from studies.ag_gemm import claims as _claims
from studies.ag_gemm import methods as _methods
from studies.ag_gemm.report import charts  # noqa: F401  (the study's charts hook)
from workbench import derived
from workbench.record import RunRecord
from workbench.study import Param, ParamError, ParamSpace, RunContext
from workbench.untrusted import escape as esc

ID = "ag-gemm"
TITLE = "Fused all-gather + GEMM (HBM-buffer kernel vs NCCL, PyTorch symmetric memory, copy engine)"
SEED = "004_7d53943015c21e67.txt"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "ROCm/iris PR #346, a fused all-gather + GEMM kernel"
SEED_SUMMARY = ("iris PR #346: fetcher/GEMM workgroup split with an HBM staging buffer and per-tile flags; "
                "2.1-3.4x over an all-gather barrier baseline on 8x MI325X (a baseline later found unfair).")
SEED_CLAIMS = _claims.SEED_CLAIMS
KEY_TABLE = "seed_table"
KEY_CHART = "speedup"

SEED_FIGURES = {
    "source": "seed 004_7d53943015c21e67.txt: iris PR #346 description, results table (float16, N=3584, K=8192)",
    "machine": "8x AMD MI325X",
    "tables": {
        "seed results": [
            {"ranks": 2, "MxNxK": "1024x3584x8192", "baseline_ms": 1.67, "hbm_buffer_ms": 0.78, "speedup": "2.1x", "tflops": 77},
            {"ranks": 2, "MxNxK": "16384x3584x8192", "baseline_ms": 27.8, "hbm_buffer_ms": 8.2, "speedup": "3.4x", "tflops": 117},
            {"ranks": 4, "MxNxK": "16384x3584x8192", "baseline_ms": 27.3, "hbm_buffer_ms": 8.6, "speedup": "3.2x", "tflops": 112},
            {"ranks": 8, "MxNxK": "16384x3584x8192", "baseline_ms": 24.4, "hbm_buffer_ms": 8.9, "speedup": "2.7x", "tflops": 108},
        ],
        "seed review, ws=8 MI325X, randn inputs with the barrier fix": [
            {"MxNxK": "1024x3584x8192", "rccl_ms": 0.262, "iris_ms": 0.516},
            {"MxNxK": "4096x3584x8192", "rccl_ms": 0.677, "iris_ms": 1.425},
            {"MxNxK": "16384x3584x8192", "rccl_ms": 2.300, "iris_ms": 3.257},
        ],
    },
    "notes": [
        "The review found the headline baseline unfair (torch.ones inputs, a baseline not matching the "
        "reference); with randn inputs RCCL was faster than iris at ws=8 (second table).",
        "The review also found a missing barrier before the flag store (validation failures): here a "
        "debug_barrier precedes the release store, and every method is checked before timing.",
    ],
}

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
        Param("backend", "str", "nccl", "nccl: NVIDIA GPUs; gloo: CPU processes, the providers that need no GPU "
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
        Param("wait_per_group", "bool", False, "hbm-buffer: a remote tile computes each k-group as its flag "
              "is set (else it waits for all of its flags first)"),
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
              "num_stages", "num_warps", "programs", "stream_k", "sk_split", "tma", "fetch_evict", "wait_per_group",
              "mode", "emulate", "experiments", "trials"),
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
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        return {"count": 0, "names": [], "peer": [], "error": str(exc)}


def answers_seed(params: dict[str, Any]) -> bool:
    """Only GPUs answer the seed: a gloo run on CPUs checks the code path (its baseline fails
    its check, as the seed's did), it times nothing the seed asks about."""
    return params.get("backend") != "gloo"


def requires(params: dict[str, Any]) -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (pip install torch with CUDA); committed GPU results are shown instead"
    if params["mode"] == "kernel":  # one process on the current GPU: no launcher, no peers
        return None if torch.cuda.is_available() else (
            "no CUDA GPU on this machine: mode=kernel needs one NVIDIA GPU (torch with CUDA, triton); the committed "
            "results from GPU machines under traces/ag-gemm/ are shown instead")
    from workbench.launcher import local_share

    if params["interpret"]:
        import importlib.util

        if importlib.util.find_spec("triton") is None:
            return "interpret=true needs triton (pip install triton; its interpreter runs on any CPU)"
    ws = params["world_size"]
    local, reason = local_share(ws, params["backend"])  # the ranks of this node (several nodes: WORKBENCH_NNODES)
    if reason or params["backend"] == "gloo":
        return reason
    if not torch.cuda.is_available():
        return ("no CUDA GPU on this machine: this study needs NVIDIA GPUs linked by NVLink (torch with CUDA, "
                "triton); the committed results from GPU machines under traces/ag-gemm/ are shown instead")
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
                                  "tma", "fetch_evict", "wait_per_group")}
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
    proc = subprocess.run([sys.executable, "-m", "studies.ag_gemm.emulate", json.dumps([scenario])], env=env,
                          capture_output=True, text=True, timeout=params["timeout_s"], cwd=str(_repo_root()))
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return [{"world_size": ws, "M": m, "N": params["n"], "K": params["k"], "dtype": "fp16", "rank": "all",
                 "ok": False, "check": f"the interpreter run failed: {tail[0][:300]}"}]
    ranks = json.loads(proc.stdout.strip().splitlines()[-1])[0]
    return [{"world_size": ws, "M": m, "N": params["n"], "K": params["k"], "dtype": "fp16", "rank": r,
             "ok": bool(c["ok"]) and not c["timed_out"], "check": c["check"]} for r, c in enumerate(ranks)]


def _repo_root():
    from workbench.env import REPO_ROOT

    return REPO_ROOT


def run(params: dict[str, Any], ctx: RunContext) -> dict:
    from workbench import launcher

    if params["mode"] == "kernel":
        return kernelbench.run(params, ctx)
    ctx.progress(0.0, f"starting torchrun with {params['world_size']} processes ({params['backend']})")
    got = launcher.launch("studies.ag_gemm.worker", _worker_config(params), params["world_size"], ctx,
                          timeout_s=params["timeout_s"])
    out = got.outputs | ({"notes": got.notes} if got.notes else {})
    if params["interpret"]:
        ctx.progress(0.97, "the fused kernel under Triton's interpreter")
        out["interpreter_check"] = interpreter_check(params)
    ctx.progress(1.0, "done")
    return out


# --- analysis ----------------------------------------------------------------------------

def program_traces(rec: RunRecord) -> dict[str, pd.DataFrame]:
    """Span tables of the fused kernel's per-program traces, by attachment name."""
    out = {}
    for name, kind, data in rec.attachments:
        if kind == spans.ATTACH_KIND:
            out[name] = spans.to_spans(json.loads(data))
    return out


#: attachment kinds that are traces: the fused kernel's per-program records, torch.profiler JSON
TRACE_KINDS = (spans.ATTACH_KIND, "trace/chrome-json")


def attachment_spans(name: str, kind: str, data: bytes) -> pd.DataFrame:
    """One attached trace as a span table; raises ``workbench.traces.TraceError`` if unreadable."""
    return attachment_trace(name, kind, data)[0]


def attachment_trace(name: str, kind: str, data: bytes) -> tuple[pd.DataFrame, dict]:
    """One attached trace as ``(spans, meta)`` (meta: the importer's, e.g. Kineto's rank and
    base time, for aligning ranks); raises ``workbench.traces.TraceError`` if unreadable."""
    from workbench.traces import load
    from workbench.untrusted import attachment_file

    if kind == spans.ATTACH_KIND:
        doc = json.loads(data)
        return spans.to_spans(doc), {"rank": int(doc.get("rank", 0)), "clock": "globaltimer ns"}
    # The importers read files (format detection looks at the name and the first bytes).
    with attachment_file(name, data) as path:
        return load(path)


def rank_groups(rec: RunRecord) -> dict[str, list[tuple[int, str, str]]]:
    """Per-rank trace attachments (``<stem>_rank<r>.<ext>``) grouped by stem: stem ->
    [(rank, attachment name, kind)] in rank order, groups of 2+ ranks only."""
    import re

    groups: dict[str, list] = {}
    for name, kind, _ in rec.attachments:
        hit = re.fullmatch(r"(.+)_rank(\d+)(\..+)", name)
        if kind in TRACE_KINDS and hit:
            groups.setdefault(hit.group(1) + hit.group(3), []).append((int(hit.group(2)), name, kind))
    # the fused kernel's first, then the baseline's: what a reader compares first
    first = lambda stem: (not stem.startswith("programs_"), "hbm-buffer" not in stem, "_nccl_" not in stem, stem)  # noqa: E731
    return {stem: sorted(groups[stem]) for stem in sorted(groups, key=first) if len(groups[stem]) > 1}


def merged_ranks(rec: RunRecord, stem: str) -> tuple[pd.DataFrame, dict]:
    """The per-rank traces of one group merged into one span table, clocks aligned
    (``workbench.traces.ranks.merge``: the end of the first collective, else wall clocks)."""
    from workbench.traces.ranks import merge

    data = {name: (kind, blob) for name, kind, blob in rec.attachments}
    loaded = [attachment_trace(name, kind, data[name][1]) for _, name, kind in rank_groups(rec)[stem]]
    return merge(loaded, ranks=[r for r, _, _ in rank_groups(rec)[stem]],
                 names=[name for _, name, _ in rank_groups(rec)[stem]])


def _trace_tables(rec: RunRecord) -> dict[str, pd.DataFrame]:
    out: dict[str, pd.DataFrame] = {}
    traces = program_traces(rec)
    if traces:
        out["program_trace_summary"] = pd.DataFrame([{"trace": name, **spans.summary(df)} for name, df in traces.items()])
        name = max(traces, key=lambda t: len(traces[t]))
        out["_program_spans"] = traces[name].assign(trace=name)
    groups = rank_groups(rec)
    if groups:
        out["rank_traces"] = pd.DataFrame([{"traces": stem, "ranks": ", ".join(str(r) for r, _, _ in v),
                                            "kind": v[0][2]} for stem, v in groups.items()])
        stem = next(iter(groups))
        merged, meta = merged_ranks(rec, stem)
        out["_rank_spans"] = merged.assign(group=stem, alignment=meta["alignment"])
    return out


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    """Every table of a run (``studies/ag_gemm/analysis.py`` for the multi-GPU ones,
    ``kernelbench`` for the one-GPU kernel mode); all derived numbers in ``derived``."""
    out: dict[str, pd.DataFrame] = {"variants": analysis.variants_frame(rec)}
    multi = analysis.analyze(rec)
    items = multi.pop("_derived_multi").to_dict("records")
    out |= multi
    kb, kitems = kernelbench.breakdown(rec)
    ex, eitems = kernelbench.experiments(rec)
    if len(kb):
        out["kernel_breakdown"] = kb
    if len(ex):
        out["kernel_experiments"] = ex
    out["derived"] = derived.derived_table(items + kitems + eitems)
    out |= _trace_tables(rec)
    return out


# --- verdict and report ----------------------------------------------------------------------

def verdict(tbls: dict[str, pd.DataFrame]) -> str:
    """Per shape of the seed's table: the best provider and the HBM-buffer kernel against the
    baseline (clear speedups only); failed checks; the kernel-mode targets and experiments."""
    parts = []
    summ = tbls.get("summary")
    d = tbls.get("derived", pd.DataFrame())
    if summ is not None and len(summ):
        sp = d[d["table"] == "speedup"].set_index(["ranks", "dtype", "M", "provider"]) if len(d) else None
        lines: dict[str, list[str]] = {}  # per ranks and dtype: one entry per M
        for r in summ.to_dict("records"):
            said = []
            for prov in dict.fromkeys([r["best"], "hbm-buffer"] + ([] if r["best"] else ["all-gather-cat"])):
                key = (r["ranks"], r["dtype"], r["M"], prov)
                if not prov or sp is None or key not in sp.index:
                    continue
                row = sp.loc[key]
                if row["status"] == "clear":  # a speedup: above 1 faster, below 1 slower
                    said.append(f"{esc(prov)} {derived.fmt_derived(row.to_dict(), status=False)}")
                elif row["status"] == "inconclusive" and row["why"].startswith("the CI includes"):
                    said.append(f"{esc(prov)} inconclusive (CI includes 1)")
                else:
                    said.append(f"{esc(prov)} {esc(row['status'])} ({esc(row['why'])})")
            lines.setdefault(f"{r['ranks']} ranks {esc(r['dtype'])}", []).append(
                f"M={r['M']} " + (", ".join(said) or "no speedup"))
        parts.append("Speedup over all_gather_into_tensor + matmul in the same run (median of per-round ratios, "
                     "95% CI): " + "; ".join(f"{k}: {', '.join(v)}" for k, v in lines.items()) + ".")
        if summ["met"].notna().any():
            missed = summ[summ["met"] == False]  # noqa: E712 (None: no target for that shape)
            parts.append("Best provider's targets: " + ("all met." if missed.empty else f"{len(missed)} missed."))
        own = summ[summ["hbm_met"].notna()] if "hbm_met" in summ else summ.iloc[:0]
        if len(own):
            met = ", ".join(f"{r['ranks']} ranks {esc(r['dtype'])} M={r['M']} {esc(r['hbm_met'])}"
                            for r in own.to_dict("records"))
            parts.append(f"HBM-buffer's own targets (>= 1.30x at M=16384, not slower at M=1024; CI must clear): {met}.")
    kb = tbls.get("kernel_breakdown")
    if kb is not None and len(kb):
        parts.append(kernelbench.verdict(kb))
    ex = tbls.get("kernel_experiments")
    if ex is not None and len(ex) and summ is None:  # a multi-GPU run's experiments: in its claims and tables
        parts.append(escape_headline(d, ("barrier", "layout", "failures")))
    v = tbls.get("variants")
    if v is not None and len(v):
        bad = v[~v["correct"].astype(bool)]
        if len(bad):
            parts.append(f"{len(bad)} variant(s) FAILED their check (times not counted): "
                         + ", ".join(esc(x) for x in bad["variant"].head(6)) + ("" if len(bad) <= 6 else ", ...") + ".")
    if not parts:
        return "No shape has both the NCCL baseline and another provider measured."
    return " ".join(parts)


def escape_headline(d: pd.DataFrame, names: tuple[str, ...], limit: int = 4) -> str:
    """The clear results of some derived tables (``derived.headline``, the ``limit`` largest
    effects first), escaped."""
    sub = d[d["table"].isin(names)] if len(d) and "table" in d else d
    if len(sub) and "point" in sub:  # largest departure from "no change" first
        sub = sub.assign(_effect=(sub["point"] - sub["null"]).abs()).sort_values("_effect", ascending=False)
    return esc(derived.headline(sub.drop(columns="_effect", errors="ignore"), limit=limit)) or "No derived result."


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    from workbench.tables import render

    out = []
    st = tbls.get("seed_table")
    if st is not None and len(st):
        out.append("### All-gather + GEMM in the seed's shape (measured in this run)\n"
                   "Baseline: NCCL all_gather_into_tensor, then torch.matmul. HBM Buffer: the seed's kernel "
                   "(`hbm-buffer`). Best: the fastest checked provider of the run. Medians per call, maximum over "
                   "ranks, 95% CIs; speedups are medians of per-round ratios.\n\n" + render(st))
    rk = tbls.get("ranks")
    if rk is not None and len(rk):
        cols = ["variant", "rank_medians_us", "slowest_rank", "slowest_rank_us", "max_over_ranks_us", "skew_us",
                "skew_lo_us", "skew_hi_us"]
        out.append("### Per rank: the slowest rank and the skew\nEach rank's median (us, rank order), the slowest "
                   "rank, the median of the per-call maximum over ranks, and the skew (slowest minus fastest rank, "
                   "median over rounds, 95% CI).\n\n" + render(rk[cols]))
    chk = tbls.get("checks")
    if chk is not None and len(chk) and ((chk["shard"] == "k").any() or chk["where"].str.contains("interp").any()):
        out.append("### Correctness checks, both formulations\n`shard=k` is the seed's formulation (A sharded "
                   "along K): its `nccl` baseline (all_gather_into_tensor into an (M, K) buffer) does not "
                   "concatenate along K and fails; `all-gather-cat` (all_gather + cat(dim=1)) passes. A failed "
                   "check's time is never counted.\n\n" + render(chk))
    kb = tbls.get("kernel_breakdown")
    if kb is not None and len(kb):
        out.append("### The fused kernel on one GPU: GEMM path and fetch path against cuBLAS\n"
                   + kernelbench.__doc__.split("\n\n", 1)[1].split("\n\nClock:")[0].strip() + "\n\n"
                   + kernelbench.format_breakdown(kb))
    ex = tbls.get("kernel_experiments")
    if ex is not None and len(ex):
        out.append("### The seed review's experiments\nOn one GPU with emulated peers (kernel mode) or across the "
                   "ranks of a multi-GPU run (the `where` column). Barrier: the CTA barrier "
                   "between a fetch row's stores and its flag release, on and off; each checked launch starts "
                   "from a staging buffer filled with NaN. Layout: tile-contiguous against row-major staging. "
                   "Time ratios are medians of per-round ratios.\n\n" + kernelbench.format_experiments(ex))
    return out
