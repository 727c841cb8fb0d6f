"""Time units: nanoseconds per unit, and the one rule for the unit a time reads in.

Times are stored in ns everywhere; what people read is in the largest unit in which the time
is at least 1 (``812 ns``, ``15.2 us``, ``1.87 ms``): :func:`time_unit` picks it for a value
(:func:`workbench.stats.fmt_ns`), a chart's median (:func:`workbench.charts.time_unit`) and a
timeline's window (``min_reading=5``: axis ticks read 0-5 ms rather than 0-0.8 s).
"""

from __future__ import annotations

#: nanoseconds per unit (google-benchmark's ``time_unit`` names them the same way)
PER_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def time_unit(ns: float, min_reading: float = 1.0) -> str:
    """The largest unit in which ``ns`` reads at least ``min_reading`` (``ns`` below that,
    and for NaN)."""
    a = abs(ns)
    return next((u for u in ("s", "ms", "us") if a >= min_reading * PER_NS[u]), "ns")
