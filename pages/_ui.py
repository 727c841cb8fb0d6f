"""Shared UI for the pages: the generic study page, run display and downloads.

UI-side only (streamlit lives here, never in ``workbench/``). A study page is::

    import studies.<name> as study
    from pages._ui import study_page
    study_page(study)
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import streamlit as st

from workbench import jobs, report
from workbench import store as wbstore
from workbench.analysis import Analysis, analyse, charts_of, sections_of
from workbench.claims import display as claims_display
from workbench.env import REPO_ROOT, summary_line
from workbench.store import RunRecord, Store, StoreError, to_bundle
from workbench.study import ParamError, validate
from workbench.tables import results_display
from workbench.untrusted import escape, safe_stem


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
    """A check that this browser session is still connected (for :mod:`workbench.jobs`), or
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


def param_form(study: ModuleType) -> tuple[dict[str, Any] | None, bool, bool]:
    """Widgets from the study's space; returns (values or None if invalid, quick, submitted)."""
    # ?preset=NAME in the URL starts the form from that preset (shareable links, browser tests).
    preset = st.query_params.get("preset")
    if preset not in study.SPACE.presets:
        preset = None
    quick = st.toggle("Quick mode (the study's quick preset)", value=True, key=f"{study.ID}:quick",
                      disabled=preset is not None, help=f"Form started from the '{preset}' preset" if preset else None)
    defaults = study.SPACE.defaults(preset or ("quick" if quick else None))
    with st.form(f"{study.ID}:form"):
        cols = st.columns(3)
        raw = {}
        for i, p in enumerate(study.SPACE.params):
            with cols[i % 3]:
                raw[p.name] = _widget(p, defaults[p.name],
                                      key=f"{study.ID}:{preset or ('q' if quick else 'f')}:{p.name}")
        submitted = st.form_submit_button("Run", type="primary")
    try:
        values = validate(study, raw)
    except ParamError as exc:
        if submitted:
            st.error(str(exc))
        return None, quick, False
    return values, quick, submitted


# --- results -------------------------------------------------------------------------------------

def downloads(rec: RunRecord, key: str) -> None:
    """Markdown (zip with chart PNGs), notebook (zip with its bundle) and the bundle; file
    names from the run id's sanitised stem."""
    stem = safe_stem(rec.run_id)
    c1, c2, c3 = st.columns(3)
    with c1:
        if st.button("Prepare Markdown report", key=f"{key}:md"):
            with tempfile.TemporaryDirectory() as tmp:
                md = report.write_markdown(rec, Path(tmp) / f"{stem}.md")
                st.session_state[f"{key}:mdzip"] = _zip_dir(Path(tmp))
                st.session_state[f"{key}:mdtext"] = md.read_text()
        if f"{key}:mdzip" in st.session_state:
            st.download_button("Download Markdown (.zip with charts)", st.session_state[f"{key}:mdzip"],
                               file_name=f"{stem}-report.zip", mime="application/zip", key=f"{key}:mddl")
    with c2:
        if st.button("Prepare notebook", key=f"{key}:nb"):
            with tempfile.TemporaryDirectory() as tmp:
                report.write_notebook(rec, Path(tmp) / f"{stem}.ipynb")
                st.session_state[f"{key}:nbzip"] = _zip_dir(Path(tmp))
        if f"{key}:nbzip" in st.session_state:
            st.download_button("Download notebook (.zip with bundle)", st.session_state[f"{key}:nbzip"],
                               file_name=f"{stem}-notebook.zip", mime="application/zip", key=f"{key}:nbdl")
    with c3:
        # A callable: built on click, not on every rerun (it summarises every variant, up to MBs).
        st.download_button("Download result bundle (JSON)", lambda: json.dumps(to_bundle(rec), default=str),
                           file_name=f"{stem}.bundle.json", mime="application/json", key=f"{key}:bundle")
    if f"{key}:mdtext" in st.session_state:
        with st.expander("Markdown report text"):
            st.code(st.session_state[f"{key}:mdtext"], language="markdown")


def _zip_dir(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(folder))
    return buf.getvalue()


def run_key(rec: RunRecord) -> tuple:
    """What identifies a run's state for caching (a running run gains variants and a status)."""
    return (rec.study, rec.run_id, rec.status, len(rec.variants), rec.origin)


@st.cache_resource(max_entries=16, show_spinner=False)
def _analysis(key: tuple, _study: ModuleType, _rec: RunRecord) -> tuple[Analysis, dict, list[str]]:
    """The run's analysis, charts and report sections, once per run state (``key``): they
    summarise every variant with bootstrap CIs, seconds for a 100-variant sweep, and
    Streamlit reruns the page on every widget interaction."""
    a = analyse(_rec, _study)
    return a, charts_of(a), sections_of(a)


