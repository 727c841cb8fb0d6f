"""Output files the user names (``-o``): written whole or not at all, one line on failure.

A regular file is written to a temporary file beside it and renamed over it, so a full
disk or a Ctrl-C never leaves half a report where the old one was. A device or FIFO the
user names (``/dev/stdout``) is written directly.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class OutputError(RuntimeError):
    """An output path that cannot be written; ``str()`` is one line naming it and why."""


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def check_target(path: str | os.PathLike) -> Path:
    """``path`` if a file can be written there: not a folder; its folder is made if missing."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder (give a file name, e.g. {path / 'out.json'})")
    blocker = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise OutputError(f"cannot write {path}: {blocker} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: cannot make its folder ({exc.strerror or exc})") from None
    return path


def write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8) to ``path``; raises :class:`OutputError`."""
    path = check_target(path)
    blob = data.encode() if isinstance(data, str) else data
    try:
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            with open(path, "wb") as fh:
                fh.write(blob)
            return path
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:50]}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
