"""Write nsys_schema2_synthetic.sqlite: an Nsight Systems export in the layout of export schema
2.x (2.9.1, Nsight Systems 2022.2), with synthetic rows (no nsys here; see README.md).

One process (pid 7311) on GPU 0: a setup memset on stream 14; then H2D copies, three kernels
and a D2H copy on streams 13 and 14 (a copy on one stream overlapping a kernel on the other),
their runtime calls on the main thread (same correlation ids), a cudaDeviceSynchronize with its
context-synchronization record, two OS runtime calls on two threads, NVTX push/pop ranges and a
mark. Times are ns from the session start. Unlike the 3.x fixture (two_streams_gpu0), this
export has no ENUM_* tables, as the 2.9.1 export it follows had none, so NVTX event types and
synchronization kinds are read from their CUPTI/nsys codes; and the global ids carry the
hardware/VM id in bits 48 and up, as real exports do.

    python tests/data/nsys_2x/make_fixture.py
"""

import sqlite3
from pathlib import Path

OUT = Path(__file__).with_name("nsys_schema2_synthetic.sqlite")
T0_NS = 312_000_000  # first event 0.312 s after the session start
PID, MAIN_TID, EVT_TID = 7311, 7311, 7316
GPID = (1 << 48) | (PID << 24)  # globalPid: VM id in bits 48.., pid in bits 24..47
MAIN, EVT = GPID | MAIN_TID, GPID | EVT_TID  # globalTid: tid in the low 24 bits
NO_ID = 0xFFFFFFFF  # what CUPTI puts in streamId/eventId of a context-wide synchronization


def us(t_us: float) -> int:
    return T0_NS + round(t_us * 1000)


# Column layout of the tables the reader uses, as `.schema` shows them in a 2.9.1 export
# (comments left out). MEMSET, NVTX_EVENTS and OSRT_API were not traced in that export: their
# columns here are the ones the 3.x fixture and the reader use.
SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL REFERENCES StringIds(id), priority INTEGER, globalTid INTEGER);
CREATE TABLE EXPORT_META_DATA (name TEXT NOT NULL, value TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
  cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
  localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
  sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
  srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
  graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL REFERENCES StringIds(id),
  returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER,
  callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER);
