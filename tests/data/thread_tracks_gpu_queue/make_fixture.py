"""Write trackevent_small.pftrace with the perfetto wheel's protobuf classes: a process with
two thread tracks and a custom "GPU 0 queue" track, nested slices with interned names and
categories (incremental state on one sequence), an instant and a debug annotation.

    python tests/data/thread_tracks_gpu_queue/make_fixture.py
"""

from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

SEQ = 7
trace = pb.Trace()


def packet() -> pb.TracePacket:
    p = trace.packet.add()
    p.trusted_packet_sequence_id = SEQ
    return p


p = packet()
p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
for iid, name in ((1, "step"), (2, "launch"), (3, "gemm_kernel"), (4, "sync")):
    e = p.interned_data.event_names.add()
    e.iid, e.name = iid, name
for iid, name in ((1, "host"), (2, "kernel")):
    c = p.interned_data.event_categories.add()
    c.iid, c.name = iid, name
d = p.interned_data.debug_annotation_names.add()
d.iid, d.name = 1, "grid"

p = packet()
p.track_descriptor.uuid = 100
p.track_descriptor.process.pid = 4242
p.track_descriptor.process.process_name = "bench"
for uuid, tid, tname in ((101, 4242, "main"), (102, 4243, "worker")):
    p = packet()
    p.track_descriptor.uuid = uuid
    p.track_descriptor.parent_uuid = 100
    p.track_descriptor.thread.pid = 4242
    p.track_descriptor.thread.tid = tid
    p.track_descriptor.thread.thread_name = tname
p = packet()
p.track_descriptor.uuid = 200
p.track_descriptor.name = "GPU 0 queue"

events = [  # (ts ns, type, track, name iid, category iid)
    (1_000, 1, 101, 1, 1), (1_200, 1, 101, 2, 1), (1_500, 2, 101, 0, 0), (1_600, 3, 101, 4, 1),
    (1_400, 1, 200, 3, 2), (4_400, 2, 200, 0, 0), (2_000, 1, 102, 4, 1), (4_500, 2, 102, 0, 0),
    (4_600, 2, 101, 0, 0),
]
for ts, typ, track, name_iid, cat_iid in sorted(events):
    p = packet()
    p.timestamp = ts
    p.track_event.type = typ
    p.track_event.track_uuid = track
    if name_iid:
        p.track_event.name_iid = name_iid
        p.track_event.category_iids.append(cat_iid)
    if name_iid == 3:
        a = p.track_event.debug_annotations.add()
        a.name_iid, a.string_value = 1, "132x1x1"
        p.track_event.correlation_id = 11

out = Path(__file__).with_name("trackevent_small.pftrace")
out.write_bytes(trace.SerializeToString())
print(out)
