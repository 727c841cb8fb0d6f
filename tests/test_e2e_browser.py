"""The app as a user meets it: a real Streamlit server driven in headless Chromium.

Chromium comes from Debian's package (``apt-get install chromium``), driven through
Playwright's Python API with ``executable_path``; nothing is downloaded at test time.
Screenshots of every page land in ``$WORKBENCH_SCREENSHOTS`` (default ``artifacts/screenshots``);
``make screenshots`` writes the README's copies to ``docs/screenshots``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from workbench.study import ParamError, registry, validate

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("Chromium is not installed: `sudo apt-get install chromium` (Debian) enables the browser tests",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

SHOTS = Path(os.environ.get("WORKBENCH_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    port = _free_port()
    env = {**os.environ, "WORKBENCH_STORE": str(tmp / "results.sqlite"), "WORKBENCH_LOCK": str(tmp / "machine.lock")}
    log = open(tmp / "streamlit.log", "w")
    # serve.py, as `make run` does: app.py behind the Host-header allow-list
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"the app did not start: {(tmp / 'streamlit.log').read_text()[-2000:]}")
    yield {"url": url, "store": Path(env["WORKBENCH_STORE"]), "tmp": tmp}
    proc.terminate()
    proc.wait(20)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


class Page:
    """A browser tab on one app page, collecting console errors."""

    def __init__(self, browser, url: str):
        self.ctx = browser.new_context(viewport={"width": 1400, "height": 2200}, accept_downloads=True)
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        # Resource failures are judged by their response below: on a deep link Streamlit probes
        # <page>/_stcore/health and host-config to find its base path, and those 404s are expected.
        self.page.on("console", lambda m: self.errors.append(m.text)
                     if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("response", lambda r: self.errors.append(f"HTTP {r.status} {r.url}")
                     if r.status >= 400 and "/_stcore/" not in r.url else None)
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))
        self.page.goto(url)
        # Every page starts with its title: waiting for it proves the script ran (on a cold
        # server the running indicator appears late, and a blank page would pass the checks).
        self.page.wait_for_selector("[data-testid='stMainBlockContainer'] h1", timeout=90_000)
        self.settle()

    def settle(self, timeout_ms: int = 60_000) -> None:
        """Wait until the script run finished (no running indicator) and the DOM settled."""
        self.page.wait_for_timeout(800)
        self.page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=timeout_ms)
        self.page.wait_for_timeout(300)

    def assert_healthy(self) -> None:
        exc = self.page.query_selector_all("[data-testid='stException']")
        assert not exc, exc[0].inner_text()[:2000]
        assert not self.errors, self.errors

    def shot(self, name: str) -> None:
        self.page.wait_for_timeout(1500)  # data frames draw on a canvas after the script finished
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def download(self, button_text: str) -> bytes:
        with self.page.expect_download(timeout=60_000) as info:
            self.page.get_by_role("button", name=button_text).click()
        return Path(info.value.path()).read_bytes()

    def close(self):
        self.ctx.close()


def _study_path(study_id: str) -> str:
    return "/" + study_id.replace("-", "_")


PAGES = [("home", "/"), ("runs", "/runs")] + (
    [("traces", "/traces")] if (ROOT / "pages" / "traces.py").exists() else []) + [
    (sid, _study_path(sid)) for sid, mod in registry().items()
    if (ROOT / "pages" / f"{mod.__name__.split('.')[-1]}.py").exists()]


def test_the_server_refuses_a_foreign_host_header(app):
    """DNS rebinding: a page of evil.example resolving to 127.0.0.1 must get nothing, on HTTP
    and on the WebSocket, while localhost and 127.0.0.1 are served."""
    import http.client

    port = int(app["url"].rsplit(":", 1)[1])

    def status(host: str, path: str = "/", websocket: bool = False) -> int:
        con = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"Host": f"{host}:{port}"}
        if websocket:
            headers |= {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        con.request("GET", path, headers=headers)
        code = con.getresponse().status
        con.close()
        return code

    assert status("localhost") == 200 and status("127.0.0.1", "/_stcore/health") == 200
    assert status("evil.example") == 400 and status("evil.example", "/_stcore/health") == 400
    assert status("evil.example", "/_stcore/stream", websocket=True) == 400
    assert status("127.0.0.1", "/_stcore/stream", websocket=True) == 101


@pytest.mark.parametrize("name, path", PAGES, ids=[p[0] for p in PAGES])
def test_every_page_loads_without_errors(app, browser, name, path):
    page = Page(browser, app["url"] + path)
    try:
        page.assert_healthy()
        page.shot(name)
    finally:
        page.close()


CPU_STUDIES = [sid for sid, mod in registry().items()
               if mod.requires(mod.SPACE.defaults("smoke")) is None
               and (ROOT / "pages" / f"{mod.__name__.split('.')[-1]}.py").exists()]


@pytest.mark.parametrize("study_id", CPU_STUDIES)
def test_study_runs_from_the_browser_and_exports_markdown(app, browser, study_id):
    """Change a parameter, run, see table and chart, download the Markdown report."""
    study = registry()[study_id]
    page = Page(browser, f"{app['url']}{_study_path(study_id)}?preset=smoke")
    try:
        p = page.page
        # Change one parameter (the first plain int: halved, or +1 where half is not allowed)
        # and check below that the stored run carries the edited value.
        rep = next((q for q in study.SPACE.params if q.kind == "int" and not q.multi and not q.choices), None)
        edited = None
        if rep is not None:
            value = study.SPACE.defaults("smoke")[rep.name]
            for candidate in (value // 2, value + 1):
                try:
                    validate(study, {rep.name: candidate}, preset="smoke")
                except ParamError:
                    continue
                edited = candidate
                break
        if edited is not None:
            box = p.get_by_label(rep.name + (f" ({rep.unit})" if rep.unit else ""), exact=True)
            box.fill(str(edited))
            box.press("Tab")  # Enter would submit the form before the Run click
        p.get_by_role("button", name="Run", exact=True).click()
        # The store starts empty and committed runs say "origin: committed:...", so a local
        # origin appears only once this run finished and the page selected it.
        p.wait_for_selector("text=origin: local", timeout=240_000)
        page.settle(240_000)
        page.assert_healthy()
        assert p.get_by_text("Verdict:").first.is_visible()
        assert p.query_selector("[data-testid='stDataFrame']") is not None
        assert p.query_selector(".vega-embed") is not None, "no chart rendered"
        page.shot(f"{study_id}-run")
        p.get_by_role("button", name="Prepare Markdown report").click()
        page.settle(120_000)
        data = page.download("Download Markdown (.zip with charts)")
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = zf.namelist()
            md_name = next(n for n in names if n.endswith(".md"))
            text = zf.read(md_name).decode()
            assert "**Verdict:**" in text and "<details>" in text
            for line in text.splitlines():
                if line.startswith("!["):
                    assert line.split("](")[1].rstrip(")") in names
        runs = json.loads(subprocess.run([sys.executable, "-m", "workbench", "--store", str(app["store"]), "runs",
                                          "--study", study_id, "--json"], capture_output=True, text=True,
                                         cwd=ROOT).stdout)
        assert runs and runs[0]["status"] == "complete"
        if edited is not None:
            assert runs[0]["params"][rep.name] == edited, "the edited widget value did not reach the run"
    finally:
        page.close()


def test_runs_page_compares_two_runs(app, browser):
    for _ in range(2):
        subprocess.run([sys.executable, "-m", "workbench", "--store", str(app["store"]), "run", "calibration",
                        "--set", "repeat=5", "--set", "threads=1", "--set", "torch=false"], cwd=ROOT,
                       env={**os.environ, "WORKBENCH_LOCK": str(app["tmp"] / "machine.lock")}, check=True,
                       capture_output=True)
    page = Page(browser, app["url"] + "/runs")
    try:
        page.assert_healthy()
        # the comparison is drawn after the run list; wait for it rather than for a fixed time
        page.page.get_by_text("A/B:").first.wait_for(state="visible", timeout=60_000)
        assert page.page.get_by_text("Verdict:").first.is_visible()
        assert page.page.get_by_text("Parameters that differ").first.is_visible()
        page.shot("runs-compare")
    finally:
        page.close()


@pytest.mark.skipif(not (ROOT / "pages" / "traces.py").exists(), reason="no Traces page")
def test_traces_page_uploads_a_trace_and_draws_the_timeline(app, browser, tmp_path):
    trace = tmp_path / "tiny.json"
    events = [{"ph": "X", "name": f"op{i}", "cat": "cpu_op", "ts": i * 10.0, "dur": 5.0, "pid": 1, "tid": 1}
              for i in range(20)]
    trace.write_text(json.dumps({"traceEvents": events}))
    page = Page(browser, app["url"] + "/traces")
    try:
        page.page.get_by_text("upload", exact=True).click()
        page.settle()
        page.page.set_input_files("input[type='file']", str(trace))
        page.settle()
        page.page.wait_for_selector(".vega-embed", timeout=60_000)
        page.assert_healthy()
        page.shot("traces-upload")
    finally:
        page.close()
