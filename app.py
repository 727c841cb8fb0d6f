"""Perf Study Workbench: the Streamlit entry point (``make run`` serves it on 127.0.0.1)."""

import re
from pathlib import Path

import streamlit as st

from workbench.study import registry

st.set_page_config(page_title="Perf Study Workbench", layout="wide")

PAGES = Path(__file__).parent / "pages"


def _pages():
    home = st.Page("pages/home.py", title="Home", default=True)
    runs = st.Page("pages/runs.py", title="Runs")
    tools = [home, runs]
    if (PAGES / "traces.py").exists():
        tools.append(st.Page("pages/traces.py", title="Traces"))
    studies = []
    for study_id, mod in registry().items():
        page = PAGES / f"{mod.__name__.split('.')[-1]}.py"
        if page.exists():
            studies.append(st.Page(str(page.relative_to(PAGES.parent)), title=re.split(r"[:(]", mod.TITLE)[0].strip(),
                                   url_path=study_id.replace("-", "_")))
    return {"Workbench": tools, "Studies": studies}


try:
    nav = st.navigation(_pages())
except ImportError as exc:  # a broken study module must be loud, but not a raw traceback
    st.error(f"A study module failed to load: {exc}")
    st.stop()
nav.run()
