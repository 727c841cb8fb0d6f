"""Machine load over a run: samples taken by the runner, and the "run disturbed" lines.

The runner samples the load average and the CPU clock before a run, after each recorded
variant (``variant.extra["load"]``) and after the run (``rec.outputs["load"]``, keys
``before`` and ``after``). :func:`disturbance` turns them into the warnings that lead the
page, the report and the CLI summary, with the figures; :func:`variant_notes` marks the
variants measured under load in the results table.

Thresholds (documented in docs/reading-a-run.md):

- **load**: the 1-minute load average (runnable threads, machine-wide) above the machine's
  logical CPU count means some thread, the run's own or another process's, waited for a CPU
  while the run was timing. The run's own threads count too: a run that asks for more
  workers than there are CPUs is disturbed by itself, and says so. The load average is a
  1-minute exponential average updated every 5 s, so it lags a sudden burst by seconds and a
  short disturbance shows damped: it flags sustained load, not every hiccup.
- **CPU clock**: a variant whose sampled mean clock (``scaling_cur_freq`` of the CPUs this
  process may run on, else ``/proc/cpuinfo``) is more than :data:`FREQ_DROP` below the
  highest clock sampled during the run ran throttled (thermal, power cap, another tenant's
  turbo budget). A sample is one instant after the variant, not an average over it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

#: a variant's CPU clock this far below the run's highest sampled clock is a disturbance
FREQ_DROP = 0.10
_SHOWN = 6  # variants named in one disturbance line


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def cpu_mhz() -> float | None:
    """Mean current clock of the CPUs this process may run on, in MHz, or None if unreadable."""
    khz = []
    for cpu in _cpus():
        try:
            khz.append(int(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq").read_text()))
        except (OSError, ValueError):
            break
    if khz:
        return round(sum(khz) / len(khz) / 1e3, 1)
    try:
        mhz = [float(line.split(":", 1)[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz")]
    except (OSError, ValueError):
        return None
    return round(sum(mhz) / len(mhz), 1) if mhz else None


def sample() -> dict[str, Any]:
    """One load sample: ``loadavg_1m`` and, where readable, ``cpu_mhz``."""
    out: dict[str, Any] = {}
    try:
        out["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    mhz = cpu_mhz()
    if mhz is not None:
        out["cpu_mhz"] = mhz
    return out


def _num(sample: Any, key: str) -> float:
    """A finite number from an (untrusted) sample, else NaN."""
    x = sample.get(key) if isinstance(sample, dict) else None
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else math.nan


def loadavg(sample: Any) -> float:
    return _num(sample, "loadavg_1m")


def _run_samples(rec) -> tuple[dict, dict]:
    doc = rec.outputs.get("load") if isinstance(rec.outputs, dict) else None
    doc = doc if isinstance(doc, dict) else {}
    return doc.get("before") or {}, doc.get("after") or {}


def _machine_cpus(rec) -> float:
    n = rec.env.get("cpu_logical") if isinstance(rec.env, dict) else None
    return float(n) if isinstance(n, int) and not isinstance(n, bool) and n > 0 else math.nan


def _peak_mhz(rec) -> float:
    mhz = [_num(v.extra.get("load"), "cpu_mhz") for v in rec.variants if isinstance(v.extra, dict)]
    mhz = [x for x in mhz if x == x]
    return max(mhz) if mhz else math.nan


def variant_notes(rec) -> list[str]:
    """Per variant: why it was measured under load ("" when it was not, or not sampled)."""
    cpus, peak = _machine_cpus(rec), _peak_mhz(rec)
    notes = []
    for v in rec.variants:
        s = v.extra.get("load") if isinstance(v.extra, dict) else None
        la, mhz = loadavg(s), _num(s, "cpu_mhz")
        parts = []
        if la > cpus:
            parts.append(f"measured under load: load average {la:.1f} on {cpus:.0f} CPUs")
        if mhz < (1 - FREQ_DROP) * peak:
            parts.append(f"CPU clock {mhz:.0f} MHz, {1 - mhz / peak:.0%} below the run's highest {peak:.0f} MHz")
        notes.append("; ".join(parts))
    return notes


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def disturbance(rec) -> list[str]:
    """The "run disturbed" lines of a run, with the figures; empty when the samples show no
    load above the CPU count and no clock drop (or when the run predates load sampling)."""
    cpus, peak = _machine_cpus(rec), _peak_mhz(rec)
    before, after = (loadavg(s) for s in _run_samples(rec))
    lines = []
    if before > cpus:
        lines.append(f"The machine was already loaded when the run started: load average {before:.1f} on "
                     f"{cpus:.0f} CPUs.")
    loads = [(loadavg(v.extra.get("load") if isinstance(v.extra, dict) else None), v.variant) for v in rec.variants]
    loaded = [(la, name) for la, name in loads if la > cpus]
    if loaded:
        top, top_name = max(loaded)
        start = f"rose from {before:.1f} before the run to" if before == before and before < top else "reached"
        lines.append(f"Run disturbed: the 1-minute load average {start} {top:.1f} (after {top_name}), above this "
                     f"machine's {cpus:.0f} CPUs; {len(loaded)} of {len(rec.variants)} variant(s) measured under "
                     f"load: {_names([n for _, n in loaded])}. Their times may include waiting for a CPU.")
    elif after > cpus:
        lines.append(f"Load average {after:.1f} after the run, above this machine's {cpus:.0f} CPUs (from "
                     f"{before:.1f} before): the last variants may have been measured under load.")
    slow = [(_num(v.extra.get("load") if isinstance(v.extra, dict) else None, "cpu_mhz"), v.variant)
            for v in rec.variants]
    slow = [(mhz, name) for mhz, name in slow if mhz < (1 - FREQ_DROP) * peak]
    if slow:
        low, low_name = min(slow)
        lines.append(f"CPU clock dropped during the run: {low:.0f} MHz after {low_name}, {1 - low / peak:.0%} below "
                     f"the run's highest {peak:.0f} MHz; {len(slow)} variant(s) ran more than {FREQ_DROP:.0%} below "
                     f"it: {_names([n for _, n in slow])}.")
    return lines


def run_note(rec) -> str:
    """Why the run as a whole counts as measured under load ("" when it does not): a figure the
    engine cannot attribute to one variant (a profile, a model fitted to every variant) takes
    the run's load: any variant measured under load, or a load above the CPU count before or
    after the run."""
    loaded = [n for n in variant_notes(rec) if n]
    if loaded:
        return f"{len(loaded)} of {len(rec.variants)} variant(s) of the run measured under load ({loaded[0]})"
    cpus = _machine_cpus(rec)
    worst = max((x for x in (loadavg(s) for s in _run_samples(rec)) if x == x), default=math.nan)
    if worst > cpus:
        return f"the run was measured under load: load average {worst:.1f} on {cpus:.0f} CPUs"
    return ""


def peak(rec) -> float:
    """The highest 1-minute load average sampled during a run, per logical CPU (NaN when the run
    was not sampled): how quiet the machine was while it timed."""
    loads = [loadavg(v.extra.get("load") if isinstance(v.extra, dict) else None) for v in rec.variants]
    loads += [loadavg(s) for s in _run_samples(rec)]
    loads = [x for x in loads if x == x]
    cpus = _machine_cpus(rec)
    return max(loads) / cpus if loads and cpus == cpus else math.nan


def quietest(records: list) -> Any:
    """The run measured on the quietest machine (lowest :func:`peak`; unsampled runs last, then
    the newest first among equals), or None for no runs."""
    def key(i_rec):
        i, rec = i_rec
        p = peak(rec)
        return (p != p, p if p == p else 0.0, i)

    return min(enumerate(records), key=key)[1] if records else None
