"""Cost of a Python zone (workbench/running/tracy.py) per zone, and the memory a zone holds without a capture.

    .venv/bin/python benchmarks/tracy_zones.py [--zones 20000] [--blocks 15] [--memory-zones 500000]

Each setting runs in a fresh child process: ``inert`` (IREE's default runtime: the binding opens
nothing), ``no capture`` (the Tracy runtime loaded, no capture: the default mode emits nothing),
``connected`` (the Tracy runtime under ``iree-tracy-capture`` on a private port: every zone is
sent). A child times ``blocks`` blocks of ``zones`` empty ``with zone("py.bench"):`` blocks and,
interleaved with them, blocks of the same loop without the zone; the cost of a zone is the
median over blocks of (zone block - empty block) / zones, with a bootstrap 95% CI over blocks,
with and without zone text, beside an empty ``contextlib.nullcontext()`` timed the same way
(the scale of a bare context manager on the machine at that moment). ``bytes/zone`` is the growth of the child's resident memory over
``memory-zones`` zones with no capture connected, in the default mode and in ``always`` (Tracy's
client then buffers every zone until a capture connects: the hazard the default avoids).

Timings on a shared machine: the load average is printed; the figures are relative (a zone
against the same loop without it, interleaved), and still move with the load.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the workbench and benchmarks._run, from a checkout


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def child(zones: int, blocks: int, memory_zones: int, connect_s: float) -> dict:
    """Runs in the child: times zones against the bare loop, then measures memory per zone."""
    if os.environ.get("IREE_PY_RUNTIME") == "tracy" or os.environ.get("WORKBENCH_BENCH_IREE"):
        import iree.runtime  # noqa: F401  (loads the Tracy runtime under IREE_PY_RUNTIME=tracy)
    from workbench.evidence import stats
    from workbench.running import tracy

    if connect_s > 0 and not tracy.wait_connected(connect_s):
        return {"error": f"no capture connected in {connect_s} s"}
    clock = time.perf_counter_ns
    per_zone: dict[str, list[float]] = {"zone": [], "zone + text": [], "nullcontext": []}
    for _ in range(blocks):
        for what in per_zone:
            text = "iteration 12" if what == "zone + text" else None
            cm = contextlib.nullcontext if what == "nullcontext" else functools.partial(tracy.zone, "py.bench", text)
            t0 = clock()
            for _ in range(zones):
                pass
            t1 = clock()
            for _ in range(zones):
                with cm():
                    pass
            t2 = clock()
            per_zone[what].append(((t2 - t1) - (t1 - t0)) / zones)
    out = {"status": tracy.status()}
    for what, xs in per_zone.items():
        med, lo, hi, _coverage = stats.median_interval(xs)  # the median over blocks, order-statistic interval
        out[what] = {"ns": med, "lo": lo, "hi": hi}
    if memory_zones:
        before = _rss_bytes()
        for _ in range(memory_zones):
            with tracy.zone("py.bench"):
                pass
        time.sleep(0.2)
        out["bytes_per_zone"] = (_rss_bytes() - before) / memory_zones
    return out


def _run_child(args, env: dict, connect_s: float = 0.0, timeout_s: float = 600) -> dict:
    cmd = [sys.executable, __file__, "--child", "--zones", str(args.zones), "--blocks", str(args.blocks),
           "--memory-zones", str(args.memory_zones if connect_s == 0 else 0), "--connect-s", str(connect_s)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zones", type=int, default=20_000)
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--memory-zones", type=int, default=500_000)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--connect-s", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.zones, args.blocks, args.memory_zones, args.connect_s)))
        return 0

    import importlib.util

    from workbench.running import capture, tracy

    if importlib.util.find_spec("iree._runtime_libs_tracy") is None:
        print("cannot run here: iree-base-runtime has no Tracy runtime (iree._runtime_libs_tracy); "
              "one run's output: traces/benchmarks/tracy_zones_20261206.md")
        return 2
    from benchmarks._run import Session

    s = Session()
    base = {k: v for k, v in os.environ.items() if k not in ("IREE_PY_RUNTIME", tracy.MODE_VAR)}
    rows = []
    for label, env in (("inert (IREE's default runtime)", {"WORKBENCH_BENCH_IREE": "1"}),
                       ("Tracy runtime, no capture (default mode)", {"IREE_PY_RUNTIME": "tracy"}),
                       ("Tracy runtime, no capture, WORKBENCH_TRACY=always",
                        {"IREE_PY_RUNTIME": "tracy", tracy.MODE_VAR: "always"})):
        s.say(label)
        rows.append((label, _run_child(args, base | env)))
    s.say("Tracy runtime, capture connected")
    got: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        def traced(env: dict, timeout_s: float) -> str:
            got.update(_run_child(args, {k: v for k, v in env.items() if k != tracy.MODE_VAR}, 60.0, timeout_s))
            return "benchmarks/tracy_zones.py --child"
        try:
            capture.run(Path(tmp) / "bench.tracy", traced, timeout_s=600)
        except Exception as exc:  # noqa: BLE001 - a benchmark prints what failed and goes on
            got.setdefault("error", f"{type(exc).__name__}: {exc}")
    rows.append(("Tracy runtime, capture connected", got))

    print(f"machine: {s.machine()}\n{args.blocks} blocks of {args.zones:,} zones, median over blocks [95% CI]\n")
    print(f"{'setting':<50} {'ns/zone':>20} {'ns/zone with text':>20} {'bytes/zone, no capture':>23} "
          f"{'nullcontext (scale)':>20}")
    for label, r in rows:
        if "error" in r:
            print(f"{label:<50} error: {r['error']}")
            continue
        cell = lambda d: f"{d['ns']:.0f} [{d['lo']:.0f}, {d['hi']:.0f}]"  # noqa: E731
        mem = f"{r['bytes_per_zone']:.1f}" if "bytes_per_zone" in r else "-"
        print(f"{label:<50} {cell(r['zone']):>20} {cell(r['zone + text']):>20} {mem:>23} "
              f"{cell(r['nullcontext']):>20}")
    print("\nnullcontext: an empty `with contextlib.nullcontext():` in the same child, the scale of a bare "
          "context manager on this machine now")
    return 0 if not any("error" in r for _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
