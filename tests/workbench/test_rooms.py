"""The core's rooms (docs/README.md, "The core's rooms"): every module of ``workbench/`` sits in a
room named by what it does, or is one of the doors at the top; a room imports only from itself
and the rooms below it, never from a room above or from a door, whether the import is at the top
of a module or inside a function, absolute, relative or by name."""

from __future__ import annotations

from pathlib import Path

from tests.workbench.test_imports import CORE, ROOT, _imports, _module_name, imports_by_name

#: the rooms, lowest first: a room may import itself and the rooms before it
ROOMS = ["base", "data", "evidence", "seam", "results", "running", "reading", "traces", "presentation"]
#: the doors at the top, lowest first: what pages, studies, notebooks and the shell call. A door
#: may import any room and the doors before it (``api`` takes the run summary from ``cli``;
#: ``knobs``, the notebook's explorer behind ``wb.explore``, is built on ``api``; ``__main__``
#: starts the CLI; the package's ``__init__`` loads the API's names on first use)
DOORS = ["cli", "api", "knobs", "__main__", "__init__"]


def _place(module: str) -> str | None:
    """The room or door of a dotted ``workbench`` module (None outside the core)."""
    parts = module.split(".")
    if parts[0] != "workbench":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _rank(place: str) -> int:
    return ROOMS.index(place) if place in ROOMS else len(ROOMS) + DOORS.index(place)


def _by_name(path: Path) -> list[str]:
    """The modules a file imports by a literal name (``import_module("workbench.x")``, or
    ``f".{name}"`` relative to its package: at least that package)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for _, text in imports_by_name(path.read_text()):
        if text and text.startswith("."):
            out.append(package)
        elif text and text.startswith("workbench"):
            out.append(text.rstrip("."))
    return out


def _wrong_way(paths: list[Path]) -> list[str]:
    bad = []
    for path in paths:
        here = _place(_module_name(path))
        for module in [m for m, _ in _imports(path)] + _by_name(path):
            there = _place(module)
            if there is None or there == here:
                continue
            if there in DOORS and here in ROOMS:
                bad.append(f"{path.relative_to(ROOT)} imports {module}: a room does not call a door")
            elif there in ROOMS + DOORS and _rank(there) > _rank(here):
                bad.append(f"{path.relative_to(ROOT)} ({here}) imports {module} ({there}, above it)")
    return bad


def test_every_module_sits_in_a_room_or_is_a_door():
    flat = [p.stem for p in CORE.glob("*.py") if p.stem not in DOORS]
    assert not flat, f"modules left flat in workbench/ (put each in its room): {flat}"
    folders = {p.name for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= set(ROOMS) | set(DOORS), f"folders that are no room: {sorted(folders - set(ROOMS) - set(DOORS))}"
    assert all((CORE / room / "__init__.py").is_file() for room in ROOMS)


def test_imports_run_down_between_rooms():
    bad = _wrong_way(sorted(CORE.rglob("*.py")))
    assert not bad, "imports against the rooms' order: " + "; ".join(bad)


def test_the_check_sees_an_import_up_and_one_into_a_door(tmp_path, monkeypatch):
    """A function-level relative import from base up to results, and a room calling the CLI."""
    import tests.workbench.test_rooms as me

    fake = tmp_path / "workbench"
    (fake / "base").mkdir(parents=True)
    (fake / "base" / "units.py").write_text("def f():\n    from ..results import store\n")
    (fake / "presentation").mkdir()
    (fake / "presentation" / "jupyter.py").write_text("from ..cli import ProgressBar\n")
    monkeypatch.setattr("tests.workbench.test_imports.ROOT", tmp_path)  # where _imports resolves names
    monkeypatch.setattr(me, "ROOT", tmp_path)
    bad = _wrong_way(sorted(fake.rglob("*.py")))
    assert len(bad) == 2 and "above it" in bad[0] and "a room does not call a door" in bad[1]
