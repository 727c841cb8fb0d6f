"""Uploads held while their page shows them, and released when it does not."""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st


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
