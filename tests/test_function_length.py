"""Functions short enough to read whole: none over 80 lines in ``workbench/`` and ``pages/``,
none over 100 anywhere in the project's code (issue 45: the CLI's parser, the Perfetto importer,
the runner and the A/B session had grown past 80, the fused Triton kernel and the overlap probe
past 100; a long function is where a second reader stops following)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the most lines a function may take, its decorators and docstring counted
MAX_LINES = 80
#: the bound for the rest of the project's code (studies, kernels, scripts, benchmarks, tests)
MAX_LINES_ELSEWHERE = 100


def long_functions(source: str, limit: int = MAX_LINES) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function of ``source``, nested ones too, that takes
    more than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines = node.end_lineno - first + 1
            if lines > limit:
                out.append((node.name, node.lineno, lines))
    return out


@pytest.mark.parametrize("top", ["workbench", "pages"])
def test_no_function_is_over_80_lines(top):
    files = sorted((ROOT / top).rglob("*.py"))
    assert files
    long = [f"{p.relative_to(ROOT)}:{line} {name} ({n} lines)" for p in files
            for name, line, n in long_functions(p.read_text(encoding="utf-8"))]
    assert not long, f"functions over {MAX_LINES} lines (split them by what they do): " + "; ".join(long)


@pytest.mark.parametrize("top", ["studies", "kernels", "scripts", "benchmarks", "tests"])
def test_no_function_elsewhere_is_over_100_lines(top):
    files = sorted((ROOT / top).rglob("*.py"))
    assert files
    long = [f"{p.relative_to(ROOT)}:{line} {name} ({n} lines)" for p in files
            for name, line, n in long_functions(p.read_text(encoding="utf-8"), MAX_LINES_ELSEWHERE)]
    assert not long, f"functions over {MAX_LINES_ELSEWHERE} lines (split them by what they do): " + "; ".join(long)


def test_the_bound_sees_a_long_function_and_its_decorators():
    body = "    x = 1\n" * (MAX_LINES - 2)
    assert long_functions("def f():\n" + body) == []  # 79 lines
    assert long_functions("@cache\n@other\ndef f():\n" + body) == [("f", 3, MAX_LINES + 1)]
    assert long_functions("class C:\n    def m(self):\n" + body.replace("    ", "        ") + "        y = 2\n"
                          ) == []
    assert long_functions("def outer():\n    def inner():\n" + "        x = 1\n" * MAX_LINES) == \
        [("outer", 1, MAX_LINES + 2), ("inner", 2, MAX_LINES + 1)]
