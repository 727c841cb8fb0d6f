"""The Traces page in headless Chromium: its default trace, the wheel over the timeline, two
ranks and a trace diff, and an upload (each example trace is drawn by ``test_browser.py``).

Shares the app server, browser and page helper of ``test_browser.py`` (a real
Streamlit server, Debian's chromium through Playwright). Screenshots land in
``$WORKBENCH_SCREENSHOTS`` as ``traces-*.png``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.e2e.test_browser import ROOT, Page, app, browser  # noqa: F401  (the shared fixtures)

pytestmark = pytest.mark.e2e

#: per visible chart: its size and how many data marks it drew (Vega's SVG: a ``g.role-mark``
#: holds one element per mark; axes, legends and titles have their own roles)
_CHARTS_JS = """() => Array.from(document.querySelectorAll('.vega-embed')).filter(e => e.offsetParent !== null)
  .map(e => { const r = e.getBoundingClientRect();
    const marks = Array.from(e.querySelectorAll('g.role-mark > *')).filter(m => {
      const b = m.getBBox ? m.getBBox() : {width: 1, height: 1}; return b.width > 0 || b.height > 0; });
    return {width: r.width, height: r.height, marks: marks.length,
            kinds: Array.from(new Set(Array.from(e.querySelectorAll('g.role-mark')).map(g => g.getAttribute('class'))))}; })"""


def _charts(page: Page) -> list[dict]:
    page.page.wait_for_timeout(1000)  # Vega draws after the script run settles
    return page.page.evaluate(_CHARTS_JS)


def _pick(page: Page, label: str, option: str) -> None:
    """Choose ``option`` in a selectbox, typing it (long option lists are virtualised)."""
    page.page.get_by_label(label, exact=True).first.click()
    page.page.keyboard.type(option)
    page.page.get_by_role("option", name=option, exact=True).first.click()
    page.settle()


def _assert_drawn(charts: list[dict], what: str) -> None:
    assert charts, f"{what}: no chart on the page"
    for i, c in enumerate(charts):
        assert c["width"] > 200 and c["height"] > 50, f"{what}: chart {i} is {c['width']}x{c['height']} px"
        assert c["marks"] > 0, f"{what}: chart {i} drew axes only ({c['kinds']})"


def test_traces_page_opens_on_an_example_that_draws(app, browser):  # noqa: F811
    """No pick needed: the page opens on a real example trace, its timeline drawn; the picker
    lists only files an importer reads (no kernel-sweep logs)."""
    page = Page(browser, app["url"] + "/traces")
    try:
        page.page.wait_for_selector(".vega-embed", timeout=90_000)
        page.settle()
        page.assert_healthy()
        _assert_drawn(_charts(page), "the default trace")
        picker = page.page.get_by_label("Trace", exact=True).first
        assert "torch_cuda_h200" in picker.input_value()
        picker.click()
        options = [o.inner_text() for o in page.page.get_by_role("option").all()]
        assert options and not any("kernel-sweeps" in o or o.endswith((".md", ".txt")) for o in options), options
    finally:
        page.close()


_AXIS = "document.querySelector('.vega-embed g.role-axis-label').textContent"
_SCROLLED = ("Math.max(document.scrollingElement.scrollTop, "
             "...[...document.querySelectorAll('*')].map(e => e.scrollTop))")


def _over_chart(page: Page) -> None:
    """The pointer over the timeline (the wheel goes to what is under it)."""
    chart = page.page.locator(".vega-embed").first
    chart.scroll_into_view_if_needed()
    page.page.wait_for_timeout(500)
    box = chart.bounding_box()
    page.page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + min(box["height"] * 0.3, 200))


def test_the_wheel_scrolls_the_page_over_the_timeline_and_ctrl_wheel_zooms(app, browser):  # noqa: F811
    """A plain wheel over the timeline scrolls the page (the axis stays); Ctrl + wheel zooms in
    the browser without a script run; zooming far out stops at the trace's extent."""
    page = Page(browser, app["url"] + "/traces")
    try:
        _pick(page, "Trace", "examples/iree_sum_c8_50it.tracy")
        p = page.page
        _over_chart(page)
        before, top = p.evaluate(_AXIS), p.evaluate(_SCROLLED)
        for _ in range(4):
            p.mouse.wheel(0, 200)
            p.wait_for_timeout(150)
        p.wait_for_timeout(800)
        assert p.evaluate(_SCROLLED) > top, "a plain wheel over the timeline did not scroll the page"
        assert p.evaluate(_AXIS) == before, "a plain wheel zoomed the timeline"
        _over_chart(page)
        full = p.evaluate(_AXIS)
        for _ in range(5):  # a loaded machine may drop a burst of wheel events while the chart draws
            p.keyboard.down("Control")
            for _ in range(8):
                p.mouse.wheel(0, -300)
                p.wait_for_timeout(100)
            p.keyboard.up("Control")
            p.wait_for_timeout(1000)
            if p.evaluate(_AXIS) != full:
                break
        assert p.query_selector("[data-testid='stStatusWidget']") is None  # no rerun on the server
        assert p.evaluate(_AXIS) != full, "Ctrl + wheel did not zoom"
        assert _charts(page)[0]["marks"] > 0
        p.keyboard.down("Control")
        for _ in range(40):  # far out: the window stops at the whole trace
            p.mouse.wheel(0, 400)
            p.wait_for_timeout(50)
        p.keyboard.up("Control")
        p.wait_for_timeout(1500)
        labels = p.evaluate("[...document.querySelector('.vega-embed g.role-axis-label').querySelectorAll('text')]"
                            ".map(t => parseFloat(t.textContent.replace(/,/g, '')))")
        labels = [v for v in labels if not math.isnan(v)]  # numbers only
        assert labels and min(labels) >= 0, f"zoomed out past the trace's start: {labels}"
        page.assert_healthy()
    finally:
        page.close()


