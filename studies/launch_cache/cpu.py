"""CPU launch phase: build kernels/c/launch_cache.c once, run one phase per fresh process.

A fresh process per phase, rather than a library loaded into Python, because glibc malloc's
state is per process and one-way: pinning M_MMAP_THRESHOLD cannot be undone, and the dynamic
threshold keeps what earlier frees taught it. A fresh process also gives resource counters
and a peak RSS that belong to the phase alone, as the seed's `time` did for its benchmark.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from workbench.running import cbuild
from workbench.base import procs
from workbench.base.env import REPO_ROOT

from .measure import SOFTSTACK_CACHE_LIMIT, OutOfMemory, Phase, thread_index

SOURCE = REPO_ROOT / "kernels" / "c" / "launch_cache.c"
CFLAGS = ("-O2", "-pthread", "-std=gnu11", "-Wall")


def build() -> Path:
    """The launch-cache program, compiled once per (source, compiler, flags)."""
    return cbuild.build(SOURCE, "launch_cache", CFLAGS)


def run_phase(exe: Path, policy: str, threads: int, launches: int, scratch_bytes: int, k: int, pages: int,
              passes: int, malloc: str, salt: int, timeout_s: float = 600, limit: int = SOFTSTACK_CACHE_LIMIT,
              data_bytes: int = 0, oom_every: int = 0) -> Phase:
    """Run one launch phase in a fresh process and read back its counters and samples.

    Raises OutOfMemory when a launch could not get its memory under a policy with no way out
    (the program's exit status 6), RuntimeError for any other failure."""
    with tempfile.TemporaryDirectory(prefix="launch_cache_", ignore_cleanup_errors=True) as tmp:
        out = Path(tmp) / "samples.bin"
        args = [str(exe), f"policy={policy}", f"threads={threads}", f"launches={launches}",
                f"scratch={scratch_bytes}", f"k={k}", f"pages={pages}", f"passes={passes}", f"malloc={malloc}",
                f"salt={salt}", f"out={out}", f"limit={limit}", f"data={data_bytes}", f"oom_every={oom_every}",
                f"parent={os.getpid()}"]  # dies with this process even when it is SIGKILLed
        proc = procs.run(args, timeout_s)  # Ctrl-C: killed and reaped before the folder goes
        if proc.returncode == 6:
            raise OutOfMemory(proc.stderr.strip())
        if proc.returncode != 0:
            raise RuntimeError(f"{exe.name} exited {proc.returncode}: {proc.stderr.strip()}")
        c = json.loads(proc.stdout)
        raw = np.fromfile(out, dtype=np.int64)
    start, acq, kern, rel = (raw[i * launches:(i + 1) * launches] for i in range(4))
    sums = raw[4 * launches:].view(np.uint64)
    extra = {"rss_before_kib": c["rss_before_kib"], "hwm_kib": c["hwm_kib"] if c["hwm_reset"] else None,
             "allocs": c["allocs"], "mmapped_allocs": c["mmapped_allocs"], "blocks_created": c["blocks_created"],
             "limit_frees": c["limit_frees"], "oom_retries": c["oom_retries"], "data_allocs": c["data_allocs"],
             "glibc": c["glibc"]}
    return Phase(real_ns=c["real_ns"], user_ns=c["user_ns"], sys_ns=c["sys_ns"], minflt=c["minflt"],
                 majflt=c["majflt"], nvcsw=c["nvcsw"], nivcsw=c["nivcsw"], peak_bytes=c["peak_scratch_bytes"],
                 start_ns=start, segments_ns={"acquire": acq, "kernel": kern, "release": rel}, checksum=sums,
                 thread_of=thread_index(launches, threads), extra=extra)
