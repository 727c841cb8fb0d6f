"""Notebooks: every study's notebook is generated from the library, uses only the public API
(``import workbench as wb``) and executes cleanly; a run's exported notebook carries no path of
the machine that exported it, opens with its outputs, and re-runs from the folder it was saved
in. (An exported notebook run outside the checkout, rendered in a browser offline:
tests/e2e/test_notebook_travels.py.)"""

import json
import re
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from workbench.base.env import REPO_ROOT
from workbench.presentation.report import kernel_env, write_notebook, write_study_notebooks
from workbench.data.record import RunRecord, VariantResult
from workbench.seam.registry import registry


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory):
    return write_study_notebooks(tmp_path_factory.mktemp("notebooks"))


def _outputs_text(nb) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/html", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def _sources(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def _errors(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_study_notebook_executes(notebooks, study_id, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "machine.lock"))
    monkeypatch.setenv("WORKBENCH_STORE", str(tmp_path / "results.sqlite"))
    path = next(p for p in notebooks if p.stem == study_id)
    nb = nbformat.read(str(path), as_version=4)
    assert "import workbench as wb" in _sources(nb) and "from workbench" not in _sources(nb), "internal modules"
    # the notebooks are not inside the checkout here: kernel_env makes this workbench importable
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent.parent)}}).execute(env=kernel_env())
    errors = _errors(nb)
    assert not errors, errors[0].get("evalue")
    text = _outputs_text(nb)
    assert "<strong>Verdict:</strong>" in text  # the run's head (warnings, verdict, claims) leads
    # it opens on the run its page opens on: where the study has committed runs, that one, and a
    # study this machine cannot run with its defaults (a GPU study on a CPU) stores no run of its own
    from workbench.results.catalog import Catalog, default_run
    from workbench.results.store import Store

    study = registry()[study_id]
    head = default_run(Catalog(None).headers(study=study_id), study)  # an empty store: the committed runs
    if head is not None:
        assert head.run_id in text
    if study.requires(study.SPACE.defaults()):
        stored = tmp_path / "results.sqlite"
        assert not stored.exists() or Store(stored, create=False).runs() == []
    assert not re.search(r"\d{3}_[0-9a-f]{16}\.txt", text + "".join(c.source for c in nb.cells))  # seeds by title
    # charts embedded once and small: a chart's output a PNG palette, a large spec left out
    assert len(nbformat.writes(nb)) < 2_000_000


def test_an_exported_notebook_has_no_absolute_path_opens_with_outputs_and_reruns_where_saved(tmp_path):
    rec = RunRecord(run_id="20260101-000000-calibration-aaaaaa", study="calibration",
                    params={"repeat": 5, "threads": 1, "torch": False}, env={"fingerprint": "f", "cpu_model": "X"},
                    status="complete", created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run calibration",
                    variants=[VariantResult("empty-call", {"kind": "harness"}, [30.0, 31.0, 33.0, 34.0, 32.0], True, "ok")])
    path = write_notebook(rec, tmp_path / "export" / "run.ipynb")
    raw = path.read_text()
    assert str(REPO_ROOT) not in raw and str(tmp_path) not in raw, "an absolute path of the exporting machine"
    nb = nbformat.reads(raw, as_version=4)
    assert not _errors(nb) and "<strong>Verdict:</strong>" in _outputs_text(nb), "exported without its outputs"
    assert "import workbench as wb" in _sources(nb) and "from workbench" not in _sources(nb), "internal modules"
    # Someone else's machine: the folder moved, the workbench importable (kernel_env)
    moved = shutil.copytree(path.parent, tmp_path / "elsewhere")
    nb = nbformat.read(str(moved / "run.ipynb"), as_version=4)
    for cell in nb.cells:
        cell.pop("outputs", None) if cell.cell_type == "code" else None
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(moved)}}).execute(env=kernel_env())
    assert not _errors(nb) and "<strong>Verdict:</strong>" in _outputs_text(nb)
    assert json.loads((moved / "run.bundle.json").read_text())["run"]["run_id"] == rec.run_id
