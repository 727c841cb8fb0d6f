"""serve.py's one reach into Streamlit's internals still lands: the class attribute it sets is
the one Streamlit reads to choose the old ``pages/``-folder mode (see the comment in serve.py)."""

import inspect
import runpy

from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import script_runner

from tests.support.paths import ROOT


def test_streamlit_still_decides_the_pages_folder_mode_by_the_attribute_serve_sets(monkeypatch):
    assert "uses_pages_directory" in vars(PagesManager), "Streamlit dropped the attribute serve.py sets"
    # the first manager decides from the folder beside the main script: a pages/ folder turns the
    # old mode on, so serve.py (beside pages/) must set it off before the first session
    monkeypatch.setattr(PagesManager, "uses_pages_directory", None)
    PagesManager(str(ROOT / "serve.py"), setup_watcher=False)
    assert PagesManager.uses_pages_directory is True
    # and the script runner reads that attribute to run a page file alone
    assert "PagesManager.uses_pages_directory" in inspect.getsource(script_runner)


def test_serve_turns_the_pages_folder_mode_off_before_any_session(monkeypatch):
    monkeypatch.setattr(PagesManager, "uses_pages_directory", None)
    runpy.run_path(str(ROOT / "serve.py"))  # what `streamlit run serve.py` executes first
    assert PagesManager.uses_pages_directory is False
    # a manager made afterwards (the first session's) keeps it off, pages/ folder or not
    PagesManager(str(ROOT / "serve.py"), setup_watcher=False)
    assert PagesManager.uses_pages_directory is False
