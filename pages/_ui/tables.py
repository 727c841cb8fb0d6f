"""Tables and charts as a page draws them: one number format per column, a dash for a missing
value, the columns that differ first, CIs never cut; charts at their own size."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from workbench.evidence.tables import MISSING, header_text, key_columns, number_formats, readable
from workbench.base.untrusted import escape


#: rows a table shows before it scrolls (the page stays a few screens tall)
TABLE_ROWS = 12


def _styled(df: pd.DataFrame):
    """``df`` as the reports show it: each numeric column in its one number format
    (:func:`workbench.evidence.tables.number_formats`), a dash for a missing value (never ``<NA>`` or
    ``None``); the values stay numbers, so columns still sort by value."""
    formats = number_formats(df)
    text_cols = [c for c in df.columns if str(c) not in formats and not pd.api.types.is_bool_dtype(df[c])]
    shown = df.copy()
    for col in text_cols:  # lists and dicts as compact JSON, like the reports
        shown[col] = shown[col].map(lambda x: json.dumps(x, default=str, separators=(",", ":"))
                                    if isinstance(x, (list, dict, tuple)) else x)
    # the first format gives every column (text ones too) the dash; the second the numbers' formats
    return shown.style.format(na_rep=MISSING).format({c: f for c, f in formats.items()}, na_rep=MISSING)


def show_table(df: pd.DataFrame, key: str, max_columns: int = 10, first: tuple[str, ...] = (),
               rows: int = TABLE_ROWS) -> None:
    """A table a person can take in: one number format per column, no ``<NA>``, at most
    ``rows`` rows before it scrolls; a wide table shows the columns that differ between rows
    (constants said once above it) and the full table on demand."""
    if df is None or len(df.columns) == 0:
        st.caption("(no rows)")
        return
    df = readable(df)  # units by magnitude, a derived figure in one column, headers in words
    first = tuple(header_text(c) for c in first)
    cols, constant = (list(map(str, df.columns)), {}) if len(df.columns) <= max_columns else \
        key_columns(df, max_columns, first)
    full = len(cols) < len(df.columns) and st.toggle(f"All {len(df.columns)} columns", key=f"{key}:all")
    shown = df if full else df[cols]
    if constant and not full:
        said = {k: v for k, v in constant.items() if isinstance(v, (list, dict)) or not (pd.isna(v) or v == "")}
        empty = len(constant) - len(said)
        st.caption("; ".join(filter(None, [
            "All rows: " + escape("; ".join(f"{k} = {v}" for k, v in said.items())) if said else "",
            f"{empty} empty column{'' if empty == 1 else 's'} not shown" if empty else ""])))
    shown, config = _gaps_as_text(shown)
    config = {**_ci_widths(shown), **config}
    st.dataframe(_styled(shown), hide_index=True, width="stretch", column_config=config,
                 height=min(len(shown), rows) * 35 + 38 if len(shown) else "auto")


#: pixels per character of the grid's font, and the widest column a CI may claim
_CHAR_PX, _MAX_COLUMN_PX = 7.5, 640


def _ci_widths(df: pd.DataFrame) -> dict:
    """Text columns wide enough for their longest value (a figure with its CI, ``0.0066
    [0.0051, 0.0083]``): the grid cuts a cell at its column's width, and a CI cut in half
    reads as another number. Text columns with longer values (sentences) keep their size."""
    out = {}
    for c in df.columns:
        if not (df[c].dtype == object or pd.api.types.is_string_dtype(df[c])) or not len(df):
            continue
        longest = max((len(str(v)) for v in df[c] if v is not None), default=0)
        need = int(max(longest, len(str(c))) * _CHAR_PX + 24)
        if need > 120 and need <= _MAX_COLUMN_PX:
            out[c] = st.column_config.Column(width=need)
    return out


def _gaps_as_text(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Numeric columns with a missing value as their formatted text, right-aligned: the
    browser's grid draws a missing number as 'None' whatever the Styler says."""
    formats = number_formats(df)
    gaps = [c for c in df.columns if str(c) in formats and df[c].isna().any()]
    # text columns: a missing value is the dash too (the grid draws None as "None")
    texts = [c for c in df.columns if str(c) not in formats and df[c].dtype == object and df[c].isna().any()]
    if not gaps and not texts:
        return df, {}
    out = df.copy()
    for c in texts:
        out[c] = [MISSING if x is None or (isinstance(x, float) and x != x) else x for x in df[c]]
    for c in gaps:
        out[c] = [MISSING if pd.isna(x) else formats[str(c)](float(x)) for x in df[c]]
    return out, {c: st.column_config.TextColumn(alignment="right") for c in gaps}


def show_chart(chart) -> None:
    # "content": the chart keeps its own size (see workbench.presentation.charts); "stretch" squeezes legends
    st.altair_chart(chart, width="content")
