"""The app as a user meets it: a real Streamlit server driven in headless Chromium at 1600x1000.

Every page is opened (Home, Runs, Traces with each example trace, each study with a committed
run and with a fresh smoke run from its page) and every chart that becomes visible, in the lead
and in the chart tabs, must have a real size and drawn marks, not only axes
(:func:`chart_problems`). A page's default view is at most about three screens tall.

Chromium comes from Debian's package (``apt-get install chromium``), driven through
Playwright's Python API with ``executable_path``; nothing is downloaded at test time.
Screenshots of every page land in ``$WORKBENCH_SCREENSHOTS`` (default ``artifacts/screenshots``);
``make screenshots`` writes the committed copies (README and docs/) to ``docs/screenshots``.

A study whose charts do not draw yet is marked ``xfail(strict=True)`` in :data:`KNOWN_BROKEN`
with the reason; its engineer removes the mark with the fix (a strict xfail that passes fails).
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
from pathlib import Path

import pytest

from workbench.results.store import committed_runs
from workbench.seam.registry import registry
from workbench.seam.study import ParamError, validate
from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("Chromium is not installed: `sudo apt-get install chromium` (Debian) enables the browser tests",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")

SHOTS = Path(os.environ.get("WORKBENCH_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))
VIEWPORT = {"width": 1600, "height": 1000}
#: the default view of a page is at most about this many screens tall
MAX_SCREENS = 3.3
#: a chart smaller than this (px) is a sliver or a strip, not a chart
MIN_CHART_W, MIN_CHART_H = 150, 100

#: the app's root once the script run (or a fragment's) ended
NOT_RUNNING = "[data-testid='stApp'][data-test-script-state='notRunning']"
#: page id -> why its charts do not draw yet (each study's engineer removes their own mark)
KNOWN_BROKEN: dict[str, str] = {}
#: most knobs a study's form shows before "Advanced" (the preset picker not counted)
MAX_FIRST_FIELDS = 8


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


# Per visible chart (in the lead, or in the open tab): its size, the size of each plot (Vega's
# root frame, or each facet cell), its title, and how many data marks it drew. SVG: items of
# Vega's mark groups (not axes, legends or titles) that have an area (bars, areas, points) or a
# length (lines, rules); a bar of height 0 is not drawn. Canvas: counted from pixels in Python.
_CHARTS_JS = """(scope) => [...document.querySelectorAll('.vega-embed')].filter(e => e.offsetParent !== null
    && (scope === 'tab') === (e.closest('[role=tabpanel]') !== null)).map((e, i) => {
  const r = e.getBoundingClientRect();
  const svg = e.querySelector('svg.marks');
  const title = e.querySelector('.role-title-text');
  let marks = null, plots = [];
  if (svg) {
    const size = p => { const b = p.getBBox(); return [b.width, b.height]; };
    const root = svg.querySelector('g.role-frame.root > g > path.background');
    const cells = [...svg.querySelectorAll('g.role-scope.cell > g > path.background')].map(size);
    plots = cells.length ? cells.map(c => c.concat(['cell'])) : (root ? [size(root).concat(['view'])] : []);
    marks = 0;
    for (const item of svg.querySelectorAll('g.role-mark > *')) {
      const kind = item.parentNode.getAttribute('class').split(' ')[0];
      if (kind === 'mark-text') continue;  // labels are not data marks
      const b = item.getBBox ? item.getBBox() : {width: 0, height: 0};
      const style = getComputedStyle(item);
      if (style.opacity === '0' || style.visibility === 'hidden') continue;
      const linear = kind === 'mark-line' || kind === 'mark-rule' || kind === 'mark-trail';
      if (linear ? b.width + b.height >= 3 : b.width >= 1 && b.height >= 1) marks += 1;
    }
  }
  const id = scope + i;
  e.setAttribute('data-wb-chart', id);
  return {id, w: r.width, h: r.height, plots, title: title ? title.textContent : '',
          renderer: svg ? 'svg' : 'canvas', marks};
})"""
#: a plot area smaller than this (px) is squashed: one view, or one facet cell (a timeline's
#: facet row may be a thin band of lanes)
MIN_PLOT = {"view": (80, 60), "cell": (60, 30)}


def _coloured_pixels(png: bytes) -> int:
    """Pixels that are neither white nor grey: the data marks of a canvas chart (axes, grid,
    labels and titles are black, grey or white)."""
    from PIL import Image

    im = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for r, g, b in im.getdata() if max(r, g, b) - min(r, g, b) > 40)


class Page:
    """A browser tab on one app page at 1600x1000, collecting console errors."""

    def __init__(self, browser, url: str):
        self.ctx = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
        # A click or locator waits as long as settle() does: a lazy tab's rerun can start after
        # settle's first look on a loaded 2-core machine, and then take longer than Playwright's
        # default 30 s (the mc2-split page's Share tab did, in a fresh-clone CI run under load)
        self.ctx.set_default_timeout(90_000)
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

    def settle(self, timeout_ms: int = 90_000) -> None:
        """Wait until the script run finished (no running indicator) and the page stopped
        growing (data frames and charts draw after the script)."""
        self.page.wait_for_timeout(800)
        self.page.wait_for_selector(NOT_RUNNING, timeout=timeout_ms)
        last = -1
        for _ in range(20):
            self.page.wait_for_timeout(500)
            height = self.height()
            if height == last:
                break
            last = height

    def open_tab(self, tab, shows: str | None = None) -> None:
        """Click a tab (a locator) until it is the selected one and, with ``shows``, until the
        text ``shows`` is visible in it. A lazy tab reruns the script on a click; on a loaded
        2-core machine a click that lands while the previous rerun is only starting can be
        dropped (a fresh-clone CI run waited 90 s for the Share tab's button): it is clicked
        again, as a user would, at most three times, and then the test fails."""
        for _ in range(3):
            tab.click()
            self.settle()
            if tab.get_attribute("aria-selected") != "true":
                continue
            if shows is None:
                return
            try:
                self.page.locator("[role=tabpanel]:visible").get_by_text(shows).first.wait_for(state="visible",
                                                                                              timeout=60_000)
                return
            except sync_api.TimeoutError:
                continue
        raise AssertionError(f"the tab {tab.inner_text()!r} did not open{f' on {shows!r}' if shows else ''}"
                             " after three clicks")

    def height(self) -> int:
        return self.page.evaluate("() => (document.querySelector('[data-testid=\"stMain\"]') || document.body)"
                                  ".scrollHeight")

    def assert_healthy(self) -> None:
        exc = self.page.query_selector_all("[data-testid='stException']")
        assert not exc, exc[0].inner_text()[:2000]
        assert not self.errors, self.errors

    def chart_problems(self, where: str, scope: str = "lead") -> tuple[int, list[str]]:
        """(charts seen, problems) of the visible charts of the lead or the open tab: too
        small, a plot squashed to a strip, or no data marks drawn."""
        charts = self.page.evaluate(_CHARTS_JS, scope)
        problems = []
        for c in charts:
            name = f"{where}: chart '{c['title']}'"
            if c["w"] < MIN_CHART_W or c["h"] < MIN_CHART_H:
                problems.append(f"{name} is {c['w']:.0f}x{c['h']:.0f} px (a sliver or strip)")
                continue
            squashed = [f"{w:.0f}x{h:.0f}" for w, h, kind in c["plots"] if w < MIN_PLOT[kind][0] or h < MIN_PLOT[kind][1]]
            if squashed:
                problems.append(f"{name}: plot area squashed to {', '.join(squashed)} px")
            marks = c["marks"]
            if c["renderer"] == "canvas":
                marks = _coloured_pixels(self.page.locator(f"[data-wb-chart='{c['id']}']").screenshot()) // 200
            if not marks:
                problems.append(f"{name} ({c['renderer']}) draws no marks, only axes")
        return len(charts), problems

    def all_chart_problems(self) -> tuple[int, list[str]]:
        """Charts of the default view, then of every tab that holds charts (its label says
        'Charts (n)' with n > 0, or a page's own tab)."""
        seen, problems = self.chart_problems("lead")
        tabs = self.page.locator("[data-testid='stTab']")
        labels = [tabs.nth(i).inner_text() for i in range(tabs.count())]
        plain = ("Results", "Tables", "Notes", "Seed", "Environment", "Raw samples", "Share", "Charts (0)")
        for i, label in enumerate(labels):
            if i == 0 or label.startswith(plain):
                continue
            self.open_tab(tabs.nth(i))
            n, p = self.chart_problems(f"tab {label}", "tab")
            seen, problems = seen + n, problems + p
        if labels:
            tabs.nth(0).click()
        return seen, problems

    def shot(self, name: str) -> None:
        """The whole default view (the viewport grown to the page's height), as a PNG."""
        self.page.wait_for_timeout(1000)  # data frames draw on a canvas after the script finished
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.set_viewport_size({"width": VIEWPORT["width"], "height": min(max(self.height(), 1000), 12000)})
        self.page.wait_for_timeout(1000)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"))
        self.page.set_viewport_size(VIEWPORT)

    def download(self, button_text: str) -> bytes:
        with self.page.expect_download(timeout=120_000) as info:
            self.page.get_by_role("button", name=button_text).click()
        return Path(info.value.path()).read_bytes()

    def close(self):
        self.ctx.close()


def _study_path(study_id: str) -> str:
    return "/" + study_id.replace("-", "_")


def _marks(page_id: str, reason: str | None = None):
    """pytest.param with the page's strict xfail, if it is known broken."""
    why = reason or KNOWN_BROKEN.get(page_id)
    return pytest.param(page_id, marks=pytest.mark.xfail(strict=True, reason=why) if why else (), id=page_id)


def check_page(page: Page, name: str, page_id: str, study: bool = False) -> None:
    """What every page must satisfy: no exception, no console error, about three screens at
    most, every visible chart drawn (a study page: at least one, and its tabs)."""
    page.assert_healthy()
    height = page.height()
    page.shot(name)
    if study:
        assert page.page.locator("[data-testid='stTab']").count() >= 5, f"{page_id}: the run's tabs are missing"
    seen, problems = page.all_chart_problems()
    assert seen or not study, f"{page_id}: no chart at all"
    page.assert_healthy()
    assert height <= MAX_SCREENS * VIEWPORT["height"], \
        f"{page_id}: the default view is {height} px tall, {height / VIEWPORT['height']:.1f} screens"
    assert not problems, "\n".join(problems)


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


def test_a_cold_server_opened_on_traces_has_the_apps_sidebar(browser, tmp_path):
    """The first request of a fresh server is a deep link: the page is the app's (wide, its
    own sidebar), not Streamlit's pages/ folder mode listing every file of pages/."""
    port = _free_port()
    env = {**os.environ, "WORKBENCH_STORE": str(tmp_path / "results.sqlite")}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(180):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        page = Page(browser, f"{url}/traces")
        try:
            nav = page.page.inner_text("[data-testid='stSidebarNav']")
            assert "Studies" in nav and "Traces" in nav and "ui" not in nav.split()
            for study in registry().values():
                assert study.TITLE.split(":")[0].split("(")[0].strip() in nav
            main = page.page.query_selector("[data-testid='stMainBlockContainer']").bounding_box()
            assert main["width"] > 1000, "the narrow layout of a page run without app.py"
        finally:
            page.close()
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize("page_id, path", [("home", "/"), ("runs", "/runs")], ids=["home", "runs"])
def test_tool_pages_load_and_draw(app, browser, page_id, path):
    page = Page(browser, app["url"] + path)
    try:
        check_page(page, page_id, page_id)
    finally:
        page.close()


def _newest_committed(study_id: str) -> str | None:
    runs = sorted(committed_runs(study_id), key=lambda r: r.created_utc, reverse=True)
    return runs[0].run_id if runs else None


COMMITTED = [sid for sid in registry() if _newest_committed(sid)]


@pytest.mark.parametrize("page_id", [_marks(f"{sid}:committed") for sid in COMMITTED])
def test_study_page_with_a_committed_run_leads_with_its_verdict_and_draws(app, browser, page_id):
    study_id = page_id.split(":")[0]
    run_id = _newest_committed(study_id)
    page = Page(browser, f"{app['url']}{_study_path(study_id)}?run={run_id}")
    try:
        assert page.page.get_by_text("Verdict:").first.is_visible()
        assert page.page.get_by_text(run_id).first.is_visible(), "the ?run= link did not pick the run"
        check_page(page, study_id, page_id, study=True)
    finally:
        page.close()


def test_cpu_reduction_draws_python_zones_nested_above_irees(app, browser):
    """The committed Python-zones run (issue #43): its Charts tab draws the iree.runtime capture's
    median iteration with the Python zones (py.iteration holding py.invoke) on the main thread's
    lane above IREE's zones and the workers' dispatch shards, and torch.sum's capture in the same
    chart form."""
    runs = [r for r in committed_runs("cpu-reduction") if "torch" in r.params.get("profile_via", [])]
    if not runs:
        pytest.skip("no committed cpu-reduction run with Python zones")
    page = Page(browser, f"{app['url']}{_study_path('cpu-reduction')}?run={runs[0].run_id}")
    try:
        page.open_tab(page.page.locator("[data-testid='stTab']").filter(has_text="Charts").first)
        panel = page.page.locator("[role=tabpanel]:visible")
        iree = panel.locator(".vega-embed").filter(has_text="(python)").filter(has_text="c=8")
        torch = panel.locator(".vega-embed").filter(has_text="torch.sum")
        iree.first.wait_for(state="visible")
        texts = " ".join(iree.first.locator("svg text").all_text_contents())
        for name in ("py.iteration", "py.invoke", "Main thread", "iree-worker", "python", "dispatch"):
            assert name in texts, f"the Python-zones timeline does not show {name!r}"
        assert "py.torch_sum" in " ".join(torch.first.locator("svg text").all_text_contents())
        page.assert_healthy()
        SHOTS.mkdir(parents=True, exist_ok=True)
        iree.first.screenshot(path=str(SHOTS / "cpu-reduction-python-zones.png"))
    finally:
        page.close()


def test_the_issue_report_preview_renders_its_tables_and_mermaid_charts(app, browser):
    """The Share tab's preview of a committed mc2-split run's issue report (the default, about
    two screens), as Markdown renders it: tables as tables, the key chart's Mermaid xychart
    drawn (no source text left)."""
    run_id = _newest_committed("mc2-split")
    if run_id is None:
        pytest.skip("no committed mc2-split run")
    page = Page(browser, f"{app['url']}{_study_path('mc2-split')}?run={run_id}")
    try:
        p = page.page
        page.open_tab(p.get_by_role("tab", name="Share"), shows="Prepare report")
        p.get_by_role("button", name="Prepare report").click()
        page.settle(120_000)
        assert p.get_by_text(run_id).first.is_visible(), "preparing the report switched the page to another run"
        p.get_by_text("Preview (as the issue renders it)").click()
        page.settle()
        preview = p.locator("[role=tabpanel]:visible")  # the Share tab, with the preview below the buttons
        preview.locator("[data-testid='stMermaidChart'] img").first.wait_for(timeout=30_000)
        assert preview.locator("[data-testid='stMermaidChart'] img").count() >= 1, "the key chart was not drawn"
        assert preview.locator("table").count() >= 2, "the claims and key tables did not render as tables"
        text = preview.inner_text()
        assert "Reproduce:" in text and "--full" in text
        assert "xychart-beta" not in text and "|:---" not in text and "<details>" not in text and "</" not in text
        page.assert_healthy()
        SHOTS.mkdir(parents=True, exist_ok=True)
        # the preview's head (verdict, claims, key table) and its first drawn chart
        p.set_viewport_size({"width": VIEWPORT["width"], "height": min(page.height(), 12000)})  # all laid out
        p.wait_for_timeout(1500)
        box = p.get_by_text("Preview (as the issue renders it)").bounding_box()
        p.screenshot(path=str(SHOTS / "issue-preview.png"),
                     clip={"x": box["x"] - 40, "y": box["y"] - 20, "width": 1200, "height": 1400})
        p.set_viewport_size(VIEWPORT)
        preview.locator("[data-testid='stMermaidChart']").first.screenshot(path=str(SHOTS / "issue-preview-chart.png"))
    finally:
        page.close()


TRACE_EXAMPLES = sorted(p.name for p in (ROOT / "traces" / "examples").iterdir() if p.name != "README.md")


@pytest.mark.parametrize("page_id", [_marks(f"traces:{name}") for name in TRACE_EXAMPLES])
def test_traces_page_draws_each_example(app, browser, page_id):
    name = page_id.split(":", 1)[1]
    page = Page(browser, app["url"] + "/traces")
    try:
        box = page.page.get_by_label("Trace", exact=True)
        box.click()
        page.page.keyboard.type(f"examples/{name}")
        page.page.keyboard.press("Enter")
        page.settle()
        page.page.wait_for_selector(".vega-embed", timeout=90_000)
        page.settle()
        check_page(page, f"traces-{Path(name).stem.split('.')[0]}", page_id)
    finally:
        page.close()


CPU_STUDIES = [sid for sid, mod in registry().items() if mod.requires(mod.SPACE.defaults("smoke")) is None]


@pytest.mark.parametrize("page_id", [_marks(f"{sid}:smoke") for sid in CPU_STUDIES])
def test_study_runs_from_the_browser_shows_its_run_and_exports(app, browser, page_id):
    """Change a parameter, run, see the run that was just made (its progress while it runs),
    every chart drawn, and download the issue report and the Markdown report."""
    study_id = page_id.split(":")[0]
    study = registry()[study_id]
    page = Page(browser, f"{app['url']}{_study_path(study_id)}?preset=smoke")
    try:
        p = page.page
        # Change one parameter (the first plain int: halved, or +1 where half is not allowed)
        # and check below that the stored run carries the edited value.
        shown_first = [study.SPACE[n] for n in study.SPACE.headline] or list(study.SPACE.params)
        rep = next((q for q in shown_first if q.kind == "int" and not q.multi and not q.choices), None)
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
            box.press("Tab")
            page.settle()  # the knob's change reruns the form's fragment, as a user sees its estimate change
        # The progress shows where the eye is: inside the viewport, right under the button. A
        # click that lands while a rerun is starting can be dropped on a loaded machine (a
        # fresh-clone CI run waited 120 s for the bar): clicked again once, as a user would.
        bar = p.locator("[data-testid='stProgress']").first
        for attempt in range(2):
            p.get_by_role("button", name="Run", exact=True).click()
            try:
                bar.wait_for(state="attached", timeout=90_000)
                break
            except sync_api.TimeoutError:
                if attempt:
                    raise
        box = bar.bounding_box()
        assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= VIEWPORT["height"], \
            f"the progress bar is outside the viewport: {box}"
        # Only a run this page made says it finished (and is then the run shown).
        p.wait_for_selector("text=finished in", timeout=300_000)
        page.settle(240_000)
        runs = json.loads(subprocess.run([sys.executable, "-m", "workbench", "--store", str(app["store"]), "runs",
                                          "--study", study_id, "--json"], capture_output=True, text=True,
                                         cwd=ROOT).stdout)
        assert runs and runs[0]["status"] == "complete"
        assert p.get_by_text(runs[0]["run_id"]).first.is_visible(), "the page does not show the run it made"
        if edited is not None:
            assert runs[0]["params"][rep.name] == edited, "the edited widget value did not reach the run"
        assert p.get_by_text("Verdict:").first.is_visible()
        assert p.query_selector("[data-testid='stDataFrame']") is not None
        p.get_by_text("Parameters and run").click()  # the form the test opened: the default view has it closed
        page.settle()
        check_page(page, f"{study_id}-run", page_id, study=True)
        page.open_tab(p.get_by_role("tab", name="Share"), shows="Prepare report")
        p.get_by_role("button", name="Prepare report").click()
        page.settle(120_000)
        text = page.download("Download GitHub issue (one Markdown file, nothing attached)").decode()
        assert "**Verdict:**" in text and "Reproduce:" in text and len(text) <= 15_000 and "![" not in text
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
        page.open_tab(page.page.get_by_role("tab", name="A/B comparison"))
        panel = page.page.locator("[role=tabpanel]:visible")
        # the comparison is drawn after the run list; wait for it rather than for a fixed time
        panel.get_by_text("A/B:").first.wait_for(state="visible", timeout=60_000)
        assert panel.get_by_text("Verdict:").first.is_visible()
        assert panel.get_by_text("Parameters that differ").first.is_visible()
        page.settle()
        seen, problems = page.chart_problems("A/B", "tab")  # the forest plot of B/A per variant
        assert seen >= 1 and not problems, problems or "the A/B view draws no plot"
        page.shot("runs-compare")
    finally:
        page.close()


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


def _form_widgets(page: Page) -> int:
    """The knobs the open "Parameters and run" expander shows before "Advanced"."""
    return page.page.evaluate("""() => {
      const form = [...document.querySelectorAll('[data-testid=stExpander]')]
        .find(e => (e.querySelector('summary') || e).innerText.includes('Parameters and run'));
      const kinds = ['stNumberInput', 'stTextInput', 'stMultiSelect', 'stSelectbox', 'stCheckbox'];
      const fields = kinds.flatMap(k => [...form.querySelectorAll(`[data-testid=${k}]`)])
        .filter(w => !w.closest('[data-testid=stExpander] [data-testid=stExpander]'))  // not under Advanced
        .filter(w => !w.innerText.startsWith('Start from a preset'));
      return fields.length;
    }""")


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_the_form_is_short_and_every_preset_is_selectable(app, browser, study_id):
    """About five knobs first (at most MAX_FIRST_FIELDS), the rest under Advanced; the preset
    picker offers every preset of the study, each with its purpose, and each can be picked."""
    study = registry()[study_id]
    page = Page(browser, f"{app['url']}{_study_path(study_id)}?preset=smoke")
    try:
        p = page.page
        p.get_by_label("Start from a preset", exact=True).first.wait_for(timeout=60_000)  # the form's fragment drew
        page.settle()
        fields = _form_widgets(page)
        assert 0 < fields <= MAX_FIRST_FIELDS, f"{study_id}: {fields} knobs before Advanced"
        picker = p.get_by_label("Start from a preset", exact=True).first
        for name in study.SPACE.presets:
            assert study.SPACE.purposes.get(name), f"{study_id}: preset {name} has no purpose"
            picker.click()
            p.get_by_role("option").filter(has_text=f"{name}: {study.SPACE.purposes[name][:30]}").first.click()
            page.settle()
            page.assert_healthy()
            assert picker.input_value().startswith(f"{name}: "), f"{study_id}: preset {name} was not picked"
    finally:
        page.close()


def test_no_study_page_opens_on_a_smoke_or_failed_check_run_while_a_checked_run_exists(app, browser):
    """This machine's runs of calibration: a checked run, then a newer smoke run and a newer run
    with a failed check. The page opens on the checked one; ag-gemm (no GPU here) on its
    committed headline run, marked as such, with no failed check."""
    from workbench.base.env import capture
    from workbench.data.record import RunRecord, VariantResult
    from workbench.results.store import Store

    env = {**os.environ, "WORKBENCH_LOCK": str(app["tmp"] / "machine.lock")}
    cli = [sys.executable, "-m", "workbench", "--store", str(app["store"]), "run", "calibration", "--json"]
    checked = json.loads(subprocess.run(cli + ["--set", "repeat=5", "--set", "threads=1", "--set", "torch=false"],
                                        cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout)
    smoke = json.loads(subprocess.run(cli + ["--preset", "smoke"], cwd=ROOT, env=env, check=True, capture_output=True,
                                      text=True).stdout)
    store = Store(app["store"])
    bad = RunRecord(run_id="29991231-000000-calibration-badbad", study="calibration",
                    params={"repeat": 5, "threads": 1, "torch": False}, env=capture(), status="complete",
                    created_utc="2999-12-31T00:00:00Z", reproduce="python -m workbench run calibration",
                    variants=[VariantResult("empty-call", {"kind": "harness"}, [30.0, 31.0, 32.0], False, "FAILED: test")])
    store.save(bad)
    store.close()
    page = Page(browser, f"{app['url']}{_study_path('calibration')}")
    try:
        caption = page.page.get_by_text("Run ", exact=False).filter(has_text=checked["run_id"])
        assert caption.first.is_visible(), "the calibration page did not open on the checked run"
        assert not page.page.get_by_text(smoke["run_id"]).count() and not page.page.get_by_text(bad.run_id).count()
    finally:
        page.close()
    page = Page(browser, f"{app['url']}{_study_path('ag-gemm')}")
    try:
        shown = page.page.locator("[data-testid=stSelectbox] input[aria-label^='Run (']").first.input_value()
        assert "committed headline" in shown, f"ag-gemm did not open on its committed headline run: {shown}"
        assert "failed check" not in shown
        assert not page.page.get_by_text("Correctness check FAILED").count()
    finally:
        page.close()
