"""Null-control benchmark: how often a study's null controls are called clear on this machine.

    python benchmarks/null_controls.py                        # every CPU study, 10 runs each, quiet and loaded
    python benchmarks/null_controls.py --runs 4 --studies calibration,opencl-events --loads 0

A null control is a pair of blocks of one run whose true ratio is 1 (an A/A twin: the same
configuration timed again in a later block; a serial-path or zero-work control). Each run's
nulls are judged as the run judges them (:func:`workbench.evidence.engine.estimate_drift`: each against
the drift between blocks that the run's other nulls show), so "clear" on a null is a false
call (the engine then leaves it out of the drift, and names it first in the verdict). For each CPU study (a small configuration of each, on this machine's CPU), the
benchmark runs it ``--runs`` times with no background load and with ``--load`` busy
processes beside it (each a Python loop spinning on one CPU, started and stopped here), and
prints how often a null came out clear, with the Clopper-Pearson 95% upper bound of that rate
(target: at most 5%) and each condition's median drift between blocks. A null whose side ran
under load is inconclusive under load whatever its CI (the run states nothing stronger), so
the rate of CIs that exclude 1 is printed beside it: the statistics' own calibration.

Nulls of one run share its drift estimate, so they are not independent trials: the bound is
optimistic by that much; the run count beside it says how many independent runs there were.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.running import runner  # noqa: E402
from workbench.reading.analysis import analyse  # noqa: E402
from workbench.seam.registry import get  # noqa: E402
from workbench.evidence.stats import clopper_pearson  # noqa: E402
from workbench.results.store import Store  # noqa: E402
from benchmarks._run import background_load, session  # noqa: E402

TARGET = 0.05
#: the engine's reason for a null it could not judge (workbench.evidence.engine._only)
ALONE = "no other to judge it by"
#: per study: (preset, values): a configuration small enough to repeat, with its null controls
CONFIGS = {
    # nulls of each kind with 2 or more others of their kind where the CPUs allow (calls: empty,
    # clock, torch; fork/joins at 1-4 threads)
    "calibration": ("quick", {"threads": min(4, len(os.sched_getaffinity(0))), "torch": True}),
    "cpu-reduction": ("quick", {"n": 65536, "chunks": "1", "workers": "1,2", "providers": "torch,iree-bench",
                                "experiments": "grid,grain,forkjoin", "grain_sizes": "16384,24576", "repeat": 10,
                                "rounds": 10}),
    "opencl-events": ("smoke", {"measurements": 10}),
    "launch-cache": ("smoke", {"repeat": 5}),
    "mc2-split": ("cpu", {"reps": 10, "warmup": 1, "uniform": "2"}),
    "ag-gemm": ("cpu", {"m": "256,512", "repeat": 10, "shard": "rows"}),
}


def measure(name: str, runs: int, load: int, store: Store, say, budget_s: float = float("inf")) -> dict:
    preset, values = CONFIGS[name]
    study = get(name)
    reason = study.requires(study.SPACE.resolve(values, preset=preset))
    if reason:
        return {"skipped": reason}
    clear = total = excluded = done = alone = 0
    drifts = []
    start = time.perf_counter()
    with background_load(load):
        time.sleep(2 if load else 0)  # let the load average see the spinners
        for i in range(runs):
            if i and time.perf_counter() - start > budget_s:  # the condition's share of --budget-s is spent
                break
            done += 1
            say(f"{name}, load {load}: run {i + 1}/{runs}")
            a = analyse(runner.execute(study, values, store, preset=preset))
            nulls = a.tables.get("nulls")
            if nulls is not None and len(nulls):
                # a null alone of its kind has nothing to judge it by: shown, not counted
                judged = nulls[~nulls["why"].fillna("").str.contains(ALONE)]
                alone += len(nulls) - len(judged)
                clear += int((judged["status"] == "clear").sum())
                excluded += int(((judged["lo"] > 1) | (judged["hi"] < 1)).sum())
                total += len(judged)
            if a.drift.measured:
                drifts.append(a.drift.pct)
    return {"runs": done, "clear": clear, "excluded": excluded, "total": total, "alone": alone,
            "drift": statistics.median(drifts) if drifts else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per study and load")
    ap.add_argument("--load", type=int, default=2, help="busy processes of the loaded condition")
    ap.add_argument("--loads", default=None, help="comma-separated loads to run (default: 0 and --load)")
    ap.add_argument("--studies", default=",".join(CONFIGS), help=f"comma-separated: {', '.join(CONFIGS)}")
    ap.add_argument("--budget-s", type=float, default=float("inf"),
                    help="stop starting runs once this many seconds are spent (shared evenly by the conditions)")
    args = ap.parse_args()
    names = [s for s in args.studies.split(",") if s]
    unknown = set(names) - set(CONFIGS)
    if unknown:
        print(f"error: unknown studies {sorted(unknown)}; have {sorted(CONFIGS)}", file=sys.stderr)
        return 2
    loads = [int(x) for x in args.loads.split(",")] if args.loads else [0, args.load]
    results = {}
    with session("nulls") as bench:
        share = args.budget_s / (len(names) * len(loads))
        for name in names:
            for load in loads:
                results[(name, load)] = measure(name, args.runs, load, bench.store, bench.say, share)
    print(f"Null controls called clear: up to {args.runs} runs per study and load (the runs column says how many "
          f"ran); {time.strftime('%Y-%m-%d')}; machine: {bench.machine()}.\n")
    print("| study | background load | runs | nulls judged (alone of their kind, not judged) | called clear | 95% upper bound (Clopper-Pearson) | "
          "CI excludes 1 (load rule aside) | 95% upper bound | median drift between blocks |")
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    clear_all = total_all = excluded_all = 0
    for (name, load), r in results.items():
        if "skipped" in r:
            print(f"| {name} | {load} | - | - | - | - | - | - | skipped: {r['skipped']} |")
            continue
        clear_all += r["clear"]
        total_all += r["total"]
        excluded_all += r["excluded"]
        cells = []
        for k in (r["clear"], r["excluded"]):
            hi = clopper_pearson(k, r["total"])[1] if r["total"] else float("nan")
            cells += [f"{k} ({k / r['total']:.1%})" if r["total"] else "-", f"{hi:.1%}"]
        print(f"| {name} | {load} | {r['runs']} | {r['total']} ({r['alone']}) | {' | '.join(cells)} | {r['drift']:.1f}% |")
    if total_all:
        hi = clopper_pearson(clear_all, total_all)[1]
        ok = hi <= TARGET
        print(f"\nAll: {clear_all} of {total_all} nulls called clear ({clear_all / total_all:.1%}), 95% upper bound "
              f"{hi:.1%}: the target (at most {TARGET:.0%}) is {'shown' if ok else 'NOT shown'}. CIs that exclude 1, "
              f"the load rule aside: {excluded_all} ({excluded_all / total_all:.1%}), 95% upper bound "
              f"{clopper_pearson(excluded_all, total_all)[1]:.1%}.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
