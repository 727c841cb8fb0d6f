"""The same question on CUDA through CuPy: host-function callback vs event synchronize vs polling.

One run = one launch of ``scale_offset`` (``kernels/opencl/event_overhead.cu``) on a
non-blocking stream, plus the condition's per-run mechanism:

- ``none``: nothing; the batch ends with ``Stream.synchronize``;
- ``host-func``: ``cudaLaunchHostFunc`` (``Stream.launch_host_func``) after each launch, the
  CUDA twin of a CL_COMPLETE callback. Unlike an OpenCL callback it is *in* the stream: the
  next kernel waits until the host function returned, and CuPy's trampoline takes the GIL;
- ``event-sync``: ``cudaEventRecord`` after each launch, ``cudaEventSynchronize`` on each
  event in another thread (the seed's clWaitForEvents loop);
- ``event-poll``: the same events, polled with ``cudaEventQuery`` in another thread that
  yields between queries (a spinning Python thread would hold the GIL from the launcher).

Clock as in the OpenCL experiments: host ``perf_counter_ns`` from the first launch until the
stream is idle and every callback/wait returned, divided by R.
"""

from __future__ import annotations

import time

import numpy as np

from .clrt import KERNEL_DIR, WaitThread
from .measure import GAIN, OFFSET, Outcome, _close

CONDITIONS = ("none", "host-func", "event-sync", "event-poll")
BLOCK = 256


def unavailable(device: int) -> str | None:
    """Why the CUDA experiment cannot run here, or None."""
    try:
        import cupy
    except ImportError:
        return ("experiment=cuda needs CuPy and an NVIDIA GPU (pip install cupy-cuda12x or cupy-cuda13x "
                "to match the driver); the OpenCL experiments run without them")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        return f"experiment=cuda needs an NVIDIA GPU; the CUDA runtime says: {exc}"
    if device >= count:
        return f"device={device} but this machine has {count} CUDA device(s)"
    return None


def device_name(device: int) -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(device)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


class CudaRuns:
    """R launches of scale_offset over one buffer, with one of CONDITIONS per launch."""

    def __init__(self, size_bytes: int, device: int, seed: int = 0):
        import cupy as cp

        self.cp = cp
        self.dev = cp.cuda.Device(device)
        self.dev.use()
        self.n = size_bytes // 4
        self.host_in = np.random.default_rng(seed).random(self.n, dtype=np.float32)
        self.d_in = cp.asarray(self.host_in)
        self.d_out = cp.full(self.n, np.nan, np.float32)
        self.kern = cp.RawModule(code=(KERNEL_DIR / "event_overhead.cu").read_text()).get_function("scale_offset")
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.grid = ((self.n + BLOCK - 1) // BLOCK,)
        self.args = (self.d_in, self.d_out, np.float32(GAIN), np.float32(OFFSET), np.uint64(self.n))
        self._hits: list[int] = []

    def _launch(self) -> None:
        self.kern(self.grid, (BLOCK,), self.args, stream=self.stream)

    def prime(self) -> None:
        with self.stream:
            self.d_out.fill(np.nan)
        self._launch()
        self.stream.synchronize()

    def verify(self) -> tuple[bool, str]:
        self.stream.synchronize()
        return _close(self.cp.asnumpy(self.d_out), self.host_in * np.float32(GAIN) + np.float32(OFFSET))

    def _host_func(self, arg) -> None:
        self._hits.append(arg)

    def time(self, condition: str, reps: int) -> Outcome:
        cp, stream = self.cp, self.stream
        stream.synchronize()
        self._hits.clear()
        waiter = None
        if condition == "event-sync":
            waiter = WaitThread(wait=lambda ev: ev.synchronize())
        elif condition == "event-poll":
            waiter = WaitThread(wait=_poll)
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            self._launch()
            if condition == "host-func":
                stream.launch_host_func(self._host_func, 1)
            elif waiter is not None:
                ev = cp.cuda.Event(block=False, disable_timing=True)
                ev.record(stream)
                waiter.put(ev)  # the waiter holds the event until it has waited on it
        stream.synchronize()
        got = waiter.join() if waiter is not None else len(self._hits)
        dt = time.perf_counter_ns() - t0
        expected = 0 if condition == "none" else reps
        problem = None if got == expected else f"{got} of {expected} host functions/waits returned"
        return Outcome(dt / reps, problem)

    def close(self) -> None:
        self.stream.synchronize()
        del self.d_in, self.d_out


def _poll(ev) -> None:
    while not ev.done:  # cudaEventQuery
        time.sleep(0)  # release the GIL so the launching thread is not starved
