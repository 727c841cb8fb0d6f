"""GPU launch phase: host threads, each on its own CUDA stream, launching a small CuPy kernel.

Every launch needs a scratch block (the soft-stack block of the seed). Policies:

- ``per_call``: ``cudaMalloc`` + ``cudaFree`` around every launch, through
  ``cupy.cuda.runtime`` so CuPy's pool is bypassed. ``cudaFree`` synchronises the device, so
  "no sync after the launch" still waits here: that is part of what the policy costs.
- ``locked_cache``: the patch. One block behind a lock, reused when large enough, else freed
  and reallocated. With sync the lock is held until the kernel has finished (the patch's
  OpenMP path); without sync it is held only while enqueueing, and the next user's stream
  waits on an event recorded after the previous kernel (stream-ordered reuse), so host
  threads do not wait for the GPU but kernels still run one at a time.
- ``pool``: up to k blocks (the reviewer's proposal). A thread waits only when all k are
  taken; without sync a block goes back as soon as its kernel is enqueued, guarded by its
  event in the same way.
- ``framework``: CuPy's caching allocator (a private ``cupy.cuda.MemoryPool``), which keeps
  freed blocks per stream and so holds up to one block per host thread.
- ``graph``: each thread replays a CUDA graph captured once around the kernel with its own
  block: the launch-cost floor, no allocation and no Python argument packing per launch.

Times are host wall-clock (``perf_counter_ns``) per launch, from asking for the block to
giving it back (after the synchronisation when there is one), split into acquire, launch
(the kernel call), sync and release; the Python threads share the GIL, which is part of what
a Python host pays and is reported as such.
"""

from __future__ import annotations

import functools
import queue
import resource
import threading
import time
from typing import Any

import numpy as np

from . import Phase, split, thread_index

KERNEL = r"""
extern "C" __global__ void soft_stack_kernel(unsigned long long* scratch, unsigned long long step_words,
                                             int pages, int passes, unsigned long long* out,
                                             unsigned int* seq, unsigned long long gid0,
                                             unsigned long long salt) {
    // The launch index comes from a per-thread device counter that the kernel advances, so
    // the replays of one captured graph are distinct launches with distinct results.
    __shared__ unsigned long long part[256];
    const unsigned int i = *seq;
    const unsigned long long base = (salt ^ (gid0 + i)) * 0x9E3779B97F4A7C15ull;
    for (int p = threadIdx.x; p < pages; p += blockDim.x)
        for (int w = 0; w < 8; ++w) scratch[p * step_words + w] = base + 8ull * p + w;
    __syncthreads();
    // Read the neighbour's line `passes` times (volatile: every pass is a real load): a block
    // shared by two kernels at once breaks the sum.
    const volatile unsigned long long* in = scratch;
    unsigned long long s = 0;
    for (int r = 0; r < passes; ++r)
        for (int p = threadIdx.x; p < pages; p += blockDim.x) {
            const int q = (p + 1) % pages;
            for (int w = 0; w < 8; ++w) s += in[q * step_words + w];
        }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[gid0 + i] = part[0];
        *seq = i + 1;
    }
}
"""
BLOCK_THREADS = 256  # the kernel's shared-memory reduction assumes exactly this many

SEGMENTS = ("acquire", "launch", "sync", "release")  # the parts of one launch's host time


def available() -> str | None:
    """Why the GPU variant cannot run here, or None."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed: pip install cupy-cuda13x (or cupy-cuda12x) on a machine with a CUDA GPU"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing or broken: CuPy raises its own error types
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None if n > 0 else "no CUDA device visible to CuPy"


class _Held:
    """Bytes of scratch held at once (counted at each allocation and free)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.now += n
            self.peak = max(self.peak, self.now)

    def sub(self, n: int) -> None:
        with self._lock:
            self.now -= n


class _Block:
    def __init__(self, cupy, nbytes: int, held: _Held):
        self.ptr = cupy.cuda.runtime.malloc(nbytes)
        self.size = nbytes
        self.event = cupy.cuda.Event(disable_timing=True)
        held.add(nbytes)

    def free(self, cupy, held: _Held) -> None:
        cupy.cuda.runtime.free(self.ptr)
        held.sub(self.size)


class _PerCall:
    def __init__(self, cupy, nbytes, threads, k, held):
        self.cupy, self.nbytes, self.held = cupy, nbytes, held

    def acquire(self, stream, sync):
        self.held.add(self.nbytes)
        return self.cupy.cuda.runtime.malloc(self.nbytes)

    def ptr(self, blk):
        return blk

    def release(self, blk, stream, sync):
        self.cupy.cuda.runtime.free(blk)  # implicit device-wide synchronisation
        self.held.sub(self.nbytes)

    def close(self):
        pass


