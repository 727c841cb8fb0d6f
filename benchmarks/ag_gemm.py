"""All-gather + GEMM benchmark: the seed-shaped table (Ranks, MxNxK, Baseline ms, HBM Buffer ms,
Speedup, TFLOPS, and the run's best provider beside it, with 95% CIs) plus the perfect-overlap
bound max(all-gather, matmul) measured alone, the per-rank times and the correctness checks.

    python benchmarks/ag_gemm.py                        # GPUs here: ws=2 (or all GPUs), fp16+bf16
    python benchmarks/ag_gemm.py --world-size 4 --m 4096,16384 --dtype fp16
    python benchmarks/ag_gemm.py --set shard=rows,k --providers nccl,all-gather-cat,all-gather,matmul  # the seed's K-sharded A
    python benchmarks/ag_gemm.py --set experiments=barrier,layout --set trials=500  # the review's experiments across ranks
    python benchmarks/ag_gemm.py --from traces/ag-gemm/*.bundle.json   # print committed runs

Without a usable GPU set it prints the committed results (labelled with their machine).
Every provider is checked against the fp32 reference before its time counts; a failed check
shows as n/a and makes the exit status 1 (except the seed's all_gather_into_tensor baseline of
K-sharded A and the fused kernel without the barrier before its flag release, which may fail:
those are the seed review's findings).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import studies.ag_gemm as study  # noqa: E402
from studies.ag_gemm import kernelbench  # noqa: E402
from benchmarks._run import print_run_head, run_or_print, study_arguments  # noqa: E402
from workbench.reading.analysis import analyse  # noqa: E402
from workbench.evidence.tables import render  # noqa: E402


def show(rec) -> bool:
    """Print one run's table; True when every variant passed its check."""
    if rec.params.get("mode") == "kernel":
        return True  # a one-GPU kernel run: benchmarks/ag_gemm_kernel.py prints those
    a = analyse(rec, study)
    tbls = a.tables
    print_run_head(rec)
    print(render(tbls["seed_table"]) if "seed_table" in tbls else "(no row-sharded results)")
    if "ranks" in tbls:
        print(f"\nper rank:\n{render(tbls['ranks'])}")
    if "kernel_experiments" in tbls:
        print(f"\nthe seed review's experiments:\n{kernelbench.format_experiments(tbls['kernel_experiments'])}")
    chk = tbls.get("checks")
    if chk is not None and (~chk["correct"] | (chk["shard"] == "k") | chk["where"].str.startswith("Triton")).any():
        print(f"\nchecks:\n{render(chk)}")
    print(f"\n{a.verdict}")
    failed = [v for v in rec.variants if not v.correct]
    for v in failed:
        print(f"FAILED CHECK {v.variant}: {v.check}")
    # expected failures are findings: the seed's K-sharded baseline; the kernel without its barrier
    return not [v for v in failed if not (v.variant.startswith("nccl/k-shard/") or "-nobarrier/" in v.variant)]


def main(argv: list[str] | None = None) -> int:
    ap = study_arguments(__doc__)
    ap.add_argument("--world-size", type=int, default=None, help="default: 2 if present, else all GPUs")
    ap.add_argument("--m", default="1024,4096,16384")
    ap.add_argument("--n", default="3584")
    ap.add_argument("--k", default="8192")
    ap.add_argument("--dtype", default="fp16,bf16")
    ap.add_argument("--providers", "--methods", default=",".join(study.PROVIDERS))
    ap.add_argument("--repeat", default="20")
    ap.add_argument("--trace", default="programs", choices=("off", "programs", "all"))
    args = ap.parse_args(argv)
    probe = study.gpu_probe() if args.bundles is None else {"count": 0}
    ws = args.world_size or (2 if probe["count"] >= 2 else max(1, probe["count"]))
    values = {"m": args.m, "n": args.n, "k": args.k, "dtype": args.dtype, "providers": args.providers,
              "repeat": args.repeat, "trace": args.trace, "world_size": ws}
    return run_or_print(study, values, show, args, bundle_stem=f"{args.tag}-ws{ws}", unavailable_status=0)


if __name__ == "__main__":
    sys.exit(main())
