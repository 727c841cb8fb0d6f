"""Tables every study starts from: THE per-variant results table (median, CI, noise, check,
harness-floor and load notes), its display form, and the long table of raw samples.

The one harness-floor rule lives here (:func:`floor_notes`): the harness promises that a figure
within a few times its own measured floor (``rec.floor_ns``) is dominated by the measurement,
so the note fires below :data:`FLOOR_FACTOR` x that floor, never at a fixed time.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import load, stats
from .store import RunRecord

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
    ``load_note`` says when it was measured under load (:mod:`workbench.load`)."""
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
