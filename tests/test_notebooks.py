"""Study notebooks are generated from the library and every one executes cleanly."""

import nbformat
import pytest
from nbclient import NotebookClient

from workbench.report import write_study_notebooks
from workbench.study import registry


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory):
    return write_study_notebooks(tmp_path_factory.mktemp("notebooks"))


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_study_notebook_executes(notebooks, study_id, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "machine.lock"))
    path = next(p for p in notebooks if p.stem == study_id)
    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/markdown", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "**Verdict:**" in text  # the analysis (disturbance, verdict, claims) leads the notebook
