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
- ``size_limit``: the patch as committed: ``locked_cache``, plus a limit on the block kept
  while the application allocates other memory (libgomp's SOFTSTACK_CACHE_LIMIT, 128 MiB).
  Before each data allocation it takes the lock (so it waits for a kernel holding the block)
  and frees a cached block over the limit; if the allocation runs out of memory it frees the
  cached block whatever its size and retries once (GOMP_OFFLOAD_alloc).
- ``pool``: up to k blocks (the reviewer's proposal). A thread waits only when all k are
  taken; without sync a block goes back as soon as its kernel is enqueued, guarded by its
  event in the same way.
- ``framework``: CuPy's caching allocator (a private ``cupy.cuda.MemoryPool``), which keeps
  freed blocks per stream and so holds up to one block per host thread.
- ``graph``: each thread replays a CUDA graph captured once around the kernel with its own
  block: the launch-cost floor, no allocation and no Python argument packing per launch.

With ``data_bytes`` > 0 every launch also allocates that much application data (the kernel's
mapped arguments) with cudaMalloc before it asks for the block and frees it after (cudaFree
synchronises the device), whatever the policy (``graph`` has no per-launch allocations at
all). ``oom_every`` = N makes every N-th data allocation fail as out of memory (a fault
injection): ``size_limit`` frees its block and retries, the others cannot run the launch.

``blocks`` thread blocks run each kernel. Each block does the whole kernel's work on the same
lines (identical values, so they do not disturb each other) and adds its sum to the launch's
result; enough blocks to fill the GPU (``blocks=0``: 8 per multiprocessor) make kernels from
different host threads run one after another, as the seed's OpenMP kernels (many teams) did.

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

from .measure import SOFTSTACK_CACHE_LIMIT, OutOfMemory, Phase, check_checksums, split, thread_index

KERNEL = r"""
extern "C" __global__ void soft_stack_kernel(unsigned long long* scratch, unsigned long long step_words,
                                             int pages, int passes, unsigned long long* out,
                                             unsigned int* seq, unsigned int* done,
                                             unsigned long long gid0, unsigned long long salt) {
    // The launch index comes from a per-thread device counter that the launch's last block
    // advances, so the replays of one captured graph are distinct launches with distinct results.
    __shared__ unsigned long long part[256];
    const unsigned int i = *(volatile unsigned int*)seq;
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
        atomicAdd(&out[gid0 + i], part[0]);
        __threadfence();
        // Every other block read *seq before it counted itself done: the last one may advance it.
        if (atomicAdd(done, 1u) == gridDim.x - 1) {
            *done = 0;
            *seq = i + 1;
        }
    }
}
"""
BLOCK_THREADS = 256  # the kernel's shared-memory reduction assumes exactly this many
# A phase starts behind 0 to PLACEMENTS - 1 scratch-sized blocks held for the phase (chosen by its
# salt): see _LaunchPhase.place
PLACEMENTS = 16
FILL_BLOCKS_PER_SM = 8  # 8 x 256 threads: a full Hopper multiprocessor (2048 threads)
CUDA_ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation

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


class _Memory:
    """A phase's device allocations: cudaMalloc/cudaFree through CuPy's runtime (CuPy's pool
    bypassed), the bytes held at once counted, an out-of-memory turned into OutOfMemory, and the
    fault injection (every ``oom_every``-th data allocation asked for fails)."""

    def __init__(self, cupy, oom_every: int = 0):
        self.cupy, self.oom_every = cupy, oom_every
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.asks = 0
        self.limit_frees = 0
        self.oom_retries = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.now += n
            self.peak = max(self.peak, self.now)

    def sub(self, n: int) -> None:
        with self._lock:
            self.now -= n

    def count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def alloc(self, n: int, what: str = "scratch", inject: bool = False) -> int:
        if inject and self.oom_every:
            with self._lock:
                self.asks += 1
                fail = self.asks % self.oom_every == 0
            if fail:
                raise OutOfMemory(f"out of memory: {what} allocation of {n} bytes failed with {self.now} bytes held "
                                  "(injected: oom_every)")
        try:
            ptr = self.cupy.cuda.runtime.malloc(n)
        except Exception as exc:  # CuPy's CUDARuntimeError; its status says which
            if getattr(exc, "status", None) == CUDA_ERROR_MEMORY_ALLOCATION:
                raise OutOfMemory(f"out of memory: {what} allocation of {n} bytes failed with {self.now} bytes "
                                  f"held ({exc})") from None
            raise
        self.add(n)
        return ptr

    def free(self, ptr: int, n: int) -> None:
        self.cupy.cuda.runtime.free(ptr)  # implicit device-wide synchronisation
        self.sub(n)


class _Block:
    def __init__(self, cupy, nbytes: int, mem: _Memory):
        self.ptr = mem.alloc(nbytes)
        self.size = nbytes
        self.event = cupy.cuda.Event(disable_timing=True)

    def free(self, mem: _Memory) -> None:
        mem.free(self.ptr, self.size)


class _Policy:
    """What every policy shares: the application's data goes straight to cudaMalloc/cudaFree
    (libgomp's GOMP_OFFLOAD_alloc/free), with no way out of an out-of-memory."""

    def __init__(self, cupy, nbytes: int, threads: int, k: int, mem: _Memory, limit: int):
        self.cupy, self.nbytes, self.mem, self.limit = cupy, nbytes, mem, limit

    def alloc_data(self, n: int) -> int:
        return self.mem.alloc(n, "data", inject=True)

    def free_data(self, ptr: int, n: int) -> None:
        self.mem.free(ptr, n)

    def close(self):
        pass


class _PerCall(_Policy):
    def acquire(self, stream, sync):
        return self.mem.alloc(self.nbytes)

    def ptr(self, blk):
        return blk

    def release(self, blk, stream, sync):
        self.mem.free(blk, self.nbytes)


class _LockedCache(_Policy):
    def __init__(self, *args):
        super().__init__(*args)
        self.lock = threading.Lock()
        self.block: _Block | None = None

    def acquire(self, stream, sync):
        self.lock.acquire()
        try:
            if self.block is None or self.block.size < self.nbytes:
                if self.block is not None:
                    self.block.free(self.mem)
                    self.block = None
                self.block = _Block(self.cupy, self.nbytes, self.mem)
        except BaseException:
            self.lock.release()
            raise
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
            self.block.free(self.mem)


class _SizeLimit(_LockedCache):
    def _free_cached(self, force: bool) -> bool:
        """nvptx_stacks_free: under the lock, the cached block goes if over the limit or forced."""
        with self.lock:
            if self.block is None or not (force or self.block.size > self.limit):
                return False
            self.block.free(self.mem)
            self.block = None
            return True

    def alloc_data(self, n: int) -> int:
        if self._free_cached(False):
            self.mem.count("limit_frees")
        try:
            return self.mem.alloc(n, "data", inject=True)
        except OutOfMemory:
            self._free_cached(True)
            self.mem.count("oom_retries")
            return self.mem.alloc(n, "data")


class _Pool(_Policy):
    """Up to k blocks in a ``queue.SimpleQueue``, whose blocking get is in C. A first version
    with a ``threading.Condition`` (a new lock per wait, Python-level bookkeeping) measured
    slower than the single lock on an H200 (16384 launches, 8 threads: 0.45 s vs 0.32 s),
    which said more about Python than about pools."""

    def __init__(self, *args):
        super().__init__(*args)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(args[3]):
            self.queue.put(None)  # a slot whose block is allocated on first use
        self.blocks: list[_Block] = []

    def acquire(self, stream, sync):
        blk = self.queue.get()
        if blk is None:
            try:
                blk = _Block(self.cupy, self.nbytes, self.mem)
            except BaseException:
                self.queue.put(None)
                raise
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
            blk.free(self.mem)


class _Framework(_Policy):
    def __init__(self, *args):
        super().__init__(*args)
        self.pool = self.cupy.cuda.MemoryPool()

    def acquire(self, stream, sync):
        return self.pool.malloc(self.nbytes)  # stream-ordered on the thread's current stream

    def ptr(self, blk):
        return blk.ptr

    def release(self, blk, stream, sync):
        pass  # the block returns to the pool when the caller drops its last reference

    def close(self):
        # The pool never gives memory back by itself, so its size now is its peak.
        self.mem.peak = max(self.mem.peak, self.mem.now + self.pool.total_bytes())
        self.pool.free_all_blocks()


POLICY_CLASSES = {"per_call": _PerCall, "locked_cache": _LockedCache, "size_limit": _SizeLimit, "pool": _Pool,
                  "framework": _Framework}


@functools.lru_cache(maxsize=1)
def _kernel():
    import cupy

    kern = cupy.RawKernel(KERNEL, "soft_stack_kernel")
    kern.compile()  # load the module now: loading it inside a graph capture is not allowed
    return kern


class _LaunchPhase:
    """One launch phase's state: the output and launch-counter buffers, one stream per host
    thread, the policy (or the captured graphs) and the per-launch time stamps."""

    def __init__(self, cupy, threads: int, launches: int, scratch_bytes: int, pages: int, passes: int, salt: int,
                 blocks: int = 1, data_bytes: int = 0, oom_every: int = 0, limit: int = SOFTSTACK_CACHE_LIMIT):
        self.cupy, self.threads, self.launches, self.scratch_bytes = cupy, threads, launches, scratch_bytes
        self.data_bytes, self.limit = data_bytes, limit
        self.dev = cupy.cuda.Device(0)
        self.dev.use()
        self.kern = _kernel()
        self.grid = (resolve_blocks(blocks),)
        step_words = np.uint64((scratch_bytes // pages) // 64 * 8)  # 64-byte aligned lines, in words
        self.out = cupy.zeros(launches, dtype=cupy.uint64)
        self.seq = cupy.zeros(threads, dtype=cupy.uint32)
        self.done = cupy.zeros(threads, dtype=cupy.uint32)
        self.bounds = split(launches, threads)
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(threads)]
        self.mem = _Memory(cupy, oom_every)
        self.failed = False  # set by a thread whose launch failed: the others stop too
        # Argument tuples built once per thread: only the block pointer changes per launch.
        self.fixed = [(step_words, np.int32(pages), np.int32(passes), self.out, self.seq[t:t + 1],
                       self.done[t:t + 1], np.uint64(lo), np.uint64(salt)) for t, (lo, _hi) in enumerate(self.bounds)]
        self.salt = salt
        self.spacers: list[int] = []
        self.placed = 0  # how many spacers the phase held (the list empties on release)
        self.pol = None
        self.graphs: list = []
        self.graph_blocks: list[_Block] = []
        # Per launch: start, after acquire, after the launch call, after the sync, after release.
        self.stamps = np.zeros((launches, 5), dtype=np.int64)

    def args(self, t: int, ptr) -> tuple:
        return (np.uint64(ptr), *self.fixed[t])

    def place(self) -> None:
        """Hold a random number of scratch-sized blocks (by the phase's salt) until the phase
        ends, so that the policy's blocks land somewhere new. The kernel's time depends on where
        its block lies (by tens of percent on an H100: scripts/gpu/launch_cache_handover.py), and
        the allocator hands each phase the place the last one freed: a policy that keeps one
        block would otherwise measure one placement in all its phases, a level no phase varies."""
        for _ in range(self.salt % PLACEMENTS):
            try:
                self.spacers.append(self.cupy.cuda.runtime.malloc(self.scratch_bytes))
            except Exception:  # no room for more: the phase starts from what it holds
                break
        self.placed = len(self.spacers)

    def prepare(self, policy: str, k: int) -> None:
        """The policy's allocator, or for ``graph`` one captured launch per thread with its own block."""
        if policy != "graph":
            self.pol = POLICY_CLASSES[policy](self.cupy, self.scratch_bytes, self.threads, k, self.mem, self.limit)
            return
        self.graph_blocks = [_Block(self.cupy, self.scratch_bytes, self.mem) for _ in range(self.threads)]
        for t, s in enumerate(self.streams):
            with s:
                s.begin_capture()
                self.kern(self.grid, (BLOCK_THREADS,), self.args(t, self.graph_blocks[t].ptr))
                self.graphs.append(s.end_capture())

    def launch(self, t: int, stream, sync: bool, clock=time.perf_counter_ns) -> tuple[int, int, int, int, int]:
        """One launch of thread ``t``: its five time stamps. The application's data, if any, is
        allocated in the acquire part and freed in the release part."""
        t0 = clock()
        if self.pol is None:
            self.graphs[t].launch(stream)
            t2 = clock()
            if sync:
                stream.synchronize()
            t3 = clock()
            return t0, t0, t2, t3, t3
        data = self.pol.alloc_data(self.data_bytes) if self.data_bytes else None
        blk = self.pol.acquire(stream, sync)
        t1 = clock()
        self.kern(self.grid, (BLOCK_THREADS,), self.args(t, self.pol.ptr(blk)))
        t2 = clock()
        if sync:
            stream.synchronize()
        t3 = clock()
        self.pol.release(blk, stream, sync)
        blk = None  # drop it now: the framework pool reuses it on the next launch
        if data is not None:
            self.pol.free_data(data, self.data_bytes)
        return t0, t1, t2, t3, clock()

    def thread(self, t: int, sync: bool, barrier: threading.Barrier, errors: list) -> None:
        try:
            self.dev.use()
            stream = self.streams[t]
            lo, hi = self.bounds[t]
            with stream:
                barrier.wait()
                for i in range(lo, hi):
                    if self.failed:
                        break
                    self.stamps[i] = self.launch(t, stream, sync)
                stream.synchronize()
        except BaseException as exc:  # surfaced to the caller after the join
            self.failed = True
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
            b.free(self.mem)
        for ptr in self.spacers:
            self.cupy.cuda.runtime.free(ptr)
        self.spacers = []

    def result(self, real_ns: int, r0, r1, device_used_bytes: int) -> Phase:
        sums = self.out.get()
        seq_host = self.seq.get()
        counts = np.array([hi - lo for lo, hi in self.bounds])
        self.dev.synchronize()
        return Phase(
            real_ns=real_ns, user_ns=int((r1.ru_utime - r0.ru_utime) * 1e9),
            sys_ns=int((r1.ru_stime - r0.ru_stime) * 1e9), minflt=r1.ru_minflt - r0.ru_minflt,
            majflt=r1.ru_majflt - r0.ru_majflt, nvcsw=r1.ru_nvcsw - r0.ru_nvcsw, nivcsw=r1.ru_nivcsw - r0.ru_nivcsw,
            peak_bytes=self.mem.peak, start_ns=self.stamps[:, 0] - self.t0_ns,
            segments_ns={name: self.stamps[:, j + 1] - self.stamps[:, j] for j, name in enumerate(SEGMENTS)},
            checksum=sums, thread_of=thread_index(self.launches, self.threads),
            extra={"device_used_at_end_bytes": int(device_used_bytes), "seq_ok": bool(np.array_equal(seq_host, counts)),
                   "blocks": self.grid[0], "limit_frees": self.mem.limit_frees, "oom_retries": self.mem.oom_retries,
                   "data_allocs": self.mem.asks if self.data_bytes else 0, "placement_spacers": self.placed},
        )


def run_phase(policy: str, threads: int, launches: int, scratch_bytes: int, k: int, pages: int, passes: int,
              sync: bool, salt: int, blocks: int = 1, limit: int = SOFTSTACK_CACHE_LIMIT, data_bytes: int = 0,
              oom_every: int = 0) -> Phase:
    """One launch phase of ``policy`` on GPU 0; the caller checks ``Phase.checksum``. Raises
    OutOfMemory when a launch could not get its memory and the policy has no way out."""
    import cupy

    phase = _LaunchPhase(cupy, threads, launches, scratch_bytes, pages, passes, salt, blocks, data_bytes, oom_every,
                         limit)
    try:
        phase.place()
        phase.dev.synchronize()
        free0, _total = cupy.cuda.runtime.memGetInfo()
        phase.prepare(policy, k)
        real_ns, r0, r1 = phase.run(sync)
        free1, _ = cupy.cuda.runtime.memGetInfo()
    finally:
        phase.release()
    return phase.result(real_ns, r0, r1, free0 - free1)


def resolve_blocks(blocks: int) -> int:
    """Thread blocks per kernel: ``blocks``, or for 0 enough to fill GPU 0 (8 per multiprocessor)."""
    if blocks:
        return blocks
    import cupy

    return FILL_BLOCKS_PER_SM * int(cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"])


def kernel_ms(passes: int, blocks: int = 0, pages: int = 256, scratch_bytes: int = 50_000_000,
              launches: int = 5) -> float:
    """Median GPU time of one kernel (CUDA events, after a warm-up), to pick ``passes`` for a
    wanted kernel length. Checks the sums as a phase does."""
    import cupy

    ph = _LaunchPhase(cupy, 1, launches + 1, scratch_bytes, pages, passes, 12345, blocks)
    ph.prepare("locked_cache", 1)
    stream = ph.streams[0]
    times = []
    with stream:
        for i in range(launches + 1):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            blk = ph.pol.acquire(stream, True)
            ph.kern(ph.grid, (BLOCK_THREADS,), ph.args(0, ph.pol.ptr(blk)))
            end.record(stream)
            end.synchronize()
            ph.pol.release(blk, stream, True)
            if i:
                times.append(cupy.cuda.get_elapsed_time(start, end))
    ok, msg = check_checksums(ph.out.get(), 12345, pages, passes, ph.grid[0])
    ph.release()
    if not ok:
        raise RuntimeError(f"kernel check failed while timing it: {msg}")
    return float(np.median(times))


def device_text() -> dict:
    """GPU name, driver and runtime versions, CuPy version (for the run's outputs)."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"gpu": name, "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "cupy": cupy.__version__}


def passes_for_ms(target_ms: float, blocks: int = 0, pages: int = 256, scratch_bytes: int = 50_000_000) -> int:
    """``passes`` that make one kernel take about ``target_ms`` on GPU 0 (a line through two
    timed lengths: the kernel's time is a fixed part plus a part per pass)."""
    short, long_ = 100, 2000
    t_short, t_long = kernel_ms(short, blocks, pages, scratch_bytes), kernel_ms(long_, blocks, pages, scratch_bytes)
    per_pass = max((t_long - t_short) / (long_ - short), 1e-9)
    return max(1, round(short + (target_ms - t_short) / per_pass))
