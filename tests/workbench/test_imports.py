"""The import graph of ``workbench/``, read from the source: no cycle, one door to the studies
(``workbench/seam/registry.py``, for imports by name too: ``importlib.import_module``, ``__import__``,
``find_spec`` anywhere in the repository), pages that ask a study's seam and not its modules, and
imports inside functions only for heavy or optional stacks (so the graph a reader sees is the
whole of it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "workbench"
#: what a function may import for itself: stacks that cost start-up or may be missing
DEFERRED_OK = {"torch", "triton", "cupy", "pyopencl", "iree", "streamlit", "scipy", "altair", "vl_convert", "nbclient",
               "nbformat", "IPython", "ipywidgets", "PIL",
               "jsonschema", "orjson", "zstandard", "lz4", "perfetto", "re2"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(absolute module imported, inside a function) for every import of the file; ``from .
    import x`` names the submodule x when there is one."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                for a in child.names:
                    sub = f"{base}.{a.name}"
                    out.append((sub if _file_of(sub) else base, in_function))
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return out


def _file_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _graph() -> dict[str, set[str]]:
    files = sorted(CORE.rglob("*.py"))
    return {_module_name(f): {m for m, _ in _imports(f) if m.split(".")[0] == "workbench" and m != _module_name(f)}
            for f in files}


def test_the_core_has_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            if nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])


def test_only_the_registry_imports_the_studies_and_nothing_imports_the_ui():
    for path in sorted(CORE.rglob("*.py")):
        for module, _ in _imports(path):
            top = module.split(".")[0]
            assert top not in ("pages", "streamlit", "app", "serve"), f"{path.relative_to(ROOT)} imports {module}"
            if top == "studies":
                assert path == CORE / "seam" / "registry.py", f"{path.relative_to(ROOT)} imports {module}: only seam/registry.py may"


#: the deferred imports of the workbench itself: the entry point sets the signal handlers
#: before the CLI's imports (workbench.base.interrupt), so a Ctrl-C while they run is not lost; the
#: trace command imports only its own module (the rest of the CLI's imports cost it a third of
#: its time on a small trace)
DEFERRED_HERE = {("workbench/__main__.py", "workbench.cli"), ("workbench/__main__.py", "workbench.traces.cli")}
#: the CLI's commands import what only they use (pandas, the studies' analyses, the statistics,
#: the report writers): a typo's error line comes before them, within a second (issue 44;
#: benchmarks/cli.py), and test_cli's test_an_error_line_comes_before_the_heavy_imports keeps it so
DEFERRED_HERE |= {(f"workbench/cli/{command}.py", m) for command, modules in {
    "base": ("pandas", "workbench.evidence.tables"), "studies": ("pandas", "workbench.evidence.tables"),
    "run": ("workbench.evidence.tables", "workbench.running.runner", "workbench.reading.across", "workbench.reading.analysis"),
    "compare": ("workbench.reading.comparison",), "ab": ("workbench.reading.comparison", "workbench.running.runner", "workbench.running.ab_session"),
    "readme": ("workbench.reading.readme",), "files": ("workbench.presentation.report",), "trace": ("workbench.traces.cli",)}.items()
    for m in modules}
#: the registry checks a study's claims (pandas) only once studies are loaded: an unknown id is
#: told from the modules' names alone
DEFERRED_HERE |= {("workbench/seam/registry.py", "workbench.evidence.claims")}


def test_functions_import_only_heavy_or_optional_stacks():
    late = [f"{path.relative_to(ROOT)}: {module}" for path in sorted(CORE.rglob("*.py"))
            for module, in_function in _imports(path) if in_function and module.split(".")[0] not in DEFERRED_OK
            and (str(path.relative_to(ROOT)), module) not in DEFERRED_HERE]
    assert not late, "imports inside functions (move them to the top of the module): " + "; ".join(late)


#: calls that import a module named by a string (or find one to import)
IMPORTS_BY_NAME = {"import_module", "__import__", "find_spec", "spec_from_file_location", "run_module", "run_path"}
REGISTRY = CORE / "seam" / "registry.py"


def _python_files() -> list[Path]:
    """The repository's own Python: the core, studies, kernels, pages, scripts, benchmarks, tests
    and the app's entry points (not the virtual environment, not build outputs)."""
    tops = ("workbench", "studies", "kernels", "pages", "scripts", "benchmarks", "tests")
    return sorted([p for top in tops for p in (ROOT / top).rglob("*.py")] + [ROOT / "app.py", ROOT / "serve.py"])


def _leading_text(node: ast.expr) -> str | None:
    """The literal start of a string argument (a constant, or an f-string's text before its
    first placeholder); None when the argument does not start with literal text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def imports_by_name(source: str) -> list[tuple[int, str | None]]:
    """(line, the literal start of the name or None) of every import by name in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in IMPORTS_BY_NAME:
                found.append((node.lineno, _leading_text(node.args[0])))
    return found


def _names_a_study(text: str | None) -> bool:
    return text is not None and text.replace("/", ".").lstrip(".").startswith("studies")


def test_no_import_by_name_of_a_study_outside_the_registry():
    """Only the registry turns a name into a study module; in the core, every other import by
    name starts with literal text (its own submodules), so none can name a study from data."""
    bad = []
    for path in _python_files():
        if path == REGISTRY:
            continue
        for line, text in imports_by_name(path.read_text()):
            if _names_a_study(text) or (text is None and path.is_relative_to(CORE)):
                bad.append(f"{path.relative_to(ROOT)}:{line}")
    assert not bad, "studies are imported by name only in workbench/seam/registry.py: " + ", ".join(bad)


def test_the_check_of_imports_by_name_catches_each_form():
    source = ("import importlib\nimportlib.import_module('studies.ag_gemm.worker')\n"
              "__import__(f'studies.{name}.worker')\nimportlib.util.find_spec(spec['worker'])\n"
              "import_module(f'.{API[name]}', __name__)\nimportlib.import_module('os')\n")
    found = imports_by_name(source)
    assert found == [(2, "studies.ag_gemm.worker"), (3, "studies."), (4, None), (5, "."), (6, "os")]
    assert [_names_a_study(t) for _, t in found] == [True, True, False, False, False]
    assert _names_a_study("studies/mc2_split/worker.py")


def test_pages_ask_a_study_s_seam_not_its_modules():
    """A page imports ``studies.<package>`` (the seam) and what the seam exports, never a module
    inside the package: what a page needs, the seam names."""
    ui = sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]
    reached = [f"{path.relative_to(ROOT)}: {module}" for path in ui for module, _ in _imports(path)
               if module.split(".")[0] == "studies" and module.count(".") > 1]
    assert not reached, "pages reach into a study's modules: " + "; ".join(reached)


def test_the_graph_reader_sees_real_edges():
    """The checks above read what they should: a known edge and a known deferred import."""
    graph = _graph()
    assert "workbench.data.record" in graph["workbench.results.store"] and "workbench.seam.registry" in graph["workbench.results.store"]
    assert ("scipy", True) in [(m.split(".")[0], f) for m, f in _imports(CORE / "evidence" / "stats.py")]
