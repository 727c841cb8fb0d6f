"""How fast the CLI answers: an error line, and `compare` / `report` of committed runs.

    .venv/bin/python benchmarks/cli.py [--repeat 5]

Runs each command as a person types it (``python -m workbench ...`` in a child process, an
empty results store, the committed bundles under ``traces/``) ``--repeat`` times after one
warm-up (bytecode compiled, the committed-bundle index built), and prints per command the
median wall time and the median CPU time (user + system) of the child with the target:
errors (an unknown study, run id or knob) under 1 s, `compare` and `report` of committed runs
under 2 s, on a 2-core machine. The machine's load average is printed before and after: on a
shared machine the wall time includes waiting for a CPU, so read the CPU column there; a figure
over its target fails only where the load stayed below the CPU count (exit 1).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (what, arguments, expected exit code, target seconds)
CASES = [
    ("error: unknown study (did you mean)", ["run", "calibraton"], 2, 1.0),
    ("error: unknown knob", ["run", "calibration", "--set", "thread=2"], 2, 1.0),
    ("error: unknown run id", ["report", "no-such-run", "--format", "issue"], 2, 1.0),
    ("error: compare A with itself", ["compare", "20261124-041556-cpu-reduction-663d3f",
                                      "20261124-041556-cpu-reduction-663d3f"], 2, 1.0),
    ("knobs of a study", ["knobs", "cpu-reduction"], 0, 2.0),
    ("compare two committed runs (12 and 9 variants)", ["compare", "20261124-041556-cpu-reduction-663d3f",
                                                        "20261127-110251-cpu-reduction-320a3f"], 0, 2.0),
    ("report --format issue of a committed run", ["report", "20261124-041556-cpu-reduction-663d3f", "--format",
                                                  "issue", "-o", "{tmp}/r.issue.md"], 0, 2.0),
]


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of ``python -m workbench ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    cpus = os.cpu_count() or 1
    load_before = os.getloadavg()[0]
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "WORKBENCH_STORE": str(Path(tmp) / "results.sqlite")}
        for what, args, code, target in CASES:
            args = [a.replace("{tmp}", tmp) for a in args]
            timed(args, env)  # warm-up
            runs = [timed(args, env) for _ in range(opts.repeat)]
            codes = {c for _, _, c in runs}
            wall = statistics.median(w for w, _, _ in runs)
            cpu = statistics.median(c for _, c, _ in runs)
            ok = codes == {code} and (wall <= target or os.getloadavg()[0] >= cpus)
            failed |= not ok
            rows.append((what, wall, cpu, target, codes, code, ok))
    load_after = os.getloadavg()[0]
    print(f"python -m workbench, median of {opts.repeat} runs after a warm-up; {cpus} CPUs, load average "
          f"{load_before:.1f} before and {load_after:.1f} after")
    print(f"{'command':<48} {'wall':>7} {'CPU':>7} {'target':>7}  exit  ")
    for what, wall, cpu, target, codes, code, ok in rows:
        verdict = "ok" if ok else "OVER" if codes == {code} else "WRONG EXIT"
        print(f"{what:<48} {wall:6.2f}s {cpu:6.2f}s {target:6.1f}s  {','.join(map(str, sorted(codes))):<4}  {verdict}")
    if max(load_before, load_after) >= cpus:
        print("(the load reached the CPU count: wall times include waiting for a CPU; the CPU column is the figure)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
