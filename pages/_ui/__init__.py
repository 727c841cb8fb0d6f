"""Shared UI for the pages: the generic study page, assembled from its parts by what they draw.

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

The parts, one module each: ``store`` (the app's store connection, this machine), ``tables``
(tables and charts), ``forms`` (the parameter form and Run), ``progress`` (a run in progress),
``run`` (one run: lead, tabs, picker, tags and delete), ``comparison`` (B against A), ``share``
(reports and bundles to download), ``uploads`` (uploads held while shown). This module holds the
committed runs, the links between pages and the page itself; the pages import every part's
public names from here.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import streamlit as st

from workbench.results import store as wbstore
from workbench.results.catalog import Catalog
from workbench.base.env import REPO_ROOT
from workbench.base.names import seed_title
from workbench.data.record import RunRecord
from workbench.results.store import Store
from workbench.evidence.tables import MISSING  # noqa: F401 - the dash a table draws for a missing value
from workbench.base.untrusted import escape

# every part's public names, importable from pages._ui (the pages and their tests use them)
from .comparison import compare_with, comparison, show_comparison  # noqa: F401
from .forms import DEFAULTS, param_form, run_form, untested_claims  # noqa: F401
from .progress import poll_job
from .run import manage_run, pick_run, run_key, seed_figures, show, show_run  # noqa: F401
from .share import EXPORTS, downloads, preview_markdown  # noqa: F401
from .store import get_store, has_gpu, open_store, session_alive, this_machine  # noqa: F401
from .tables import TABLE_ROWS, _gaps_as_text, _styled, show_chart, show_table  # noqa: F401
from .uploads import held, release_uploads  # noqa: F401


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


#: a run shown while a new one runs: greyed, so nobody reads it as the new run's
_STALE_CSS = "<style>.st-key-wb-stale-run{opacity:.4;filter:grayscale(.9)}</style>"


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
        run_form(study, store, headers)
    poll_job(study)
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

