"""MC² split benchmark: serial vs overlapped chunked matmul + all-reduce, measured vs predicted.

    python benchmarks/mc2_split.py                            # GPUs here: ws=2, the seed shape, fp16
    python benchmarks/mc2_split.py --world-size 4 --set providers=default,ce
    python benchmarks/mc2_split.py --from traces/mc2-split/*.bundle.json     # print committed runs
    python benchmarks/mc2_split.py --spread traces/mc2-split/*.bundle.json   # the spread over runs

Without the GPUs asked for it prints the committed runs (labelled with their machine) and
exits with 2. Prints, per run, every serial/overlapped variant with its median, the prediction with the
seed's 1.15 and with the fitted contention factors, and the gain over the serial NCCL run
measured in the same run (with its 95% CI from the raw samples); then the target line (best
split >= 20% faster than serial, prediction within 10%). Exit status 1 when a check failed or
the target was missed. ``--spread`` prints, per world size and configuration, the best
split's gain over serial NCCL in each run and across runs (mean with its two-level bootstrap
CI; the target met only where that CI clears it).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import studies.mc2_split as study  # noqa: E402
from benchmarks._run import print_run_head, run_or_print, study_arguments  # noqa: E402
from workbench.evidence.tables import md_table  # noqa: E402
from workbench.results.store import read_bundle  # noqa: E402

TARGET_ERR = 0.10


def show(rec) -> bool:
    """Print one run's table; True when all checks passed and the target was met."""
    live = rec.outputs.get("live", {})
    print_run_head(rec, f"{live.get('backend')} world size {live.get('world_size')}, M={rec.params['m']} "
                        f"K={rec.params['k']} N={rec.params['n']} {live.get('dtype')}")
    tbl = study.analyze(rec)["live"]
    if not len(tbl):
        print("(no live results)")
        return False
    tbl = tbl.assign(gain_ci=[f"{g:+.1f}% [{lo:+.1f}, {hi:+.1f}]" if g == g else "" for g, lo, hi in
                              zip(tbl.get("gain", float("nan")), tbl.get("gain_lo", float("nan")),
                                  tbl.get("gain_hi", float("nan")))])
    cols = [c for c in ("variant", "chunks", "measured_us", "predicted_us", "err", "predicted_fit_us", "err_fit",
                        "gain_ci", "correct") if c in tbl]
    print(md_table(tbl[cols].rename(columns={"gain_ci": "gain over serial (95% CI)"})))
    ok = bool(tbl["correct"].all())
    best = tbl[tbl["is_best"] & tbl["correct"]]
    if len(best) and "gain" in best:
        top = best.sort_values("measured_us").iloc[0]
        err = top.get("err_fit", float("nan"))
        met = top["gain"] >= study.TARGET_PCT and abs(err) <= TARGET_ERR
        print(f"\ntarget: best split ({top['variant']}, {top['chunks']}) is {top['gain']:.1f}% "
              f"[{top['gain_lo']:.1f}, {top['gain_hi']:.1f}] faster than serial "
              f"{str(live.get('backend', '?')).upper()} (target >= {study.TARGET_PCT:.0f}%; the CI's lower end "
              f"{'meets' if top['gain_lo'] >= study.TARGET_PCT else 'misses'} it); prediction error {err:+.1%} "
              f"(target within {TARGET_ERR:.0%}): {'MET' if met else 'NOT MET'}")
        ok = ok and met
    return ok


def spread(paths: list[Path]) -> int:
    """The spread over runs (the study's ``across_runs``)."""
    table, _ = study.across_runs([read_bundle(p) for p in paths])
    print(f"Best split's gain over serial NCCL across runs and per run (%), over {len(paths)} bundles; target >= "
          f"{study.TARGET_PCT:.0f}% judged on the across-run CI\n")
    print(md_table(study.spread_display(table)))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = study_arguments(__doc__)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--spread", nargs="*", type=Path, help="print the spread over these bundles' runs")
    args = ap.parse_args(argv)
    if args.spread:
        return spread(args.spread)
    values = {"backend": "nccl", "live": "on", "world_size": args.world_size, "carveout": "0,16,24",
              "providers": "default,limited,ce,ce-oneshot,triton,triton-pull,triton-persistent"}
    return run_or_print(study, values, show, args, bundle_stem=f"{args.tag}-ws{args.world_size}")


if __name__ == "__main__":
    sys.exit(main())
