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
import re
from types import ModuleType
from typing import Any, Iterable

#: titles every study's tables share (the engine's tables: workbench.evidence.derived, workbench.reading.analysis)
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


def title(study: ModuleType | None, name: str, tables: dict | None = None, kind: str = "table") -> str:
    """The title of a study's table (``kind="table"``) or chart (``kind="chart"``) ``name``:
    the study's ``TITLES`` entry ``"chart:<name>"`` (for a chart named like a table), else
    ``name``, else the longest ``"<prefix>*"`` entry ``name`` starts with (charts named per
    capture: its title, then the rest of the name in words), else :data:`COMMON`, else the
    name in words. An entry may be a function of the run's ``tables`` (a title that says
    what the run's parameters make of it)."""
    declared = getattr(study, "TITLES", None) if study is not None else None
    declared = declared if isinstance(declared, dict) else {}
    value = declared.get(f"{kind}:{name}", declared.get(name))
    suffix = ""
    if value is None:
        prefixes = [k for k in declared if isinstance(k, str) and k.endswith("*") and name.startswith(k[:-1])]
        if prefixes:
            best = max(prefixes, key=len)
            value, suffix = declared[best], words(name[len(best) - 1:]).strip()
    if callable(value):
        try:
            value = value(tables or {})
        except Exception:  # noqa: BLE001 - a title must never break a page or a report
            value = None
    if isinstance(value, str) and value:
        return f"{value}: {suffix}" if suffix else value
    return COMMON.get(name) or words(name)


def titled_cells(df, study: ModuleType | None, tables: dict | None = None):
    """``df`` with the ids of a ``table`` column (a derived table's rows say which table they
    belong to: ``vs_torch``) read as those tables' titles; ``df`` itself where it has none."""
    if df is None or "table" not in getattr(df, "columns", ()) or not tables:
        return df
    known = set(tables)
    return df.assign(table=[title(study, v, tables) if isinstance(v, str) and v in known else v
                            for v in df["table"]])


def seed_title(study: ModuleType | None) -> str:
    """The seed as people name it (``IREE issue #24011, a 1M-float sum against PyTorch``), not its
    file name."""
    if study is None:
        return ""
    return str(getattr(study, "SEED_TITLE", None) or getattr(study, "SEED", ""))


#: a seed's file name (``004_7d53943015c21e67.txt``), with the "seed " before it and the colon after
_SEED_FILE = re.compile(r"(?:\bseed\s+)?\b\d{3}_[0-9a-f]{16}\.txt\b:?\s*")


def seed_text(text: Any, study: ModuleType | None = None) -> str:
    """Text about a seed with its file name taken out (``seed 000_a90...txt: IREE issue #24011``
    reads ``IREE issue #24011``); the seed's title where nothing is left."""
    cleaned = _SEED_FILE.sub("", str(text or "")).strip()
    return cleaned or seed_title(study)


def did_you_mean(word: str, known: Iterable[Any], what: str = "") -> str:
    """`` (did you mean 'calibration'?)`` for the closest of ``known`` (difflib), else ''."""
    close = difflib.get_close_matches(str(word), [k for k in known if isinstance(k, str)], n=1, cutoff=0.6)
    return f" (did you mean {what}{close[0]!r}?)" if close else ""
