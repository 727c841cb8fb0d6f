"""Names for readers: what a table, chart, section or seed is called where people read it.

Studies keep short ids for their tables and charts (``seed_overview``, ``python_cost``): they
are keys in the API's DataFrames, the JSON and the anchors of a report, and stay so. What a
page, a report, a notebook or the CLI prints is the title the study declares for it
(``TITLES`` in the study's ``report.py``, exported by its seam: ``{"seed_overview": "The
seed's table, with this run's rows"}``), or, for a name it has no title for, the id read as
words (``phase_diff`` -> ``Phase diff``). A seed is named by its title (``SEED_TITLE``), never by
its file name. :func:`did_you_mean` gives the closest known word to a typo (studies, knobs,
presets, run ids).
"""

from __future__ import annotations

import difflib
from types import ModuleType
from typing import Any, Iterable

#: titles every study's tables share (the engine's tables: workbench.derived, workbench.analysis)
COMMON = {
    "derived": "Derived numbers: differences, ratios and shares with their 95% CIs",
    "nulls": "Null controls: A/A twins that measure the drift between blocks",
    "drift": "Drift between blocks",
    "results": "Results per variant",
}


def words(name: Any) -> str:
    """An id read as words: ``phase_diff`` -> ``Phase diff``, ``vs-per-call`` -> ``Vs per call``."""
    text = str(name).replace("_", " ").replace("-", " ").strip()
    return text[:1].upper() + text[1:] if text else str(name)


def title(study: ModuleType | None, name: str) -> str:
    """The title of a study's table or chart ``name`` (see the module docstring)."""
    declared = getattr(study, "TITLES", None) if study is not None else None
    if isinstance(declared, dict) and isinstance(declared.get(name), str):
        return declared[name]
    return COMMON.get(name) or words(name)


def seed_title(study: ModuleType | None) -> str:
    """The seed as people name it (``IREE issue #24011, a 1M-float sum against PyTorch``), not its
    file name."""
    if study is None:
        return ""
    return str(getattr(study, "SEED_TITLE", None) or getattr(study, "SEED", ""))


def did_you_mean(word: str, known: Iterable[Any], what: str = "") -> str:
    """`` (did you mean 'calibration'?)`` for the closest of ``known`` (difflib), else ''."""
    close = difflib.get_close_matches(str(word), [k for k in known if isinstance(k, str)], n=1, cutoff=0.6)
    return f" (did you mean {what}{close[0]!r}?)" if close else ""
