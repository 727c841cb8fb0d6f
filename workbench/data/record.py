"""The data model at the bottom: a run as recorded, its variants' raw samples, run ids and
machine labels.

A :class:`RunRecord` holds what was measured, never what was computed from it: its JSON
(:meth:`RunRecord.to_json`, the ``run`` of a bundle) carries the raw samples, and every
statistic is computed where the analysis lives (:mod:`workbench.reading.analysis`, whose
:func:`~workbench.reading.analysis.json_fields` adds the per-variant summaries to the CLI's
``--json`` record). Every other module of the workbench may import this one; it imports
only the schema's format names.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import secrets
from dataclasses import dataclass, field
from typing import Any

from .schema import RECORD_FORMAT, RECORD_VERSION


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id(study: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{study}-{secrets.token_hex(3)}"


def machine_label(env: Any, gpu: bool = True) -> str:
    """The machine in a few words: its GPUs, else its CPU model. ``gpu=False`` (a run that used
    only the CPUs, on a GPU node or not): the CPU model and count, whatever GPUs the host has.
    Any ``env`` gives a label (a run imported before bundles were typed may hold anything there)."""
    env = env if isinstance(env, dict) else {}
    gpus = env.get("gpu_names")
    if not gpu:
        cpus = env.get("cpu_logical")
        count = f", {cpus} CPUs" if isinstance(cpus, int) and not isinstance(cpus, bool) else ""
        return f"{env.get('cpu_model') or 'unknown CPU'}{count}"
    if isinstance(gpus, list) and gpus:
        count = env.get("gpu_count")
        return f"{count if isinstance(count, int) else len(gpus)}x {gpus[0]}"
    return str(env.get("cpu_model") or "unknown")


@dataclass
class VariantResult:
    """Raw samples of one measured configuration, after its correctness check.

    ``samples_ns`` are per-call times in nanoseconds (one entry per repetition). A variant
    whose check failed is recorded with ``correct=False`` and the reason in ``check``; the
    report shows it as failed and never ranks its time.

    ``blocks`` says when each sample was taken, one integer per sample, numbered over the
    run: variants timed in interleaved rounds give sample ``i`` the round's number (the same
    number in every variant of that round, so their samples pair by round), and a variant
    timed alone in one stretch gives all its samples that stretch's number (its own block).
    :mod:`workbench.evidence.derived` pairs by it and adds the run's drift between blocks where two
    variants share no block. None in runs recorded before 2026-11-27: each variant then
    counts as a block of its own, unless its study pairs it by position (same-length rounds).
    """

    variant: str
    params: dict[str, Any]
    samples_ns: list[float]
    correct: bool
    check: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    blocks: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        """The variant's raw part; ``blocks`` only where they were recorded (a run recorded
        before them keeps the record it had)."""
        out = dataclasses.asdict(self)
        if self.blocks is None:
            del out["blocks"]
        return out


@dataclass
class RunRecord:
    """A run as stored and exported. ``to_json`` is the record's raw part; the CLI's ``--json``
    contract adds the analysis to it (:func:`workbench.reading.analysis.json_fields`)."""

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

    def to_json(self) -> dict[str, Any]:
        return {
            "format": RECORD_FORMAT, "version": RECORD_VERSION, "run_id": self.run_id, "study": self.study, "params": self.params, "env": self.env,
            "status": self.status, "created_utc": self.created_utc, "finished_utc": self.finished_utc,
            "reproduce": self.reproduce, "floor_ns": self.floor_ns, "error": self.error,
            "origin": self.origin,
            "variants": [v.to_json() for v in self.variants],
            "outputs": self.outputs,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "RunRecord":
        """A record from a document that passed :func:`workbench.data.schema.check_record` (or
        the bundle check): the types are known to be right here."""
        variants = [
            VariantResult(variant=v["variant"], params=v.get("params", {}),
                          samples_ns=[float(x) for x in v["samples_ns"]], correct=v["correct"],
                          check=v.get("check", ""), extra=v.get("extra", {}),
                          blocks=[int(b) for b in v["blocks"]] if v.get("blocks") is not None else None)
            for v in doc["variants"]
        ]
        return cls(
            run_id=doc["run_id"], study=doc["study"], params=doc["params"], env=doc["env"],
            status=doc.get("status", "complete"), created_utc=doc.get("created_utc", ""),
            finished_utc=doc.get("finished_utc"), reproduce=doc.get("reproduce", ""),
            outputs=doc.get("outputs", {}), error=doc.get("error"),
            floor_ns=None if doc.get("floor_ns") is None else float(doc["floor_ns"]),
            origin=doc.get("origin", "local"), variants=variants,
        )

    def valid_variants(self) -> list[VariantResult]:
        return [v for v in self.variants if v.correct and v.samples_ns]
