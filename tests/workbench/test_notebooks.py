"""Notebooks: every study's notebook is generated from the library and executes cleanly; a run's
exported notebook carries no path of the machine that exported it, opens with its outputs, and
re-runs from the folder it was saved in."""

import json
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from workbench.env import REPO_ROOT
from workbench.report import write_notebook, write_study_notebooks
from workbench.record import RunRecord, VariantResult
from workbench.registry import registry


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory):
    return write_study_notebooks(tmp_path_factory.mktemp("notebooks"))


def _outputs_text(nb) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/markdown", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def _errors(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_study_notebook_executes(notebooks, study_id, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "machine.lock"))
    monkeypatch.setenv("WORKBENCH_ROOT", str(REPO_ROOT))  # the notebooks are not inside the checkout here
    path = next(p for p in notebooks if p.stem == study_id)
    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent.parent)}}).execute()
    errors = _errors(nb)
    assert not errors, errors[0].get("evalue")
    assert "**Verdict:**" in _outputs_text(nb)  # the analysis (disturbance, verdict, claims) leads the notebook


def test_an_exported_notebook_has_no_absolute_path_opens_with_outputs_and_reruns_where_saved(tmp_path, monkeypatch):
    rec = RunRecord(run_id="20260101-000000-calibration-aaaaaa", study="calibration",
                    params={"repeat": 5, "threads": 1, "torch": False}, env={"fingerprint": "f", "cpu_model": "X"},
                    status="complete", created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run calibration",
                    variants=[VariantResult("empty-call", {"kind": "harness"}, [30.0, 31.0, 33.0, 34.0, 32.0], True, "ok")])
    path = write_notebook(rec, tmp_path / "export" / "run.ipynb")
    raw = path.read_text()
    assert str(REPO_ROOT) not in raw and str(tmp_path) not in raw, "an absolute path of the exporting machine"
    nb = nbformat.reads(raw, as_version=4)
    assert not _errors(nb) and "**Verdict:**" in _outputs_text(nb), "exported without its outputs"
    # Someone else's machine: the folder moved, the checkout found through WORKBENCH_ROOT only.
    moved = shutil.copytree(path.parent, tmp_path / "elsewhere")
    monkeypatch.setenv("WORKBENCH_ROOT", str(REPO_ROOT))
    nb = nbformat.read(str(moved / "run.ipynb"), as_version=4)
    for cell in nb.cells:
        cell.pop("outputs", None) if cell.cell_type == "code" else None
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(moved)}}).execute()
    assert not _errors(nb) and "**Verdict:**" in _outputs_text(nb)
    assert json.loads((moved / "run.bundle.json").read_text())["run"]["run_id"] == rec.run_id
