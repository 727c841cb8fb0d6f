"""The Traces page's GPU-time section: headlines, charts and tables for a trace with GPU work,
the communication field, and the GPU-time comparison (Streamlit's AppTest, no browser)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGE = Path(__file__).resolve().parents[2] / "pages" / "traces.py"
H200 = "examples/torch_cuda_h200.json.gz"


def _traces_page() -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=120).run()
    at.selectbox(key="pick").set_value(H200).run()
    assert not at.exception
    return at


def test_gpu_time_section_and_the_comm_field():
    at = _traces_page()
    assert "GPU time: breakdown and overlap" in [h.value for h in at.subheader]
    lines = [m.value for m in at.markdown if m.value.startswith("- GPU")]
    # one GPU, no collectives in this example; the hint names the field, never a CLI flag
    assert lines and "no known communication kernels found" in lines[0] and "--comm" not in lines[0]
    comm = next(t for t in at.text_input if t.key.startswith("comm"))
    comm.set_value("gemm|sgemm|gemv").run()
    assert not at.exception and not at.error
    lines = [m.value for m in at.markdown if m.value.startswith("- GPU")]
    assert "of communication" in lines[0] and "hidden under computation" in lines[0]
    comm.set_value("(").run()
    assert any("not a regular expression" in e.value for e in at.error)
    assert not at.exception


def test_gpu_time_comparison_with_another_example():
    at = _traces_page()
    at.selectbox(key="cmp").set_value(H200).run()
    assert not at.exception
    assert any(m.value.startswith("GPU time per rank, b against a") for m in at.markdown)