class _LockedCache:
    def __init__(self, cupy, nbytes, threads, k, held):
        self.cupy, self.nbytes, self.held = cupy, nbytes, held
        self.lock = threading.Lock()
        self.block: _Block | None = None

    def acquire(self, stream, sync):
        self.lock.acquire()
        if self.block is None or self.block.size < self.nbytes:
            if self.block is not None:
                self.block.free(self.cupy, self.held)
            self.block = _Block(self.cupy, self.nbytes, self.held)
        if not sync:
            stream.wait_event(self.block.event)  # the previous kernel on it may still run elsewhere
        return self.block

    def ptr(self, blk):
        return blk.ptr

    def release(self, blk, stream, sync):
        if not sync:
            blk.event.record(stream)
        self.lock.release()

    def close(self):
        if self.block is not None:
            self.block.free(self.cupy, self.held)


class _Pool:
    """Up to k blocks in a ``queue.SimpleQueue``, whose blocking get is in C. A first version
    with a ``threading.Condition`` (a new lock per wait, Python-level bookkeeping) measured
    slower than the single lock on an H200 (16384 launches, 8 threads: 0.45 s vs 0.32 s),
    which said more about Python than about pools."""

    def __init__(self, cupy, nbytes, threads, k, held):
        self.cupy, self.nbytes, self.held = cupy, nbytes, held
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(k):
            self.queue.put(None)  # a slot whose block is allocated on first use
        self.blocks: list[_Block] = []

    def acquire(self, stream, sync):
        blk = self.queue.get()
        if blk is None:
            blk = _Block(self.cupy, self.nbytes, self.held)
            self.blocks.append(blk)  # list.append is atomic under the GIL
        if not sync:
            stream.wait_event(blk.event)
        return blk

    def ptr(self, blk):
        return blk.ptr

    def release(self, blk, stream, sync):
        if not sync:
            blk.event.record(stream)
        self.queue.put(blk)

    def close(self):
        for blk in self.blocks:
            blk.free(self.cupy, self.held)


class _Framework:
    def __init__(self, cupy, nbytes, threads, k, held):
        self.cupy, self.nbytes, self.held = cupy, nbytes, held
        self.pool = cupy.cuda.MemoryPool()

    def acquire(self, stream, sync):
        return self.pool.malloc(self.nbytes)  # stream-ordered on the thread's current stream

    def ptr(self, blk):
        return blk.ptr

    def release(self, blk, stream, sync):
        pass  # the block returns to the pool when the caller drops its last reference

    def close(self):
        # The pool never gives memory back by itself, so its size now is its peak.
        self.held.peak = max(self.held.peak, self.pool.total_bytes())
        self.pool.free_all_blocks()


POLICY_CLASSES = {"per_call": _PerCall, "locked_cache": _LockedCache, "pool": _Pool, "framework": _Framework}


@functools.lru_cache(maxsize=1)
def _kernel():
    import cupy

    kern = cupy.RawKernel(KERNEL, "soft_stack_kernel")
    kern.compile()  # load the module now: loading it inside a graph capture is not allowed
    return kern


