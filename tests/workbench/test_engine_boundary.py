"""The comparison engine is the only place that decides (issue 41): no module outside it sets
a status, builds a derived row or a claim's result, or reaches into the engine's private
parts; what the engine builds obeys its rules on every committed bundle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: the engine: the modules that build derived rows, judge them and write verdicts
ENGINE = {"workbench/evidence/derived.py", "workbench/evidence/engine.py", "workbench/evidence/claims.py", "workbench/evidence/verdict.py",
          "workbench/reading/across.py", "workbench/reading/comparison.py", "workbench/evidence/stats.py",
          # the engine's coverage benchmark states synthetic runs' figures (known truth) as input
          "benchmarks/engine_coverage.py"}
STATUS_WORDS = {"clear", "inconclusive", "not meaningful", "holds", "direction holds", "contradicted",
                "not testable here"}
#: keywords that set what a row or result may claim
DECIDING_KEYWORDS = {"status", "caveat"}
BUILDERS = {"Derived", "ClaimResult", "judge"}


def _sources() -> list[Path]:
    out = []
    for folder in ("workbench", "studies", "pages", "benchmarks", "scripts"):
        out += sorted((ROOT / folder).rglob("*.py"))
    return [p for p in out if p.relative_to(ROOT).as_posix() not in ENGINE]


def _engine_privates() -> set[str]:
    from workbench.evidence import engine

    return {n for n in dir(engine.Evidence) if n.startswith("_") and not n.startswith("__")} | \
           {n for n in vars(engine) if n.startswith("_") and not n.startswith("__")}


def violations(path: Path, privates: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    label = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    out = []
    for node in ast.walk(tree):
        where = f"{label}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if name in BUILDERS:
                out.append(f"{where}: builds {name}(...) outside the engine")
            for kw in node.keywords:
                word = isinstance(kw.value, ast.Constant) and kw.value.value in STATUS_WORDS
                if kw.arg in DECIDING_KEYWORDS and (word or name == "replace" or kw.arg == "caveat"):
                    out.append(f"{where}: passes {kw.arg}= (only the engine decides it)")
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == "status":
                    out.append(f"{where}: assigns a status column")
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if (isinstance(k, ast.Constant) and k.value == "status" and isinstance(v, ast.Constant)
                        and v.value in STATUS_WORDS):
                    out.append(f"{where}: writes status {v.value!r} by hand")
        elif isinstance(node, ast.Attribute) and node.attr in privates and not node.attr.startswith("__"):
            out.append(f"{where}: reaches into the engine's private {node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.endswith(("engine", "derived")):
            out += [f"{where}: imports the engine's private {a.name}" for a in node.names if a.name in privates]
    return out


def test_no_module_outside_the_engine_sets_a_status_or_builds_a_derived_row():
    privates = _engine_privates()
    found = [v for p in _sources() for v in violations(p, privates)]
    assert not found, "\n".join(found)


def test_the_check_catches_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from workbench.evidence.derived import Derived\nfrom workbench.evidence.engine import _rng\n"
                   "d = Derived('x', 1, 1, 1, 'x', 1, 'clear')\nimport dataclasses\n"
                   "e = dataclasses.replace(d, status='clear')\nrow = {}\nrow['status'] = 'holds'\n"
                   "t = {'status': 'clear'}\nev._unpaired('ratio')\n")
    found = violations(bad, _engine_privates())
    assert any("builds Derived" in v for v in found)
    assert any("passes status=" in v for v in found)
    assert any("assigns a status column" in v for v in found)
    assert any("writes status 'clear'" in v for v in found)
    assert any("private _unpaired" in v for v in found)
    assert any("private _rng" in v for v in found)
