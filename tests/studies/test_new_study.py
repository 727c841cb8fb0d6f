"""A new study written from studies/README.md alone: the README's smallest complete example,
written into a package of its own and registered for this test only ($WORKBENCH_STUDY_PACKAGES),
needs no change outside its folder: its app page, its CLI run, its report, its notebook and its
page of the manual (generated into its folder) work, every other page stays in step, and the
index of the studies (built at run time) lists it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT
from workbench.base import machine_load
from workbench.presentation import manual, report
from workbench.running import runner
from workbench.reading.analysis import analyse
from workbench.seam.registry import PACKAGES_ENV, registry
from workbench.results.store import Store

# the notebook half needs nbformat, which a GPU node's image lacks (its GPU tests collect this file)
nbformat = pytest.importorskip("nbformat")

#: one file of the example: a heading naming it, then its code block
EXAMPLE_FILE = re.compile(r"^#### `studies/(?P<package>\w+)/(?P<name>\w+\.py)`\n\n```python\n(?P<code>.*?)\n```$",
                          re.M | re.S)
#: the package the example is written into (a study package may sit in any registered package)
PACKAGE = "readme_studies"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The README's example files written under ``readme_studies/<package>/``: (root, study module)."""
    files = EXAMPLE_FILE.findall((ROOT / "studies" / "README.md").read_text())
    packages = {package for package, _, _ in files}
    assert len(files) >= 6 and len(packages) == 1, "studies/README.md lost its example"
    root = tmp_path_factory.mktemp("new_study")
    folder = root / PACKAGE / packages.pop()
    folder.mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text('"""Studies registered by a test."""\n')
    for _, name, code in files:
        (folder / name).write_text(code + "\n")
    assert {p.name for p in folder.iterdir()} >= {"__init__.py", "analysis.py", "report.py", "claims.py", "seed.py"}
    return root, f"{PACKAGE}.{folder.name}"


@pytest.fixture
def registered(example, monkeypatch, tmp_path):
    root, module = example
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv(PACKAGES_ENV, PACKAGE)
    # the CLI and the notebook's kernel are child processes: they find the package the same way
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("WORKBENCH_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "machine.lock"))
    return module


def _outputs(nb) -> tuple[str, list]:
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") + "".join(str(o.get("data", {}).get(kind, "")) for kind in ("text/markdown", "text/plain"))
                   for o in outs)
    return text, [o for o in outs if o.output_type == "error"]


def test_the_readme_example_is_a_whole_study(registered, tmp_path):
    study = registry()["toy-sum"]  # the registry's checks of the hooks and presets pass
    assert study.__name__ == registered

    proc = subprocess.run([sys.executable, "-m", "workbench", "run", "toy-sum", "--preset", "smoke", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["status"] == "complete" and {v["params"]["provider"] for v in doc["variants"]} == {"sum", "fsum"}
    assert all(v["correct"] and len(v["samples_ns"]) == 6 for v in doc["variants"])
    assert [v["variant"] for v in doc["variants"] if v["params"].get("twin_of")] == ["aa:sum/n=1000"]
    assert [c["id"] for c in doc["claims"]] == ["doc-fsum-costs-more"] and doc["verdict"]
    assert doc["claims"][0]["title"] == "fsum costs more per element than sum"
    assert "drift between blocks" in doc["levels"]

    rec = Store(create=False).load(doc["run_id"])
    a = analyse(rec)
    d = a.tables["derived"]
    # the declared metric besides time: a rate in its own unit, compared by the engine, paired by round
    rate = d[d["name"].str.startswith("fsum's rate")]
    assert len(rate) == 1 and rate.iloc[0]["covers"] == "rounds" and a.tables["_rate"]["unit"].iloc[0] == "M elements/s"
    assert set(d["covers"]) == {"rounds"} and a.drift.controls == 1
    text = report.write_report(rec, "md", tmp_path / "report" / "run.md").read_text()
    assert "## fsum over sum" in text and "fsum costs more per element than sum" in text and "Python documentation" in text

    nb = nbformat.read(str(report.write_notebook(rec, tmp_path / "notebook" / "run.ipynb")), as_version=4)
    outputs, errors = _outputs(nb)
    assert not errors, errors[0].get("evalue")
    # the run's head is HTML with a plain-text twin (workbench.presentation.jupyter.HtmlOutput)
    assert "verdict: " in outputs and "doc-fsum-costs-more" in outputs


def test_the_readme_example_has_a_page(registered, tmp_path):
    from tests.support.pagetest import study_app

    at = study_app("toy-sum").run()
    assert not at.exception
    assert any("Toy sum" in t.value for t in at.title)


def test_the_readme_example_under_load_states_nothing_clear(registered, tmp_path, monkeypatch):
    """A new study written from the README alone, run while the machine is loaded (a simulated
    load average of 8 per CPU in every sample the runner takes): its verdict leads with the
    load, no derived row is clear, no claim holds or is contradicted."""
    import os

    busy = 8.0 * (os.cpu_count() or 1)
    monkeypatch.setattr(machine_load, "sample", lambda: {"loadavg_1m": busy})
    rec = runner.execute(registry()["toy-sum"], {}, Store(tmp_path / "loaded.sqlite"), preset="smoke")
    a = analyse(rec)
    assert a.disturbance and a.verdict.startswith("Measured under load")
    rows = a.tables["derived"]
    assert len(rows) and not (rows["status"] == "clear").any()
    assert all("measured under load" in c for c in rows["caveat"])
    assert set(a.claims["status"]) <= {"inconclusive", "not testable here"}
    assert "Clear" not in a.verdict and "(clear)" not in a.verdict and "not clear (measured under load)" in a.verdict


def test_the_readme_example_gets_its_manual_page_in_its_folder_and_nothing_else_changes(registered, example):
    from tests.workbench.test_docs import check_study_page

    root, _ = example
    study = registry()["toy-sum"]
    page = manual.study_page(study)
    assert page.parent == root / PACKAGE / "toy_sum"
    page.unlink(missing_ok=True)  # the example has no page until the generator writes it
    cmd = [sys.executable, "-m", "workbench.presentation.manual"]
    proc = subprocess.run([*cmd, "--study", "toy-sum"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and page.is_file(), proc.stderr[-2000:]
    # the same checks as every built-in study's page: in step with the seam, renders, links resolve
    assert check_study_page(study, root) == []
    text = page.read_text()
    assert "# Toy sum (`toy-sum`)" in text and "how much slower is `math.fsum`" in text and "`rounds`" in text
    # with the new study registered, no other study's page (nor any list of studies) needs a change
    proc = subprocess.run([*cmd, "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    # the index of the studies is built at run time
    proc = subprocess.run([sys.executable, "-m", "workbench", "list"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert "toy-sum" in proc.stdout
