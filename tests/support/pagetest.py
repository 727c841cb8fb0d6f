"""Study pages as the app serves them, for Streamlit's AppTest (a test helper, not the product)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.support.paths import ROOT


def study_app(study_id: str, timeout: float = 60) -> AppTest:
    """A study's page as app.py serves it: its page file when it has extras, else the generic page."""
    from workbench.seam.registry import get

    mod = get(study_id)
    page = ROOT / "pages" / f"{mod.__name__.split('.')[-1]}.py"
    if page.exists():
        return AppTest.from_file(str(page), default_timeout=timeout)
    return AppTest.from_string(f"import {mod.__name__} as study\nfrom pages._ui import study_page\nstudy_page(study)\n",
                               default_timeout=timeout)
