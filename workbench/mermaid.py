"""Charts as Mermaid text, for reports that must render with nothing attached (a GitHub issue).

GitHub draws ```` ```mermaid ```` blocks itself, so an issue-sized report carries its charts
as text: :func:`xychart` (``xychart-beta``: bars or lines over categories) from a table, and
:func:`from_chart`, which reads the data and the x / y / colour fields of an Altair chart
(the study's key chart) back out of its spec. Mermaid's xychart has no legend and no log
axis: each line's colour is set by :data:`PALETTE` and named in a line under the chart, and
values that span decades are drawn as log10, which the axis title says.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .untrusted import escape

#: line colours, in series order, named in the legend line under a chart
PALETTE = [("#1f77b4", "blue"), ("#ff7f0e", "orange"), ("#2ca02c", "green"), ("#d62728", "red"),
           ("#9467bd", "purple"), ("#8c564b", "brown")]
#: most categories on one x axis; most series in one chart (a legend by colour name stays readable)
MAX_POINTS, MAX_SERIES = 40, len(PALETTE)


def _label(text: Any) -> str:
    """A quoted Mermaid string that nothing inside can end (nor the block)."""
    return f'"{escape(text, "mermaid")[:60]}"'


def _num(x: float) -> str:
    return f"{x:.4g}"


def xychart(table: pd.DataFrame, x: str, y: str, series: str | None = None, title: str = "",
            y_title: str = "", kind: str = "line") -> str | None:
    """A ```` ```mermaid ```` xychart of ``y`` over the categories of ``x`` (numeric order when
    numeric), one ``kind`` (line|bar) per value of ``series``, and a legend line; None when
    there is nothing to draw or too much for a readable chart (the table then says it)."""
    if series in (x, y):
        series = None  # colour repeats an axis: one series
    d = table[list(dict.fromkeys(c for c in (x, y, series) if c))].dropna()
    d = d[d[y].map(lambda v: isinstance(v, (int, float)) and math.isfinite(v))]
    if d.empty:
        return None
    xs = list(dict.fromkeys(d[x].tolist()))
    try:
        xs = sorted(xs, key=float)
    except (TypeError, ValueError):
        pass
    names = list(dict.fromkeys(d[series].tolist())) if series else [None]
    if len(xs) > MAX_POINTS or len(names) > MAX_SERIES:
        return None
    positive = d[y][d[y] > 0]
    log = len(positive) == len(d) and len(d) > 1 and positive.max() / positive.min() >= 100
    rows = []
    for name in names:
        part = d if name is None else d[d[series] == name]
        by_x = dict(zip(part[x].tolist(), part[y].tolist()))
        if not all(v in by_x for v in xs):  # Mermaid's series need a value at every category
            continue
        rows.append((name, [math.log10(by_x[v]) if log else float(by_x[v]) for v in xs]))
    if not rows:
        return None
    values = [v for _, vs in rows for v in vs]
    lo, hi = min(values), max(values)
    lo = 0.0 if not log and lo > 0 and kind == "bar" else lo
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    colours = ", ".join(c for c, _ in PALETTE[:len(rows)])
    y_label = f"log10 {y_title or y}" if log else (y_title or y)
    lines = ["```mermaid", f'%%{{init: {{"themeVariables": {{"xyChart": {{"plotColorPalette": "{colours}"}}}}}}}}%%',
             "xychart-beta", f"    title {_label(title or y_label)}",
             f"    x-axis {_label(x)} [{', '.join(_label(v) for v in xs)}]",
             f"    y-axis {_label(y_label)} {_num(lo - pad if lo != 0 else 0)} --> {_num(hi + pad)}"]
    lines += [f"    {kind} [{', '.join(_num(v) for v in vs)}]" for _, vs in rows]
    lines.append("```")
    if series:
        legend = ", ".join(f"{escape(name)} ({PALETTE[i][1]})" for i, (name, _) in enumerate(rows))
        lines.append(f"\n{'Bars' if kind == 'bar' else 'Lines'}: {legend}."
                     + (" The y axis is log10 of the value." if log else ""))
    elif log:
        lines.append("\nThe y axis is log10 of the value.")
    return "\n".join(lines)


def _layers(spec: dict) -> list[dict]:
    """Every unit spec (mark + encoding) of a chart spec, depth first."""
    out = []
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(key, []):
            out += _layers(sub)
    if "spec" in spec:
        out += _layers(spec["spec"])
    if "mark" in spec:
        out.append(spec)
    return out


def _field(enc: dict, channel: str) -> str | None:
    ch = enc.get(channel)
    return ch.get("field") if isinstance(ch, dict) else None


def chart_data(chart) -> tuple[pd.DataFrame, str, str, str | None, str, str, str] | None:
    """(data, x field, y field, series field or None, mark, title, y axis title) of the first
    line, bar or point layer of an Altair chart, with facet fields joined into the series;
    None when the chart is not of that shape (a timeline, a heat map)."""
    spec = chart.to_dict()
    datasets = spec.get("datasets", {})
    facet = spec.get("facet", {})
    facet_field = facet.get("field") if isinstance(facet, dict) else None
    title = spec.get("title", "")
    title = title.get("text", "") if isinstance(title, dict) else title
    for unit in _layers(spec):
        mark = unit["mark"]["type"] if isinstance(unit["mark"], dict) else unit["mark"]
        enc = unit.get("encoding", {})
        x, y = _field(enc, "x"), _field(enc, "y")
        if mark not in ("line", "bar", "point") or not x or not y:
            continue
        name = (unit.get("data") or spec.get("data") or {}).get("name")
        if name not in datasets:
            continue
        df = pd.DataFrame(datasets[name])
        series = _field(enc, "color")
        if facet_field and facet_field in df.columns:
            df = df.assign(_series=df[facet_field].astype(str) + (" " + df[series].astype(str) if series else ""))
            series = "_series"
        y_title = enc["y"].get("title") if isinstance(enc["y"].get("title"), str) else y
        if x in df.columns and y in df.columns:
            return df, x, y, series if series in df.columns else None, mark, str(title or ""), y_title
    return None


def from_chart(chart) -> str | None:
    """A Mermaid xychart of an Altair chart's data (see :func:`chart_data`), or None."""
    got = chart_data(chart)
    if got is None:
        return None
    df, x, y, series, mark, title, y_title = got
    return xychart(df, x, y, series, title=title, y_title=y_title, kind="bar" if mark == "bar" else "line")
