"""The benchmark scripts' shared run: execute in a fresh store, bundle, print, exit status."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from workbench.runner import execute_keep_partial
from workbench.record import RunRecord
from workbench.store import Store, committed_runs, write_run_bundle
from workbench.study import ParamError, StudyUnavailable


def run_benchmark(study: ModuleType, values: dict[str, Any], show: Callable[[RunRecord], bool], *,
                  bundle_dir: Path | None = None, bundle_stem: str = "bench", unavailable_status: int = 2) -> int:
    """Execute in a fresh store (progress on stderr), keep and bundle a failed run's finished
    points, print the table with ``show``. Without the hardware it prints the committed runs
    instead and returns ``unavailable_status``; bad parameters return 2. Otherwise 0 when the
    run finished and ``show`` says every check (and target) held."""
    try:
        rec, error = execute_keep_partial(study, values, Store(),
                                          progress=lambda f, m: print(f"[{f:4.0%}] {m}", file=sys.stderr, flush=True))
    except ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StudyUnavailable as exc:
        recs = committed_runs(study.ID)
        print(f"cannot run here: {exc}\ncommitted results ({len(recs)} runs under traces/{study.ID}/):")
        for committed in recs:
            show(committed)
        return unavailable_status
    if error:
        print(f"run failed: {error}", file=sys.stderr)
    if bundle_dir:
        print(f"bundle: {write_run_bundle(rec, bundle_dir, bundle_stem, bool(error))}", file=sys.stderr)
    return 0 if show(rec) and not error else 1
