"""CPU launch phase: build kernels/c/launch_cache.c once, run one phase per fresh process.

A fresh process per phase, rather than a library loaded into Python, because glibc malloc's
state is per process and one-way: pinning M_MMAP_THRESHOLD cannot be undone, and the dynamic
threshold keeps what earlier frees taught it. A fresh process also gives resource counters
and a peak RSS that belong to the phase alone, as the seed's `time` did for its benchmark.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from workbench.env import REPO_ROOT

from . import Phase, thread_index

SOURCE = REPO_ROOT / "kernels" / "c" / "launch_cache.c"
CFLAGS = ("-O2", "-pthread", "-std=gnu11", "-Wall")
CACHE_DIR = REPO_ROOT / ".workbench" / "cache" / "launch_cache"


def compiler() -> str | None:
    """The system C compiler (``$CC``, else cc, gcc or clang), or None."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build() -> Path:
    """Compile the C program once per (source, compiler, flags); reuse the cached binary."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (install gcc, or set CC)")
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    key = hashlib.sha256(SOURCE.read_bytes() + repr((cc, version, CFLAGS)).encode()).hexdigest()[:16]
    exe = CACHE_DIR / key / "launch_cache"
    if exe.exists():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename: two runs building at once never see half a binary.
    tmp = exe.with_name(f"launch_cache.{os.getpid()}.tmp")
    proc = subprocess.run([cc, *CFLAGS, "-o", str(tmp), str(SOURCE)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling {SOURCE.name} failed:\n{proc.stderr.strip()}")
    os.replace(tmp, exe)
    return exe


def compiler_text() -> str:
    cc = compiler()
    if cc is None:
        return "none"
    out = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()
    return out[0] if out else cc


def run_phase(exe: Path, policy: str, threads: int, launches: int, scratch_bytes: int, k: int, pages: int,
              passes: int, malloc: str, salt: int, timeout_s: float = 600) -> Phase:
    """Run one launch phase in a fresh process and read back its counters and samples."""
    with tempfile.TemporaryDirectory(prefix="launch_cache_") as tmp:
        out = Path(tmp) / "samples.bin"
        args = [str(exe), f"policy={policy}", f"threads={threads}", f"launches={launches}",
                f"scratch={scratch_bytes}", f"k={k}", f"pages={pages}", f"passes={passes}", f"malloc={malloc}",
                f"salt={salt}", f"out={out}"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"{exe.name} exited {proc.returncode}: {proc.stderr.strip()}")
        c = json.loads(proc.stdout)
        raw = np.fromfile(out, dtype=np.int64)
    start, acq, kern, rel = (raw[i * launches:(i + 1) * launches] for i in range(4))
    sums = raw[4 * launches:].view(np.uint64)
    extra = {"rss_before_kib": c["rss_before_kib"], "hwm_kib": c["hwm_kib"] if c["hwm_reset"] else None,
             "allocs": c["allocs"], "mmapped_allocs": c["mmapped_allocs"], "blocks_created": c["blocks_created"],
             "glibc": c["glibc"]}
    return Phase(real_ns=c["real_ns"], user_ns=c["user_ns"], sys_ns=c["sys_ns"], minflt=c["minflt"],
                 majflt=c["majflt"], nvcsw=c["nvcsw"], nivcsw=c["nivcsw"], peak_bytes=c["peak_scratch_bytes"],
                 start_ns=start, segments_ns={"acquire": acq, "kernel": kern, "release": rel}, checksum=sums,
                 thread_of=thread_index(launches, threads), extra=extra)
