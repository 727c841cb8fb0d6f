"""Every registered study's smoke preset runs end to end here, or skips with its reason."""

import pytest

from workbench.running import runner
from workbench.reading.analysis import analyse, charts_of
from workbench.evidence.claims import STATUSES
from workbench.seam.registry import registry


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_smoke_preset_runs_and_analyzes(study_id, store):
    study = registry()[study_id]
    params = study.SPACE.defaults("smoke")
    reason = study.requires(params)
    if reason:
        pytest.skip(reason)
    rec = runner.execute(study, {}, store, preset="smoke")
    assert rec.status == "complete"
    assert rec.env["fingerprint"] and rec.reproduce.startswith(f"python -m workbench run {study_id}")
    assert all(v.correct for v in rec.variants), [v.check for v in rec.variants if not v.correct]
    a = analyse(rec, study)  # the study's analyze, verdict and claims, once
    assert not a.errors, a.errors
    assert isinstance(a.tables, dict) and a.verdict
    # the seed's claims evaluate here; a test that raised would read "its test failed"
    assert set(a.claims["status"]) <= set(STATUSES) and not a.claims["why"].str.startswith("its test").any()
    readable = {n: df for n, df in a.tables.items() if not n.startswith("_")}
    assert readable and all(len(df) for df in readable.values()), \
        f"empty tables: {[n for n, df in readable.items() if not len(df)] or 'no table at all'}"
    charts = charts_of(a)
    assert charts and not a.errors, a.errors or "no chart"
    for chart in charts.values():
        chart.to_dict()  # a chart that cannot serialise would break the page and the report


def test_a_public_module_in_studies_without_an_id_is_an_error(tmp_path, monkeypatch):
    """A typo (``Id = ...``) must not make a study vanish from the app and the CLI."""
    import studies
    from workbench.seam import registry as registrymod

    (tmp_path / "typo_study.py").write_text('"""A study whose ID was mistyped."""\nId = "typo"\n')
    monkeypatch.setattr(studies, "__path__", [*studies.__path__, str(tmp_path)])
    monkeypatch.setattr(registrymod, "_CACHE", {})
    with pytest.raises(ImportError, match="typo_study has no ID"):
        registrymod.registry()
