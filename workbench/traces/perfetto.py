"""Perfetto protobuf traces (``.pftrace``): TrackEvent slices, and the atrace slices of Android
system traces, read without trace_processor.

The ``perfetto`` wheel's TraceProcessor downloads a native binary on first use (fails
offline), but the wheel also ships the generated protobuf classes, which are enough here.
A trace is a sequence of ``TracePacket`` records, each framed as field 1 (tag ``0x0A``) +
varint length; packets are decoded one at a time so a cut file fails at the cut with a
clear message instead of a protobuf error.

Read: ``track_descriptor`` (lane names: name / static_name / thread / process, order of
appearance, ``sibling_order_rank`` first), ``track_event`` SLICE_BEGIN/END paired per track
uuid, INSTANT as instants, interned ``event_names`` / ``event_categories`` /
``debug_annotation_names`` per ``trusted_packet_sequence_id`` (cleared on
SEQ_INCREMENTAL_STATE_CLEARED), ``trace_packet_defaults`` for the default track.

Android system traces (and Linux ones with userspace markers) carry their slices as atrace
text in ftrace ``print`` events, read as Perfetto's TraceProcessor reads them (its systrace
line parser): ``B|<pid>|<name>`` opens a slice on the writing thread (the ftrace event's pid is
the thread id) and ``E|<pid>`` closes that thread's innermost one; ``S|<pid>|<name>|<cookie>``
and ``F|<pid>|<name>|<cookie>`` are an async slice of the process, paired by name and cookie,
on a lane of its own ("<name> (async)"); ``I|<pid>|<name>`` is an instant. Counters
(``C|...``) and track-scoped events (``G``/``H``/``N``/``T``/``U``) are counted, not read.
Thread and process names come from ``process_tree`` packets, else from ``sched_switch``'s
``next_comm``; lanes are the threads ("RenderThread 1010"), grouped by process.

Other data sources are skipped. Timestamps are TracePacket (or ftrace event) ns on the trace's
clock, BOOTTIME unless the producer set another.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import Format, TraceError
from .model import from_columns

FORMAT = "perfetto-pftrace"
INFO = Format(
    FORMAT, "Perfetto protobuf", (".pftrace", ".perfetto-trace"),
    "TrackEvent packets (any Perfetto SDK); Android/Linux system traces' atrace markers (ftrace print)",
    "track_event slices (begin/end per track) and instants with interned names, categories and debug "
    "annotations; track descriptors name and order lanes; atrace B/E slices per thread, S/F async slices, "
    "I instants (thread and process names from process_tree)")
_SEQ_CLEARED = 1  # TracePacket.SEQ_INCREMENTAL_STATE_CLEARED


def _varint(b: bytes, o: int) -> tuple[int, int]:
    v, shift = 0, 0
    while True:
        if o >= len(b) or shift > 63:
            raise IndexError("varint past end")
        c = b[o]
        o += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, o
        shift += 7


def _text(v: Any) -> Any:
    """protobuf returns ``bytes`` for a string field that is not valid UTF-8: names are always str."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _pb():
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # start-up: protobuf, only for .pftrace

    return perfetto_trace_pb2


def detect(head: bytes, name: str) -> bool:
    """Starts with a framed TracePacket that decodes (or is cut only by the head's end)."""
    if not head or head[0] != 0x0A or head.lstrip()[:1] in (b"{", b"["):
        return False  # a JSON document starting with a newline is not a packet of 0x7B bytes
    try:
        n, o = _varint(head, 1)
    except IndexError:
        return False
    if n == 0 or n > 64 << 20:
        return False
    named = name.endswith((".pftrace", ".perfetto-trace", ".perfetto", ".pb"))
    if o + n > len(head):  # first packet longer than the head: trust the name
        return named
    try:
        pkt = _pb().TracePacket()
        pkt.ParseFromString(head[o: o + n])
    except Exception:
        return named  # framed like a trace and named like one: let load() say what is wrong
    return len(pkt.ListFields()) > 0


def packets(data: bytes, name: str = ""):
    """Yield TracePacket messages; TraceError on a cut or undecodable packet."""
    pb = _pb()
    o, n, i = 0, len(data), 0
    while o < n:
        tag = data[o]
        try:
            length, start = _varint(data, o + 1)
        except IndexError:
            raise TraceError(FORMAT, f"{name}: truncated (packet {i} header at byte {o})") from None
        if tag != 0x0A:
            # unknown top-level fields are legal protobuf; skip length-delimited ones, stop otherwise
            if tag & 7 != 2:
                raise TraceError(FORMAT, f"{name}: corrupted (unexpected field tag {tag:#x} at byte {o})")
            o = start + length
            continue
        if start + length > n:
            raise TraceError(FORMAT, f"{name}: truncated (packet {i} needs {length} bytes, {n - start} left)")
        pkt = pb.TracePacket()
        try:
            pkt.ParseFromString(data[start: start + length])
        except Exception as exc:
            raise TraceError(FORMAT, f"{name}: corrupted packet {i} at byte {o} ({exc})") from None
        yield pkt
        o = start + length
        i += 1


