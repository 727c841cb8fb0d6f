"""Shared Altair chart builders (tables in, charts out; no drawing inside analyses)."""

from __future__ import annotations

import altair as alt
import pandas as pd

alt.data_transformers.disable_max_rows()

_PER_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6}


def _in_unit(df: pd.DataFrame, unit: str) -> pd.DataFrame:
    """``median``, ``lo`` and ``hi`` columns in ``unit`` from a variants table's ``*_ns`` ones."""
    scale = _PER_NS[unit]
    return df.assign(median=df["median_ns"] / scale, lo=df["ci_lo_ns"] / scale, hi=df["ci_hi_ns"] / scale)


def median_ci_bars(df: pd.DataFrame, x: str = "variant", title: str = "", unit: str = "us") -> alt.Chart:
    """Bars of the median with CI whiskers; ``df`` from :func:`workbench.tables.variants_table`."""
    d = _in_unit(df, unit)
    base = alt.Chart(d).encode(x=alt.X(f"{x}:N", sort=None, title=x))
    bars = base.mark_bar().encode(
        y=alt.Y("median:Q", title=f"median ({unit})"),
        color=alt.condition("datum.correct", alt.value("#4c78a8"), alt.value("#d62728")),
        tooltip=[x, alt.Tooltip("median:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
                 alt.Tooltip("hi:Q", format=".3f")]
        + [c if c != "noise" else alt.Tooltip("noise:Q", format=".1%") for c in ("samples", "noise", "check")
           if c in d.columns],
    )
    whiskers = base.mark_errorbar(color="black").encode(y="lo:Q", y2="hi:Q")
    return (bars + whiskers).properties(title=title or "median with 95% CI", width=alt.Step(40), height=260)


def line_with_ci(df: pd.DataFrame, x: str, color: str, title: str = "", unit: str = "us",
                 log_x: bool = False, log_y: bool = False, x_title: str | None = None) -> alt.Chart:
    """Median vs ``x`` per ``color`` group with a CI band; log axes on request."""
    d = _in_unit(df, unit)
    xs = alt.Scale(type="log") if log_x else alt.Scale(zero=False)
    ys = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    base = alt.Chart(d).encode(x=alt.X(f"{x}:Q", scale=xs, title=x_title or x), color=alt.Color(f"{color}:N"))
    band = base.mark_area(opacity=0.2).encode(y=alt.Y("lo:Q", scale=ys), y2="hi:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("median:Q", scale=ys, title=f"median ({unit})"),
        tooltip=[color, x, alt.Tooltip("median:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
                 alt.Tooltip("hi:Q", format=".3f")],
    )
    return (band + line).properties(title=title, width=420, height=280)
