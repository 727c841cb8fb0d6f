"""The one unit formatter (workbench/base/units.py) and the display form of tables (tables.readable):
a value in the unit its magnitude calls for, a CI in its point's unit, a column in one unit, and
no report that prints a duration as 10,000 or more of a unit."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.evidence import derived, engine, stats
from workbench.presentation import report
from workbench.base import units
from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import read_bundle
from workbench.evidence.tables import FIGURE, readable, render
from tests.support.paths import ROOT

#: a figure with its unit as the reports print it (1,234.5 us)
FIGURE_WITH_UNIT = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(ns|us|ms|B|KiB|MiB|GiB)\b")


@pytest.mark.parametrize("value, unit, text", [
    (1_222_847.0, "us", "1.22 s"), (396_199.0, "us", "396 ms"), (19_381.2, "us", "19.4 ms"), (812, "ns", "812 ns"),
    (999.6, "us", "1 ms"), (30, "ns", "30 ns"), (2048, "B", "2 KiB"), (0.3, "GB/s", "300 MB/s"),
    (float("nan"), "us", "n/a"), (1.5, "x", "1.50 x"),
])
def test_a_value_reads_in_the_unit_its_magnitude_calls_for(value, unit, text):
    assert units.fmt(value, unit) == text


@given(st.floats(min_value=1e-3, max_value=1e13, allow_nan=False))
def test_no_value_reads_as_ten_thousand_of_a_unit_when_a_larger_exists(ns):
    text = units.fmt(ns, "ns")
    number, unit = text.rsplit(" ", 1)
    assert float(number.replace(",", "")) < units.MAX_READING or unit == "s"
    # and it reads back as the value, to its three significant digits (whole nanoseconds: a clock's step)
    assert float(number.replace(",", "")) * units.PER_NS[unit] == pytest.approx(ns, rel=6e-3, abs=0.5)


def test_a_ci_reads_in_its_points_unit():
    assert units.fmt_ci(1_222_847.0, 1_100_000.0, 1_310_000.0, "us") == "1.22 s [1.10, 1.31]"
    row = {"name": "a", "point": 1_222_847.0, "lo": 1_100_000.0, "hi": 1_310_000.0, "unit": "us", "null": 0.0,
           "status": "clear", "n_a": 9, "n_b": 9}
    assert derived.fmt_derived(row) == "1.22 s [1.10, 1.31] (clear)"  # two digits of the CI's width
    # a clear CI still never prints reaching its null once scaled
    near = {**row, "point": 9_998.0, "lo": 9_995.0, "hi": 9_999.5, "null": 10_000.0}
    assert "10.000" not in derived.fmt_derived(near) and " ms " in derived.fmt_derived(near)


def test_stats_fmt_ns_is_the_formatter():
    assert [stats.fmt_ns(x) for x in (30, 26_500, 150_000, 999_999, float("nan"))] == \
        ["30 ns", "26.5 us", "150 us", "1 ms", "n/a"]


def test_a_column_reads_in_one_unit_with_its_ci_columns_and_says_it():
    df = pd.DataFrame({"series": ["a", "b"], "total_us": [2.0, 1_222_847.0], "ci_lo_us": [1.9, 1_100_000.0],
                       "ci_hi_us": [2.1, 1_300_000.0], "vs_torch": [1.2, 3.4], "copy_gbps": [0.3, 12.0]})
    shown = readable(df)
    assert list(shown.columns) == ["series", "total (ms)", "95% CI lo (ms)", "95% CI hi (ms)", "vs torch", "copy (GB/s)"]
    assert shown["total (ms)"].tolist() == pytest.approx([0.002, 1222.847])
    text = render(df, "plain")
    assert "1,223" in text and "1,222,847" not in text and "0.00200" in text
    assert df.columns[1] == "total_us"  # the caller's DataFrame keeps its ids and stored units


def test_a_derived_table_reads_as_one_figure_column():
    df = derived.derived_table([engine.judge("fork/join", 1_222_847.0, 1_100_000.0, 1_310_000.0, unit="us", null=0.0,
                                             n_a=9, n_b=9, paired=False, covers=engine.SAMPLES)])
    shown = readable(df)
    assert FIGURE in shown.columns and not {"point", "lo", "hi", "unit", "null"} & set(shown.columns)
    assert shown[FIGURE].iloc[0] == "1.22 s [1.10, 1.31]"


def _every_text(rec: RunRecord) -> dict[str, str]:
    a = report.analyse(rec)
    return {"issue": report.issue_markdown(rec, a), "issue --full": report.issue_markdown(rec, a, full=True),
            "md": report.markdown(rec, analysis=a)}


def _durations_over_limit(text: str) -> list[str]:
    out = []
    for m in FIGURE_WITH_UNIT.finditer(text):
        value = float(m.group(1).replace(",", ""))
        if value >= units.MAX_READING:
            out.append(text[max(0, m.start() - 60):m.end()])
    return out


def test_no_report_of_a_committed_run_prints_ten_thousand_of_a_unit():
    rec = read_bundle(ROOT / "traces/cpu-reduction/many-core-16cpu.bundle.json")
    for form, text in _every_text(rec).items():
        assert _durations_over_limit(text) == [], form


def test_no_report_of_a_calibration_run_prints_ten_thousand_of_a_unit():
    rng = np.random.default_rng(0)
    params = {"repeat": 20, "threads": 2, "torch": False}
    variants = [VariantResult(name, vp, list(rng.normal(med, med * 0.02, 20)), True, "ok", blocks=[b] * 20)
                for b, (name, vp, med) in enumerate([("empty-call", {"provider": "empty-call"}, 30.0),
                                                     ("perf-counter", {"provider": "perf-counter"}, 57.0),
                                                     ("forkjoin/w1", {"provider": "python-threads", "threads": 1}, 26_500.0),
                                                     ("forkjoin/w2", {"provider": "python-threads", "threads": 2}, 1.2e7)])]
    rec = RunRecord("20260101-000000-calibration-abcdef", "calibration", params, env={}, status="complete", variants=variants,
                    floor_ns=29.0, reproduce="python -m workbench run calibration")
    for form, text in _every_text(rec).items():
        assert _durations_over_limit(text) == [], form
        assert "12.0 ms" in text or "12 ms" in text, form
    assert not math.isnan(units.convert(1.0, "ms", "us"))
