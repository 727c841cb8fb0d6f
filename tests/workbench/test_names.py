"""Names for readers (workbench/base/names.py): every table and chart a study shows has a title it
declares, a seed is named by its title, and a typo is told its closest name."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.base import names
from workbench.reading.analysis import analyse, charts_of
from workbench.results.catalog import Catalog, headline_run
from workbench.seam.registry import registry


def _declared(study, name: str, kind: str) -> bool:
    titles = getattr(study, "TITLES", {})
    return (f"{kind}:{name}" in titles or name in titles or name in names.COMMON
            or any(k.endswith("*") and name.startswith(k[:-1]) for k in titles))


@pytest.mark.parametrize("study_id", sorted(sid for sid in registry() if sid != "calibration"))
def test_every_table_and_chart_of_a_committed_run_has_a_title(study_id):
    study = registry()[study_id]
    head = headline_run(Catalog(None).headers(study=study_id), study)
    if head is None:
        pytest.skip(f"{study_id} has no committed run")
    a = analyse(Catalog(None).load(head.run_id), study)
    untitled = [n for n in a.tables if not n.startswith("_") and not _declared(study, n, "table")]
    untitled += [f"chart {n}" for n in charts_of(a) if not _declared(study, n, "chart")]
    assert not untitled, f"{study_id}: no title for {untitled}"


def test_calibration_titles_its_tables_and_charts():
    study = registry()["calibration"]
    for name in ("floors", "forkjoin"):
        assert _declared(study, name, "table") and _declared(study, name, "chart")


def test_a_title_may_depend_on_the_run_and_never_breaks():
    cpu = registry()["cpu-reduction"]
    at_16k = names.title(cpu, "seed_overview", {"_run": pd.DataFrame({"n": [16_384]})})
    assert "N=16,384" in at_16k and "not comparable" in at_16k
    assert "not comparable" not in names.title(cpu, "seed_overview", {"_run": pd.DataFrame({"n": [1_000_000]})})
    assert names.title(cpu, "seed_overview", {"_run": "not a table"}) == "Seed overview"  # a failing title: words
    assert names.title(None, "phase_diff") == "Phase diff" and names.title(cpu, "derived") == names.COMMON["derived"]


def test_seeds_read_by_their_title_never_their_file():
    for study in registry().values():
        assert ".txt" not in names.seed_title(study)
    text = "seed 000_a9087dd746f9e088.txt: IREE issue #24011, '[CPU] Reduction'"
    assert names.seed_text(text) == "IREE issue #24011, '[CPU] Reduction'"


@pytest.mark.parametrize("word, known, said", [
    ("calibraton", ["calibration", "cpu-reduction"], " (did you mean 'calibration'?)"),
    ("zzz", ["calibration"], ""),
])
def test_did_you_mean(word, known, said):
    assert names.did_you_mean(word, known) == said


def test_the_registry_names_studies_from_their_modules():
    """An unknown id is told against these names without importing the studies: they must be
    the ids the studies declare."""
    from workbench.seam.registry import module_ids

    assert module_ids() == sorted(registry())
