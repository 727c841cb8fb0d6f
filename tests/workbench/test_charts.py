"""The shared chart rules (workbench.presentation.charts) and the one table renderer (workbench.evidence.tables):
the choices they make are the ones a reader needs, on data where a wrong choice shows."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from workbench.presentation import charts, mermaid
from workbench.evidence.tables import MISSING, key_columns, number_format, render


def _sweep(providers=("nccl", "fused"), xs=(1, 2, 4, 8, 16), scale=1.0) -> pd.DataFrame:
    rows = []
    for p in providers:
        for w in xs:
            med = 4e5 / w * (1.3 if p == "nccl" else 1.0) * scale
            rows.append({"provider": p, "w": w, "median_ns": med, "ci_lo_ns": med * 0.9, "ci_hi_ns": med * 1.1})
    return pd.DataFrame(rows)


def _png(chart) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_json(), scale=1)


def _coloured(png: bytes) -> int:
    from PIL import Image

    im = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for r, g, b in im.getdata() if max(r, g, b) - min(r, g, b) > 40)


def _units(spec: dict) -> list[dict]:
    return [u for u in mermaid._layers(spec)]


def test_values_spanning_decades_get_a_log_axis_and_others_do_not():
    assert charts.value_scale([20, 500, 7e4]).to_dict()["type"] == "log"
    assert "type" not in charts.value_scale([55.0, 61.0, 66.0]).to_dict()
    assert "type" not in charts.value_scale([-1.0, 500.0, 7e4]).to_dict()  # no log through zero
    assert charts.time_unit([20, 30, 45]) == "ns" and charts.time_unit([4e4, 6e4]) == "us"
    assert charts.time_unit([3e6, 9e6]) == "ms"


def _marks(spec) -> set[str]:
    return {u["mark"]["type"] if isinstance(u["mark"], dict) else u["mark"] for u in _units(spec)}


def test_a_ns_floor_beside_a_ms_one_is_points_with_whiskers_on_a_log_axis_never_bars():
    df = pd.DataFrame({"variant": ["empty-call", "forkjoin"], "median_ns": [20.0, 6e4], "ci_lo_ns": [19.0, 5.8e4],
                       "ci_hi_ns": [21.0, 6.2e4], "correct": [True, True]})
    spec = charts.median_ci_bars(df).to_dict()
    assert "bar" not in _marks(spec) and {"point", "rule"} <= _marks(spec)  # a bar's length means nothing on a log axis
    point = next(u for u in _units(spec) if u["mark"] in ("point", {"type": "point", "filled": True, "size": 70})
                 or (isinstance(u["mark"], dict) and u["mark"]["type"] == "point"))
    assert point["encoding"]["y"]["scale"]["type"] == "log" and point["encoding"]["y"]["title"] == "median (us), log scale"
    # one y title for the points and the whiskers: Vega-Lite joins two into "median (us), lo"
    titles = {u["encoding"]["y"].get("title") for u in _units(spec)}
    assert titles == {"median (us), log scale"}
    assert _coloured(_png(charts.median_ci_bars(df))) > 50  # both drawn


def test_values_within_a_decade_are_bars_from_zero():
    df = pd.DataFrame({"variant": ["a", "b"], "median_ns": [2e4, 6e4], "ci_lo_ns": [1.9e4, 5.8e4],
                       "ci_hi_ns": [2.1e4, 6.2e4], "correct": [True, True]})
    spec = charts.median_ci_bars(df).to_dict()
    bar = next(u for u in _units(spec) if (u["mark"]["type"] if isinstance(u["mark"], dict) else u["mark"]) == "bar")
    assert bar["encoding"]["y"]["scale"] == {"zero": True} and bar["encoding"]["y"]["title"] == "median (us)"


def test_a_seed_at_other_parameters_is_greyed_and_said_not_comparable():
    seed = _sweep(providers=("nccl",)).assign(median_ns=lambda d: d["median_ns"] * 2)
    note = "seed at N=1M: not comparable (this run: N=16,384)"
    spec = charts.sweep_errorbars(_sweep(), x="w", seed=seed, seed_machine="7975WX", seed_note=note).to_dict()
    text = json.dumps(spec)
    assert note in text and "seed (7975WX)" not in text
    greyed = [u for u in _units(spec) if u["encoding"].get("color", {}).get("value") == charts.NOT_COMPARABLE_COLOR]
    assert len(greyed) == 2  # its line and its points, in no live series' colour
    drawn = mermaid.from_chart(charts.sweep_errorbars(_sweep(), x="w", seed=seed, seed_note=note))
    assert "the seed's" not in drawn.split("```")[1] and "not drawn: " + note in drawn


def test_counts_get_integer_ticks_at_the_measured_values_and_facets_numeric_order():
    spec = charts.sweep_chart(_sweep(), x="w").to_dict()
    x = next(u for u in _units(spec) if "tooltip" in u["encoding"])["encoding"]["x"]
    assert x["axis"]["format"] == "d" and x["axis"]["values"] == [1, 2, 4, 8, 16]
    assert charts.numeric_order(["16384", "1024", "4096"]) == ["1024", "4096", "16384"]
    m = pd.concat([_sweep(scale=s).assign(M=m) for s, m in ((1, 1024), (16, 16384), (4, 4096))])
    faceted = charts.sweep_chart(m, x="w", facet_by="M").to_dict()
    assert faceted["facet"]["sort"] == [1024, 4096, 16384]
    assert faceted["resolve"]["scale"] == {"x": "independent", "y": "independent"}


def test_the_seed_layer_is_labelled_as_the_seeds_with_its_machine_and_drawn():
    seed = pd.DataFrame({"w": [1, 2, 4, 8, 16], "median_ns": [4.5e5, 2.6e5, 1.3e5, 9e4, 6e4]})
    chart = charts.sweep_chart(_sweep(), x="w", title="scaling", seed=seed, seed_machine="Xeon 8375C")
    assert "seed (Xeon 8375C)" in chart.to_json()
    assert _coloured(_png(chart)) > 500  # the live lines and bands are drawn


def test_sweep_chart_draws_one_line_per_provider_with_a_band_in_a_png():
    chart = charts.sweep_chart(_sweep(providers=("a", "b", "c")), x="w", title="t")
    spec = chart.to_dict()
    marks = {u["mark"]["type"] if isinstance(u["mark"], dict) else u["mark"] for u in _units(spec)}
    assert {"area", "line"} <= marks
    assert spec["autosize"]["type"] == "pad"  # keeps its size beside a long legend
    assert _coloured(_png(chart)) > 500


def test_mermaid_xychart_from_a_chart_keeps_series_order_in_real_units():
    chart = charts.sweep_chart(_sweep(xs=(1, 2, 4, 8, 16)), x="w")
    text = mermaid.from_chart(chart)
    assert text.startswith("```mermaid") and "xychart-beta" in text and text.count("    line [") == 2
    assert 'x-axis "w" ["1", "2", "4", "8", "16"]' in text
    lines = [l for l in text.splitlines() if l.startswith("Lines:")]
    assert lines and "nccl (blue)" in lines[0] and "fused (orange)" in lines[0]
    df, x, y, series, *_ = mermaid.chart_data(chart)  # the values drawn are the chart's, not their log10
    drawn = [float(v) for v in text.split("    line [", 1)[1].split("]")[0].split(", ")]
    first = df[df[series] == df[series].iloc[0]].sort_values(x)[y].tolist()
    assert drawn == pytest.approx(first, rel=1e-3) and "log10" not in text and "log scale" not in text


def test_mermaid_keeps_one_comparison_in_one_chart_across_magnitudes():
    df = pd.DataFrame({"w": [1, 2, 4] * 3, "median": [50.0, 40.0, 30.0, 13_000.0, 12_000.0, 11_000.0, 60.0, 45.0, 35.0],
                       "who": ["iree"] * 3 + ["numpy"] * 3 + ["the seed's iree"] * 3})
    text = mermaid.xychart(df, "w", "median", "who", y_title="median (us)")
    assert text.count("xychart-beta") == 1 and "(1/2)" not in text
    assert "iree (blue), numpy (orange), the seed's iree (green)" in text
    # the values as their log10, and what each step of the axis is
    assert '"log10 of median (us)"' in text and "line [1.699, 1.602, 1.477]" in text
    assert "2 = 100 us, 3 = 1 ms, 4 = 10 ms" in text and "30 us to 13 ms" in text


def test_mermaid_draws_a_one_x_line_chart_as_bars_and_keeps_a_long_title_above_it():
    df = pd.DataFrame({"w": [1, 1, 1], "median": [2.0, 13.4, 50.5], "who": ["torch.sum", "IREE no-split", "IREE c=3"]})
    title = "Thread scaling, N=16,384: iree-bench and torch.sum (CI bars clipped at the top)"
    text = mermaid.xychart(df, "w", "median", "who", y_title="median (us)", title=title)
    assert text.startswith(f"_{title}_") and "…" not in text and "    title " not in text
    assert 'x-axis "w = 1" ["torch.sum", "IREE no-split", "IREE c=3"]' in text and "    bar [2, 13.4, 50.5]" in text


def test_mermaid_labels_cannot_end_the_string_or_the_block():
    df = pd.DataFrame({"x": ['a"]\n```', "<img src=x onerror=alert(1)>"], "y": [1.0, 2.0]})
    text = mermaid.xychart(df, "x", "y", kind="bar")
    body = text.split("```mermaid", 1)[1].rsplit("```", 1)[0]
    assert "```" not in body and '"a\') \'\'\'"' in body
    assert "<img" not in body and '"‹img src=x onerror=alert(1)›"' in body  # labels may be drawn as HTML


def test_one_number_format_per_column_and_no_na():
    df = pd.DataFrame({"variant": ["a|b", "c", None], "median_us": [72620.1, 166310.0, float("nan")],
                       "n": [1, 2, 3], "share": [0.0123, 0.5, 0.02], "ok": [True, False, True],
                       "x": [pd.NA, 1.5, 2.25], "tiny_to_huge": [1e-6, 3.0, 7e4]})
    text = render(df)
    assert "<NA>" not in text and "nan" not in text.lower() and "None" not in text and MISSING in text
    # a column named in a unit reads in the unit its magnitude calls for, said in its header
    assert "median (ms)" in text and "72.6" in text and "166" in text and "72,620" not in text
    assert "0.0123" in text and "0.5000" in text  # one format for the whole column
    assert "1.000e-06" in text and "7.000e+04" in text  # a column spanning decades: scientific throughout
    assert "a\\|b" in text and "yes" in text and "no" in text
    plain = render(df, "plain")
    assert "a|b" in plain and "<NA>" not in plain
    assert number_format([1, 2, 3]).kind == "int" and number_format([0.5, 1.25]).decimals == 3


def test_key_columns_of_a_wide_table_keep_what_varies_and_say_the_constants_once():
    df = pd.DataFrame({"variant": ["a", "b"], "n": [1_000_000, 1_000_000], "w": [1, 2], "median_ns": [5.0, 6.0],
                       **{f"extra{i}": [i, i] for i in range(10)}})
    cols, constant = key_columns(df, max_columns=4, first=("variant",))
    assert cols == ["variant", "w", "median_ns"] and constant["n"] == 1_000_000 and "extra3" in constant
