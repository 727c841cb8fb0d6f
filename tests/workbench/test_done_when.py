"""Issue 41's "Done when", checked literally on every committed bundle: no "clear" row lacks its
levels or its drift, no run measured wholly under load has a "clear" row, no seed claim "holds"
while the seed's figure lies outside its live CI, and no claim tests a null control of its run."""

from __future__ import annotations

import pytest

import workbench as wb
from tests.support.committed_claims import analyses
from tests.support.paths import ROOT
from workbench.evidence import derived
from workbench.base import machine_load
from workbench.seam import registry
from workbench.evidence.claims import IN_CI

STUDIES = ("ag-gemm", "calibration", "cpu-reduction", "launch-cache", "mc2-split", "opencl-events")


def _rows(a):
    """Every derived-form row of an analysis' tables (chart data left out), with its table."""
    for name, df in a.tables.items():
        if name.startswith("_") or df is None or not len(df) or not set(derived.COLUMNS[:7]) <= set(df.columns):
            continue
        for r in df.to_dict("records"):
            yield name, r


def test_every_committed_bundle_reads_through_wb_load():
    bundles = sorted((ROOT / "traces").glob("*/*.bundle.json"))
    assert len(bundles) >= 79
    one = wb.load(bundles[0])
    assert one.id and one.analysis.verdict


@pytest.mark.parametrize("study_id", STUDIES)
def test_no_clear_row_lacks_its_levels_and_no_loaded_run_states_one(study_id):
    for name, a in analyses(study_id).items():
        wholly_loaded = a.rec.variants and all(machine_load.variant_notes(a.rec))
        for table, r in _rows(a):
            if r["status"] != "clear":
                continue
            where = (name, table, r["name"])
            assert r["covers"] in derived.DECIDING and not r.get("caveat"), where
            if r["covers"] == derived.BLOCKS:
                assert a.drift.measured, where
            assert not (wholly_loaded and r["covers"] != derived.COUNT), where  # a count is not a timing
        if wholly_loaded:
            assert a.verdict.startswith("Measured under load") and "(clear)" not in a.verdict, name


@pytest.mark.parametrize("study_id", STUDIES)
def test_no_claim_holds_off_its_seeds_figure_or_tests_a_null(study_id):
    study = registry.get(study_id)
    with_figure = {c.id for c in study.SEED_CLAIMS if c.magnitude is not None}
    for name, a in analyses(study_id).items():
        nulls = a.tables.get("nulls")
        null_pairs = {frozenset(s.split("|")) for s in (nulls["sources"] if nulls is not None else [])}
        for c in a.claims.to_dict("records"):
            if c["id"] in with_figure and c["status"] == "holds":
                assert c["magnitude"] == IN_CI, (name, c["id"], c["why"])
            for figure in filter(None, c["sources"].split(";")):
                assert frozenset(figure.split("|")) not in null_pairs, (name, c["id"], figure)


def test_a_claim_with_a_seed_figure_says_where_the_figure_lies():
    gains = [a.claims.set_index("id").loc["002-gain"] for a in analyses("mc2-split").values()]
    told = [g for g in gains if g["magnitude"]]
    assert told and all("the seed's 32.7%" in g["why"] for g in told)
    assert any(g["status"] == "direction holds" for g in gains)


def test_committed_bundles_without_nulls_say_so():
    """61 of 79 committed bundles measured no drift (issue 41): they are shown with that status."""
    no_drift = [a for s in STUDIES for a in analyses(s).values() if not a.drift.measured]
    assert no_drift
    for a in no_drift:
        assert "not measured" in a.levels
        for _table, r in _rows(a):
            assert r["covers"] != derived.BLOCKS

