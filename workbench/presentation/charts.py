"""Shared Altair chart builders (tables in, charts out; no drawing inside analyses), and the
rules every study's charts follow, as helpers:

- a value axis goes logarithmic when its values span a decade or more (:func:`value_scale`), and
  then draws points with whiskers, never bars: a bar's length means nothing on a log axis
  (:func:`magnitude_marks`);
- counts (threads, workers, chunks) get integer ticks (:func:`count_axis`);
- every axis title carries its unit (:func:`titled`), times are put in a unit that reads
  (:func:`time_unit`);
- facets are ordered by number, not as strings (:func:`numeric_order`), with independent
  scales where their magnitudes differ (:func:`facet`);
- the seed's published figure is a reference layer on the live chart, labelled as the seed's,
  with its machine (:func:`seed_layer`); where the run's parameters are not the seed's (a smoke
  run at N=16K against the seed's N=1M) it is greyed and its legend says so
  (``seed_note="seed at N=1M: not comparable"``), never drawn in the live series' colours;
- the declared sweep of any study is one chart: median vs x, one line per ``provider``, a CI
  band (:func:`sweep_chart`; the compared dimension is named ``provider``, as in Triton's
  benchmarks).

Every chart keeps its own width and height (``autosize: pad``): Streamlit's default "fit"
squeezes a plot with a long legend to a sliver. Study-specific helpers may be appended at
the end of this file.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import altair as alt
import pandas as pd

from ..base import units

alt.data_transformers.disable_max_rows()

WIDTH, HEIGHT = 460, 280
#: a value axis spanning at least this many decades is drawn logarithmic
LOG_DECADES = 1.0
#: the colour of a seed's figures that are not comparable with the run (other parameters)
NOT_COMPARABLE_COLOR = "#bbbbbb"


#: narrowest plot of a bar chart (px), however few the bars
MIN_BARS_WIDTH = 360


def _pad(chart):
    return chart.properties(autosize=alt.AutoSizeParams(type="pad"))


def time_unit(values_ns: Iterable[float]) -> str:
    """``ns``, ``us``, ``ms`` or ``s``: the unit in which the median of ``values_ns`` reads at
    least 1, raised while the largest would read 10,000 or more (:func:`workbench.base.units.pick`)."""
    finite = [v for v in values_ns if v is not None and math.isfinite(v) and v > 0]
    if not finite:
        return "us"
    return units.pick(finite, "ns")


def spans_decades(values: Iterable[float], decades: float = LOG_DECADES) -> bool:
    """True when the positive values reach from smallest to largest over ``decades`` powers of 10."""
    positive = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) >= 10 ** decades


def value_scale(values: Iterable[float], zero: bool = False, log: bool | None = None) -> alt.Scale:
    """A log scale when the values span decades (and are all positive), else a linear one
    (``zero``: from 0, for bars). ``log`` forces the choice."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if log is None:
        log = spans_decades(values) and all(v > 0 for v in values)
    return alt.Scale(type="log") if log else alt.Scale(zero=zero)


def count_axis(title: str, values: Iterable[Any] = ()) -> alt.Axis:
    """An axis for counts (threads, workers, chunks, ranks): integer ticks only; ticks at the
    counts measured when ``values`` has at most 16 of them (Vega's own ticks can land on 1.5)."""
    ticks = numeric_order(values)
    return alt.Axis(title=title, format="d", tickMinStep=1, **({"values": ticks} if 0 < len(ticks) <= 16 else {}))


def titled(name: str, unit: str = "") -> str:
    """``median (us)``: an axis title with its unit."""
    return f"{name} ({unit})" if unit else name


def numeric_order(values: Iterable[Any]) -> list:
    """The distinct values in numeric order when they are numbers (1024, 4096, 16384, not
    1024, 16384, 4096), else in first-seen order; for ``sort=`` of an axis or facet."""
    seen = list(dict.fromkeys(v for v in values if v is not None))
    try:
        return sorted(seen, key=float)
    except (TypeError, ValueError):
        return seen