#: TracePacket fields only an Android device writes
_ANDROID = ("android_log", "packages_list", "android_system_property", "android_energy_estimation_breakdown",
            "android_game_intervention_list", "surfaceflinger_layers_snapshot", "battery", "power_rails")


def describe(sources: dict[str, int], n_packets: int) -> str:
    """What a trace without TrackEvent slices holds, in words (for the refusal)."""
    held = ", ".join(f"{k} ({v:,})" for k, v in sorted(sources.items(), key=lambda kv: -kv[1])[:6])
    if any(k in sources for k in _ANDROID):
        kind = "an Android system trace"
    elif "ftrace_events" in sources:
        kind = "a Linux system trace (ftrace)"
    else:
        kind = "a Perfetto trace"
    return (f"{kind} without TrackEvent or atrace slices ({n_packets:,} packets" + (f": {held}" if held else "") +
            "); this reader takes TrackEvent slices and atrace markers (ftrace print): open it in ui.perfetto.dev")


def _annotation_value(a) -> Any:
    for f in ("string_value", "int_value", "uint_value", "double_value", "bool_value", "pointer_value",
              "legacy_json_value"):
        if a.HasField(f):
            return getattr(a, f)
    return None


class _Atrace:
    """atrace slices from ftrace ``print`` events (see the module docstring): rows in the same
    column lists as the TrackEvent slices, keyed by a lane key instead of a track uuid."""

    def __init__(self, cols: dict[str, list]):
        self.cols = cols
        self.open: dict[int, list[int]] = {}          # tid -> stack of row indices
        self.open_async: dict[tuple, int] = {}        # (pid, name, cookie) -> row index
        self.tgid: dict[int, int] = {}                # tid -> pid, from the markers and process_tree
        self.thread_names: dict[int, str] = {}
        self.proc_names: dict[int, str] = {}
        self.comm: dict[int, str] = {}                # from sched_switch, where process_tree lacks one
        self.unmatched = self.skipped = self.overflows = 0

    def process_tree(self, tree) -> None:
        for pr in tree.processes:
            if pr.cmdline:
                self.proc_names[pr.pid] = _text(pr.cmdline[0]).split("\0")[0]
        for th in tree.threads:
            self.tgid[th.tid] = th.tgid
            if th.name:
                self.thread_names[th.tid] = _text(th.name)

    def bundle(self, bundle) -> None:
        for ev in bundle.event:
            if ev.timestamp >= 2**63:  # uint64 in the protocol; beyond int64 ns it cannot be placed
                self.overflows += 1
            elif ev.HasField("print"):
                self.marker(int(ev.timestamp), int(ev.pid), _text(getattr(ev, "print").buf))
            elif ev.HasField("sched_switch") and ev.sched_switch.next_pid:
                self.comm.setdefault(ev.sched_switch.next_pid, _text(ev.sched_switch.next_comm))

    def marker(self, ts: int, tid: int, buf: str) -> None:
        parts = buf.rstrip("\n").split("|", 2)
        kind = parts[0].strip()
        pid = int(parts[1]) if len(parts) > 1 and parts[1].strip().isdigit() else None
        if pid is not None:
            self.tgid.setdefault(tid, pid)
        if kind == "E":
            stack = self.open.get(tid)
            if not stack:
                self.unmatched += 1
                return
            i = stack.pop()
            self.cols["dur"][i] = max(ts - self.cols["start"][i], 0)
            return
        if kind in ("B", "I") and len(parts) == 3:
            stack = self.open.setdefault(tid, [])
            self._row(("thread", tid), parts[2], ts, len(stack) if kind == "B" else 0, kind == "B")
            if kind == "B":
                stack.append(len(self.cols["start"]) - 1)
            return
        if kind in ("S", "F") and len(parts) == 3 and pid is not None:
            name, _, cookie = parts[2].rpartition("|")
            key = (pid, name or cookie, cookie if name else "")
            if kind == "S":
                self._row(("async", pid, key[1]), key[1], ts, 0, True)
                self.open_async[key] = len(self.cols["start"]) - 1
            elif key in self.open_async:
                i = self.open_async.pop(key)
                self.cols["dur"][i] = max(ts - self.cols["start"][i], 0)
            else:
                self.unmatched += 1
            return
        self.skipped += 1  # counters, track-scoped and malformed markers

    def _row(self, lane: tuple, name: str, ts: int, depth: int, span: bool) -> None:
        c = self.cols
        c["uuid"].append(lane)
        c["name"].append(name.strip() or "(unnamed)")
        c["cat"].append("atrace")
        c["start"].append(ts)
        c["dur"].append(0)
        c["depth"].append(depth)
        c["corr"].append(None)
        c["args"].append(None)
        c["kind"].append("span" if span else "instant")

    def unclosed(self) -> int:
        return sum(len(s) for s in self.open.values()) + len(self.open_async)

    def process(self, pid: int | None) -> str:
        if pid is None:
            return "process ?"
        name = self.proc_names.get(pid) or self.thread_names.get(pid) or self.comm.get(pid)
        return f"{name} {pid}" if name else f"process {pid}"

    def lane(self, key: tuple) -> tuple[str, str, tuple]:
        """(lane label, process label, sort key) of a lane key."""
        if key[0] == "async":
            return f"{self.process(key[1])} · {key[2]} (async)", self.process(key[1]), (key[1], 1, key[2])
        tid = key[1]
        pid = self.tgid.get(tid, tid)
        name = self.thread_names.get(tid) or self.comm.get(tid) or "thread"
        return f"{name} {tid}", self.process(pid), (pid, 0, tid)


