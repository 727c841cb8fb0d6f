"""Tables every study starts from: one row per variant with median, CI, noise and check."""

from __future__ import annotations

import pandas as pd

from . import stats
from .store import RunRecord

VARIANT_COLUMNS = ["variant", "samples", "median_ns", "ci_lo_ns", "ci_hi_ns", "min_ns", "iqr_ns", "noise", "noisy",
                   "correct", "check"]


def variants_table(rec: RunRecord) -> pd.DataFrame:
    """One row per variant; the variant's own params become columns (e.g. ``impl``, ``w``).

    The sample count is ``samples`` (not ``n``, which studies use for a problem size)."""
    rows = []
    for v in rec.variants:
        s = stats.summarize(v.samples_ns)
        row = {"variant": v.variant, **v.params, "samples": s.n, "median_ns": s.median,
               "ci_lo_ns": s.ci_lo, "ci_hi_ns": s.ci_hi, "min_ns": s.min, "iqr_ns": s.iqr, "noise": s.noise,
               "noisy": s.noisy, "correct": v.correct, "check": v.check}
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=VARIANT_COLUMNS)
    return pd.DataFrame(rows)


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
