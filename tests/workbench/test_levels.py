"""Levels of uncertainty (issue 30), the data model: samples carry their block through runs,
bundles and the store (what the engine does with them: tests/workbench/test_engine.py)."""

from __future__ import annotations

import json

import pytest

from workbench.data.record import RunRecord, VariantResult
from workbench.data.schema import SchemaError, check_bundle
from workbench.results.store import Store, parse_bundle, to_bundle
from workbench.seam.study import RunContext


# --- the data model ---------------------------------------------------------------------------

def _record(variants) -> RunRecord:
    rec = RunRecord("20261127-000000-calibration-abcdef", "calibration", {}, {"cpu_logical": 2})
    rec.variants = variants
    return rec


def test_blocks_travel_through_bundles_and_the_store(tmp_path):
    v = VariantResult("a", {}, [1.0, 2.0, 3.0], True, "ok", {}, [4, 5, 6])
    old = VariantResult("b", {}, [1.0, 2.0], True, "ok")
    rec = _record([v, old])
    back = parse_bundle(json.dumps(to_bundle(rec)).encode())
    assert back.variants[0].blocks == [4, 5, 6] and back.variants[1].blocks is None
    s = Store(tmp_path / "s.sqlite")
    s.save(rec)
    loaded = s.load(rec.run_id)
    assert loaded.variants[0].blocks == [4, 5, 6] and loaded.variants[1].blocks is None


def test_a_bundle_whose_blocks_do_not_match_its_samples_is_refused():
    doc = to_bundle(_record([VariantResult("a", {}, [1.0, 2.0, 3.0], True, "ok", {}, [0, 1])]))
    with pytest.raises(SchemaError, match=r"variants\[0\]\.blocks: 2 block numbers for 3 samples"):
        check_bundle(doc)
    doc["run"]["variants"][0]["blocks"] = [0, -1, 2]
    with pytest.raises(SchemaError):
        check_bundle(doc)


def test_run_context_numbers_blocks_over_the_run():
    ctx = RunContext()
    assert [ctx.block() for _ in range(3)] == [0, 1, 2]
