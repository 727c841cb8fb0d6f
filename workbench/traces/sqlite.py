"""Read-only, bounded access to untrusted SQLite trace databases (Nsight Systems, rocpd).

A database file carries SQL of its own: a name the importer reads as a table can be a view
that recurses forever or joins a table with itself into billions of rows. So:

- the file is opened read-only and immutable (no journal or WAL files are created next to
  it), with ``trusted_schema=OFF`` and values capped at 64 MiB (``SQLITE_LIMIT_LENGTH``);
- :meth:`Database.table` refuses a view or a trigger where the importer expects a table;
- :meth:`Database.view` accepts a view only if it is built, possibly through other such
  views, from tables and views of the allowed names, without ``WITH``/``RECURSIVE`` and at
  most :data:`MAX_VIEW_DEPTH` views deep (rocpd is meant to be read through its views);
- a progress handler aborts any statement once the file's time budget is spent
  (``WORKBENCH_TRACE_SQL_SECONDS``, default 120 s for the whole file);
- every query returns at most ``WORKBENCH_TRACE_MAX_ROWS`` rows (default 10,000,000); more
  is refused, not truncated silently.

All failures are :class:`TraceError` with one line naming the file and the object.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .base import TraceError

SQLITE_MAGIC = b"SQLite format 3\x00"
DEFAULT_SECONDS = 120.0
DEFAULT_MAX_ROWS = 10_000_000
MAX_VALUE_BYTES = 64 << 20
MAX_VIEW_DEPTH = 6
#: rows fetched at a time, so the row cap stops a runaway query before it is all in memory
_CHUNK_ROWS = 100_000
#: VM instructions between two deadline checks
_PROGRESS_STEPS = 20_000

_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r"'(?:[^']|'')*'")
_IDENT = re.compile(r'`([^`]*)`|"([^"]*)"|\[([^\]]*)\]|([A-Za-z_][A-Za-z_0-9$]*)')


def _env(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 and value == value else default


def identifiers(sql: str) -> list[str]:
    """Identifiers and keywords of an SQL text, comments and string literals removed."""
    text = _STRING.sub("''", _COMMENT.sub(" ", sql))
    return [next(g for g in m.groups() if g is not None) for m in _IDENT.finditer(text)]


class Database:
    """One untrusted SQLite file, opened read-only (see the module docstring)."""

    def __init__(self, path: str | os.PathLike, fmt: str):
        self.fmt = fmt
        self.path = Path(path)
        self.name = self.path.name
        self.max_rows = int(_env("WORKBENCH_TRACE_MAX_ROWS", DEFAULT_MAX_ROWS))
        self.seconds = _env("WORKBENCH_TRACE_SQL_SECONDS", DEFAULT_SECONDS)
        self._deadline = time.monotonic() + self.seconds
        try:
            # immutable: no locks, no -wal/-shm files; the URI path is percent-encoded by as_uri()
            self.con = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        except sqlite3.Error as exc:
            raise TraceError(fmt, f"{self.name}: cannot open ({exc})") from None
        self.con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self.con.set_progress_handler(self._over_time, _PROGRESS_STEPS)
        try:
            self.con.execute("PRAGMA trusted_schema = OFF")
            self.con.execute("PRAGMA query_only = ON")
            rows = self.con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self._error(exc, "the schema") from None
        #: object name (lower case) -> (type, name, table it belongs to, sql)
        self.objects = {str(r[1]).lower(): (r[0], str(r[1]), str(r[2] or ""), r[3] or "") for r in rows}

    def _over_time(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0  # nonzero aborts the statement

    def _error(self, exc: Exception, what: str) -> TraceError:
        if isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc):
            return TraceError(self.fmt, f"{self.name}: reading {what} took over {self.seconds:g} s "
                                        "(limit: WORKBENCH_TRACE_SQL_SECONDS)")
        if isinstance(exc, sqlite3.DataError) or "too big" in str(exc):
            return TraceError(self.fmt, f"{self.name}: {what} holds a value over {MAX_VALUE_BYTES >> 20} MiB")
        return TraceError(self.fmt, f"{self.name}: corrupted or truncated database while reading {what} ({exc})")

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def kind(self, name: str) -> str | None:
        """'table', 'view', 'index', 'trigger' or None."""
        obj = self.objects.get(name.lower())
        return obj[0] if obj else None

    def names(self, kind: str) -> list[str]:
        return [o[1] for o in self.objects.values() if o[0] == kind]

    def first_table(self, *candidates: str) -> str | None:
        """The first of ``candidates`` present, checked to be a table (None if none is present)."""
        for c in candidates:
            if self.kind(c) is not None:
                return self.table(c)
        return None

    def table(self, name: str) -> str:
        """``name`` if it is a plain table with no trigger on it; TraceError otherwise."""
        kind = self.kind(name)
        if kind != "table":
            raise TraceError(self.fmt, f"{self.name}: '{name}' is a {kind or 'missing object'}, not a table "
                                       "(SQL stored in the file is not run)")
        triggers = [o[1] for o in self.objects.values() if o[0] == "trigger" and o[2].lower() == name.lower()]
        if triggers:
            raise TraceError(self.fmt, f"{self.name}: table '{name}' has triggers ({', '.join(triggers[:3])}); "
                                       "a profiler export has none")
        return self.objects[name.lower()][1]

    def view(self, name: str, allowed: Callable[[str], bool], _depth: int = 0, _seen: tuple = ()) -> str:
        """``name`` if it is a table, or a view built only from objects whose names pass
        ``allowed`` (recursively, each checked the same way); TraceError otherwise."""
        obj = self.objects.get(name.lower())
        if obj is None:
            raise TraceError(self.fmt, f"{self.name}: '{name}' is missing")
        kind, real, _tbl, sql = obj
        if kind == "table":
            return self.table(real)
        if kind != "view":
            raise TraceError(self.fmt, f"{self.name}: '{name}' is a {kind}, not a table or view")
        if _depth >= MAX_VIEW_DEPTH or real.lower() in _seen:
            raise TraceError(self.fmt, f"{self.name}: view '{real}' nests views over {MAX_VIEW_DEPTH} deep "
                                       "or refers to itself")
        words = identifiers(sql)
        first_as = next((i for i, w in enumerate(words) if w.upper() == "AS"), -1)
        body = words[first_as + 1:]  # after CREATE VIEW name AS
        upper = {w.upper() for w in body}
        if "WITH" in upper or "RECURSIVE" in upper:
            raise TraceError(self.fmt, f"{self.name}: view '{real}' uses WITH/RECURSIVE, which the profiler's "
                                       "own views never do; refused")
        for dep in dict.fromkeys(w for w in body if w.lower() in self.objects and w.lower() != real.lower()):
            dep_kind = self.objects[dep.lower()][0]
            if dep_kind in ("index", "trigger"):
                continue  # an index or trigger name in a view is a column alias, not a source
            if not allowed(dep):
                raise TraceError(self.fmt, f"{self.name}: view '{real}' reads '{dep}', which is not part of "
                                           "the profiler's schema; refused")
            self.view(dep, allowed, _depth + 1, _seen + (real.lower(),))
        return real

    def columns(self, name: str) -> list[str]:
        try:
            return [r[1] for r in self.con.execute(f'PRAGMA table_info("{name}")')]
        except sqlite3.DatabaseError as exc:
            raise self._error(exc, f"the columns of '{name}'") from None

    def query(self, sql: str, what: str, params: tuple = ()) -> pd.DataFrame:
        """Rows of ``sql`` as a DataFrame, fetched in chunks; refused past the row cap."""
        chunks: list[pd.DataFrame] = []
        rows = 0
        try:
            for chunk in pd.read_sql_query(f"SELECT * FROM ({sql}) LIMIT {self.max_rows + 1}", self.con,
                                           params=params, chunksize=_CHUNK_ROWS):
                rows += len(chunk)
                if rows > self.max_rows:
                    raise TraceError(self.fmt, f"{self.name}: {what} has over {self.max_rows:,} rows "
                                               "(limit: WORKBENCH_TRACE_MAX_ROWS)")
                chunks.append(chunk)
            if not chunks:  # no rows: one more (instant) query for the column names
                cur = self.con.execute(f"SELECT * FROM ({sql}) LIMIT 0", params)
                return pd.DataFrame(columns=[d[0] for d in cur.description])
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
            # pandas wraps the sqlite3 error; the cause says what went wrong
            raise self._error(exc.__cause__ or exc, what) from None
        except MemoryError:
            raise TraceError(self.fmt, f"{self.name}: out of memory while reading {what}") from None
        return chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)

    def select(self, name: str, wanted: tuple[str, ...], what: str) -> pd.DataFrame:
        """The ``wanted`` columns that ``name`` has (only those: a view's other columns cost memory)."""
        have = {c.lower(): c for c in self.columns(name)}
        cols = [have[w.lower()] for w in wanted if w.lower() in have]
        if not cols:
            return pd.DataFrame()
        listed = ", ".join('"' + c.replace('"', '""') + '"' for c in cols)
        return self.query(f'SELECT {listed} FROM "{name}"', what)

