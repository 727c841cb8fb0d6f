"""Tables every study starts from: THE per-variant results table (median, CI, noise, check,
harness-floor and load notes), its display form, and the long table of raw samples; and the
one renderer of tables as text: :func:`render` (Markdown for reports, plain for the CLI,
through ``tabulate``), with one number format per column (:func:`number_formats`, which the
app's tables use too, through a pandas Styler) and no ``<NA>``.

The one harness-floor rule lives here (:func:`floor_notes`): the harness promises that a figure
within a few times its own measured floor (``rec.floor_ns``) is dominated by the measurement,
so the note fires below :data:`FLOOR_FACTOR` x that floor, never at a fixed time.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from tabulate import tabulate

from ..base import machine_load as load
from . import stats
from ..base import units
from .derived import fmt_derived
from ..data.record import RunRecord
from ..base.untrusted import escape, plain

#: a median below this many times the run's measured harness floor is dominated by the harness
FLOOR_FACTOR = 5

VARIANT_COLUMNS = ["variant", "samples", "median_ns", "ci_lo_ns", "ci_hi_ns", "min_ns", "iqr_ns", "noise", "noisy",
                   "correct", "check", "floor_note", "load", "load_note"]


def floor_notes(median_ns, floor_ns: float | None) -> np.ndarray:
    """The harness-floor note for each median (an array of str, empty where none): studies
    that build their own per-variant columns call this, never a copy of the rule."""
    med = np.atleast_1d(np.asarray(median_ns, dtype=float))
    if not floor_ns or not math.isfinite(floor_ns) or floor_ns <= 0:
        return np.full(med.shape, "", dtype=object)
    note = f"within {FLOOR_FACTOR}x the harness floor ({stats.fmt_ns(floor_ns)}): dominated by the measurement"
    return np.where(med < FLOOR_FACTOR * floor_ns, note, "").astype(object)


def variants_table(rec: RunRecord) -> pd.DataFrame:
    """The per-variant results table: one row per variant, the variant's own params as columns
    (e.g. ``provider``, ``w``), then :data:`VARIANT_COLUMNS`.

    The sample count is ``samples`` (not ``n``, which studies use for a problem size); ``load``
    is the 1-minute load average sampled after the variant (NaN where not sampled) and
    ``load_note`` says when it was measured under load (:mod:`workbench.base.machine_load`).

    Kept on the record while its variants stay the same objects (the analysis, then each
    study's ``analyze``, ask for it: a bootstrap CI per variant, three times over, made a report
    of thousands of variants take minutes); a copy is returned, so callers may change it."""
    key = (rec.floor_ns, id(rec.outputs),
           tuple((id(v), id(v.samples_ns), len(v.samples_ns), id(v.extra)) for v in rec.variants))
    kept = rec.__dict__.get("_variants_table")
    if kept is not None and kept[0] == key:
        return kept[1].copy()
    df = _variants_table(rec)
    rec.__dict__["_variants_table"] = (key, df)
    return df.copy()


def _variants_table(rec: RunRecord) -> pd.DataFrame:
    rows = []
    for v, load_note in zip(rec.variants, load.variant_notes(rec)):
        s = stats.summarize(v.samples_ns)
        sample = v.extra.get("load") if isinstance(v.extra, dict) else None
        rows.append({"variant": v.variant, **v.params, "samples": s.n, "median_ns": s.median,
                     "ci_lo_ns": s.ci_lo, "ci_hi_ns": s.ci_hi, "min_ns": s.min, "iqr_ns": s.iqr, "noise": s.noise,
                     "noisy": s.noisy, "correct": v.correct, "check": v.check,
                     "load": load.loadavg(sample), "load_note": load_note})
    if not rows:
        return pd.DataFrame(columns=VARIANT_COLUMNS)
    df = pd.DataFrame(rows)
    df.insert(df.columns.get_loc("check") + 1, "floor_note", floor_notes(df["median_ns"], rec.floor_ns))
    return df


def check_text(correct: bool, check: str) -> str:
    """'ok: <how it was checked>' or 'FAILED: <why>', without doubling a study's own prefix."""
    word = "ok" if correct else "FAILED"
    check = (check or "").strip()
    return check if check.lower().startswith(word.lower()) else f"{word}: {check}".rstrip(": ")