def _is_count(values: Iterable[Any]) -> bool:
    vals = [v for v in values if v is not None]
    return bool(vals) and all(isinstance(v, (int,)) or (isinstance(v, float) and v.is_integer()) for v in vals) \
        and max(vals) <= 4096


def facet(chart, data_field: str, values: Iterable[Any], title: str | None = None, columns: int = 3,
          independent: tuple[str, ...] = ("x", "y")):
    """``chart`` (built on a table with ``data_field``) as small multiples in numeric order,
    with independent scales on the named channels (magnitudes differ between facets)."""
    faceted = chart.facet(facet=alt.Facet(f"{data_field}:O", sort=numeric_order(values), title=title or data_field),
                          columns=columns)
    return faceted.resolve_scale(**{ch: "independent" for ch in independent}) if independent else faceted


def in_unit(df: pd.DataFrame, unit: str, median: str = "median_ns", lo: str = "ci_lo_ns",
            hi: str = "ci_hi_ns") -> pd.DataFrame:
    """``median``, ``lo`` and ``hi`` columns in ``unit`` from a table's nanosecond columns (a
    table already in its unit, the engine's metric table of any unit, is taken as it is)."""
    scale = units.PER_NS[unit] if median.endswith("_ns") else 1.0
    return df.assign(median=df[median] / scale, lo=df[lo] / scale, hi=df[hi] / scale)


def seed_layer(seed: pd.DataFrame, x: str, machine: str, x_type: str = "Q", y_scale: alt.Scale | None = None,
               unit: str = "us", provider: str = "provider", seed_note: str = "") -> alt.Chart:
    """The seed's published figures as a reference layer: dashed grey lines and hollow points,
    labelled ``seed (<machine>)`` in the legend and tooltips (``seed_note``, e.g. ``seed at
    N=1M: not comparable``, instead where the run's parameters are not the seed's: lighter).
    ``seed`` has ``x`` and ``median_ns`` (the seed's figure, in ns) and optionally ``provider``
    (one line each)."""
    label = seed_note or f"seed ({machine})"
    d = seed.assign(median=seed["median_ns"] / units.PER_NS[unit], source=label)
    if provider not in d.columns:
        d = d.assign(**{provider: "seed"})
    y = alt.Y("median:Q", scale=y_scale or alt.Scale(zero=False), title=titled("median", unit))  # as the live layers
    base = alt.Chart(d).encode(
        x=alt.X(f"{x}:{x_type}"), y=y, detail=f"{provider}:N",
        strokeDash=alt.StrokeDash("source:N", title="reference",
                                  scale=alt.Scale(domain=[label], range=[[5, 3]])),
        tooltip=[alt.Tooltip("source:N", title="figure"), provider, x, alt.Tooltip("median:Q", format=".4g")])
    grey = NOT_COMPARABLE_COLOR if seed_note else "#666666"
    return base.mark_line(color=grey) + base.mark_point(color=grey, filled=False, size=50)


