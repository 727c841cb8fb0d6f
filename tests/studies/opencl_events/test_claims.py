"""opencl-events: the seed's claims on every committed bundle, the headline that must never state
a CI spanning zero (issue #18's example), derived figures paired by round, the charts."""

from __future__ import annotations


import numpy as np
import pytest

import studies.opencl_events as study
from tests.support.committed_claims import analyses, check_statuses
from workbench.reading.analysis import analyse, charts_of
from workbench.data.record import RunRecord, VariantResult

NT, HOLDS, INC = "not testable here", "holds", "inconclusive"
#: the seed's ~3x at small sizes is AMD's: the callback costs more everywhere here (the direction
#: holds) but never about 3x (1.04-1.75x native, 11-14x through CUDA and pyopencl): issue 41
DIR = "direction holds"
#: the statuses the committed data supports (traces/opencl-events/README.md says why)
EXPECTED = {
    "callbacks-native-NVIDIA_H200.bundle.json": {
        "001-callbacks-cost-at-small-sizes": DIR, "001-overhead-fades-with-size": INC, "001-waiting-costs-less": NT,
        "001-chains-smaller-relative-overhead": NT, "001-unmapping-little-effect": NT, "001-dep-callback-rises": NT},
    "callbacks-pyopencl-NVIDIA_H200.bundle.json": {
        "001-callbacks-cost-at-small-sizes": DIR, "001-overhead-fades-with-size": HOLDS,
        "001-waiting-costs-less": NT, "001-chains-smaller-relative-overhead": NT, "001-unmapping-little-effect": NT,
        "001-dep-callback-rises": NT},
    "wait-native-NVIDIA_H200.bundle.json": {
        "001-callbacks-cost-at-small-sizes": DIR, "001-overhead-fades-with-size": INC,
        "001-waiting-costs-less": HOLDS, "001-chains-smaller-relative-overhead": NT, "001-unmapping-little-effect": NT,
        "001-dep-callback-rises": NT},
    "cuda-NVIDIA_H200.bundle.json": {
        "001-callbacks-cost-at-small-sizes": DIR, "001-overhead-fades-with-size": HOLDS,
        "001-waiting-costs-less": HOLDS, "001-chains-smaller-relative-overhead": NT, "001-unmapping-little-effect": NT,
        "001-dep-callback-rises": NT},
    "dependency-native-NVIDIA_H100_80GB_HBM3.bundle.json": {
        "001-callbacks-cost-at-small-sizes": DIR, "001-overhead-fades-with-size": NT,
        "001-waiting-costs-less": HOLDS, "001-chains-smaller-relative-overhead": HOLDS,
        "001-unmapping-little-effect": HOLDS, "001-dep-callback-rises": HOLDS},
    "dependency-native-28w-32MiB-NVIDIA_H100_80GB_HBM3.bundle.json": {  # the H100 run's missing last point
        "001-callbacks-cost-at-small-sizes": NT, "001-overhead-fades-with-size": NT, "001-waiting-costs-less": NT,
        "001-chains-smaller-relative-overhead": NT, "001-unmapping-little-effect": HOLDS, "001-dep-callback-rises": NT},
    # unmapping: within 10% at every size range with 7 workers; with 28 one range's CI (the
    # order-statistic interval of its pooled rounds) reaches past 1.1x: inconclusive there
    "dependency-native-NVIDIA_H200.bundle.json": {
        "001-callbacks-cost-at-small-sizes": DIR, "001-overhead-fades-with-size": NT,
        "001-waiting-costs-less": INC, "001-chains-smaller-relative-overhead": HOLDS,
        "001-unmapping-little-effect": INC, "001-dep-callback-rises": INC},
}


def test_every_committed_bundle_has_its_expected_statuses():
    assert set(analyses(study.ID)) == set(EXPECTED), "a bundle was added or removed: give it its expected statuses"


@pytest.mark.parametrize("bundle", sorted(EXPECTED))
def test_claims_on_each_committed_bundle_have_the_statuses_its_data_supports(bundle):
    check_statuses(analyses(study.ID)[bundle], EXPECTED[bundle])


def test_a_mixed_outcome_over_worker_counts_says_where_each_held():
    """The H200 dependency run waited from a Python thread: waiting cost more than the callback
    with 7 workers (the GIL) and less with 28; the claim is inconclusive and says so."""
    c = analyses(study.ID)["dependency-native-NVIDIA_H200.bundle.json"].claims.set_index("id")
    why = c.loc["001-waiting-costs-less", "why"]
    assert "7 workers: contradicted" in why and "28 workers: holds" in why


# --- issue #18: the headline states only what its CI supports ---------------------------------------

def _rec(params: dict, variants: list) -> RunRecord:
    rec = RunRecord("r", study.ID, study.SPACE.resolve(params), env={}, outputs={"platform": "P", "device": "D"})
    rec.variants = variants
    return rec


