"""The fused all-gather + GEMM kernel on one GPU against cuBLAS: its GEMM path, the kernel at
world size 1, and the whole kernel at emulated world sizes (``mode=kernel`` of the ag-gemm
study, so the result is a normal run with its environment and reproduce command).

    python benchmarks/ag_gemm_kernel.py                     # M=1024,4096,16384, fp16+bf16, ws 2 and 4
    python benchmarks/ag_gemm_kernel.py --m 4096 --dtype bf16 --set stream_k=0
    python benchmarks/ag_gemm_kernel.py --emulate 2 --dtype fp16 --set experiments=barrier,layout  # the review's
    python benchmarks/ag_gemm_kernel.py --from traces/ag-gemm/kernel-*.bundle.json   # committed runs

Every output is checked against an fp32 reference before its time counts (and again after the
timed calls); a failed check is printed and makes the exit status 1, as does a missed target.
Without a GPU it prints the committed results (labelled with their machine).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import studies.ag_gemm as study  # noqa: E402
from studies.ag_gemm import kernelbench  # noqa: E402
from studies.ag_gemm.report import escape_headline  # noqa: E402
from benchmarks._run import print_run_head, run_or_print, study_arguments  # noqa: E402


def show(rec) -> bool:
    """Print one run's tables; True when every variant passed its check (the barrier-off
    variant of the review's experiment may fail: that is its finding) and every target held."""
    if rec.params.get("mode") != "kernel":
        return True  # a committed multi-GPU run: benchmarks/ag_gemm.py prints those
    tbls = study.analyze(rec)
    table = tbls.get("kernel_breakdown")
    print_run_head(rec)
    if table is not None:
        print(kernelbench.format_breakdown(table))
        print(f"\n{kernelbench.verdict(table)}")
    if "kernel_experiments" in tbls:
        print("\n" + kernelbench.format_experiments(tbls["kernel_experiments"]))
        print("\n" + escape_headline(tbls["derived"], ("barrier", "layout", "failures")))
    failed = [v for v in rec.variants if not v.correct]
    for v in failed:
        print(f"FAILED CHECK {v.variant}: {v.check}")
    unexpected = [v for v in failed if not v.variant.split("/")[0].endswith(kernelbench.SUFFIX["barrier"])]
    return not unexpected and not (table is not None and (table["met"] == False).any())  # noqa: E712


def main(argv: list[str] | None = None) -> int:
    ap = study_arguments(__doc__, tag="kernel")
    ap.add_argument("--m", default="1024,4096,16384")
    ap.add_argument("--n", default="3584")
    ap.add_argument("--k", default="8192")
    ap.add_argument("--dtype", default="fp16,bf16")
    ap.add_argument("--emulate", default="2,4", help="world sizes emulated on the one GPU")
    ap.add_argument("--repeat", default="30")
    ap.add_argument("--trace", default="programs", choices=("off", "programs"))
    args = ap.parse_args(argv)
    values = {"mode": "kernel", "m": args.m, "n": args.n, "k": args.k, "dtype": args.dtype, "emulate": args.emulate,
              "repeat": args.repeat, "trace": args.trace}
    return run_or_print(study, values, show, args, bundle_stem=args.tag, unavailable_status=0)


if __name__ == "__main__":
    sys.exit(main())