def sweep_chart(df: pd.DataFrame, x: str, provider: str = "provider", title: str = "", unit: str | None = None,
                x_title: str | None = None, log_x: bool | None = None, log_y: bool | None = None,
                seed: pd.DataFrame | None = None, seed_machine: str = "", facet_by: str | None = None,
                median: str = "median_ns", lo: str = "ci_lo_ns", hi: str = "ci_hi_ns",
                width: int = WIDTH, height: int = HEIGHT, seed_note: str = ""):
    """Median vs ``x``, one line per ``provider``, a 95% CI band: the chart of a declared sweep.

    ``df`` has ``x``, ``provider`` and nanosecond ``median``/``lo``/``hi`` columns (a variants
    table). The time unit is chosen from the data unless given; each axis goes logarithmic
    when it spans decades unless ``log_x``/``log_y`` say otherwise; an ``x`` of small
    integers (threads, workers) gets integer ticks. ``seed`` (x, median_ns[, provider]) adds
    the seed's figures as a dashed reference layer labelled with ``seed_machine`` (greyed and
    labelled ``seed_note`` where the run's parameters are not the seed's); ``facet_by`` draws one
    panel per value in numeric order with independent scales."""
    unit = unit or time_unit(df[median])
    d = in_unit(df, unit, median, lo, hi)
    d = d[d["median"].notna()]
    xs = d[x].tolist()
    x_numeric = pd.api.types.is_numeric_dtype(d[x])
    ys = d["median"].tolist() + d["lo"].tolist() + d["hi"].tolist()
    if seed is not None and len(seed):
        ys += (seed["median_ns"] / units.PER_NS[unit]).tolist()
    y_scale = value_scale(ys, log=log_y)
    if x_numeric:
        x_enc = alt.X(f"{x}:Q", scale=value_scale(xs, log=log_x),
                      axis=count_axis(x_title or x, xs) if _is_count(xs) else alt.Axis(title=x_title or x))
    else:
        x_enc = alt.X(f"{x}:O", sort=numeric_order(xs), title=x_title or x)
    color = alt.Color(f"{provider}:N", title=provider,
                      legend=alt.Legend(labelLimit=320, symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1))
    base = alt.Chart(d).encode(x=x_enc)
    y_title = titled("median", unit)  # every layer's y the same title: Vega-Lite joins different ones
    band = base.mark_area(opacity=0.18).encode(y=alt.Y("lo:Q", scale=y_scale, title=y_title), y2="hi:Q",
                                               color=color)
    line = base.mark_line(point=True).encode(
        y=alt.Y("median:Q", scale=y_scale, title=y_title), color=color,
        tooltip=[provider, x, alt.Tooltip("median:Q", format=".4g", title=titled("median", unit)),
                 alt.Tooltip("lo:Q", format=".4g", title="95% CI lo"), alt.Tooltip("hi:Q", format=".4g",
                                                                                  title="95% CI hi")])
    layers = [band, line]
    if seed is not None and len(seed):
        layers.append(seed_layer(seed, x, seed_machine or "the seed's machine", "Q" if x_numeric else "O",
                                 y_scale, unit, provider, seed_note))
    chart = alt.layer(*layers).properties(width=width, height=height)
    if facet_by:
        return _pad(facet(chart, facet_by, df[facet_by]).properties(title=title))
    return _pad(chart.properties(title=title))


def median_ci_bars(df: pd.DataFrame, x: str = "variant", title: str = "", unit: str | None = None) -> alt.Chart:
    """The median with its 95% CI per ``x`` (a variants table), failed checks in red: bars from 0
    with whiskers while the values span less than a decade, else points with whiskers on a log
    axis (:func:`magnitude_marks`: a nanosecond floor beside a millisecond one stays readable)."""
    unit = unit or time_unit(df["median_ns"])
    d = in_unit(df, unit)
    d = d[d["median"].notna()]
    tips = [alt.Tooltip(c, format=".1%") if c == "noise" else c for c in ("samples", "noise", "check") if c in d.columns]
    chart = magnitude_marks(d, x, "median", "lo", "hi", value_title=titled("median", unit), horizontal=False,
                            failed="correct" if "correct" in d.columns else None, tooltip=tips)
    # 40 px a category, but not a sliver when there are few
    width = max(40 * d[x].nunique(), MIN_BARS_WIDTH)
    return _pad(chart.properties(title=title or "median with 95% CI", width=width, height=260))


