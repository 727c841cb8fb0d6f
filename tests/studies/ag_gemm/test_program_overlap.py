"""The hbm-buffer kernel's own overlap from its per-program records (committed H200 runs):
the analysis table, the report section and the page's figure."""

from __future__ import annotations


import pytest

import studies.ag_gemm as study
from studies.ag_gemm.analysis import attachment_spans
from studies.ag_gemm import spans
from workbench.results.store import read_bundle

from tests.support.paths import ROOT
RUN = ROOT / "traces" / "ag-gemm" / "bench-ws2-20261124-070656-ag-gemm-a1c4d2.bundle.json"


def test_program_overlap_of_a_committed_run():
    rec = read_bundle(RUN)
    tables = study.analyze(rec)
    po = tables["program_overlap"].set_index("trace")
    assert len(po) == 12  # 2 dtypes x 3 shapes x 2 ranks
    assert ((po["fetch_us"] <= po["kernel_us"]) & (po["gemm_us"] <= po["kernel_us"])).all()
    assert ((po["fetch_hidden_pct"] >= 0) & (po["fetch_hidden_pct"] <= 100)).all()
    # the figure is the union arithmetic of the records themselves
    name, _, data = next(a for a in rec.attachments if a[0] == "programs_fp16_m16384_ws2_rank0.json")
    df = attachment_spans(name, spans.ATTACH_KIND, data)
    st = df["start_ns"].to_numpy()
    en = st + df["dur_ns"].to_numpy()
    fetch, gemm = (df["category"] == "fetch").to_numpy(), (df["category"] == "gemm").to_numpy()
    assert (st % TICK_NS == 0).all() and (en % TICK_NS == 0).all()
    grid_fetch = _cover(st[fetch], en[fetch])
    grid_gemm = _cover(st[gemm], en[gemm])
    row = po.loc[name]
    assert row["fetch_us"] * 1e3 == pytest.approx(len(grid_fetch) * TICK_NS)
    assert row["fetch_hidden_us"] * 1e3 == pytest.approx(len(grid_fetch & grid_gemm) * TICK_NS)
    assert "### The fused kernel's own overlap (per-program records)" in "\n".join(study.report_sections(tables))


#: the records' times step by 32 ns (the globaltimer's resolution on these GPUs)
TICK_NS = 32


def _cover(start, end) -> set[int]:
    """Every tick covered by some interval (a brute-force union)."""
    out: set[int] = set()
    for s, e in zip(start.tolist(), end.tolist()):
        out.update(range(s, e, TICK_NS))
    return out


def test_page_shows_the_overlap_figure(monkeypatch, tmp_path):
    import torch
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("WORKBENCH_STORE", str(tmp_path / "wb.sqlite"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    at = AppTest.from_file(str(ROOT / "pages" / "ag_gemm.py"), default_timeout=120).run()
    runs = next(s for s in at.selectbox if s.label.startswith("Run ("))
    # the run of RUN (the picker labels a committed run by its bundle's name, then machine and time)
    pick = next(o for o in runs.options if o.startswith("bench-ws2") and "2x NVIDIA H200 · 2026-11-24 07:06" in o)
    runs.select_index(runs.options.index(pick)).run()
    assert not at.exception
    shown = next(s for s in at.selectbox if s.label.startswith("Run (")).value
    at.session_state[f"ag-gemm:tabs:{shown}"] = "Details"  # the tabs are lazy: open the page's own
    at.run()
    assert not at.exception
    assert "The fused kernel's own overlap" in [h.value for h in at.subheader]
    assert any(m.label.startswith("fetch time hidden under GEMM") for m in at.metric)
