"""ag-gemm's perfect-overlap bound, first-class: per round max(all-gather, matmul) timed beside
every provider; the bound's time and speedup and each provider's fraction of it, with CIs, in
the seed table, the key chart (dashed) and the claims; on one GPU, the copy-engine kernel
against max(its copies alone, cuBLAS)."""

from __future__ import annotations

import numpy as np
import pytest

import studies.ag_gemm as study
from studies.ag_gemm import analysis, bound, kernelbench
from workbench.reading.analysis import analyse
from workbench.results.store import RunRecord
from workbench.seam.study import VariantResult

N = 20


def _record(times_ms: dict[str, float], m: int = 4096, ws: int = 4, rounds: int = N) -> RunRecord:
    """One shape timed in the same rounds: a per-round clock factor common to all, 0.3% noise."""
    rng = np.random.default_rng(3)
    drift = 1 + 0.1 * rng.random(rounds)
    base = {"shard": "rows", "dtype": "fp16", "M": m, "N": 3584, "K": 8192, "world_size": ws}
    variants = [VariantResult(f"{p}/fp16/m{m}", {**base, "provider": p},
                              list(t * 1e6 * drift * (1 + 0.003 * rng.standard_normal(rounds))), True, "ok")
                for p, t in times_ms.items()]
    return RunRecord("b1", study.ID, {}, {}, variants=variants)


TIMES = {"nccl": 0.547, "hbm-buffer": 0.49, "hbm-buffer-ce": 0.40, "ce-chunked": 0.39, "all-gather": 0.197,
         "matmul": 0.349}


def test_fraction_and_speedup_of_the_bound_from_rounds():
    tbls = study.analyze(_record(TIMES))
    row = tbls["summary"].iloc[0]
    assert row["bound_ms"] == pytest.approx(0.349, rel=0.06)  # the matmul, the longer half
    assert row["bound_speedup"] == pytest.approx(0.547 / 0.349, rel=0.01)
    assert row["hbm_frac"] == pytest.approx(0.349 / 0.49, rel=0.01) and row["hbm_frac_lo"] <= row["hbm_frac"]
    assert row["hbmce_frac"] == pytest.approx(0.349 / 0.40, rel=0.01)
    assert row["best"] == "ce-chunked" and row["best_frac"] == pytest.approx(0.349 / 0.39, rel=0.01)
    d = tbls["derived"]
    fr = d[d["table"] == "bound_fraction"].set_index("provider")
    assert set(fr.index) == {"nccl", "hbm-buffer", "hbm-buffer-ce", "ce-chunked"} and fr["paired"].all()
    assert (fr["hi"] < 1).all()  # every provider clearly below perfect overlap
    assert len(d[d["table"] == "bound_speedup"]) == 1
    seed = tbls["seed_table"].iloc[0]
    assert seed["HBM / bound"].startswith("0.71 [") and seed["bound speedup"].startswith("1.57x [")
    assert seed["Best mechanism"].startswith("copy engine; cuBLAS")
    assert "perfect-overlap bound" in study.report_sections(tbls)[0]
    assert set(tbls["mechanisms"]["provider"]) == set(TIMES)


@pytest.mark.parametrize("best_ms, status", [(0.36, "met"), (0.3795, "inconclusive"), (0.40, "MISSED")])
def test_the_best_providers_fraction_of_the_bound_is_judged_on_its_ci(best_ms, status):
    """Issue 35: the best provider at >= 0.92 of the bound from M=4096 (2 and 4 ranks), judged on
    the fraction's CI; at M=1024 and at other world sizes no target is stated."""
    tbls = study.analyze(_record({**TIMES, "ce-chunked": best_ms}))
    row = tbls["summary"].iloc[0]
    assert row["best"] == "ce-chunked" and row["best_frac_met"] == status, (row["best_frac_lo"], row["best_frac_hi"])
    assert tbls["seed_table"].iloc[0]["target (best / bound)"] == f">= 0.92: {status}"
    assert f"{status} at fp16 M=4096" in analyse(_record({**TIMES, "ce-chunked": best_ms})).verdict
    for m, ws in ((1024, 4), (4096, 8)):
        other = study.analyze(_record({**TIMES, "ce-chunked": best_ms}, m=m, ws=ws))
        assert other["seed_table"].iloc[0]["target (best / bound)"] == ""


