"""Units: the one formatter for every number that carries a unit (pyperf's ``_formatter.py``:
formatting dispatches on the unit, so times, bytes, bandwidth and counts are no special cases).

Figures are stored in a fixed unit (times in ns, or in the unit a column's name ends with:
``median_ns``, ``total_us``; bytes in B; bandwidth in GB/s); what people read is put in the
unit its magnitude calls for:

- one value (:func:`fmt`): the largest unit in which it reads at least 1 (``812 ns``,
  ``15.2 us``, ``1.87 ms``, ``1.22 s``, ``42 us``), three significant digits at most;
- a value with its CI (:func:`fmt_ci`): the point's unit for all three, so a CI never reads in
  another unit than its point (``1.22 s [1.10, 1.31]``);
- a column (:func:`column_unit`): one unit for the whole column, from its median, raised while
  its largest value would read :data:`MAX_READING` or more (no ``19,381.2 us`` in a table: the
  column reads in ms). A column's CI columns take their point's unit (:mod:`workbench.evidence.tables`).

No value is ever printed as :data:`MAX_READING` or more of a unit when a larger unit exists.
:func:`time_unit` is the rule for one time (``min_reading=5``: a timeline's window reads 0-5 ms
rather than 0-0.8 s).
"""

from __future__ import annotations

import math
import re
from typing import Iterable

#: nanoseconds per unit (google-benchmark's ``time_unit`` names them the same way)
PER_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
#: the units of each kind, smallest first, with their size in the kind's base unit
KINDS: dict[str, list[tuple[str, float]]] = {
    "time": [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)],
    "bytes": [("B", 1.0), ("KiB", 1024.0), ("MiB", 1024.0 ** 2), ("GiB", 1024.0 ** 3), ("TiB", 1024.0 ** 4)],
    "rate": [("B/s", 1.0), ("KB/s", 1e3), ("MB/s", 1e6), ("GB/s", 1e9), ("TB/s", 1e12)],
}
#: other spellings of a unit (``µs``; ``GB/s`` as a column suffix ``gbps``)
ALIASES = {"µs": "us", "usec": "us", "sec": "s", "bytes": "B", "b": "B", "kib": "KiB", "mib": "MiB", "gib": "GiB",
           "gbps": "GB/s", "gb/s": "GB/s", "mbps": "MB/s", "mb/s": "MB/s"}
#: a value never reads this many of a unit or more where a larger unit exists
MAX_READING = 10_000.0
#: significant digits of a value read alone
DIGITS = 3


def canonical(unit: str) -> str:
    """``us`` for ``µs``, ``GB/s`` for ``gbps``; any other text as given."""
    return ALIASES.get(unit, ALIASES.get(unit.lower(), unit)) if isinstance(unit, str) else ""


def kind_of(unit: str) -> str | None:
    """``time``, ``bytes`` or ``rate`` for a unit this module scales, else None (``x``, ``%``,
    counts and free text are printed as they are)."""
    unit = canonical(unit)
    return next((k for k, units in KINDS.items() if any(u == unit for u, _ in units)), None)


def _size(unit: str) -> float:
    unit = canonical(unit)
    return next(s for units in KINDS.values() for u, s in units if u == unit)


def convert(value: float, unit: str, to: str) -> float:
    """``value`` in ``unit`` expressed in ``to`` (both of one kind)."""
    return value * _size(unit) / _size(to)


