"""Write nsys_small.sqlite from the documented nsys SQLite export schema (nsys is not on the
GPU machines here; see README.md). Kernels, a memcpy and a memset on two streams of GPU 0,
their runtime calls on one host thread (correlated), a stream synchronization, OS runtime
calls, NVTX push/pop ranges in a named domain and a mark. Times are ns.

    python tests/data/two_streams_gpu0/make_fixture.py
"""

import sqlite3
from pathlib import Path

out = Path(__file__).with_name("nsys_small.sqlite")
out.unlink(missing_ok=True)
con = sqlite3.connect(out)
gtid = (4242 << 24) | 4242  # globalTid: pid in bits 24..47, tid in the low 24 bits
con.executescript("""
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER,
  shortName INTEGER, mangledName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,
  blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER,
  copyKind INTEGER, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER);
CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT);
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, syncType INTEGER, eventId INTEGER);
CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER, returnValue INTEGER, nestingLevel INTEGER, callchainId INTEGER);
""")
strings = {1: "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16", 2: "gemm", 3: "cudaLaunchKernel",
           4: "cudaMemcpyAsync", 5: "python3", 6: "vectorized_elementwise_kernel", 7: "step", 8: "cudaMemsetAsync",
           9: "cudaStreamSynchronize", 10: "pthread_cond_wait", 11: "ioctl"}
con.executemany("INSERT INTO StringIds VALUES (?, ?)", strings.items())
con.execute("INSERT INTO ThreadNames VALUES (5, 0, ?)", (gtid,))
pid = 4242 << 24
con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", [
    (120_000, 450_000, 0, 1, 7, 11, pid, 1, 2, 0, 132, 1, 1, 256, 1, 1, 128),
    (460_000, 470_000, 0, 1, 7, 12, pid, 6, 6, 0, 1024, 1, 1, 128, 1, 1, 32),
    (1_120_000, 1_440_000, 0, 1, 7, 21, pid, 1, 2, 0, 132, 1, 1, 256, 1, 1, 128),
])
con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", [
    (100_000, 110_000, 0, gtid, 11, 3, 0, 0), (111_000, 114_000, 0, gtid, 12, 3, 0, 0),
    (115_000, 125_000, 0, gtid, 13, 4, 0, 0), (130_000, 134_000, 0, gtid, 14, 8, 0, 0),
    (1_100_000, 1_108_000, 0, gtid, 21, 3, 0, 0), (500_000, 560_000, 0, gtid, 15, 9, 0, 0)])
con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (501000, 559000, 0, 1, 7, 15, ?, 3, 0)", (pid,))
con.executemany("INSERT INTO OSRT_API VALUES (?,?,?,?,?,?,?,?,?)", [
    (505_000, 555_000, 27, gtid, 0, 10, 0, 0, 0), (600_000, 602_000, 27, gtid, 0, 11, 0, 0, 0)])
con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?,?,?)", [
    (33, "NvtxCategory", "NVTX Category"), (34, "NvtxMark", "NVTX Mark"), (39, "NvtxThread", "NVTX Thread"),
    (59, "NvtxPushPopRange", "NVTX PushPop Range"), (60, "NvtxStartEndRange", "NVTX StartEnd Range"),
    (75, "NvtxDomainCreate", "NVTX Domain Create"), (76, "NvtxDomainDestroy", "NVTX Domain Destroy")])
con.executemany("INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (?,?,?)", [
    (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
    (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
    (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait event"),
    (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
    (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync")])
con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (130000, 210000, 0, 1, 18, 13, ?, 4194304, 1, 0, 3)",
            (pid,))
con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (140000, 142000, 0, 1, 18, 14, ?, 0, 4096)", (pid,))
con.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
    (80_000, None, 75, None, None, None, "training", gtid, None, None, 1),
    (90_000, 500_000, 59, None, None, None, "step", gtid, gtid, None, 1),
    (1_090_000, 1_500_000, 59, None, None, None, None, gtid, gtid, 7, 1),
    (95_000, None, 34, None, None, None, "marker", gtid, None, None, 0)])
con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H200')")
con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", [
    ("EXPORT_SCHEMA_VERSION", "3.24.14"), ("EXPORT_PRODUCT_VERSION", "2026.1.1"),
    ("written_by", "tests/data/traces/nsys/make_fixture.py")])
con.commit()
con.close()
print(out)
