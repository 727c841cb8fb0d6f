"""One run on a page: its lead (warnings, verdict, claims, key table and chart) and its tabs,
the run picker, tags, note and delete, its run group, the seed's figures."""

from __future__ import annotations

from types import ModuleType
from typing import Callable

import pandas as pd
import streamlit as st

from workbench.evidence import claims as wbclaims
from workbench.presentation import report
from workbench.results import store as wbstore
from workbench.reading.analysis import Analysis, analyse, charts_of, sections_of
from workbench.results.catalog import Header, default_run, titles
from workbench.base.env import summary_line
from workbench.base.names import seed_text, seed_title
from workbench.data.record import RunRecord
from workbench.results.store import Store, StoreError
from workbench.evidence.tables import md_table, results_display
from workbench.base.untrusted import escape

from .share import downloads
from .store import get_store, this_machine
from .tables import show_chart, show_table


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
    key_table, key_chart = _lead(study, rec, a, charts, key)
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
    _record_tabs(study, rec, a, tabs, raw, key)


def _lead(study: ModuleType, rec: RunRecord, a: Analysis, charts: dict, key: str) -> tuple[str | None, str | None]:
    """What a person reads first: warnings, the verdict and its levels, failed checks, the
    seed's claims, the run group, the key table and chart; their names."""
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
    return key_table, key_chart


def _record_tabs(study: ModuleType, rec: RunRecord, a: Analysis, tabs: dict, raw: pd.DataFrame, key: str) -> None:
    """The tabs about the record rather than its analysis: the seed, the environment, the raw
    samples, the downloads (each drawn only when open)."""
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


def show(study_id: str, run_id: str) -> None:
    """Make ``run_id`` the run a study page shows on its next run (a new widget generation,
    so the picker takes it even after the user picked another)."""
    st.session_state[f"{study_id}:show"] = run_id
    st.session_state[f"{study_id}:gen"] = st.session_state.get(f"{study_id}:gen", 0) + 1


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
