"""Analyse once: hooks old and new, the generic verdict against its table, the harness-floor
rule, claims, load disturbance, the --json fields, and the Markdown report's head."""

import types

import numpy as np
import pandas as pd
import pytest

from workbench.evidence import claims, derived, engine, tables
from workbench.presentation import report
from workbench.reading.analysis import analyse, charts_of, json_fields, sections_of
from workbench.data.schema import check_record
from workbench.data.record import RunRecord, VariantResult
from workbench.evidence.verdict import Finding
from tests.support.mdlint import lint_markdown


def _rec(variants, floor_ns=50.0, outputs=None, env=None) -> RunRecord:
    return RunRecord(run_id="20260101-000000-stub-abcdef", study="stub", params={}, status="complete",
                     env=env or {"cpu_logical": 2, "fingerprint": "f"}, variants=variants, floor_ns=floor_ns,
                     outputs=outputs or {}, created_utc="2026-01-01T00:00:00Z")


def _variants(seed=0, medians=(900.0, 500.0, 2000.0)):
    rng = np.random.default_rng(seed)
    return [VariantResult(f"v{i}", {"k": i}, list(m + rng.normal(0, m * 0.02, 30)), True, "ok")
            for i, m in enumerate(medians)]


def _study(**hooks) -> types.ModuleType:
    mod = types.ModuleType("studies.stub")
    mod.ID, mod.TITLE, mod.SEED = "stub", "Stub", "(none)"
    calls = {"analyze": 0}

    def analyze(rec):
        calls["analyze"] += 1
        return hooks.get("tables", {"summary": tables.variants_table(rec)})

    mod.analyze, mod.charts, mod.calls = analyze, (lambda t: {}), calls
    for name, fn in hooks.items():
        if name != "tables":
            setattr(mod, name, fn)
    return mod


def test_generic_verdict_names_the_winner_of_its_table_across_seeds():
    study = _study()
    for seed in range(20):
        rng = np.random.default_rng(seed)
        medians = rng.uniform(100, 5000, 4)
        a = analyse(_rec(_variants(seed, medians)), study)
        winner = a.results.sort_values("median_ns").iloc[0]["variant"]
        assert a.verdict.startswith(f"Fastest of 4 checked variant(s): {winner} at")
        assert study.calls["analyze"] == seed + 1  # once per analyse


def test_generic_verdict_compares_the_winner_with_the_next_through_the_engine():
    """Two variants timed in blocks of their own, no null control: the engine's ratio of the
    fastest to the next is at most inconclusive (drift not measured), and the verdict says so."""
    a = analyse(_rec(_variants(0, (1000.0, 1400.0))), _study())
    assert a.verdict.startswith("Fastest of 2 checked variant(s): v0")
    assert "v0 (the fastest) over v1 (the next)" in a.verdict and "drift between blocks not measured" in a.verdict


def _paired(a, b, n=30):
    """Two variants timed in the same n rounds (blocks 0..n-1)."""
    return [VariantResult("a", {"provider": "a"}, list(a), True, blocks=list(range(n))),
            VariantResult("b", {"provider": "b"}, list(b), True, blocks=list(range(n)))]


def test_an_unclear_figure_is_stated_as_not_clear_and_an_impossible_one_as_na():
    rng = np.random.default_rng(7)
    x = 100e3 + rng.normal(0, 5e3, 30)
    rows = []
    for name, y, floor in (("big step", x + 40e3, None), ("spans-zero step", x + rng.normal(0, 5e3, 30), None),
                           ("negative cost", x - 50e3, 0.0)):
        ev = engine.Evidence(_rec(_paired(x, y)))
        rows.append(ev.difference("a", "b", name, "us", physical_min=floor))
    tbl = derived.derived_table(rows)
    assert tbl["status"].tolist() == ["clear", "inconclusive", "not meaningful"]
    a = analyse(_rec(_variants()), _study(tables={"derived": tbl}))
    lead, bullets = a.verdict.split("\n\n", 1)
    assert lead.startswith("big step: 40") and "(clear)" not in a.verdict
    assert "spans-zero step: " in bullets and "not clear (the CI includes 0)" in bullets
    assert "negative cost: n/a (physically impossible" in bullets


def test_the_hooks_are_called_with_the_tables():
    seen = {}

    def findings(tables):
        seen["findings"] = sorted(tables)
        return [Finding("from the tables", text="From the tables")]

    def report_sections(tables):
        seen["sections"] = sorted(tables)
        return ["## section"]

    a = analyse(_rec(_variants()), _study(findings=findings, report_sections=report_sections))
    assert a.verdict == "From the tables." and sections_of(a) == ["## section"]
    assert seen == {"findings": ["summary"], "sections": ["summary"]}


