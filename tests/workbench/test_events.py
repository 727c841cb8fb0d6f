"""The run event stream: what a worker writes arrives as RunContext calls, in pieces too."""

from __future__ import annotations

import json
import threading

import pytest

from workbench.seam.events import Collected, Emitter, EventError, EventTail, apply, merge, parse
from workbench.data.record import VariantResult
from workbench.seam.study import Cancelled, RunContext


def _replay(path, ctx=None) -> tuple[RunContext, Collected]:
    ctx = ctx or RunContext()
    got = Collected()
    for event in EventTail(path).poll():
        apply(event, ctx, got, path.parent)
    return ctx, got


def test_every_verb_arrives_as_the_run_context_call(tmp_path):
    path = tmp_path / "events.jsonl"
    em = Emitter(path, rank=3)
    em.progress(0.25, "checking")
    em.record(VariantResult("a/m8", {"m": 8}, [1.0, 2.0], True, "ok", {"rank_median_ns": [1.5, 2.0]}))
    em.attach("trace.json.gz", "trace/chrome-json", b"\x1f\x8b raw bytes")
    em.note("ce unavailable")
    em.outputs(by_comm={"default": {"plan": {"ok": True}}})
    em.outputs(by_comm={"default": {"best": [512]}, "ce": {"plan": {}}})
    em.done()
    seen = []
    ctx, got = _replay(path, RunContext(progress=lambda f, m: seen.append((f, m))))
    assert seen == [(0.25, "checking")] and got.progress == (0.25, "checking")
    v = ctx.variants[0]
    assert (v.variant, v.samples_ns, v.correct, v.extra["rank_median_ns"]) == ("a/m8", [1.0, 2.0], True, [1.5, 2.0])
    assert ctx.attachments == [("trace.json.gz", "trace/chrome-json", b"\x1f\x8b raw bytes")]
    assert got.notes == ["ce unavailable"] and got.done
    assert got.outputs == {"by_comm": {"default": {"plan": {"ok": True}, "best": [512]}, "ce": {"plan": {}}}}
    first = json.loads(path.read_text().splitlines()[0])
    # the app's progress file reads "fraction" and "message": a progress event has both
    assert first["v"] == 1 and first["rank"] == 3 and first["fraction"] == 0.25 and first["message"] == "checking"


def test_an_inactive_emitter_writes_nothing(tmp_path):
    em = Emitter(None)
    em.progress(0.5, "x")
    em.attach("a", "b", b"c")
    em.done()
    assert not em.active and list(tmp_path.iterdir()) == []


def test_a_line_still_being_written_waits_for_its_end(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = EventTail(path)
    assert tail.poll() == []  # no file yet
    line = json.dumps({"v": 1, "event": "note", "t": 0, "rank": 0, "text": "hello"})
    path.write_text(line[:10])
    assert tail.poll() == []
    with open(path, "a") as fh:
        fh.write(line[10:] + "\n" + line[:5])
    assert [e["text"] for e in tail.poll()] == ["hello"]
    with open(path, "a") as fh:
        fh.write(line[5:] + "\n")
    assert [e["text"] for e in tail.poll()] == ["hello"]


@pytest.mark.parametrize("line", ['{"v": 2, "event": "note"}', '{"v": 1, "event": "rm"}', "[1]", "not json"])
def test_lines_that_are_not_events_are_refused(line):
    with pytest.raises(EventError):
        parse(line)


@pytest.mark.parametrize("file", ["../x.bin", "/etc/passwd", "a/b", "..", ""])
def test_an_attachment_must_be_a_bare_file_in_the_run_folder(tmp_path, file):
    event = {"v": 1, "event": "attach", "name": "x", "kind": "trace/x", "file": file}
    with pytest.raises(EventError, match="bare file name"):
        apply(event, RunContext(), Collected(), tmp_path)


def test_a_cancelled_run_stops_at_the_next_progress_event(tmp_path):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        apply(parse(json.dumps({"v": 1, "event": "progress", "fraction": 0.1, "message": "m"})),
              RunContext(cancel=cancel), Collected(), tmp_path)


def test_merge_replaces_leaves_and_merges_dicts():
    assert merge({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2]}, "d": {"e": 2}}) == \
        {"a": {"b": 1, "c": [2]}, "d": {"e": 2}}


def test_steps_map_onto_the_progress_range(tmp_path):
    path = tmp_path / "events.jsonl"
    steps = Emitter(path).steps(4, start=0.1, end=0.9)
    for i in range(5):  # one tick too many stays at the end
        steps.tick(f"step {i}")
    fractions = [e["fraction"] for e in EventTail(path).poll()]
    assert fractions == pytest.approx([0.3, 0.5, 0.7, 0.9, 0.9])
