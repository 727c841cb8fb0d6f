"""cpu-reduction benchmark: the study's own speed targets, then its live seed-shaped tables.

    python benchmarks/cpu_reduction.py            # cold + warm default run, quick run, tables
    python benchmarks/cpu_reduction.py --skip-cold

Targets (issue #4): the default page run and the quick run finish within 60 s on a 2-core
machine; a second run compiles nothing (every .vmfb comes from the cache). The cold run uses
an empty temporary compile cache so it pays every compile. Exit status 1 when a target is
missed or a variant fails its correctness check.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import studies.cpu_reduction as study  # noqa: E402
from studies.cpu_reduction import iree_tools  # noqa: E402
from workbench.running import runner  # noqa: E402
from workbench.evidence.tables import md_table  # noqa: E402
from workbench.results.store import Store  # noqa: E402
from benchmarks._run import session  # noqa: E402

TARGET_S = 60.0


def timed_run(store: Store, preset: str | None) -> tuple[float, object]:
    t0 = time.perf_counter()
    rec = runner.execute(study, {}, store, preset=preset)
    return time.perf_counter() - t0, rec


def compiled(rec) -> int:
    return sum(1 for info in rec.outputs.get("programs", {}).values() if not info.get("cached"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-cold", action="store_true", help="do not time a run with an empty compile cache")
    args = ap.parse_args()
    rows, ok = [], True
    with session("cpu-reduction") as bench, tempfile.TemporaryDirectory() as tmp:
        runs = [] if args.skip_cold else [("default, cold compile cache", None, Path(tmp) / "cache")]
        runs += [("default, warm cache", None, None), ("quick (--quick)", "quick", None)]
        rec = None
        for label, preset, cache in runs:
            old = iree_tools.CACHE_DIR
            if cache is not None:
                iree_tools.CACHE_DIR = cache
            try:
                wall_s, rec = timed_run(bench.store, preset)
            finally:
                iree_tools.CACHE_DIR = old
            failed = [v.variant for v in rec.variants if not v.correct]
            fresh = compiled(rec)
            hit = wall_s <= TARGET_S and not failed and (cache is not None or label.startswith("quick") or fresh == 0)
            ok &= hit
            rows.append({"run": label, "wall_s": round(wall_s, 1), "target_s": TARGET_S, "variants": len(rec.variants),
                         "failed_checks": len(failed), "programs_compiled": fresh,
                         "load_avg_start": round(rec.outputs.get("loadavg_start", [float("nan")])[0], 2),
                         "met": "yes" if hit else "NO"})
        import pandas as pd

        print(f"## Study speed (this machine: {bench.machine()})\n")
        print(md_table(pd.DataFrame(rows)))
        tables = study.analyze(rec)
        print(f"\n## Live results of the last run ({rec.run_id})\n")
        for section in study.report_sections(tables):
            print(section + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
