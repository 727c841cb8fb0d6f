"""calibration: charts that show nanosecond floors beside microsecond fork/joins."""

from __future__ import annotations

import studies.calibration as study
from workbench.reading.analysis import analyse, charts_of
from workbench.data.record import RunRecord, VariantResult


def _rec() -> RunRecord:
    rec = RunRecord("r", study.ID, study.SPACE.resolve({"threads": 3, "torch": False}), env={}, outputs={},
                    floor_ns=20.0)
    rec.variants = [VariantResult("empty-call", {"provider": "empty-call"}, [20, 21, 22, 20, 21], True, "ok"),
                    VariantResult("perf-counter", {"provider": "perf-counter"}, [40, 41, 42, 40, 41], True, "ok")]
    rec.variants += [VariantResult(f"forkjoin/w{n}", {"provider": "python-threads", "threads": n},
                                   [2e4 * n + i for i in range(5)], True, "ok") for n in (1, 2, 3)]
    return rec


def _layers(spec: dict) -> list[dict]:
    out = []
    for layer in spec.get("layer", []):
        out += _layers(layer) if "layer" in layer else [layer]
    return out


def test_floors_as_points_on_a_log_axis_and_thread_ticks_are_integers():
    a = analyse(_rec())
    assert not a.errors
    charts = {k: c.to_dict() for k, c in charts_of(a).items()}
    floors = _layers(charts["floors"])
    y = floors[0]["encoding"]["y"]
    # 20 ns beside 60 us: a log axis in the unit the largest reads in, points with whiskers (no bars)
    assert y["scale"]["type"] == "log" and y["title"] == "median (us), log scale"
    assert not any((la["mark"]["type"] if isinstance(la["mark"], dict) else la["mark"]) == "bar" for la in floors)
    for layer in _layers(charts["forkjoin"]):
        assert ", lo" not in str(layer["encoding"]["y"].get("title", ""))
    x = _layers(charts["forkjoin"])[0]["encoding"]["x"]
    assert x["axis"]["format"] == "d" and x["axis"]["values"] == [1, 2, 3]
