"""The study registry: the one door from the workbench to ``studies/``.

Every study is a package directly under ``studies/`` whose name does not start with ``_``
(its folder holds its code and its page, ``README.md``: :mod:`workbench.presentation.manual`);
:func:`registry` imports each, checks its hooks (:data:`REQUIRED_ATTRS`, the ``smoke`` and
``quick`` presets, a docstring, the seed's claims) and fails loudly on a broken one, never
skipping it. No other module of the repository imports a study by name, and no other module
of ``workbench/`` imports ``studies``.

``$WORKBENCH_STUDY_PACKAGES`` names further packages (comma-separated import names) whose
public modules are studies too, registered beside the built-in ones: a study kept outside
this repository, or the one a test writes (``tests/studies/test_new_study.py``).

A study's module name is its id with underscores (``mc2-split`` is ``studies.mc2_split``), so
:func:`worker` finds a study's torchrun worker from its id alone: a rank imports its own study
and no other, and a run's spec names a study id, never a module path.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import studies

from ..base.names import did_you_mean

REQUIRED_ATTRS = ("ID", "TITLE", "SEED", "SEED_SUMMARY", "SPACE", "requires", "run", "analyze", "charts")
#: extra packages of studies (comma-separated import names)
PACKAGES_ENV = "WORKBENCH_STUDY_PACKAGES"
#: a study id: lower-case words joined by hyphens (its module name has underscores instead)
STUDY_ID = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


def check_module(mod: ModuleType) -> None:
    """Raise ImportError naming what a study module lacks or gets wrong."""
    missing = [a for a in REQUIRED_ATTRS if not hasattr(mod, a)]
    if missing:
        raise ImportError(f"study module {mod.__name__} lacks {', '.join(missing)}")
    if "smoke" not in mod.SPACE.presets or "quick" not in mod.SPACE.presets:
        raise ImportError(f"study {mod.ID} must declare 'smoke' and 'quick' presets")
    if not (mod.__doc__ or "").strip():
        raise ImportError(f"study module {mod.__name__} needs a docstring stating its question")
    if not hasattr(mod, "__path__"):
        raise ImportError(f"study {mod.__name__} is one file: a study is a package (studies/<package>/__init__.py), "
                          "whose folder holds its page")
    if not isinstance(getattr(mod, "RUNS_ON", ""), str):
        raise ImportError(f"study {mod.ID}: RUNS_ON must be a phrase (where it runs, e.g. 'any CPU')")
    if not isinstance(mod.ID, str) or not STUDY_ID.fullmatch(mod.ID) \
            or mod.__name__.rpartition(".")[2] != mod.ID.replace("-", "_"):
        raise ImportError(f"study module {mod.__name__}: its ID {mod.ID!r} must be its module name with hyphens "
                          "for underscores (lower-case words, e.g. mc2-split in studies/mc2_split)")
    from ..evidence.claims import check_claims  # pandas: only once studies are loaded, not for a CLI's error line

    check_claims(mod)
    for name in ("KEY_TABLE", "KEY_CHART"):
        if not isinstance(getattr(mod, name, ""), str):
            raise ImportError(f"study {mod.ID}: {name} must be the name of a table or chart")


#: the registry per value of $WORKBENCH_STUDY_PACKAGES (a test that sets it gets its own)
_CACHE: dict[str, dict[str, ModuleType]] = {}


def _packages(extra: str) -> list[ModuleType]:
    return [studies] + [importlib.import_module(name.strip()) for name in extra.split(",") if name.strip()]


def registry() -> dict[str, ModuleType]:
    """All study modules by ID. A broken study fails loudly, never silently."""
    extra = os.environ.get(PACKAGES_ENV, "")
    if extra not in _CACHE:
        found: dict[str, ModuleType] = {}
        for package in _packages(extra):
            for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
                if info.name.startswith("_"):
                    continue
                mod = importlib.import_module(f"{package.__name__}.{info.name}")
                if not hasattr(mod, "ID"):
                    # A typo (Id, id) must not make a study vanish; helpers live in _private modules.
                    raise ImportError(f"{package.__name__}/{info.name} has no ID: every public module there is a "
                                      "study (helper modules' names start with '_')")
                check_module(mod)
                if mod.ID in found:
                    raise ImportError(f"two studies share the id {mod.ID!r}")
                found[mod.ID] = mod
        _CACHE[extra] = found
    return _CACHE[extra]


def study_ids() -> list[str]:
    """The ids of the studies, from their module names alone (``cpu_reduction`` is
    ``cpu-reduction``; a test keeps the two in step): what an unknown id is told against without
    importing every study and its dependencies (a second or more), so a typo gets its line at once."""
    extra = os.environ.get(PACKAGES_ENV, "")
    return sorted(_CACHE[extra]) if extra in _CACHE else module_ids(extra)


def module_ids(extra: str = "") -> list[str]:
    """The study ids the modules' names give (``cpu_reduction`` -> ``cpu-reduction``), importing none."""
    return sorted(info.name.replace("_", "-") for package in _packages(extra)
                  for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_"))


def unknown_study(study_id: str) -> str:
    """The line for an id that names no study: the closest one, then the known ones."""
    known = study_ids()
    return f"unknown study {study_id!r}{did_you_mean(study_id, known)}; the studies: {', '.join(known)}"


def get(study_id: str) -> ModuleType:
    """The study ``study_id``: its module alone where its name gives it (a command about one
    study imports no other, checked as :func:`registry` checks each), else from the registry."""
    extra = os.environ.get(PACKAGES_ENV, "")
    if extra in _CACHE:
        if study_id not in _CACHE[extra]:
            raise KeyError(unknown_study(study_id))
        return _CACHE[extra][study_id]
    if study_id not in module_ids(extra):
        raise KeyError(unknown_study(study_id))
    for package in _packages(extra):
        name = f"{package.__name__}.{study_id.replace('-', '_')}"
        if importlib.util.find_spec(name) is not None:
            mod = importlib.import_module(name)
            if getattr(mod, "ID", None) == study_id:
                check_module(mod)
                return mod
    reg = registry()
    if study_id not in reg:
        raise KeyError(unknown_study(study_id))
    return reg[study_id]


def _worker_spec(study_id: str):
    """The import spec of a study's worker module, found by its id without importing the other
    studies; KeyError when no study of that id has one."""
    if not isinstance(study_id, str) or not STUDY_ID.fullmatch(study_id):
        raise KeyError(f"{str(study_id)[:80]!r} is not a study id")
    for package in _packages(os.environ.get(PACKAGES_ENV, "")):
        name = f"{package.__name__}.{study_id.replace('-', '_')}"
        study = importlib.util.find_spec(name)
        if study is not None and study.submodule_search_locations is not None:  # a package, not one file
            spec = importlib.util.find_spec(f"{name}.worker")  # imports the study's seam, the worker's parent
            if spec is not None and spec.origin:
                return spec
    raise KeyError(f"no study {study_id!r} with a worker (worker.py in its package)")


def worker_file(study_id: str) -> Path:
    """The source file of a study's torchrun worker (``worker.py`` in its package)."""
    return Path(_worker_spec(study_id).origin)


def worker(study_id: str) -> ModuleType:
    """A study's torchrun worker module, whose ``main(config, emitter)`` every rank of its
    distributed runs calls (:mod:`workbench.running.launcher`)."""
    return importlib.import_module(_worker_spec(study_id).name)
