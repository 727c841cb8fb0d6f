"""Altair views of span tables: the timeline every trace view uses, and phase bars.

The timeline: one row per lane and nesting level (nesting as stacked rows), spans coloured by name (the top names; the rest grey; by category when names
are too many to colour, as in per-tile traces), labelled where the bar is wide enough, time
from the trace's start in a readable unit. Ctrl/Cmd + wheel zooms (a plain wheel scrolls the
page, as in Perfetto), a drag pans, a double-click resets; the window stays inside the
trace. Zoom and pan run in the browser; nothing goes back to the server.

What goes to the browser stays bounded (:data:`MAX_MARKS` rows). A window with that many
spans or fewer sends them all. A larger one sends a pyramid of levels: level 0 bins the
window into cells of about :data:`CELL_PX` pixels per lane row, coloured by the name with
most time in the cell, its opacity the share of the cell that is busy; each further level
halves the cell size. The browser shows the level that matches the zoom, and the real spans
once zoomed in far enough, where they were sent. Drawing data is made by plain-pandas
functions (:func:`timeline_data`) so it is tested without altair; altair is imported inside
the chart functions (the GPU machines have none). Statistics are always computed on the full
table (:mod:`.analysis`), never on the drawing.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..base.units import PER_NS, time_unit
from .analysis import PY_ZONE_PREFIX, envelopes, self_time
from .model import end_ns
from .ranks import merge
from .overlap import where

#: rows sent to the browser at most (Vega draws a few tens of thousands of rects smoothly)
MAX_MARKS = 50_000
#: lane rows (lane x nesting level) drawn at most; more lanes: filter them on the page
MAX_ROWS = 400
#: cell size of the coarsest pyramid level, in pixels at the full window
CELL_PX = 3
#: names with their own colour (Tableau 10); the rest are "other", grey
TOP_NAMES = 10
PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
           "#79706e"]
OTHER, OTHER_COLOR = "other", "#c7c7c7"
#: Python zones (``py.*``, the workbench's own Tracy zones: :mod:`workbench.running.tracy`) always get a
#: colour of their own, from this family (indigo, apart from the palette), top names or not
PY_ZONE_COLORS = ["#393b79", "#5254a3", "#6b6ecf", "#9c9ede"]
ENVELOPE_COLOR = "#8c8c8c"
INSTANTS_MAX = 2_000


def _color_keys(names: np.ndarray, cats: np.ndarray, dur: np.ndarray, color_by: str, top: int
                ) -> tuple[np.ndarray, list[str], str]:
    """Colour key per span (a top name or category, else :data:`OTHER`), the legend's keys in
    order, and what they are ("name" or "category"). ``dur`` ranks them (self time).

    ``color_by="auto"`` colours by name unless the top names hold under half the time and
    there are few categories (per-tile traces name every tile differently)."""
    def top_of(vals: np.ndarray) -> tuple[list[str], float]:
        tot = pd.Series(dur, dtype="float64").groupby(vals).sum().sort_values(ascending=False, kind="stable")
        share = float(tot.iloc[:top].sum() / tot.sum()) if tot.sum() > 0 else 1.0
        return [str(k) for k in tot.index[:top]], share

    if color_by == "auto":
        keys, share = top_of(names)
        n_cats = len(pd.unique(cats))
        color_by = "category" if share < 0.5 and 1 < n_cats <= top else "name"
    vals = names if color_by == "name" else cats
    keys, _ = top_of(vals)
    if color_by == "name":  # Python zones keep their own colour (PY_ZONE_COLORS) whatever their time
        py = sorted({str(v) for v in pd.unique(vals) if str(v).startswith(PY_ZONE_PREFIX)} - set(keys))
        keys += py[:max(0, len(PY_ZONE_COLORS) - sum(k.startswith(PY_ZONE_PREFIX) for k in keys))]
    key = np.where(pd.Series(vals).isin(keys).to_numpy(), vals, OTHER)
    legend = keys + ([OTHER] if (key == OTHER).any() else [])
    return key, legend, color_by


def _rows(lane_codes: np.ndarray, depth: np.ndarray, lane_names: Sequence[str], max_rows: int
          ) -> tuple[np.ndarray, pd.DataFrame, int]:
    """Row index per span (lane order, then depth), the rows table, and lanes left out."""
    pairs = pd.DataFrame({"lane": lane_codes, "depth": depth}).drop_duplicates().sort_values(["lane", "depth"])
    if pairs.empty:
        return np.zeros(0, dtype=np.int64), pairs.assign(row=[], label=[], first=[]), 0
    lanes_all = pairs["lane"].unique()
    # whole lanes only, up to max_rows rows (at least one lane)
    rows_per_lane = pairs.groupby("lane", sort=True).size().reindex(lanes_all).to_numpy()
    keep_n = max(1, int(np.searchsorted(np.cumsum(rows_per_lane), max_rows, side="right")))
    kept = set(lanes_all[:keep_n].tolist())
    pairs = pairs[pairs["lane"].isin(kept)].reset_index(drop=True)
    pairs["row"] = np.arange(len(pairs))
    idx = pd.MultiIndex.from_frame(pairs[["lane", "depth"]])
    row = idx.get_indexer(pd.MultiIndex.from_arrays([lane_codes, depth]))
    pairs["label"] = [str(lane_names[c]) for c in pairs["lane"]]
    pairs["first"] = ~pairs["lane"].duplicated()  # a lane's first row carries its name
    return row, pairs, len(lanes_all) - keep_n


def bin_cells(row: np.ndarray, start: np.ndarray, end: np.ndarray, key: np.ndarray, bin_ns: int) -> pd.DataFrame:
    """Time in each (row, bin) cell per colour key: intervals cut at bin edges (vectorised).

    ``start``/``end`` are ns from the window start. Returns columns ``row, bin, key`` (the key
    with most time in the cell), ``busy`` (covered share of the cell, at most 1) and
    ``count`` (intervals starting in it, so counts add up to the intervals).
    """
    cols = ["row", "bin", "key", "busy", "count"]
    if len(start) == 0:
        return pd.DataFrame(columns=cols)
    b0 = start // bin_ns
    b1 = np.maximum(end - 1, start) // bin_ns
    pieces = (b1 - b0 + 1).astype(np.int64)
    idx = np.repeat(np.arange(len(start)), pieces)
    first = np.repeat(np.cumsum(pieces) - pieces, pieces)
    b = b0[idx] + (np.arange(len(idx)) - first)
    cover = np.minimum(end[idx], (b + 1) * bin_ns) - np.maximum(start[idx], b * bin_ns)
    frame = pd.DataFrame({"row": row[idx], "bin": b, "key": key[idx], "cover": np.maximum(cover, 0),
                          "starts": b == b0[idx]})
    per_key = frame.groupby(["row", "bin", "key"], sort=False).agg(cover=("cover", "sum"), count=("starts", "sum"))
    per_key = per_key.reset_index()
    cell = per_key.groupby(["row", "bin"], sort=False).agg(total=("cover", "sum"), count=("count", "sum"))
    top = per_key.loc[per_key.groupby(["row", "bin"], sort=False)["cover"].idxmax(), ["row", "bin", "key"]]
    out = cell.reset_index().merge(top, on=["row", "bin"])
    out["busy"] = np.minimum(out.pop("total") / bin_ns, 1.0)
    return out[cols]


def timeline_data(df: pd.DataFrame, start_ns: int | None = None, end: int | None = None,
                  max_marks: int = MAX_MARKS, width_px: int = 1000, color_by: str = "auto", top_names: int = TOP_NAMES,
                  max_rows: int = MAX_ROWS) -> tuple[pd.DataFrame, dict[str, Any]]:
    """What the timeline draws for a time window (see the module docstring).

    Returns ``(rows, info)``. ``rows``: ``row, level, kind`` ("span", "cell", "instant"),
    ``start, end`` (in ``info["unit"]`` from ``info["origin_ns"]``, the trace's first start),
    ``name, key`` (colour), ``count`` (spans in a cell), ``busy`` (0..1), ``depth``, ``dur``.
    ``info``: ``unit, scale, origin_ns, start, end`` (window, in the unit), ``levels`` (cell
    size per level in the unit; 0 for real spans), ``real`` (whether real spans were sent),
    ``rows`` (table ``row, lane, depth, label``), ``lanes_left_out``, ``keys`` (legend order),
    ``color_by``, ``spans_in_window``, ``marks``.
    """
    env = envelopes(df)
    env &= not env.all()  # only envelopes: draw them as spans
    inner = df[~env]
    origin = int(inner["start_ns"].min()) if len(inner) else 0
    t0 = origin if start_ns is None else int(start_ns)
    t1 = (int(end_ns(inner).max()) if len(inner) else origin) if end is None else int(end)
    t1 = max(t1, t0 + 1)
    unit = time_unit(t1 - t0, min_reading=5)
    scale = PER_NS[unit]
    in_window = ((df["start_ns"] < t1) & (end_ns(df) > t0)).to_numpy()
    is_span = (df["kind"] == "span").to_numpy() & df["track"].notna().to_numpy() & in_window
    band, sp = df[is_span & env], df[is_span & ~env]
    lane_names = [str(c) for c in df["track"].cat.categories]
    st = np.clip(sp["start_ns"].to_numpy(), t0, t1) - t0
    en = np.clip(sp["start_ns"].to_numpy() + sp["dur_ns"].to_numpy(), t0, t1) - t0
    depth = sp["depth"].to_numpy(dtype=np.int64, na_value=0)
    names = sp["name"].astype(str).to_numpy()
    cats = sp["category"].astype(str).to_numpy()
    lanes = sp["track"].cat.codes.to_numpy().astype(np.int64)
    key, keys, color_by = _color_keys(names, cats, self_time(lanes, st, en, depth), color_by, top_names)
    inst_lanes = df.loc[(df["kind"] == "instant") & (df["start_ns"] >= t0) & (df["start_ns"] <= t1),
                        "track"].cat.codes.to_numpy().astype(np.int64)
    inst_lanes = np.unique(np.r_[inst_lanes, band["track"].cat.codes.to_numpy().astype(np.int64)])
    inst_lanes = inst_lanes[inst_lanes >= 0]
    row, rows_table, left_out = _rows(np.r_[lanes, inst_lanes], np.r_[depth, np.zeros(len(inst_lanes), np.int64)],
                                      lane_names, max_rows)
    row = row[:len(lanes)]
    shown = row >= 0
    st, en, depth, names, key, row = st[shown], en[shown], depth[shown], names[shown], key[shown], row[shown]
    parts, levels, real = _cell_levels(row, st, en, key, t1 - t0, scale, width_px, max_marks)
    if real:
        parts.append(pd.DataFrame({"row": row, "start": st, "end": en, "name": names, "key": key, "count": 1,
                                   "busy": 1.0, "kind": "span", "level": len(levels)}))
        levels.append(0.0)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["row", "start", "end", "name", "key", "count", "busy", "kind", "level"])
    # times in the unit, to a millionth of the window: enough for any zoom the pixels show,
    # and half the JSON of full doubles
    decimals = max(0, 6 - int(np.floor(np.log10(max((t1 - t0) / scale, 1e-12)))))
    out["start"] = ((out["start"].astype("float64") + (t0 - origin)) / scale).round(decimals)
    out["end"] = ((out["end"].astype("float64") + (t0 - origin)) / scale).round(decimals)
    out.loc[out["kind"] == "cell", "name"] = None  # a cell's name is its key
    inst = _instants(df, t0, t1, origin, scale, rows_table)
    bands = _bands(band, t0, t1, origin, scale, rows_table)
    extra = [p.assign(level=-1) for p in (inst, bands) if len(p)]
    if extra:
        out = pd.concat([out, *extra], ignore_index=True)
    out["busy"] = out["busy"].astype("float64").round(3)
    info = {"unit": unit, "scale": scale, "origin_ns": origin, "start": (t0 - origin) / scale,
            "end": (t1 - origin) / scale, "levels": levels, "real": real, "rows": rows_table,
            "lanes_left_out": left_out, "keys": keys, "color_by": color_by, "spans_in_window": int(len(sp)),
            "envelopes": int(len(band)),
            "marks": int(len(out))}
    return out, info


def _cell_levels(row: np.ndarray, st: np.ndarray, en: np.ndarray, key: np.ndarray, span_ns: int, scale: float,
                 width_px: int, max_marks: int) -> tuple[list[pd.DataFrame], list[float], bool]:
    """``(cells per level, each level's cell size in the unit, whether the real spans fit too)``
    for spans at window offsets ``st..en``: none where the spans fit in ``max_marks`` as they
    are; else levels of busy cells from a pixel's width each, each level's cells halved, while
    the marks fit."""
    parts: list[pd.DataFrame] = []
    levels: list[float] = []
    if len(st) <= max_marks:
        return parts, levels, True
    bins = max(width_px // CELL_PX, 1)
    used = 0
    while True:
        bin_ns = max(-(-span_ns // bins), 1)
        cells = bin_cells(row, st, en, key, bin_ns)
        if levels and used + len(cells) > max_marks:
            return parts, levels, False
        cells["start"] = cells["bin"] * bin_ns
        cells["end"] = np.minimum((cells["bin"] + 1) * bin_ns, span_ns)
        cells["level"] = len(levels)
        parts.append(cells.drop(columns="bin").assign(kind="cell", name=cells["key"]))
        levels.append(bin_ns / scale)
        used += len(cells)
        if bin_ns == 1 or len(cells) >= 0.8 * len(st):  # cells as many as spans: no finer level helps
            return parts, levels, False
        if used + len(st) <= max_marks:  # the real spans fit now: they are the finest level
            return parts, levels, True
        bins *= 2


def _instants(df: pd.DataFrame, t0: int, t1: int, origin: int, scale: float, rows_table: pd.DataFrame
              ) -> pd.DataFrame:
    """Instants in the window on their lane's first row (an even sample of at most INSTANTS_MAX)."""
    inst = df[(df["kind"] == "instant") & (df["start_ns"] >= t0) & (df["start_ns"] <= t1)]
    first_row = rows_table[rows_table["depth"] == rows_table.groupby("lane")["depth"].transform("min")]
    row_of = dict(zip(first_row["lane"], first_row["row"]))
    lane = inst["track"].cat.codes.to_numpy()
    row = np.array([row_of.get(c, -1) for c in lane], dtype=np.int64)
    inst, row = inst[row >= 0], row[row >= 0]
    if len(inst) > INSTANTS_MAX:
        pick = np.linspace(0, len(inst) - 1, INSTANTS_MAX).astype(int)
        inst, row = inst.iloc[pick], row[pick]
    t = (inst["start_ns"].to_numpy() - origin) / scale
    return pd.DataFrame({"row": row, "start": t, "end": t, "name": inst["name"].astype(str).to_numpy(),
                         "key": OTHER, "count": 1, "busy": 1.0, "kind": "instant"})


def _bands(band: pd.DataFrame, t0: int, t1: int, origin: int, scale: float, rows_table: pd.DataFrame
           ) -> pd.DataFrame:
    """Envelope spans in the window, clipped to it, on their lane's first row."""
    first_row = rows_table[rows_table["depth"] == rows_table.groupby("lane")["depth"].transform("min")]
    row_of = dict(zip(first_row["lane"], first_row["row"]))
    row = np.array([row_of.get(c, -1) for c in band["track"].cat.codes.to_numpy()], dtype=np.int64)
    band, row = band[row >= 0], row[row >= 0]
    st = np.clip(band["start_ns"].to_numpy(), t0, t1)
    en = np.clip((band["start_ns"] + band["dur_ns"]).to_numpy(), t0, t1)
    return pd.DataFrame({"row": row, "start": (st - origin) / scale, "end": (en - origin) / scale,
                         "name": band["name"].astype(str).to_numpy(), "key": OTHER, "count": 1, "busy": 1.0,
                         "kind": "band"})


def timeline(df: pd.DataFrame, start_ns: int | None = None, end: int | None = None, max_marks: int = MAX_MARKS,
             width: int | str = "container", row_px: int | None = None, title: str = "", color_by: str = "auto",
             top_names: int = TOP_NAMES, max_rows: int = MAX_ROWS, note: str = "",
             palette: dict[str, str] | None = None):
    """The timeline chart of a span table (see the module docstring). Used by the Traces
    page and by studies' pages for their attached traces (``charts.timeline(spans,
    title=...)``, shown with ``st.altair_chart(..., width="stretch")``); ``width`` is
    ``"container"`` (the page's width) or pixels (for static images); ``note`` is the
    subtitle's first line; ``palette`` fixes the colour of some keys (names or categories)."""
    import altair as alt  # start-up: ~0.5 s, only where a chart is drawn

    alt.data_transformers.disable_max_rows()  # the data is bounded by max_marks already
    rows, info = timeline_data(df, start_ns, end, max_marks=max_marks,
                               width_px=width if isinstance(width, int) else 1200, color_by=color_by,
                               top_names=top_names, max_rows=max_rows)
    unit = info["unit"]
    rt = info["rows"]
    n_rows = max(len(rt), 1)
    row_px = row_px or int(np.clip(1100 // n_rows, 6, 22))
    lo0, hi0 = info["start"], info["end"]
    # Zoom with Ctrl/Cmd + wheel (a plain wheel scrolls the page, as in Perfetto), pan by
    # dragging. The selection drives a hidden layer's own x scale; the drawn window (lo, hi) is
    # that window clamped to the trace: never wider than it, never past either end.
    zoom = alt.selection_interval(name="zoom", encodings=["x"], bind="scales",
                                  zoom="wheel![event.ctrlKey || event.metaKey]")
    params = _window_params(lo0, hi0, len(info["levels"]), rt)
    keys = info["keys"] or [OTHER]
    color = alt.Color("key:N", title=f"{info['color_by']} (top {len([k for k in keys if k != OTHER])} by time)",
                      scale=alt.Scale(domain=keys, range=[(palette or {}).get(k, c) for k, c in zip(keys, _colors(keys))]),
                      legend=alt.Legend(orient="bottom", columns=2, labelLimit=300, symbolType="square"))
    window = alt.Scale(domain={"expr": "[lo, hi]"}, zero=False, nice=False)
    x = alt.X("start:Q", title=f"time since trace start ({unit}); Ctrl/Cmd + wheel zooms, drag pans, double-click "
                               "resets", scale=window, axis=alt.Axis(format=",.10~g", grid=True, labelFlush=True, orient="bottom"))
    # one y axis for every layer (layers with different axes would merge into default ticks)
    y_scale = alt.Scale(domain=[0, n_rows], reverse=True, nice=False, zero=False)
    y_axis = alt.Axis(values=[r + 0.5 for r in rt["row"][rt["first"]]] if len(rt) else [],
                      labelExpr="rowlane[floor(datum.value)]", labelLimit=_label_px(rt), ticks=False,
                      grid=False, domain=False)
    y = alt.Y("y0:Q", title=None, scale=y_scale, axis=y_axis)
    ym = alt.Y("ym:Q", title=None, scale=y_scale, axis=y_axis)
    base = alt.Chart(rows).transform_filter(
        "(datum.level == lvl || datum.level == -1) && datum.end >= lo && datum.start <= hi").transform_calculate(
        y0="datum.row + (datum.kind == 'band' ? 0.35 : 0.12)", y1="datum.row + (datum.kind == 'band' ? 0.65 : 0.88)", ym="datum.row + 0.5", dur="datum.end - datum.start",
        lane="rowlane[datum.row]", depth="rowdepth[datum.row]", what="datum.name || datum.key + ' (most time)'")
    tip = [alt.Tooltip("what:N", title="name"), alt.Tooltip("lane:N"),
           alt.Tooltip("start:Q", title=f"start ({unit})", format=",.4f"),
           alt.Tooltip("dur:Q", title=f"duration ({unit})", format=",.4f"), alt.Tooltip("count:Q", title="spans starting here"),
           alt.Tooltip("busy:Q", title="busy", format=".0%"), alt.Tooltip("depth:Q")]
    bars = base.transform_filter("datum.kind != 'instant' && datum.kind != 'band'").mark_rect(clip=True).encode(
        x=x, x2="end:Q", y=y, y2="y1:Q", color=color, tooltip=tip,
        opacity=alt.Opacity("busy:Q", scale=alt.Scale(domain=[0, 1], range=[0.25, 1]), legend=None))
    # envelope spans (the profiler's own): a thin grey band, outside the colour legend
    band = base.transform_filter("datum.kind == 'band'").mark_rect(clip=True, color=ENVELOPE_COLOR).encode(
        x=x, x2="end:Q", y=y, y2="y1:Q", tooltip=tip)
    ticks = base.transform_filter("datum.kind == 'instant'").mark_tick(clip=True, thickness=1, color="black").encode(
        x=x, y=ym, tooltip=tip)
    # the layer that takes the wheel and the drags: invisible, its x scale the selection's own
    # (its field is "start", as the params read the selection's window as zoom.start)
    grip = alt.Chart(pd.DataFrame({"start": [lo0, hi0]})).mark_rule(opacity=0).encode(
        x=alt.X("start:Q", scale=alt.Scale(domain=[lo0, hi0], zero=False, nice=False), axis=None),
        y=alt.Y("y:Q", scale=y_scale, axis=y_axis, title=None)).transform_calculate(y="0").add_params(zoom)
    layers = [band, bars, ticks]
    if row_px >= 10:  # names on bars wide enough to hold some of the name (about 6 px a character)
        layers.append(_names_on_bars(base, window, ym))
    if not info["real"]:  # zoomed in past the finest cells: say so on the chart
        layers.append(_cells_notice(info["levels"][-1], unit, window, y_scale, y_axis))
    # fit-x: the page's width is the chart's, but its height is the lanes' (Streamlit's default
    # "fit" squeezes a short chart's lanes to nothing to fit title, axis and legend in its height)
    # the drawn layers share one x scale (the clamped window); the grip keeps its own
    return alt.layer(grip, alt.layer(*layers)).add_params(*params).resolve_scale(x="independent").properties(
        width=width, height=max(n_rows * row_px, 60), autosize=alt.AutoSizeParams(type="fit-x", contains="padding"),
        # the caller's note on a line of its own: one subtitle line wider than the chart would
        # squeeze the plot area to nothing under fit-x (mc2-split's per-rank alignment notes did)
        title=alt.TitleParams(title or "timeline", subtitle=[note, _note(info)] if note else _note(info),
                              anchor="start"))


def _window_params(lo0: float, hi0: float, n_levels: int, rt: pd.DataFrame) -> list:
    """The timeline's parameters: the drawn window ``lo, hi`` (the zoom selection clamped to the
    trace ``lo0..hi0``), the level of cells that window shows, and each row's lane and depth."""
    import altair as alt

    w = f"min(zoom.start[1] - zoom.start[0], {hi0 - lo0!r})"
    return [alt.param(name="lo", expr=f"zoom.start ? clamp(zoom.start[0], {lo0!r}, {hi0!r} - {w}) : {lo0!r}"),
            alt.param(name="hi", expr=f"zoom.start ? clamp(zoom.start[0], {lo0!r}, {hi0!r} - {w}) + {w} : {hi0!r}"),
            alt.param(name="lvl", expr=f"clamp(ceil(log(({hi0 - lo0!r}) / max(hi - lo, 1e-12)) / LN2 - 1e-9), 0, "
                                       f"{n_levels - 1})"),
            alt.param(name="rowlane", value=list(rt["label"])),
            alt.param(name="rowdepth", value=[int(d) for d in rt["depth"]])]


def _names_on_bars(base, window, ym):
    """The timeline's layer of span names, each cut to what its bar's width in pixels holds."""
    import altair as alt

    return base.transform_filter("datum.kind == 'span'").transform_calculate(
        px="(min(datum.end, hi) - max(datum.start, lo)) / max(hi - lo, 1e-12) * width",
        tx="max(datum.start, lo)").transform_calculate(
        label="datum.px > 28 ? (length(datum.name) * 6 <= datum.px - 6 ? datum.name : "
              "substring(datum.name, 0, max(floor((datum.px - 6) / 6) - 1, 1)) + '…') : ''").transform_filter(
        "datum.label != ''").mark_text(align="left", baseline="middle", dx=3, fontSize=10, clip=True,
                                        color="black").encode(x=alt.X("tx:Q", scale=window), y=ym, text="label:N")


def _cells_notice(finest: float, unit: str, window, y_scale, y_axis):
    """A line on the chart once zoomed in past its finest cells (``finest``, in ``unit``)."""
    import altair as alt

    return alt.Chart(pd.DataFrame({"n": [0]})).transform_filter(f"hi - lo < {finest!r} * 40").transform_calculate(
        tx="lo", ty="0").mark_text(align="left", baseline="top", dx=4, dy=2, color="#b00000", fontSize=12).encode(
        x=alt.X("tx:Q", scale=window),
        y=alt.Y("ty:Q", title=None, scale=y_scale, axis=y_axis),
        text=alt.value(f"busy cells of {finest:,.4g} {unit}, not single spans: set a narrower window "
                       "(Window from/to) to load each span"))


def ranks_timeline(traces: Sequence, align: str = "auto", marker: str | None = None, title: str = "",
                   **kwargs: Any):
    """Per-rank traces in one timeline, clocks aligned and lanes grouped by rank: what a
    study shows for the traces its ranks attached. ``traces`` are span tables or ``(spans,
    meta)`` pairs, one per rank (see :func:`workbench.traces.ranks.merge` for ``align`` and
    ``marker``); other arguments go to :func:`timeline`. Returns ``(chart, meta)``; ``meta``
    says how the clocks were aligned and by how much each rank was shifted. Raises
    ``RankError`` when the alignment asked for is impossible."""
    df, meta = merge(traces, align=align, marker=marker)
    shifts = ", ".join(f"rank {r['rank']} {r['offset_ns'] / 1e3:+,.1f} us" for r in meta["ranks"])
    return timeline(df, title=title, note=f"ranks aligned by {meta['alignment']} ({shifts})", **kwargs), meta


def _colors(keys: list[str]) -> list[str]:
    pal = iter(PALETTE * (len(keys) // len(PALETTE) + 1))
    py = iter(PY_ZONE_COLORS * (len(keys) // len(PY_ZONE_COLORS) + 1))
    return [OTHER_COLOR if k == OTHER else next(py) if k.startswith(PY_ZONE_PREFIX) else next(pal) for k in keys]


def _label_px(rt: pd.DataFrame) -> int:
    """Room for lane names: their length in pixels, between 60 and 320."""
    longest = int(rt["label"].str.len().max()) if len(rt) else 8
    return int(np.clip(longest * 6.5 + 8, 60, 320))


def _note(info: dict[str, Any]) -> str:
    """The subtitle: what is drawn (spans or cells) and what was left out."""
    parts = [f"{info['spans_in_window']:,} spans"]
    if not info["real"]:
        parts.append(f"drawn as busy cells down to {info['levels'][-1]:,.4g} {info['unit']}: "
                     "narrow the window on the page to see each span")
    elif len(info["levels"]) > 1:
        parts.append("cells at full view, each span once zoomed in")
    if info["lanes_left_out"]:
        parts.append(f"{info['lanes_left_out']:,} more lanes not drawn (pick lanes)")
    if info.get("envelopes"):
        parts.append("grey band: the profiler's envelope span, off the axis range")
    parts.append(f"colour: {info['color_by']}, top {len([k for k in info['keys'] if k != OTHER])} by time, "
                 f"the rest grey; rows: lanes, nesting below")
    return "; ".join(parts)


def phase_bars(summary: pd.DataFrame, title: str = "phase breakdown: median per iteration, p10-p90 whiskers"):
    """One bar per phase (median, with its p10-p90 range) from
    :func:`workbench.traces.phases.summarize`, labelled with its share."""
    import altair as alt  # start-up: ~0.5 s, only where a chart is drawn

    d = summary[summary["phase"] != "total"].copy()
    d["label"] = [f"{m:,.1f} us ({s:.1f}%)" for m, s in zip(d["median_us"], d["share_pct"])]
    order = list(d["phase"])
    base = alt.Chart(d).encode(y=alt.Y("phase:N", sort=order, title=None, axis=alt.Axis(labelLimit=240)))
    bars = base.mark_bar().encode(
        x=alt.X("median_us:Q", title="median per iteration (us)"),
        color=alt.Color("phase:N", sort=order, legend=None),
        tooltip=["phase", alt.Tooltip("median_us:Q", format=",.2f"), alt.Tooltip("p10_us:Q", format=",.2f"),
                 alt.Tooltip("p90_us:Q", format=",.2f"), alt.Tooltip("share_pct:Q", format=".1f")])
    whiskers = base.mark_rule(color="#333").encode(x="p10_us:Q", x2="p90_us:Q")
    text = base.mark_text(align="left", dx=4, baseline="bottom", dy=-2, fontSize=11).encode(
        x="median_us:Q", text="label:N")
    return (bars + whiskers + text).properties(title=title, width=700, height=alt.Step(28))


#: colours of the GPU states (workbench.traces.overlap.states): computation blue, communication
#: hidden under it green, exposed communication red, memory yellow, fused purple, idle light grey
STATE_COLORS = {"computation": "#4c78a8", "computation + communication": "#54a24b", "communication": "#e45756",
                "memory": "#eeca3b", "fused": "#b279a2", "idle": "#e0e0e0"}


def breakdown_bars(states: pd.DataFrame, title: str = "GPU time per rank: exclusive states, share of the total"):
    """One stacked bar per rank and device from :func:`workbench.traces.overlap.states`: the
    share of its total each state took (states with memory or fused work beside others are
    grey, "other overlaps")."""
    import altair as alt

    d = states.copy()
    d["where"] = [where(r, dv) for r, dv in zip(d["rank"], d["device"])]
    d["shown"] = [s if s in STATE_COLORS else "other overlaps" for s in d["state"]]
    d = d.groupby(["where", "shown"], as_index=False, sort=False).agg(time_us=("time_us", "sum"),
                                                                      share_pct=("share_pct", "sum"))
    order = [k for k in STATE_COLORS if k != "idle"] + ["other overlaps", "idle"]
    colors = dict(STATE_COLORS, **{"other overlaps": OTHER_COLOR})
    d["order"] = d["shown"].map({k: i for i, k in enumerate(order)})
    return alt.Chart(d).mark_bar().encode(
        y=alt.Y("where:N", title=None, sort=list(dict.fromkeys(d["where"]))),
        x=alt.X("share_pct:Q", title="share of the GPU's total time (%)", scale=alt.Scale(domain=[0, 100])),
        color=alt.Color("shown:N", title="state", scale=alt.Scale(domain=order, range=[colors[k] for k in order]),
                        legend=alt.Legend(orient="bottom", columns=4)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("where:N"), alt.Tooltip("shown:N", title="state"),
                 alt.Tooltip("time_us:Q", title="time (us)", format=",.1f"),
                 alt.Tooltip("share_pct:Q", title="share (%)", format=".2f")],
    ).properties(title=title, width="container", height=alt.Step(26))


def overlap_band(state_spans: pd.DataFrame, title: str = "GPU state over time, per rank", **kwargs: Any):
    """The timeline of :func:`workbench.traces.overlap.state_spans` (one lane per rank and
    device), each state in its :data:`STATE_COLORS` colour."""
    return timeline(state_spans, title=title, color_by="name", palette=STATE_COLORS,
                    note="green: communication hidden under computation; red: exposed communication", **kwargs)