def test_traces_page_aligns_two_ranks_and_diffs_traces(app, browser):  # noqa: F811
    page = Page(browser, app["url"] + "/traces")
    try:
        p = page.page
        _pick(page, "Trace", "examples/kineto_2ranks_rank0_synthetic.json.gz")
        p.get_by_label("Other ranks of the same run (optional)").first.click()
        p.keyboard.type("kineto_2ranks_rank1")
        p.get_by_role("option", name="examples/kineto_2ranks_rank1_synthetic.json.gz").first.click()
        p.keyboard.press("Escape")
        page.settle()
        page.assert_healthy()
        p.get_by_text("slowest rank: 1", exact=False).first.wait_for(state="visible", timeout=30_000)
        _assert_drawn(_charts(page), "two ranks")
        page.shot("traces-two-ranks")
        p.get_by_text("Compare with another trace (trace diff)").click()
        page.settle()
        _pick(page, "Trace b", "examples/iree_sum_c8_50it.tracy")
        p.get_by_text("Nothing to compare", exact=False).first.wait_for(state="visible", timeout=30_000)  # no names in common
        page.assert_healthy()
    finally:
        page.close()


def test_traces_page_upload_name_is_not_a_path(app, browser, tmp_path):  # noqa: F811
    """An upload named like a path is parsed under a generated name; its name is shown as text."""
    events = [{"ph": "X", "name": f"op{i}", "cat": "cpu_op", "ts": i * 10.0, "dur": 5.0, "pid": 1, "tid": 1}
              for i in range(20)]
    name = "../../*evil* $x$ <b>trace</b>.json"
    page = Page(browser, app["url"] + "/traces")
    try:
        page.page.get_by_text("upload", exact=True).click()
        page.settle()
        page.page.set_input_files("input[type='file']", files=[
            {"name": name, "mimeType": "application/json", "buffer": json.dumps({"traceEvents": events}).encode()}])
        page.settle()
        page.assert_healthy()
        _assert_drawn(_charts(page), "upload")
        assert not (Path(app["tmp"]).parent / "evil.json").exists()
        assert page.page.query_selector("b:has-text('trace')") is None  # markup in the name is not rendered
        page.page.set_input_files("input[type='file']", files=[
            {"name": "broken.json", "mimeType": "application/json", "buffer": b'{"traceEvents": [{"ph": "X", "na'}])
        page.settle()
        page.page.get_by_text("broken.json: truncated", exact=False).first.wait_for(state="visible", timeout=30_000)
        page.assert_healthy()
    finally:
        page.close()
