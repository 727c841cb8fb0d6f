"""The study registry: the one door from the workbench to ``studies/``.

Every study is a package (or, for a one-file study, a module) directly under ``studies/``
whose name does not start with ``_``; :func:`registry` imports each, checks its hooks
(:data:`REQUIRED_ATTRS`, the ``smoke`` and ``quick`` presets, a docstring, the seed's claims)
and fails loudly on a broken one, never skipping it. No other module of ``workbench/``
imports ``studies``.

``$WORKBENCH_STUDY_PACKAGES`` names further packages (comma-separated import names) whose
public modules are studies too, registered beside the built-in ones: a study kept outside
this repository, or the one a test writes (``tests/studies/test_new_study.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from types import ModuleType

import studies

from .names import did_you_mean

REQUIRED_ATTRS = ("ID", "TITLE", "SEED", "SEED_SUMMARY", "SPACE", "requires", "run", "analyze", "charts")
#: extra packages of studies (comma-separated import names)
PACKAGES_ENV = "WORKBENCH_STUDY_PACKAGES"


def check_module(mod: ModuleType) -> None:
    """Raise ImportError naming what a study module lacks or gets wrong."""
    missing = [a for a in REQUIRED_ATTRS if not hasattr(mod, a)]
    if missing:
        raise ImportError(f"study module {mod.__name__} lacks {', '.join(missing)}")
    if "smoke" not in mod.SPACE.presets or "quick" not in mod.SPACE.presets:
        raise ImportError(f"study {mod.ID} must declare 'smoke' and 'quick' presets")
    if not (mod.__doc__ or "").strip():
        raise ImportError(f"study module {mod.__name__} needs a docstring stating its question")
    from .claims import check_claims  # pandas: only once studies are loaded, not for a CLI's error line

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
