"""IREE native profiler: ``ireeperf-jsonl`` exports and ``.ireeprof`` bundles.

A ``.ireeprof`` bundle (magic ``IRPF``) is converted with the wheel's
``iree-profile export --format=ireeperf-jsonl`` (never parsed from console text). The JSONL
has one record per line, each with ``schema_version`` and ``record_type``; times are IREE's
monotonic host clock in ns (``iree_host_time_ns``), not Tracy's clock.

Lanes (in this order, per physical device / queue):
- ``queue Q submit``: instants ``submit <op>`` at ``host_time_ns`` and ``ready <op>`` at
  ``ready_host_time_ns`` (category ``queue``);
- ``queue Q host-execution``: ``host_execution_event`` spans (an ``execute`` encloses its
  ``dispatch`` spans, named by the dispatch key, category ``dispatch``);
- ``queue Q command regions``: ``command_region_event`` spans (worker counts in args);
- ``device D queue Q``: GPU ``dispatch_event`` spans (category ``kernel``) and
  ``queue_device_event`` spans, in device ticks mapped to host ns by a linear clock fit;
- ``memory``: ``memory_event`` instants.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .model import KERNEL, from_columns, with_depth

FORMAT = "ireeperf-jsonl"
INFO = Format(
    FORMAT, "IREE native profile", (".ireeperf.jsonl", ".jsonl", ".ireeprof"),
    "schema_version 15 (iree-base-runtime 3.13; .ireeprof through iree-profile)",
    "host-execution spans (dispatches named by key), queue submit/ready instants, command regions, "
    "memory instants; GPU dispatches with device ticks fitted to host ns")
#: schema versions whose record layout this importer was checked against (iree 3.13 writes 15)
SUPPORTED_SCHEMAS = (15,)
IREEPROF_MAGIC = b"IRPF"
_MAX_NS = 2**63


def detect(head: bytes, name: str) -> bool:
    """ireeperf-jsonl text (schema record first) or an .ireeprof bundle."""
    if head[:4] == IREEPROF_MAGIC:
        return True
    first = head.lstrip()[:400]
    return first.startswith(b"{") and b'"record_type"' in first and b'"schema_version"' in first


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read an ireeperf-jsonl file or an .ireeprof bundle (exported through iree-profile)."""
    p = Path(path)
    with open(p, "rb") as fh:
        magic = fh.read(4)
    if magic == IREEPROF_MAGIC:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "export.jsonl"
            _export(p, out)
            df, meta = parse(out.read_bytes(), p.name)
        meta["converted_by"] = "iree-profile export --format=ireeperf-jsonl"
        return df, meta
    return parse(p.read_bytes(), p.name)


def _iree_profile() -> str | None:
    # The wheel installs its tools next to the interpreter; PATH may not include the venv.
    here = Path(sys.executable).parent / "iree-profile"
    return str(here) if here.exists() else shutil.which("iree-profile")


def _export(src: Path, dst: Path) -> None:
    tool = _iree_profile()
    if tool is None:
        raise TraceError("ireeprof", f"{src.name}: converting needs iree-profile (pip install iree-base-runtime)")
    try:
        res = subprocess.run([tool, "export", "--format=ireeperf-jsonl", f"--output={dst}", str(src)],
                             capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise TraceError("ireeprof", f"{src.name}: iree-profile export took over 120 s") from None
    if res.returncode != 0 or not dst.exists():
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise TraceError("ireeprof", f"{src.name}: iree-profile export failed: {msg[-1] if msg else res.returncode}")


def records(data: bytes, name: str = "") -> list[dict[str, Any]]:
    """Decode the JSONL lines; a partial or non-object line is a TraceError naming the line."""
    recs: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line.decode("utf-8", "replace"))  # a stray non-UTF-8 byte must not lose the file
        except json.JSONDecodeError:
            last = i == len(lines) or (i == len(lines) - 1 and not lines[-1].strip())
            what = "truncated (last line is incomplete JSON)" if last else f"line {i} is not valid JSON"
            raise TraceError(FORMAT, f"{name}: {what}") from None
        if not isinstance(rec, dict) or "record_type" not in rec:
            raise TraceError(FORMAT, f"{name}: line {i} is not an ireeperf record (no record_type)")
        recs.append(rec)
    if not recs:
        raise TraceError(FORMAT, f"{name}: no records")
    return recs


