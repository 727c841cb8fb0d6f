"""rocpd: the SQLite database rocprofv3 writes by default since ROCm 7.0 (``%pid%_results.db``).

The physical tables carry a per-session UUID in their names (``rocpd_region0198e2a0_...``),
so the database is read through rocprofiler-sdk's views: ``kernels``, ``regions`` (HIP/HSA/
RCCL API calls and roctx ranges), ``samples`` (roctx marks), ``memory_copies``,
``memory_allocations``, ``threads`` and ``processes``, with ``rocpd_metadata``'s
``schema_version`` checked first (major 3, ROCm 7.0 - 7.x, is read; others are refused with
the version found). Columns are taken by name with the spellings of the releases seen
(``corr_id``/``correlation_id``, ``agent_abs_index``/``agent_absolute_index``); missing views or
columns leave those spans or fields out.

Views are SQL stored in the file, so each one read is checked first (:meth:`.sqlite.Database.view`):
it may only be built, through other such views, from ``rocpd_*`` tables and rocprofiler-sdk's
view names, with no WITH/RECURSIVE; queries run under the time and row limits of
:mod:`.sqlite`. A file defining ``kernels`` as a recursive view is refused before it runs.

One database may hold several sessions (GUIDs, one process each): lanes are then prefixed
with the process id. Lanes:

- ``GPU <type index> <queue or stream name>``: kernels (category ``kernel``) per agent and
  stream (queue when the kernels carry no stream), ``Memcpy HtoD``-named ``gpu_memcpy``
  copies on their stream's lane, ``memory_allocation`` spans on ``GPU <n> memory``;
- ``thread <tid>``: API calls (``hip_api``, ``hsa_api``, ``rccl_api``), roctx ranges (category
  ``marker``, named by their message) and roctx marks (instants).

``correlation`` is rocprofiler's internal correlation id (the events' ``stack_id``, what
rocprofv3's CSV calls ``Correlation_Id``): it links an API call to the kernel or copy it
launched. The external (user) correlation id is kept in args as ``external_correlation``.
Times are rocprofiler-sdk timestamps in ns, one clock for every process of a node.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .model import KERNEL, concat, from_columns, sort_rows, with_depth
from .rocprof import _DOMAIN_CATS, copy_name
from .sqlite import SQLITE_MAGIC, Database

FORMAT = "rocpd"
#: schema_version majors whose views this importer reads
SUPPORTED_MAJORS = (3,)
INFO = Format(
    FORMAT, "rocprofv3 rocpd database", (".db", ".rocpd"),
    "schema_version 3 (ROCm 7.0 - 7.x); several sessions per file",
    "through its views: kernels (GPU lanes per agent and stream or queue), HIP/HSA/RCCL API regions "
    "(thread lanes), roctx ranges and marks, memory copies (gpu_memcpy), memory allocations, thread and "
    "process names; correlation ids link API calls to kernels and copies")

#: rocprofiler-sdk's own view names (data_views.sql, marker_views.sql, summary_views.sql)
_SDK_VIEWS = {"tracks", "events", "code_objects", "kernel_symbols", "processes", "threads", "regions", "region_args",
              "samples", "sample_regions", "regions_and_samples", "kernels", "pmc_info", "pmc_events",
              "kernel_pmc_events", "events_args", "stream_args", "memory_copies", "memory_allocations",
              "scratch_memory", "counters_collection", "markers", "range_markers", "single_markers"}


#: columns read per view (each release's spelling; absent ones are skipped)
_COMMON = ("guid", "pid", "tid", "start", "end", "stack_id", "corr_id", "correlation_id")
_COLUMNS = {
    "rocpd_metadata": ("tag", "value"),
    "kernels": _COMMON + ("name", "agent_type_index", "agent_abs_index", "agent_absolute_index", "stream_id", "stream",
                          "queue_id", "queue", "dispatch_id", "kernel_id", "grid_x", "grid_y", "grid_z", "workgroup_x",
                          "workgroup_y", "workgroup_z", "lds_size", "scratch_size", "sgpr_count", "arch_vgpr_count",
                          "region"),
    "regions": _COMMON + ("name", "category", "extdata"),
    "samples": _COMMON + ("name", "category", "extdata", "timestamp"),
    "memory_copies": _COMMON + ("name", "size", "stream_id", "stream_name", "src_device", "dst_device",
                                "src_agent_type", "dst_agent_type", "src_agent_type_index", "dst_agent_type_index"),
    "memory_allocations": _COMMON + ("type", "level", "size", "address", "agent_type_index", "agent_abs_index",
                                     "agent_absolute_index"),
    "threads": ("guid", "pid", "tid", "name"),
    "processes": ("guid", "pid", "command"),
}


def _allowed(name: str) -> bool:
    low = name.lower()
    return low.startswith("rocpd_") or low in _SDK_VIEWS


def detect(head: bytes, name: str) -> bool:
    """A SQLite file whose schema (stored at its start) names rocpd tables."""
    return head.startswith(SQLITE_MAGIC) and b"rocpd_metadata" in head


def _pick(df: pd.DataFrame, *names: str) -> pd.Series:
    """The first of ``names`` that is a column (as the views' spellings changed), else NA."""
    for n in names:
        if n in df.columns:
            return df[n]
    return pd.Series([None] * len(df), index=df.index, dtype=object)


def _ints(s: pd.Series) -> list:
    return [None if v is None or (isinstance(v, float) and v != v) else int(v) for v in s.tolist()]


def _str(v: Any) -> str:
    """Text of a value SQLite returned (a BLOB in a text column is bytes)."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else "" if v is None else str(v)


def _json(v: Any) -> dict:
    if not isinstance(v, (str, bytes)) or not v:
        return {}
    try:
        out = json.loads(v)
    except (ValueError, RecursionError):
        return {}
    return out if isinstance(out, dict) else {}


class _Reader:
    """One open database: checked views, and lane names that stay unique across sessions."""

    def __init__(self, db: Database):
        self.db = db
        self.prefixes: dict[tuple, str] = {}
        self.gpu_lanes: set[str] = set()

    def view(self, name: str) -> pd.DataFrame | None:
        """The columns this importer uses of one of rocprofiler-sdk's views (None if absent)."""
        if self.db.kind(name) is None:
            return None
        real = self.db.view(name, _allowed)
        return self.db.select(real, _COLUMNS[name], f"view '{real}'")

    def schema_version(self) -> str:
        if self.db.kind("rocpd_metadata") is None:
            raise TraceError(FORMAT, f"{self.db.name}: no rocpd_metadata view (not a rocpd database)")
        meta = self.view("rocpd_metadata")
        versions = sorted({str(v) for t, v in zip(_pick(meta, "tag"), _pick(meta, "value")) if t == "schema_version"})
        if not versions:
            raise TraceError(FORMAT, f"{self.db.name}: rocpd_metadata has no schema_version")
        for v in versions:
            major = v.split(".")[0].strip()
            if not major.isdigit() or int(major) not in SUPPORTED_MAJORS:
                raise TraceError(FORMAT, f"{self.db.name}: rocpd schema_version {v[:20]} is not supported (read: "
                                         f"{', '.join(f'{m}.x' for m in SUPPORTED_MAJORS)}); convert it with "
                                         "'rocpd convert -f csv' and import the CSV files")
        return ", ".join(versions)

    def set_processes(self, frames: list[pd.DataFrame | None]) -> None:
        """Lane prefixes: none for one process, 'pid N ' for several (with the session if pids repeat)."""
        keys = list(dict.fromkeys((g, p) for f in frames if f is not None
                                  for g, p in zip(_pick(f, "guid"), _pick(f, "pid"))))
        pids = [p for _, p in keys]
        for i, (g, p) in enumerate(keys):
            self.prefixes[(g, p)] = "" if len(keys) == 1 else f"pid {p} " if pids.count(p) == 1 else \
                f"session {i} pid {p} "

    def lanes(self, df: pd.DataFrame, make) -> list[str]:
        return [self.prefixes.get((g, p), "") + make(*row) for g, p, *row in df.itertuples(index=False, name=None)]

    def gpu(self, labels: list[str]) -> list[str]:
        self.gpu_lanes.update(labels)
        return labels


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a rocpd database through its views (see the module docstring)."""
    p = Path(path)
    with Database(p, FORMAT) as db:
        r = _Reader(db)
        version = r.schema_version()
        frames = {name: r.view(name) for name in ("kernels", "regions", "samples", "memory_copies",
                                                  "memory_allocations", "threads", "processes")}
    r.set_processes([frames[k] for k in ("regions", "samples", "kernels", "memory_copies", "memory_allocations")])
    thread_names = _thread_names(frames["threads"])
    parts = [t for t in (_regions(r, frames["regions"], thread_names), _samples(r, frames["samples"], thread_names),
                         _kernels(r, frames["kernels"]), _copies(r, frames["memory_copies"]),
                         _allocations(r, frames["memory_allocations"])) if t is not None]
    if not parts:
        raise TraceError(FORMAT, f"{p.name}: no kernels, API regions, markers, copies or allocations")
    negative = sum(int(t.attrs.get("negative", 0)) for t in parts)
    df = concat(parts)
    df["track"] = df["track"].cat.set_categories(_lane_order(df, r), ordered=True)
    df = with_depth(sort_rows(df))  # SQL rows come in storage order: sorted, the table is the same whatever it is
    procs = frames["processes"]
    meta = {"clock": "ns, rocprofiler-sdk timestamps (one clock per node)", "schema_version": version,
            "sessions": sorted({str(g) for f in frames.values() if f is not None and "guid" in f
                                for g in f["guid"].dropna()}),
            "processes": [] if procs is None else [{"pid": pid, "command": str(c or "")} for pid, c in
                                                    zip(_ints(_pick(procs, "pid")), _pick(procs, "command"))],
            "negative_durations": negative}
    return df, meta


def _thread_names(threads: pd.DataFrame | None) -> dict:
    if threads is None or "name" not in threads:
        return {}
    return {(g, t): _str(n) for g, t, n in zip(_pick(threads, "guid"), _pick(threads, "tid"), threads["name"])
            if n is not None and str(n).strip()}


def _natural(s: str) -> list:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in s.split()]


def _lane_order(df: pd.DataFrame, r: _Reader) -> list[str]:
    """Per process (in prefix order): its threads by first activity, then its GPU lanes by device."""
    first = df.groupby("track", observed=True)["start_ns"].min()
    prefix = {t: next((v for v in sorted(set(r.prefixes.values()), key=len, reverse=True) if v and t.startswith(v)), "")
              for t in first.index}
    return sorted(first.index, key=lambda t: (_natural(prefix[t]), t in r.gpu_lanes,
                                              _natural(t) if t in r.gpu_lanes else [(0, int(first[t]), "")]))


def _spans(n: int, start: pd.Series, end: pd.Series, **cols) -> pd.DataFrame:
    st = np.asarray(_ints(start), dtype=np.int64)
    en = np.asarray(_ints(end), dtype=np.int64)
    out = from_columns({**cols, "start_ns": st, "dur_ns": np.maximum(en - st, 0)}, n=n, source=FORMAT)
    out.attrs["negative"] = int((en < st).sum())
    return out


def _process(df: pd.DataFrame) -> list[str]:
    return [f"process {p}" for p in _pick(df, "pid")]


def _ext(df: pd.DataFrame) -> list:
    return _ints(_pick(df, "corr_id", "correlation_id"))


def _kernels(r: _Reader, k: pd.DataFrame | None) -> pd.DataFrame | None:
    if k is None or k.empty:
        return None
    dev = _ints(_pick(k, "agent_type_index", "agent_abs_index", "agent_absolute_index"))
    stream_ids = _ints(_pick(k, "stream_id"))
    use_streams = any(stream_ids)  # every kernel on the default stream (0): streams were not tracked
    names = _pick(k, "stream") if use_streams else _pick(k, "queue")
    lanes = r.gpu(r.lanes(pd.DataFrame({"g": _pick(k, "guid"), "p": _pick(k, "pid"), "d": dev, "q": names}),
                          lambda d, q: f"GPU {d} · {str(q).lower() if q is not None else 'queue'}"))
    extra = [c for c in ("dispatch_id", "kernel_id", "grid_x", "grid_y", "grid_z", "workgroup_x", "workgroup_y",
                         "workgroup_z", "lds_size", "scratch_size", "sgpr_count", "arch_vgpr_count", "region",
                         "queue_id", "stream_id", "guid") if c in k.columns]
    args = [{**dict(zip(extra, row)), "external_correlation": ext}
            for row, ext in zip(k[extra].itertuples(index=False, name=None), _ext(k))]
    return _spans(len(k), _pick(k, "start"), _pick(k, "end"), process=_process(k), track=lanes, device=dev,
                  stream=stream_ids if use_streams else _ints(_pick(k, "queue_id")),
                  name=[_str(n) for n in _pick(k, "name")], category=[KERNEL] * len(k),
                  correlation=_ints(_pick(k, "stack_id")), args=args)


def _copies(r: _Reader, m: pd.DataFrame | None) -> pd.DataFrame | None:
    if m is None or m.empty:
        return None
    # a copy is drawn on the GPU end of the transfer (the destination unless that is the host)
    dst_gpu = [str(t).upper() == "GPU" for t in _pick(m, "dst_agent_type")]
    dev = [d if g else s for d, s, g in zip(_ints(_pick(m, "dst_agent_type_index")),
                                           _ints(_pick(m, "src_agent_type_index")), dst_gpu)]
    lanes = r.gpu(r.lanes(pd.DataFrame({"g": _pick(m, "guid"), "p": _pick(m, "pid"), "d": dev,
                                        "s": _pick(m, "stream_name")}),
                          lambda d, s: f"GPU {d} · {str(s).lower() if s is not None else 'copies'}"))
    args = [{"size": sz, "src": sd, "dst": dd, "external_correlation": ext} for sz, sd, dd, ext in
            zip(_ints(_pick(m, "size")), _pick(m, "src_device"), _pick(m, "dst_device"), _ext(m))]
    return _spans(len(m), _pick(m, "start"), _pick(m, "end"), process=_process(m), track=lanes, device=dev,
                  stream=_ints(_pick(m, "stream_id")), name=[copy_name(_str(n)) for n in _pick(m, "name")],
                  category=["gpu_memcpy"] * len(m), correlation=_ints(_pick(m, "stack_id")), args=args)


def _allocations(r: _Reader, m: pd.DataFrame | None) -> pd.DataFrame | None:
    if m is None or m.empty:
        return None
    dev = _ints(_pick(m, "agent_type_index", "agent_abs_index", "agent_absolute_index"))
    lanes = r.gpu(r.lanes(pd.DataFrame({"g": _pick(m, "guid"), "p": _pick(m, "pid"), "d": dev}),
                          lambda d: f"GPU {d} · memory" if d is not None else "host memory"))
    names = [f"{t} {lvl}".strip() if t is not None else "allocation" for t, lvl in zip(_pick(m, "type"), _pick(m, "level"))]
    args = [{"size": sz, "address": a, "external_correlation": ext}
            for sz, a, ext in zip(_ints(_pick(m, "size")), _ints(_pick(m, "address")), _ext(m))]
    return _spans(len(m), _pick(m, "start"), _pick(m, "end"), process=_process(m), track=lanes, device=dev,
                  name=names, category=["memory_allocation"] * len(m), correlation=_ints(_pick(m, "stack_id")),
                  args=args)


def _category(raw: Any) -> str:
    c = str(raw or "").strip()
    base = c[:-4] if c.endswith("_EXT") else c
    return _DOMAIN_CATS.get(base, _DOMAIN_CATS.get(c, c.lower() or "api"))


def _host_rows(r: _Reader, g: pd.DataFrame, thread_names: dict) -> dict:
    """Columns shared by API regions and marks: thread lanes, names (roctx: the message)."""
    extdata = [_json(x) for x in _pick(g, "extdata")]
    guid, pid = _pick(g, "guid"), _pick(g, "pid")
    lanes = r.lanes(pd.DataFrame({"g": guid, "p": pid, "gg": guid, "t": _pick(g, "tid")}),
                    lambda gg, t: f"{thread_names[(gg, t)]} ({t})" if (gg, t) in thread_names else f"thread {t}")
    return {"process": _process(g), "track": lanes,
            "name": [_str(e.get("message") or n) for e, n in zip(extdata, _pick(g, "name"))],
            "category": [_category(c) for c in _pick(g, "category")], "correlation": _ints(_pick(g, "stack_id")),
            "args": [{"function": _str(n), "category": _str(c), "external_correlation": ext}
                     for n, c, ext in zip(_pick(g, "name"), _pick(g, "category"), _ext(g))]}


def _regions(r: _Reader, g: pd.DataFrame | None, thread_names: dict) -> pd.DataFrame | None:
    if g is None or g.empty:
        return None
    return _spans(len(g), _pick(g, "start"), _pick(g, "end"), **_host_rows(r, g, thread_names))


def _samples(r: _Reader, s: pd.DataFrame | None, thread_names: dict) -> pd.DataFrame | None:
    if s is None or s.empty:
        return None
    ts = _pick(s, "timestamp", "start")
    return _spans(len(s), ts, ts, kind=["instant"] * len(s), **_host_rows(r, s, thread_names))
