"""Altair views of span tables: a lane-per-track timeline and phase bars.

Drawing data is prepared by plain-pandas functions (:func:`timeline_data`) so it can be
tested without altair; altair is imported inside the chart functions (the GPU machines have
none). Large traces are downsampled for drawing only: within a lane and nesting level,
spans closer than one pixel are merged into one block (coloured by the category with most
time in it, its tooltip giving the span count), doubling the pixel size until the marks fit.
Statistics are always computed on the full table (:mod:`.analysis`), never on the drawing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .model import end_ns

#: marks drawn at most (Vega renders ~tens of thousands of rects interactively)
MAX_MARKS = 20_000


def _unit(span_ns: float) -> tuple[str, float]:
    if span_ns >= 5e9:
        return "s", 1e9
    if span_ns >= 5e6:
        return "ms", 1e6
    return "us", 1e3


def timeline_data(df: pd.DataFrame, start_ns: int | None = None, end: int | None = None,
                  max_marks: int = MAX_MARKS, width_px: int = 1200) -> tuple[pd.DataFrame, dict]:
    """Rows to draw for a time window, downsampled when needed.

    Returns ``(rows, info)``; rows have ``track, depth, name, category, start, end, dur, count``
    in ``info["unit"]`` relative to ``info["origin_ns"]``; ``info["merged"]`` says whether
    spans were merged and ``info["pixel_ns"]`` the merge resolution.
    """
    sp = df[df["kind"] == "span"]
    inst = df[df["kind"] == "instant"]
    t0 = int(df["start_ns"].min()) if start_ns is None else int(start_ns)
    t1 = int(end_ns(df).max()) if end is None else int(end)
    t1 = max(t1, t0 + 1)
    e = end_ns(sp)
    sp = sp[(sp["start_ns"] < t1) & (e > t0)]
    inst = inst[(inst["start_ns"] >= t0) & (inst["start_ns"] <= t1)]
    unit, scale = _unit(t1 - t0)
    tr_codes = sp["track"].cat.codes.to_numpy()
    st = np.clip(sp["start_ns"].to_numpy(), t0, t1)
    en = np.clip(sp["start_ns"].to_numpy() + sp["dur_ns"].to_numpy(), t0, t1)
    depth = sp["depth"].to_numpy(dtype=np.int64, na_value=0)
    names = sp["name"].astype(str).to_numpy()
    cats = sp["category"].astype(str).to_numpy()
    pixel = 0
    merged = False
    if len(sp) + len(inst) > max_marks:
        merged = True
        pixel = max((t1 - t0) // width_px, 1)
        while True:
            blocks = _merge(tr_codes, depth, st, en, cats, names, pixel)
            if len(blocks) + min(len(inst), max_marks // 10) <= max_marks:
                break
            pixel *= 2
        rows = blocks
    else:
        rows = pd.DataFrame({"code": tr_codes, "depth": depth, "start_ns": st, "end_ns": en, "name": names,
                             "category": cats, "count": 1})
    cats_all = df["track"].cat.categories
    rows["track"] = pd.Categorical.from_codes(rows.pop("code"), categories=cats_all, ordered=True)
    rows["start"] = (rows.pop("start_ns") - t0) / scale
    rows["end"] = (rows.pop("end_ns") - t0) / scale
    rows["dur"] = rows["end"] - rows["start"]
    rows["kind"] = "span"
    if len(inst):
        if len(inst) > max_marks // 10:  # keep an even sample of instants
            inst = inst.iloc[np.linspace(0, len(inst) - 1, max_marks // 10).astype(int)]
        ir = pd.DataFrame({"track": inst["track"].to_numpy(), "depth": 0, "name": inst["name"].astype(str).to_numpy(),
                           "category": inst["category"].astype(str).to_numpy(), "count": 1,
                           "start": (inst["start_ns"].to_numpy() - t0) / scale})
        ir["end"] = ir["start"]
        ir["dur"] = 0.0
        ir["kind"] = "instant"
        ir["track"] = pd.Categorical(ir["track"], categories=cats_all, ordered=True)
        rows = pd.concat([rows, ir], ignore_index=True)
    info = {"origin_ns": t0, "end_ns": t1, "unit": unit, "merged": merged, "pixel_ns": int(pixel),
            "spans_in_window": int(len(sp)), "instants_in_window": int(len(inst)), "marks": int(len(rows)),
            "tracks": [t for t in cats_all if (rows["track"] == t).any()]}
    return rows, info


def _merge(codes, depth, st, en, cats, names, pixel: int) -> pd.DataFrame:
    """Merge spans of one (track, depth) that lie within ``pixel`` ns of each other."""
    order = np.lexsort((st, depth, codes))
    c, d, s, e = codes[order], depth[order], st[order], en[order]
    key_change = np.ones(len(s), dtype=bool)
    key_change[1:] = (c[1:] != c[:-1]) | (d[1:] != d[:-1])
    # running max of end within each (track, depth) group
    grp = np.cumsum(key_change) - 1
    run_end = pd.Series(e).groupby(grp).cummax().to_numpy()
    new = key_change.copy()
    new[1:] |= s[1:] > run_end[:-1] + pixel
    block = np.cumsum(new) - 1
    dur = e - s
    frame = pd.DataFrame({"block": block, "code": c, "depth": d, "s": s, "e": e, "dur": dur,
                          "cat": cats[order], "name": names[order]})
    agg = frame.groupby("block", sort=False).agg(code=("code", "first"), depth=("depth", "first"),
                                                 start_ns=("s", "min"), end_ns=("e", "max"), count=("s", "size"))
    # the block's colour and label: its longest span's category and name
    longest = frame.loc[frame.groupby("block", sort=False)["dur"].idxmax()]
    agg["category"] = longest["cat"].to_numpy()
    agg["name"] = np.where(agg["count"].to_numpy() > 1,
                           [f"{n} (+{k - 1} more)" for n, k in zip(longest["name"], agg["count"])],
                           longest["name"].to_numpy())
    return agg.reset_index(drop=True)


def timeline(df: pd.DataFrame, start_ns: int | None = None, end: int | None = None, max_marks: int = MAX_MARKS,
             width: int = 900, lane_px: int = 28, title: str = ""):
    """Timeline chart: one lane per track (source order), nesting as sub-rows, colour by
    category, hover details, drag/scroll to zoom the time axis."""
    import altair as alt

    # the drawing is already bounded by max_marks; altair's 5000-row guard would refuse it
    alt.data_transformers.disable_max_rows()
    rows, info = timeline_data(df, start_ns, end, max_marks=max_marks, width_px=width)
    unit = info["unit"]
    lanes = info["tracks"]
    rows = rows[rows["track"].isin(lanes)].copy()
    rows["track"] = rows["track"].astype(str)
    max_depth = int(rows["depth"].max()) if len(rows) else 0
    note = (f" — {info['spans_in_window']:,} spans drawn as {info['marks']:,} blocks "
            f"(merged below {info['pixel_ns'] / 1e3:.1f} us)") if info["merged"] else ""
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    base = alt.Chart(rows).encode(
        y=alt.Y("track:N", sort=lanes, title=None, axis=alt.Axis(labelLimit=260)),
        yOffset=alt.YOffset("depth:O", sort="ascending", scale=alt.Scale(domain=list(range(max_depth + 1)))),
        color=alt.Color("category:N", legend=alt.Legend(title="category", orient="bottom", columns=6)),
        tooltip=[alt.Tooltip("track:N"), alt.Tooltip("name:N"), alt.Tooltip("category:N"),
                 alt.Tooltip("start:Q", title=f"start ({unit})", format=".3f"),
                 alt.Tooltip("dur:Q", title=f"duration ({unit})", format=".3f"), alt.Tooltip("depth:Q"),
                 alt.Tooltip("count:Q", title="spans")],
    )
    x = alt.X("start:Q", title=f"time ({unit}) from {info['origin_ns']} ns", scale=alt.Scale(zero=False))
    bars = base.transform_filter(alt.datum.kind == "span").mark_bar(clip=True).encode(x=x, x2="end:Q")
    ticks = base.transform_filter(alt.datum.kind == "instant").mark_tick(clip=True, thickness=1, color="black"
                                                                        ).encode(x=x)
    return (bars + ticks).add_params(zoom).properties(
        width=width, height=alt.Step(max(lane_px // (max_depth + 1), 3)),
        title=(title or "timeline") + note)


def phase_bars(summary: pd.DataFrame, title: str = "phase breakdown (median per iteration)"):
    """Horizontal stacked bar of phase medians from :func:`workbench.traces.phases.summarize`."""
    import altair as alt

    d = summary[summary["phase"] != "total"].copy()
    d["order"] = range(len(d))
    return alt.Chart(d).mark_bar().encode(
        x=alt.X("median_us:Q", stack="zero", title="median (us)"),
        color=alt.Color("phase:N", sort=list(d["phase"])),
        order="order:Q",
        tooltip=["phase", alt.Tooltip("median_us:Q", format=".2f"), alt.Tooltip("p10_us:Q", format=".2f"),
                 alt.Tooltip("p90_us:Q", format=".2f"), alt.Tooltip("share_pct:Q", format=".1f")],
    ).properties(title=title, width=700, height=60)
