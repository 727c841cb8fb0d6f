"""The package as pyproject.toml declares it: one list of dependencies (requirements.txt points
at it), every third-party module the package imports declared there, the version read from
``workbench.__version__``, and the ``workbench`` command the same as ``python -m workbench``.
(The wheel's contents and an install of it: tests/e2e/test_jupyter.py.)"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: modules the package imports without declaring them, and why
UNDECLARED_OK = {"cupy": "NVIDIA GPUs only: the node's own CuPy build for its CUDA",
                 "cuda": "NVIDIA GPUs only: cuda-python, where the node has it (the copy-engine fetch's 2-D copies)",
                 "orjson": "optional: the Chrome-trace importer's faster parser (the test extra installs it)"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported() -> set[str]:
    """Top-level modules the package's files import, outside the standard library and itself."""
    names: set[str] = set()
    for package in ("workbench", "studies", "kernels"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("workbench", "studies", "kernels")}


def test_requirements_txt_is_the_project_and_its_test_extra():
    lines = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert lines == ["-e .[test]"], "the dependencies are declared once, in pyproject.toml"
    assert "test" in PROJECT["project"]["optional-dependencies"]


def test_every_imported_module_is_a_declared_dependency():
    declared = {_name(r) for r in PROJECT["project"]["dependencies"]}
    declared |= {_name(r) for r in PROJECT["project"]["optional-dependencies"]["test"]}
    dists = packages_distributions()
    missing = {m: dists.get(m) for m in _imported() - set(UNDECLARED_OK)
               if not {d.lower().replace("_", "-") for d in dists.get(m, [m])} & declared}
    assert not missing, f"imported but not in pyproject.toml's dependencies: {missing}"
    runtime = {_name(r) for r in PROJECT["project"]["dependencies"]}
    assert {"ipywidgets", "ipython", "vl-convert-python", "nbformat"} <= runtime


def test_the_version_and_the_command_come_from_the_package():
    import workbench

    assert PROJECT["project"]["dynamic"] == ["version"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "workbench.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", workbench.__version__)
    module, func = PROJECT["project"]["scripts"]["workbench"].split(":")
    code = f"import sys; sys.argv = ['workbench', 'list']; from {module} import {func}; raise SystemExit({func}())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "calibration" in proc.stdout, proc.stderr


def test_the_packages_found_are_the_library_the_studies_and_the_kernels():
    find = PROJECT["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["workbench*", "studies*", "kernels*"] and find["namespaces"]
    data = PROJECT["tool"]["setuptools"]["package-data"]
    for source in (ROOT / "kernels").rglob("*"):  # every kernel source a study reads at run time
        if source.is_file() and source.suffix != ".py" and "__pycache__" not in source.parts:
            package = ".".join(source.parent.relative_to(ROOT).parts)
            assert any(source.match(pattern) for pattern in data.get(package, [])), source.relative_to(ROOT)


#: what a GPU node's image lacks (the device's package list): the CLI measures there all the same
GPU_NODE_LACKS = ("nbformat", "nbclient", "altair", "jsonschema", "streamlit", "ipywidgets", "IPython", "vl_convert")


def test_the_cli_and_the_gpu_studies_import_without_the_notebook_and_ui_packages():
    blocker = f"""
import importlib.abc, sys
class Lacks(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {GPU_NODE_LACKS!r}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Lacks())
import workbench.cli, workbench.running.launcher, studies.ag_gemm.worker, studies.mc2_split.worker
"""
    proc = subprocess.run([sys.executable, "-c", blocker], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
