"""The event stream of a run: one JSON object per line, one event per ``RunContext`` verb.

A process that works for a run (a torchrun rank; the CLI run by the app, ``--progress-file``)
writes events with :class:`Emitter`; the process that owns the run reads them with
:class:`EventTail` and hands each to :func:`apply`, which calls the ``RunContext`` verb it
names (the app's :mod:`workbench.running.jobs` reads them into a :class:`Collected` only). Format,
version 1 (``v``), one line per event, every line with ``event``, ``v``, ``t`` (Unix seconds)
and ``rank`` (the writer's rank, 0 outside torchrun):

    {"v": 1, "event": "start",    ..., "run_id": "20261201-...-calibration-a1b2c3", "study": "calibration"}
    {"v": 1, "event": "progress", "t": ..., "rank": 0, "fraction": 0.42, "message": "CostMM m=512",
     "step": 3, "steps": 12, "unit": "points"}
    {"v": 1, "event": "record",   ..., "variant": {VariantResult as JSON}}
    {"v": 1, "event": "attach",   ..., "name": "best.json.gz", "kind": "trace/chrome-json", "file": "a3.bin"}
    {"v": 1, "event": "note",     ..., "text": "ce: symmetric memory unavailable here"}
    {"v": 1, "event": "outputs",  ..., "data": {"by_provider": {"default": {"plan": {...}}}}}
    {"v": 1, "event": "error",    ..., "text": "ValueError: ...", "trace": "Traceback ..."}
    {"v": 1, "event": "done",     ...}

``step``, ``steps`` and ``unit`` are present when the run counts its steps
(:meth:`workbench.seam.study.RunContext.steps`). ``start`` names the stored run (the CLI writes it
once the run holds the machine; a queued run's progress events come before it). ``attach`` names a file the writer put in the event
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

from ..data.record import VariantResult
from .study import Steps

VERSION = 1
VERBS = ("start", "progress", "record", "attach", "note", "outputs", "error", "done")


class EventError(ValueError):
    """A line of the event stream that is not a version-1 event."""


class Emitter:
    """Writes events to ``path``; with ``path=None`` every call does nothing (the ranks that
    do not report: one rank per run writes, see :mod:`workbench.running.launcher`)."""

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

    def progress(self, fraction: float, message: str = "", step: tuple[int, int, str] | None = None) -> None:
        """``step``: (steps done, total, unit) when the run counts its steps."""
        extra = {"step": step[0], "steps": step[1], "unit": step[2]} if step else {}
        self.emit("progress", fraction=float(fraction), message=message, **extra)

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

    def steps(self, total: int, start: float = 0.05, end: float = 0.95, unit: str = "points") -> "Steps":
        """A progress ticker over ``total`` steps, mapped onto ``start..end`` (a worker's
        counterpart of :meth:`workbench.seam.study.RunContext.steps`)."""
        return Steps(self.progress, total, start, end, unit)


class EventTail:
    """Reads the complete lines appended to an event file since the last call."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.offset = 0
        self.partial = b""

    def poll(self) -> list[dict]:
        """The new events; :class:`EventError` for a line that is not one."""
        return [parse(line) for line in self.poll_lines()]

    def poll_lines(self) -> list[bytes]:
        """The new complete lines, unparsed (a reader that skips bad lines parses each)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        return [line for line in lines if line.strip()]


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
    #: (steps done, total, unit) of the last progress event that counted steps
    step: tuple[int, int, str] | None = None
    run_id: str = ""
    #: variants recorded so far by name, in arrival order (a repeat replaces its variant)
    variants: dict = field(default_factory=dict)


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
    ``Cancelled``), or only collect it when ``ctx`` is None; ``folder`` holds the files that
    ``attach`` events name."""
    kind = event["event"]
    if kind == "start":
        collected.run_id = str(event["run_id"])
    elif kind == "progress":
        collected.progress = (float(event["fraction"]), str(event["message"]))
        if "steps" in event:
            collected.step = (int(event["step"]), int(event["steps"]), str(event.get("unit", "steps")))
        if ctx is not None:
            ctx.step = collected.step
            ctx.progress(*collected.progress)
    elif kind == "record":
        variant = VariantResult(**event["variant"])
        collected.variants[variant.variant] = variant
        if ctx is not None:
            ctx.record(variant)
    elif kind == "attach":
        file = str(event["file"])
        if Path(file).name != file or file in ("", ".", ".."):
            raise EventError(f"attachment file {file!r} is not a bare file name")
        if ctx is not None:
            ctx.attach(str(event["name"]), str(event["kind"]), (Path(folder) / file).read_bytes())
    elif kind == "note":
        collected.notes.append(str(event["text"]))
    elif kind == "outputs":
        merge(collected.outputs, event["data"])
    elif kind == "error":
        collected.errors.append(f"rank {event.get('rank', '?')}: {event['text']}")
    elif kind == "done":
        collected.done = True
