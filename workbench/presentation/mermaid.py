"""Charts as Mermaid text, for reports that must render with nothing attached (a GitHub issue).

GitHub draws ```` ```mermaid ```` blocks itself, so an issue-sized report carries its charts
as text: :func:`xychart` (``xychart-beta``: bars or lines over categories) from a table, and
:func:`from_chart`, which reads the data and the x / y / colour fields of an Altair chart
(the study's key chart) back out of its spec, the seed's reference marks included. Mermaid's
xychart has no legend and no log axis: each line's colour is set by :data:`PALETTE` and named
in a line under the chart.

One comparison stays in one chart, whatever the magnitudes (a live torch.sum and IREE's
programs are read against each other, never split into charts by size). Lines whose values
span more than :data:`MAGNITUDE` are drawn as the log10 of the value, the axis title and a line
under the chart saying which value each step is (``2 = 100 us, 3 = 1 ms``); bars keep a linear
axis in real units (a bar's length means nothing on a log axis) and say so when their values
span decades. A line chart of a single x (a smoke run at one worker count) is drawn as bars,
one per series. The seed's figures at other parameters than the run's (greyed on the chart,
``not comparable`` in their label) are not drawn: a line under the chart says why.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..base import units
from ..base.untrusted import escape

#: line colours, in series order, named in the legend line under a chart
PALETTE = [("#1f77b4", "blue"), ("#ff7f0e", "orange"), ("#2ca02c", "green"), ("#d62728", "red"),
           ("#9467bd", "purple"), ("#8c564b", "brown"), ("#e377c2", "pink"), ("#7f7f7f", "grey"),
           ("#bcbd22", "olive"), ("#17becf", "cyan")]
#: lines whose values span more than this factor are drawn as log10 of the value (one chart still)
MAGNITUDE = 30.0
#: most categories on one x axis; most series in one chart (a legend by colour name stays readable)
MAX_POINTS, MAX_SERIES = 40, len(PALETTE)
#: longest title or label (a longer one is cut at a word, with an ellipsis; a longer chart title
#: is said above the chart instead)
LABEL_CHARS = 60  # about what xychart-beta's default 700 px width shows of a title
#: what marks the seed's figures at other parameters than the run's (workbench.presentation.charts' seed_note)
NOT_COMPARABLE = "not comparable"


def _label(text: Any) -> str:
    """A quoted Mermaid string that nothing inside can end (nor the block); a long one is
    cut at a word, with an ellipsis."""
    clean = escape(text, "mermaid")
    if len(clean) > LABEL_CHARS:
        clean = clean[:LABEL_CHARS - 1].rsplit(" ", 1)[0].rstrip(",:(") + "…"
    return f'"{clean}"'


def _num(x: float) -> str:
    return f"{x:.4g}"


def _text(v) -> str:
    """A category as text: 1024, not 1024.0 (a column with a gap turns integers to floats)."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _series_values(d: pd.DataFrame, x: str, y: str, series: str | None, xs: list) -> tuple[list[tuple], list[str]]:
    """(name, values at every x) per series, and a sentence for each series missing an x
    (Mermaid's series need a value at every category), with its values."""
    names = list(dict.fromkeys(d[series].tolist())) if series else [None]
    rows, partial = [], []
    for name in names:
        part = d if name is None else d[d[series] == name]
        by_x = dict(zip(part[x].tolist(), part[y].tolist()))
        if all(v in by_x for v in xs):
            rows.append((name, [float(by_x[v]) for v in xs]))
        else:
            partial.append(f"{escape(name)}: " + ", ".join(f"{_num(float(v))} at {escape(x)}={escape(_text(k))}"
                                                          for k, v in by_x.items()))
    return rows, partial


def _unit_of(y_label: str) -> str:
    """The unit an axis title names (``median (us)`` -> ``us``), '' for none."""
    if y_label.endswith(")") and "(" in y_label:
        return y_label.rsplit("(", 1)[1].rstrip(")").split(",")[0].strip()
    return ""


def _log_ticks(values: list[float], unit: str) -> str:
    """``1 = 10 us, 2 = 100 us, 3 = 1 ms``: what each whole step of a log10 axis is."""
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))

    def read(k: int) -> str:
        if unit and units.kind_of(unit):
            to = units.pick([10.0 ** k], unit)
            return f"{units.convert(10.0 ** k, unit, to):g} {to}"
        return f"{10.0 ** k:g}{' ' + unit if unit else ''}"
    return ", ".join(f"{k} = {read(k)}" for k in range(lo, hi + 1))


def _span(values: list[float], unit: str) -> str:
    """``30 us to 13.0 ms``: the range of the values, each in the unit it reads in."""
    if unit and units.kind_of(unit):
        return f"{units.fmt(min(values), unit)} to {units.fmt(max(values), unit)}"
    return f"{_num(min(values))} to {_num(max(values))}"


