"""Results store: one SQLite file of runs, their variants' raw samples and attachments.

Location: ``--store PATH`` on the CLI, else ``$WORKBENCH_STORE``, else
``.workbench/results.sqlite`` in the repository. Variants are written as they finish, so an
interrupted sweep keeps its points (the run is left with status ``interrupted``).

Bundles (one JSON file per run) carry a run between machines, e.g. from a GPU node into a
laptop's store. Format history:
  version 1 (2026-11): {"format", "version", "run": <record>, "attachments": [...]}.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import os
import secrets
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import stats
from .env import REPO_ROOT
from .study import VariantResult

APPLICATION_ID = 0x50455246  # "PERF": marks the SQLite file as ours
SCHEMA_VERSION = 1
BUNDLE_FORMAT = "perf-workbench-bundle"
BUNDLE_VERSION = 1


class StoreError(RuntimeError):
    """A results file that is not ours, corrupt, or from a newer schema. The file is untouched."""


def default_path() -> Path:
    env = os.environ.get("WORKBENCH_STORE")
    return Path(env) if env else REPO_ROOT / ".workbench" / "results.sqlite"


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id(study: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{study}-{secrets.token_hex(3)}"


@dataclass
class RunRecord:
    """A run as stored and exported. ``to_json`` is the CLI's ``--json`` contract."""

    run_id: str
    study: str
    params: dict[str, Any]
    env: dict[str, Any]
    status: str = "running"  # running | complete | interrupted | failed
    created_utc: str = ""
    finished_utc: str | None = None
    reproduce: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    floor_ns: float | None = None
    origin: str = "local"
    variants: list[VariantResult] = field(default_factory=list)
    attachments: list[tuple[str, str, bytes]] = field(default_factory=list)

    def variant_json(self, v: VariantResult) -> dict[str, Any]:
        s = stats.summarize(v.samples_ns)
        return {
            "variant": v.variant, "params": v.params, "samples_ns": v.samples_ns,
            "median_ns": s.median, "ci_ns": [s.ci_lo, s.ci_hi], "iqr_ns": s.iqr,
            "noisy": s.noisy, "correct": v.correct, "check": v.check, "extra": v.extra,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "study": self.study, "params": self.params, "env": self.env,
            "status": self.status, "created_utc": self.created_utc, "finished_utc": self.finished_utc,
            "reproduce": self.reproduce, "floor_ns": self.floor_ns, "error": self.error,
            "origin": self.origin,
            "variants": [self.variant_json(v) for v in self.variants],
            "outputs": self.outputs,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "RunRecord":
        try:
            variants = [
                VariantResult(variant=v["variant"], params=v.get("params", {}),
                              samples_ns=[float(x) for x in v["samples_ns"]], correct=bool(v["correct"]),
                              check=v.get("check", ""), extra=v.get("extra", {}))
                for v in doc["variants"]
            ]
            return cls(
                run_id=doc["run_id"], study=doc["study"], params=doc["params"], env=doc["env"],
                status=doc.get("status", "complete"), created_utc=doc.get("created_utc", ""),
                finished_utc=doc.get("finished_utc"), reproduce=doc.get("reproduce", ""),
                outputs=doc.get("outputs", {}), error=doc.get("error"), floor_ns=doc.get("floor_ns"),
                origin=doc.get("origin", "local"), variants=variants,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"run record is missing or has a malformed field: {exc}") from None

    def valid_variants(self) -> list[VariantResult]:
        return [v for v in self.variants if v.correct and v.samples_ns]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, study TEXT NOT NULL, status TEXT NOT NULL, params TEXT NOT NULL,
    env TEXT NOT NULL, fingerprint TEXT, created_utc TEXT NOT NULL, finished_utc TEXT,
    reproduce TEXT, outputs TEXT, error TEXT, floor_ns REAL, origin TEXT);
CREATE TABLE IF NOT EXISTS variants (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    variant TEXT NOT NULL, params TEXT NOT NULL, samples_ns TEXT NOT NULL, correct INTEGER NOT NULL,
    check_msg TEXT, extra TEXT, PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS attachments (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, name TEXT NOT NULL,
    kind TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, name));
