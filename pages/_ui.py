"""Shared UI for the pages: the generic study page, run display, tables, downloads, run management.

UI-side only (streamlit lives here, never in ``workbench/``). Every registered study gets a
page with no file (``app.py`` wraps :func:`study_page`); a study with page extras has
``pages/<module>.py``::

    import studies.<name> as study
    from pages._ui import study_page
    study_page(study, extras=page_extras, extras_tab="Timeline")

A study page leads with what a person reads first, from one cached analysis
(:mod:`workbench.reading.analysis`): the "run disturbed" warnings, the verdict, the seed's claims
checked on this run, the study's key table (``KEY_TABLE``) and key chart (``KEY_CHART``).
Everything else is in tabs: results, charts, tables, the page's extras, seed, environment, raw.
"""

from __future__ import annotations

import html as htmlmod
import io
import json
import re
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pandas as pd
import streamlit as st

from workbench.presentation import charts as wbcharts
from workbench.evidence import claims as wbclaims
from workbench.reading import comparison as compare
from workbench.running import jobs
from workbench.presentation import report
from workbench.results import store as wbstore
from workbench.reading.analysis import Analysis, analyse, charts_of, sections_of
from workbench.base import env as wbenv
from workbench.results.catalog import Catalog, Header, default_run, duration_text, estimate_s, titles
from workbench.base.env import REPO_ROOT, summary_line
from workbench.base.names import seed_text, seed_title
from workbench.data.record import RunRecord
from workbench.results.store import Store, StoreError, to_bundle
from workbench.seam.study import ParamError, validate
from workbench.evidence.tables import MISSING, header_text, key_columns, md_table, number_formats, readable, results_display, variants_table
from workbench.base.untrusted import escape, safe_stem

#: rows a table shows before it scrolls (the page stays a few screens tall)
TABLE_ROWS = 12


def open_store() -> Store:
    """The app's store access: a connection of its own for each script run (sessions run on
    their own threads, and a shared connection would interleave their transactions)."""
    return Store()


def get_store() -> Store | None:
    """The results store, or None with an error shown (a foreign/corrupt file is left untouched)."""
    try:
        return open_store()
    except StoreError as exc:
        st.error(f"Results store unavailable: {escape(exc)}")
        return None


def session_alive() -> Callable[[], bool] | None:
    """A check that this browser session is still connected (for :mod:`workbench.running.jobs`), or
    None where there is no server (AppTest, bare mode)."""
    from streamlit import runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None or not runtime.exists():
        return None
    session_id, rt = ctx.session_id, runtime.get_instance()
    return lambda: rt.is_active_session(session_id)