def _one_chart(rows: list[tuple], xs: list, x: str, title: str, y_label: str, kind: str) -> list[str]:
    values = [v for _, vs in rows for v in vs]
    lo, hi = min(values), max(values)
    lo = 0.0 if lo > 0 and (kind == "bar" or lo < 0.25 * hi) else lo
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    colours = ", ".join(c for c, _ in PALETTE[:len(rows)])
    lines = ["```mermaid", f'%%{{init: {{"themeVariables": {{"xyChart": {{"plotColorPalette": "{colours}"}}}}}}}}%%',
             "xychart-beta"]
    if title:
        lines.append(f"    title {_label(title)}")
    lines += [f"    x-axis {_label(x)} [{', '.join(_label(_text(v)) for v in xs)}]",
              f"    y-axis {_label(y_label)} {_num(lo - pad if lo != 0 else 0)} --> {_num(hi + pad)}"]
    lines += [f"    {kind} [{', '.join(_num(v) for v in vs)}]" for _, vs in rows]
    lines.append("```")
    return lines


def xychart(table: pd.DataFrame, x: str, y: str, series: str | None = None, title: str = "",
            y_title: str = "", kind: str = "line") -> str | None:
    """A ```` ```mermaid ```` xychart of ``y`` over the categories of ``x`` (numeric order when
    numeric), one ``kind`` (line|bar) per value of ``series``, and a legend line: one chart for
    the whole comparison (see the module docstring for lines that span decades and for a single
    x). None when there is nothing to draw or too much for a readable chart (the table then
    says it)."""
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
    # Mermaid has no log axis: an axis title that says "log scale" (from the Altair chart)
    # would be wrong here, where a value is drawn in its units or as its log10, said so
    y_label = (y_title or y).replace(", log scale", "").replace(", symlog scale", "")
    if kind == "line" and series and len(xs) == 1:
        # one x (a run at one worker count): a line has nowhere to go; one bar per series
        bars = d.assign(**{f"{x} = {_text(xs[0])}": d[series]})
        bars.attrs = dict(table.attrs)
        return xychart(bars, f"{x} = {_text(xs[0])}", y, None, title=title, y_title=y_title, kind="bar")
    head = ([f"_{escape(title)}_", ""] if len(title) > LABEL_CHARS else [])
    title = title if len(title) <= LABEL_CHARS else ""
    if series:  # the x axis of the fullest series: one with a point of its own (a model floor) is told in words
        widest = d.groupby(series)[x].nunique().max()
        full = d.groupby(series)[x].transform("nunique") == widest
        keep = set(d.loc[full, x])
        xs = [v for v in xs if v in keep]
    if len(xs) > MAX_POINTS or (series and d[series].nunique() > MAX_SERIES):
        return None
    rows, partial = _series_values(d, x, y, series, xs)
    if not rows:
        return None
    values = [v for _, vs in rows for v in vs]
    positive = [v for v in values if v > 0]
    log = kind == "line" and len(positive) == len(values) and max(values) / min(values) > MAGNITUDE
    out = list(head)
    if log:
        unit = _unit_of(y_label)
        drawn = [(name, [math.log10(v) for v in vs]) for name, vs in rows]
        out += _one_chart(drawn, xs, x, title, f"log10 of {y_label}", kind)
    else:
        out += _one_chart(rows, xs, x, title, y_label, kind)
    if series:
        legend = ", ".join(f"{escape(name)} ({PALETTE[j][1]})" for j, (name, _) in enumerate(rows))
        out.append(f"\n{'Bars' if kind == 'bar' else 'Lines'}: {legend}.\n")
    if partial:
        out.append("Not drawn (no value at every " + escape(x) + "): " + "; ".join(partial) + ".\n")
    if log:
        out.append(f"The values span {escape(_span(values, unit))}, so the axis is their log10 (Mermaid draws no log "
                   f"axis): {escape(_log_ticks(values, unit))}.")
    elif len(positive) > 1 and sorted(positive)[len(positive) // 10] * 100 <= max(positive):
        out.append(f"Linear axis in real units: values span {escape(_span(positive, _unit_of(y_label)))} (the "
                   "smallest sit near the floor; the table has each).")
    note = table.attrs.get(NOT_COMPARABLE)
    if note:
        out.append(f"The seed's figures are not drawn: {escape(note)}.")
    return "\n".join(out).rstrip() + "\n" if out else None


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


#: the columns that say where a row's figure comes from, as :mod:`workbench.presentation.charts` and the
#: studies label their reference layers ("seed (<machine>)", "seed")
SOURCE_COLUMNS = ("source", "_src")


def _is_seed(df: pd.DataFrame) -> pd.Series:
    """Rows that are the seed's figures: their source column says so."""
    mark = pd.Series(False, index=df.index)
    for col in SOURCE_COLUMNS:
        if col in df.columns:
            mark |= df[col].map(lambda v: isinstance(v, str) and v.lower().startswith("seed")).astype(bool)
    return mark


def _seed_name(row: dict, series: str | None) -> str:
    """``the seed's <what>``: the series (provider) it belongs to, else the figure it names."""
    for who in (row.get(series) if series else None, row.get("figure")):
        if isinstance(who, str) and who and who.lower() != "seed":
            return f"the seed's {who}"
    return "the seed's"


def _not_comparable(df: pd.DataFrame) -> str:
    """The label of the seed's rows at other parameters than the run's ('' for none)."""
    for col in SOURCE_COLUMNS:
        if col in df.columns:
            for v in df[col]:
                if isinstance(v, str) and NOT_COMPARABLE in v:
                    return v
    return ""


def chart_data(chart) -> tuple[pd.DataFrame, str, str, str | None, str, str, str] | None:
    """(data, x field, y field, series field or None, mark, title, y axis title) of the first
    line, bar or point layer of an Altair chart, with facet fields joined into the series and
    the seed's reference marks (rows or layers labelled as the seed's, on the same x and y) as
    series named ``seed...``; None when the chart is not of that shape (a timeline, a heat map)."""
    spec = chart.to_dict(validate=False)  # the chart was validated where it was made
    datasets = spec.get("datasets", {})
    facet = spec.get("facet", {})
    facet_field = facet.get("field") if isinstance(facet, dict) else None
    title = spec.get("title", "")
    title = title.get("text", "") if isinstance(title, dict) else title
    title = " ".join(title) if isinstance(title, list) else title
    units = _layers(spec)
    for unit in units:
        mark = unit["mark"]["type"] if isinstance(unit["mark"], dict) else unit["mark"]
        enc = unit.get("encoding", {})
        x, y = _field(enc, "x"), _field(enc, "y")
        if mark not in ("line", "bar", "point") or not x or not y:
            continue
        name = (unit.get("data") or spec.get("data") or {}).get("name")
        if name not in datasets:
            continue
        df = pd.DataFrame(datasets[name])
        if x not in df.columns or y not in df.columns:
            continue
        series = _field(enc, "color")
        series = series if series in df.columns else None
        # other encodings that split the points into series (measured vs predicted as shapes)
        seed_rows = [df[_is_seed(df)]]
        df = df[~_is_seed(df)]
        splits = [f for f in (_field(enc, c) for c in ("shape", "strokeDash", "detail")) if f in df.columns
                  and f != series and df[f].nunique() > 1]
        for other in units:  # the seed's layers on the same axes, from their own data
            oname = (other.get("data") or {}).get("name")
            oenc = other.get("encoding", {})
            if oname in datasets and oname != name and _field(oenc, "x") == x and _field(oenc, "y") == y:
                odf = pd.DataFrame(datasets[oname])
                seed_rows.append(odf[_is_seed(odf)] if len(odf) else odf)
        seeds = pd.concat([r for r in seed_rows if len(r)], ignore_index=True) if any(len(r) for r in seed_rows) \
            else pd.DataFrame(columns=df.columns)
        seeds = seeds.drop_duplicates(subset=[c for c in (x, y, series) if c and c in seeds.columns])
        note = _not_comparable(seeds)
        if note:  # the seed at other parameters: context on the chart, not a series to read against
            seeds = seeds.iloc[0:0]
        parts = ([facet_field] if facet_field and facet_field in df.columns else []) + ([series] if series else []) + splits
        live_name = [" ".join(str(v) for v in row) for row in df[parts].itertuples(index=False)] if parts else "live"
        df = df.assign(_series=live_name)
        if len(seeds):
            seeds = seeds.assign(_series=[_seed_name(r, series) for r in seeds.to_dict("records")])
            df = pd.concat([df, seeds[[x, y, "_series"]]], ignore_index=True)
        has_series = bool(parts or len(seeds))
        y_title = enc["y"].get("title") if isinstance(enc["y"].get("title"), str) else y
        if note:
            df.attrs[NOT_COMPARABLE] = note
        return df, x, y, "_series" if has_series else None, mark, str(title or ""), y_title
    return None


def from_chart(chart) -> str | None:
    """A Mermaid xychart of an Altair chart's data (see :func:`chart_data`), or None."""
    got = chart_data(chart)
    if got is None:
        return None
    df, x, y, series, mark, title, y_title = got
    # one series of points over categories (variants: points with whiskers on a log axis) is
    # bars here, on a linear axis (a line between categories would read as a trend); several
    # stay lines: xychart draws bar series over each other, the front ones hiding the rest
    numeric = pd.to_numeric(df[x], errors="coerce").notna().all()
    kind = "bar" if mark == "bar" or (mark == "point" and not numeric and series is None) else "line"
    return xychart(df, x, y, series, title=title, y_title=y_title, kind=kind)
