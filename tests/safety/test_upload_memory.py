"""Uploads released when their page no longer needs them (issue 28): the Traces page keeps the
spans of the uploads it shows now, and nothing of one replaced, removed or left behind (the
server kept up to 8 parsed uploads of every session: 59 MB to 1.35 GB over one session)."""

from __future__ import annotations

import gc
import json
import weakref

from streamlit.testing.v1 import AppTest

from tests.safety.hostile import ROOT


def _trace(i: int, spans: int = 20_000) -> bytes:
    events = [{"ph": "X", "name": f"k{j % 50}", "cat": "kernel", "ts": j * 10 + i, "dur": 5, "pid": 1, "tid": j % 4}
              for j in range(spans)]
    return json.dumps({"traceEvents": events}).encode()


def _held(at: AppTest) -> dict:
    return dict(at.session_state["uploads:held"]) if "uploads:held" in at.session_state else {}


def _uploaded_spans(at: AppTest) -> list:
    """Weak references to the span tables the page holds for its uploads."""
    return [weakref.ref(value[0]) for value in _held(at).values()]


def test_a_replaced_upload_is_released(monkeypatch):
    at = AppTest.from_file(str(ROOT / "pages" / "traces.py"), default_timeout=120).run()
    at.radio(key="src").set_value("upload").run()
    refs = []
    for i in range(4):
        at.file_uploader(key="upload").set_value((f"t{i}.json", _trace(i), "application/json")).run()
        assert not at.exception, at.exception
        assert len(_held(at)) == 1, "only the upload shown now is held"
        refs += _uploaded_spans(at)
    gc.collect()
    assert [r() is not None for r in refs] == [False, False, False, True], "earlier uploads still in memory"


def test_an_upload_is_released_when_the_session_opens_another_page():
    """app.py drops what the Traces page held before it runs any other page."""
    class Spans:  # stands for an upload's span table
        pass

    spans = Spans()
    ref = weakref.ref(spans)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["uploads:held"] = {("trace", "some-file-id"): (spans, {})}
    del spans
    at.run()  # the home page
    assert not at.exception, at.exception
    gc.collect()
    assert _held(at) == {} and ref() is None
