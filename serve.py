"""Serves the workbench app (``app.py``) on localhost with a Host-header allow-list.

``make run`` starts this file (``streamlit run serve.py``). Streamlit answers any Host
header, so a web page could reach a local app by DNS rebinding (a name of the attacker's
that resolves to 127.0.0.1). Starlette's ``TrustedHostMiddleware`` answers 400 to every
request, HTTP or WebSocket, whose Host is not ``localhost``, ``127.0.0.1``, ``[::1]``, the
configured ``server.address`` or a name listed in ``$WORKBENCH_ALLOWED_HOSTS``
(comma-separated; for ``HOST=0.0.0.0`` at your own risk). A WebSocket (the app's session) is
also refused, 403, when its ``Origin`` is not this server itself: a page served on another
port of localhost passes the Host check, as its browser connects to ``localhost:8501``, but
says where it comes from (:class:`SameOriginWebSocket`). The upload limit
(``server.maxUploadSize``), XSRF and CORS protection stay Streamlit's, set in
``.streamlit/config.toml``.

It also turns off Streamlit's first multipage mode, which a ``pages/`` folder beside the app
switches on until ``app.py`` calls ``st.navigation``: a cold server whose first request was
``/traces`` ran ``pages/traces.py`` alone, narrow, with a sidebar listing every file of
``pages/`` (``_ui`` too) that led to "Page not found", for every session after it.
"""

import os
from urllib.parse import urlsplit

import streamlit as st
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import PlainTextResponse
from streamlit import config
from streamlit.runtime.pages_manager import PagesManager

# app.py always runs and declares the pages itself (st.navigation); see the docstring. No public
# setting does this in Streamlit 1.67: PagesManager decides "pages/ beside the main script means
# the old multipage mode" when its first instance is made, and only st.navigation() resets it,
# which a cold server's first request to /traces never reaches (client.showSidebarNavigation
# hides the sidebar but still runs pages/traces.py alone). The folder keeps its name (pages/ is
# one of the product's fixed top-level folders), so the class attribute is set before any
# session starts; tests/pages/test_serve.py fails when Streamlit renames or drops it.
PagesManager.uses_pages_directory = False


def allowed_hosts() -> list[str]:
    hosts = ["localhost", "127.0.0.1", "[::1]"]
    address = config.get_option("server.address")
    if address and address not in ("0.0.0.0", "::"):
        hosts.append(address)
    hosts += [h.strip() for h in os.environ.get("WORKBENCH_ALLOWED_HOSTS", "").split(",") if h.strip()]
    return hosts


class SameOriginWebSocket:
    """ASGI middleware: a WebSocket whose ``Origin`` header names another scheme, host or port
    than the ``Host`` it connects to gets 403 before the app sees it. Browsers always send
    ``Origin`` on a WebSocket (a program without one is no page of another site); the app's
    own page connects from its own origin."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket" and not same_origin(Headers(scope=scope), scope.get("scheme", "ws")):
            await PlainTextResponse("Cross-origin WebSocket refused", status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def same_origin(headers: Headers, scheme: str) -> bool:
    """Whether the request's ``Origin`` (if any) is the server it was sent to."""
    origin = headers.get("origin")
    if origin is None:
        return True
    parts = urlsplit(origin.strip().lower())
    web = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    try:
        port = parts.port or default
    except ValueError:  # a port that is no number
        return False
    host = (headers.get("host") or "").strip().lower()
    if not parts.hostname or parts.scheme != web or not host:
        return False
    want = f"{parts.hostname}:{port}" if ":" not in parts.hostname else f"[{parts.hostname}]:{port}"
    have = host if host.rsplit(":", 1)[-1].isdigit() and not host.endswith("]") else f"{host}:{default}"
    return want == have


app = st.App("app.py", middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts()),
                                   Middleware(SameOriginWebSocket)])