def _lanes(uuids: list[int], track_names: dict[int, str], track_rank: dict[int, int]
           ) -> tuple[list[int], dict[int, str]]:
    """Track uuids with events in lane order (sibling_order_rank, then first appearance) and
    a unique label per uuid."""
    used = list(dict.fromkeys(uuids))
    first = {u: i for i, u in enumerate(dict.fromkeys(list(track_names) + used))}
    order = sorted(used, key=lambda u: (track_rank.get(u, 0), first[u]))
    label = {u: track_names.get(u, f"track {u}") for u in order}
    seen: dict[str, int] = {}
    for u in order:  # lane names must be unique
        seen[label[u]] = seen.get(label[u], 0) + 1
        if seen[label[u]] > 1:
            label[u] = f"{label[u]} ({u})"
    return order, label


class _Tracks:
    """The TrackEvent tracks a trace declares: each uuid's name, sibling rank and process."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.rank: dict[int, int] = {}
        self.proc: dict[int, str] = {}
        self.proc_names: dict[int, str] = {}

    def add(self, td) -> None:
        """A TrackDescriptor: a thread's or a process's track, or a child of another track."""
        label = _text(td.name) or _text(td.static_name)
        if td.HasField("thread"):
            label = label or _text(td.thread.thread_name) or f"thread {td.thread.tid}"
            self.proc[td.uuid] = self.proc_names.get(td.thread.pid, f"process {td.thread.pid}")
        elif td.HasField("process"):
            self.proc_names[td.process.pid] = _text(td.process.process_name) or f"process {td.process.pid}"
            label = label or self.proc_names[td.process.pid]
            self.proc[td.uuid] = self.proc_names[td.process.pid]
        self.names.setdefault(td.uuid, label or f"track {td.uuid}")
        self.rank.setdefault(td.uuid, td.sibling_order_rank if td.HasField("sibling_order_rank") else 0)
        if td.HasField("parent_uuid") and td.uuid not in self.proc:
            self.proc[td.uuid] = self.proc.get(td.parent_uuid) or self.names.get(td.parent_uuid, "")

    def lanes(self, cols: dict[str, list], atrace: _Atrace) -> tuple[list, dict, dict]:
        """(lane keys in order, lane label, lane process) of the columns' lanes: the TrackEvent
        tracks, then atrace's lanes by process then thread."""
        keys = [u for u in cols["uuid"] if not isinstance(u, tuple)]
        order, label = _lanes(keys, self.names, self.rank)
        procs = {u: self.proc.get(u) or "trace" for u in order}
        marked = sorted({u for u in cols["uuid"] if isinstance(u, tuple)}, key=lambda k: atrace.lane(k)[2])
        for k in marked:
            label[k], procs[k], _ = atrace.lane(k)
        return order + marked, label, procs


def _intern(tables: dict[str, dict[int, str]], idata) -> None:
    """A packet's interned names (events, categories, annotations) into its sequence's tables."""
    for field in ("event_names", "event_categories", "debug_annotation_names"):
        t = tables.setdefault(field, {})
        for e in getattr(idata, field):
            t[e.iid] = _text(e.name)


