"""Write a small synthetic Android system trace: atrace markers in ftrace ``print`` events.

    .venv/bin/python tests/data/android_atrace/make_fixture.py [OUT_DIR]

Packets as a Perfetto capture on Android writes them (``perfetto -c - --txt`` with the
``linux.ftrace`` data source, ``atrace_categories: "view" "gfx"``, and ``linux.process_stats``),
built with the protobuf classes the ``perfetto`` wheel ships: a ``process_tree`` naming process
1000 (com.example.app: threads main 1000 and RenderThread 1010) and 1200 (surfaceflinger 1200);
``ftrace_events`` bundles per CPU with ``sched_switch`` events and ``print`` events whose text is
atrace's: ``B|1000|Choreographer#doFrame 1`` ... ``E|1000`` (nested: traversal, measure, draw),
``B|1000|DrawFrames 1`` on RenderThread, ``S|1000|launching: com.example.app|7`` ... ``F|...``
(async), ``C|1000|aq:pending|3`` (a counter: counted, not read), one ``E`` without a ``B``
(malformed), one ``B`` left open (unclosed); an ``android_log`` packet. Three frames, 16.6 ms
apart; the truth the tests check is in the docstring of tests/traces/test_perfetto_atrace.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

T0 = 5_000_000_000  # ns since boot
FRAME_NS = 16_600_000


def _frame(i: int) -> list[tuple[int, int, str]]:
    """(ts, tid, atrace text) of frame i: doFrame on main (traversal > measure, draw), DrawFrames on RenderThread."""
    t = T0 + i * FRAME_NS
    return [(t, 1000, f"B|1000|Choreographer#doFrame {i}"), (t + 100_000, 1000, "B|1000|traversal"),
            (t + 200_000, 1000, "B|1000|measure"), (t + 1_200_000, 1000, "E|1000"),
            (t + 1_300_000, 1000, "B|1000|draw"), (t + 3_300_000, 1000, "E|1000"), (t + 3_400_000, 1000, "E|1000"),
            (t + 3_500_000, 1000, "E|1000"),
            (t + 3_600_000, 1010, f"B|1000|DrawFrames {i}"), (t + 9_600_000, 1010, "E|1000")]


def packets() -> list[pb.TracePacket]:
    out = []
    tree = pb.TracePacket(timestamp=T0 - 1_000_000, trusted_packet_sequence_id=1)
    for pid, cmd in ((1000, "com.example.app"), (1200, "/system/bin/surfaceflinger")):
        tree.process_tree.processes.add(pid=pid, ppid=1, cmdline=[cmd])
    for tid, tgid, name in ((1000, 1000, "main"), (1010, 1000, "RenderThread"), (1200, 1200, "surfaceflinger")):
        tree.process_tree.threads.add(tid=tid, tgid=tgid, name=name)
    out.append(tree)
    marks = [m for i in range(3) for m in _frame(i)]
    marks += [(T0 - 500_000, 1000, "S|1000|launching: com.example.app|7"),
              (T0 + 2 * FRAME_NS + 9_700_000, 1000, "F|1000|launching: com.example.app|7"),
              (T0 + 50_000, 1000, "C|1000|aq:pending|3"),
              (T0 + 2 * FRAME_NS + 9_800_000, 1200, "E|1200"),  # no B before it
              (T0 + 2 * FRAME_NS + 9_900_000, 1200, "B|1200|onMessageReceived")]  # never closed
    marks.sort()
    bundle = pb.TracePacket(timestamp=marks[-1][0], trusted_packet_sequence_id=2)
    bundle.ftrace_events.cpu = 0
    for ts, tid, text in marks:
        ev = bundle.ftrace_events.event.add(timestamp=ts, pid=tid)
        getattr(ev, "print").buf = text + "\n"
    for ts, (prev, nxt, comm) in ((T0 - 10, (0, 1000, "main")), (T0 + 3_550_000, (1000, 1010, "RenderThread"))):
        ev = bundle.ftrace_events.event.add(timestamp=ts, pid=prev)
        ev.sched_switch.prev_pid, ev.sched_switch.next_pid, ev.sched_switch.next_comm = prev, nxt, comm
    out.append(bundle)
    log = pb.TracePacket(timestamp=T0, trusted_packet_sequence_id=3)
    log.android_log.events.add(timestamp=T0, pid=1000, tid=1000, tag="ActivityManager", message="Start proc")
    out.append(log)
    return out


def write(out: Path) -> Path:
    trace = pb.Trace()
    trace.packet.extend(packets())
    path = out / "android_atrace_synthetic.pftrace"
    path.write_bytes(trace.SerializeToString())
    return path


if __name__ == "__main__":
    print(write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent))