def results_display(results: pd.DataFrame) -> pd.DataFrame:
    """The results table as people read it (page, report, CLI, notebook): formatted times,
    the check, and one ``note`` column (noisy, harness floor, measured under load)."""
    rows = []
    for r in results.to_dict("records"):
        note = "; ".join(x for x in [f"noisy (IQR {r['noise']:.0%} of the median)" if r["noisy"] else "",
                                     r["floor_note"], r["load_note"]] if x)
        rows.append({"variant": r["variant"], "samples": r["samples"], "median": stats.fmt_ns(r["median_ns"]),
                     "95% CI": f"{stats.fmt_ns(r['ci_lo_ns'])} .. {stats.fmt_ns(r['ci_hi_ns'])}",
                     "IQR/median": f"{r['noise']:.1%}" if r["noise"] == r["noise"] else "n/a",
                     "check": check_text(r["correct"], r["check"]), "note": note})
    return pd.DataFrame(rows, columns=["variant", "samples", "median", "95% CI", "IQR/median", "check", "note"])


def samples_table(rec: RunRecord) -> pd.DataFrame:
    """Long table of raw samples: variant, its params, sample index, ns."""
    rows = [
        {"variant": v.variant, **v.params, "sample": i, "ns": s, "correct": v.correct}
        for v in rec.variants for i, s in enumerate(v.samples_ns)
    ]
    return pd.DataFrame(rows)


