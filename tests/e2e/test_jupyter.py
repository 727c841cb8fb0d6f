"""Notebooks as their readers meet them: executed with nbclient (a kernel, as Jupyter runs one),
rendered to HTML with nbconvert and opened in headless Chromium with every network request
blocked.

- The tour of docs/python.md (its code blocks, one cell each) runs from the checkout as after
  ``pip install -e .``: the calibration and cpu-reduction smoke presets, their claims and
  charts, a comparison of two runs, a committed bundle and a trace.
- An exported notebook travels: the package is built from ``pyproject.toml`` and installed as
  its wheel installs it (``pip install --target``, from a copy of only the files the wheel is
  built from), and the notebook runs from a folder outside the checkout with that install
  alone on the kernel's path (no checkout on ``sys.path``, no ``WORKBENCH_ROOT``, no store).
  What this does not prove: a fresh virtual environment (the third-party packages come from
  this one; docs/python.md, installing, gives the commands of the by-hand check of one).
- A run interrupted from the notebook (the kernel's interrupt, as the stop button sends it)
  stops, keeps its finished points and says so in one line.

Every chart output must carry a PNG beside its Vega-Lite spec, and in the browser, offline,
every chart must be drawn. Screenshots land in ``$WORKBENCH_SCREENSHOTS`` (default
``artifacts/screenshots``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import workbench as wb
from workbench.presentation.jupyter import VEGALITE_MIME
from workbench.presentation.report import kernel_env, write_notebook
from workbench.results.store import read_bundle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(os.environ.get("WORKBENCH_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))
#: what the wheel is built from (pyproject.toml names the packages; README.md is its readme)
WHEEL_SOURCES = ("pyproject.toml", "README.md", "workbench", "studies", "kernels")
BUNDLE = ROOT / "traces" / "cpu-reduction" / "many-core-16cpu.bundle.json"


def tour_cells() -> list[str]:
    """The code blocks of docs/python.md's tour, in order."""
    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    section = text.split("\n## A tour\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def errors(nb) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for o in outputs(nb) if o.output_type == "error"]


def chart_outputs(nb) -> list:
    """Every chart's output: its PNG, with its Vega-Lite spec where the spec is small (a trace's
    timeline, a spec of thousands of rows, leaves as its PNG alone: workbench.presentation.jupyter.SPEC_MAX_BYTES)."""
    return [o for o in outputs(nb) if VEGALITE_MIME in o.get("data", {})
            or str(o.get("data", {}).get("text/plain", "")).startswith("<chart ")]


def html_of(nb) -> str:
    return "".join(str(o.get("data", {}).get("text/html", "")) for o in outputs(nb))


def render_offline(nb, folder: Path, name: str) -> list[dict]:
    """The notebook as nbconvert's HTML, opened in Chromium with every request but the file
    itself aborted; returns each picture's state and saves a screenshot."""
    from nbconvert import HTMLExporter

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")
    page_file = folder / f"{name}.html"
    page_file.write_text(HTMLExporter().from_notebook_node(nb)[0], encoding="utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("file:", "data:"))
                       else route.abort())
            page.goto(page_file.as_uri(), wait_until="load")
            pictures = page.eval_on_selector_all(
                "img", "els => els.map(e => ({src: e.src.slice(0, 22), complete: e.complete, w: e.naturalWidth, "
                       "h: e.naturalHeight}))")
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{name}.png"))  # the first screen, as a reader opens it
        finally:
            browser.close()
    return pictures


def assert_charts_travel(nb, at_least: int) -> int:
    charts = chart_outputs(nb)
    assert len(charts) >= at_least, f"{len(charts)} chart outputs"
    assert all(o.data.get("image/png") for o in charts), "a chart output without its PNG"
    return len(charts)


def assert_drawn(pictures: list[dict], charts: int) -> None:
    drawn = [p for p in pictures if p["src"].startswith("data:image/png") and p["complete"] and p["w"] > 100
             and p["h"] > 100]
    assert len(drawn) == len(pictures) >= charts, pictures


# --- the tour, from the checkout ------------------------------------------------------------------


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tour")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(code.strip()) for code in tour_cells()]
    env = kernel_env() | {"WORKBENCH_STORE": str(tmp / "results.sqlite"), "WORKBENCH_LOCK": str(tmp / "machine.lock")}
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT)}}).execute(env=env)
    nbformat.write(nb, str(tmp / "tour.ipynb"))
    return nb, tmp


def test_the_tour_runs_and_shows_claims_charts_a_comparison_a_bundle_and_a_trace(tour):
    nb, _ = tour
    assert len(nb.cells) >= 8 and not errors(nb), errors(nb)
    assert not [c.source for c in nb.cells if "from workbench" in c.source or "import workbench." in c.source]
    page = html_of(nb)
    assert page.count("<strong>Verdict:</strong>") == 3  # calibration, cpu-reduction, the committed bundle
    assert "The seed&#x27;s claims on this machine" in page or "The seed's claims on this machine" in page
    claims = next(o for c in nb.cells if c.source.startswith("cpu.claims") for o in c.outputs)
    assert re.search(r"holds|contradicted|inconclusive|not testable here", claims.data["text/html"])
    compared = [o for o in outputs(nb) if "text/markdown" in o.get("data", {})]
    assert any(o.data["text/markdown"].startswith("# A/B:") for o in compared)
    assert "<strong>Lanes</strong>" in page and "workbench-trace" in page
    assert_charts_travel(nb, at_least=5)  # the runs' key charts, cpu-reduction's charts, the timeline


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed: `sudo apt-get install chromium`")
def test_the_tour_renders_offline(tour):
    nb, tmp = tour
    assert_drawn(render_offline(nb, tmp, "notebook-tour"), len(chart_outputs(nb)))


