"""The import graph of ``workbench/``, read from the source: no cycle, one door to the studies,
and imports inside functions only for heavy or optional stacks (so the graph a reader sees
is the whole of it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "workbench"
#: what a function may import for itself: stacks that cost start-up or may be missing
DEFERRED_OK = {"torch", "triton", "cupy", "pyopencl", "iree", "streamlit", "scipy", "altair", "vl_convert", "nbclient",
               "nbformat", "IPython", "ipywidgets",
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
                assert path == CORE / "registry.py", f"{path.relative_to(ROOT)} imports {module}: only registry.py may"


#: the one deferred import of the workbench itself: the entry point sets the signal handlers
#: before the CLI's imports (workbench.interrupt), so a Ctrl-C while they run is not lost
DEFERRED_HERE = {("workbench/__main__.py", "workbench.cli")}


def test_functions_import_only_heavy_or_optional_stacks():
    late = [f"{path.relative_to(ROOT)}: {module}" for path in sorted(CORE.rglob("*.py"))
            for module, in_function in _imports(path) if in_function and module.split(".")[0] not in DEFERRED_OK
            and (str(path.relative_to(ROOT)), module) not in DEFERRED_HERE]
    assert not late, "imports inside functions (move them to the top of the module): " + "; ".join(late)


def test_the_graph_reader_sees_real_edges():
    """The checks above read what they should: a known edge and a known deferred import."""
    graph = _graph()
    assert "workbench.record" in graph["workbench.store"] and "workbench.registry" in graph["workbench.store"]
    assert ("scipy", True) in [(m.split(".")[0], f) for m, f in _imports(CORE / "stats.py")]
