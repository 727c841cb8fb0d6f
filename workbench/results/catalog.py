"""Every run a person can address by id, told apart: the results store's runs and the result
bundles committed under ``traces/<study>/``.

The CLI (``runs --all``, ``report``, ``compare``, ``export``, ``tag``, ``delete``) and the app's
pages list and load runs through :class:`Catalog`, so a committed run has the same id
everywhere: ``python -m workbench report 20261121-080417-mc2-split-568a86`` works on a machine
whose store never saw it. Each run gets a :class:`Header` whose :meth:`Header.title` tells it
apart from the study's other runs: a short label, its origin (``local``, ``imported``,
``committed``; the study's headline run says so), its machine and its time.

A label says what differs, briefly (:func:`short_labels`): a committed run's bundle name
(``bench-ws2``, ``kernel-h100``: the committer named what the run is), a run made with a
preset's exact values ``<preset> preset``, and then the fewest parameters that tell apart the
runs that would otherwise look alike. A study may declare ``LABEL_PARAMS`` (parameter names) to
fix the parameters its labels show.

:func:`default_run` is the run a study page opens on: this machine's newest complete run with
every check passed, of a configuration that can answer the seed's questions
(:func:`answers_seed`), else the study's committed headline run (:func:`headline_run`); a smoke
or failed-check run only when there is nothing else.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import stat
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any, Callable

from . import store as wbstore
from ..base.env import REPO_ROOT, STATE_DIR
from ..data.record import RunRecord, machine_label
from ..base.names import did_you_mean
from ..seam.registry import registry, study_ids
from .store import Store, StoreError, read_bundle
from ..base.untrusted import RESERVED_RUN_IDS, safe_stem

ORIGINS = ("local", "imported", "committed")
#: longest parameter label; a label is for telling runs apart, the full parameters are on the page
LABEL_CHARS = 80
#: most parameters a label names after its name (more would be a table, not a label)
LABEL_MAX_PARAMS = 3


def origin_kind(origin: str) -> str:
    """``local`` (run into this store), ``imported`` (from a bundle) or ``committed`` (a bundle
    under ``traces/``), from a record's ``origin`` field."""
    if origin.startswith("committed"):
        return "committed"
    if origin.startswith("bundle"):
        return "imported"
    return "local"


@dataclass
class Header:
    """What tells one run apart from another (no samples)."""

    run_id: str
    study: str
    status: str
    created_utc: str
    machine: str
    origin: str  # one of ORIGINS
    source: str  # the store, the bundle it was imported from, or the committed file
    params: dict[str, Any]
    variants: int
    failed_checks: int
    tags: list[str] = field(default_factory=list)
    note: str = ""
    label: str = ""
    fingerprint: str = ""  # the machine's (workbench.base.env), for telling same-machine pairs apart
    #: the study's committed headline run (:func:`headline_run`): a page without a run of its
    #: own opens on it, and its picker says so
    headline: bool = False
    finished_utc: str = ""

    def when(self) -> str:
        """``2026-11-21 08:04 UTC`` from the stored ISO time."""
        t = self.created_utc or ""
        return f"{t[:10]} {t[11:16]} UTC" if len(t) >= 16 else (t or "time unknown")

    def title(self) -> str:
        """One line that tells this run apart from its study's others (plain text); two runs
        may still share it (same parameters, machine and minute): :func:`titles`."""
        parts = [self.label or "defaults", "committed headline" if self.headline else self.origin, self.machine,
                 self.when()]
        if self.status != "complete":
            parts.append(self.status)
        if self.failed_checks:
            parts.append(f"{self.failed_checks} failed check{'' if self.failed_checks == 1 else 's'}")
        if self.tags:
            parts.append("#" + " #".join(self.tags))
        return " · ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _value_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        items = [_value_text(v) for v in value]
        # a long sweep list would crowd out the other parameters of the label
        return ",".join(items) if len(items) <= 3 else f"{items[0]},{items[1]},...(+{len(items) - 2})"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def titles(headers: list[Header], prefix_study: bool = False) -> dict[str, str]:
    """Run id -> a title no other of ``headers`` has: :meth:`Header.title` (after the study's
    id with ``prefix_study``), and the run id's suffix where two titles are the same. A select
    box keeps its choice by the text it shows, so two runs with one title flipped to the first
    on the next rerun."""
    out = {h.run_id: (f"{h.study}: " if prefix_study else "") + h.title() for h in headers}
    seen = Counter(out.values())
    return {i: t if seen[t] == 1 else f"{t} · {i.rsplit('-', 1)[-1]}" for i, t in out.items()}