def magnitude_marks(d: pd.DataFrame, category: str, value: str, lo: str | None = None, hi: str | None = None, *,
                    value_title: str, horizontal: bool = True, failed: str | None = None, sort: Any = None,
                    color: Any = None, tooltip: list | None = None, log: bool | None = None,
                    decades: float = LOG_DECADES) -> alt.LayerChart:
    """One mark per ``category`` for ``value`` (with a ``lo``-``hi`` whisker where given): bars
    from 0 on a linear axis while the values span less than ``decades``, else points with
    whiskers on a log axis whose title says so (a bar's length means nothing on a log axis).
    ``failed``: a boolean column, False drawn red; ``color``: an encoding instead; not sized."""
    values = [v for c in (value, lo, hi) if c for v in d[c].tolist() if v is not None and math.isfinite(v)]
    positive = [v for v in values if v > 0]
    if log is None:
        log = bool(positive) and len(positive) == len(values) and spans_decades(positive, decades)
    scale = alt.Scale(type="log", nice=False, domain=[min(positive) / 2, max(positive) * 2]) if log \
        else alt.Scale(zero=True)
    title = value_title + (", log scale" if log else "")
    cat = alt.Y if horizontal else alt.X
    val, val2 = (alt.X, alt.X2) if horizontal else (alt.Y, alt.Y2)
    base = alt.Chart(d).encode(**{("y" if horizontal else "x"): cat(
        f"{category}:N", sort=sort, title=None if horizontal else category,
        axis=alt.Axis(labelLimit=240, labelOverlap=False))})
    paint = color if color is not None else (
        alt.condition(f"datum.{failed}", alt.value("#4c78a8"), alt.value("#d62728")) if failed else alt.value("#4c78a8"))
    tip = [category, alt.Tooltip(f"{value}:Q", format=".4g", title=value_title)] + \
        ([alt.Tooltip(f"{lo}:Q", format=".4g", title="95% CI lo"), alt.Tooltip(f"{hi}:Q", format=".4g",
                                                                               title="95% CI hi")] if lo and hi else []) \
        + list(tooltip or [])
    channel = "x" if horizontal else "y"
    if log:
        mark = base.mark_point(filled=True, size=70).encode(**{channel: val(f"{value}:Q", scale=scale, title=title)},
                                                           color=paint, tooltip=tip)
    else:
        mark = base.mark_bar(**({"height": 12} if horizontal else {})).encode(
            **{channel: val(f"{value}:Q", scale=scale, title=title)}, color=paint, tooltip=tip)
    layers = [mark]
    if lo and hi:
        layers.append(base.mark_rule(color="black", strokeWidth=1.5).encode(
            **{channel: val(f"{lo}:Q", scale=scale, title=title), f"{channel}2": val2(f"{hi}:Q")}, tooltip=tip))
    return alt.layer(*layers)


def line_with_ci(df: pd.DataFrame, x: str, color: str, title: str = "", unit: str | None = None,
                 log_x: bool | None = None, log_y: bool | None = None, x_title: str | None = None):
    """Median vs ``x`` per ``color`` group with a CI band (:func:`sweep_chart` with ``color``
    as the provider)."""
    return sweep_chart(df, x=x, provider=color, title=title, unit=unit, x_title=x_title, log_x=log_x, log_y=log_y)


