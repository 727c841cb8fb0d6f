"""The event stream of a run: one JSON object per line, one event per ``RunContext`` verb.

A process that works for a run (a torchrun rank today; the CLI for the app later) writes
events with :class:`Emitter`; the process that owns the run reads them with
:class:`EventTail` and hands each to :func:`apply`, which calls the ``RunContext`` verb it
names. Format, version 1 (``v``), one line per event, every line with ``event``, ``v``,
``t`` (Unix seconds) and ``rank`` (the writer's rank, 0 outside torchrun):

    {"v": 1, "event": "progress", "t": ..., "rank": 0, "fraction": 0.42, "message": "CostMM m=512"}
    {"v": 1, "event": "record",   ..., "variant": {VariantResult as JSON}}
    {"v": 1, "event": "attach",   ..., "name": "best.json.gz", "kind": "trace/chrome-json", "file": "a3.bin"}
    {"v": 1, "event": "note",     ..., "text": "ce: symmetric memory unavailable here"}
    {"v": 1, "event": "outputs",  ..., "data": {"by_comm": {"default": {"plan": {...}}}}}
    {"v": 1, "event": "error",    ..., "text": "ValueError: ...", "trace": "Traceback ..."}
    {"v": 1, "event": "done",     ...}

``fraction`` and ``message`` are the keys of the app's progress file, so a reader of that file
reads ``progress`` events unchanged. ``attach`` names a file the writer put in the event
file's folder (``file`` is a bare name, never a path: the reader joins it to its own folder
and refuses anything else). ``outputs`` are merged into the run's outputs, dicts key by key,
so several events can fill one nested entry. Each event is written with one ``write`` to a
file opened for appending, so the lines of several writers (the ranks' errors) never
interleave.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = 1
VERBS = ("progress", "record", "attach", "note", "outputs", "error", "done")


class EventError(ValueError):
    """A line of the event stream that is not a version-1 event."""


class Emitter:
    """Writes events to ``path``; with ``path=None`` every call does nothing (the ranks that
    do not report: one rank per run writes, see :mod:`workbench.launcher`)."""

    def __init__(self, path: str | os.PathLike | None, rank: int = 0):
        self.path = Path(path) if path else None
        self.rank = rank

    @property
    def active(self) -> bool:
        return self.path is not None

    def emit(self, event: str, **data: Any) -> None:
        if event not in VERBS:
            raise ValueError(f"unknown event {event!r}; known: {', '.join(VERBS)}")
        if self.path is None:
            return
        line = json.dumps({"v": VERSION, "event": event, "t": round(time.time(), 3), "rank": self.rank, **data},
                          default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def progress(self, fraction: float, message: str = "") -> None:
        self.emit("progress", fraction=float(fraction), message=message)

    def record(self, variant) -> None:
        """A finished variant: a ``VariantResult`` or its JSON dict."""
        self.emit("record", variant=variant if isinstance(variant, dict) else variant.to_json())

    def attach(self, name: str, kind: str, data: bytes) -> None:
        if self.path is None:
            return
        file = f"attach-{uuid.uuid4().hex}.bin"
        (self.path.parent / file).write_bytes(data)
        self.emit("attach", name=name, kind=kind, file=file)

    def note(self, text: str) -> None:
        self.emit("note", text=text)

    def outputs(self, **data: Any) -> None:
        self.emit("outputs", data=data)

    def error(self, text: str, trace: str = "") -> None:
        self.emit("error", text=text, trace=trace)

    def done(self) -> None:
        self.emit("done")

    def steps(self, total: int, start: float = 0.05, end: float = 0.95) -> "Steps":
        """A progress ticker over ``total`` steps, mapped onto ``start..end``."""
        return Steps(self, total, start, end)


class Steps:
    """Counts finished steps and reports each as progress."""

    def __init__(self, emitter: Emitter, total: int, start: float, end: float):
        self.emitter, self.total, self.start, self.end = emitter, max(1, total), start, end
        self.done = 0

    def tick(self, message: str) -> None:
        self.done += 1
        self.emitter.progress(self.start + (self.end - self.start) * min(1.0, self.done / self.total), message)


class EventTail:
    """Reads the complete lines appended to an event file since the last call."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.offset = 0
        self.partial = b""

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        return [parse(line) for line in lines if line.strip()]


def parse(line: bytes | str) -> dict:
    """One line -> one event, or :class:`EventError` naming what is wrong."""
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise EventError(f"not JSON ({exc}): {str(line)[:120]}") from None
    if not isinstance(doc, dict) or doc.get("v") != VERSION or doc.get("event") not in VERBS:
        raise EventError(f"not a version-{VERSION} event: {str(line)[:120]}")
    return doc


@dataclass
class Collected:
    """What the events of a run gave besides the ``RunContext`` calls: merged outputs, notes,
    errors (text per rank), the last progress, and whether the writer said it was done."""

    outputs: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    progress: tuple[float, str] = (0.0, "")
    done: bool = False


def merge(into: dict, data: dict) -> dict:
    """``data`` merged into ``into`` in place: nested dicts key by key, anything else replaced."""
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def apply(event: dict, ctx, collected: Collected, folder: str | os.PathLike) -> None:
    """Hand one event to the ``RunContext`` verb it names (``progress`` may raise
    ``Cancelled``); ``folder`` holds the files that ``attach`` events name."""
    from .study import VariantResult

    kind = event["event"]
    if kind == "progress":
        collected.progress = (float(event["fraction"]), str(event["message"]))
        ctx.progress(*collected.progress)
    elif kind == "record":
        ctx.record(VariantResult(**event["variant"]))
    elif kind == "attach":
        file = str(event["file"])
        if Path(file).name != file or file in ("", ".", ".."):
            raise EventError(f"attachment file {file!r} is not a bare file name")
        ctx.attach(str(event["name"]), str(event["kind"]), (Path(folder) / file).read_bytes())
    elif kind == "note":
        collected.notes.append(str(event["text"]))
    elif kind == "outputs":
        merge(collected.outputs, event["data"])
    elif kind == "error":
        collected.errors.append(f"rank {event.get('rank', '?')}: {event['text']}")
    elif kind == "done":
        collected.done = True
