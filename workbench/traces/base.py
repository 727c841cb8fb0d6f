"""What every trace importer shares: the one error it raises and the record of what it reads.

Its own module, below the package's ``__init__`` (which re-exports both), so the helpers the
package imports (:mod:`.inflate`) can raise :class:`TraceError` without importing the package.
"""

from __future__ import annotations

from dataclasses import dataclass


class TraceError(Exception):
    """A trace that cannot be read; ``str()`` is one line: '<format>: <what is wrong>'."""

    def __init__(self, fmt: str, message: str):
        self.format = fmt
        self.message = " ".join(str(message).split())  # one line, always
        super().__init__(f"{fmt}: {self.message}")


@dataclass(frozen=True)
class Format:
    """What one importer reads: the trace table of docs/traces.md and the upload widget derive from it."""

    id: str                     # meta["format"], also the first word of every TraceError
    label: str                  # human name, e.g. "Tracy capture"
    suffixes: tuple[str, ...]   # file name endings users have (detection is by content)
    versions: str               # versions read, e.g. "0.11.0 - 0.14.0"
    reads: str                  # what becomes spans/instants
