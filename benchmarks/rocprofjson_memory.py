"""Peak memory of importing a large rocprofv3 JSON document, against its size.

    .venv/bin/python benchmarks/rocprofjson_memory.py [--kernels 1000000] [--limit-gb 4] [--keep FILE]

Generates a ``rocprofiler-sdk-tool`` document of ``--kernels`` kernel dispatches (about 250
bytes each, compact JSON as ``rocprofv3 --output-format json`` writes it, records shaped like
those of tests/data/rocprofv3_json: 8 GPUs, 4 streams each, 200 kernel symbols), then imports it
in a fresh child process that first loads a small document of the same format (warm-up: lazy
imports, allocator pools), resets its peak-RSS counter (/proc/self/clear_refs) and reports the
peak RSS over the RSS before the import, and the absolute peak. The target (docs/safety.md):
the import's own peak within about 3x the file's size. Then the same import under an address-space
limit of ``--limit-gb`` (``ulimit -v``): it must end with one line (exit 2) or succeed, never a
crash without a message. Memory, not time: the figures hold on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._run import LOAD_MEMORY_CHILD  # noqa: E402

_CHILD = LOAD_MEMORY_CHILD + r"""
df, meta = load(sys.argv[1])
print(json.dumps({"rows": len(df), "base_kb": base, "peak_kb": status_kb("VmHWM:"), "format": meta["format"]}))
"""


def generate(path: Path, kernels: int) -> int:
    """Write a rocprofv3 JSON document of ``kernels`` dispatches to ``path``; returns its size."""
    gpus = [{"size": 312, "id": {"handle": 38000 + g}, "type": 2, "node_id": 2 + g, "logical_node_id": 2 + g,
             "logical_node_type_id": g, "gpu_index": g, "name": "gfx950", "product_name": "AMD Instinct MI350X",
             "vendor_name": "AMD"} for g in range(8)]
    symbols = [{"size": 88, "kernel_id": k, "code_object_id": 1, "kernel_name": f"_Z9kernel_{k}Pfi.kd",
                "formatted_kernel_name": f"kernel_{k}", "demangled_kernel_name": f"kernel_{k}(float*, int)"}
               for k in range(200)]
    head = {"metadata": {"pid": 908, "init_time": 1, "fini_time": 2}, "agents": gpus,
            "strings": {"buffer_records": [{"kind": "NONE", "operations": []}]}, "kernel_symbols": symbols}
    with open(path, "w") as fh:
        text = json.dumps({"rocprofiler-sdk-tool": [dict(head, buffer_records={"kernel_dispatch": []})]},
                          separators=(",", ":"))
        opening, closing = text.split('"kernel_dispatch":[]')
        fh.write(opening + '"kernel_dispatch":[')
        t = 63_870_727_906_476
        for i in range(kernels):
            g, s = i % 8, i % 4
            rec = {"kind": 11, "operation": 2, "thread_id": 1229 + g, "correlation_id": {"internal": i + 1},
                   "start_timestamp": t, "end_timestamp": t + 13_640 + i % 977,
                   "dispatch_info": {"agent_id": {"handle": 38000 + g}, "queue_id": {"handle": 19 + s},
                                     "kernel_id": i % 200, "dispatch_id": i + 1,
                                     "workgroup_size": {"x": 256, "y": 1, "z": 1},
                                     "grid_size": {"x": 1378560 >> (i % 5), "y": 1, "z": 1}},
                   "stream_id": {"handle": 570 + s}}
            fh.write(("," if i else "") + json.dumps(rec, separators=(",", ":")))
            t += 2_500
        fh.write("]" + closing)
    return path.stat().st_size


def child(big: Path, warm: Path, limit_gb: float = 0) -> tuple[int, str, str]:
    """Import ``big`` in a fresh process (under ``limit_gb`` of address space when given)."""
    script = big.parent / "import_child.py"
    script.write_text(_CHILD)
    prefix = f"ulimit -v {int(limit_gb * (1 << 20))}; " if limit_gb else ""
    cmd = prefix + " ".join(f"'{a}'" for a in (sys.executable, script, big, ROOT, warm))
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", type=int, default=1_000_000)
    p.add_argument("--limit-gb", type=float, default=4.0, help="address-space limit of the second import (0: none)")
    p.add_argument("--keep", help="write the generated document here and keep it")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(args.keep) if args.keep else Path(tmp) / "big.json"
        warm = Path(tmp) / "warm.json"
        size = generate(big, args.kernels)
        generate(warm, 2000)
        code, out, err = child(big, warm)
        if code:
            print(f"import failed (exit {code}): {err.strip()[-500:]}")
            return 1
        doc = json.loads(out.strip().splitlines()[-1])
        extra = (doc["peak_kb"] - doc["base_kb"]) * 1024
        load = os.getloadavg()[0]
        print(f"| document | rows | file | peak RSS of the import | x file | absolute peak RSS | load |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        print(f"| rocprofv3 JSON, {args.kernels:,} kernels | {doc['rows']:,} | {size / 2**20:,.0f} MiB | "
              f"{extra / 2**20:,.0f} MiB | {extra / size:.2f}x | {doc['peak_kb'] / 2**10:,.0f} MiB | {load:.1f} |")
        if args.limit_gb:
            code, out, err = child(big, warm, args.limit_gb)
            lines = [line for line in err.splitlines() if line.strip()]
            print(f"\nunder ulimit -v {args.limit_gb:g} GiB: exit {code}; "
                  + ("imported" if code == 0 else f"stderr: {lines[-1] if lines else '(nothing)'}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
