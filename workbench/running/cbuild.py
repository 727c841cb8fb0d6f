"""Building small C sources at run time with the system compiler, cached by content.

Studies that need the real C allocator or a native callback compile a few hundred lines of C
once per (source, compiler, flags) into ``.workbench/cache/c/``. The build goes beside its
target and is renamed into place (atomic within one directory), so two runs building at once
never load half a binary.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from ..base import procs
from ..base.env import STATE_DIR

CACHE_DIR = STATE_DIR / "cache" / "c"
#: seconds a compile of one small source may take (a loaded 2-core machine takes a few)
COMPILE_TIMEOUT_S = 300


class BuildError(OSError):
    """No C compiler, or the compiler rejected the source (its own text is in the message)."""


def compiler() -> str | None:
    """The system C compiler (``$CC``, else cc, gcc or clang), or None."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compiler_version(cc: str) -> str:
    out = procs.run([cc, "--version"], COMPILE_TIMEOUT_S).stdout.splitlines()
    return out[0] if out else cc


def build(source: Path, output_name: str, flags: Sequence[str]) -> Path:
    """Compile ``source`` with ``flags`` (add ``-shared -fPIC`` for a library) once; return the path."""
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler found (install gcc: apt-get install gcc, or set CC)")
    key = hashlib.sha256(source.read_bytes() + repr((cc, compiler_version(cc), list(flags))).encode()).hexdigest()[:16]
    out = CACHE_DIR / key / output_name
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{output_name}.{os.getpid()}.tmp")
    try:  # a Ctrl-C during the compile ends it (workbench.base.procs)
        proc = procs.run([cc, *flags, "-o", str(tmp), str(source)], COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BuildError(f"compiling {source.name} took over {COMPILE_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0:
        raise BuildError(f"compiling {source.name} failed:\n{proc.stderr.strip()}")
    os.replace(tmp, out)
    return out