def parse(data: bytes, name: str = "") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Span table + meta from the bytes of an ireeperf-jsonl export."""
    recs = records(data, name)
    schema = recs[0]
    if schema.get("record_type") != "schema":
        raise TraceError(FORMAT, f"{name}: first record is '{schema.get('record_type')}', expected 'schema'")
    ver = schema.get("schema_version")
    if ver not in SUPPORTED_SCHEMAS:
        raise TraceError(FORMAT, f"{name}: schema_version {ver} is not supported (supported: "
                                 f"{', '.join(map(str, SUPPORTED_SCHEMAS))})")
    sessions = [r.get("event") for r in recs if r.get("record_type") == "session"]
    if sessions.count("begin") != sessions.count("end"):
        raise TraceError(FORMAT, f"{name}: truncated (a session has no 'end' record)")

    fits = _clock_fits(recs, schema)
    rows, order, counts, dropped = _rows(recs, fits, name)
    if not rows["track"]:
        raise TraceError(FORMAT, f"{name}: no events (capture with --device_profiling_mode="
                                 "queue-events,host-execution)")
    lane_rank = {"submit": 0, "host-execution": 1, "command regions": 2}
    order.sort(key=lambda t: (t == "memory", t.startswith("device"), t.split(" ")[1] if " " in t else "",
                              lane_rank.get(t.split(" ", 2)[-1], 3)))
    df = from_columns(rows, source=FORMAT, track_order=order)
    df["process"] = pd.Categorical(["iree"] * len(df))
    df = with_depth(df)
    meta = {"clock": "iree_host_time_ns (IREE monotonic host clock)", "schema_version": ver,
            "record_counts": counts, "clock_fits": {str(k): v for k, v in fits.items()}, **dropped}
    return df, meta


class _Columns:
    """The span table's columns as records fill them, with the rows dropped (times that do not
    fit int64 ns) and adjusted (negative durations, made 0) counted."""

    def __init__(self) -> None:
        self.rows: dict[str, list] = {k: [] for k in ("track", "device", "stream", "name", "category", "start_ns",
                                                      "dur_ns", "correlation", "args", "kind")}
        self.dropped = {"timestamp_overflows": 0, "negative_durations": 0}

    def add(self, track, device, stream, nm, cat, start, dur, corr, args, kind="span") -> None:
        start, dur = int(start), int(dur)
        if not -_MAX_NS < start < _MAX_NS or not -_MAX_NS < start + max(dur, 0) < _MAX_NS:
            self.dropped["timestamp_overflows"] += 1
            return
        self.dropped["negative_durations"] += dur < 0
        rows = self.rows
        rows["track"].append(track)
        rows["device"].append(device)
        rows["stream"].append(stream)
        rows["name"].append(nm if isinstance(nm, str) else str(nm))
        rows["category"].append(cat)
        rows["start_ns"].append(start)
        rows["dur_ns"].append(max(dur, 0))
        rows["correlation"].append(corr)
        rows["args"].append(args)
        rows["kind"].append(kind)


def _rows(recs: list[dict], fits: dict, name: str) -> tuple[dict[str, list], list[str], dict[str, int], dict]:
    """Span-table columns from the records, lanes in order of appearance, record counts and
    the counts of rows dropped or adjusted."""
    fn_names = {(r.get("executable_id"), r.get("function_ordinal")): r.get("name")
                for r in recs if r.get("record_type") == "executable_function"}
    columns = _Columns()
    rows, add = columns.rows, columns.add
    order: list[str] = []
    counts: dict[str, int] = {}
    for r in recs:
        rt = r["record_type"]
        counts[rt] = counts.get(rt, 0) + 1
        dev, q = r.get("physical_device_ordinal", 0), r.get("queue_ordinal", 0)
        try:
            if rt == "queue_event":
                tr = f"queue {q} submit"
                op = r.get("op", "?")
                args = {"op": op, "submission_id": r.get("submission_id"), "wait_count": r.get("wait_count"),
                        "signal_count": r.get("signal_count")}
                add(tr, None, q, f"submit {op}", "queue", r["host_time_ns"], 0, r.get("submission_id"), args, "instant")
                if r.get("ready_host_time_ns"):
                    add(tr, None, q, f"ready {op}", "queue", r["ready_host_time_ns"], 0, r.get("submission_id"),
                        args, "instant")
            elif rt == "host_execution_event":
                if r.get("valid") is False:
                    continue
                op = r.get("op", "?")
                nm = r.get("key") or op
                args = {k: r.get(k) for k in ("op", "submission_id", "command_buffer_id", "command_index",
                                                "workgroup_count", "tile_count", "tile_duration_sum_ns")}
                add(f"queue {q} host-execution", None, q, nm, "dispatch" if op == "dispatch" else "host_execution",
                    r["start_host_time_ns"], r["end_host_time_ns"] - r["start_host_time_ns"],
                    r.get("submission_id"), args)
            elif rt == "command_region_event":
                if r.get("valid") is False:
                    continue
                args = {k: r.get(k) for k in ("submission_id", "region_index", "worker_count", "region_dispatch_count",
                                                "region_tile_count", "useful_drain_count", "no_work_drain_count",
                                                "first_useful_drain_start_host_time_ns",
                                                "last_useful_drain_end_host_time_ns")}
                add(f"queue {q} command regions", None, q, f"region {r.get('region_index', 0)}", "command_region",
                    r["start_host_time_ns"], r["end_host_time_ns"] - r["start_host_time_ns"],
                    r.get("submission_id"), args)
            elif rt == "memory_event":
                args = {k: r.get(k) for k in ("allocation_id", "pool_id", "length", "submission_id")}
                add("memory", None, None, r.get("event_type", "memory"), "memory", r["host_time_ns"], 0,
                    r.get("submission_id"), args, "instant")
            elif rt in ("dispatch_event", "queue_device_event"):
                start, end = _device_times(r, fits, name)
                key = r.get("key") or fn_names.get((r.get("executable_id"), r.get("function_ordinal")))
                nm = key or r.get("op") or rt
                add(f"device {dev} queue {q}", dev, q, nm, KERNEL if rt == "dispatch_event" else "queue_device",
                    start, end - start, r.get("submission_id"),
                    {k: r.get(k) for k in ("submission_id", "command_buffer_id", "command_index", "start_tick",
                                           "end_tick", "workgroup_count")})
            else:
                continue
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(FORMAT, f"{name}: {rt} record lacks or has a bad field ({exc})") from None
        if rows["track"] and rows["track"][-1] not in order:
            order.append(rows["track"][-1])

    return rows, order, counts, columns.dropped


def _clock_fits(recs: list[dict], schema: dict) -> dict[int, tuple[float, float]]:
    """Per device: (ns_per_tick, offset) mapping device ticks to host ns.

    Each ``clock_correlation`` pairs a device tick with a host window [begin, end]; the host
    time of the sample is the window midpoint. The exporter's own derived durations use the
    first and last samples (``clock_fit.basis == first_last_clock_correlation``), so the same
    basis is used here; with another basis, a least-squares line over all samples.
    """
    by_dev: dict[int, list[tuple[float, float]]] = {}
    for r in recs:
        if r.get("record_type") != "clock_correlation":
            continue
        try:
            host = (r["host_time_begin_ns"] + r["host_time_end_ns"]) / 2.0
            by_dev.setdefault(r.get("physical_device_ordinal", 0), []).append((float(r["device_tick"]), host))
        except (KeyError, TypeError):
            continue
    basis = (schema.get("clock_fit") or {}).get("basis", "")
    fits = {}
    for dev, pts in by_dev.items():
        pts.sort()
        if len(pts) < 2 or pts[0][0] == pts[-1][0]:
            continue
        if basis == "first_last_clock_correlation":
            (t0, h0), (t1, h1) = pts[0], pts[-1]
            slope = (h1 - h0) / (t1 - t0)
            fits[dev] = (slope, h0 - slope * t0)
        else:
            t, h = np.array(pts).T
            slope, off = np.polyfit(t - t[0], h, 1)
            fits[dev] = (float(slope), float(off - slope * t[0]))
    return fits


def _device_times(r: dict, fits: dict, name: str) -> tuple[int, int]:
    # Prefer host times the exporter already derived; otherwise map raw ticks through the fit.
    if r.get("start_host_time_ns") is not None and r.get("end_host_time_ns") is not None:
        return int(r["start_host_time_ns"]), int(r["end_host_time_ns"])
    dev = r.get("physical_device_ordinal", 0)
    if dev not in fits:
        raise TraceError(FORMAT, f"{name}: device {dev} events have ticks but fewer than 2 clock_correlation "
                                 "samples to map them to host time")
    slope, off = fits[dev]
    return int(round(r["start_tick"] * slope + off)), int(round(r["end_tick"] * slope + off))