def committed(study_id: str) -> tuple[list[RunRecord], list[str]]:
    """A study's committed bundles and unreadable-bundle errors, parsed again only when a
    bundle file changes: they are up to a few MB, and Streamlit reruns the page on every
    widget interaction."""
    folder = REPO_ROOT / "traces" / study_id
    stamp = tuple(sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*.bundle.json"))) \
        if folder.is_dir() else ()
    return _committed(study_id, stamp)


@st.cache_resource(max_entries=64, show_spinner=False)
def _committed(study_id: str, stamp: tuple) -> tuple[list[RunRecord], list[str]]:
    return wbstore.committed(study_id)


#: study id -> its page in the app's navigation (app.py fills it on every run), for links
APP_PAGES: dict[str, Any] = {}


def study_link(study_id: str, label: str, run_id: str | None = None) -> None:
    """A link to a study's page (opening on ``run_id``); plain text where the page is not in
    the navigation (a page run on its own, as in the tests). ``label`` is Markdown: untrusted
    parts escaped by the caller."""
    page = APP_PAGES.get(study_id)
    if page is None:
        st.markdown(label)
        return
    st.page_link(page, label=label, query_params={"run": run_id} if run_id else None)


def catalog(store: Store | None) -> Catalog:
    """Stored and committed runs, by one id (:mod:`workbench.results.catalog`), committed ones cached."""
    return Catalog(store, committed=committed)


# --- tables --------------------------------------------------------------------------------------

def _styled(df: pd.DataFrame):
    """``df`` as the reports show it: each numeric column in its one number format
    (:func:`workbench.evidence.tables.number_formats`), a dash for a missing value (never ``<NA>`` or
    ``None``); the values stay numbers, so columns still sort by value."""
    formats = number_formats(df)
    text_cols = [c for c in df.columns if str(c) not in formats and not pd.api.types.is_bool_dtype(df[c])]
    shown = df.copy()
    for col in text_cols:  # lists and dicts as compact JSON, like the reports
        shown[col] = shown[col].map(lambda x: json.dumps(x, default=str, separators=(",", ":"))
                                    if isinstance(x, (list, dict, tuple)) else x)
    # the first format gives every column (text ones too) the dash; the second the numbers' formats
    return shown.style.format(na_rep=MISSING).format({c: f for c, f in formats.items()}, na_rep=MISSING)


def show_table(df: pd.DataFrame, key: str, max_columns: int = 10, first: tuple[str, ...] = (),
               rows: int = TABLE_ROWS) -> None:
    """A table a person can take in: one number format per column, no ``<NA>``, at most
    ``rows`` rows before it scrolls; a wide table shows the columns that differ between rows
    (constants said once above it) and the full table on demand."""
    if df is None or len(df.columns) == 0:
        st.caption("(no rows)")
        return
    df = readable(df)  # units by magnitude, a derived figure in one column, headers in words
    first = tuple(header_text(c) for c in first)
    cols, constant = (list(map(str, df.columns)), {}) if len(df.columns) <= max_columns else \
        key_columns(df, max_columns, first)
    full = len(cols) < len(df.columns) and st.toggle(f"All {len(df.columns)} columns", key=f"{key}:all")
    shown = df if full else df[cols]
    if constant and not full:
        said = {k: v for k, v in constant.items() if isinstance(v, (list, dict)) or not (pd.isna(v) or v == "")}
        empty = len(constant) - len(said)
        st.caption("; ".join(filter(None, [
            "All rows: " + escape("; ".join(f"{k} = {v}" for k, v in said.items())) if said else "",
            f"{empty} empty column{'' if empty == 1 else 's'} not shown" if empty else ""])))
    shown, config = _gaps_as_text(shown)
    config = {**_ci_widths(shown), **config}
    st.dataframe(_styled(shown), hide_index=True, width="stretch", column_config=config,
                 height=min(len(shown), rows) * 35 + 38 if len(shown) else "auto")


#: pixels per character of the grid's font, and the widest column a CI may claim
_CHAR_PX, _MAX_COLUMN_PX = 7.5, 640


def _ci_widths(df: pd.DataFrame) -> dict:
    """Text columns wide enough for their longest value (a figure with its CI, ``0.0066
    [0.0051, 0.0083]``): the grid cuts a cell at its column's width, and a CI cut in half
    reads as another number. Text columns with longer values (sentences) keep their size."""
    out = {}
    for c in df.columns:
        if not (df[c].dtype == object or pd.api.types.is_string_dtype(df[c])) or not len(df):
            continue
        longest = max((len(str(v)) for v in df[c] if v is not None), default=0)
        need = int(max(longest, len(str(c))) * _CHAR_PX + 24)
        if need > 120 and need <= _MAX_COLUMN_PX:
            out[c] = st.column_config.Column(width=need)
    return out


def _gaps_as_text(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Numeric columns with a missing value as their formatted text, right-aligned: the
    browser's grid draws a missing number as 'None' whatever the Styler says."""
    formats = number_formats(df)
    gaps = [c for c in df.columns if str(c) in formats and df[c].isna().any()]
    # text columns: a missing value is the dash too (the grid draws None as "None")
    texts = [c for c in df.columns if str(c) not in formats and df[c].dtype == object and df[c].isna().any()]
    if not gaps and not texts:
        return df, {}
    out = df.copy()
    for c in texts:
        out[c] = [MISSING if x is None or (isinstance(x, float) and x != x) else x for x in df[c]]
    for c in gaps:
        out[c] = [MISSING if pd.isna(x) else formats[str(c)](float(x)) for x in df[c]]
    return out, {c: st.column_config.TextColumn(alignment="right") for c in gaps}


def show_chart(chart) -> None:
    # "content": the chart keeps its own size (see workbench.presentation.charts); "stretch" squeezes legends
    st.altair_chart(chart, width="content")


# --- parameter widgets ---------------------------------------------------------------------------

def _widget(p, default: Any, key: str):
    label = p.name + (f" ({p.unit})" if p.unit else "")
    if p.multi:
        if p.choices:
            return st.multiselect(label, list(p.choices), default=[d for d in default if d in p.choices],
                                  help=p.help, key=key)
        return st.text_input(label, ",".join(str(d) for d in default), help=f"{p.help} (comma-separated)", key=key)
    if p.choices:
        choices = list(p.choices)
        return st.selectbox(label, choices, index=choices.index(default) if default in choices else 0, help=p.help, key=key)
    if p.kind == "bool":
        return st.checkbox(label, value=bool(default), help=p.help, key=key)
    if p.kind == "int":
        return st.number_input(label, value=int(default), min_value=int(p.min) if p.min is not None else None,
                               max_value=int(p.max) if p.max is not None else None, step=1, help=p.help, key=key)
    if p.kind == "float":
        return st.number_input(label, value=float(default), min_value=float(p.min) if p.min is not None else None,
                               max_value=float(p.max) if p.max is not None else None, help=p.help, key=key,
                               format="%g")
    return st.text_input(label, str(default), help=p.help, key=key)


@st.cache_data(ttl=600, show_spinner=False)
def this_machine() -> dict[str, Any]:
    """This machine's environment (:func:`workbench.base.env.capture`), read once in a while."""
    return wbenv.capture()


def has_gpu() -> bool:
    return bool(this_machine().get("gpu_names"))


#: the form's preset picker: this entry starts from the declared defaults
DEFAULTS = "(defaults)"


def _preset_choice(study: ModuleType) -> str | None:
    """The preset the form starts from: picked from the study's presets (each with its one
    line), ``?preset=NAME`` in the URL (shareable links, browser tests) first, else quick."""
    presets = list(study.SPACE.presets)
    url = st.query_params.get("preset")
    first = url if url in presets else "quick" if "quick" in presets else DEFAULTS
    options = [DEFAULTS] + presets
    purposes = study.SPACE.purposes
    pick = st.columns([3, 2])[0].selectbox(
        "Start from a preset", options, index=options.index(first), key=f"{study.ID}:preset",
                        format_func=lambda o: o if o == DEFAULTS else f"{o}: {purposes.get(o, '')}".rstrip(": "),
                        help="Each preset sets some knobs (the manual's page of this study lists them); "
                             "the form below starts from its values")
    return None if pick == DEFAULTS else pick


def _widget_key(study: ModuleType, preset: str | None, name: str) -> str:
    # one widget generation per preset: picking another preset starts the form from its values
    return f"{study.ID}:{'q' if preset == 'quick' else preset or 'f'}:{name}"


def param_form(study: ModuleType) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
    """The study's knobs from its space: a preset picker, the headline knobs, the rest under
    "Advanced", GPU-only knobs hidden on a machine without a GPU (their values kept). Returns
    (values or None, the error that made them invalid or None, the raw widget values)."""
    space = study.SPACE
    preset = _preset_choice(study)
    defaults = space.defaults(preset)
    hidden = [] if has_gpu() else [n for n in space.gpu_only]
    first = [space[n] for n in space.headline] if space.headline else list(space.params)
    rest = [space[n] for n in space.advanced if n not in hidden] if space.headline else []
    raw = {n: defaults[n] for n in hidden}
    cols = st.columns(3)
    for i, q in enumerate(q for q in first if q.name not in hidden):
        with cols[i % 3]:
            raw[q.name] = _widget(q, defaults[q.name], _widget_key(study, preset, q.name))
    if rest:
        with st.expander(f"Advanced ({len(rest)} more knob{'' if len(rest) == 1 else 's'})"):
            cols = st.columns(3)
            for i, q in enumerate(rest):
                with cols[i % 3]:
                    raw[q.name] = _widget(q, defaults[q.name], _widget_key(study, preset, q.name))
    if hidden:
        st.caption(f"{len(hidden)} GPU-only knob{'' if len(hidden) == 1 else 's'} hidden: no GPU on this machine (a "
                   "run keeps the preset's values).", help=f"Hidden: {', '.join(hidden)}")
    try:
        return validate(study, raw), None, raw
    except ParamError as exc:
        return None, str(exc), raw


def untested_claims(study: ModuleType, values: dict[str, Any]) -> None:
    """Under the form: which of the seed's claims these values cannot test, grouped by what
    they would need."""
    lost = wbclaims.untestable(study, values)
    if not lost:
        return
    by_need: dict[str, list[str]] = {}
    for cid, why in lost:
        by_need.setdefault(why, []).append(cid)
    n = len(getattr(study, "SEED_CLAIMS", []))
    st.warning(f"With these values the run cannot test {len(lost)} of the seed's {n} claims: " + "; ".join(
        f"{', '.join(escape(c, 'code') for c in ids)} ({escape(why)})" for why, ids in by_need.items()))


# --- reports and run management -------------------------------------------------------------------

#: report formats offered on a page: label, file suffix, MIME type
EXPORTS = {
    "issue": ("GitHub issue (one Markdown file, nothing attached)", "issue.md", "text/markdown"),
    "issue-full": ("GitHub issue, full (every table, chart and note that fits)", "issue.md", "text/markdown"),
    "md": ("Markdown with PNG charts (.zip)", "zip", "application/zip"),
    "html": ("HTML (one self-contained file)", "html", "text/html"),
    "ipynb": ("Notebook with its bundle, executed (.zip)", "zip", "application/zip"),
}


def _zip_dir(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(folder))
    return buf.getvalue()


def _export(rec: RunRecord, fmt: str, a: Analysis | None) -> bytes:
    """The report of ``rec`` in ``fmt`` as the bytes of one download."""
    stem = safe_stem(rec.run_id)
    with tempfile.TemporaryDirectory() as tmp:
        kind = fmt.removesuffix("-full")
        path = report.write_report(rec, kind, Path(tmp) / f"{stem}.{EXPORTS[fmt][1] if kind == 'issue' else fmt}",
                                   analysis=a, full=fmt.endswith("-full"))
        return _zip_dir(Path(tmp)) if EXPORTS[fmt][1] == "zip" else path.read_bytes()


def downloads(rec: RunRecord, key: str, a: Analysis | None = None) -> None:
    """Pick a report format, prepare it, download it; the result bundle; a preview of the
    issue report as GitHub renders it (:func:`preview_markdown`). File names from the run id's
    sanitised stem."""
    stem = safe_stem(rec.run_id)
    fmt = st.selectbox("Report format", list(EXPORTS), format_func=lambda f: EXPORTS[f][0], key=f"{key}:fmt")
    label, suffix, mime = EXPORTS[fmt]
    if st.button("Prepare report", key=f"{key}:prepare"):
        with st.spinner("writing the report..."):
            st.session_state[f"{key}:{fmt}"] = _export(rec, fmt, a)
    data = st.session_state.get(f"{key}:{fmt}")
    if data is not None:
        st.download_button(f"Download {label}", data, file_name=f"{stem}.{suffix}", mime=mime, key=f"{key}:{fmt}:dl")
        if fmt.startswith("issue"):
            st.caption(f"{len(data.decode()):,} characters (an issue takes up to {report.ISSUE_LIMIT:,})")
            if st.toggle("Preview (as the issue renders it)", key=f"{key}:preview"):
                with st.container(border=True):
                    preview_markdown(data.decode())
    # A callable: built on click, not on every rerun (it summarises every variant, up to MBs).
    st.download_button("Download result bundle (JSON: raw samples, environment, attachments)",
                       lambda: json.dumps(to_bundle(rec), default=str), file_name=f"{stem}.bundle.json",
                       mime="application/json", key=f"{key}:bundle")


#: a <details> block as workbench.base.untrusted.details writes it (the summary escaped there)
_DETAILS = re.compile(r"<details><summary>(.*?)</summary>\n\n(.*?)\n\n</details>", re.S)


def preview_markdown(text: str) -> None:
    """A report as GitHub renders it: Markdown (Mermaid blocks drawn by Streamlit), each
    ``<details>`` block a closed expander. No HTML is let through: the only HTML a report
    holds is its own <details> blocks, and they become expanders here."""
    at = 0
    for m in _DETAILS.finditer(text):
        if text[at:m.start()].strip():
            st.markdown(text[at:m.start()])
        with st.expander(escape(htmlmod.unescape(m.group(1)))):
            st.markdown(m.group(2))
        at = m.end()
    if text[at:].strip():
        st.markdown(text[at:])


def manage_run(store: Store | None, header: Header, key: str) -> None:
    """Tags and a note for the run (kept in the store, committed runs too); delete a stored
    run after a confirmation."""
    if store is None:
        return
    c1, c2 = st.columns(2)  # the caller gives them their width
    with c1.popover("Tags and note", width="stretch"):
        tags = st.text_input("Tags (plain words, space-separated)", " ".join(header.tags), key=f"{key}:tags")
        note = st.text_area("Note", header.note, key=f"{key}:note", max_chars=wbstore.MAX_NOTE_CHARS)
        if st.button("Save", key=f"{key}:save"):
            wanted = tags.split()
            try:
                store.annotate(header.run_id, add=wanted, remove=[t for t in header.tags if t not in wanted], note=note)
                st.rerun()
            except StoreError as exc:
                st.error(escape(exc))
    with c2.popover("Delete run", width="stretch", disabled=header.origin == "committed",
                    help="A committed run is a file under traces/ in the checkout" if header.origin == "committed"
                    else None):
        st.markdown(f"Delete run {escape(header.run_id, 'code')} ({escape(header.title())}) and its "
                    f"{header.variants} points from the store? This cannot be undone.")
        sure = st.checkbox("Yes, delete this run", key=f"{key}:sure")
        if st.button("Delete", type="primary", disabled=not sure, key=f"{key}:delete"):
            try:
                store.delete(header.run_id)
                st.session_state[f"{key}:deleted"] = header.run_id
                st.rerun()
            except (StoreError, KeyError) as exc:
                st.error(escape(exc))


# --- uploads ---------------------------------------------------------------------------------------

_HELD, _SHOWN = "uploads:held", "uploads:shown"


def held(key: tuple, make: Callable[[], Any]) -> Any:
    """What ``make()`` gives for ``key`` (naming an upload by its file id), made once for this
    session and kept while its page shows it: :func:`release_uploads` drops what the page's
    last run did not ask for. An upload's parsed content lives no longer than its page needs
    it (``st.cache_data`` would keep it for every session until evicted)."""
    store = st.session_state.setdefault(_HELD, {})
    if key not in store:
        store[key] = make()
    st.session_state.setdefault(_SHOWN, set()).add(key)
    return store[key]


def release_uploads() -> None:
    """Drop what :func:`held` keeps that this page run did not ask for (all of it on a page
    that holds no uploads: app.py calls this before every other page)."""
    shown = st.session_state.pop(_SHOWN, set())
    store = st.session_state.get(_HELD, {})
    for key in [k for k in store if k not in shown]:
        del store[key]


# --- one run -------------------------------------------------------------------------------------

def run_key(rec: RunRecord) -> tuple:
    """What identifies a run's state for caching (a running run gains variants and a status)."""
    return (rec.study, rec.run_id, rec.status, len(rec.variants), rec.origin)


@st.cache_resource(max_entries=32, show_spinner="analysing the run...")
def _analysis(key: tuple, _study: ModuleType, _rec: RunRecord) -> tuple[Analysis, dict, list[str]]:
    """The run's analysis, charts and report sections, once per run state (``key``): they
    summarise every variant with bootstrap CIs, seconds for a 100-variant sweep, and
    Streamlit reruns the page on every widget interaction."""
    a = analyse(_rec, _study)
    return a, charts_of(a), sections_of(a)


@st.cache_resource(max_entries=32, show_spinner=False)
def _displays(key: tuple, _a: Analysis) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The results table and the raw samples' summary as shown, once per run state."""
    return results_display(_a.results), report.samples_summary(_a.rec)


def show_run(study: ModuleType, rec: RunRecord, extras: Callable | None = None, key: str = "run",
             extras_tab: str = "Details") -> None:
    """The run as a person takes it in: disturbance warnings, verdict, the seed's claims, the
    key table and the key chart; everything else in tabs."""
    a, charts, sections = _analysis(run_key(rec), study, rec)
    if a.disturbance:  # one box: each warning is a sentence, and boxes stack up the page
        st.warning("\n\n".join(escape(line) for line in a.disturbance))
    if rec.status != "complete":
        st.warning(f"This run is {escape(rec.status)}." + (f" {escape(rec.error.splitlines()[0])}"
                                                           if rec.error and rec.error.strip() else ""))
    st.markdown(f"**Verdict:** {a.verdict}")
    st.caption(escape(a.levels))
    failed = [v for v in rec.variants if not v.correct]
    if failed:
        st.error("Correctness check FAILED (times not counted): " +
                 escape("; ".join(f"{v.variant}: {v.check}" for v in failed)))
    for message in a.errors:
        st.error(escape(message))
    if len(a.claims):
        # Markdown, not a data frame: the claims are sentences, and a grid cuts them off. The
        # status and both figures lead; the reasons and the seed's words, which make the table
        # several screens tall, open on demand.
        st.markdown(report.claims_markdown(a.claims, wbclaims.LEAD_COLUMNS, level=5, why_at="below"))
        with st.expander("Why each claim has its status, and the seed's own words"):
            st.markdown(md_table(wbclaims.display(a.claims)[wbclaims.WHY_COLUMNS]))
    group = rec.outputs.get("run_group") if isinstance(rec.outputs, dict) else None
    if isinstance(group, dict) and isinstance(group.get("id"), str):
        _show_group(study, rec, group["id"])
    key_table, key_chart = report.key_names(a, charts)
    if key_table:
        st.markdown(f"**{report.table_title(a, key_table)}**", help=f"table `{key_table}` in the API and the bundle")
        show_table(report.shown_table(a, key_table), key=f"{key}:key")
    if key_chart:
        show_chart(charts[key_chart])
    tables = {n: df for n, df in a.tables.items() if not n.startswith("_") and n != key_table}
    other_charts = {n: c for n, c in charts.items() if n != key_chart}
    names = ["Results", f"Charts ({len(other_charts)})", f"Tables ({len(tables)})"] + \
        (["Notes"] if sections else []) + ([extras_tab] if extras else []) + \
        ["Seed", "Environment", "Raw samples", "Share"]
    # Lazy tabs: only the open tab's content runs, so switching runs draws the lead and one
    # table, not every chart and table of the run. One widget per run: a new run opens on Results.
    tabs = dict(zip(names, st.tabs(names, key=f"{key}:tabs:{rec.run_id}", on_change="rerun")))
    results, raw = _displays(run_key(rec), a)
    if tabs["Results"].open:
        with tabs["Results"]:
            show_table(results, key=f"{key}:results", max_columns=8)
    if sections and tabs["Notes"].open:
        with tabs["Notes"]:
            for section in sections:
                st.markdown(section)
    if tabs[names[1]].open:
        with tabs[names[1]]:
            for chart in other_charts.values():
                show_chart(chart)
            if not other_charts:
                st.caption("No other charts.")
    if tabs[names[2]].open:
        with tabs[names[2]]:
            for name in tables:
                st.markdown(f"**{report.table_title(a, name)}**", help=f"table `{name}` in the API and the bundle")
                show_table(report.shown_table(a, name), key=f"{key}:t:{name}")
            if not tables:
                st.caption("No other tables.")
    if extras and tabs[extras_tab].open:
        with tabs[extras_tab]:
            try:
                extras(rec, a.tables)
            except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what its page does not expect
                st.error(f"This part of the page failed: {escape(type(exc).__name__)}: {escape(exc)}")
    if tabs["Seed"].open:
        with tabs["Seed"]:
            seed_figures(study)
    if tabs["Environment"].open:
        with tabs["Environment"]:
            st.markdown(f"Machine: {escape(summary_line(rec.env))}")
            st.markdown("Reproduce this run:")
            st.code(rec.reproduce, language="bash")
            st.json(rec.env, expanded=False)
    if tabs["Raw samples"].open:
        with tabs["Raw samples"]:
            st.caption("Per variant, summarised; every sample is in the result bundle (Share tab).")
            show_table(raw, key=f"{key}:raw", max_columns=8)
    if tabs["Share"].open:
        with tabs["Share"]:
            downloads(rec, key=f"{key}:{rec.run_id}", a=a)


@st.cache_resource(max_entries=8, show_spinner=False)
def _group_markdown(run_ids: tuple[str, ...], _records: tuple, _study: ModuleType) -> str:
    from workbench.reading import across

    return across.markdown(across.summary([analyse(r, _study) for r in _records]))


def _show_group(study: ModuleType, rec: RunRecord, group_id: str) -> None:
    """A run of a ``--repeat-runs`` group: each derived number per run and across the group's
    runs, the claims judged across them (:mod:`workbench.reading.across`), in an expander."""
    store = get_store()
    if store is None:
        return
    same = [h["run_id"] for h in store.runs(study=study.ID, limit=200) if h["params"] == rec.params]
    runs = [r for r in (store.load(i, attachments=False) for i in same)
            if isinstance(r.outputs.get("run_group"), dict) and r.outputs["run_group"].get("id") == group_id]
    if len(runs) < 2:
        return
    runs.sort(key=lambda r: r.created_utc)
    with st.expander(f"Across the {len(runs)} runs of this run group (the run-to-run level)"):
        st.markdown(_group_markdown(tuple(r.run_id for r in runs), tuple(runs), study))


def seed_figures(study: ModuleType) -> None:
    """The seed's published figures, labelled as the seed's with its machine."""
    seed = getattr(study, "SEED_FIGURES", None)
    st.markdown(f"Seed: {escape(seed_title(study))} — {escape(study.SEED_SUMMARY)}", help=f"seed file `{study.SEED}`")
    if not seed:
        st.caption("This study has no seed figures.")
        return
    st.markdown(f"As published in {seed_text(seed.get('source'), study)}; measured on **{seed.get('machine', '?')}**, "
                "not on this machine.")
    for name, rows in seed.get("tables", {}).items():
        st.markdown(f"**{name}** (seed)")
        show_table(pd.DataFrame(rows), key=f"{study.ID}:seed:{name}")
    for note in seed.get("notes", []):
        st.caption(note)


# --- a run in progress -----------------------------------------------------------------------------

def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _live_table(job: jobs.Job) -> pd.DataFrame:
    """The variants a running job stored so far, as the results table (recomputed only when
    one arrived: each is a bootstrap)."""
    state = job.state
    stamp = (state.run_id, tuple((v.variant, len(v.samples_ns)) for v in state.variants.values()))
    cached = st.session_state.get(f"{job.study}:live")
    if cached is None or cached[0] != stamp:
        rec = RunRecord(run_id=state.run_id or "pending", study=job.study, params={}, env={},
                        variants=list(state.variants.values()))
        cached = (stamp, results_display(variants_table(rec)))
        st.session_state[f"{job.study}:live"] = cached
    return cached[1]


def show(study_id: str, run_id: str) -> None:
    """Make ``run_id`` the run a study page shows on its next run (a new widget generation,
    so the picker takes it even after the user picked another)."""
    st.session_state[f"{study_id}:show"] = run_id
    st.session_state[f"{study_id}:gen"] = st.session_state.get(f"{study_id}:gen", 0) + 1


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _finished(study: ModuleType, job: jobs.Job) -> None:
    """A job ended: show its run, and say how it ended (a cancel is not an error)."""
    state = job.poll()
    doc = job.record()
    run_id = (doc or {}).get("run_id") or state.run_id
    kept, took = len(state.variants), _elapsed(job.elapsed_s())
    notice = f"{study.ID}:notice"
    if job.was_cancelled or job.returncode == 130:
        if kept:
            show(study.ID, run_id)
            st.session_state[notice] = ("info", f"Run cancelled after {took}: {_plural(kept, 'finished variant')} "
                                                f"kept in run `{run_id}` (shown below).")
        else:
            st.session_state[notice] = ("info", f"Run cancelled after {took}, before any variant finished: nothing "
                                                "was measured" + (f" (run `{run_id}` is stored without variants)."
                                                                  if run_id else "."))
    elif doc:
        show(study.ID, run_id)
        variants = len(doc.get("variants", []))
        # the progress counted the study's steps (compiles, profiles, rounds too): say how the two relate
        steps = state.step[1] if state.step else None
        also = (f" from its {steps} {state.step[2]} (compiling, profiling and interleaved rounds are steps, not "
                "variants)" if steps is not None and steps != variants else "")
        st.session_state[notice] = ("success", f"Run `{run_id}` finished in {took}: {_plural(variants, 'variant')}"
                                               f"{escape(also)} (shown below).")
    else:
        if run_id:
            show(study.ID, run_id)  # a failed run keeps its finished variants and says why
        st.session_state[f"{study.ID}:last_error"] = job.error_text() or f"the run exited with code {job.returncode}"
    job.cleanup()


def _eta(job: jobs.Job, fraction: float, estimate: float | None) -> str:
    """About how long the run has left: from its progress once it has some, else from the
    form's estimate."""
    took = job.elapsed_s()
    if fraction >= 0.05:
        left = took * (1 - fraction) / fraction
    elif estimate:
        left = max(estimate - took, 0)
    else:
        return ""
    return f"about {duration_text(left)} left"


#: scrolls the progress bar into view when Run left it below the screen (our own constant
#: script; nothing from a run reaches it)
_INTO_VIEW = """<script>(() => { let tries = 0; const t = setInterval(() => {
  const bar = document.querySelector('[data-testid=stProgress]');
  if (!bar && ++tries < 40) return;
  clearInterval(t);
  if (bar) { const r = bar.getBoundingClientRect();
    if (r.top < 0 || r.bottom + 60 > window.innerHeight) bar.scrollIntoView({block: 'center'}); }
}, 100); })();</script>"""


def _poll_job(study: ModuleType) -> None:
    """The run in progress, right under the Run button: its bar in one unit (the study's
    steps, "3 of 12 points"), elapsed time and time left, Cancel, and each variant's row as
    it lands."""
    key = f"{study.ID}:job"
    job: jobs.Job | None = st.session_state.get(key)
    if job is None:
        return

    @st.fragment(run_every=1.0)
    def _progress():
        state = job.poll()
        fraction, message = job.progress()
        if job.done:
            st.session_state.pop(key, None)
            _finished(study, job)
            st.rerun()
        parts = [f"{state.step[0]} of {state.step[1]} {state.step[2]}" if state.step else "starting",
                 f"{_elapsed(job.elapsed_s())} elapsed",
                 _eta(job, fraction, st.session_state.get(f"{study.ID}:estimate")),
                 f"run `{state.run_id}`" if state.run_id else "waiting for the machine"]
        st.progress(fraction, text=f"Running {escape(study.TITLE)}: {escape(message)}")
        if not st.session_state.get(f"{key}:seen"):  # once per run: bring the bar into view
            st.session_state[f"{key}:seen"] = True
            st.html(_INTO_VIEW, unsafe_allow_javascript=True)
        st.caption(" · ".join(p for p in parts if p))
        if job.cancelled is None:
            if st.button("Cancel run (keeps the finished variants)", key=f"{key}:cancel"):
                job.cancel()
        else:
            st.caption("Cancelling: the finished variants are being stored...")
        kept = len(state.variants)
        if kept:
            st.markdown(f"**This run so far** ({_plural(kept, 'variant')}, each as it lands):")
            show_table(_live_table(job), key=f"{key}:live", max_columns=8, rows=8)

    _progress()


# --- the page ------------------------------------------------------------------------------------

def _start(study: ModuleType, values: dict[str, Any], store: Store, headers: list[Header]) -> str | None:
    """Start a run of ``values``; the reason it cannot start, or None."""
    if st.session_state.get(f"{study.ID}:job") is not None:
        return "A run of this study is already in progress in this session."
    refused = study.requires(values)
    if refused:
        return f"Cannot run with these parameters here: {refused}"
    for k in ("last_error", "notice", "live", "job:seen"):
        st.session_state.pop(f"{study.ID}:{k}", None)
    st.session_state[f"{study.ID}:estimate"] = estimate_s(study, values, headers, this_machine()["fingerprint"])[0]
    st.session_state[f"{study.ID}:job"] = jobs.start(study.ID, values, store_path=store.path,
                                                     owner_alive=session_alive())
    return None


@st.fragment
def _form_and_run(study: ModuleType, store: Store | None, headers: list[Header]) -> None:
    """The knobs, what they imply (duration, claims they leave untested) and Run, as one
    fragment: a knob's change reruns this part only; Run starts the job and reruns the page
    (its progress shows right under the button, the run shown below greys out)."""
    values, error, _ = param_form(study)
    if values is not None:
        untested_claims(study, values)
    c1, c2 = st.columns([1, 9], vertical_alignment="center")
    if values is not None:
        c2.caption(f"Estimated duration: {escape(estimate_s(study, values, headers, this_machine()['fingerprint'])[1])}")
    if c1.button("Run", type="primary", key=f"{study.ID}:run", width="stretch"):
        problem = error or (None if store is not None else "no results store to keep the run in")
        problem = problem or _start(study, values, store, headers)
        if problem:
            st.error(escape(problem))  # next to the button, where the eye is
        else:
            st.rerun()


#: a run shown while a new one runs: greyed, so nobody reads it as the new run's
_STALE_CSS = "<style>.st-key-wb-stale-run{opacity:.4;filter:grayscale(.9)}</style>"


def pick_run(study: ModuleType, headers: list[Header]) -> Header:
    """The run picker: every run of the study by its label, origin, machine and time; the run
    :func:`show` named (or ``?run=`` in the URL), else :func:`workbench.results.catalog.default_run`."""
    ids = [h.run_id for h in headers]
    by_id = {h.run_id: h for h in headers}
    # ?run=ID in the URL (a link to one run) counts until the page shows another
    wanted = st.session_state.get(f"{study.ID}:show") or st.query_params.get("run") or \
        default_run(headers, study, this_machine()["fingerprint"]).run_id
    gen = st.session_state.get(f"{study.ID}:gen", 0)
    choice = st.selectbox(f"Run ({len(ids)})", ids, index=ids.index(wanted) if wanted in ids else 0,
                          format_func=titles(headers).__getitem__, key=f"{study.ID}:pick:{gen}")
    return by_id[choice]


@st.cache_resource(max_entries=16, show_spinner="comparing the runs...")
def _comparison(key_a: tuple, key_b: tuple, n_runs: int, _a: RunRecord, _b: RunRecord, _runs: Catalog) -> dict:
    """The A/B comparison, once per pair of run states and number of runs (A/A runs among
    them change the verdicts); it bootstraps every common variant."""
    return compare.compare_runs(_a, _b, compare.history(_a, _b, _runs.store, _runs.committed(_a.study)))


def comparison(a: RunRecord, b: RunRecord, runs: Catalog, n_runs: int) -> dict:
    """B against A (:func:`workbench.reading.comparison.compare_runs`), with the A/A runs of the store and
    the committed bundles; ``n_runs``: how many runs there are (a new one may be an A/A pair)."""
    return _comparison(run_key(a), run_key(b), n_runs, a, b, runs)


def show_comparison(cmp: dict) -> None:
    """An A/B comparison: its forest plot of B/A per variant with CIs, then the verdict and
    the tables (:func:`workbench.reading.comparison.markdown`)."""
    forest = compare.forest_table(cmp)
    if forest["ratio"].notna().any():
        show_chart(wbcharts.forest(forest))
    else:
        st.caption("No variant has a ratio to draw: none has valid samples in both runs.")
    st.markdown(compare.markdown(cmp, level=4, reproduce=False))


def compare_with(study: ModuleType, runs: Catalog, header: Header, headers: list[Header], slot) -> None:
    """"Compare with...": another run of this study against the one shown (A), as an A/B
    forest plot below the run's buttons (``slot``)."""
    others = [h.run_id for h in headers if h.run_id != header.run_id]
    names = {i: f"{i} · {t}" for i, t in titles(headers).items()}  # the run id first: alike labels told apart
    other = st.selectbox("Compare with...", others, index=None, format_func=names.__getitem__,
                         placeholder="Compare with another run of this study...", key=f"{study.ID}:cmp:{header.run_id}",
                         label_visibility="collapsed")
    if not other:
        return
    a, b = runs.load(header.run_id), runs.load(other)
    with slot.expander(f"A/B: {escape(names[other])} (B) against the run shown (A)", expanded=True):
        try:
            show_comparison(comparison(a, b, runs, len(headers)))
        except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what no analysis expects
            st.error(f"The comparison failed: {escape(type(exc).__name__)}: {escape(exc)}")


def study_page(study: ModuleType, extras: Callable | None = None, extras_tab: str = "Details") -> None:
    """The whole page of a study: what it measures, parameters and run (progress right under
    Run), the run shown (its lead and tabs), every stored and committed run to pick from."""
    st.title(study.TITLE)
    st.caption(f"Study `{study.ID}` · seed: {escape(seed_title(study))} — {escape(study.SEED_SUMMARY)}")
    store = get_store()
    runs = catalog(store)
    headers = runs.headers(study=study.ID)
    reason = study.requires(study.SPACE.defaults())
    if reason:
        # The defaults cannot run here, but other parameters may (e.g. world_size=1 on a one-GPU
        # machine): the form stays reachable and every submission is checked again.
        st.warning(f"With its default parameters this study cannot run on this machine: {escape(reason)}. Stored "
                   "and committed results are shown below.")
    with st.expander("What this study measures"):
        st.markdown(study.__doc__ or "")
    running = st.session_state.get(f"{study.ID}:job") is not None
    with st.expander("Parameters and run", expanded=not headers or running or st.query_params.get("preset") is not None):
        _form_and_run(study, store, headers)
    _poll_job(study)
    notice = st.session_state.get(f"{study.ID}:notice")
    if notice:
        (st.success if notice[0] == "success" else st.info)(notice[1])
    err = st.session_state.get(f"{study.ID}:last_error")
    if err:
        st.error(f"The last run did not complete:\n\n{escape(err, 'block')}")
    for e in runs.committed_errors(study.ID):
        st.warning(f"A committed bundle could not be read: {escape(e)}")
    if not headers:
        st.info("No runs yet. Set parameters above and press Run.")
        return
    st.divider()
    if running:
        st.html(_STALE_CSS)
        st.caption("Greyed below: the run shown before this one started. The new run's variants appear above as "
                   "they land; it is shown here when it ends.")
    with st.container(key="wb-stale-run" if running else "wb-run"):
        header = pick_run(study, headers)
        st.caption(f"Run {escape(header.run_id, 'code')} · {escape(header.origin)} ({escape(header.source)}) · "
                   f"{escape(header.machine)} · {escape(header.when())}"
                   + (f" · note: {escape(header.note)}" if header.note else ""))
        c1, c2 = st.columns([2, 5], vertical_alignment="center")
        with c1:
            manage_run(store, header, key=f"{study.ID}:manage:{header.run_id}")  # a bad run can still be deleted
        slot = st.container()

        def show() -> None:
            rec = runs.load(header.run_id)
            with c2:
                compare_with(study, runs, header, headers, slot)
            show_run(study, rec, extras=extras, key=study.ID, extras_tab=extras_tab)

        shown_defensively(show, f"Run {header.run_id}")


def shown_defensively(show: Callable[[], None], what: str) -> None:
    """``show()`` what is made of stored runs; whatever they hold that breaks it (a run stored
    by an older workbench from a bundle it did not type-check, a damaged row) is one error box
    naming ``what``, and the rest of the page stays."""
    try:
        show()
    except Exception as exc:  # noqa: BLE001 - one bad run must not break the page for every run
        st.error(f"{escape(what)} cannot be shown: {escape(type(exc).__name__)}: {escape(exc)}")
