"""Results store: one SQLite file of runs, their variants' raw samples and attachments.

Location: ``--store PATH`` on the CLI, else ``$WORKBENCH_STORE``, else
``.workbench/results.sqlite`` in the checkout (:data:`workbench.base.env.STATE_DIR`). Variants are written as they finish, so an
interrupted sweep keeps its points (the run is left with status ``interrupted``).

Bundles (one JSON file per run) carry a run between machines, e.g. from a GPU node into a
laptop's store. They are untrusted: read with a size cap, checked against the schema in
:mod:`workbench.data.schema` before any field is used, and imported in one transaction per run.
Format history:
  version 1 (2026-11): {"format", "version", "run": <record>, "attachments": [...]}. Since
  2026-11-27 a bundle's variants carry their raw samples only: the summaries written before
  (``median_ns``, ``ci_ns``, ``iqr_ns``, ``noisy``) were never read back, and still load.
  version 2 (2026-12-06): attachments of 4 KiB or more may be zstd frames (``"encoding":
  "zstd"``; :func:`attachment_entry`), unpacked with a bound (:func:`_attachment_bytes`).

Store schema history (``meta.schema_version``; an older store is migrated when first opened
for writing, and a read-only one is read as it is):
  1 (2026-11): meta, runs, variants, attachments.
  2 (2026-12): + annotations (tags and a note per run id; a committed bundle's run too, so
     it is keyed by run id, not a reference to ``runs``).
  3 (2026-11-27): + variants.blocks (the block or round of each sample, JSON; NULL in runs
     stored before, which read as one block per variant).

Several processes (CLI runs, app sessions) use one store at once: every :class:`Store`
owns its own connection (never shared between threads), the file is in WAL mode and
writers wait up to :data:`BUSY_TIMEOUT_S` for each other. A run in progress records its
process in the ``meta`` table; when that process is gone (killed), readers show the run as
``interrupted``, and the next writer stores that.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import io
import json
import os
import re
import secrets
import socket
import statistics
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..base import outfile
from ..base.env import REPO_ROOT, STATE_DIR
from ..base.procs import start_ticks
from ..data.record import RunRecord, VariantResult, machine_label, now_utc
from ..seam.registry import registry
from ..data.schema import BUNDLE_FORMAT, BUNDLE_VERSION, SchemaError, check_bundle
from ..base.untrusted import UntrustedError, check_run_id, safe_stem, visible

APPLICATION_ID = 0x50455246  # "PERF": marks the SQLite file as ours
SCHEMA_VERSION = 3
BUSY_TIMEOUT_S = 30
#: largest bundle file read (a JSON document takes several times its size in memory)
MAX_BUNDLE_BYTES = 256 << 20
_TABLES = ("meta", "runs", "variants", "attachments", "annotations")
#: tables a store of each older schema version lacks (added by :meth:`Store._migrate`)
_ADDED_IN = {2: ("annotations",)}
#: columns a store of each older schema version lacks: (table, column, SQL type)
_COLUMNS_ADDED_IN = {3: (("variants", "blocks", "TEXT"),)}
#: a tag: a short plain word (it is shown in tables and used as a filter)
TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:=-]{0,39}")
MAX_NOTE_CHARS = 2000
_OWNER_KEY = "owner:"  # meta key prefix: the process running a run, while it runs


class StoreError(RuntimeError):
    """A results file that is not ours, corrupt, or from a newer schema, or a bundle that is
    not valid. The file is untouched; ``str()`` is one line."""


def default_path() -> Path:
    env = os.environ.get("WORKBENCH_STORE")
    return Path(env) if env else STATE_DIR / "results.sqlite"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, study TEXT NOT NULL, status TEXT NOT NULL, params TEXT NOT NULL,
    env TEXT NOT NULL, fingerprint TEXT, created_utc TEXT NOT NULL, finished_utc TEXT,
    reproduce TEXT, outputs TEXT, error TEXT, floor_ns REAL, origin TEXT);
CREATE TABLE IF NOT EXISTS variants (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    variant TEXT NOT NULL, params TEXT NOT NULL, samples_ns TEXT NOT NULL, correct INTEGER NOT NULL,
    check_msg TEXT, extra TEXT, blocks TEXT, PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS attachments (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, name TEXT NOT NULL,
    kind TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, name));
CREATE TABLE IF NOT EXISTS annotations (run_id TEXT PRIMARY KEY, tags TEXT NOT NULL, note TEXT NOT NULL);
"""


