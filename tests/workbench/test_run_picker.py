"""The run a study page opens on, and the picker's labels (workbench.results.catalog): this machine's
newest complete, checked run that can answer the seed, else the committed headline; never a
smoke or failed-check run while another exists; labels short, unique and saying what differs."""

from __future__ import annotations

from workbench.results.catalog import Catalog, Header, answers_seed, committed_name, default_run, headline_run, short_labels, titles
from workbench.seam.registry import get


def _h(run_id, origin="local", created="2026-11-24T06:00:00Z", variants=8, failed=0, params=None, fp="me",
       status="complete", source=""):
    return Header(run_id=run_id, study="s", status=status, created_utc=created, machine="m", origin=origin,
                  source=source, params=params or {}, variants=variants, failed_checks=failed, fingerprint=fp)


def test_the_default_is_this_machines_newest_checked_run():
    older = _h("older", created="2026-11-20T00:00:00Z")
    newer = _h("newer", created="2026-11-21T00:00:00Z")
    failed = _h("failed", created="2026-11-22T00:00:00Z", failed=1)
    broken = _h("broken", created="2026-11-23T00:00:00Z", status="failed")
    other_machine = _h("theirs", created="2026-11-25T00:00:00Z", fp="them", origin="imported")
    head = _h("head", origin="committed", variants=40)
    assert default_run([older, newer, failed, broken, other_machine, head], fingerprint="me").run_id == "newer"


def test_without_a_checked_run_here_the_committed_headline_leads_never_a_failed_check():
    gloo = _h("gloo-smoke", origin="committed", created="2026-11-24T06:18:00Z", variants=8, failed=1)
    bench = _h("bench", origin="committed", created="2026-11-21T05:00:00Z", variants=30, failed=2)
    clean = _h("clean", origin="committed", created="2026-11-20T05:00:00Z", variants=28)
    local_failed = _h("mine-failed", created="2026-11-27T00:00:00Z", failed=1)
    assert default_run([gloo, bench, clean, local_failed], fingerprint="me").run_id == "clean"
    assert headline_run([gloo, bench, clean]).run_id == "clean"
    # nothing checked anywhere: the newest run, rather than an empty page
    assert default_run([local_failed, gloo], fingerprint="me").run_id == "mine-failed"
    assert default_run([]) is None


def test_smoke_runs_do_not_answer_the_seed_and_are_not_the_default():
    study = get("cpu-reduction")
    smoke = study.SPACE.defaults("smoke")
    quick = study.SPACE.defaults("quick")
    assert not answers_seed(study, smoke) and answers_seed(study, quick)
    assert not answers_seed(get("ag-gemm"), get("ag-gemm").SPACE.defaults("cpu"))  # gloo: no GPU timing
    cal = get("calibration")
    assert not answers_seed(cal, cal.SPACE.defaults("smoke")) and answers_seed(cal, cal.SPACE.defaults())
    runs = [_h("smoke", created="2026-11-27T00:00:00Z", params=smoke),
            _h("head", origin="committed", params=quick, variants=50)]
    for h in runs:
        h.study = study.ID
    assert default_run(runs, study, fingerprint="me").run_id == "head"


def test_committed_ag_gemm_opens_on_a_checked_gpu_run_marked_as_the_headline():
    hs = Catalog(None).headers(study="ag-gemm")
    study = get("ag-gemm")
    first = default_run(hs, study, fingerprint="not-this-machine")
    assert first.headline and first.failed_checks == 0 and "NVIDIA" in first.machine
    assert "committed headline" in titles(hs)[first.run_id]
    assert sum(h.headline for h in hs) == 1
    # the newest 4-rank benchmark (HEADLINE_RUN), not the review run with more checked variants
    assert committed_name(first) == "bench-ws4" and first.created_utc == max(
        h.created_utc for h in hs if committed_name(h) == "bench-ws4")


def test_labels_are_short_unique_and_name_the_committed_bundle():
    hs = Catalog(None).headers()
    for sid in {h.study for h in hs}:
        mine = [h for h in hs if h.study == sid]
        shown = titles(mine)
        assert len(set(shown.values())) == len(mine), sid
        assert all(len(h.label) <= 80 for h in mine), [h.label for h in mine if len(h.label) > 80]
    ag = {h.label for h in hs if h.study == "ag-gemm"}
    assert "cpu-gloo" in ag and "kernel-h200" in ag  # the committer's name for the run, no hash, no machine


def test_a_run_made_from_a_preset_is_labelled_by_it():
    study = get("calibration")
    runs = [_h("a", params=study.SPACE.defaults("smoke")), _h("b", params=study.SPACE.defaults("quick")),
            _h("c", params={**study.SPACE.defaults(), "repeat": 7})]
    labels = short_labels(study, runs)
    assert labels["a"] == "smoke preset" and labels["b"] == "quick preset" and labels["c"] == "repeat=7"
