"""Every run a person can address by id, told apart: the results store's runs and the result
bundles committed under ``traces/<study>/``.

The CLI (``runs --all``, ``report``, ``compare``, ``export``, ``tag``, ``delete``) and the app's
pages list and load runs through :class:`Catalog`, so a committed run has the same id
everywhere: ``python -m workbench report 20261121-080417-mc2-split-568a86`` works on a machine
whose store never saw it. Each run gets a :class:`Header` whose :meth:`Header.title` tells it
apart from the study's other runs: a label from the study's key parameters, its origin
(``local``, ``imported``, ``committed``), its machine and its time.

A study may declare ``LABEL_PARAMS`` (parameter names); by default the label shows the
parameters whose values differ between the study's runs (stored and committed), in the order
the study declares them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from . import store as wbstore
from .record import RunRecord, machine_label
from .registry import registry
from .store import Store, StoreError, read_bundle

ORIGINS = ("local", "imported", "committed")
#: longest parameter label; a label is for telling runs apart, the full parameters are on the page
LABEL_CHARS = 80


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
    fingerprint: str = ""  # the machine's (workbench.env), for telling same-machine pairs apart

    def when(self) -> str:
        """``2026-11-21 08:04 UTC`` from the stored ISO time."""
        t = self.created_utc or ""
        return f"{t[:10]} {t[11:16]} UTC" if len(t) >= 16 else (t or "time unknown")

    def title(self) -> str:
        """One line that tells this run apart from its study's others (plain text); two runs
        may still share it (same parameters, machine and minute): :func:`titles`."""
        parts = [self.label or "defaults", self.origin, self.machine, self.when()]
        if self.status != "complete":
            parts.append(self.status)
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


def header_of(rec: RunRecord, source: str = "") -> Header:
    return Header(run_id=rec.run_id, study=rec.study, status=rec.status, created_utc=rec.created_utc,
                  machine=machine_label(rec.env), origin=origin_kind(rec.origin), source=source or rec.origin,
                  params=rec.params, variants=len(rec.variants), failed_checks=sum(not v.correct for v in rec.variants),
                  fingerprint=str(rec.env.get("fingerprint") or ""))



def default_run(headers: list[Header]) -> Header | None:
    """The run a study page opens on: the newest of this machine's own or imported runs; with
    none, the committed run with the most checked variants (newest first among equals), so a
    machine without the study's hardware opens on the real GPU results, not on a CPU check."""
    if not headers:
        return None
    own = [h for h in headers if h.origin != "committed"]
    if own:
        return max(own, key=lambda h: h.created_utc or "")
    return max(headers, key=lambda h: (h.variants - h.failed_checks, h.created_utc or ""))

class Catalog:
    """The store's runs (``store`` may be None: no store, or none wanted) and the committed
    bundles (read by ``committed``, by default :func:`workbench.store.committed`; the app
    passes its cached reader). Headers are newest first."""

    def __init__(self, store: Store | None,
                 committed: Callable[[str], tuple[list[RunRecord], list[str]]] = wbstore.committed):
        self.store = store
        self._read_committed = committed
        self._committed: dict[str, tuple[list[RunRecord], list[str]]] = {}

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
                                  fingerprint=r["fingerprint"] or ""))
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
            names = label_params(reg.get(sid), [h.params for h in hs])
            for h in hs:
                h.label = param_label(h.params, names)
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
        committed = {r.run_id: r for sid in registry() for r in self.committed(sid) if r.run_id.startswith(ref)}
        if ref in stored:
            return ref, None
        if ref in committed:
            return ref, committed[ref]
        matches = sorted(set(stored) | set(committed))
        if not matches:
            where = "the results store or the committed bundles" if self.store is not None else "the committed bundles"
            raise KeyError(f"no run with id {ref!r} in {where}")
        if len(matches) > 1:
            raise KeyError(f"run id prefix {ref!r} is ambiguous: {', '.join(matches[:5])}")
        run_id = matches[0]
        return run_id, None if run_id in stored else committed[run_id]

    def load(self, ref: str, attachments: bool = True) -> RunRecord:
        """The run ``ref`` names (see :meth:`resolve`)."""
        run_id, rec = self.resolve(ref)
        return rec if rec is not None else self.store.load(run_id, attachments=attachments)

    def header(self, ref: str) -> Header:
        """The header of the run ``ref`` names, labelled among its study's runs."""
        run_id, _ = self.resolve(ref)
        rec = self.load(run_id, attachments=False)
        return next(h for h in self.headers(study=rec.study) if h.run_id == run_id)


def find_run(ref: str, opened: Callable[[], tuple[Catalog, str]]) -> RunRecord:
    """The run ``ref`` names: the path of a result bundle (``*.json``), else an id, a unique
    prefix or ``latest`` among the runs of the catalog ``opened()`` gives (called only then: a
    bundle needs no store; see :meth:`Catalog.open`). Raises :class:`StoreError`, or KeyError
    with one line that says why the store is missing when it is."""
    if ref.endswith(".json") and Path(ref).is_file():
        return read_bundle(ref)
    catalog, missing = opened()
    try:
        return catalog.load(ref)
    except KeyError as exc:
        raise KeyError(f"{exc.args[0]} ({missing})" if missing else exc.args[0]) from None
