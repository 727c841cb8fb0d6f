"""JSON schemas of the run record (``--json``, the ``run`` of a bundle) and the result bundle.

A bundle comes from another machine: :func:`check_bundle` validates it against
:data:`BUNDLE_SCHEMA` before a single field is read, and names the first field that is
wrong in one line (``run.variants[3].correct: 'false' is not of type 'boolean'``). The
schema types every field something reads: the environment's keys (:data:`ENV_SCHEMA`), the
outputs and variant extras the workbench itself reads (load samples, warnings, the A/B
link, the run group, precision, sample blocks), parameter values (a scalar or a list of scalars); a study's own outputs
are read by its ``analyze`` alone, whose failure is shown as the run's error. Patterns
match whole strings (``$`` does not let a trailing newline through: :func:`_validator`).
Beyond JSON Schema it refuses, in one pass without recursion before anything else
(:func:`scan`): nesting deeper than :data:`MAX_DEPTH`, text that is not valid Unicode
(a lone surrogate, which ``\ud800`` in JSON makes), a number that is not finite as a float
(``1e999`` or an integer of 400 digits), more than :data:`MAX_VARIANTS` variants; and after
it, two attachments with one name.

Format history of the record (``"format": "perf-workbench-run"``):
  version 1 (2026-12): the record as printed by ``run --json`` since 2026-11, plus
  ``format`` and ``version``. Records inside older bundles have neither; they read as 1.
  Still version 1 (2026-11-27): a variant may carry ``blocks`` (one block or round number per
  sample); records without it read as before (each variant its own block). A record whose
  ``blocks`` length differs from its samples is refused (:func:`check_blocks`).

Format history of the bundle (``"format": "perf-workbench-bundle"``):
  version 1 (2026-11): ``format``, ``version``, ``run`` (the record), ``attachments`` (name,
  kind, ``data_b64``: the bytes in base64).
  version 2 (2026-12-06): an attachment may carry ``"encoding": "zstd"``: ``data_b64`` is then
  a zstd frame of its bytes (the committed GPU bundles were 3-6 MB of base64 JSON traces; a
  checkout must stay small enough to travel to a GPU node). Version 1 bundles still read.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..base.untrusted import ATTACHMENT_NAME_RE, RUN_ID_RE, VARIANT_RE

RECORD_FORMAT = "perf-workbench-run"
RECORD_VERSION = 1
BUNDLE_FORMAT = "perf-workbench-bundle"
BUNDLE_VERSION = 2
#: deepest nesting of lists and objects a bundle may have (the workbench writes under 10)
MAX_DEPTH = 64
#: most variants a run may have: twice the largest sweep (workbench.seam.study.MAX_SWEEP_POINTS), as
#: a point may record more than one (the committed runs have at most ~400)
MAX_VARIANTS = 20_000

STATUSES = ("running", "complete", "interrupted", "failed")
_IDENT = {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$"}
_TEXT_OR_NULL = {"type": ["string", "null"]}
_TEXT = {"type": "string"}
_TEXTS = {"type": "array", "items": _TEXT}
_TEXT_MAP = {"type": "object", "additionalProperties": _TEXT}
_COUNT = {"type": "integer", "minimum": 0}
_NUMBER = {"type": "number"}
_FLAG = {"type": "boolean"}
_SCALAR = {"type": ["string", "number", "boolean", "null"]}

#: the environment (workbench.base.env.capture): every key the workbench writes, typed; a key it
#: does not know (a newer workbench's) may be any scalar or list of scalars
ENV_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "arch": _TEXT, "cpu_model": _TEXT, "cpu_logical": {"type": ["integer", "null"], "minimum": 0},
        "cpu_affinity": {"type": ["integer", "null"], "minimum": 0}, "cpu_physical": _COUNT, "smt": _FLAG,
        "simd": _TEXTS, "cpu_governor": _TEXT, "cpu_turbo": _FLAG, "smt_control": _TEXT, "smt_active": _FLAG,
        "cpu_max_mhz": _NUMBER, "mem_total_gib": _NUMBER, "os": _TEXT, "python": _TEXT, "hostname": _TEXT,
        "packages": _TEXT_MAP, "gpu_names": _TEXTS, "gpu_count": _COUNT, "gpu_driver": _TEXT_OR_NULL,
        "interconnect": _TEXT, "torch_threads": _COUNT, "cuda_runtime": _TEXT_OR_NULL, "nccl": _TEXT,
        "hip_runtime": _TEXT_OR_NULL, "workbench_commit": _TEXT, "env_vars": _TEXT_MAP, "capture_errors": _TEXTS,
        "fingerprint": _TEXT,
    },
    "additionalProperties": {"anyOf": [_SCALAR, {"type": "array", "items": _SCALAR}]},
}
#: one load sample (workbench.base.machine_load.sample)
_LOAD_SAMPLE = {"type": "object", "properties": {"loadavg_1m": _NUMBER, "cpu_mhz": {"type": ["number", "null"]}}}
_PARAMS = {"type": "object", "propertyNames": _IDENT,
           "additionalProperties": {"anyOf": [_SCALAR, {"type": "array", "items": _SCALAR}]}}
#: the outputs the workbench itself reads; the study's own are its analysis's to read
OUTPUTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "warnings": _TEXTS,
        "load": {"type": "object", "properties": {"before": _LOAD_SAMPLE, "after": _LOAD_SAMPLE}},
        "ab": {"type": "object", "required": ["side", "pair"],
               "properties": {"side": {"enum": ["A", "B"]}, "pair": _TEXT, "rounds": _COUNT, "order": _TEXT}},
        "run_group": {"type": "object", "required": ["id"],
                      "properties": {"id": _TEXT, "index": _COUNT, "runs": _COUNT}},
    },
}
_EXTRA = {
    "type": "object",
    "properties": {
        "load": _LOAD_SAMPLE, "side": {"enum": ["A", "B"]}, "ab_round_sizes": {"type": "array", "items": _COUNT},
        "precision": {"type": "object", "properties": {"target_rel": _NUMBER, "half_width_rel": _NUMBER,
                                                       "met": _FLAG, "samples": _COUNT}},
        "rank_median_ns": {"type": "array", "items": _NUMBER},
    },
}

VARIANT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["variant", "samples_ns", "correct"],
    "properties": {
        "variant": {"type": "string", "pattern": f"^{VARIANT_RE.pattern}$"},
        "params": _PARAMS,
        "samples_ns": {"type": "array", "items": _NUMBER},
        "correct": {"type": "boolean"},
        "check": {"type": "string"},
        "extra": _EXTRA,
        # the block (round) each sample was taken in (workbench.data.record.VariantResult.blocks)
        "blocks": {"anyOf": [{"type": "null"}, {"type": "array", "items": _COUNT}]},
    },
}

RECORD_SCHEMA: dict[str, Any] = {
    "title": "perf-workbench run record",
    "type": "object",
    "required": ["run_id", "study", "params", "env", "variants"],
    "properties": {
        "format": {"const": RECORD_FORMAT},
        "version": {"type": "integer", "minimum": 1, "maximum": RECORD_VERSION},
        "run_id": {"type": "string", "pattern": f"^{RUN_ID_RE.pattern}$"},
        "study": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9-]{0,63}$"},
        "params": _PARAMS,
        "env": ENV_SCHEMA,
        "status": {"enum": list(STATUSES)},
        "created_utc": {"type": "string", "maxLength": 64},
        "finished_utc": {"type": ["string", "null"], "maxLength": 64},
        "reproduce": {"type": "string"},
        "floor_ns": {"type": ["number", "null"]},
        "error": _TEXT_OR_NULL,
        "origin": {"type": "string", "maxLength": 1024},
        "outputs": OUTPUTS_SCHEMA,
        "variants": {"type": "array", "maxItems": MAX_VARIANTS, "items": VARIANT_SCHEMA},  # the count first
        # the --json record's analysis (workbench.reading.analysis.json_fields): recomputed, never read back
        "verdict": {"type": "string"},
        "claims": {"type": "array", "items": {
            "type": "object", "required": ["id", "seed_text", "seed_value", "status", "live", "why"],
            "properties": {"status": {"enum": ["holds", "direction holds", "contradicted", "inconclusive",
                                               "not testable here"]}}}},
        "disturbance": {"type": "array", "items": {"type": "string"}},
        "levels": {"type": "string"},
    },
}

BUNDLE_SCHEMA: dict[str, Any] = {
    "title": "perf-workbench result bundle",
    "type": "object",
    "required": ["format", "version", "run"],
    "properties": {
        "format": {"const": BUNDLE_FORMAT},
        "version": {"type": "integer", "minimum": 1, "maximum": BUNDLE_VERSION},
        "run": RECORD_SCHEMA,
        "attachments": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "kind", "data_b64"],
                "properties": {
                    "name": {"type": "string", "pattern": f"^{ATTACHMENT_NAME_RE.pattern}$"},
                    "kind": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9./+-]{0,63}$"},
                    "data_b64": {"type": "string", "contentEncoding": "base64"},
                    # version 2: "zstd" when data_b64 holds a zstd frame of the attachment's bytes
                    "encoding": {"enum": ["zstd"]},
                },
            },
        },
    },
}


class SchemaError(ValueError):
    """A document that does not match its schema; ``str()`` is one line naming the field."""


def _validator(schema: dict[str, Any]):
    """A Draft 2020-12 validator whose ``pattern`` matches as ECMA-262 does without the
    multiline flag, which the schema's readers assume: ``$`` only at the very end. Python's
    ``re.search`` lets ``$`` match before a trailing newline, so ``"run-1\n"`` passed ``^...$``."""
    import jsonschema  # start-up: ~0.2 s, paid only when a bundle or record is checked

    def pattern(validator, patrn, instance, schema):
        if isinstance(instance, str) and not re.search(_ecma_end(patrn), instance):
            yield jsonschema.ValidationError(f"{instance[:80]!r} does not match {patrn!r}")

    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": pattern})
    return cls(schema)


def _ecma_end(patrn: str) -> str:
    r"""``patrn`` with an unescaped trailing ``$`` as ``\Z``: the very end of the string (``$``
    also matches before a trailing newline)."""
    return patrn[:-1] + r"\Z" if patrn.endswith("$") and not patrn.endswith(r"\$") else patrn


def _where(path) -> str:
    """``run.variants[3].extra`` (a key that is no plain word shown quoted, cut short: it is
    the document's, and the message is one line)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{ascii(str(part)[:40])}]"
    return out or "(top level)"


_SURROGATE = re.compile("[\ud800-\udfff]")


def scan(doc: Any, limit: int = MAX_DEPTH) -> tuple[str, str] | None:
    """(where, what is wrong) for the first value of ``doc`` that no schema check should
    meet: nesting deeper than ``limit``, text with a lone surrogate (keys too), a number
    that is not finite as a float (a huge integer converts to inf or raises). None when
    there is none. Iterative: it cannot overflow the stack."""
    stack: list[tuple[Any, int, tuple]] = [(doc, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return _where(path), f"nested deeper than {limit} levels"
            if isinstance(node, dict):
                for key, child in node.items():
                    if isinstance(key, str) and _SURROGATE.search(key):
                        return _where(path), f"a key is not valid Unicode text ({_shown(key)})"
                    stack.append((child, depth + 1, (*path, key)))
            else:
                stack.extend((child, depth + 1, (*path, i)) for i, child in enumerate(node))
        elif isinstance(node, str):
            if _SURROGATE.search(node):
                return _where(path), f"not valid Unicode text (a lone surrogate: {_shown(node)})"
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and not _finite(node):
            text = repr(node) if isinstance(node, float) else f"an integer of {len(str(abs(node)))} digits"
            return _where(path), f"{text} is not a finite number"
    return None


def _finite(x: int | float) -> bool:
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def _shown(text: str) -> str:
    return ascii(text[:40] + ("..." if len(text) > 40 else ""))


#: a variant's figures that the writer derived from its samples: recomputed, never read back,
#: so dropped unread (a variant without samples wrote NaN there, which the scan would refuse)
DERIVED_FIELDS = ("median_ns", "ci_ns", "iqr_ns", "noisy")


def _check(doc: Any, schema: dict[str, Any], what: str, run: Any) -> None:
    """``doc`` against ``schema``; ``run`` is its run record (the document itself, or its
    ``run``), whose count of variants is checked first (before any is looked at), and whose
    variants lose their :data:`DERIVED_FIELDS`."""
    variants = run.get("variants") if isinstance(run, dict) else None
    if isinstance(variants, list) and len(variants) > MAX_VARIANTS:
        where = "variants" if run is doc else "run.variants"
        raise SchemaError(f"{what} field {where}: {len(variants):,} variants, more than the {MAX_VARIANTS:,} a run "
                          "may have")
    if isinstance(variants, list):
        # checked without them, on shallow copies: the caller's document keeps its fields (the
        # CLI checks the --json record it is about to print)
        run = {**run, "variants": [{k: x for k, x in v.items() if k not in DERIVED_FIELDS} if isinstance(v, dict)
                                   else v for v in variants]}
        doc = run if doc.get("variants") is variants else {**doc, "run": run}
    problem = scan(doc)
    if problem:
        where, why = problem
        raise SchemaError(f"{what} field {where}: {why}" if where != "(top level)" else f"{what} is {why}")
    e = next(_validator(schema).iter_errors(doc), None)
    if e is not None:
        message = e.message if len(e.message) <= 200 else e.message[:197] + "..."
        raise SchemaError(f"{what} field {_where(e.absolute_path)}: {message}")


def check_blocks(run: dict, what: str) -> None:
    """A variant's ``blocks`` names one block per sample: refuse any other length (a schema
    cannot say it, and pairing by a misaligned list would pair the wrong samples)."""
    for i, v in enumerate(run.get("variants", [])):
        blocks = v.get("blocks")
        if blocks is not None and len(blocks) != len(v["samples_ns"]):
            raise SchemaError(f"{what} field variants[{i}].blocks: {len(blocks)} block numbers for "
                              f"{len(v['samples_ns'])} samples")


def check_record(doc: Any) -> None:
    """Raise :class:`SchemaError` unless ``doc`` is a valid run record."""
    _check(doc, RECORD_SCHEMA, "run record", doc)
    check_blocks(doc, "run record")


def check_bundle(doc: Any) -> None:
    """Raise :class:`SchemaError` unless ``doc`` is a valid result bundle (see module doc)."""
    if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT:
        raise SchemaError(f"not a perf-workbench result bundle (missing 'format': '{BUNDLE_FORMAT}')")
    version = doc.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > BUNDLE_VERSION:
        raise SchemaError(f"bundle version {version} is newer than this workbench's {BUNDLE_VERSION}; "
                          "update the workbench")
    _check(doc, BUNDLE_SCHEMA, "bundle", doc.get("run"))
    check_blocks(doc["run"], "bundle run")
    seen: set[str] = set()
    for i, a in enumerate(doc.get("attachments", [])):
        if a["name"] in seen:
            raise SchemaError(f"bundle field attachments[{i}].name: {a['name']!r} is used by an earlier attachment")
        seen.add(a["name"])
    if doc["run"]["run_id"] == "latest":
        raise SchemaError("bundle field run.run_id: 'latest' is reserved (the CLI reads it as the newest run)")
