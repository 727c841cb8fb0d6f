"""Fused all-gather + GEMM page."""
import streamlit as st

import studies.ag_gemm as study
from pages._ui import study_page
from workbench.traces import TraceError, charts
from workbench.untrusted import escape


@st.cache_data(max_entries=8, show_spinner="reading trace...")
def _spans(run_id: str, name: str, kind: str, _data: bytes):
    # keyed by run and attachment name: hashing the bytes on every rerun would cost more than it saves
    return study.attachment_spans(name, kind, _data)


def page_extras(record, tables) -> None:
    """Any attached trace of the run (per-program records of the fused kernel, torch.profiler
    traces of each method) as a timeline, on demand."""
    traces = {name: (kind, data) for name, kind, data in record.attachments if kind in study.TRACE_KINDS}
    if not traces:
        return
    st.subheader("Traces attached to this run")
    name = st.selectbox("Trace", ["(none)"] + list(traces), key=f"{study.ID}:trace:{record.run_id}",
                        help="programs_*: one lane per SM of the hbm-buffer kernel (fetch, wait, gemm); "
                             "torch_*: torch.profiler, rank 0, 3 calls of one method")
    if name == "(none)":
        return
    kind, data = traces[name]
    try:
        st.altair_chart(charts.timeline(_spans(record.run_id, name, kind, data), title=name), width="stretch")
    except TraceError as exc:
        st.error(f"Cannot read {escape(name)}: {escape(exc)}")


study_page(study, extras=page_extras)