def sweep_errorbars(df: pd.DataFrame, x: str, provider: str = "provider", title: str = "", unit: str | None = None,
                    x_title: str | None = None, log_x: bool | None = None, log_y: bool | None = None,
                    seed: pd.DataFrame | None = None, seed_machine: str = "", clip: float = 3.0,
                    width: int = WIDTH, height: int = HEIGHT, seed_note: str = ""):
    """Median vs ``x``, one line per ``provider``, the 95% CIs as thin error bars: for sweeps of
    many lines, where CI bands cover each other. A bound beyond ``clip`` x the largest median is
    clipped at the axis' top (the true bound stays in the tooltip), so one heavy tail cannot
    flatten every line. ``seed`` (``x``, ``median_ns``, ``provider``) draws the seed's figures as
    dashed lines with hollow points in the colour of the live provider of the same name,
    labelled ``seed (<seed_machine>)`` in the legend; where the run's parameters are not the
    seed's, ``seed_note`` (``seed at N=1M: not comparable``) labels them instead and they are
    drawn light grey, in no live series' colour. Count axes (workers) get integer ticks at the
    measured values, on a log-2 scale when they double."""
    unit = unit or time_unit(df["median_ns"])
    d = in_unit(df, unit)
    d = d[d["median"].notna()]
    s = seed.assign(median=seed["median_ns"] / units.PER_NS[unit]) if seed is not None and len(seed) else None
    # the x axis fits the live points: the seed's lines beyond them (its 32 workers beside a
    # 2-core run's 1 and 2) are clipped at the frame, not given four fifths of the axis
    xs = d[x].tolist()
    if s is not None and len(set(xs)) < 2:  # one live x: the seed's range gives the axis a width
        xs += s[x].tolist()
    lo_x, hi_x = min(xs), max(xs)
    if s is not None:
        s = s[(s[x] >= lo_x) & (s[x] <= hi_x)] if len(set(xs)) >= 2 else s
    meds = d["median"].tolist() + ([] if s is None else s["median"].tolist())
    top = max(meds) * clip
    bottom = min([v for v in d["lo"].tolist() + meds if v > 0] or [1.0])
    log = spans_decades([bottom, top], 1.0) if log_y is None else log_y
    y_scale = alt.Scale(type="log", domain=[bottom / 1.25, top], clamp=True) if log else \
        alt.Scale(domain=[0, top], clamp=True)
    doubling = _is_count(xs) and min(xs) >= 1 and max(xs) / min(xs) >= 4
    # padding: the points at both ends of the axis are drawn whole
    x_scale = alt.Scale(type="log", base=2 if doubling else 10, padding=10, nice=False, domain=[lo_x, hi_x]) \
        if (log_x if log_x is not None else doubling) else alt.Scale(zero=False, padding=10, domain=[lo_x, hi_x])
    x_enc = alt.X(f"{x}:Q", scale=x_scale, axis=count_axis(x_title or x, xs) if _is_count(xs)
                  else alt.Axis(title=x_title or x))
    y_title = titled("median", unit) + (", log scale" if log else "")
    live, ref = "live (95% CI bars)", seed_note or f"seed ({seed_machine or 'the seed' + chr(39) + 's machine'})"
    dash = alt.StrokeDash("source:N", title=None, scale=alt.Scale(domain=[live, ref] if s is not None else [live],
                                                                   range=[[1, 0], [5, 3]]),
                          legend=alt.Legend(symbolType="stroke", symbolStrokeColor="#555", symbolStrokeWidth=2, labelLimit=360))
    # an explicit scheme: the app's theme shades one hue, and a seed line must match its live one
    color = alt.Color(f"{provider}:N", title=provider, scale=alt.Scale(scheme="tableau10"),
                      legend=alt.Legend(labelLimit=320))
    tip = [provider, x, alt.Tooltip("median:Q", format=".4g", title=titled("median", unit)),
           alt.Tooltip("lo:Q", format=".4g", title="95% CI lo"), alt.Tooltip("hi:Q", format=".4g", title="95% CI hi")]
    y = alt.Y("median:Q", scale=y_scale, title=y_title)
    base = alt.Chart(d.assign(source=live)).encode(x=x_enc, color=color)
    # lines and points are separate layers: a line with a point overlay draws no dash legend
    layers = [base.mark_rule(strokeWidth=2, opacity=0.6).encode(y=alt.Y("lo:Q", scale=y_scale, title=y_title),
                                                                y2="hi:Q", tooltip=tip),
              base.mark_line().encode(y=y, strokeDash=dash), base.mark_point(filled=True, size=45).encode(y=y, tooltip=tip)]
    if s is not None:
        # a seed at other parameters: light grey, one line per series, no live colour borrowed
        paint = {"color": alt.value(NOT_COMPARABLE_COLOR), "detail": f"{provider}:N"} if seed_note else {"color": color}
        ref_base = alt.Chart(s.assign(source=ref)).encode(x=x_enc, y=y, **paint)
        layers += [ref_base.mark_line().encode(strokeDash=dash),
                   ref_base.mark_point(filled=False, size=45).encode(
                       tooltip=[alt.Tooltip("source:N", title="figure"), provider, x,
                                alt.Tooltip("median:Q", format=".4g", title=titled("median", unit))])]
    return _pad(alt.layer(*layers).properties(title=title, width=width, height=height))