def pick(values: Iterable[float], unit: str, typical: float | None = None) -> str:
    """The unit ``values`` (given in ``unit``) read in: the largest in which ``typical`` (by
    default their median magnitude) is at least 1, raised while the largest would read
    :data:`MAX_READING` or more. ``unit`` itself for a unit this module does not scale."""
    kind = kind_of(unit)
    if kind is None:
        return unit
    base = _size(unit)
    mags = sorted(abs(float(v)) * base for v in values if v is not None and _finite(v) and float(v) != 0)
    if not mags:
        return canonical(unit)
    mid = abs(typical) * base if typical is not None and _finite(typical) and typical != 0 else mags[len(mags) // 2]
    ladder = KINDS[kind]
    i = max([j for j, (_, size) in enumerate(ladder) if mid >= size] or [0])
    # a value that rounds up to 1000 at three digits belongs to the next unit
    while i + 1 < len(ladder) and (mags[-1] / ladder[i][1] >= MAX_READING
                                   or float(f"{mid / ladder[i][1]:.{DIGITS}g}") >= 1000):
        i += 1
    return ladder[i][0]


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def number(value: float, digits: int = DIGITS) -> str:
    """``value`` with ``digits`` significant digits and thousands separators, never in
    exponent notation (``0.00203``, ``12.3``, ``1,223``); an exact 0 reads ``0``."""
    if value == 0:
        return "0"
    if not _finite(value):
        return "n/a" if value != value else ("inf" if value > 0 else "-inf")
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    # 9.996 at 3 digits rounds to 10.00: one digit too many
    if decimals and len(text.replace(",", "").replace("-", "").replace(".", "").lstrip("0")) > digits:
        text = f"{value:,.{decimals - 1}f}"
    return text


def fmt(value: float, unit: str = "ns", digits: int = DIGITS) -> str:
    """One value in the unit its magnitude calls for: ``fmt(1222847, "us")`` is ``1.22 s``,
    ``fmt(812)`` (ns) is ``812 ns``; NaN is ``n/a``. A unit this module does not scale is
    kept (``1.5 x``)."""
    if value is None or value != value:
        return "n/a"
    if kind_of(unit) is None:
        return f"{number(value, digits)} {unit}".rstrip()
    to = pick([value], unit)
    shown = convert(value, unit, to)
    if to == KINDS[kind_of(unit)][0][0] and abs(shown) >= 1:  # ns and B: the smallest step is whole
        return f"{shown:,.0f} {to}"
    text = number(shown, digits)
    # a value alone reads as %g does (42 us, 1.5 ms): its trailing zeros say nothing
    return f"{text.rstrip('0').rstrip('.') if '.' in text else text} {to}"


def ci_decimals(point: float, lo: float, hi: float) -> int:
    """Decimals for two significant digits of the point and of the CI's width."""
    need = [1 - math.floor(math.log10(abs(v))) for v in (point, hi - lo) if v and _finite(v)]
    return max(0, min(6, max(need, default=0)))


def fmt_ci(point: float, lo: float, hi: float, unit: str = "ns", decimals: int | None = None,
           shown: str | None = None) -> str:
    """``1.22 s [1.10, 1.31]``: the point and its 95% CI, all three in the point's unit (raised
    while a bound would read :data:`MAX_READING` or more; ``shown`` fixes it, e.g. the unit of
    a row); ``decimals`` by default enough for two significant digits of the point and of the
    CI's width."""
    if not _finite(point):
        return "n/a"
    to = shown or (pick([point, lo, hi], unit, typical=point) if kind_of(unit) else unit)
    p, l, h = ((convert(v, unit, to) if kind_of(unit) and _finite(v) else v) for v in (point, lo, hi))
    dec = ci_decimals(p, l, h) if decimals is None else decimals
    text = lambda v: "0" if v == 0 else (f"{v:,.{dec}f}" if _finite(v) else "n/a")  # noqa: E731
    return f"{text(p)} {to} [{text(l)}, {text(h)}]".replace("  ", " ")


def time_unit(ns: float, min_reading: float = 1.0) -> str:
    """The largest unit in which ``ns`` reads at least ``min_reading`` (``ns`` below that,
    and for NaN)."""
    a = abs(ns)
    return next((u for u in ("s", "ms", "us") if a >= min_reading * PER_NS[u]), "ns")


#: a column name's unit suffix: ``median_ns``, ``total_us``, ``copy_gbps``, ``bytes_per_copy``
#: (``_s`` alone is too common a word ending to read as seconds: ``elapsed_s`` only)
_SUFFIX = re.compile(r"^(?P<base>.*?)_(?P<unit>ns|us|ms|gbps|mbps|bytes|kib|mib|gib)$|"
                     r"^(?P<sbase>.*(?:elapsed|time|duration|took|wall))_s$")
#: a header that already says its unit: ``measured (us, 95% CI)``, ``predicted (us)``
_HEADER = re.compile(r"\((?P<unit>ns|us|µs|ms|s|B|KiB|MiB|GiB|GB/s|MB/s)(?P<rest>[,)])")


def column_unit(name: str) -> tuple[str, str] | None:
    """(base name, unit) of a column whose name says its unit (``total_us`` -> (``total``,
    ``us``); ``measured (us)`` -> (``measured``, ``us``)), else None."""
    if not isinstance(name, str):
        return None
    if name == "bytes" or name.startswith("bytes_"):
        return name, "B"
    m = _SUFFIX.match(name)
    if m:
        if m.group("sbase"):
            return m.group("sbase"), "s"
        return m.group("base"), canonical(m.group("unit"))
    m = _HEADER.search(name)
    if m and m.group("rest") == ")" and name.rstrip().endswith(")"):
        return name[:m.start()].rstrip(), canonical(m.group("unit"))
    return None
