"""Bundle import speed: a result bundle of many variants into a fresh store, through the CLI.

    .venv/bin/python benchmarks/import_bundle.py [--variants 20000] [--samples 10]

Builds a bundle of ``--variants`` variants with ``--samples`` random samples each, then times
``python -m workbench import`` on it in a child process (parse, schema check, one
transaction), best of 3 runs into fresh stores (the machine is shared; the load average is
printed), and the same for ``runs`` on the filled store. Target: the import of 20,000
variants finishes in seconds (the issue's bound: it was quadratic and did not finish in 300 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 10.0


def bundle(variants: int, samples: int) -> dict:
    rng = random.Random(0)
    run = {"format": "perf-workbench-run", "version": 1, "run_id": "20260101-000000-calibration-b1b1b1",
           "study": "calibration", "params": {"repeat": samples}, "env": {"fingerprint": "bench", "cpu_model": "bench"},
           "status": "complete", "created_utc": "2026-01-01T00:00:00Z", "reproduce": "python -m workbench run calibration",
           "variants": [{"variant": f"v{i}", "params": {"i": i}, "samples_ns": [rng.uniform(1e3, 2e3) for _ in range(samples)],
                         "correct": True, "check": "ok", "extra": {}} for i in range(variants)]}
    return {"format": "perf-workbench-bundle", "version": 1, "run": run, "attachments": []}


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=20_000)
    ap.add_argument("--samples", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.bundle.json"
        path.write_text(json.dumps(bundle(args.variants, args.samples)))
        imports, listings = [], []
        for i in range(3):
            store = Path(tmp) / f"store{i}.sqlite"
            imports.append(timed(["--store", str(store), "import", str(path)]))
            listings.append(timed(["--store", str(store), "runs"]))
        size_mb = path.stat().st_size / 1e6
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"| what | variants | bundle | best of 3 (s) | target |\n|---|---|---|---|---|\n"
          f"| import (CLI, fresh store) | {args.variants:,} | {size_mb:.1f} MB | {min(imports):.2f} | < {TARGET_S:g} s |\n"
          f"| runs (CLI, that store) | {args.variants:,} | | {min(listings):.2f} | |")
    return 0 if min(imports) < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
