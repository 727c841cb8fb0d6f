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

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import studies.ag_gemm as study  # noqa: E402
from studies.ag_gemm import kernelbench  # noqa: E402
from studies.ag_gemm.report import escape_headline  # noqa: E402
from benchmarks._run import run_benchmark  # noqa: E402
from workbench.env import summary_line  # noqa: E402
from workbench.store import read_bundle  # noqa: E402


def show(rec) -> bool:
    """Print one run's tables; True when every variant passed its check (the barrier-off
    variant of the review's experiment may fail: that is its finding) and every target held."""
    if rec.params.get("mode") != "kernel":
        return True  # a committed multi-GPU run: benchmarks/ag_gemm.py prints those
    tbls = study.analyze(rec)
    table = tbls.get("kernel_breakdown")
    pkgs = rec.env.get("packages", {})
    print(f"\n## run {rec.run_id} ({rec.origin}, {rec.created_utc} UTC)")
    print(f"machine: {summary_line(rec.env)}; torch {pkgs.get('torch', '?')}, triton {pkgs.get('triton', '?')}, "
          f"CUDA {rec.env.get('cuda_runtime', '?')}\n")
    print(f"reproduce: `{rec.reproduce}`\n")
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="1024,4096,16384")
    ap.add_argument("--n", default="3584")
    ap.add_argument("--k", default="8192")
    ap.add_argument("--dtype", default="fp16,bf16")
    ap.add_argument("--emulate", default="2,4", help="world sizes emulated on the one GPU")
    ap.add_argument("--repeat", default="30")
    ap.add_argument("--trace", default="programs", choices=("off", "programs"))
    ap.add_argument("--set", action="append", default=[], help="other study parameters, name=value")
    ap.add_argument("--bundle-dir", type=Path, help="write the run's bundle here")
    ap.add_argument("--tag", default="kernel", help="bundle file name part")
    ap.add_argument("--from", dest="bundles", nargs="*", type=Path, help="print these bundles instead of running")
    args = ap.parse_args(argv)

    if args.bundles is not None:
        return 0 if all([show(read_bundle(p)) for p in args.bundles]) else 1
    values = {"mode": "kernel", "m": args.m, "n": args.n, "k": args.k, "dtype": args.dtype, "emulate": args.emulate,
              "repeat": args.repeat, "trace": args.trace}
    values.update(dict(s.split("=", 1) for s in args.set))
    return run_benchmark(study, values, show, bundle_dir=args.bundle_dir, bundle_stem=args.tag,
                                unavailable_status=0)


if __name__ == "__main__":
    sys.exit(main())
