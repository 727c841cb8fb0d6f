"""Build the rocpd fixtures from rocprofiler-sdk's own schema files (see README.md).

    python make_fixture.py SCHEMA_DIR [OUT_DIR]

SCHEMA_DIR holds rocprofiler-sdk's ``share/rocprofiler-sdk-rocpd/*.sql`` (rocpd_tables.sql,
rocpd_indexes.sql, rocpd_views.sql, data_views.sql, summary_views.sql, marker_views.sql); they
are not copied into this repository. The rows follow what rocprofiler-sdk's writer
(``lib/output/generateRocpd.cpp``) inserts: process/thread ids are the OS pid/tid, agent ids
the absolute node index, queue/stream ids the runtime handles (0 = default), an API call's
region id and its event's ``stack_id`` are the internal correlation id, which the kernel's and
copy's events carry as ``stack_id`` too; roctx messages are in the event's extdata.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

SCRIPTS = ("rocpd_tables.sql", "rocpd_indexes.sql", "rocpd_views.sql", "data_views.sql", "summary_views.sql",
           "marker_views.sql")
BASE_TABLES = ("metadata", "string", "info_node", "info_process", "info_thread", "info_agent", "info_queue",
               "info_stream", "info_pmc", "info_code_object", "info_kernel_symbol", "track", "event", "arg",
               "pmc_event", "region", "sample", "kernel_dispatch", "memory_copy", "memory_allocate")
QUEUE, STREAM = 0x7F3A1C000000, 0x5581A0C3D2E0  # runtime handles, as the writer stores them


def render(sql: str, uuid: str, guid: str) -> str:
    return sql.replace("{{uuid}}", uuid).replace("{{guid}}", guid)


class Session:
    """One rocprofv3 session (one process) written into a connection's uuid-suffixed tables."""

    def __init__(self, con: sqlite3.Connection, uuid: str, guid: str, pid: int, gpu_abs: int, t0: int):
        self.con, self.u, self.guid, self.pid, self.gpu, self.t0 = con, uuid, guid, pid, gpu_abs, t0
        self.strings: dict[str, int] = {}
        self.event_id = 0

    def ins(self, table: str, **row) -> None:
        cols = ", ".join(f'"{c}"' for c in row)
        marks = ", ".join("?" for _ in row)
        self.con.execute(f'INSERT INTO "rocpd_{table}{self.u}" ({cols}, "guid") VALUES ({marks}, ?)',
                         (*row.values(), self.guid))

    def s(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
            self.ins("string", id=self.strings[text], string=text)
        return self.strings[text]

    def event(self, category: str, corr: int, extdata: dict | None = None) -> int:
        self.event_id += 1
        self.ins("event", id=self.event_id, category_id=self.s(category), stack_id=corr, parent_stack_id=0,
                 correlation_id=0, extdata=json.dumps(extdata or {}))
        return self.event_id

    def info(self, tids: list[int]) -> None:
        self.con.execute(f'INSERT INTO "rocpd_metadata{self.u}" (tag, value) VALUES (?, ?)',
                         ("rocprofiler-sdk", "1.0.0"))
        self.ins("info_node", id=1, hash=7213490021, machine_id="3f6c1d0e9a7b4c2d8e5f6a7b8c9d0e1f",
                 system_name="Linux", hostname="mi300x-07", release="6.8.0-60-generic",
                 version="#63-Ubuntu SMP", hardware_name="x86_64", domain_name="")
        self.ins("info_process", id=self.pid, nid=1, ppid=4000, pid=self.pid, init=self.t0 - 5_000_000,
                 fini=self.t0 + 9_000_000, start=self.t0 - 5_000_000, end=self.t0 + 9_000_000,
                 command=f"python train.py --rank {self.gpu - 2}", environment="{}", extdata="{}")
        for tid in tids:
            self.ins("info_thread", id=tid, nid=1, ppid=4000, pid=self.pid, tid=tid, name=None,
                     start=self.t0 - 4_000_000, end=self.t0 + 8_000_000, extdata="{}")
        for absolute, kind, type_index, name in ((0, "CPU", 0, "AMD EPYC 9654"), (1, "CPU", 1, "AMD EPYC 9654"),
                                                 (2, "GPU", 0, "gfx942"), (3, "GPU", 1, "gfx942")):
            self.ins("info_agent", id=absolute, nid=1, pid=self.pid, type=kind, absolute_index=absolute,
                     logical_index=absolute, type_index=type_index, uuid=absolute, name=name,
                     model_name="aqua_vanjaram" if kind == "GPU" else "", vendor_name="AMD",
                     product_name="AMD Instinct MI300X" if kind == "GPU" else name, extdata="{}")
        for qid, qname in ((0, "Default Queue"), (QUEUE, "Queue 0")):
            self.ins("info_queue", id=qid, nid=1, pid=self.pid, name=qname, extdata="{}")
        for sid, sname in ((0, "Default Stream"), (STREAM, "Stream 0")):
            self.ins("info_stream", id=sid, nid=1, pid=self.pid, name=sname, extdata="{}")
        self.ins("info_code_object", id=1, nid=1, pid=self.pid, agent_id=self.gpu, uri="file:///app/libtrain.so#offset=0",
                 load_base=0x7F0000000000, load_size=1 << 20, load_delta=0, storage_type="FILE", extdata="{}")
        for kid, name in ((1, "gemm_bf16_tn_128x128"), (2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")):
            self.ins("info_kernel_symbol", id=kid, nid=1, pid=self.pid, code_object_id=1, kernel_name=f"{name}.kd",
                     display_name=name, kernel_object=0x7F0000001000 + kid, kernarg_segment_size=64,
                     kernarg_segment_alignment=8, group_segment_size=16384, private_segment_size=0, sgpr_count=32,
                     arch_vgpr_count=128, accum_vgpr_count=0, extdata=json.dumps({"kernel_id": kid}))

    def api(self, corr: int, tid: int, name: str, start: int, end: int, category: str = "HIP_RUNTIME_API",
            message: str | None = None) -> None:
        evt = self.event(category, corr, {"message": message} if message else None)
        self.ins("region", id=corr, nid=1, pid=self.pid, tid=tid, start=self.t0 + start, end=self.t0 + end,
                 name_id=self.s(name), event_id=evt, extdata="{}")

    def mark(self, corr: int, tid: int, message: str, at: int) -> None:
        """roctxMarkA: an instant; the writer puts it in rocpd_sample on a track named by its category."""
        evt = self.event("MARKER_CORE_API", corr, {"message": message})
        self.ins("track", id=1, nid=1, pid=self.pid, tid=tid, name_id=self.s("MARKER_CORE_API"), extdata="{}")
        self.ins("sample", id=corr, track_id=1, timestamp=self.t0 + at, event_id=evt, extdata="{}")

    def kernel(self, corr: int, dispatch: int, tid: int, kernel_id: int, start: int, end: int) -> None:
        evt = self.event("KERNEL_DISPATCH", corr)
        self.ins("kernel_dispatch", id=dispatch, nid=1, pid=self.pid, tid=tid, agent_id=self.gpu,
                 kernel_id=kernel_id, dispatch_id=dispatch, queue_id=QUEUE, stream_id=STREAM,
                 start=self.t0 + start, end=self.t0 + end, private_segment_size=0, group_segment_size=16384,
                 workgroup_size_x=256, workgroup_size_y=1, workgroup_size_z=1, grid_size_x=65536, grid_size_y=1,
                 grid_size_z=1, region_name_id=self.s(""), event_id=evt, extdata="{}")

    def copy(self, corr: int, copy_id: int, tid: int, direction: str, start: int, end: int, size: int) -> None:
        evt = self.event("MEMORY_COPY", corr)
        src, dst = (0, self.gpu) if direction == "HOST_TO_DEVICE" else (self.gpu, 0)
        self.ins("memory_copy", id=copy_id, nid=1, pid=self.pid, tid=tid, start=self.t0 + start, end=self.t0 + end,
                 name_id=self.s(f"MEMORY_COPY_{direction}"), dst_agent_id=dst, dst_address=0x7F1200000000,
                 src_agent_id=src, src_address=0x55D0C0000000, size=size, queue_id=None, stream_id=STREAM,
                 region_name_id=None, event_id=evt, extdata="{}")

    def allocation(self, corr: int, tid: int, start: int, end: int, size: int) -> None:
        evt = self.event("MEMORY_ALLOCATION", corr)
        self.ins("memory_allocate", nid=1, pid=self.pid, tid=tid, agent_id=self.gpu, type="ALLOC", level="REAL",
                 start=self.t0 + start, end=self.t0 + end, queue_id=None, stream_id=None, event_id=evt,
                 address=0x7F1200000000, size=size, extdata="{}")

    def step(self) -> None:
        """One training step: allocation, copy in, a GEMM and an all-reduce on one stream, a
        roctx range around the step, a roctx mark, a copy out; a helper thread makes a stream."""
        main, helper = self.pid, self.pid + 7
        self.info([main, helper])
        self.api(1, main, "hipMalloc", 1_000, 51_000)
        self.allocation(1, main, 2_000, 49_000, 1 << 20)
        self.api(2, main, "hipMemcpyAsync", 60_000, 70_000)
        self.copy(2, 1, main, "HOST_TO_DEVICE", 72_000, 112_000, 1 << 20)
        self.api(3, helper, "hipStreamCreate", 80_000, 95_000)
        self.api(10, main, "roctxRangePushA", 115_000, 400_000, "MARKER_CORE_RANGE_API", message="step 0")
        self.api(4, main, "hipLaunchKernel", 120_000, 128_000)
        self.kernel(4, 1, main, 1, 130_000, 280_000)
        self.api(5, main, "hipLaunchKernel", 129_000, 134_000)
        self.kernel(5, 2, main, 2, 281_000, 341_000)
        self.api(6, main, "hipDeviceSynchronize", 135_000, 345_000)
        self.mark(11, main, "checkpoint", 350_000)
        self.api(7, main, "hipMemcpyAsync", 349_000, 350_200)
        self.copy(7, 2, main, "DEVICE_TO_HOST", 350_500, 352_000, 4096)


def create(path: Path, schema: Path, sessions: list[dict]) -> None:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    scripts = {name: (schema / name).read_text() for name in SCRIPTS}
    for s in sessions:  # each session's uuid-suffixed tables, as the writer creates them
        con.executescript(render(scripts["rocpd_tables.sql"], s["uuid"], s["guid"]))
        con.executescript(render(scripts["rocpd_indexes.sql"], s["uuid"], s["guid"]))
    if len(sessions) == 1:
        con.executescript(render(scripts["rocpd_views.sql"], sessions[0]["uuid"], sessions[0]["guid"]))
    else:  # one base view over every session's table, as rocpd's importer unions databases
        for base in BASE_TABLES:
            union = " UNION ALL ".join(f'SELECT * FROM "rocpd_{base}{s["uuid"]}"' for s in sessions)
            con.execute(f'CREATE VIEW "rocpd_{base}" AS {union}')
    for name in SCRIPTS[3:]:
        con.executescript(render(scripts[name], sessions[0]["uuid"], sessions[0]["guid"]))
    for s in sessions:
        Session(con, s["uuid"], s["guid"], s["pid"], s["gpu"], s["t0"]).step()
    con.commit()
    con.execute("VACUUM")
    con.close()


def main(schema: Path, out: Path) -> None:
    guid0, guid1, guid2 = ("0198e2a0-2f5c-7b31-9d0e-3c1a5b7d9e01", "0198e2a0-3a11-7c02-8f4d-6e2b1a9c0d12",
                           "0198e2a0-4b27-7d13-a05e-7f3c2b0d1e23")
    create(out / "rank0.db", schema, [dict(uuid=guid0.replace("-", "_"), guid=guid0, pid=4100, gpu=2,
                                           t0=2_512_345_000_000)])
    create(out / "rank1.db", schema, [
        dict(uuid=guid1.replace("-", "_"), guid=guid1, pid=4200, gpu=3, t0=2_512_345_004_000),
        dict(uuid=guid2.replace("-", "_"), guid=guid2, pid=4300, gpu=3, t0=2_512_346_000_000)])


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent)