def test_a_failing_hook_lands_in_errors_not_in_an_exception():
    def boom(*_):
        raise RuntimeError("broken study")

    a = analyse(_rec(_variants()), _study(findings=boom, charts=boom))
    assert a.verdict.startswith("No verdict: The findings failed") and any("broken study" in e for e in a.errors)
    assert charts_of(a) == {} and any(e.startswith("The charts failed") for e in a.errors)
    failed = _study()
    failed.analyze = boom
    b = analyse(_rec(_variants()), failed)
    assert b.tables == {} and b.verdict.startswith("Fastest") and "The analysis of this run failed" in b.errors[0]


def test_floor_note_follows_the_runs_measured_floor_not_a_fixed_time():
    vs = [VariantResult("fast", {}, [300.0] * 5, True), VariantResult("slow", {}, [600.0] * 5, True)]
    df = tables.variants_table(_rec(vs, floor_ns=100.0))
    assert df.set_index("variant")["floor_note"].str.startswith("within 5x").tolist() == [True, False]
    # a 40 us figure on a machine whose harness costs 10 us per call is dominated by it
    slow_harness = tables.variants_table(_rec([VariantResult("x", {}, [40_000.0] * 5, True)], floor_ns=10_000.0))
    assert slow_harness["floor_note"].iloc[0].startswith("within 5x")
    assert tables.floor_notes([1.0, 2.0], None).tolist() == ["", ""]
    assert "within 5x" in tables.results_display(df)["note"].iloc[0]


def test_claims_evaluate_and_a_raising_test_is_not_testable():
    def holds(tbls, rec):
        return claims.ClaimResult("holds", "3 us [2, 4]")

    def raises(tbls, rec):
        return tbls["missing"]

    def garbage(tbls, rec):
        return "yes"

    study = _study()
    study.SEED_CLAIMS = [claims.Claim(i, "seed says", "1 us", "seed box", fn)
                         for i, fn in (("a", holds), ("b", raises), ("c", garbage))]
    c = analyse(_rec(_variants()), study).claims
    assert c.columns.tolist() == claims.COLUMNS
    assert c["status"].tolist() == ["holds", "not testable here", "not testable here"]
    assert "KeyError" in c["why"].iloc[1] and "not a ClaimResult" in c["why"].iloc[2]
    assert analyse(_rec(_variants()), _study()).claims.empty  # no SEED_CLAIMS: an empty table


def test_a_runs_lead_names_untested_claims_without_a_figure_in_one_line():
    study = _study()
    results = {"a": claims.ClaimResult("holds", "3 us [2, 4]"),
               "b": claims.ClaimResult("not testable here", "2 ranks: 5 us [4, 6]", "needs 4 ranks"),
               "c": claims.ClaimResult("not testable here", "", "the run has no profile")}
    study.SEED_CLAIMS = [claims.Claim(i, "seed says", "1 us", "seed box", lambda t, r, i=i: results[i])
                         for i in results]
    a = analyse(_rec(_variants()), study)
    tested, untested = claims.untested_apart(claims.display(a.claims))
    assert tested["claim"].tolist() == ["a", "b"] and untested == ["c"]  # a figure keeps its row
    # the page, the short issue report and the notebook lead with the same split; the full
    # report keeps a row for every claim
    lead = report.claims_markdown(a.claims, claims.LEAD_COLUMNS, why_at="below")
    assert "| c |" not in lead and lead.endswith("Not testable in this run, with no figure (why: below): c.")
    issue = report.short_issue_markdown(a.rec, a)
    assert "(why: the full report): c." in issue and "| c |" not in issue
    assert "| c |" in report.claims_markdown(a.claims)


def test_bound_maps_a_derived_ci_to_a_status():
    def d(lo, hi, status="clear"):
        return derived.Derived("share", (lo + hi) / 2, lo, hi, "%", 0.0, status, n_a=20, n_b=20)

    assert claims.bound(d(20, 30), below=50).status == "holds"
    assert claims.bound(d(60, 70), below=50).status == "contradicted"
    assert claims.bound(d(40, 60), below=50).status == "inconclusive"
    assert claims.bound(d(60, 70), above=50).status == "holds"
    assert claims.bound(engine.not_meaningful("x", "different runs"), above=0).status == "not testable here"
    # a caveat keeps the CI from deciding: under load, even a CI far from the bound holds nothing
    loaded = derived.Derived("share", 25, 20, 30, "%", 0.0, "inconclusive", "measured under load", 20, 20,
                             caveat="measured under load (v: load average 9 on 2 CPUs)")
    assert claims.bound(loaded, below=50).status == "inconclusive"