class Store:
    """The SQLite results store. Opening a file that is not ours raises :class:`StoreError`.

    ``create``: make a new store when ``path`` does not exist (its folder must exist, except
    for the default store, whose ``.workbench/`` folder is made). Commands that only read
    pass ``create=False``, so a mistyped path is reported, not created. One connection per
    instance, used from the thread that opened it."""

    def __init__(self, path: str | os.PathLike | None = None, create: bool = True):
        self.path = Path(path) if path else default_path()
        self._write_error = ""  # why the last write probe failed (see writable)
        if not self._check_path(create, default=path is None and "WORKBENCH_STORE" not in os.environ):
            self._create()
        self._immutable = False  # set by _check_foreign: read as a file nothing can change
        self._check_foreign()
        try:
            self._conn = (sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
                          if self._immutable else sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S))
            self._conn.execute("PRAGMA foreign_keys = ON")
            self.schema_version = int(self._conn.execute(
                "SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
            if self.writable():
                self._to_wal()
                self._migrate()
                self._reap_dead_runs()
        except sqlite3.DatabaseError as exc:
            raise StoreError(disk_full(self.path, exc) or f"{self.path}: cannot open the results store ({exc})") \
                from None

    def _check_path(self, create: bool, default: bool) -> bool:
        """Whether a store file exists at ``self.path``; refuses what is not a regular file."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            if not create:
                raise StoreError(f"no results store at {self.path} (nothing was run or imported into it; check "
                                 "--store / WORKBENCH_STORE)") from None
            if default:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            elif not self.path.parent.is_dir():
                raise StoreError(f"cannot create a results store at {self.path}: the folder {self.path.parent} "
                                 "does not exist") from None
            return False
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        if stat.S_ISDIR(st.st_mode):
            raise StoreError(f"{self.path} is a folder, not a results store file")
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{self.path} is not a regular file (a FIFO, socket or device); it was left untouched")
        if st.st_size == 0:
            raise StoreError(f"{self.path} is an empty file, not a workbench results store; it was left untouched "
                             "(delete it to start a new store there)")
        return True

    def _to_wal(self) -> None:
        """Switch a store made before WAL was the default. Only when it is not WAL already:
        setting the mode while other processes write can fail with an I/O error, and a store
        that stays in rollback mode still works (its writers wait for each other)."""
        if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:
                pass

    def _create(self) -> None:
        """A new, empty store at ``self.path``, built beside it and linked into place, so a
        process opening the path meanwhile sees a whole store or none (never 0 bytes)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
        try:
            con = sqlite3.connect(str(tmp))
            with con:
                con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                con.executescript(_SCHEMA)
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            # WAL: readers never wait for a writer, and a run's per-point commits stay cheap.
            con.execute("PRAGMA journal_mode = WAL")
            con.close()
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass  # another process made it first: use theirs
            except OSError:  # a file system without hard links
                if not self.path.exists():
                    os.replace(tmp, self.path)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise StoreError(f"cannot create a results store at {self.path}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)

    def _check_foreign(self) -> None:
        """Read-only checks, so a foreign or corrupt file is never modified.

        Only SQLite opens the file: a plain open() and close() of a database file drops every
        POSIX lock this process holds on it, the locks of other sessions' connections included
        (the app serves many sessions from one process). The first look is 'immutable' (no
        locks, no -wal or -shm files made beside another application's database); only a
        file with the workbench's application id is then opened read-only for the rest."""
        uri = self.path.absolute().as_uri()  # percent-encodes '#', '?' and '%', which would end the name
        try:
            probe = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)
            try:
                app_id = probe.execute("PRAGMA application_id").fetchone()[0]
            finally:
                probe.close()
        except sqlite3.DatabaseError as exc:
            # 'malformed' read past the log: a WAL store whose last checkpoint stopped half-way
            # (a full disk) is whole once read through its log, below
            if (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF != _SQLITE_CORRUPT:
                raise StoreError(f"{self.path} is not a workbench results file (not SQLite: {exc}); it was left "
                                 "untouched") from None
            app_id = None
        if app_id is not None and app_id != APPLICATION_ID:
            raise StoreError(f"{self.path} is an SQLite file of another application; it was left untouched")
        try:
            ro = self._read_only(uri)
            try:
                if app_id is None and ro.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                    raise StoreError(f"{self.path} is not a workbench results file; it was left untouched")
                objects = {(name, kind) for name, kind in ro.execute("SELECT name, type FROM sqlite_master")}
                version = ro.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() \
                    if ("meta", "table") in objects else None
                later = _tables_after(version[0] if version else "")
                missing = [t for t in _TABLES if (t, "table") not in objects and t not in later]
                other = sorted(f"{kind} {name}" for name, kind in objects
                               if kind in ("view", "trigger") or (kind == "table" and name not in _TABLES))
                if missing or other:
                    raise StoreError(f"{self.path} looks like a workbench results file but is not one ("
                                     + (f"missing tables: {', '.join(missing)}" if missing else
                                        f"unexpected {', '.join(other[:3])}") + "); it was left untouched")
            finally:
                ro.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(disk_full(self.path, exc) or f"{self.path} is corrupt or not a workbench results file "
                                                         f"({exc}); it was left untouched") from None
        if version is None or not str(version[0]).isdigit():
            raise StoreError(f"{self.path} is a damaged workbench results file (no schema version); it was left untouched")
        if int(version[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has results schema {version[0]}, newer than this workbench's "
                             f"{SCHEMA_VERSION}; update the workbench")

    def _read_only(self, uri: str) -> sqlite3.Connection:
        """A read-only connection. A WAL store is read through its shared-memory file
        (``-shm``), which SQLite cannot make in a folder it cannot write (a read-only mount, a
        CD, a store another user left in a folder of theirs): the store is then read as
        immutable, which is exact while it has no write-ahead log with changes in it (none can
        be added where nothing can be written)."""
        con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            con.execute("PRAGMA application_id").fetchone()
            return con
        except sqlite3.OperationalError as exc:
            con.close()
            if (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF != _SQLITE_CANTOPEN or os.access(
                    self.path.parent, os.W_OK | os.X_OK) and not _read_only_fs(self.path.parent):
                raise
            wal = Path(f"{self.path}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreError(f"{self.path} cannot be read where it is: its write-ahead log {wal.name} holds "
                                 f"changes, and {self.path.name}-shm, which reads them, cannot be made in "
                                 f"{self.path.parent} (read-only); copy the store's files to a writable folder") \
                    from None
        self._immutable = True
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)

    def _migrate(self) -> None:
        """Bring an older store to :data:`SCHEMA_VERSION`: new tables and new nullable
        columns only, so what was stored stays as it was. One transaction, which sees another
        process's migration; a store that cannot be written keeps its version and is read as
        it is."""
        if self.schema_version >= SCHEMA_VERSION:
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)  # CREATE TABLE IF NOT EXISTS
                for version, columns in _COLUMNS_ADDED_IN.items():
                    for table, column, kind in columns:
                        have = {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}
                        if version > self.schema_version and column not in have:
                            self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self._conn.commit()
            except BaseException:
                self._conn.rollback()
                raise
        except sqlite3.OperationalError:
            return  # locked past the busy timeout or read-only after all: readable as it is
        self.schema_version = SCHEMA_VERSION

    def writable(self) -> bool:
        """Whether this process can write the store (file and folder permissions, read-only
        mounts): takes and drops a write lock, so a run knows before it measures."""
        if self._immutable:
            self._write_error = f"the folder {self.path.parent} cannot be written"
            return False
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):  # another writer, past the busy timeout
                return True
            self._write_error = str(exc)
            return False

    def check_writable(self) -> None:
        if not self.writable():
            raise StoreError(f"{self.path} is read-only for this user (file, folder or file system); nothing "
                             f"can be stored there ({self._write_error or 'no write access'})")

    def close(self) -> None:
        self._conn.close()

    # --- writing ---------------------------------------------------------------------------

    def _insert_run(self, rec: RunRecord) -> None:
        self._conn.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (rec.run_id, rec.study, rec.status, json.dumps(rec.params), json.dumps(rec.env, default=str),
             rec.env.get("fingerprint"), rec.created_utc or now_utc(), rec.finished_utc, rec.reproduce,
             json.dumps(rec.outputs, default=str), rec.error, rec.floor_ns, rec.origin),
        )

    @staticmethod
    def _variant_row(run_id: str, seq: int, v: VariantResult) -> tuple:
        return (run_id, seq, v.variant, json.dumps(v.params), json.dumps(v.samples_ns), int(v.correct), v.check,
                json.dumps(v.extra, default=str), None if v.blocks is None else json.dumps(v.blocks))

    def begin(self, rec: RunRecord) -> None:
        """Store a run that this process starts now (status ``running``, owned by this pid)."""
        with _writing(self, f"run {rec.run_id} cannot be started"):
            self._insert_run(rec)
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               (_OWNER_KEY + rec.run_id, json.dumps(_this_process())))

    def add_variant(self, run_id: str, v: VariantResult) -> None:
        with _writing(self, f"a point of run {run_id} cannot be stored"):
            # MAX over the (run_id, seq) key is an index lookup; COUNT(*) would scan the run's rows.
            seq = self._conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM variants WHERE run_id=?",
                                     (run_id,)).fetchone()[0]
            self._conn.execute("INSERT INTO variants VALUES (?,?,?,?,?,?,?,?,?)", self._variant_row(run_id, seq, v))

    def replace_variant(self, run_id: str, v: VariantResult) -> None:
        """Replace the variant of the same name (one that gained repeats), or add it."""
        with _writing(self, f"a point of run {run_id} cannot be stored"):
            row = self._conn.execute("SELECT seq FROM variants WHERE run_id=? AND variant=? ORDER BY seq DESC LIMIT 1",
                                     (run_id, v.variant)).fetchone()
            if row is None:
                row = self._conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM variants WHERE run_id=?",
                                         (run_id,)).fetchone()
            self._conn.execute("INSERT OR REPLACE INTO variants VALUES (?,?,?,?,?,?,?,?,?)",
                               self._variant_row(run_id, row[0], v))

    def add_attachment(self, run_id: str, name: str, kind: str, data: bytes) -> None:
        with _writing(self, f"an attachment of run {run_id} cannot be stored"):
            self._conn.execute("INSERT OR REPLACE INTO attachments VALUES (?,?,?,?)", (run_id, name, kind, data))

    def finish(self, run_id: str, status: str, outputs: dict | None = None, error: str | None = None) -> str:
        """Store the run's end; its ``finished_utc``."""
        finished = now_utc()
        with _writing(self, f"run {run_id} cannot be stored as {status}"):
            self._conn.execute(
                "UPDATE runs SET status=?, finished_utc=?, outputs=COALESCE(?, outputs), error=? WHERE run_id=?",
                (status, finished, json.dumps(outputs, default=str) if outputs is not None else None, error, run_id),
            )
            self._conn.execute("DELETE FROM meta WHERE key=?", (_OWNER_KEY + run_id,))
        return finished

    def update_env(self, run_id: str, env: dict[str, Any]) -> None:
        with _writing(self, f"the environment of run {run_id} cannot be stored"):
            self._conn.execute("UPDATE runs SET env=? WHERE run_id=?", (json.dumps(env, default=str), run_id))

    def save(self, rec: RunRecord) -> None:
        """Insert a whole record in one transaction: all of it is stored, or none (Ctrl-C,
        a full disk). Raises :class:`StoreError` when its run id is taken."""
        try:
            with self._conn:
                self._insert_run(rec)
                self._conn.executemany("INSERT INTO variants VALUES (?,?,?,?,?,?,?,?,?)",
                                       (self._variant_row(rec.run_id, i, v) for i, v in enumerate(rec.variants)))
                self._conn.executemany("INSERT INTO attachments VALUES (?,?,?,?)",
                                       ((rec.run_id, n, k, d) for n, k, d in rec.attachments))
        except sqlite3.IntegrityError as exc:
            if "runs.run_id" in str(exc):
                raise StoreError(f"run {rec.run_id} is already in the store") from None
            raise StoreError(f"run {rec.run_id} cannot be stored: {exc}") from None
        except sqlite3.OperationalError as exc:
            raise StoreError(disk_full(self.path, exc) or f"run {rec.run_id} cannot be stored in {self.path}: {exc}") \
                from None

    def delete(self, run_id: str) -> str:
        """Delete a stored run (its variants, attachments, tags and note) in one transaction;
        returns its id. A run whose process is still running it is refused."""
        run_id = self.resolve_id(run_id)
        owner = self._owners().get(run_id)
        status = self._conn.execute("SELECT status FROM runs WHERE run_id=?", (run_id,)).fetchone()[0]
        if self._status(run_id, status, self._owners())[0] == "running" and owner is not None:
            raise StoreError(f"run {run_id} is still running (pid {owner.get('pid')} on {owner.get('host')}); "
                             "cancel it first")
        with self._conn:
            self._conn.execute("DELETE FROM runs WHERE run_id=?", (run_id,))  # variants, attachments: cascade
            self._conn.execute("DELETE FROM meta WHERE key=?", (_OWNER_KEY + run_id,))
            if self.schema_version >= 2:
                self._conn.execute("DELETE FROM annotations WHERE run_id=?", (run_id,))
        return run_id

    def annotate(self, run_id: str, add: Iterable[str] = (), remove: Iterable[str] = (),
                 note: str | None = None) -> dict[str, Any]:
        """Add and remove tags and set the note (None: keep it) of a run id, stored or
        committed (the caller resolves the id); returns ``{"tags", "note"}``."""
        try:
            check_run_id(run_id)
        except UntrustedError as exc:
            raise StoreError(str(exc)) from None
        add, remove = [check_tag(t) for t in add], set(remove)
        if note is not None and len(note) > MAX_NOTE_CHARS:
            raise StoreError(f"a note has at most {MAX_NOTE_CHARS} characters; this one has {len(note)}")
        if self.schema_version < 2:
            raise StoreError(f"{self.path} has results schema {self.schema_version} and is read-only here, so it "
                             "cannot hold tags or notes")
        with self._conn:
            old = self.annotations([run_id]).get(run_id, {"tags": [], "note": ""})
            tags = [t for t in dict.fromkeys(old["tags"] + add) if t not in remove]
            text = old["note"] if note is None else " ".join(note.split())
            if tags or text:
                self._conn.execute("INSERT OR REPLACE INTO annotations VALUES (?,?,?)",
                                   (run_id, json.dumps(tags), text))
            else:
                self._conn.execute("DELETE FROM annotations WHERE run_id=?", (run_id,))
        return {"tags": tags, "note": text}

    def annotations(self, run_ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """``run_id -> {"tags": [...], "note": str}`` for the given ids (all when None)."""
        if self.schema_version < 2:
            return {}
        rows = self._conn.execute("SELECT run_id, tags, note FROM annotations").fetchall()
        wanted = None if run_ids is None else set(run_ids)
        out = {}
        for run_id, tags, note in rows:
            if wanted is None or run_id in wanted:
                try:
                    parsed = [t for t in json.loads(tags) if isinstance(t, str)]
                except (TypeError, ValueError):
                    parsed = []
                out[run_id] = {"tags": parsed, "note": note or ""}
        return out

    def import_run(self, rec: RunRecord) -> bool:
        """Store a run from a bundle; False when a run with its id is already here. Refuses
        a run of a study this checkout does not have (nothing could read it)."""
        if rec.study not in registry():
            raise StoreError(f"run {rec.run_id} is of study {rec.study!r}, which this checkout does not have "
                             f"(known: {', '.join(sorted(registry()))}); update the workbench to import it")
        if rec.status == "running":  # it is not running here, and never will be
            rec.status = "interrupted"
            rec.error = rec.error or "exported while it was running; the points it had finished were kept"
        try:
            self.save(rec)
        except StoreError as exc:
            if "already in the store" in str(exc):
                return False
            raise
        return True

    def _reap_dead_runs(self) -> None:
        """Store runs whose process died (SIGKILL, power loss) as ``interrupted``."""
        dead = [(run_id, owner) for run_id, owner in self._owners().items() if _owner_dead(owner)]
        if not dead:
            return
        with self._conn:
            for run_id, owner in dead:
                self._conn.execute("UPDATE runs SET status='interrupted', error=? WHERE run_id=? AND status='running'",
                                   (_dead_text(owner), run_id))
                self._conn.execute("DELETE FROM meta WHERE key=?", (_OWNER_KEY + run_id,))

    def _owners(self) -> dict[str, dict]:
        out = {}
        for key, value in self._conn.execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?",
                                             (len(_OWNER_KEY), _OWNER_KEY)):
            try:
                out[key[len(_OWNER_KEY):]] = json.loads(value)
            except ValueError:
                out[key[len(_OWNER_KEY):]] = {}
        return out

    def _status(self, run_id: str, status: str, owners: dict[str, dict]) -> tuple[str, str | None]:
        """A running run's status as readers should see it: ``interrupted`` once its process is gone."""
        owner = owners.get(run_id)
        if status == "running" and owner is not None and _owner_dead(owner):
            return "interrupted", _dead_text(owner)
        return status, None

    # --- reading ---------------------------------------------------------------------------

    def runs(self, study: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Run headers, newest first (no samples)."""
        q = ("SELECT r.run_id, r.study, r.status, r.created_utc, r.fingerprint, r.origin, r.params, r.env, "
             "(SELECT COUNT(*) FROM variants v WHERE v.run_id=r.run_id), "
             "(SELECT COUNT(*) FROM variants v WHERE v.run_id=r.run_id AND v.correct=0), r.finished_utc FROM runs r")
        args: list[Any] = []
        if study:
            q += " WHERE r.study=?"
            args.append(study)
        q += " ORDER BY r.created_utc DESC, r.rowid DESC"
        if limit:
            q += f" LIMIT {int(limit)}"
        out = []
        try:
            owners = self._owners()
            notes = self.annotations()
            for row in self._conn.execute(q, args):
                env = _json_field(row[7], row[0], "env")
                out.append({"run_id": row[0], "study": row[1], "status": self._status(row[0], row[2], owners)[0],
                            "created_utc": row[3], "fingerprint": row[4], "origin": row[5],
                            "params": _json_field(row[6], row[0], "params"),
                            "machine": machine_label(env), "variants": row[8], "failed_checks": row[9],
                            "finished_utc": row[10],
                            **notes.get(row[0], {"tags": [], "note": ""})})
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} cannot be read ({exc}); it was left untouched") from None
        return out

    def resolve_id(self, prefix: str) -> str:
        """Accept a unique prefix of a run id, or ``latest``."""
        if prefix == "latest":
            row = self._conn.execute("SELECT run_id FROM runs ORDER BY created_utc DESC, rowid DESC LIMIT 1").fetchone()
            if not row:
                raise KeyError("the store has no runs")
            return row[0]
        # substr, not LIKE: '_' in a prefix would match any character.
        rows = [r[0] for r in self._conn.execute("SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ?",
                                                 (len(prefix), prefix))]
        if not rows:
            raise KeyError(f"no run with id {prefix!r} in {self.path}")
        if len(rows) > 1 and prefix not in rows:
            raise KeyError(f"run id prefix {prefix!r} is ambiguous: {', '.join(rows[:5])}")
        return prefix if prefix in rows else rows[0]

    def has(self, run_id: str) -> bool:
        return self._conn.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone() is not None

    def load(self, run_id: str, attachments: bool = True) -> RunRecord:
        run_id = self.resolve_id(run_id)
        try:
            return self._load(run_id, attachments)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"run {run_id} cannot be read from {self.path} ({exc})") from None

    def _load(self, run_id: str, attachments: bool) -> RunRecord:
        row = self._conn.execute(
            "SELECT run_id, study, status, params, env, created_utc, finished_utc, reproduce, outputs, error, "
            "floor_ns, origin FROM runs WHERE run_id=?", (run_id,)).fetchone()
        status, dead = self._status(run_id, row[2], self._owners())
        rec = RunRecord(run_id=row[0], study=row[1], status=status, params=_json_field(row[3], run_id, "params"),
                        env=_json_field(row[4], run_id, "env"), created_utc=row[5], finished_utc=row[6],
                        reproduce=row[7] or "", outputs=_json_field(row[8] or "{}", run_id, "outputs"),
                        error=dead or row[9], floor_ns=row[10], origin=row[11] or "local")
        # a store of schema < 3 opened read-only has no blocks column: its variants have none
        blocks = "blocks" if self.schema_version >= 3 else "NULL"
        for vrow in self._conn.execute(
                f"SELECT variant, params, samples_ns, correct, check_msg, extra, {blocks} FROM variants WHERE run_id=? "
                "ORDER BY seq", (run_id,)):
            rec.variants.append(VariantResult(variant=vrow[0], params=_json_field(vrow[1], run_id, "variant params"),
                                              samples_ns=_json_field(vrow[2], run_id, "samples"), correct=bool(vrow[3]),
                                              check=vrow[4] or "", extra=_json_field(vrow[5] or "{}", run_id, "extra"),
                                              blocks=_blocks(vrow[6], run_id)))
        if attachments:
            rec.attachments = [(n, k, bytes(d)) for n, k, d in self._conn.execute(
                "SELECT name, kind, data FROM attachments WHERE run_id=? ORDER BY name", (run_id,))]
        return rec


@contextlib.contextmanager
def _writing(store: Store, what: str) -> Iterator[None]:
    """``with store._conn:`` (commit, or roll back on any exception), a database error (the
    commit's too) made a :class:`StoreError` that says what could not be stored and why (a
    full disk by name)."""
    try:
        with store._conn:
            yield
    except sqlite3.Error as exc:
        raise StoreError(f"{what}: {disk_full(store.path, exc) or f'{store.path}: {exc}'}") from None


# SQLite's primary result codes (the low byte of sqlite_errorcode)
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN = 10, 11, 13, 14


def _read_only_fs(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (root may write any folder
    of a writable one, but none of these)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def disk_full(path: Path, exc: sqlite3.Error) -> str | None:
    """The message for a database error that a full disk caused, else None. SQLite says
    SQLITE_FULL when a write finds no room, but only "disk I/O error" when it cannot make
    the shared-memory file a WAL store is read through: then the free space decides (such a
    store is not corrupt, and must not be called so)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == _SQLITE_FULL or (code == _SQLITE_IOERR and _no_space(path)):
        return f"the disk holding {path} is full ({exc}); free some space there, nothing else is wrong with the store"
    return None


def _no_space(path: Path) -> bool:
    try:
        st = os.statvfs(path.parent if str(path.parent) else ".")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < (1 << 20)  # under 1 MiB: a WAL index (32 KiB) may not fit


def check_tag(tag: Any) -> str:
    """A tag as given, or :class:`StoreError` saying what a tag may be."""
    if not isinstance(tag, str) or not TAG_RE.fullmatch(tag):
        raise StoreError(f"tag {tag!r:.60} is not a plain word (letters, digits and ._+:=-, starting with a letter "
                         "or digit, at most 40 characters)")
    return tag


def _tables_after(version: str) -> set[str]:
    """The tables a store of schema ``version`` may lack (added by later versions)."""
    if not str(version).isdigit():
        return set()
    return {t for v, tables in _ADDED_IN.items() if v > int(version) for t in tables}


def _blocks(text: Any, run_id: str) -> list[int] | None:
    """A variant's stored block numbers (NULL: a run stored before they were recorded)."""
    if text is None:
        return None
    value = _json_field(text, run_id, "blocks")
    if not isinstance(value, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in value):
        raise StoreError(f"run {run_id} has a corrupt blocks field in the store (not a list of integers); the store "
                         "was left untouched")
    return value


def _json_field(text: Any, run_id: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise StoreError(f"run {run_id} has a corrupt {what} field in the store (not JSON); the store was left "
                         "untouched") from None


# --- the process that runs a run --------------------------------------------------------------

def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _this_process() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "boot": _boot_id(), "pid": pid, "start": start_ticks(pid)}


def _owner_dead(owner: dict) -> bool:
    """True only when the run's process is certainly gone: same host, and its pid is free,
    or taken by a process that started later, or the machine rebooted."""
    if not owner or owner.get("host") != socket.gethostname():
        return False
    if owner.get("boot") and owner["boot"] != _boot_id():
        return True
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    return bool(owner.get("start")) and start_ticks(pid) not in ("", owner["start"])


def _dead_text(owner: dict) -> str:
    return (f"the process that ran it (pid {owner.get('pid')} on {owner.get('host')}) ended without finishing "
            "it (killed?); the points it had finished were kept")


# --- bundles ---------------------------------------------------------------------------------

#: attachments smaller than this stay plain base64 (compressing them saves little and hides them)
ZSTD_MIN_BYTES = 4096
ZSTD_LEVEL = 19  # slow to write, once; as fast to read as any level


def attachment_entry(name: str, kind: str, data: bytes) -> dict[str, Any]:
    """One attachment of a bundle: its bytes as a zstd frame (bundle version 2) where that saves
    a fifth or more, else plain; plain too where zstandard is missing (a bare GPU node)."""
    entry = {"name": name, "kind": kind, "data_b64": base64.b64encode(data).decode()}
    if len(data) >= ZSTD_MIN_BYTES:
        try:
            import zstandard
        except ImportError:
            return entry
        packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
        if len(packed) <= 0.8 * len(data):
            entry.update(encoding="zstd", data_b64=base64.b64encode(packed).decode())
    return entry


def compress_attachments(doc: dict[str, Any]) -> bool:
    """Re-encode a bundle document's plain attachments in place (the same bytes, zstd-framed
    where that pays); True when anything changed. For committed bundles written before version 2."""
    changed = False
    for i, a in enumerate(doc.get("attachments", [])):
        if a.get("encoding"):
            continue
        entry = attachment_entry(a["name"], a["kind"], base64.b64decode(a["data_b64"], validate=True))
        if entry.get("encoding"):
            doc["attachments"][i] = entry
            changed = True
    if changed:
        doc["version"] = max(int(doc.get("version", 1)), 2)
    return changed


def to_bundle(rec: RunRecord) -> dict[str, Any]:
    return {
        "format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "run": rec.to_json(),
        "attachments": [attachment_entry(n, k, d) for n, k, d in rec.attachments],
    }


def _attachment_bytes(a: dict[str, Any], i: int, budget: int) -> bytes:
    """An attachment's bytes, a zstd frame unpacked to at most ``budget`` bytes (a small frame
    can claim gigabytes: the output is read in bounded steps, never sized from its header)."""
    try:
        data = base64.b64decode(a["data_b64"], validate=True)
    except (binascii.Error, ValueError):
        raise StoreError(f"bundle field attachments[{i}].data_b64: not valid base64") from None
    if a.get("encoding") != "zstd":
        return data
    import zstandard  # a dependency of the workbench; only version 2 bundles need it here
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
            out = reader.read(budget + 1)
    except zstandard.ZstdError as exc:
        raise StoreError(f"bundle field attachments[{i}].data_b64: not a valid zstd frame ({exc})") from None
    if len(out) > budget:
        raise StoreError(f"bundle field attachments[{i}]: unpacks to more than the {MAX_BUNDLE_BYTES >> 20} MiB "
                         "a bundle's attachments may hold")
    return out


def write_bundle(rec: RunRecord, path: str | os.PathLike) -> Path:
    """Write the bundle (whole or not at all); raises ``outfile.OutputError``."""
    return outfile.write(path, json.dumps(to_bundle(rec), indent=1, default=str))


def write_run_bundle(rec: RunRecord, directory: str | os.PathLike, stem: str, failed: bool) -> Path:
    """A benchmark run's bundle as ``<stem>-<run id>[-FAILED].bundle.json`` in ``directory``; a failed
    run keeps its finished points and says so in its name."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    name = f"{safe_stem(stem)}-{safe_stem(rec.run_id)}{'-FAILED' if failed else ''}.bundle.json"
    return write_bundle(rec, Path(directory) / name)


def _no_wait_opener(path: str, flags: int) -> int:
    """open() that never waits: a file swapped for a FIFO after the check above is refused by
    read() instead of blocking the reader."""
    return os.open(path, flags | os.O_NONBLOCK)


def read_bundle(path: str | os.PathLike) -> RunRecord:
    """Parse a bundle file (JSON only; never executed or unpickled; at most
    :data:`MAX_BUNDLE_BYTES`)."""
    path = Path(path)
    try:
        st = path.stat()  # before open(): opening a FIFO would wait for a writer
        if not stat.S_ISREG(st.st_mode):
            kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                    or stat.S_ISBLK(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket")
            raise StoreError(f"{path} is {kind}, not a regular file (a result bundle is one)"
                             + (" (a link to it)" if path.is_symlink() else ""))
        if st.st_size > MAX_BUNDLE_BYTES:
            raise StoreError(f"{path} is larger than the {MAX_BUNDLE_BYTES >> 20} MiB a result bundle may have")
        with open(path, "rb", opener=_no_wait_opener) as fh:
            data = fh.read(MAX_BUNDLE_BYTES + 1)
    except OSError as exc:
        why = ("a link that loops or a chain of links too long to follow" if exc.errno == errno.ELOOP else
               f"{exc.strerror} (a link to a missing file)" if exc.errno == errno.ENOENT and path.is_symlink() else
               exc.strerror or str(exc))
        raise StoreError(f"{path} is not a readable result bundle: {why}") from None
    return parse_bundle(data, origin=f"bundle:{safe_stem(path.name, 'bundle')}", what=str(path))


#: SHA-256 digests of bundle bytes that passed the schema check in this process, oldest first.
#: The check (jsonschema over every sample) is most of the cost of reading a bundle, and pages
#: re-read the committed bundles on every rerun: the same bytes get the same verdict, so it is
#: looked up instead; the record itself is still built afresh from the bytes each time.
_CHECKED: dict[bytes, None] = {}
_CHECKED_MAX = 1024
_CHECKED_LOCK = threading.Lock()  # the app reads bundles from several script threads


def parse_bundle(data: bytes, origin: str = "bundle", what: str = "the bundle") -> RunRecord:
    """A bundle's bytes (a file, an upload) as a checked record; raises :class:`StoreError`."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise StoreError(f"{what} is larger than the {MAX_BUNDLE_BYTES >> 20} MiB a result bundle may have")
    try:
        doc = json.loads(data)
    except RecursionError:
        raise StoreError(f"{what} is not a result bundle: JSON nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, and ints over Python's digit limit
        raise StoreError(f"{what} is not a result bundle: not valid JSON ({' '.join(str(exc).split())[:200]})") from None
    digest = hashlib.sha256(data).digest()
    with _CHECKED_LOCK:
        checked = digest in _CHECKED
    rec = from_bundle(doc, origin=origin, checked=checked)
    with _CHECKED_LOCK:
        _CHECKED[digest] = None
        while len(_CHECKED) > _CHECKED_MAX:
            del _CHECKED[next(iter(_CHECKED))]
    return rec


def from_bundle(doc: Any, origin: str = "bundle", checked: bool = False) -> RunRecord:
    """A parsed bundle as a record, after the schema check (see :mod:`workbench.data.schema`; skipped
    when ``checked``: these very bytes passed it before), its text's control and bidi characters
    shown as U+FFFD (:func:`workbench.base.untrusted.visible`)."""
    try:
        if not checked:
            check_bundle(doc)
    except SchemaError as exc:
        raise StoreError(str(exc)) from None
    rec = RunRecord.from_json(visible(doc["run"]))
    if rec.origin == "local":
        rec.origin = origin
    attachments, budget = [], MAX_BUNDLE_BYTES  # unpacked, the attachments together stay under the file's cap
    for i, a in enumerate(doc.get("attachments", [])):
        data = _attachment_bytes(a, i, budget)
        budget -= len(data)
        attachments.append((a["name"], a["kind"], data))
    rec.attachments = attachments
    return rec


def committed(study_id: str, root: Path | None = None) -> tuple[list[RunRecord], list[str]]:
    """Result bundles committed under ``traces/<study_id>/`` (real runs from other machines,
    e.g. GPU nodes), so pages show real data on machines without that hardware, and one
    error line per bundle that does not parse (skipped, never fatal). Each file is read once."""
    folder = (root or REPO_ROOT / "traces") / study_id
    runs: list[RunRecord] = []
    errors: list[str] = []
    for path in sorted(folder.rglob("*.bundle.json")) if folder.is_dir() else []:
        try:
            rec = read_bundle(path)
        except StoreError as exc:
            errors.append(f"{path}: {exc}")
            continue
        rec.origin = f"committed:{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}"
        runs.append(rec)
    return runs, errors


def committed_runs(study_id: str, root: Path | None = None) -> list[RunRecord]:
    """The readable committed bundles of a study (see :func:`committed`)."""
    return committed(study_id, root)[0]


def to_gbench(rec: RunRecord) -> dict[str, Any]:
    """google-benchmark JSON: one iteration row per sample, plus median aggregates. A variant
    whose correctness check failed is one row with ``error_occurred`` (as google-benchmark
    reports a failed benchmark), never timings a consumer could take as valid."""
    env = rec.env
    ctx = {"json_schema_version": 1, "date": rec.created_utc, "host_name": env.get("hostname", ""), "executable": f"workbench:{rec.study}",
           "num_cpus": env.get("cpu_logical"), "mhz_per_cpu": env.get("cpu_max_mhz", 0),
           "library_build_type": "release", "workbench_run_id": rec.run_id}
    rows = []
    for v in rec.variants:
        name = f"{rec.study}/{v.variant}"
        if not v.correct:
            rows.append({"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
                         "error_message": f"correctness check failed: {v.check}"})
            continue
        for i, s in enumerate(v.samples_ns):
            rows.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": len(v.samples_ns),
                         "repetition_index": i, "iterations": 1, "real_time": s, "cpu_time": s, "time_unit": "ns"})
        if v.samples_ns:
            m = float(statistics.median(v.samples_ns))
            rows.append({"name": f"{name}_median", "run_name": name, "run_type": "aggregate",
                         "aggregate_name": "median", "repetitions": len(v.samples_ns), "iterations": len(v.samples_ns),
                         "real_time": m, "cpu_time": m, "time_unit": "ns"})
    return {"context": ctx, "benchmarks": rows}
