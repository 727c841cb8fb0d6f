"""The app's WebSocket checks its Origin as the HTTP side checks its Host (issue 28): a page
served on another port of localhost (or any other origin) cannot open the app's session."""

from __future__ import annotations

import asyncio
import http.client
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.safety.hostile import ROOT


def _serve_module():
    sys.path.insert(0, str(ROOT))
    import serve  # noqa: E402  (builds the app object; serves nothing)

    return serve


@pytest.mark.parametrize("origin, host, allowed", [
    ("http://localhost:8501", "localhost:8501", True),
    ("http://127.0.0.1:8501", "127.0.0.1:8501", True),
    ("http://[::1]:8501", "[::1]:8501", True),
    ("http://localhost", "localhost", True),
    (None, "localhost:8501", True),  # no browser: nothing cross-site about it
    ("http://localhost:9999", "localhost:8501", False),  # another port of localhost
    ("http://127.0.0.1:8501", "localhost:8501", False),  # another name is another origin
    ("http://evil.example", "localhost:8501", False),
    ("https://localhost:8501", "localhost:8501", False),
    ("null", "localhost:8501", False),
    ("http://localhost:85x1", "localhost:8501", False),
])
def test_the_websocket_origin_must_be_the_server_itself(origin, host, allowed):
    serve = _serve_module()
    headers = [(b"host", host.encode())] + ([(b"origin", origin.encode())] if origin is not None else [])
    scope = {"type": "websocket", "scheme": "ws", "path": "/_stcore/stream", "headers": headers,
             "query_string": b"", "root_path": ""}
    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def receive():
        return {"type": "websocket.connect"}

    async def send(message):
        sent.append(message)

    asyncio.run(serve.SameOriginWebSocket(app)(scope, receive, send))
    assert bool(reached) == allowed, (origin, host, sent)


def test_http_requests_pass_to_the_app_whatever_their_origin():
    serve = _serve_module()
    reached = []

    async def app(scope, receive, send):
        reached.append(scope["type"])

    scope = {"type": "http", "headers": [(b"host", b"localhost:8501"), (b"origin", b"http://evil.example")]}
    asyncio.run(serve.SameOriginWebSocket(app)(scope, None, None))
    assert reached == ["http"]  # Streamlit's XSRF and CORS settings answer for HTTP


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_served_app_refuses_a_websocket_from_another_port(tmp_path):
    port = _free_port()
    env = {**os.environ, "WORKBENCH_STORE": str(tmp_path / "results.sqlite")}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        for _ in range(240):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)

        def upgrade(origin: str | None) -> int:
            con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            headers = {"Host": f"127.0.0.1:{port}", "Connection": "Upgrade", "Upgrade": "websocket",
                       "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
            if origin:
                headers["Origin"] = origin
            con.request("GET", "/_stcore/stream", headers=headers)
            status = con.getresponse().status
            con.close()
            return status

        assert upgrade(f"http://127.0.0.1:{port}") == 101
        assert upgrade(f"http://127.0.0.1:{port + 1}") == 403
        assert upgrade("http://localhost:3000") == 403
    finally:
        proc.terminate()
        proc.wait(30)