def forest(rows: pd.DataFrame, title: str = "B / A per variant (95% CI)") -> alt.Chart:
    """An A/B forest plot: per variant (one row each, in the table's order) the ratio B/A as a
    point with its 95% CI as a bar, on a log axis fitted to the CIs, a rule at 1 (no change),
    the point coloured by the comparison's verdict. ``rows`` has ``variant``, ``ratio``,
    ``lo``, ``hi`` and ``verdict``; rows without a ratio are left out."""
    d = rows[rows["ratio"].map(lambda v: isinstance(v, (int, float)) and math.isfinite(v) and v > 0)].copy()
    d["lo"] = d["lo"].where(d["lo"] > 0, d["ratio"])
    d["hi"] = d["hi"].where(d["hi"] > 0, d["ratio"])
    values = d["lo"].tolist() + d["hi"].tolist() + [1.0]
    lo, hi = min(values), max(values)
    pad = (hi / lo) ** 0.06 if hi > lo else 1.1
    x_scale = alt.Scale(type="log", domain=[lo / pad, hi * pad], nice=False)
    y = alt.Y("variant:N", sort=None, title=None, axis=alt.Axis(labelLimit=360))
    x_title = "B / A (log scale; < 1: B faster)"
    base = alt.Chart(d).encode(y=y)
    tip = ["variant", alt.Tooltip("ratio:Q", format=".3g", title="B/A"), alt.Tooltip("lo:Q", format=".3g", title="95% CI lo"),
           alt.Tooltip("hi:Q", format=".3g", title="95% CI hi"), "verdict"]
    bars = base.mark_rule(strokeWidth=2, color="#555").encode(x=alt.X("lo:Q", scale=x_scale, title=x_title), x2="hi:Q",
                                                              tooltip=tip)
    points = base.mark_point(filled=True, size=70).encode(
        x=alt.X("ratio:Q", scale=x_scale, title=x_title),
        color=alt.Color("verdict:N", title="verdict", legend=alt.Legend(labelLimit=320),
                        scale=alt.Scale(scheme="tableau10")), tooltip=tip)
    one = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 3], color="#888").encode(
        x=alt.X("x:Q", scale=x_scale, title=x_title))
    height = max(120, 22 * len(d))
    return _pad(alt.layer(one, bars, points).properties(title=title, width=WIDTH, height=height))


#: the colour of a study's subject (the kernel or provider under study), drawn over the others
SUBJECT_COLOR = "#d62728"
#: the other providers' colours: muted, so the subject stands out (Tableau 10 without its red)
OTHERS_COLORS = ["#4c78a8", "#72b7b2", "#54a24b", "#b279a2", "#9d755d", "#f58518", "#bab0ac", "#eeca3b", "#ff9da6",
                 "#17becf", "#637939", "#7b4173", "#8c6d31", "#393b79"]


def subject_scale(names: Iterable[str], subject: str) -> alt.Scale:
    """A colour scale over ``names`` that draws ``subject`` (the study's kernel) in a strong
    red, listed first, and the others in quieter colours; a chart whose subject is missing
    gets the same colours for the others."""
    others = [n for n in dict.fromkeys(names) if n != subject]
    domain = ([subject] if subject in set(names) else []) + others
    rng = ([SUBJECT_COLOR] if subject in set(names) else []) + \
        [OTHERS_COLORS[i % len(OTHERS_COLORS)] for i in range(len(others))]
    return alt.Scale(domain=domain, range=rng)


def fitted_domain(values: Iterable[float], pad: float = 0.08, zero: bool = False) -> list[float]:
    """[lo, hi] around ``values`` (live CIs and the seed's marks together) with ``pad`` of the
    range on each side: every mark inside the plot frame, the axis no wider than the data."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return [0.0, 1.0]
    lo, hi = min(vals + ([0.0] if zero else [])), max(vals)
    span = (hi - lo) or abs(hi) or 1.0
    return [lo - pad * span if not zero else lo, hi + pad * span]