def _event(cols: dict[str, list], open_slices: dict[int, list[int]], ev, tables: dict, uuid: int, ts: int) -> int:
    """One TrackEvent into the columns: a slice's begin or an instant appended, a slice's end
    closing its track's innermost open slice. 1 where that end comes before its begin, else 0."""
    if ev.type == 2:  # SLICE_END
        stack = open_slices.get(uuid)
        if not stack:
            return 0
        i = stack.pop()
        cols["dur"][i] = max(ts - cols["start"][i], 0)
        return int(ts < cols["start"][i])
    if ev.type not in (1, 3):
        return 0
    name = _text(ev.name) if ev.HasField("name") else tables.get("event_names", {}).get(ev.name_iid, "")
    cats = [_text(c) for c in ev.categories] or [tables.get("event_categories", {}).get(c, "")
                                                  for c in ev.category_iids]
    args = {}
    for a in ev.debug_annotations:
        key = _text(a.name) if a.HasField("name") else tables.get("debug_annotation_names", {}).get(a.name_iid, "?")
        args[key] = _text(_annotation_value(a))
    stack = open_slices.setdefault(uuid, [])
    cols["uuid"].append(uuid)
    cols["name"].append(name or "(unnamed)")
    cols["cat"].append(",".join(c for c in cats if c) or "slice")
    cols["start"].append(ts)
    cols["dur"].append(0)
    cols["depth"].append(len(stack))
    cols["corr"].append(ev.correlation_id if ev.HasField("correlation_id") else None)
    cols["args"].append(args or None)
    cols["kind"].append("span" if ev.type == 1 else "instant")
    if ev.type == 1:
        stack.append(len(cols["start"]) - 1)
    return 0


def load(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read TrackEvent slices and instants from a .pftrace file."""
    p = Path(path)
    data = p.read_bytes()
    tracks = _Tracks()
    interned: dict[int, dict[str, dict[int, str]]] = {}
    default_track: dict[int, int] = {}
    open_slices: dict[int, list[int]] = {}
    cols: dict[str, list] = {k: [] for k in ("uuid", "name", "cat", "start", "dur", "depth", "corr", "args", "kind")}
    atrace = _Atrace(cols)
    n_packets = overflows = negative = 0
    sources: dict[str, int] = {}  # TracePacket fields seen: what the trace holds, for a refusal
    for pkt in packets(data, p.name):
        n_packets += 1
        if len(sources) < 64:
            for fd, _ in pkt.ListFields():
                if fd.containing_oneof is not None and fd.containing_oneof.name == "data":
                    sources[fd.name] = sources.get(fd.name, 0) + 1
        seq = pkt.trusted_packet_sequence_id
        if pkt.sequence_flags & _SEQ_CLEARED:
            interned[seq] = {}
        if pkt.HasField("trace_packet_defaults") and pkt.trace_packet_defaults.HasField("track_event_defaults"):
            default_track[seq] = pkt.trace_packet_defaults.track_event_defaults.track_uuid
        if pkt.HasField("interned_data"):
            _intern(interned.setdefault(seq, {}), pkt.interned_data)
        if pkt.HasField("track_descriptor"):
            tracks.add(pkt.track_descriptor)
        if pkt.HasField("process_tree"):
            atrace.process_tree(pkt.process_tree)
        if pkt.HasField("ftrace_events"):
            atrace.bundle(pkt.ftrace_events)
            continue
        if not pkt.HasField("track_event"):
            continue
        ev = pkt.track_event
        ts = int(pkt.timestamp)
        if ts >= 2**63:  # uint64 in the protocol; beyond int64 ns it cannot be placed
            overflows += 1
            continue
        uuid = ev.track_uuid if ev.HasField("track_uuid") else default_track.get(seq, 0)
        negative += _event(cols, open_slices, ev, interned.get(seq, {}), uuid, ts)
    if n_packets == 0:
        raise TraceError(FORMAT, f"{p.name}: no packets")
    n = len(cols["start"])
    if n == 0:
        raise TraceError(FORMAT, f"{p.name}: {describe(sources, n_packets)}")
    unclosed = sum(len(s) for s in open_slices.values()) + atrace.unclosed()
    order, label, procs = tracks.lanes(cols, atrace)
    df = from_columns({"process": [procs[u] for u in cols["uuid"]],
                       "track": [label[u] for u in cols["uuid"]], "name": cols["name"], "category": cols["cat"],
                       "start_ns": np.array(cols["start"], dtype=np.int64),
                       "dur_ns": np.array(cols["dur"], dtype=np.int64),
                       "depth": np.array(cols["depth"], dtype=np.int32), "correlation": cols["corr"],
                       "args": cols["args"], "kind": cols["kind"]}, n=n, source=FORMAT,
                      track_order=[label[u] for u in order])
    return df, {"clock": "TracePacket timestamp ns (BOOTTIME unless set otherwise)", "packets": n_packets,
                "unclosed_slices": unclosed, "unclosed_spans": unclosed,
                "timestamp_overflows": overflows + atrace.overflows,
                "negative_durations": negative, "malformed_events": atrace.unmatched,
                "atrace_markers_skipped": atrace.skipped}
