"""Fused all-gather + GEMM page: the generic study page plus the run's attached traces."""
import streamlit as st

import studies.ag_gemm as study
from pages._ui import study_page
from workbench.traces import TraceError, charts
from workbench.traces.ranks import RankError
from workbench.base.untrusted import escape

ALL_RANKS = " (every rank, aligned)"


@st.cache_data(max_entries=8, show_spinner="reading trace...")
def _spans(run_id: str, name: str, kind: str, _data: bytes):
    # keyed by run and attachment name: hashing the bytes on every rerun would cost more than it saves
    return study.attachment_spans(name, kind, _data)


@st.cache_data(max_entries=4, show_spinner="reading every rank's trace...")
def _ranks(run_id: str, stem: str, _rec):
    return study.merged_ranks(_rec, stem)


def page_extras(record, tables) -> None:
    """Any attached trace of the run as a timeline, on demand: one rank's (per-program records
    of the fused kernel, one lane per SM; torch.profiler traces of each provider), or every
    rank's of one provider merged, clocks aligned, lanes grouped by rank."""
    traces = {name: (kind, data) for name, kind, data in record.attachments if kind in study.TRACE_KINDS}
    if not traces:
        return
    overlap = tables.get("program_overlap") if tables else None
    if overlap is not None and len(overlap):
        st.subheader("The fused kernel's own overlap")
        st.caption("From the hbm-buffer kernel's per-program records: fetch rows are communication, GEMM rows "
                   "computation, unions over SMs. Hidden: the share of the fetch time during which some SM computed.")
        best = overlap.loc[overlap["kernel_us"].idxmax()]
        st.metric(f"fetch time hidden under GEMM ({escape(best['trace'])})", f"{best['fetch_hidden_pct']:.1f}%")
        st.dataframe(overlap, hide_index=True, width="stretch")
    groups = study.rank_groups(record)
    st.subheader("Traces attached to this run")
    name = st.selectbox("Trace", ["(none)"] + [g + ALL_RANKS for g in groups] + list(traces),
                        key=f"{study.ID}:trace:{record.run_id}",
                        help="programs_*: one lane per SM of the hbm-buffer kernel (fetch, wait, gemm); "
                             "torch_*: torch.profiler, 3 calls of one provider; '(every rank, aligned)': all ranks' "
                             "traces of one provider on one clock")
    if name == "(none)":
        return
    try:
        if name.endswith(ALL_RANKS):
            stem = name[:-len(ALL_RANKS)]
            df, meta = _ranks(record.run_id, stem, record)
            st.caption(f"Clocks aligned by {escape(meta['alignment'])}.")
            st.altair_chart(charts.timeline(df, title=stem), width="stretch")
            return
        kind, data = traces[name]
        by = "category" if kind == study.PROGRAMS_KIND else "auto"
        st.altair_chart(charts.timeline(_spans(record.run_id, name, kind, data), title=name, color_by=by),
                        width="stretch")
    except (TraceError, RankError) as exc:
        st.error(f"Cannot read {escape(name)}: {escape(exc)}")


study_page(study, extras=page_extras)