def _callbacks_run(spread_us: float, rounds: int = 20, seed: int = 0) -> RunRecord:
    """(0,0,0) at 5 us a run; (0,0,1) 4 us more; (1,1,1) 1.2 us more, spread evenly over
    +-``spread_us`` from round to round (interleaved rounds: a shared drift per round)."""
    rng = np.random.default_rng(seed)
    drift = rng.normal(0, 0.05, rounds)
    base = 5000 + 1000 * drift
    extra = {"(0,0,0)": np.zeros(rounds), "(0,0,1)": 4000 + rng.normal(0, 100, rounds),
             "(1,1,1)": 1200 + rng.permutation(np.linspace(-spread_us, spread_us, rounds)) * 1000}
    variants = [VariantResult(f"{p} 4096B", {"experiment": "callbacks", "size_bytes": 4096, "provider": p,
                                             "platform": "P", "device": "D"},
                              list(base + e), True, "ok", {"reps": 64}) for p, e in extra.items()]
    return _rec({"experiment": "callbacks", "combos": ["000", "001", "111"], "sizes": [4096]}, variants)


def test_an_extra_time_whose_ci_spans_zero_is_never_stated_as_a_finding():
    """The issue's example: "(1,1,0) adds 1.2 us [-0.9, 2.8]" was the headline. The callback's
    clear extra time leads; the noisy one is shown as not clear, with why."""
    a = analyse(_callbacks_run(spread_us=4.0))
    dv = a.tables["derived"]
    noisy = dv[(dv["quantity"] == "excess") & (dv["provider"] == "(1,1,1)")].iloc[0]
    assert noisy["status"] == "inconclusive" and noisy["lo"] < 0 < noisy["hi"]
    assert a.verdict.startswith("(0,0,1)'s extra time per run over (0,0,0) at 4-64 KiB (callbacks on P / D): 3.99")
    assert "(1,1,1)'s extra time per run over (0,0,0) at 4-64 KiB: 1.2 us [-" in a.verdict
    assert "not clear (the CI includes 0)" in a.verdict
    key = a.tables["key"].iloc[0]
    assert key["(1,1,1) - (0,0,0) (us)"].endswith("(CI includes 0)")


def test_the_same_extra_time_with_a_tight_ci_is_stated():
    a = analyse(_callbacks_run(spread_us=0.05))
    assert "(1,1,1)'s extra time per run over (0,0,0) at 4-64 KiB: 1.2" in a.verdict
    assert a.verdict.startswith("(0,0,1)'s extra time per run over (0,0,0) at 4-64 KiB (callbacks on P / D): 3.99")


def test_extra_times_are_paired_by_round():
    """A drift shared by every provider in a round cancels in the paired difference: its CI is
    far narrower than the spread of either side."""
    a = analyse(_callbacks_run(spread_us=0.05))
    dv = a.tables["derived"]
    d = dv[(dv["quantity"] == "excess") & (dv["provider"] == "(0,0,1)")].iloc[0]
    assert bool(d["paired"]) and d["hi"] - d["lo"] < 0.2  # us; each side spreads over ~0.5 us


def test_a_run_stored_with_the_old_name_condition_reads_the_same():
    new = _callbacks_run(spread_us=0.05)
    for v in new.variants:
        v.params["condition"] = v.params.pop("provider")
    a = analyse(new)
    assert not a.errors and set(a.tables["overhead"]["provider"]) == {"(0,0,1)", "(1,1,1)"}


# --- charts ----------------------------------------------------------------------------------------

def _layers(spec: dict) -> list[dict]:
    """The unit charts of a layered, concatenated or faceted spec."""
    out = []
    for part in spec.get("layer", []) + spec.get("hconcat", []) + ([spec["spec"]] if "spec" in spec else []):
        out += _layers(part) if {"layer", "hconcat", "spec"} & set(part) else [part]
    return out


def test_key_chart_has_ci_bars_a_log_like_scale_and_the_seeds_figures_labelled():
    pytest.importorskip("altair")
    a = analyses(study.ID)["dependency-native-NVIDIA_H100_80GB_HBM3.bundle.json"]
    spec = charts_of(a)[study.KEY_CHART].to_dict()
    assert spec["facet"]["column"]["field"] == "workers" and spec["resolve"]["scale"]["y"] == "independent"
    layers = _layers(spec)
    marks = [layer["mark"] if isinstance(layer["mark"], str) else layer["mark"]["type"] for layer in layers]
    assert marks.count("rule") >= 2 and "line" in marks and "point" in marks
    scales = {layer["encoding"]["y"].get("scale", {}).get("type") for layer in layers if "y" in layer["encoding"]}
    assert "symlog" in scales  # 0.2 us to 1.4 ms, and signed
    text = str(spec)
    assert "seed (AMD RX 5500 XT)" in text and "0.4 ms" in text
    assert list(a.tables[study.KEY_TABLE]["size range (per worker)"]) == ["4-64 KiB", "128 KiB-1 MiB", "2 MiB and up"] * 2