def _loaded_record():
    vs = _variants()
    for v, la, mhz in zip(vs, (0.8, 3.6, 1.1), (3000.0, 2400.0, 2990.0)):
        v.extra["load"] = {"loadavg_1m": la, "cpu_mhz": mhz}
    return _rec(vs, outputs={"load": {"before": {"loadavg_1m": 0.7}, "after": {"loadavg_1m": 2.9}}})


def test_disturbance_names_the_loaded_variants_with_figures():
    a = analyse(_loaded_record(), _study())
    text = " ".join(a.disturbance)
    assert "rose from 0.7 before the run to 3.6 (after v1)" in text and "2 CPUs" in text
    assert "1 of 3 variant(s) measured under load: v1" in text
    assert "2400 MHz after v1, 20% below the run's highest 3000 MHz" in text
    notes = a.results.set_index("variant")["load_note"]
    assert notes["v1"].startswith("measured under load") and notes["v0"] == "" and notes["v2"] == ""
    assert analyse(_rec(_variants()), _study()).disturbance == []  # not sampled: nothing claimed


def test_json_fields_match_the_record_schema():
    rec = _loaded_record()
    study = _study()
    study.SEED_CLAIMS = [claims.Claim("a", "seed says", "1 us", "seed box",
                                      lambda t, r: claims.ClaimResult("inconclusive", "1 us [0, 2]"))]
    doc = rec.to_json() | json_fields(analyse(rec, study))
    doc["study"] = "calibration"  # the schema checks the document, not that the study exists
    check_record(doc)
    assert doc["claims"] == [{"id": "a", "title": "a", "seed_text": "seed says", "seed_value": "1 us",
                              "status": "inconclusive", "live": "1 us [0, 2]", "why": "", "direction": "inconclusive",
                              "magnitude": ""}]
    # a disturbed run's verdict leads with it (issue 30), then the study's own
    assert doc["disturbance"] and doc["verdict"].startswith("Measured under load") and "Fastest" in doc["verdict"]
    assert doc["levels"].startswith("CIs cover")


def test_markdown_report_leads_with_disturbance_verdict_and_claims():
    study = _study()
    study.SEED_CLAIMS = [claims.Claim("c1", "seed|says *this*", "1 us", "seed box",
                                      lambda t, r: claims.ClaimResult("contradicted", "9 us [8, 10]", "here: 9"))]
    a = analyse(_loaded_record(), study)
    text = report.markdown(a.rec, analysis=a)
    warn, verdict, claims_at, results = (text.index(s) for s in ("> **Warning:**", "**Verdict:**",
                                                                 "## The seed's claims", "## Results"))
    assert warn < verdict < claims_at < results
    assert "seed\\|says" in text and "contradicted" in text
    assert not lint_markdown(text)


def test_cpu_reduction_claim_on_its_committed_bundles():
    from workbench.results.store import committed

    recs, errors = committed("cpu-reduction")
    assert recs and not errors
    statuses = {}
    for rec in recs:
        a = analyse(rec)
        assert not a.errors, a.errors
        row = a.claims.set_index("id").loc["000-overhead-dominates"]
        statuses[rec.origin.rsplit("/", 1)[-1]] = row["status"]
        if row["status"] in ("holds", "direction holds"):  # phases runs: IREE's compute share < 50% at c=8
            assert "compute" in row["live"] and "%" in row["live"] and "c=8" in row["live"]
            assert "the seed's 18%" in row["why"]  # the magnitude is judged too
    assert set(statuses.values()) <= {"holds", "direction holds", "not testable here"}
    # the 16-core run: compute 28.6% [25.3, 33.2], so overhead dominates, but not at the seed's 18%
    assert statuses["many-core-phases-16cpu.bundle.json"] == "direction holds"


@pytest.mark.parametrize("study_id", ["ag-gemm", "launch-cache", "mc2-split", "opencl-events", "calibration"])
def test_every_committed_bundle_analyses_once_without_errors(study_id):
    from workbench.results.store import committed

    for rec in committed(study_id)[0]:
        a = analyse(rec)
        assert not a.errors, (rec.run_id, a.errors)
        assert a.verdict and set(a.claims["status"]) <= set(claims.STATUSES)
        assert isinstance(a.results, pd.DataFrame) and len(a.results) == len(rec.variants)