def label_params(study: ModuleType | None, params: list[dict[str, Any]]) -> list[str]:
    """The parameters a study's run labels show: its ``LABEL_PARAMS``, else those whose values
    differ between the given runs' parameters, in the study's declared order."""
    declared = getattr(study, "LABEL_PARAMS", None) if study is not None else None
    if declared:
        return list(declared)
    names = list(study.SPACE.names) if study is not None else sorted({k for p in params for k in p})
    return [n for n in names if len({json.dumps(p.get(n), sort_keys=True, default=str) for p in params}) > 1]


def param_label(params: dict[str, Any], names: list[str], max_chars: int = LABEL_CHARS) -> str:
    """``world_size=4 providers=default,triton`` for the named parameters, cut at ``max_chars``."""
    text = " ".join(f"{n}={_value_text(params[n])}" for n in names if n in params)
    return text if len(text) <= max_chars else text[: max_chars - 3].rstrip() + "..."


def upgraded(study_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """A run's parameters with renamed ones under their new names (``ParamSpace.renamed``), so
    an old run compares and labels like a new one."""
    study = registry().get(study_id)
    return study.SPACE.upgrade(params) if study is not None and isinstance(params, dict) else params


def on_gpu(study_id: str, params: Any) -> bool:
    """Whether a run of ``study_id`` with ``params`` used GPUs: the study's ``runs_on_gpu(params)``
    where it declares one (cpu-reduction: never; mc2-split: not with gloo), else True (its
    machine is named by its GPUs where it has any)."""
    hook = getattr(registry().get(study_id), "runs_on_gpu", None)
    if hook is None or not isinstance(params, dict):
        return True
    try:
        return bool(hook(params))
    except (TypeError, ValueError, KeyError):  # a bundle's parameters of another shape
        return True


def header_of(rec: RunRecord, source: str = "") -> Header:
    return Header(run_id=rec.run_id, study=rec.study, status=rec.status, created_utc=rec.created_utc,
                  machine=machine_label(rec.env, on_gpu(rec.study, rec.params)), origin=origin_kind(rec.origin),
                  source=source or rec.origin,
                  params=rec.params, variants=len(rec.variants), failed_checks=sum(not v.correct for v in rec.variants),
                  fingerprint=str(rec.env.get("fingerprint") or ""), finished_utc=rec.finished_utc or "")


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def committed_name(h: Header) -> str:
    """A committed bundle's name without its run id and machine, which the title says anyway:
    ``bench-ws2`` from ``traces/ag-gemm/bench-ws2-20261124-070656-ag-gemm-a1c4d2.bundle.json``."""
    if h.origin != "committed":
        return ""
    stem = PurePath(h.source).name.removesuffix(".bundle.json").replace(h.run_id, "")
    stem = re.split(r"[-_](?:host-of-)?(?:NVIDIA|AMD|Intel)[-_ ]", stem)[0]
    return stem.strip("-_ .")


def _preset_name(params: dict[str, Any], presets: dict[str, dict]) -> str:
    """``smoke preset`` when ``params`` are exactly a preset's values."""
    return next((f"{name} preset" for name, values in presets.items() if name and _same(values, params)), "")


def _resolved_presets(study: ModuleType | None) -> dict[str, dict]:
    """Each preset's full values, and the defaults under ``""``."""
    out = {}
    for name in ([""] + list(study.SPACE.presets) if study is not None else []):
        try:
            out[name] = study.SPACE.resolve({}, preset=name or None)
        except ValueError:  # a preset that does not resolve on this machine names no run
            continue
    return out


def _telling_apart(headers: list[Header], names: list[str]) -> list[str]:
    """The fewest of ``names`` (at most :data:`LABEL_MAX_PARAMS`, greedily) whose values tell
    ``headers`` apart, in declared order."""
    def distinct(chosen: list[str]) -> int:
        return len({json.dumps([h.params.get(n) for n in chosen], sort_keys=True, default=str) for h in headers})

    chosen: list[str] = []
    while len(chosen) < LABEL_MAX_PARAMS and distinct(chosen) < len(headers):
        best = max((n for n in names if n not in chosen), key=lambda n: distinct(chosen + [n]), default=None)
        if best is None or distinct(chosen + [best]) == distinct(chosen):
            break
        chosen.append(best)
    return [n for n in names if n in chosen]


def short_labels(study: ModuleType | None, headers: list[Header]) -> dict[str, str]:
    """Run id -> a short label that says what the run is and what differs: its committed
    bundle's name or the preset it ran, then the fewest parameters that tell apart the runs
    that share that name (a study's ``LABEL_PARAMS`` when it declares them)."""
    names = label_params(study, [h.params for h in headers])
    presets = _resolved_presets(study)
    base = {h.run_id: committed_name(h) or _preset_name(h.params, presets) for h in headers}
    groups: dict[str, list[Header]] = {}
    for h in headers:
        groups.setdefault(base[h.run_id], []).append(h)
    declared = getattr(study, "LABEL_PARAMS", None) if study is not None else None
    defaults = presets.get("", {})
    out = {}
    for name, group in groups.items():
        shown = list(declared) if declared else _telling_apart(group, names) if len(group) > 1 else []
        for h in group:
            # a run alone under its name: the parameters it set away from the defaults
            mine = shown if shown or name or declared else \
                [n for n in names if n not in defaults or not _same(h.params.get(n), defaults[n])][:LABEL_MAX_PARAMS]
            out[h.run_id] = " ".join(filter(None, [name, param_label(h.params, mine)]))
    return out


def answers_seed(study: ModuleType | None, params: dict[str, Any]) -> bool:
    """Whether a run with ``params`` can answer the seed's questions: the study's
    ``answers_seed(params)`` when it declares one, else not a smoke run (a run with the smoke
    preset's values of every parameter that preset sets)."""
    if study is None:
        return True
    own = getattr(study, "answers_seed", None)
    if own is not None:
        try:
            return bool(own(params))
        except (TypeError, ValueError):  # a bundle's parameters of another shape: no reason to doubt them
            return True
    smoke = study.SPACE.presets.get("smoke")
    if not smoke:
        return True
    try:
        values = study.SPACE.resolve({}, preset="smoke")
    except ValueError:
        return True
    return not all(_same(params.get(k), values[k]) for k in smoke)


def _checked(h: Header) -> bool:
    """Complete, with every check passed (a plan-only run times nothing and has no variant)."""
    return h.status == "complete" and not h.failed_checks


def headline_run(headers: list[Header], study: ModuleType | None = None) -> Header | None:
    """The committed run a page without a run of its own opens on: the one the study names
    (``HEADLINE_RUN``, a committed bundle's name as :func:`committed_name` gives it), else the
    complete one with every check passed, of a configuration that answers the seed, with the
    most variants (newest among equals); with none such, the one with the most checked variants."""
    committed = [h for h in headers if h.origin == "committed"]
    named = getattr(study, "HEADLINE_RUN", None) if study is not None else None
    pick = [h for h in committed if named and committed_name(h) == named]
    if pick:
        return max(pick, key=lambda h: h.created_utc or "")
    good = [h for h in committed if _checked(h) and answers_seed(study, h.params)]
    pool = good or committed
    return max(pool, key=lambda h: (h.variants - h.failed_checks, h.created_utc or ""), default=None)


def default_run(headers: list[Header], study: ModuleType | None = None, fingerprint: str | None = None) -> Header | None:
    """The run a study page opens on: the newest of this machine's own or imported runs
    (``fingerprint``; None: any machine's) that is complete, passed every check and can
    answer the seed (:func:`answers_seed`); else the committed headline (:func:`headline_run`);
    else the newest run of all. A smoke run or one with a failed check is never the default
    while another exists."""
    if not headers:
        return None
    own = [h for h in headers if h.origin != "committed" and (fingerprint is None or h.fingerprint == fingerprint)]
    mine = [h for h in own if _checked(h) and answers_seed(study, h.params)]
    if mine:
        return max(mine, key=lambda h: h.created_utc or "")
    head = headline_run(headers, study)
    if head is not None and _checked(head):
        return head
    checked = [h for h in headers if _checked(h)]
    return max(checked or headers, key=lambda h: h.created_utc or "")


#: this machine's newest complete runs of a study that an estimate of a run's duration reads
ESTIMATE_RUNS = 5


def _elapsed_s(start: str, end: str) -> float | None:
    """Seconds between two stored UTC times (``2026-11-24T04:15:15Z``), or None."""
    try:
        return (dt.datetime.fromisoformat(end.replace("Z", "+00:00"))
                - dt.datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    except (ValueError, AttributeError):
        return None


def duration_text(seconds: float) -> str:
    """``40 s``, ``3 min``, ``1.5 h``: a rough duration as people say it."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_s(study: ModuleType, params: dict[str, Any], headers: list[Header],
               fingerprint: str) -> tuple[float | None, str]:
    """(seconds or None, one line): how long a run of ``study`` with ``params`` will take here,
    roughly: the pace (seconds per point of the declared sweep, :meth:`ParamSpace.points`) of
    this machine's newest complete runs of the study, times this run's points. None with no
    such run: the line then says the sweep's size only."""
    n = study.SPACE.points(params)
    rates = []
    for h in [h for h in headers if h.study == study.ID and h.origin != "committed" and h.status == "complete"
              and h.fingerprint == fingerprint and h.finished_utc][:ESTIMATE_RUNS]:
        took = _elapsed_s(h.created_utc, h.finished_utc)
        if took is not None and took > 0:
            rates.append(took / max(study.SPACE.points(h.params), 1))
    if not rates:
        return None, "none yet: no earlier run of this study on this machine to time it by"
    seconds = sorted(rates)[len(rates) // 2] * n
    return seconds, (f"about {duration_text(seconds)} of measuring, plus a few seconds to start (at the pace "
                     f"of the last {len(rates)} run{'' if len(rates) == 1 else 's'} of this study here, scaled "
                     "to this sweep)")


# --- the committed bundles, known without reading them ----------------------------------------------

#: where :class:`CommittedIndex` keeps what it learnt about the committed bundles
INDEX_PATH = STATE_DIR / "cache" / "committed-bundles.json"
INDEX_VERSION = 1


def _validator_digest() -> str:
    """A digest of the code that decides whether a bundle is valid (the schema and the reader):
    a bundle checked under other code is checked again."""
    here = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(str(INDEX_VERSION).encode())
    for name in ("data/schema.py", "results/store.py", "base/untrusted.py"):
        try:
            h.update((here / name).read_bytes())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()


class CommittedIndex:
    """What each bundle committed under ``traces/<study>/`` is (run id, study, the fields of its
    configuration) and the SHA-256 of its bytes once they passed the schema check, kept in
    :data:`INDEX_PATH` by path, size and modification time.

    Resolving a run id, or finding a run's A/A candidates, then reads only the bundles it needs
    instead of parsing and checking all of them (60 MB, about 10 s on a 2-core machine: the
    schema check is most of it); a bundle whose bytes hash to the digest that passed is built
    without the check again (the same bytes get the same verdict, as the store's in-process
    cache does). An entry counts only while the file's size and time match and the checking
    code is the same (:func:`_validator_digest`); the record itself is always built from the
    file's bytes. The index is a cache: it is rebuilt when missing, unreadable or stale, and a
    read-only checkout just goes without it."""

    def __init__(self, root: Path | None = None, path: Path | None = None):
        self.root = root or REPO_ROOT / "traces"
        self.path = path or INDEX_PATH
        self._entries: dict[str, dict[str, Any]] | None = None
        self._validator = ""
        self._dirty = False

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            self._validator = _validator_digest()
            try:
                doc = json.loads(self.path.read_text(encoding="utf-8"))
                ok = isinstance(doc, dict) and doc.get("validator") == self._validator \
                    and isinstance(doc.get("entries"), dict)
                self._entries = {k: v for k, v in doc["entries"].items() if isinstance(v, dict)} if ok else {}
            except (OSError, ValueError):
                self._entries = {}
        return self._entries

    def files(self, study: str) -> list[Path]:
        folder = self.root / study
        return sorted(folder.rglob("*.bundle.json")) if folder.is_dir() else []

    def _key(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def entry(self, path: Path) -> dict[str, Any] | None:
        """The index's entry for ``path`` while it is current (same size and time), else None."""
        try:
            st = path.stat()
        except OSError:
            return None
        e = self._load().get(self._key(path))
        if e and e.get("size") == st.st_size and e.get("mtime_ns") == st.st_mtime_ns:
            return e
        return None

    def read(self, path: Path) -> RunRecord:
        """The bundle at ``path`` as :func:`workbench.results.store.read_bundle` gives it, its schema
        check skipped when these bytes passed it before; the index learns it. Raises
        :class:`StoreError`."""
        e = self.entry(path)
        try:
            st = path.stat()
            if stat.S_ISREG(st.st_mode) and e and st.st_size <= wbstore.MAX_BUNDLE_BYTES:
                data = path.read_bytes()
                if hashlib.sha256(data).hexdigest() == e.get("sha256"):
                    return wbstore.from_bundle(json.loads(data), origin=f"bundle:{safe_stem(path.name, 'bundle')}",
                                               checked=True)
        except (OSError, ValueError):
            pass  # read it the checked way, which says what is wrong
        rec = read_bundle(path)
        try:
            st = path.stat()
            data = path.read_bytes()
        except OSError:
            return rec
        env = rec.env if isinstance(rec.env, dict) else {}
        self._load()[self._key(path)] = {
            "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": hashlib.sha256(data).hexdigest(),
            "run_id": rec.run_id, "study": rec.study, "params": rec.params, "fingerprint": env.get("fingerprint"),
            "workbench_commit": env.get("workbench_commit"), "packages": env.get("packages")}
        self._dirty = True
        return rec

    def save(self) -> None:
        """Write what was learnt (atomically; quietly not where the state folder is read-only)."""
        if not self._dirty or self._entries is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False, suffix=".tmp",
                                             encoding="utf-8") as fh:
                json.dump({"validator": self._validator, "entries": self._entries}, fh, default=str)
            os.replace(fh.name, self.path)
            self._dirty = False
        except OSError:
            try:
                os.unlink(fh.name)  # noqa: F821 - only where the temporary file was made
            except (OSError, NameError, UnboundLocalError):
                pass

    def run_ids(self, study: str) -> dict[str, Path]:
        """Run id -> bundle file of a study's committed bundles (each read once, then known)."""
        out = {}
        for path in self.files(study):
            e = self.entry(path)
            if e is None:
                try:
                    self.read(path)
                except StoreError:
                    continue
                e = self.entry(path)
            if e is not None and isinstance(e.get("run_id"), str):
                out[e["run_id"]] = path
        self.save()
        return out

    def committed(self, study: str) -> tuple[list[RunRecord], list[str]]:
        """:func:`workbench.results.store.committed` through the index (checks skipped for known bytes)."""
        runs, errors = [], []
        for path in self.files(study):
            try:
                rec = self.read(path)
            except StoreError as exc:
                errors.append(f"{path}: {exc}")
                continue
            rec.origin = f"committed:{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}"
            runs.append(rec)
        self.save()
        return runs, errors

    def configurations(self, study: str) -> list[tuple[Path, tuple]]:
        """(file, the fields :func:`workbench.reading.comparison.config_key` reads) of a study's bundles."""
        self.run_ids(study)
        out = []
        for path in self.files(study):
            e = self.entry(path)
            if e is not None:
                out.append((path, (e.get("study"), e.get("params"), e.get("fingerprint"), e.get("workbench_commit"),
                                   e.get("packages"))))
        return out


class Catalog:
    """The store's runs (``store`` may be None: no store, or none wanted) and the committed
    bundles (read by ``committed``, by default :func:`workbench.results.store.committed`; the app
    passes its cached reader). Headers are newest first."""

    def __init__(self, store: Store | None,
                 committed: Callable[[str], tuple[list[RunRecord], list[str]]] | None = None,
                 index: CommittedIndex | None = None):
        self.store = store
        self.index = index or CommittedIndex()
        self._read_committed = committed or self.index.committed
        self._committed: dict[str, tuple[list[RunRecord], list[str]]] = {}
        self._one: dict[Path, RunRecord] = {}

    @classmethod
    def open(cls, store_path: str | os.PathLike | None = None) -> tuple[Catalog, str]:
        """The runs a command can address: the store's (when it exists; ``store_path`` or the
        default store) and the committed bundles'; with the reason the store is missing ('')
        for a run that is not found. A store file that exists but is not usable raises
        :class:`StoreError`."""
        path = Path(store_path) if store_path else wbstore.default_path()
        try:
            return cls(Store(path, create=False)), ""
        except StoreError as exc:
            if path.exists():
                raise
            return cls(None), str(exc)

    def committed_ids(self) -> dict[str, Path]:
        """Every committed run id -> its bundle file, without reading more than new files."""
        return {i: p for sid in study_ids() for i, p in self.index.run_ids(sid).items()}

    def _committed_one(self, path: Path) -> RunRecord:
        """One committed bundle, read once (its record's origin as :meth:`committed` gives it)."""
        if path not in self._one:
            rec = self.index.read(path)
            rec.origin = f"committed:{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}"
            self._one[path] = rec
            self.index.save()
        return self._one[path]

    def committed_like(self, study: str, matches: Callable[[tuple], bool]) -> list[RunRecord]:
        """The committed runs of ``study`` whose configuration fields (study, params,
        fingerprint, workbench commit, packages) ``matches`` accepts: A/A candidates, read
        without reading the study's other bundles."""
        if study in self._committed:
            return [r for r in self._committed[study][0] if matches(_config_fields(r))]
        return [self._committed_one(p) for p, fields in self.index.configurations(study) if matches(fields)]

    def committed(self, study: str) -> list[RunRecord]:
        if study not in self._committed:
            self._committed[study] = self._read_committed(study)
        return self._committed[study][0]

    def committed_errors(self, study: str) -> list[str]:
        """One line per committed bundle of ``study`` that could not be read."""
        self.committed(study)
        return self._committed[study][1]

    def _studies(self, study: str | None) -> list[str]:
        return [study] if study else list(registry())

    def headers(self, study: str | None = None, committed: bool = True, limit: int | None = None) -> list[Header]:
        """Run headers (store, then committed unless ``committed=False``), newest first, each
        with its label; a committed run that was also imported is listed once (the store's)."""
        out: list[Header] = []
        if self.store is not None:
            for r in self.store.runs(study=study, limit=limit):
                out.append(Header(run_id=r["run_id"], study=r["study"], status=r["status"],
                                  created_utc=r["created_utc"], machine=r["machine"], origin=origin_kind(r["origin"] or ""),
                                  source=r["origin"] or "local", params=r["params"], variants=r["variants"],
                                  failed_checks=r["failed_checks"], tags=r["tags"], note=r["note"],
                                  fingerprint=r["fingerprint"] or "", finished_utc=r["finished_utc"] or ""))
        seen = {h.run_id for h in out}
        if committed:
            notes = self.store.annotations() if self.store is not None else {}
            for sid in self._studies(study):
                for rec in self.committed(sid):
                    if rec.run_id not in seen:
                        seen.add(rec.run_id)
                        h = header_of(rec, rec.origin.removeprefix("committed:"))
                        h.tags, h.note = notes.get(rec.run_id, {}).get("tags", []), notes.get(rec.run_id, {}).get("note", "")
                        out.append(h)
        out.sort(key=lambda h: h.created_utc or "", reverse=True)
        by_study: dict[str, list[Header]] = {}
        for h in out:
            by_study.setdefault(h.study, []).append(h)
        reg = registry()
        for sid, hs in by_study.items():
            for h in hs:
                h.params = upgraded(sid, h.params)
            labels = short_labels(reg.get(sid), hs)
            head = headline_run(hs, reg.get(sid))
            for h in hs:
                h.label = labels[h.run_id]
                h.headline = head is not None and h.run_id == head.run_id
        return out

    def resolve(self, ref: str) -> tuple[str, RunRecord | None]:
        """(run id, the committed record or None for a stored run) for an id, a unique prefix
        of one (stored and committed ids together) or ``latest`` (the store's newest run)."""
        if ref == "latest":
            if self.store is None:
                raise KeyError("'latest' names the newest run of the results store, and there is none here")
            return self.store.resolve_id("latest"), None
        stored: list[str] = []
        if self.store is not None:
            try:
                stored = [self.store.resolve_id(ref)]
            except KeyError as exc:
                if "ambiguous" in str(exc):
                    raise
        ids = self.committed_ids()
        committed = {i: p for i, p in ids.items() if i.startswith(ref)}
        if ref in stored:
            return ref, None
        if ref in committed:
            return ref, self._committed_one(committed[ref])
        matches = sorted(set(stored) | set(committed))
        if not matches:
            where = "the results store or the committed bundles" if self.store is not None else "the committed bundles"
            known = list(ids) + ([r["run_id"] for r in self.store.runs()] if self.store is not None else [])
            raise KeyError(f"no run with id {ref!r} in {where}" + did_you_mean(ref, known))
        if len(matches) > 1:
            raise KeyError(f"run id prefix {ref!r} is ambiguous: {', '.join(matches[:5])}")
        run_id = matches[0]
        return run_id, None if run_id in stored else self._committed_one(committed[run_id])

    def load(self, ref: str, attachments: bool = True) -> RunRecord:
        """The run ``ref`` names (see :meth:`resolve`)."""
        run_id, rec = self.resolve(ref)
        return rec if rec is not None else self.store.load(run_id, attachments=attachments)

    def header(self, ref: str) -> Header:
        """The header of the run ``ref`` names, labelled among its study's runs."""
        run_id, _ = self.resolve(ref)
        rec = self.load(run_id, attachments=False)
        return next(h for h in self.headers(study=rec.study) if h.run_id == run_id)


def _config_fields(rec: RunRecord) -> tuple:
    env = rec.env if isinstance(rec.env, dict) else {}
    return (rec.study, rec.params, env.get("fingerprint"), env.get("workbench_commit"), env.get("packages"))


def is_path(ref: str) -> bool:
    """Whether ``ref`` names a file rather than a run: it ends with ``.json``, or something by
    that name exists (a file, a link, a folder, a device; ``latest`` aside). Such a ref is read
    as a bundle file, which says in one line what is wrong with it, and is never looked up among
    the runs (which would read every committed bundle to say "no run with id ..."). Anything
    else is an id, whatever it holds (a store of an old workbench may hold ids with a '/')."""
    return ref.lower().endswith(".json") or (ref not in RESERVED_RUN_IDS and os.path.lexists(ref))


def find_run(ref: str, opened: Callable[[], tuple[Catalog, str]]) -> RunRecord:
    """The run ``ref`` names: the path of a result bundle (``*.json``), else an id, a unique
    prefix or ``latest`` among the runs of the catalog ``opened()`` gives (called only then: a
    bundle needs no store; see :meth:`Catalog.open`). Raises :class:`StoreError`, or KeyError
    with one line that says why the store is missing when it is."""
    if is_path(ref):
        return read_bundle(ref)
    catalog, missing = opened()
    try:
        return catalog.load(ref)
    except KeyError as exc:
        raise KeyError(f"{exc.args[0]}; {missing}" if missing else exc.args[0]) from None