class _LaunchPhase:
    """One launch phase's state: the output and launch-counter buffers, one stream per host
    thread, the policy (or the captured graphs) and the per-launch time stamps."""

    def __init__(self, cupy, threads: int, launches: int, scratch_bytes: int, pages: int, passes: int, salt: int):
        self.cupy, self.threads, self.launches, self.scratch_bytes = cupy, threads, launches, scratch_bytes
        self.dev = cupy.cuda.Device(0)
        self.dev.use()
        self.kern = _kernel()
        step_words = np.uint64((scratch_bytes // pages) // 64 * 8)  # 64-byte aligned lines, in words
        self.out = cupy.zeros(launches, dtype=cupy.uint64)
        self.seq = cupy.zeros(threads, dtype=cupy.uint32)
        self.bounds = split(launches, threads)
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(threads)]
        self.held = _Held()
        # Argument tuples built once per thread: only the block pointer changes per launch.
        self.fixed = [(step_words, np.int32(pages), np.int32(passes), self.out, self.seq[t:t + 1], np.uint64(lo),
                       np.uint64(salt)) for t, (lo, _hi) in enumerate(self.bounds)]
        self.pol = None
        self.graphs: list = []
        self.graph_blocks: list[_Block] = []
        # Per launch: start, after acquire, after the launch call, after the sync, after release.
        self.stamps = np.zeros((launches, 5), dtype=np.int64)

    def args(self, t: int, ptr) -> tuple:
        return (np.uint64(ptr), *self.fixed[t])

    def prepare(self, policy: str, k: int) -> None:
        """The policy's allocator, or for ``graph`` one captured launch per thread with its own block."""
        if policy != "graph":
            self.pol = POLICY_CLASSES[policy](self.cupy, self.scratch_bytes, self.threads, k, self.held)
            return
        self.graph_blocks = [_Block(self.cupy, self.scratch_bytes, self.held) for _ in range(self.threads)]
        for t, s in enumerate(self.streams):
            with s:
                s.begin_capture()
                self.kern((1,), (BLOCK_THREADS,), self.args(t, self.graph_blocks[t].ptr))
                self.graphs.append(s.end_capture())

    def launch(self, t: int, stream, sync: bool, clock=time.perf_counter_ns) -> tuple[int, int, int, int, int]:
        """One launch of thread ``t``: its five time stamps."""
        t0 = clock()
        if self.pol is None:
            self.graphs[t].launch(stream)
            t2 = clock()
            if sync:
                stream.synchronize()
            t3 = clock()
            return t0, t0, t2, t3, t3
        blk = self.pol.acquire(stream, sync)
        t1 = clock()
        self.kern((1,), (BLOCK_THREADS,), self.args(t, self.pol.ptr(blk)))
        t2 = clock()
        if sync:
            stream.synchronize()
        t3 = clock()
        self.pol.release(blk, stream, sync)
        blk = None  # drop it now: the framework pool reuses it on the next launch
        return t0, t1, t2, t3, clock()

    def thread(self, t: int, sync: bool, barrier: threading.Barrier, errors: list) -> None:
        try:
            self.dev.use()
            stream = self.streams[t]
            lo, hi = self.bounds[t]
            with stream:
                barrier.wait()
                for i in range(lo, hi):
                    self.stamps[i] = self.launch(t, stream, sync)
                stream.synchronize()
        except BaseException as exc:  # surfaced to the caller after the join
            errors.append(exc)
            barrier.abort()

    def run(self, sync: bool) -> tuple[int, Any, Any]:
        """All threads' launches, released together; (real ns, rusage before, rusage after)."""
        barrier = threading.Barrier(self.threads + 1)
        errors: list[BaseException] = []
        workers = [threading.Thread(target=self.thread, args=(t, sync, barrier, errors), daemon=True)
                   for t in range(self.threads)]
        for w in workers:
            w.start()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        self.t0_ns = time.perf_counter_ns()
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        for w in workers:
            w.join()
        self.dev.synchronize()
        real_ns = time.perf_counter_ns() - self.t0_ns
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        if errors:
            raise errors[0]
        return real_ns, r0, r1

    def release(self) -> None:
        if self.pol is not None:
            self.pol.close()
        for b in self.graph_blocks:
            b.free(self.cupy, self.held)

    def result(self, real_ns: int, r0, r1, device_used_bytes: int) -> Phase:
        sums = self.out.get()
        seq_host = self.seq.get()
        counts = np.array([hi - lo for lo, hi in self.bounds])
        self.dev.synchronize()
        return Phase(
            real_ns=real_ns, user_ns=int((r1.ru_utime - r0.ru_utime) * 1e9),
            sys_ns=int((r1.ru_stime - r0.ru_stime) * 1e9), minflt=r1.ru_minflt - r0.ru_minflt,
            majflt=r1.ru_majflt - r0.ru_majflt, nvcsw=r1.ru_nvcsw - r0.ru_nvcsw, nivcsw=r1.ru_nivcsw - r0.ru_nivcsw,
            peak_bytes=self.held.peak, start_ns=self.stamps[:, 0] - self.t0_ns,
            segments_ns={name: self.stamps[:, j + 1] - self.stamps[:, j] for j, name in enumerate(SEGMENTS)},
            checksum=sums, thread_of=thread_index(self.launches, self.threads),
            extra={"device_used_at_end_bytes": int(device_used_bytes), "seq_ok": bool(np.array_equal(seq_host, counts))},
        )


def run_phase(policy: str, threads: int, launches: int, scratch_bytes: int, k: int, pages: int, passes: int,
              sync: bool, salt: int) -> Phase:
    """One launch phase of ``policy`` on GPU 0; the caller checks ``Phase.checksum``."""
    import cupy

    phase = _LaunchPhase(cupy, threads, launches, scratch_bytes, pages, passes, salt)
    phase.dev.synchronize()
    free0, _total = cupy.cuda.runtime.memGetInfo()
    phase.prepare(policy, k)
    real_ns, r0, r1 = phase.run(sync)
    free1, _ = cupy.cuda.runtime.memGetInfo()
    phase.release()
    return phase.result(real_ns, r0, r1, free0 - free1)


def device_text() -> dict:
    """GPU name, driver and runtime versions, CuPy version (for the run's outputs)."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"gpu": name, "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "cupy": cupy.__version__}
