"""Perf Study Workbench: the Streamlit entry point (``make run`` serves it on 127.0.0.1).

Every registered study has a page: ``pages/<module>.py`` when the study has page extras, else
the generic :func:`pages._ui.study_page` (no file needed). Home, Runs and Traces are always
there. ``serve.py`` turns off Streamlit's old ``pages/``-folder mode, which would otherwise
list every file of ``pages/`` until this script first ran.
"""

import re
from pathlib import Path
from urllib.parse import urlparse

import streamlit as st

from workbench.seam.registry import registry

st.set_page_config(page_title="Perf Study Workbench", layout="wide")

PAGES = Path(__file__).parent / "pages"
#: the page that holds uploads while it shows them (pages._ui.held)
TRACES = st.Page("pages/traces.py", title="Traces")


def url_path(study_id: str) -> str:
    """A study page's URL path: ``/mc2_split`` for ``mc2-split``."""
    return study_id.replace("-", "_")


def _generic(study):
    """A page function for a study without a page file (st.Page takes a callable)."""
    from pages._ui import study_page

    def page():
        study_page(study)

    page.__name__ = url_path(study.ID)
    return page


def _pages():
    tools = [st.Page("pages/home.py", title="Home", default=True), st.Page("pages/runs.py", title="Runs"), TRACES]
    from pages._ui import APP_PAGES

    studies, aliases = [], []
    for study_id, mod in registry().items():
        page = PAGES / f"{mod.__name__.split('.')[-1]}.py"
        source = str(page.relative_to(PAGES.parent)) if page.exists() else _generic(mod)
        studies.append(st.Page(source, title=re.split(r"[:(]", mod.TITLE)[0].strip(), url_path=url_path(study_id)))
        APP_PAGES[study_id] = studies[-1]  # for links to it (Home's studies and recent runs)
        if url_path(study_id) != study_id:
            aliases.append(_alias(study_id))
    return {"Workbench": tools, "Studies": studies + aliases}  # the aliases are hidden


def _alias(study_id: str):
    """A hidden page at the study's id (``/cpu-reduction``, the spelling the CLI and the docs
    use) that goes to its page (``/cpu_reduction``) with the URL's query: without it that path
    opened Home under a "page not found" box."""
    from pages._ui import APP_PAGES

    def go():
        st.switch_page(APP_PAGES[study_id], query_params=dict(st.query_params))

    go.__name__ = f"alias_{url_path(study_id)}"
    return st.Page(go, title=study_id, url_path=study_id, visibility="hidden")


def _requested_path() -> str:
    """The path the browser asked for (``cpu-reductoin`` of ``/cpu-reductoin?run=...``)."""
    try:
        return urlparse(st.context.url or "").path.strip("/")
    except Exception:  # noqa: BLE001 - no browser context (AppTest, bare mode)
        return ""


def _unknown_path(nav) -> None:
    """A path that names no page opens Home under Streamlit's "page not found" box: Home says
    which page it may have meant."""
    from pages._ui import APP_PAGES

    from workbench.base.names import did_you_mean
    from workbench.base.untrusted import escape

    asked = _requested_path()
    if not asked or asked == nav.url_path or "/" in asked:
        return
    known = list(APP_PAGES) + ["runs", "traces"]
    st.warning(escape(f"There is no page at /{asked}{did_you_mean(asked.replace('_', '-'), known)}: this is Home."))


try:
    nav = st.navigation(_pages())
except ImportError as exc:  # a broken study module must be loud, but not a raw traceback
    st.error(f"A study module failed to load: {exc}")
    st.stop()
if nav.url_path == "":  # the default page: the browser may have asked for another
    _unknown_path(nav)
if nav.url_path != TRACES.url_path:  # another page: what the Traces page held goes
    from pages._ui import release_uploads

    release_uploads()
nav.run()