def with_us(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``*_us`` columns beside ``*_ns`` ones for display."""
    out = df.copy()
    for col in [c for c in df.columns if c.endswith("_ns")]:
        out[col[:-3] + "_us"] = df[col] / 1e3
    return out


# --- rendering: one function for the CLI's and the reports' tables -----------------------------

#: what a missing value (None, NaN, pd.NA) shows as, in every table
MISSING = "—"


@dataclass(frozen=True)
class NumberFormat:
    """One number format for a whole column: ``int`` (``166,310``), ``fixed`` with
    ``decimals`` (``72.62``), or ``sci`` (``7.262e+04``) when the column spans many decades."""

    kind: str
    decimals: int = 0

    def __call__(self, x: float) -> str:
        if self.kind == "sci":
            return f"{x:.{self.decimals}e}"
        if self.kind == "sig":  # a column in a unit picked by magnitude: three significant digits a cell
            return units.number(x, self.decimals or units.DIGITS)
        return f"{x:,.{self.decimals if self.kind == 'fixed' else 0}f}"



def _is_missing(x: Any) -> bool:
    try:
        return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)) or bool(pd.isna(x)) is True
    except (TypeError, ValueError):  # lists and arrays: not missing
        return False


def number_format(values: Iterable[Any]) -> NumberFormat:
    """The format for a column's numbers: integers with separators; else about three
    significant digits for its small values, fewer decimals when it also holds large ones;
    scientific when it spans more than five decades from below 0.001 or reaches 1e9."""
    finite = [abs(float(v)) for v in values if not _is_missing(v) and math.isfinite(float(v))]
    if all(float(v).is_integer() for v in finite) and max(finite, default=0) < 1e15:
        return NumberFormat("int")
    nonzero = [v for v in finite if v > 0]
    lo, hi = min(nonzero, default=1.0), max(nonzero, default=1.0)
    if hi >= 1e9 or (lo < 1e-3 and hi / lo > 1e5):
        return NumberFormat("sci", 3)
    decimals = max(0, min(4, 2 - math.floor(math.log10(lo))))
    if hi >= 1e4:
        decimals = min(decimals, 1)
    return NumberFormat("fixed", decimals)


def number_formats(df: pd.DataFrame) -> dict[str, NumberFormat]:
    """One :class:`NumberFormat` per numeric (not boolean) column of ``df``, by column name."""
    return {str(df.columns[i]): f for i, f in _formats_by_position(df).items()}


def _formats_by_position(df: pd.DataFrame) -> dict[int, NumberFormat]:
    out = {}
    scaled = df.attrs.get(SCALED, ())  # columns readable() put in a unit: significant digits
    for i in range(len(df.columns)):
        s = df.iloc[:, i]
        if str(df.columns[i]) in scaled:
            out[i] = NumberFormat("sig", units.DIGITS)
            continue
        if pd.api.types.is_bool_dtype(s):
            continue
        numbers = s.map(lambda x: _is_missing(x) or (isinstance(x, (int, float, np.integer, np.floating))
                                                      and not isinstance(x, (bool, np.bool_))))
        if pd.api.types.is_numeric_dtype(s) or (bool(numbers.all()) and bool(s.notna().any())):
            out[i] = number_format(s.tolist())
    return out


def cell_text(x: Any, fmt: NumberFormat | None = None) -> str:
    """A value as table text: its column's number format, :data:`MISSING` for a missing value,
    yes/no for a boolean, compact JSON for a list or dict."""
    if isinstance(x, (list, tuple, dict)):
        return json.dumps(x, default=str, separators=(",", ":"))
    if _is_missing(x):
        return MISSING
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, float, np.integer, np.floating)):
        x = float(x)
        if not math.isfinite(x):
            return "inf" if x > 0 else "-inf"
        return (fmt or number_format([x]))(x)
    return str(x)


def md_table(df: pd.DataFrame, max_rows: int = 200) -> str:
    """A GitHub table (:func:`render`): cells escaped, one number format per column."""
    return render(df, "markdown", max_rows)


def render(df: pd.DataFrame, style: str = "markdown", max_rows: int | None = 200) -> str:
    """``df`` as a table: ``markdown`` (a GitHub table, every cell escaped; whitespace padding
    dropped, so reports stay small) or ``plain`` (aligned text for a terminal, control
    characters replaced). One number format per column (:func:`number_formats`)."""
    if df is None or len(df.columns) == 0:
        return "_(no rows)_" if style == "markdown" else "(no rows)"
    df = readable(df)
    shown = df.head(max_rows) if max_rows else df
    formats = _formats_by_position(shown)
    text = escape if style == "markdown" else (lambda x, *_: plain(x))
    header = [text(c, "cell") for c in shown.columns]
    rows = [[text(cell_text(v, formats.get(i)), "cell") for i, v in enumerate(row)]
            for row in shown.itertuples(index=False)]
    align = ["right" if i in formats else "left" for i in range(len(shown.columns))]
    if style == "markdown":
        if not rows:
            return "_(no rows)_"
        lines = tabulate(rows, header, tablefmt="pipe", disable_numparse=True, colalign=align).splitlines()
        lines[1] = re.sub(r"-{3,}", "---", lines[1])
        out = "\n".join(re.sub(r" {2,}", " ", line) for line in lines)
    else:
        out = tabulate(rows, header, tablefmt="simple", disable_numparse=True, colalign=align)
    if max_rows and len(df) > max_rows:
        out += f"\n\n_({len(df) - max_rows} more rows in the result bundle)_" if style == "markdown" else \
            f"\n({len(df) - max_rows} more rows)"
    return out


# --- the display form of a table: units by magnitude, derived figures in one column, headers in words

#: ``df.attrs`` key: the columns :func:`readable` scaled into a unit (read with significant digits)
SCALED = "workbench_scaled_columns"
#: what a derived table's figure columns collapse into
FIGURE = "figure [95% CI]"
_DERIVED_COLUMNS = {"name", "point", "lo", "hi", "unit", "status"}
#: columns of a derived table that say nothing a reader needs once the figure is one column
_DERIVED_DROPPED = ("point", "lo", "hi", "unit", "null")
#: a bound of a CI: its point column has the same name without this part
_CI_PART = re.compile(r"^(?:ci_)?(lo|hi)(?:_|$)|_(?:ci_)?(lo|hi)$")
#: a header's words for a name part (``ci_lo`` reads ``95% CI lo``)
_WORDS = {"ci lo": "95% CI lo", "ci hi": "95% CI hi", "n a": "n (A)", "n b": "n (B)"}


def is_derived(df: pd.DataFrame) -> bool:
    """A table of :class:`workbench.evidence.derived.Derived` rows (``name, point, lo, hi, unit, status``...)."""
    return _DERIVED_COLUMNS <= {str(c) for c in df.columns}


def header_text(name: Any) -> str:
    """A column's header in words: ``vs_torch_lo`` -> ``vs torch lo``; a header that has spaces
    or capitals is the study's own wording and kept."""
    if not isinstance(name, str) or " " in name or "_" not in name:
        return name if isinstance(name, str) else str(name)
    text = name.replace("_", " ").strip()
    return _WORDS.get(text, text)


def _ci_base(base: str) -> str | None:
    """The point a CI bound's base name belongs to (``ci_lo`` -> '', ``vs_torch_lo`` ->
    ``vs_torch``), None for a name that is not a bound."""
    m = _CI_PART.search(base)
    if not m:
        return None
    return (base[:m.start()] + base[m.end():]).strip("_")


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as people read it (every table a report, page, notebook or the CLI shows goes
    through here; the DataFrames of the API and the JSON keep their ids and stored units):

    - a derived table's ``point, lo, hi, unit`` become one ``figure [95% CI]`` column in the
      unit its magnitude calls for (:func:`workbench.evidence.derived.fmt_derived`);
    - a column whose name says a time, size or bandwidth unit (``total_us``, ``median_ns``,
      ``predicted (us)``, ``copy_gbps``) is put in one unit for the whole column by its
      magnitude (:func:`workbench.base.units.pick`: no ``19,381.2 us``), its CI bounds
      (``ci_lo_us``, ``vs_x_lo``) in their point's unit, the unit said in the header;
    - snake_case headers read as words (``vs_torch_status`` -> ``vs torch status``)."""
    if getattr(df, "attrs", {}).get(SCALED) is not None or not len(df.columns):
        return df
    out = df.copy()
    if is_derived(out) and len(out):
        figures = [fmt_derived(r, status=False) for r in out.to_dict("records")]
        at = list(map(str, out.columns)).index("name") + 1
        out = out.drop(columns=[c for c in _DERIVED_DROPPED if c in out.columns])
        out.insert(min(at, len(out.columns)), FIGURE, figures)
    cols = list(map(str, out.columns))
    found = {c: units.column_unit(c) for c in cols}
    found = {c: u for c, u in found.items() if u and units.kind_of(u[1])
             and pd.api.types.is_numeric_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c])}
    # one quantity stored in two units (median_ns beside median_us): shown once
    seen: dict[tuple[str, str | None], str] = {}
    for c, (base, unit) in list(found.items()):
        key = (base, units.kind_of(unit))
        if key in seen:
            first = seen[key]
            again = pd.to_numeric(out[c], errors="coerce").map(lambda v: units.convert(v, unit, found[first][1]))
            if np.allclose(again, pd.to_numeric(out[first], errors="coerce"), rtol=1e-6, equal_nan=True):
                out = out.drop(columns=[c])
                del found[c]
                cols.remove(c)
        else:
            seen[key] = c
    # a bound joins its point: the column of the same base and unit, or the table's first point
    points = [c for c, (base, _) in found.items() if _ci_base(base) is None]
    group: dict[str, str] = {}
    for c, (base, unit) in found.items():
        owner = _ci_base(base)
        if owner is None:
            group[c] = c
            continue
        same_unit = [p for p in points if found[p][1] == unit]
        group[c] = next((p for p in same_unit if found[p][0] == owner), same_unit[0] if same_unit else c)
    renames: dict[str, str] = {}
    scaled: list[str] = []
    for point in dict.fromkeys(group.values()):
        members = [c for c, g in group.items() if g == point]
        unit = found[point][1]
        values = pd.concat([pd.to_numeric(out[c], errors="coerce") for c in members]).tolist()
        typical = pd.to_numeric(out[point], errors="coerce").abs()
        typical = typical[typical > 0].median() if (typical > 0).any() else None
        shown = units.pick(values, unit, typical=typical)
        for c in members:
            if shown != unit:
                out[c] = pd.to_numeric(out[c], errors="coerce").map(
                    lambda v, u=unit: units.convert(v, u, shown) if v == v else v)
            base = found[c][0]
            renames[c] = f"{header_text(base) if base else header_text(c)} ({shown})"
            scaled.append(renames[c])
    out = out.rename(columns={c: renames.get(c, header_text(c)) for c in cols})
    out.attrs[SCALED] = tuple(scaled)
    return out


def key_columns(df: pd.DataFrame, max_columns: int = 8, first: Sequence[str] = ()) -> tuple[list[str], dict[str, Any]]:
    """The columns worth showing of a wide table, and the constant ones as ``{column: value}``
    (said once above the table instead of in every row): ``first`` (those present), then the
    columns whose values differ between rows, in order, at most ``max_columns``."""
    constant: dict[str, Any] = {}
    varying: list[str] = []
    for col in df.columns:
        values = df[col].map(lambda x: json.dumps(x, default=str) if isinstance(x, (list, dict)) else x)
        if len(df) > 1 and values.nunique(dropna=False) == 1:
            constant[str(col)] = df[col].iloc[0]
        else:
            varying.append(str(col))
    lead = [c for c in first if c in df.columns]
    cols = lead + [c for c in varying if c not in lead]
    return cols[:max_columns], {k: v for k, v in constant.items() if k not in lead}
