"""Traces page: open traces (upload or from traces/), see the GPU-time breakdown and overlap
per rank, the timeline, phases, statistics, several ranks aligned, and the difference between
two traces.

Thin on purpose: every number comes from ``workbench.traces`` (the same functions the
``python -m workbench trace`` CLI uses). Uploads are untrusted: each is written under a
generated name in a private temporary folder (the upload's own name only lends its
extension, as a hint for format detection, and is shown escaped), parsed by the importers,
never executed or unpickled. Zoom and pan run in the browser; the window form below the
chart is the only server-side zoom (for statistics, and for the spans of huge traces).

An upload's spans are held for its session only while an uploader of this page holds the file
(:func:`pages._ui.held`): replaced or removed, or the page left, they are released, where
``st.cache_data`` kept up to 8 of every session's uploads for the server's life. The views
cached across reruns (timeline, window statistics, merged ranks, diff) expire after
:data:`VIEW_TTL_S`.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from functools import partial
from pathlib import Path

import streamlit as st

from pages._ui import held, release_uploads
from workbench import traces
from workbench.evidence.stats import fmt_ns
from workbench.base.untrusted import PatternError, escape, user_regex
from workbench.traces import TraceError, analysis, charts, diff, export, idle, load, overlap, phases, ranks

ROOT = Path(__file__).resolve().parent.parent / "traces"
MAX_UPLOAD_MB = 200
MAX_RANK_FILES = 16
#: seconds a cached view of a trace (window statistics, timeline, merged ranks, diff) is kept
VIEW_TTL_S = 600
#: files under traces/ that are not traces
_NOT_TRACES = (".bundle.json", ".md", ".txt", ".py", ".sh", ".mlir", ".vmfb", ".gitkeep")
#: the trace the page opens on: a real one (torch.profiler on two H200s), small, that draws
DEFAULT_EXAMPLE = "examples/torch_cuda_h200.json.gz"
#: what the uploaders accept: the importers' own list (workbench.traces.formats())
UPLOAD_LABEL = ", ".join(f.label for f in traces.formats())
UPLOAD_SUFFIXES = traces.suffixes()


def _md(text: object) -> str:
    """Untrusted text (file names, span names, importer messages) shown literally in Markdown."""
    return escape(text, "text")


def _hint_name(name: str) -> str:
    """A generated file name that keeps only the upload's extension (and a rocprof file-kind
    tail such as ``_kernel_trace.csv``), the part format detection looks at."""
    plain = re.sub(r"[^a-z0-9._-]", "", name.lower())[-80:]
    tail = re.search(r"(_[a-z0-9_]{1,40}_trace)?((\.[a-z0-9]{1,12}){1,2})$", plain)
    return "upload" + (tail.group(0) if tail else "")


def _load_upload(up):
    """The upload's trace, read once while the session's uploader holds it (keyed by its file
    id: hashing up to MAX_UPLOAD_MB of bytes on every rerun would cost seconds)."""
    return held(("trace", up.file_id), lambda: _read_upload(up.name, up.getvalue()))


def _read_upload(name: str, data: bytes):
    with tempfile.TemporaryDirectory(prefix="wb-upload-") as tmp:
        path = Path(tmp) / _hint_name(name)
        path.write_bytes(data)
        try:
            df, meta = load(path)
        except TraceError as exc:  # name the upload, not the generated file
            raise TraceError(exc.format, exc.message.replace(path.name, name)) from None
    return df, {**meta, "path": name}


@st.cache_data(show_spinner="reading trace...", max_entries=8)
def _load_path(path: str, mtime: float):
    return load(path)


@st.cache_data(show_spinner="aligning ranks...", max_entries=4, ttl=VIEW_TTL_S)
def _merge(key: tuple, align: str, _loaded: list, names: list[str]):
    return ranks.merge(_loaded, align=align, names=names)


def _example_files() -> list[str]:
    """The files under traces/ an importer reads (kernel-sweep logs and the like are not
    traces), the examples first, :data:`DEFAULT_EXAMPLE` at the top."""
    files = [p for p in ROOT.rglob("*") if p.is_file() and not p.name.endswith(_NOT_TRACES)]
    stamp = tuple(sorted((str(p), p.stat().st_mtime_ns) for p in files))
    return _readable(stamp)


@st.cache_data(show_spinner=False, max_entries=2)
def _readable(stamp: tuple) -> list[str]:
    rel = [str(Path(p).relative_to(ROOT)) for p, _ in stamp if traces.detect(p) is not None]
    return sorted(rel, key=lambda r: (r != DEFAULT_EXAMPLE, not r.startswith("examples/"), r))


def _load_example(rel: str):
    p = ROOT / rel
    return _load_path(str(p), p.stat().st_mtime)


def _pick() -> tuple[object, dict, str, str] | None:
    """The chosen trace(s) as (spans, meta, key, title), or None; errors are shown, never raised."""
    src = st.radio("Trace source", ["examples in traces/", "upload"], horizontal=True, key="src")
    try:
        if src == "upload":
            ups = st.file_uploader(f"Trace file(s), max {MAX_UPLOAD_MB} MB each; several files are the ranks of one "
                                   f"run: {UPLOAD_LABEL}", accept_multiple_files=True, type=UPLOAD_SUFFIXES,
                                   key="upload")
            if not ups:
                return None
            for up in ups:
                if up.size > MAX_UPLOAD_MB << 20:
                    st.error(f"{_md(up.name)}: {up.size / 2**20:.0f} MB is over the {MAX_UPLOAD_MB} MB limit")
                    return None
            loaded = [_load_upload(up) for up in ups[:MAX_RANK_FILES]]
            names = [up.name for up in ups[:MAX_RANK_FILES]]
            key = ("upload",) + tuple(up.file_id for up in ups[:MAX_RANK_FILES])
        else:
            files = _example_files()
            if not files:
                st.info("No trace files under traces/ yet; upload one.")
                return None
            c1, c2 = st.columns([2, 3])
            first = c1.selectbox("Trace", files, key="pick")
            more = c2.multiselect("Other ranks of the same run (optional)", [f for f in files if f != first],
                                  key="more", max_selections=MAX_RANK_FILES - 1)
            names = [first] + more
            loaded = [_load_example(n) for n in names]
            key = tuple(names)
        if len(loaded) == 1:
            df, meta = loaded[0]
            return df, meta, "|".join(key), Path(names[0]).name
        align = st.selectbox("Align the ranks' clocks by", ranks.ALIGNMENTS, key="align",
                             help="auto: the end of the first NCCL/RCCL collective when every rank has one, else the "
                                  "wall-clock base times the files report")
        df, meta = _merge(key, align, loaded, [Path(n).name for n in names])
        return df, meta, "|".join(key) + align, f"{len(names)} ranks: " + ", ".join(Path(n).name for n in names)
    except (TraceError, ranks.RankError) as exc:
        st.error(_md(exc))
        return None


#: keys as Perfetto's: W/S zoom in/out by this factor around the window's middle, A/D pan by
#: this share of the window
ZOOM_STEP, PAN_SHARE = 2.0, 0.25


def stepped(lo: float, hi: float, full: float, step: str) -> tuple[float, float]:
    """The window ``lo..hi`` (within ``0..full``) after one key: ``in``, ``out``, ``left``,
    ``right``; clamped to the trace: never wider than it, never past either end."""
    width = hi - lo
    if step in ("in", "out"):
        mid = (lo + hi) / 2
        width = min(max(width / ZOOM_STEP if step == "in" else width * ZOOM_STEP, full * 1e-6), full)
        lo = mid - width / 2
    else:
        lo += width * PAN_SHARE * (1 if step == "right" else -1)
    lo = min(max(lo, 0.0), full - width)
    return lo, lo + width


def _window(df, key: str) -> tuple[int, int]:
    """The server-side window (statistics, and the chart's data for huge traces): W/S/A/D
    (buttons with those keys, as in Perfetto) zoom and pan it, and a form sets it, applied on
    submit only, so nothing reruns while values are typed."""
    inner = df[~analysis.envelopes(df)]  # the profiler's envelope spans stay off the range
    inner = inner if len(inner) else df
    t0, t1 = int(inner["start_ns"].min()), int((inner["start_ns"] + inner["dur_ns"]).max())
    span = max(t1 - t0, 1)
    unit, scale = ("ms", 1e6) if span >= 5e6 else ("us", 1e3)
    state = st.session_state.setdefault(f"win{key}", (0.0, span / scale))
    left, right = st.columns([2, 3], vertical_alignment="bottom")
    keys = left.columns(4, vertical_alignment="bottom")
    for col, (label, shortcut, step) in zip(keys, (("Zoom in", "W", "in"), ("Zoom out", "S", "out"),
                                                   ("Earlier", "A", "left"), ("Later", "D", "right"))):
        if col.button(label, shortcut=shortcut, key=f"{step}{key}", width="stretch",
                      help="Keys W, S, A, D as in Perfetto; the statistics below follow the window. On the chart, "
                           "Ctrl/Cmd + wheel zooms and a drag pans (a plain wheel scrolls the page)."):
            state = stepped(*state, span / scale, step)
            st.session_state[f"win{key}"] = state
    with right.form(f"winform{key}", border=False):
        c1, c2, c3, c4 = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
        lo = c1.number_input(f"Window from ({unit} since trace start)", 0.0, span / scale, state[0], format="%.3f")
        hi = c2.number_input(f"to ({unit})", 0.0, span / scale, state[1], format="%.3f")
        apply = c3.form_submit_button("Apply", help="Set the window to these times")
        reset = c4.form_submit_button("Whole trace")
    if reset:
        lo, hi = 0.0, span / scale
    if apply or reset:
        lo, hi = min(lo, hi), max(lo, hi)
        st.session_state[f"win{key}"] = (lo, hi)
        state = (lo, hi)
    return t0 + int(state[0] * scale), t0 + int(state[1] * scale)


@st.cache_data(show_spinner="drawing the timeline...", max_entries=6, ttl=VIEW_TTL_S)
def _timeline_spec(key: tuple, title: str, _view, s: int, e: int) -> dict:
    return charts.timeline(_view, s, e, title=title).to_dict()


@st.cache_data(show_spinner=False, max_entries=6, ttl=VIEW_TTL_S)
def _window_stats(key: tuple, _view, s: int, e: int):
    win = analysis.window(_view, s, e)
    return analysis.name_stats(win), analysis.track_summary(win), analysis.gaps(win, min_gap_ns=10_000), win


def _phases(df, meta) -> None:
    st.subheader("Phases")
    if ranks.is_multi_rank(df):
        rank = st.selectbox("Rank", sorted(int(r) for r in df["rank"].dropna().unique()), key="phase_rank")
        df = df[df["rank"] == rank]
    try:
        per_iter = phases.iterations(df)
    except phases.PhaseError as exc:
        st.caption(f"No phase breakdown: {_md(exc)}")
        return
    summ = phases.summarize(per_iter, skip_first=1)  # keeps a lone iteration
    skipped = len(per_iter) - summ.attrs["iterations"]
    st.caption(f"{_md(meta['format'])} rules, {summ.attrs['iterations']} iterations"
               f"{' (first skipped as warm-up)' if skipped else ''}; shares are of the sum of the phase medians.")
    st.altair_chart(charts.phase_bars(summ), width="content")
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


def _ranks(df, meta) -> None:
    st.subheader("Ranks")
    st.caption(f"Clocks aligned by: {_md(meta.get('alignment'))}. Shifts applied: "
               + ", ".join(f"rank {r['rank']} {r['offset_ns'] / 1e3:+,.1f} us" for r in meta["ranks"]))
    st.markdown(f"**{_md(ranks.slowest(df)['text'])}**")
    st.dataframe(ranks.rank_summary(df), hide_index=True, width="stretch")
    with st.expander("Per collective call: arrival skew and the last rank to arrive"):
        st.dataframe(ranks.collective_skew(df), hide_index=True, width="stretch")
    with st.expander("Per span name: median per rank and the spread"):
        st.dataframe(ranks.rank_name_stats(df), hide_index=True, width="stretch")


@st.cache_data(show_spinner="breaking GPU time down...", max_entries=6)
def _gpu_tables(key: str, comm: str, _df):
    comm = comm or None
    return (overlap.summary(_df, comm=comm), overlap.state_spans(_df, comm=comm), overlap.suggest_comm(_df, comm=comm),
            overlap.temporal(_df, comm=comm), idle.breakdown(_df, comm=comm))


def _set_comm(key: str, pattern: str) -> None:
    """The suggestion's button: its pattern into the communication field (before the rerun)."""
    st.session_state[key] = pattern


def _gpu_time(df, name: str, tkey: str) -> str:
    """The GPU-time breakdown and overlap per rank; returns the communication pattern typed
    (the comparison below uses it too)."""
    if not overlap.has_gpu_work(df):
        return ""
    st.subheader("GPU time: breakdown and overlap")
    c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
    comm = c1.text_input("Also communication: kernels whose names match (regular expression, before the built-in "
                         "NCCL/RCCL, DeepEP, symmetric-memory, NVSHMEM, custom all-reduce and peer-copy rules)",
                         key=f"comm{tkey}", placeholder="e.g. (?i)dispatch|combine",
                         help="Kernels and copies whose names match count as communication in every figure below "
                              "and in the comparison.")
    try:
        tables, band, suggestion, temporal, idle_causes = _gpu_tables(name, comm, df)
    except overlap.OverlapError as exc:
        st.error(_md(exc))
        return ""
    if suggestion:
        h1, h2 = st.columns([4, 1], vertical_alignment="center")
        h1.info(f"No known communication kernels, but {_md(overlap.suggestion_text(suggestion))}, e.g. "
                + ", ".join(escape(n[:80], "code") for n in suggestion["examples"]) + ".")
        h2.button("Count them as communication", key=f"suggest{tkey}", on_click=_set_comm,
                  args=(f"comm{tkey}", suggestion["pattern"]), help=f"Sets the field to {suggestion['pattern']}")
    c2.download_button("Markdown (for an issue)", partial(overlap.markdown, tables, suggestion=suggestion),
                       file_name="gpu-time.md",
                       mime="text/markdown", key=f"gpumd{tkey}")
    for line in overlap.headlines(tables, surface="page", suggestion=suggestion):
        st.markdown(f"- {_md(line)}")
    # tabs: the page's default view stays short; the figures are one click away
    per_rank, over_time, idle_tab, details = st.tabs(["Per rank", "Over time", "Idle by cause", "Definitions and tables"])
    per_rank.altair_chart(charts.breakdown_bars(tables["states"]), width="stretch")
    per_rank.dataframe(temporal, hide_index=True, width="stretch")
    over_time.altair_chart(charts.overlap_band(band), width="stretch")
    idle_tab.caption("Per stream, why it waited between two pieces of work: host wait (the launch came after the "
                     "stream went idle), kernel wait (a gap under 30 us: launch overhead), other (e.g. an event "
                     "from another stream). A communication stream waits by design.")
    idle_tab.dataframe(idle_causes, hide_index=True, width="stretch")
    shown = overlap.display(tables)
    with details:
        st.caption(_md(overlap.DEFINITIONS))
        st.dataframe(shown["breakdown"], hide_index=True, width="stretch")
        if len(shown["step_summary"]):
            st.markdown("Per step: median over steps, 95% bootstrap CI over the steps of this run (not between runs)")
            st.dataframe(shown["step_summary"], hide_index=True, width="stretch")
        st.dataframe(shown["states"], hide_index=True, width="stretch")
        st.dataframe(shown["top_kernels"], hide_index=True, width="stretch")
    return comm


def _lane_filter(df, tkey: str):
    """Lanes to show: a regular expression over lane names (and ranks for a multi-rank trace)."""
    c1, c2 = st.columns([3, 2])
    pattern = c1.text_input("Lanes matching (regular expression; empty: all)", key=f"lanes{tkey}")
    view = df
    if ranks.is_multi_rank(df):
        all_ranks = sorted(int(r) for r in df["rank"].dropna().unique())
        pick = c2.multiselect("Ranks", all_ranks, default=all_ranks, key=f"ranks{tkey}")
        view = view[view["rank"].isin(pick)]
    if pattern:
        try:
            view = view[analysis.search_mask(user_regex(pattern, "The lane filter"), view["track"])]
        except PatternError as exc:
            c1.error(_md(exc))
    return view, (pattern, tuple(sorted(view["rank"].dropna().unique().tolist())))


def _compare(df, name: str, comm: str = "") -> None:
    with st.expander("Compare with another trace (trace diff)"):
        src = st.radio("Other trace (b)", ["an example in traces/", "a file to upload"], horizontal=True, key="cmp_src")
        try:
            if src == "a file to upload":
                up = st.file_uploader(f"Trace b (max {MAX_UPLOAD_MB} MB)", type=UPLOAD_SUFFIXES, key="cmp_upload")
                if up is None or up.size > MAX_UPLOAD_MB << 20:
                    if up is not None:
                        st.error(f"{_md(up.name)}: over the {MAX_UPLOAD_MB} MB limit")
                    return
                (df_b, meta_b), other = _load_upload(up), up.name
            else:
                other = st.selectbox("Trace b", ["(none)"] + _example_files(), key="cmp")
                if other == "(none)":
                    return
                df_b, meta_b = _load_example(other)
            table = _diff(name, other, df, df_b)
        except TraceError as exc:
            st.error(_md(exc))
            return
        except diff.DiffError as exc:
            st.info(f"Nothing to compare: {_md(exc)}")
            return
        if overlap.has_gpu_work(df) and overlap.has_gpu_work(df_b):
            try:
                gpu = _gpu_diff(name, other, comm, df, df_b)
            except (diff.DiffError, overlap.OverlapError) as exc:
                st.info(f"GPU time not compared: {_md(exc)}")
            else:
                st.markdown("GPU time per rank, b against a (Δ = b - a; medians over steps with 95% bootstrap CIs over "
                            "steps where both traces have steps)")
                st.dataframe(diff.gpu_time_display(gpu), hide_index=True, width="stretch")
        st.markdown(_md(diff.headline(table, labels=("a", "b"))))
        st.caption("a: the trace above; b: the one picked here. Δ = b - a. A verdict needs the adjusted p-value "
                   "below 5% and a CI of the median difference that excludes 0.")
        st.dataframe(diff.display(table), hide_index=True, width="stretch")


@st.cache_data(show_spinner="comparing...", max_entries=4, ttl=VIEW_TTL_S)
def _diff(name_a: str, name_b: str, _a, _b):
    return diff.diff(_a, _b)


@st.cache_data(show_spinner="comparing GPU time...", max_entries=4)
def _gpu_diff(name_a: str, name_b: str, comm: str, _a, _b):
    return diff.gpu_time_diff(_a, _b, comm=comm or None)


def _section(what: str, fn, *args):
    """Run one part of the page and return what it returns; a failure on a strange trace is
    one clear line (None returned) and the rest of the page still shows (the importers
    validated the table; this guards the views)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - never a traceback on the page
        st.error(f"{what} failed on this trace: {type(exc).__name__}: {_md(exc)}")
        return None


def _timeline(df, name: str, title: str, tkey: str) -> tuple | None:
    """The timeline of the chosen lanes and window; returns (cache key, lanes, window) for the
    statistics below it."""
    st.subheader("Timeline")
    view, lanes_key = _lane_filter(df, tkey)
    s, e = _window(df, tkey)
    if view.empty or not (view["kind"] == "span").any():
        st.info("No lanes match.")
        return None
    key = (name, lanes_key, s, e)
    st.vega_lite_chart(spec=_timeline_spec(key, title, view, s, e), width="stretch")
    return key, view, s, e


def _statistics(title: str, tkey: str, key: tuple, view, s: int, e: int) -> None:
    st.subheader("Statistics (window)")
    by_name, by_lane, gaps, win = _window_stats(key, view, s, e)
    st.dataframe(by_name, hide_index=True, width="stretch")
    st.dataframe(by_lane, hide_index=True, width="stretch")
    with st.expander("Idle gaps per lane (longer than 10 us)"):
        st.dataframe(gaps, hide_index=True, width="stretch")
    dl = f"{tkey}{s}{e}"
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(title).stem)[:80].strip(".-") or "trace"
    d1, d2 = st.columns(2)
    # built on click, not on every rerun (a large window's JSON takes seconds)
    d1.download_button("Download Chrome JSON (open in ui.perfetto.dev)", partial(export.to_chrome_json, win),
                       file_name=f"{stem}.chrome.json", mime="application/json", key=f"dl{dl}")
    d2.download_button("Download Mermaid gantt (Markdown)", partial(export.mermaid_gantt, win, s, e, title=stem),
                       file_name=f"{stem}.gantt.md", mime="text/markdown", key=f"mm{dl}")


def main() -> None:
    try:
        _page()
    finally:
        release_uploads()  # what this run of the page did not show


def _page() -> None:
    st.title("Traces")
    st.caption("One span table for Tracy, IREE native profiles, Chrome/Kineto JSON, rocprof CSV and JSON, Nsight Systems "
               "SQLite and Perfetto traces (Android system traces too); several files are the ranks of one run, "
               "aligned. Lanes keep the source's order, a GPU's many streams busiest first; the profiler's own "
               "envelope span is the thin band.")
    picked = _pick()
    if picked is None:
        return
    df, meta, name, title = picked
    tkey = hashlib.sha1(name.encode()).hexdigest()[:8]  # widget keys per trace: a new trace starts fresh
    doc = analysis.summary(df, meta)
    c = st.columns(4)
    c[0].metric("spans", f"{doc['span_count']:,}")
    c[1].metric("lanes", f"{len(doc['tracks']):,}")
    c[2].metric("wall", fmt_ns(doc["end_ns"] - doc["start_ns"]) if doc["start_ns"] is not None else "-")
    c[3].metric("events dropped or adjusted", f"{sum(doc['dropped'].values()):,}")
    st.caption(f"format: {_md(doc['format'])}; clock: {_md(doc['clock'])}")
    if doc["dropped"]:
        st.warning(f"The importer could not use every event as the file gave it: "
                   f"{_md(analysis.dropped_text(doc['dropped']))}. Dropped events are not in the timeline or the "
                   "statistics.")
    if ranks.is_multi_rank(df):
        _section("The per-rank statistics", _ranks, df, meta)
    if doc["span_count"] == 0:
        st.info("This trace has no spans (only instants): nothing to draw or summarise.")
        return
    comm = _section("The GPU-time breakdown", _gpu_time, df, name, tkey) or ""
    shown = _section("The timeline", _timeline, df, name, title, tkey)
    # below the timeline, one part at a time (the default view stays about three screens)
    stats_tab, phases_tab = st.tabs(["Statistics (window)", "Phases"])
    with phases_tab:
        _section("The phase breakdown", _phases, df, meta)
    if shown is not None:
        with stats_tab:
            _section("The statistics", _statistics, title, tkey, *shown)
    _section("The comparison", _compare, df, name, comm)


main()
