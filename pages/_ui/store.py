"""The app's access to the results store and to this machine: a connection of its own per
script run, whether this browser session is still connected, the machine's environment."""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from workbench.base import env as wbenv
from workbench.results.store import Store, StoreError
from workbench.base.untrusted import escape


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


@st.cache_data(ttl=600, show_spinner=False)
def this_machine() -> dict[str, Any]:
    """This machine's environment (:func:`workbench.base.env.capture`), read once in a while."""
    return wbenv.capture()


def has_gpu() -> bool:
    return bool(this_machine().get("gpu_names"))