def show_run(study: ModuleType, rec: RunRecord, extras: Callable | None = None, key: str = "run") -> None:
    """Disturbance warnings, verdict, the seed's claims, results, the study's tables and charts,
    environment, downloads."""
    a, charts, sections = _analysis(run_key(rec), study, rec)
    for line in a.disturbance:
        st.warning(escape(line))
    st.markdown(f"**Verdict:** {a.verdict}")
    if len(a.claims):
        st.markdown("**The seed's claims on this machine**")
        st.dataframe(claims_display(a.claims), hide_index=True, width="stretch")
    st.caption(f"Run {escape(rec.run_id, 'code')} · {escape(rec.status)} · {escape(rec.created_utc)} UTC · machine: "
               f"{escape(summary_line(rec.env))} · origin: {escape(rec.origin)}")
    if rec.status != "complete":
        st.warning(f"This run is {escape(rec.status)}." + (f" {escape(rec.error.splitlines()[0])}"
                                                           if rec.error and rec.error.strip() else ""))
    failed = [v for v in rec.variants if not v.correct]
    if failed:
        st.error("Correctness check FAILED (times not counted): " +
                 escape("; ".join(f"{v.variant}: {v.check}" for v in failed)))
    st.dataframe(results_display(a.results), hide_index=True, width="stretch")
    for message in a.errors:
        st.error(escape(message))
    for chart in charts.values():
        st.altair_chart(chart, width="content")
    for name, df in a.tables.items():
        if name.startswith("_"):  # chart data, not for reading
            continue
        with st.expander(f"Table: {name}", expanded=False):
            st.dataframe(df, hide_index=True, width="stretch")
    for section in sections:
        st.markdown(section, unsafe_allow_html=False)
    if extras is not None:
        try:
            extras(rec, a.tables)
        except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what its page does not expect
            st.error(f"This part of the page failed: {escape(type(exc).__name__)}: {escape(exc)}")
    with st.expander("Environment and reproduce command"):
        st.code(rec.reproduce, language="bash")
        st.json(rec.env, expanded=False)
    downloads(rec, key=f"{key}:{rec.run_id}")


def seed_figures(study: ModuleType) -> None:
    seed = getattr(study, "SEED_FIGURES", None)
    if not seed:
        return
    with st.expander(f"The seed's published figures ({seed.get('machine', 'seed machine')})"):
        st.markdown(f"As published in {seed.get('source', study.SEED)}; measured on **{seed.get('machine', '?')}**, "
                    "not on this machine.")
        import pandas as pd

        for name, rows in seed.get("tables", {}).items():
            st.markdown(f"**{name}** (seed)")
            st.dataframe(pd.DataFrame(rows), hide_index=True)
        for note in seed.get("notes", []):
            st.caption(note)


# --- the page ------------------------------------------------------------------------------------

def _poll_job(study: ModuleType) -> None:
    key = f"{study.ID}:job"
    job: jobs.Job | None = st.session_state.get(key)
    if job is None:
        return

    @st.fragment(run_every=1.0)
    def _progress():
        frac, msg = job.progress()
        if not job.done:
            st.progress(frac, text=f"Running {study.ID}: {escape(msg)}")
            if st.button("Cancel run (keeps finished points)", key=f"{key}:cancel"):
                job.cancel()
            return
        st.session_state.pop(key, None)
        rc = job.returncode
        doc = job.record()
        if doc:
            st.session_state[f"{study.ID}:pick"] = doc["run_id"]  # show the run that just finished
        if rc not in (0, 1) or not doc:
            st.session_state[f"{study.ID}:last_error"] = job.error_text() or f"the run exited with code {rc}"
        job.cleanup()
        st.rerun()

    _progress()


def study_page(study: ModuleType, extras: Callable | None = None) -> None:
    """The whole page of a study: description, parameters, run, results, stored and committed runs."""
    st.title(study.TITLE)
    st.caption(f"Study `{study.ID}` · seed: {study.SEED} — {study.SEED_SUMMARY}")
    with st.expander("What this study measures", expanded=False):
        st.markdown(study.__doc__ or "")
    seed_figures(study)
    store = get_store()

    reason = study.requires(study.SPACE.defaults())
    if reason:
        # The defaults cannot run here, but other parameters may (e.g. world_size=1 on a one-GPU
        # machine): the form stays reachable and every submission is checked again.
        st.warning(f"With its default parameters this study cannot run on this machine: {reason}\n\n"
                   "Stored and committed results are shown below.")
    with st.expander("Parameters and run", expanded=reason is None):
        values, quick, submitted = param_form(study)
    if submitted and values is not None and store is not None:
        if st.session_state.get(f"{study.ID}:job") is not None:
            st.info("A run of this study is already in progress in this session.")
        else:
            refused = study.requires(values)
            if refused:
                st.error(f"Cannot run with these parameters here: {refused}")
            else:
                st.session_state.pop(f"{study.ID}:last_error", None)
                st.session_state[f"{study.ID}:job"] = jobs.start(study.ID, values, quick=False, store_path=store.path,
                                                                 owner_alive=session_alive())
    _poll_job(study)
    err = st.session_state.get(f"{study.ID}:last_error")
    if err:
        st.error(f"The last run did not complete:\n\n{escape(err, 'block')}")

    st.header("Results")
    records: dict[str, RunRecord] = {}
    labels: dict[str, str] = {}
    if store is not None:
        for r in store.runs(study=study.ID, limit=50):
            labels[r["run_id"]] = f"{r['run_id']} · {r['status']} · {r['machine']}"
    committed_recs, committed_errors = committed(study.ID)
    for rec in committed_recs:
        records[rec.run_id] = rec
        labels[rec.run_id] = f"{rec.run_id} · committed · {summary_line(rec.env)}"
    for e in committed_errors:
        st.warning(f"A committed bundle could not be read: {escape(e)}")
    if not labels:
        st.info("No runs yet. Set parameters above and press Run.")
        return
    ids = list(labels)
    if st.session_state.get(f"{study.ID}:pick") not in ids:
        st.session_state.pop(f"{study.ID}:pick", None)
    choice = st.selectbox("Run", ids, format_func=lambda i: labels[i], key=f"{study.ID}:pick")
    rec = records.get(choice) or store.load(choice)
    show_run(study, rec, extras=extras, key=study.ID)