"""


class Store:
    """The SQLite results store. Opening a file that is not ours raises :class:`StoreError`."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else default_path()
        exists = self.path.exists() and self.path.stat().st_size > 0
        if exists:
            self._check_foreign()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
        self._conn.execute("PRAGMA foreign_keys = ON")
        if not exists:
            with self._conn:
                self._conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self._conn.executescript(_SCHEMA)
                self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _check_foreign(self) -> None:
        """Read-only checks, so a foreign or corrupt file is never modified."""
        with open(self.path, "rb") as fh:
            head = fh.read(100)
        if not head.startswith(b"SQLite format 3\x00"):
            raise StoreError(f"{self.path} is not a workbench results file (not SQLite); it was left untouched")
        try:
            ro = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                app_id = ro.execute("PRAGMA application_id").fetchone()[0]
                if app_id != APPLICATION_ID:
                    raise StoreError(f"{self.path} is an SQLite file of another application; it was left untouched")
                version = ro.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            finally:
                ro.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is corrupt or not a workbench results file ({exc}); it was left untouched") from None
        if version is None:
            raise StoreError(f"{self.path} is a damaged workbench results file (no schema version); it was left untouched")
        if int(version[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has results schema {version[0]}, newer than this workbench's "
                             f"{SCHEMA_VERSION}; update the workbench")

    def close(self) -> None:
        self._conn.close()

    # --- writing ---------------------------------------------------------------------------

    def begin(self, rec: RunRecord) -> None:
        with self._conn:
            self._conn.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (rec.run_id, rec.study, rec.status, json.dumps(rec.params), json.dumps(rec.env, default=str),
                 rec.env.get("fingerprint"), rec.created_utc or now_utc(), rec.finished_utc, rec.reproduce,
                 json.dumps(rec.outputs, default=str), rec.error, rec.floor_ns, rec.origin),
            )

    def add_variant(self, run_id: str, v: VariantResult) -> None:
        with self._conn:
            seq = self._conn.execute("SELECT COUNT(*) FROM variants WHERE run_id=?", (run_id,)).fetchone()[0]
            self._conn.execute(
                "INSERT INTO variants VALUES (?,?,?,?,?,?,?,?)",
                (run_id, seq, v.variant, json.dumps(v.params), json.dumps(v.samples_ns), int(v.correct),
                 v.check, json.dumps(v.extra, default=str)),
            )

    def add_attachment(self, run_id: str, name: str, kind: str, data: bytes) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO attachments VALUES (?,?,?,?)", (run_id, name, kind, data))

    def finish(self, run_id: str, status: str, outputs: dict | None = None, error: str | None = None) -> None:
        with self._conn:
            self._conn.execute(
                "UPDATE runs SET status=?, finished_utc=?, outputs=COALESCE(?, outputs), error=? WHERE run_id=?",
                (status, now_utc(), json.dumps(outputs, default=str) if outputs is not None else None, error, run_id),
            )

    def update_env(self, run_id: str, env: dict[str, Any]) -> None:
        with self._conn:
            self._conn.execute("UPDATE runs SET env=? WHERE run_id=?", (json.dumps(env, default=str), run_id))

    def save(self, rec: RunRecord) -> None:
        """Insert a whole record (used by import)."""
        self.begin(rec)
        for v in rec.variants:
            self.add_variant(rec.run_id, v)
        for name, kind, data in rec.attachments:
            self.add_attachment(rec.run_id, name, kind, data)

    # --- reading ---------------------------------------------------------------------------

    def runs(self, study: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Run headers, newest first (no samples)."""
        q = ("SELECT r.run_id, r.study, r.status, r.created_utc, r.fingerprint, r.origin, r.params, r.env, "
             "(SELECT COUNT(*) FROM variants v WHERE v.run_id=r.run_id), "
             "(SELECT COUNT(*) FROM variants v WHERE v.run_id=r.run_id AND v.correct=0) FROM runs r")
        args: list[Any] = []
        if study:
            q += " WHERE r.study=?"
            args.append(study)
        q += " ORDER BY r.created_utc DESC, r.rowid DESC"
        if limit:
            q += f" LIMIT {int(limit)}"
        out = []
        for row in self._conn.execute(q, args):
            env = json.loads(row[7])
            out.append({"run_id": row[0], "study": row[1], "status": row[2], "created_utc": row[3],
                        "fingerprint": row[4], "origin": row[5], "params": json.loads(row[6]),
                        "machine": _machine_label(env), "variants": row[8], "failed_checks": row[9]})
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

    def load(self, run_id: str, attachments: bool = True) -> RunRecord:
        run_id = self.resolve_id(run_id)
        row = self._conn.execute(
            "SELECT run_id, study, status, params, env, created_utc, finished_utc, reproduce, outputs, error, "
            "floor_ns, origin FROM runs WHERE run_id=?", (run_id,)).fetchone()
        rec = RunRecord(run_id=row[0], study=row[1], status=row[2], params=json.loads(row[3]),
                        env=json.loads(row[4]), created_utc=row[5], finished_utc=row[6], reproduce=row[7] or "",
                        outputs=json.loads(row[8] or "{}"), error=row[9], floor_ns=row[10], origin=row[11] or "local")
        for vrow in self._conn.execute(
                "SELECT variant, params, samples_ns, correct, check_msg, extra FROM variants WHERE run_id=? ORDER BY seq",
                (run_id,)):
            rec.variants.append(VariantResult(variant=vrow[0], params=json.loads(vrow[1]),
                                              samples_ns=json.loads(vrow[2]), correct=bool(vrow[3]),
                                              check=vrow[4] or "", extra=json.loads(vrow[5] or "{}")))
        if attachments:
            rec.attachments = [(n, k, bytes(d)) for n, k, d in self._conn.execute(
                "SELECT name, kind, data FROM attachments WHERE run_id=? ORDER BY name", (run_id,))]
        return rec


def _machine_label(env: dict[str, Any]) -> str:
    if env.get("gpu_names"):
        return f"{env.get('gpu_count', len(env['gpu_names']))}x {env['gpu_names'][0]}"
    return env.get("cpu_model", "unknown")


# --- bundles ---------------------------------------------------------------------------------

def to_bundle(rec: RunRecord) -> dict[str, Any]:
    return {
        "format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "run": rec.to_json(),
        "attachments": [{"name": n, "kind": k, "data_b64": base64.b64encode(d).decode()} for n, k, d in rec.attachments],
    }


def write_bundle(rec: RunRecord, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_bundle(rec), indent=1, default=str))
    return path


def write_run_bundle(rec: RunRecord, directory: str | os.PathLike, stem: str, failed: bool) -> Path:
    """A benchmark run's bundle as ``<stem>-<run id>[-FAILED].bundle.json`` in ``directory``; a failed
    run keeps its finished points and says so in its name."""
    return write_bundle(rec, Path(directory) / f"{stem}-{rec.run_id}{'-FAILED' if failed else ''}.bundle.json")


def read_bundle(path: str | os.PathLike) -> RunRecord:
    """Parse a bundle file (JSON only; never executed or unpickled)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path} is not a readable result bundle: {exc}") from None
    return from_bundle(doc, origin=f"bundle:{path.name}")


def from_bundle(doc: Any, origin: str = "bundle") -> RunRecord:
    if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT:
        raise StoreError("not a perf-workbench result bundle (missing 'format': 'perf-workbench-bundle')")
    if int(doc.get("version", 0)) > BUNDLE_VERSION:
        raise StoreError(f"bundle version {doc.get('version')} is newer than this workbench's {BUNDLE_VERSION}")
    rec = RunRecord.from_json(doc.get("run", {}))
    if rec.origin == "local":
        rec.origin = origin
    try:
        rec.attachments = [(a["name"], a["kind"], base64.b64decode(a["data_b64"])) for a in doc.get("attachments", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"bundle attachment is malformed: {exc}") from None
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
    ctx = {"date": rec.created_utc, "host_name": env.get("hostname", ""), "executable": f"workbench:{rec.study}",
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
            m = float(np.median(v.samples_ns))
            rows.append({"name": f"{name}_median", "run_name": name, "run_type": "aggregate",
                         "aggregate_name": "median", "repetitions": len(v.samples_ns), "iterations": len(v.samples_ns),
                         "real_time": m, "cpu_time": m, "time_unit": "ns"})
    return {"context": ctx, "benchmarks": rows}
