"""Traces page: open a trace (upload or from traces/), see its timeline, phases and statistics.

Thin on purpose: every number comes from ``workbench.traces`` (the same functions the
``python -m workbench trace`` CLI uses). Uploaded files are written to a temporary file and
parsed by the importers; nothing is executed or unpickled.
"""

from __future__ import annotations

import hashlib
import tempfile
from functools import partial
from pathlib import Path

import streamlit as st

from workbench.traces import TraceError, analysis, charts, export, load, phases

ROOT = Path(__file__).resolve().parent.parent / "traces"
MAX_UPLOAD_MB = 200
#: files under traces/ that are not traces
_NOT_TRACES = (".bundle.json", ".md", ".txt", ".py", ".sh", ".mlir", ".vmfb", ".gitkeep")


@st.cache_data(show_spinner="reading trace...", max_entries=4)
def _load_upload(file_id: str, name: str, _data: bytes):
    # keyed by the upload's id: hashing up to MAX_UPLOAD_MB of bytes on every rerun costs seconds
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / Path(name).name
        p.write_bytes(_data)
        return load(p)


@st.cache_data(show_spinner="reading trace...", max_entries=8)
def _load_path(path: str, mtime: float):
    return load(path)


def _pick() -> tuple[object, str] | None:
    """The chosen trace as (spans, meta), or None; errors are shown, never raised."""
    src = st.radio("Trace source", ["examples in traces/", "upload"], horizontal=True, key="src")
    try:
        if src == "upload":
            up = st.file_uploader(f"Trace file (max {MAX_UPLOAD_MB} MB): Tracy, IREE ireeperf-jsonl/.ireeprof, "
                                  "Chrome JSON (.json/.gz), rocprof CSV, nsys SQLite, Perfetto .pftrace")
            if up is None:
                return None
            if up.size > MAX_UPLOAD_MB << 20:
                st.error(f"{up.name}: {up.size / 2**20:.0f} MB is over the {MAX_UPLOAD_MB} MB limit")
                return None
            return _load_upload(up.file_id, up.name, up.getvalue()), up.name
        files = sorted(p for p in ROOT.rglob("*") if p.is_file() and not p.name.endswith(_NOT_TRACES))
        if not files:
            st.info("No trace files under traces/ yet; upload one.")
            return None
        rel = st.selectbox("Trace", [str(p.relative_to(ROOT)) for p in files], key="pick")
        p = ROOT / rel
        return _load_path(str(p), p.stat().st_mtime), rel
    except TraceError as exc:
        st.error(str(exc))
        return None


def _window(df, key: str) -> tuple[int, int]:
    t0, t1 = int(df["start_ns"].min()), int((df["start_ns"] + df["dur_ns"]).max())
    span = max(t1 - t0, 1)
    unit, scale = ("ms", 1e6) if span >= 5e6 else ("us", 1e3)
    lo, hi = st.slider(f"Time window ({unit} from trace start)", 0.0, span / scale, (0.0, span / scale),
                       step=max(span / scale / 1000, 0.001), key=f"win{key}")
    return t0 + int(lo * scale), t0 + int(hi * scale)


def _phases(df, meta) -> None:
    try:
        per_iter = phases.iterations(df)
    except phases.PhaseError as exc:
        st.caption(f"No phase breakdown: {exc}")
        return
    summ = phases.summarize(per_iter, skip_first=1)  # keeps a lone iteration
    skipped = len(per_iter) - summ.attrs["iterations"]
    st.subheader("Phases")
    st.caption(f"{meta['format']} rules, {summ.attrs['iterations']} iterations"
               f"{' (first skipped as warm-up)' if skipped else ''}; shares are of the sum of the phase medians.")
    st.altair_chart(charts.phase_bars(summ), width="stretch")
    c1, c2 = st.columns(2)
    c1.dataframe(summ, hide_index=True, width="stretch")
    per_iter_us = per_iter[["iteration"]].assign(**{f"{k} (us)": per_iter[k] / 1e3
                                                    for k in phases.phase_columns(per_iter)},
                                                 **{"total (us)": per_iter["total_ns"] / 1e3})
    c2.dataframe(per_iter_us, hide_index=True, width="stretch")
    s, e = phases.iteration_window(df, per_iter, "median")
    st.markdown("Median iteration, per thread (us from its start):")
    st.code(export.ascii_timeline(_phases_and_threads(df, per_iter), s, e, width=100), language="text")


def _phases_and_threads(df, per_iter):
    """The phase lane above the trace's own lanes."""
    from workbench.traces.model import concat

    return concat([phases.phase_spans(per_iter), df])


def main() -> None:
    st.title("Traces")
    st.caption("One span table for Tracy, IREE native profiles, Chrome/Kineto JSON, rocprof CSV, Nsight Systems "
               "SQLite and Perfetto traces. Lanes keep the source's order.")
    picked = _pick()
    if picked is None:
        return
    (df, meta), name = picked
    doc = analysis.summary(df, meta)
    c = st.columns(4)
    c[0].metric("format", doc["format"])
    c[1].metric("spans", f"{doc['span_count']:,}")
    c[2].metric("lanes", len(doc["tracks"]))
    c[3].metric("wall", f"{(doc['end_ns'] - doc['start_ns']) / 1e6:.3f} ms")
    st.caption(f"clock: {doc['clock']}")

    # widget keys per trace: another trace starts with all its lanes and its whole time range
    tkey = hashlib.sha1(name.encode()).hexdigest()[:8]
    lanes = st.multiselect("Lanes", doc["tracks"], default=doc["tracks"], key=f"lanes{tkey}")
    s, e = _window(df, tkey)
    view = df[df["track"].isin(lanes)]
    if view.empty:
        st.info("No lanes selected.")
        return
    st.altair_chart(charts.timeline(view, s, e, title=name), width="stretch")

    _phases(df, meta)

    st.subheader("Statistics (time window)")
    win = analysis.window(view, s, e)
    st.dataframe(analysis.name_stats(win), hide_index=True, width="stretch")
    st.dataframe(analysis.track_summary(win), hide_index=True, width="stretch")
    with st.expander("Idle gaps per lane (longer than 10 us)"):
        st.dataframe(analysis.gaps(win, min_gap_ns=10_000), hide_index=True, width="stretch")

    key = f"{tkey}{s}{e}"
    d1, d2 = st.columns(2)
    # built on click, not on every rerun (a large window's JSON takes seconds)
    d1.download_button("Download Chrome JSON (open in ui.perfetto.dev)", partial(export.to_chrome_json, win),
                       file_name=f"{Path(name).stem}.chrome.json", mime="application/json", key=f"dl{key}")
    d2.download_button("Download Mermaid gantt (Markdown)", partial(export.mermaid_gantt, win, s, e, title=name),
                       file_name=f"{Path(name).stem}.gantt.md", mime="text/markdown", key=f"mm{key}")

    with st.expander("Compare with another trace"):
        files = sorted(p for p in ROOT.rglob("*") if p.is_file() and not p.name.endswith(_NOT_TRACES))
        other = st.selectbox("Other trace (b)", ["(none)"] + [str(p.relative_to(ROOT)) for p in files], key="cmp")
        if other != "(none)":
            try:
                p = ROOT / other
                df_b, _ = _load_path(str(p), p.stat().st_mtime)
                st.dataframe(analysis.compare(df, df_b, labels=("a", "b")), hide_index=True,
                             width="stretch")
            except TraceError as exc:
                st.error(str(exc))


main()
