"""The shared chart rules (workbench.charts) and the one table renderer (workbench.tables):
the choices they make are the ones a reader needs, on data where a wrong choice shows."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from workbench import charts, mermaid
from workbench.tables import MISSING, key_columns, number_format, render


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


def test_bars_of_a_ns_floor_beside_a_ms_one_are_both_visible():
    df = pd.DataFrame({"variant": ["empty-call", "forkjoin"], "median_ns": [20.0, 6e4], "ci_lo_ns": [19.0, 5.8e4],
                       "ci_hi_ns": [21.0, 6.2e4], "correct": [True, True]})
    spec = charts.median_ci_bars(df).to_dict()
    bar = next(u for u in _units(spec) if u["mark"] in ("bar", {"type": "bar"}))
    assert bar["encoding"]["y"]["scale"]["type"] == "log" and bar["encoding"]["y"]["title"] == "median (us)"
    # one y title for the bars and the whiskers: Vega-Lite joins two into "median (us), lo"
    titles = {u["encoding"]["y"].get("title") for u in _units(spec)}
    assert titles == {"median (us)"}


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
    chart = charts.sweep_chart(_sweep(xs=(1, 2, 4, 8, 16, 32, 64, 128, 256)), x="w")
    text = mermaid.from_chart(chart)
    assert text.startswith("```mermaid") and "xychart-beta" in text and text.count("    line [") == 2
    assert 'x-axis "w" ["1", "2", "4"' in text
    lines = [l for l in text.splitlines() if l.startswith("Lines:")]
    assert lines and "nccl (blue)" in lines[0] and "fused (orange)" in lines[0]
    df, x, y, series, *_ = mermaid.chart_data(chart)  # the values drawn are the chart's, not their log10
    drawn = [float(v) for v in text.split("    line [", 1)[1].split("]")[0].split(", ")]
    first = df[df[series] == df[series].iloc[0]].sort_values(x)[y].tolist()
    assert drawn == pytest.approx(first, rel=1e-3) and "log10" not in text and "log scale" not in text


def test_mermaid_draws_series_of_other_magnitudes_as_their_own_charts_and_the_seed_beside_them():
    df = pd.DataFrame({"w": [1, 2, 4] * 3, "median": [50.0, 40.0, 30.0, 13_000.0, 12_000.0, 11_000.0, 60.0, 45.0, 35.0],
                       "who": ["iree"] * 3 + ["numpy"] * 3 + ["seed: iree"] * 3})
    text = mermaid.xychart(df, "w", "median", "who", y_title="median (us)")
    assert text.count("xychart-beta") == 2 and "(1/2)" in text and "(2/2)" in text
    assert "iree (blue), seed: iree (orange)" in text and "numpy (blue)" in text


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
    assert "72,620" in text and "166,310" in text and "e+04" not in text.split("\n")[2].split("|")[2]
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