def test_both_fetch_paths_of_the_kernel_are_held_to_its_own_target():
    """Issue #24's 1.30x at M=16384 for the SM-fetch kernel and its copy-engine-fed form alike."""
    seed = study.analyze(_record({**TIMES, "hbm-buffer": 0.49, "hbm-buffer-ce": 0.40}, m=16384))["seed_table"].iloc[0]
    assert seed["target (HBM Buffer)"] == ">= 1.30x: MISSED" and seed["target (HBM CE)"] == ">= 1.30x: met"
    no_ce = study.analyze(_record({k: v for k, v in TIMES.items() if k != "hbm-buffer-ce"}, m=16384))
    assert no_ce["seed_table"].iloc[0]["target (HBM CE)"] == ""


def test_without_both_halves_the_bound_is_not_meaningful_and_not_invented():
    times = {k: v for k, v in TIMES.items() if k != "all-gather"}
    tbls = study.analyze(_record(times))
    row = tbls["summary"].iloc[0]
    assert np.isnan(row["bound_ms"]) and np.isnan(row["hbm_frac"])
    assert not len(tbls["derived"].query("table in ['bound_fraction', 'bound_speedup']"))
    assert tbls["seed_table"].iloc[0]["HBM / bound"] == "n/a"


def test_unpaired_parts_fall_back_to_the_larger_median():
    rec = _record(TIMES)
    mm = next(v for v in rec.variants if v.params["provider"] == "matmul")
    mm.samples_ns = mm.samples_ns[:-3]  # lost samples: the rounds no longer pair
    grp = {v.params["provider"]: v for v in rec.variants}
    assert bound.rounds(grp) is None
    assert bound.time_ms(grp)[0] == pytest.approx(0.349, rel=0.06) and np.isnan(bound.time_ms(grp)[1])


def test_key_chart_draws_the_bound_and_the_claim_says_the_fraction():
    rec = _record(TIMES)
    rec2 = _record({**TIMES, "nccl": 1.9, "hbm-buffer": 1.6, "all-gather": 0.7, "matmul": 1.3, "hbm-buffer-ce": 1.45,
                    "ce-chunked": 1.42}, m=16384)
    rec.variants += rec2.variants
    tbls = study.analyze(rec)
    spec = study.charts(tbls)["speedup"].to_dict()
    drawn = {r.get("provider") for r in next(iter(spec["datasets"].values()))}
    assert "perfect-overlap bound max(AG, mm)" in drawn
    claim = analyse(rec).claims.set_index("id").loc["004-fused-beats-baseline"]
    assert "of the bound" in claim["live"] and "hbm-buffer-ce" in claim["why"]


def test_kernel_mode_bound_is_max_of_copies_and_cublas_per_round():
    base = {"mode": "kernel", "dtype": "fp16", "M": 4096, "N": 3584, "K": 8192}
    rng = np.random.default_rng(0)
    drift = 1 + 0.05 * rng.random(N)
    us = {("cublas", 1): 330.0, ("emulated-ce", 2): 760.0, ("ce-copy", 2): 700.0, ("emulated", 2): 360.0}
    variants = [VariantResult(kernelbench.variant_name(meth, ws, "fp16", 4096), {**base, "method": meth, "world_size": ws},
                              list(t * 1e3 * drift), True, "ok") for (meth, ws), t in us.items()]
    rec = RunRecord("k", study.ID, {"mode": "kernel"}, {}, variants=variants)
    df, items = kernelbench.breakdown(rec, analysis.evidence(rec))
    ce = df.set_index("method").loc["emulated-ce"]
    assert ce["bound_fraction"] == pytest.approx(700 / 760, rel=1e-6)
    assert np.isnan(df.set_index("method").loc["emulated", "bound_fraction"])  # its bound is cuBLAS: see the doc
    assert [i["method"] for i in items if i["table"] == "bound"] == ["emulated-ce"]
    assert "0.921 [" in kernelbench.format_breakdown(df)
