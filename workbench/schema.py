"""JSON schemas of the run record (``--json``, the ``run`` of a bundle) and the result bundle.

A bundle comes from another machine: :func:`check_bundle` validates it against
:data:`BUNDLE_SCHEMA` before a single field is read, and names the first field that is
wrong in one line (``run.variants[3].correct: 'false' is not of type 'boolean'``). Beyond
JSON Schema it refuses what a schema cannot say: nesting deeper than :data:`MAX_DEPTH`
(checked first, without recursion), and two attachments with one name.

Format history of the record (``"format": "perf-workbench-run"``):
  version 1 (2026-12): the record as printed by ``run --json`` since 2026-11, plus
  ``format`` and ``version``. Records inside older bundles have neither; they read as 1.
  Still version 1 (2026-11-27): a variant may carry ``blocks`` (one block or round number per
  sample); records without it read as before (each variant its own block). A record whose
  ``blocks`` length differs from its samples is refused (:func:`check_blocks`).
"""

from __future__ import annotations

import math
from typing import Any

from .untrusted import ATTACHMENT_NAME_RE, RUN_ID_RE, VARIANT_RE

RECORD_FORMAT = "perf-workbench-run"
RECORD_VERSION = 1
BUNDLE_FORMAT = "perf-workbench-bundle"
BUNDLE_VERSION = 1
#: deepest nesting of lists and objects a bundle may have (the workbench writes under 10)
MAX_DEPTH = 64

STATUSES = ("running", "complete", "interrupted", "failed")
_IDENT = {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$"}
_TEXT_OR_NULL = {"type": ["string", "null"]}

VARIANT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["variant", "samples_ns", "correct"],
    "properties": {
        "variant": {"type": "string", "pattern": f"^{VARIANT_RE.pattern}$"},
        "params": {"type": "object", "propertyNames": _IDENT},
        "samples_ns": {"type": "array", "items": {"type": "number", "finite": True}},
        "correct": {"type": "boolean"},
        "check": {"type": "string"},
        "extra": {"type": "object"},
        # the block (round) each sample was taken in (workbench.record.VariantResult.blocks)
        "blocks": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "integer", "minimum": 0}}]},
        # derived from samples_ns when the record was written; recomputed, never read back
        "median_ns": {}, "ci_ns": {}, "iqr_ns": {}, "noisy": {},
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
        "params": {"type": "object", "propertyNames": _IDENT},
        "env": {"type": "object"},
        "status": {"enum": list(STATUSES)},
        "created_utc": {"type": "string", "maxLength": 64},
        "finished_utc": {"type": ["string", "null"], "maxLength": 64},
        "reproduce": {"type": "string"},
        "floor_ns": {"anyOf": [{"type": "number", "finite": True}, {"type": "null"}]},
        "error": _TEXT_OR_NULL,
        "origin": {"type": "string", "maxLength": 1024},
        "outputs": {"type": "object"},
        "variants": {"type": "array", "items": VARIANT_SCHEMA},
        # the --json record's analysis (workbench.analysis.json_fields): recomputed, never read back
        "verdict": {"type": "string"},
        "claims": {"type": "array", "items": {
            "type": "object", "required": ["id", "seed_text", "seed_value", "status", "live", "why"],
            "properties": {"status": {"enum": ["holds", "contradicted", "inconclusive", "not testable here"]}}}},
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
                },
            },
        },
    },
}


class SchemaError(ValueError):
    """A document that does not match its schema; ``str()`` is one line naming the field."""


def _validator(schema: dict[str, Any]):
    import jsonschema  # start-up: ~0.2 s, paid only when a bundle or record is checked

    def finite(validator, wanted, instance, schema):
        if wanted and isinstance(instance, float) and not math.isfinite(instance):
            yield jsonschema.ValidationError(f"{instance!r} is not a finite number")

    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"finite": finite})
    return cls(schema)


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def depth_error(doc: Any, limit: int = MAX_DEPTH) -> str | None:
    """Why ``doc`` nests too deeply, or None; iterative, so it cannot overflow the stack."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return f"nested deeper than {limit} levels"
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return None


def _check(doc: Any, schema: dict[str, Any], what: str) -> None:
    problem = depth_error(doc)
    if problem:
        raise SchemaError(f"{what} is {problem}")
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
    _check(doc, RECORD_SCHEMA, "run record")
    check_blocks(doc, "run record")


def check_bundle(doc: Any) -> None:
    """Raise :class:`SchemaError` unless ``doc`` is a valid result bundle (see module doc)."""
    if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT:
        raise SchemaError(f"not a perf-workbench result bundle (missing 'format': '{BUNDLE_FORMAT}')")
    version = doc.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > BUNDLE_VERSION:
        raise SchemaError(f"bundle version {version} is newer than this workbench's {BUNDLE_VERSION}; "
                          "update the workbench")
    _check(doc, BUNDLE_SCHEMA, "bundle")
    check_blocks(doc["run"], "bundle run")
    seen: set[str] = set()
    for i, a in enumerate(doc.get("attachments", [])):
        if a["name"] in seen:
            raise SchemaError(f"bundle field attachments[{i}].name: {a['name']!r} is used by an earlier attachment")
        seen.add(a["name"])
    if doc["run"]["run_id"] == "latest":
        raise SchemaError("bundle field run.run_id: 'latest' is reserved (the CLI reads it as the newest run)")