# --- an exported notebook, elsewhere --------------------------------------------------------------


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package as its wheel installs it, in a folder of its own (``pip install --target``),
    built from a copy of what the wheel is built from, so the checkout gets no build files."""
    tmp = tmp_path_factory.mktemp("wheel")
    for name in WHEEL_SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp / "src" / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (tmp / "src").mkdir(exist_ok=True)
            shutil.copy2(src, tmp / "src" / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--target", str(tmp / "site"), str(tmp / "src")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "site"


def test_the_wheel_holds_the_packages_and_the_kernel_sources(installed):
    for path in ("workbench/traces/tracy.py", "studies/cpu_reduction/__init__.py", "studies/mc2_split/worker.py",
                 "kernels/iree/sum_programs.py", "kernels/triton/ag_gemm.py", "bin/workbench"):
        assert (installed / path).is_file(), path
    for source in (ROOT / "kernels").rglob("*"):  # every kernel source, not only the Python ones
        if source.is_file() and "__pycache__" not in source.parts:
            assert (installed / source.relative_to(ROOT)).is_file(), source.relative_to(ROOT)
    assert not {"tests", "pages", "app.py", "serve.py", "traces"} & {p.name for p in installed.iterdir()}


@pytest.fixture(scope="module")
def travelled(installed, tmp_path_factory):
    """A run's exported notebook, moved outside the checkout and run there with the installed
    package alone; a last cell says where everything came from."""
    tmp = tmp_path_factory.mktemp("travel")
    exported = write_notebook(read_bundle(BUNDLE), tmp / "export" / "run.ipynb", execute=False)
    elsewhere = shutil.copytree(exported.parent, tmp / "elsewhere")
    nb = nbformat.read(str(elsewhere / "run.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json, os, sys, workbench, workbench.base.env\n"
        "print(json.dumps({'workbench': workbench.__file__, 'state': str(workbench.base.env.STATE_DIR), 'cwd': os.getcwd(), "
        "'path': [os.path.abspath(p) for p in sys.path]}))"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")} | {
        "PYTHONPATH": str(installed), "XDG_DATA_HOME": str(tmp / "xdg")}
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(elsewhere)}}).execute(env=env)
    return nb, elsewhere, tmp


def test_an_exported_notebook_runs_outside_the_checkout_with_the_package_alone(travelled, installed):
    nb, elsewhere, tmp = travelled
    assert not errors(nb), errors(nb)
    where = json.loads(nb.cells[-1].outputs[-1].text)
    assert Path(where["workbench"]).is_relative_to(installed), where["workbench"]
    assert Path(where["state"]).is_relative_to(tmp / "xdg") and Path(where["cwd"]) == elsewhere
    assert not [p for p in where["path"] if Path(p) == ROOT or Path(p).is_relative_to(ROOT / "workbench")], \
        "the checkout is on the kernel's path"
    # the run's head, from the bundle beside it
    assert "<strong>Verdict:</strong> This run does not settle iree-bench c=8 aligned against torch.sum at " \
           "N=1,000,000" in html_of(nb)
    assert_charts_travel(nb, at_least=len(wb.load(BUNDLE).charts()))  # the key chart, then the others


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed: `sudo apt-get install chromium`")
def test_an_exported_notebook_renders_offline(travelled):
    nb, elsewhere, _ = travelled
    assert_drawn(render_offline(nb, elsewhere, "notebook-exported"), len(chart_outputs(nb)))


# --- a run interrupted from the notebook ----------------------------------------------------------

#: a study run that records one point, then works until it is stopped (set up in the kernel)
_SLOW_STUDY = """
import time
import workbench as wb
from workbench.data.record import VariantResult
from workbench.seam.registry import get

def slow(params, ctx):
    ctx.record(VariantResult("first", {}, [10.0, 11.0, 12.0], True, "ok"))
    while True:
        time.sleep(0.05)
        ctx.progress(0.5, "still working")

get("calibration").run = slow
"""


def test_interrupting_the_kernel_stops_the_run_and_keeps_its_finished_points(tmp_path):
    from jupyter_client.manager import start_new_kernel

    from workbench.results.store import Store

    store_path = tmp_path / "results.sqlite"
    env = kernel_env() | {"WORKBENCH_STORE": str(store_path), "WORKBENCH_LOCK": str(tmp_path / "machine.lock")}
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        assert kc.execute_interactive(_SLOW_STUDY, timeout=120)["content"]["status"] == "ok"
        msg_id = kc.execute("run = wb.run('calibration', preset='smoke')")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the first point is stored: the run is under way
            if store_path.exists() and (runs := Store(store_path, create=False).runs()) and runs[0]["variants"]:
                break
            time.sleep(0.2)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=60)
        content = reply["content"]
        assert content["status"] == "error" and content["ename"] == "Interrupted", content
        run_id = Store(store_path, create=False).runs()[0]["run_id"]
        assert content["evalue"] == f"interrupted; 1 finished point kept in run {run_id}"
        assert content["traceback"] == [f"Interrupted: {content['evalue']}"]  # one line, no traceback
        kept = Store(store_path, create=False).load(run_id)
        assert kept.status == "interrupted" and [v.variant for v in kept.variants] == ["first"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