"""
# TARGET_INFO_GPU: every column of the 2.9.1 layout (the reader takes id and name); vmId and id NOT NULL
GPU_TEXT = ("name", "busLocation", "uuid", "chipName", "ctxswDevPath", "ctrlDevPath")
GPU_COLUMNS = (
    "vmId", "id", "name", "busLocation", "isDiscrete", "l2CacheSize", "totalMemory", "memoryBandwidth", "clockRate",
    "smCount", "pwGpuId", "uuid", "luid", "chipName", "cuDevice", "ctxswDevPath", "ctrlDevPath", "revision",
    "nodeMask", "constantMemory", "maxIPC", "maxRegistersPerBlock", "maxShmemPerBlock", "maxShmemPerBlockOptin",
    "maxShmemPerSm", "maxRegistersPerSm", "threadsPerWarp", "asyncEngines", "maxWarpsPerSm", "maxBlocksPerSm",
    "maxThreadsPerBlock", "maxBlockDimX", "maxBlockDimY", "maxBlockDimZ", "maxGridDimX", "maxGridDimY",
    "maxGridDimZ", "computeMajor", "computeMinor", "smMajor", "smMinor")

STRINGS = {1: "saxpy_pipeline", 2: "cuda-EvtHandlr", 3: "saxpy(int, float, const float *, float *)", 4: "saxpy",
           5: "_Z5saxpyifPKfPf", 6: "scale_rows(float *, int)", 7: "scale_rows", 8: "_Z10scale_rowsPfi",
           9: "cudaMalloc", 10: "cudaMemsetAsync", 11: "cudaMemcpyAsync", 12: "cudaLaunchKernel",
           13: "cudaDeviceSynchronize", 14: "poll", 15: "ioctl"}
# (start us, end us, correlation id, name id): the main thread's CUDA runtime calls
RUNTIME = [(10, 300, 101, 9), (310, 318, 102, 10), (430, 442, 103, 11), (445, 451, 104, 12), (453, 463, 105, 11),
           (465, 470, 106, 12), (472, 477, 107, 12), (479, 489, 108, 11), (491, 1252, 109, 13)]
# (start us, end us, stream, correlation id, demangled/short/mangled name ids, grid x, block x, registers, static shm)
KERNELS = [(630, 910, 13, 104, 3, 4, 5, 4096, 256, 16, 0), (815, 960, 14, 106, 6, 7, 8, 1024, 128, 24, 512),
           (965, 1245, 14, 107, 3, 4, 5, 4096, 256, 16, 0)]
MIB4 = 4 << 20
# (start us, end us, stream, correlation id, bytes, copyKind, srcKind, dstKind): CUPTI codes, 1 HtoD / 2 DtoH,
# memory kinds 2 pinned / 3 device
COPIES = [(445, 625, 13, 103, MIB4, 1, 2, 3), (630, 810, 14, 105, MIB4, 1, 2, 3), (915, 1095, 13, 108, MIB4, 2, 3, 2)]


def main() -> None:
    OUT.unlink(missing_ok=True)
    con = sqlite3.connect(OUT)
    con.executescript(SCHEMA)
    gpu_columns = [f"{c} {'TEXT' if c in GPU_TEXT else 'INTEGER'}{' NOT NULL' if c in ('vmId', 'id') else ''}"
                   for c in GPU_COLUMNS]
    con.execute(f"CREATE TABLE TARGET_INFO_GPU ({', '.join(gpu_columns)})")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", STRINGS.items())
    con.executemany("INSERT INTO ThreadNames VALUES (?, ?, ?)", [(1, 20, MAIN), (2, 10, EVT)])
    con.executemany("INSERT INTO EXPORT_META_DATA VALUES (?, ?)", [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", "2022.2.1.31"),
        ("EXPORT_PRODUCT_DATE", "2022.2"), ("EXPORT_SCHEMA_VERSION", "2.9.1"), ("EXPORT_SCHEMA_VERSION_MAJOR", "2"),
        ("EXPORT_SCHEMA_VERSION_MINOR", "9"), ("EXPORT_SCHEMA_VERSION_MICRO", "1"),
        ("EXPORT_PLATFORM", "linux-desktop"), ("EXPORT_ARCH", "x64"),
        ("written_by", "tests/data/nsys_2x/make_fixture.py")])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
                    [(us(a), us(b), MAIN, corr, name) for a, b, corr, name in RUNTIME])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
                    "(?, ?, 0, 1, ?, ?, ?, ?, ?, ?, 1, 0, ?, ?, 1, 1, ?, 1, 1, ?, 0, 0, 0, ?, 0, NULL, 0)",
                    [(us(a), us(b), stream, corr, GPID, dn, sn, mn, regs, gx, bx, shm, grid_id)
                     for grid_id, (a, b, stream, corr, dn, sn, mn, gx, bx, regs, shm) in enumerate(KERNELS, 1)])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES "
                    "(?, ?, 0, 1, ?, ?, ?, ?, ?, NULL, ?, ?, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
                    [(us(a), us(b), stream, corr, GPID, n, kind, src, dst)
                     for a, b, stream, corr, n, kind, src, dst in COPIES])
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, 0, 1, 14, 102, ?, 0, ?)",
                (us(330), us(334), GPID, 1 << 20))
    # syncType 4: CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE (no stream, no event)
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?, ?, 0, 1, ?, 109, ?, 4, ?)",
                (us(493), us(1250), NO_ID, GPID, NO_ID))
    con.executemany("INSERT INTO OSRT_API VALUES (?, ?, 27, ?, 0, ?, 0, 0, NULL)",
                    [(us(0), us(1480), EVT, 14), (us(12), us(30), MAIN, 15)])
    # eventType 59: NvtxPushPopRange, 34: NvtxMark (ENUM_NSYS_EVENT_TYPE codes; domain 0 = the default domain)
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, NULL, NULL, NULL, ?, ?, ?, NULL, 0)", [
        (us(0), us(420), 59, "setup", MAIN, MAIN), (us(420), us(1500), 59, "iteration 0", MAIN, MAIN),
        (us(1490), None, 34, "results copied", MAIN, None)])
    con.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, isDiscrete, l2CacheSize, totalMemory, "
                "clockRate, smCount, chipName, cuDevice, threadsPerWarp, computeMajor, computeMinor) "
                "VALUES (?, 0, 'NVIDIA A100-SXM4-80GB', '0000:07:00.0', 1, 41943040, 85899345920, 1410000000, 108, "
                "'GA100', 0, 32, 8, 0)", (1 << 48,))
    con.commit()
    con.execute("VACUUM")
    con.close()
    print(OUT, OUT.stat().st_size)


if __name__ == "__main__":
    main()
