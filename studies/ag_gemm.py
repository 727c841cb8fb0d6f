"""Fused all-gather + GEMM on NVIDIA GPUs: the iris HBM-buffer idea against strong baselines.

Question: with A row-sharded over W GPUs (M/W rows each) and B replicated, how much faster
than "all-gather, then matmul" can every rank get the full C = A @ B, and how close to the
perfect-overlap bound max(all-gather alone, matmul alone)?

Methods, all timed in the same run after the same correctness check (fp32 reference from
``all_gather`` into a list, concatenated along the sharded rows; relative max error within
the dtype's tolerance, on every rank):

- ``nccl``: ``all_gather_into_tensor`` into a preallocated buffer, then ``torch.matmul``;
- ``torch-fused``: ``torch.ops.symm_mem.fused_all_gather_matmul``;
- ``ce-chunked``: copy-engine pulls of the peers' shards from symmetric memory on a side
  stream, overlapped with cuBLAS matmuls of the local shard and of each arrived piece;
- ``hbm-buffer``: one Triton kernel whose fetcher programs pull remote A tiles into a local
  staging buffer and publish per-tile flags while GEMM programs compute (the seed's design,
  ``kernels/triton/ag_gemm.py``), with per-program tracing;
- ``auto``: times the candidates of ``studies/_ag_gemm/autoconfig.py`` briefly, keeps the
  fastest only if it beats ``nccl`` by 2%, and is measured again;
- ``all-gather`` and ``matmul`` alone, for the bound.

``mode=kernel`` measures the fused kernel's two halves on one GPU instead (no torchrun):
cuBLAS, the kernel with every tile local, its GEMM path alone and the whole kernel at an
emulated world size (peers' shards in local buffers); see ``studies/_ag_gemm/kernelbench.py``.

Clock: ``workbench.harness.DistTimer``: CUDA events around back-to-back calls after a
barrier; each per-call sample is the maximum over ranks. The run starts torchrun through
``workbench.launcher`` (worker ``studies/_ag_gemm/worker.py``; several nodes too), which keeps
NVLink multicast off and kills every rank on a timeout, a cancel or an error.
``backend=gloo`` runs the all-gather + matmul methods on CPU processes: a check of the
launcher, the reference and the analysis on any machine, not a GPU result.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from studies._ag_gemm import kernelbench
from studies._ag_gemm import methods as _methods
from studies._ag_gemm import spans
from workbench import tables
from workbench.store import RunRecord
from workbench.study import Param, ParamError, ParamSpace, RunContext
from workbench.untrusted import escape as esc

ID = "ag-gemm"
TITLE = "Fused all-gather + GEMM (HBM-buffer kernel vs NCCL, PyTorch symmetric memory, copy engine)"
SEED = "004_7d53943015c21e67.txt"
SEED_SUMMARY = ("iris PR #346: fetcher/GEMM workgroup split with an HBM staging buffer and per-tile flags; "
                "2.1-3.4x over an all-gather barrier baseline on 8x MI325X (a baseline later found unfair).")

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

#: issue targets on H200, fp16, N=3584, K=8192: (world size, M) -> min speedup over nccl
TARGETS = {(2, 16384): 1.30, (2, 4096): 1.10, (2, 1024): 1.00, (4, 16384): 1.30, (4, 4096): 1.15}
ALL_METHODS = _methods.METHODS + ("auto",) + _methods.PARTS
#: the methods that run on any torch.distributed backend (gloo on CPUs too)
ANY_BACKEND_METHODS = ("nccl",) + _methods.PARTS

SPACE = ParamSpace(
    params=(
        Param("m", "int", [1024, 4096, 16384], "rows of A (and C), all ranks together", min=1, max=1 << 20, multi=True),
        Param("n", "int", 3584, "columns of B and C", min=1, max=1 << 18),
        Param("k", "int", 8192, "inner dimension", min=1, max=1 << 18),
        Param("dtype", "str", ["fp16"], "element type", choices=("fp16", "bf16"), multi=True),
        Param("world_size", "int", 2, "GPUs (ranks), one process each; all nodes together", min=1, max=64),
        Param("backend", "str", "nccl", "nccl: NVIDIA GPUs; gloo: CPU processes, all-gather + matmul methods only "
              "(checks the launcher and the analysis, not a GPU result)", choices=("nccl", "gloo")),
        Param("methods", "str", list(ALL_METHODS), "methods to time", choices=ALL_METHODS, multi=True),
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
        Param("mode", "str", "multi-gpu", "multi-gpu: every method across world_size GPUs (torchrun); "
              "kernel: the fused kernel's GEMM and fetch paths on one GPU against cuBLAS",
              choices=("multi-gpu", "kernel")),
        Param("emulate", "int", [2, 4], "mode=kernel: world sizes emulated on one GPU (peers' shards in "
              "local buffers)", min=2, max=8, multi=True),
        Param("repeat", "int", 20, "samples per method", min=3, max=1000),
        Param("trace", "str", "programs", "per-program trace of hbm-buffer; 'all' adds torch.profiler traces "
              "of every method at the largest M", choices=("off", "programs", "all")),
        Param("timeout_s", "int", 600, "kill the run after this long", unit="s", min=10, max=7200),
        Param("seed", "int", 0, "input seed (A shards add the rank)", min=0),
    ),
    presets={
        "smoke": {"m": [1000], "n": 320, "k": 448, "methods": ["nccl", "ce-chunked", "hbm-buffer"], "repeat": 3,
                  "trace": "off", "timeout_s": 300},
        "quick": {"m": [4096, 16384], "repeat": 10},
        "cpu": {"backend": "gloo", "m": [64], "n": 48, "k": 32, "dtype": ["bf16"], "methods": list(ANY_BACKEND_METHODS),
                "repeat": 3, "trace": "off", "timeout_s": 120},
        "kernel": {"mode": "kernel", "dtype": ["fp16", "bf16"], "repeat": 30},
    },
)


def validate(params: dict[str, Any]) -> None:
    ws = params["world_size"]
    if params["backend"] == "gloo" and set(params["methods"]) - set(ANY_BACKEND_METHODS):
        raise ParamError("methods", f"with backend=gloo only {', '.join(ANY_BACKEND_METHODS)} run (the others need "
                                    "NVIDIA GPUs)")
    for m in params["m"]:
        for e in params["emulate"] if params["mode"] == "kernel" else ():
            if m % e:
                raise ParamError("m", f"{m} is not divisible by the emulated world size {e} (use a multiple of {e})")
        if m % ws:
            raise ParamError("m", f"{m} is not divisible by world_size={ws}: A is split into equal row shards "
                                  f"(use a multiple of {ws})")
    if params["block_m"] * params["block_k"] * 2 > 64 * 1024 or params["block_k"] * params["block_n"] * 2 > 64 * 1024:
        raise ParamError("block_k", "tiles of A or B over 64 KiB do not fit shared memory with pipelining")


@lru_cache(maxsize=1)
def gpu_probe() -> dict[str, Any]:
    """GPU count, names and the peer-access matrix, read in a child process so this process
    (the app, the CLI) never creates a CUDA context that would sit on GPU 0 during the run."""
    code = ("import json, torch\n"
            "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
            "print(json.dumps({'count': n, 'names': [torch.cuda.get_device_name(i) for i in range(n)],"
            " 'peer': [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(n)] for i in range(n)]}))")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        return {"count": 0, "names": [], "peer": [], "error": str(exc)}


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
    return {k: params[k] for k in ("m", "n", "k", "dtype", "methods", "chunks", "repeat", "trace", "timeout_s",
                                   "seed", "backend")} | {"hbm": hbm}


def run(params: dict[str, Any], ctx: RunContext) -> dict:
    from workbench import launcher

    if params["mode"] == "kernel":
        return kernelbench.run(params, ctx)
    ctx.progress(0.0, f"starting torchrun with {params['world_size']} processes ({params['backend']})")
    got = launcher.launch("studies._ag_gemm.worker", _worker_config(params), params["world_size"], ctx,
                          timeout_s=params["timeout_s"])
    ctx.progress(1.0, "done")
    return got.outputs | ({"notes": got.notes} if got.notes else {})


# --- analysis ----------------------------------------------------------------------------

def _median_ms(df: pd.DataFrame) -> pd.Series:
    return df["median_ns"] / 1e6


def summary_table(rec: RunRecord, variants: pd.DataFrame | None = None) -> pd.DataFrame:
    """The seed-shaped table: per (ranks, dtype, M), baseline vs each method, speedup, TFLOPS,
    the perfect-overlap bound and the issue's target where one exists. ``variants``: the run's
    ``variants_table`` when the caller has it (it bootstraps a CI per variant)."""
    df = tables.variants_table(rec) if variants is None else variants
    if "mode" in df.columns:
        df = df[df["mode"] != "kernel"]
    if df.empty or "method" not in df.columns:
        return pd.DataFrame()
    df = df.assign(ms=_median_ms(df))
    rows = []
    for (ws, dtype, m), grp in df.groupby(["world_size", "dtype", "M"], sort=True):
        ms = {r["method"]: (r["ms"] if r["correct"] else float("nan")) for _, r in grp.iterrows()}
        n, k = int(grp["N"].iloc[0]), int(grp["K"].iloc[0])
        picked = grp.loc[grp["method"] == "auto", "picked"].iloc[0] if "picked" in grp and (grp["method"] == "auto").any() else ""
        base = ms.get("nccl", float("nan"))
        fused = {name: ms.get(name, float("nan")) for name in ("torch-fused", "ce-chunked", "hbm-buffer", "auto")}
        ours = ms.get("auto", float("nan"))
        if ours != ours:  # no auto variant: the best of our two methods
            ours = min((v for key, v in fused.items() if key in ("ce-chunked", "hbm-buffer") and v == v), default=float("nan"))
        target = TARGETS.get((int(ws), int(m))) if dtype == "fp16" and (n, k) == (3584, 8192) else None
        speedup = base / ours if ours == ours and base == base else float("nan")
        rows.append({
            "ranks": int(ws), "dtype": dtype, "MxNxK": f"{m}x{n}x{k}", "baseline_ms": base,
            "torch_fused_ms": fused["torch-fused"], "ce_chunked_ms": fused["ce-chunked"],
            "hbm_buffer_ms": fused["hbm-buffer"], "fused_ms": ours, "auto_pick": picked or "",
            "speedup": speedup, "hbm_speedup": base / fused["hbm-buffer"],
            "tflops": 2.0 * m * n * k / (ours * 1e-3) / 1e12 if ours == ours else float("nan"),
            "bound_ms": max(ms.get("all-gather", float("nan")), ms.get("matmul", float("nan"))),
            "target": target, "met": _met(target, speedup, ours, fused["torch-fused"], int(ws), int(m)),
        })
    return pd.DataFrame(rows)


def _met(target, speedup, ours, torch_fused, ws, m) -> bool | None:
    """The issue's target; ws=2, M=16384 must also beat PyTorch's fused op."""
    if target is None:
        return None
    ok = speedup == speedup and speedup >= target
    if (ws, m) == (2, 16384):
        ok = ok and ours < torch_fused
    return bool(ok)


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
    from workbench.traces import load
    from workbench.untrusted import attachment_file

    if kind == spans.ATTACH_KIND:
        return spans.to_spans(json.loads(data))
    # The importers read files (format detection looks at the name and the first bytes).
    with attachment_file(name, data) as path:
        return load(path)[0]


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    variants = tables.variants_table(rec)
    if not variants.empty:
        variants = variants.assign(median_ms=_median_ms(variants), ci_lo_ms=variants["ci_lo_ns"] / 1e6,
                                   ci_hi_ms=variants["ci_hi_ns"] / 1e6)
    out = {"summary": summary_table(rec, variants), "variants": variants}
    kernel = kernelbench.breakdown(rec)
    if not kernel.empty:
        out["kernel_breakdown"] = kernel
        if out["summary"].empty:  # a kernel-mode run: no multi-GPU table to show
            del out["summary"]
    traces = program_traces(rec)
    if traces:
        out["program_trace_summary"] = pd.DataFrame([{"trace": name, **spans.summary(df)} for name, df in traces.items()])
        name = max(traces, key=lambda t: len(traces[t]))
        tl = traces[name]
        out["_timeline"] = pd.DataFrame({"trace": name, "track": tl["track"].astype(str), "name": tl["name"].astype(str),
                                        "category": tl["category"].astype(str), "start_us": tl["start_ns"] / 1e3,
                                        "end_us": (tl["start_ns"] + tl["dur_ns"]) / 1e3})
    return out


def charts(tbls: dict[str, pd.DataFrame]) -> dict:
    import altair as alt

    out = {}
    v = tbls.get("variants")
    if v is not None and not v.empty and "method" in v:
        ok = v[v["correct"]].copy()
        kernel = ok["mode"] == "kernel" if "mode" in ok else pd.Series(False, index=ok.index)
        # Kernel mode: one panel per dtype and M, cuBLAS beside each (method, emulated world size).
        ok["shape"] = ok["dtype"] + " M=" + ok["M"].astype(str) + (" ws=" + ok["world_size"].astype(str)).where(~kernel, "")
        ok["bar"] = ok["method"].where(~kernel, ok["method"] + (" ws" + ok["world_size"].astype(str)).where(
            ok["method"].isin(["gemm-path", "emulated"]), ""))
        base = alt.Chart(ok).encode(y=alt.Y("bar:N", title=None), color=alt.Color("bar:N", legend=None))
        bars = base.mark_bar().encode(x=alt.X("median_ms:Q", title="median ms per call (multi-GPU: max over ranks)"))
        err = base.mark_rule().encode(x="ci_lo_ms:Q", x2="ci_hi_ms:Q")
        title = ("The fused kernel on one GPU against cuBLAS" if kernel.all() else "All-gather + matmul") + \
            ": median per call, 95% CI"
        out["methods"] = (bars + err).properties(width=380, height=140).facet(
            row=alt.Row("shape:N", title=None)).resolve_scale(x="independent", y="independent").properties(title=title)
    tl = tbls.get("_timeline")
    if tl is not None and not tl.empty:
        out["timeline"] = alt.Chart(tl).mark_bar().encode(
            x=alt.X("start_us:Q", title="us since the first task started"), x2="end_us:Q",
            y=alt.Y("track:N", title="SM", axis=alt.Axis(labels=False, ticks=False)),
            color=alt.Color("category:N", scale=alt.Scale(domain=["fetch", "wait", "gemm"],
                                                           range=["#d62728", "#bbbbbb", "#1f77b4"])),
            tooltip=["name", "start_us", "end_us"],
        ).properties(width=700, height=400, title=f"hbm-buffer kernel, one lane per SM ({tl['trace'].iloc[0]})")
    return out


def report_sections(rec: RunRecord, tbls: dict[str, pd.DataFrame]) -> list[str]:
    out = []
    s = tbls.get("summary")
    if s is not None and not s.empty:
        out.append(format_seed_table(s))
    kb = tbls.get("kernel_breakdown")
    if kb is not None and not kb.empty:
        out.append("### The fused kernel on one GPU: GEMM path and fetch path against cuBLAS\n"
                   + kernelbench.__doc__.split("\n\n", 1)[1].split("\n\nClock:")[0].strip() + "\n\n"
                   + kernelbench.format_breakdown(kb))
    return out


def format_seed_table(s: pd.DataFrame) -> str:
    """Markdown table in the seed's shape plus the bound and this study's other columns."""
    head = ("| Ranks | MxNxK | dtype | Baseline (ms) | Fused (ms) | Speedup | TFLOPS | auto pick | torch fused (ms) | "
            "ce-chunked (ms) | hbm-buffer (ms) | hbm speedup | bound max(AG, mm) (ms) | target |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    f = lambda x, d=3, unit="": "n/a" if x is None or x != x else f"{x:.{d}f}{unit}"
    rows = []
    for _, r in s.iterrows():
        target = "" if r["target"] is None or r["target"] != r["target"] else (
            f">= {r['target']:.2f}x: {'met' if r['met'] else 'MISSED'}")
        rows.append(f"| {esc(r['ranks'], 'cell')} | {esc(r['MxNxK'], 'cell')} | {esc(r['dtype'], 'cell')} | "
                    f"{f(r['baseline_ms'])} | {f(r['fused_ms'])} | "
                    f"{f(r['speedup'], 2, 'x')} | {f(r['tflops'], 0)} | {esc(r['auto_pick'], 'cell')} | "
                    f"{f(r['torch_fused_ms'])} | "
                    f"{f(r['ce_chunked_ms'])} | {f(r['hbm_buffer_ms'])} | {f(r['hbm_speedup'], 2, 'x')} | "
                    f"{f(r['bound_ms'])} | {target} |")
    return ("### All-gather + GEMM, seed-shaped table (measured in this run)\nBaseline: NCCL all_gather_into_tensor then "
            "torch.matmul. Fused: the auto-config's pick, measured in the same run (in runs without `auto`: the "
            "faster of ce-chunked and hbm-buffer). Medians per call, max over ranks.\n\n" + head + "\n" + "\n".join(rows))


def verdict(rec: RunRecord) -> str:
    """One line: per shape, our pick against NCCL all-gather then matmul (the seed's table)."""
    failed = [v.variant for v in rec.variants if not v.correct]
    tail = f" {len(failed)} variant(s) FAILED their check: {esc(', '.join(failed))}." if failed else ""
    if rec.params.get("mode") == "kernel":
        return kernelbench.verdict(kernelbench.breakdown(rec)) + tail
    summ = summary_table(rec)
    summ = summ[summ["speedup"].notna()] if len(summ) else summ
    if summ.empty:
        return "No shape has both the NCCL baseline and a fused method measured." + tail
    big = summ.assign(_m=summ["MxNxK"].str.split("x").str[0].astype(int)).sort_values(["ranks", "_m"]).iloc[-1]
    parts = [f"{esc(r['ranks'])} ranks {esc(r['dtype'])} {esc(r['MxNxK'])}: {r['speedup']:.2f}x" for _, r in summ.iterrows()]
    missed = summ[summ["met"] == False]  # noqa: E712 (None means no target for that shape)
    text = (f"Against NCCL all-gather then matmul, measured in the same run: {'; '.join(parts)}. "
            f"Largest shape: {big['fused_ms']:.3f} ms vs {big['baseline_ms']:.3f} ms ({big['tflops']:.0f} TFLOP/s"
            f"{', pick ' + esc(big['auto_pick']) if big['auto_pick'] else ''}).")
    if summ["met"].notna().any():
        text += " Targets: " + ("all met." if missed.empty else f"{len(missed)} missed.")
    return text + tail
