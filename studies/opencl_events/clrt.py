"""OpenCL plumbing for the opencl-events study: platforms, kernels, callbacks, waiters.

pyopencl is imported inside functions (the GPU machines may lack it, and the app must load
without it).

Three ways to hang a callback on an event, because they cost very different things:

- ``native``: a 5-line C function (``kernels/opencl/event_overhead_host.c``, built once with the machine's C
  compiler) registered with ``clSetEventCallback`` through ctypes. It only bumps an atomic
  counter, so its cost is the OpenCL runtime's own callback machinery, as in the seed's
  C++ test.
- ``ctypes``: a Python function registered the same way. The runtime's callback thread
  must take the GIL and build a Python frame for each call.
- ``pyopencl``: ``Event.set_callback``. pyopencl starts one OS thread *per callback*
  (detached, waiting on a condition variable) so that the runtime's thread never blocks
  on the GIL; the cost of that thread start is paid at registration, on the enqueuing
  thread. Measured here: tens of microseconds per callback on PoCL, dwarfing the runtime.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.running import cbuild
from workbench.base.env import REPO_ROOT

KERNEL_DIR = REPO_ROOT / "kernels" / "opencl"
NATIVE_SRC = KERNEL_DIR / "event_overhead_host.c"

# clSetEventCallback accepts these execution states (CL_SUBMITTED/CL_RUNNING since 1.1
# only where the runtime allows them; OpenCL 1.1 permitted CL_COMPLETE alone).
CL_COMPLETE, CL_RUNNING, CL_SUBMITTED = 0, 1, 2
EXEC_TYPES = (("CL_SUBMITTED", CL_SUBMITTED), ("CL_RUNNING", CL_RUNNING), ("CL_COMPLETE", CL_COMPLETE))
CL_ERRORS = {-5: "CL_OUT_OF_RESOURCES", -6: "CL_OUT_OF_HOST_MEMORY", -30: "CL_INVALID_VALUE",
             -58: "CL_INVALID_EVENT", -59: "CL_INVALID_OPERATION"}
CALLBACK_IMPLS = ("native", "ctypes", "pyopencl")

INSTALL_HINT = ("install PoCL (a CPU OpenCL platform) from PyPI with `pip install 'pyopencl[pocl]'`, "
                "or a vendor driver's ICD (NVIDIA: libnvidia-opencl.so.1 from the driver, made visible "
                "by a file in /etc/OpenCL/vendors or by OCL_ICD_VENDORS)")
# PoCL's PyPI wheel (3.0-rc2, LLVM 14) asks for target CPU 'generic' on CPUs newer than its LLVM
# (AMD Zen 5, seen here), which its compiler refuses; Debian's build (3.1, LLVM 15) compiles there.
BUILD_HINT = ("a CPU newer than the platform's LLVM makes PoCL's PyPI wheel fail every build ('unknown target CPU "
              "generic'); install Debian's PoCL (`apt-get install pocl-opencl-icd`) and it is picked automatically")
_PROBE_KERNEL = "__kernel void probe(__global float *a) { a[get_global_id(0)] *= 2.0f; }"


class CallbackUnsupported(RuntimeError):
    """The platform refused a callback on this execution state."""


# --- platforms ---------------------------------------------------------------------------

def platforms() -> list[dict[str, Any]]:
    """Every OpenCL platform and device visible here; empty when there is none."""
    import pyopencl as cl

    try:
        plats = cl.get_platforms()
    except (cl.LogicError, cl.RuntimeError):  # CL_PLATFORM_NOT_FOUND_KHR: no ICD installed
        return []
    out = []
    for pi, p in enumerate(plats):
        try:
            devs = p.get_devices()
        except (cl.LogicError, cl.RuntimeError):
            devs = []
        out.append({"index": pi, "name": p.name.strip(), "vendor": p.vendor.strip(), "version": p.version.strip(),
                    "devices": [d.name.strip() for d in devs], "build_error": _build_error(pi, devs)})
    return out


_BUILD_ERRORS: dict[tuple[int, str], str | None] = {}


def _build_error(index: int, devs) -> str | None:
    """Why a trivial kernel does not compile on the platform's first device, or None. A platform
    that lists devices but cannot build for them is as good as none; asked once per process."""
    import pyopencl as cl

    if not devs:
        return "no devices"
    key = (index, devs[0].name)
    if key not in _BUILD_ERRORS:
        try:
            cl.Program(cl.Context(devices=[devs[0]]), _PROBE_KERNEL).build()
            _BUILD_ERRORS[key] = None
        except (cl.LogicError, cl.RuntimeError) as exc:
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip().startswith("error:")]
            _BUILD_ERRORS[key] = lines[0] if lines else str(exc).splitlines()[0]
    return _BUILD_ERRORS[key]


def pick_platform(plats: list[dict[str, Any]], choice: str) -> dict[str, Any]:
    """``""`` is the first platform that compiles a kernel; digits an index; else a case-insensitive
    name/vendor substring."""
    if not plats:
        raise LookupError(f"no OpenCL platform is installed; {INSTALL_HINT}")
    if choice == "":
        return next((p for p in plats if p.get("build_error") is None), plats[0])
    if choice.isdigit():
        if int(choice) < len(plats):
            return plats[int(choice)]
    else:
        for p in plats:
            if choice.lower() in (p["name"] + " " + p["vendor"]).lower():
                return p
    have = "; ".join(f"{p['index']}: {p['name']} ({', '.join(p['devices']) or 'no devices'})" for p in plats)
    raise LookupError(f"no OpenCL platform matches {choice!r}; platforms here: {have}")


@dataclass
class Target:
    """An opened OpenCL device: context, an in-order queue and the study's program."""

    cl: Any
    ctx: Any
    device: Any
    queue: Any
    program: Any
    platform_name: str
    device_name: str

    def out_of_order_queue(self):
        """An out-of-order queue where the device offers one (dependencies then come from events)."""
        cl = self.cl
        props = self.device.queue_properties
        if props & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
            return cl.CommandQueue(self.ctx, self.device,
                                   properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE), True
        return self.queue, False


def open_target(platform_choice: str, device_index: int) -> Target:
    import pyopencl as cl

    plat = pick_platform(platforms(), platform_choice)
    p = cl.get_platforms()[plat["index"]]
    devs = p.get_devices()
    if device_index >= len(devs):
        raise LookupError(f"platform {plat['name']} has {len(devs)} device(s); device={device_index} does not exist")
    dev = devs[device_index]
    ctx = cl.Context(devices=[dev])
    program = cl.Program(ctx, (KERNEL_DIR / "event_overhead.cl").read_text()).build()
    return Target(cl, ctx, dev, cl.CommandQueue(ctx, dev), program, p.name.strip(), dev.name.strip())


# --- callbacks ---------------------------------------------------------------------------

_EVENT_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)


def _opencl_lib_path() -> str:
    """The path of the ICD loader pyopencl itself loaded (so both talk to the same platforms)."""
    import pyopencl._cl  # noqa: F401  (loads libOpenCL into the process)

    with open("/proc/self/maps") as fh:
        for line in fh:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "libOpenCL" in os.path.basename(path):
                return path
    name = ctypes.util.find_library("OpenCL")
    if not name:
        raise OSError("cannot find the OpenCL ICD loader pyopencl uses")
    return name


def _opencl_lib() -> ctypes.CDLL:
    lib = ctypes.CDLL(_opencl_lib_path())
    vp, i32, u32 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32
    lib.clSetEventCallback.argtypes = [vp, i32, vp, vp]
    lib.clSetEventCallback.restype = i32
    lib.clEnqueueMapBuffer.argtypes = [vp, vp, u32, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t, u32, vp,
                                       ctypes.POINTER(vp), ctypes.POINTER(i32)]
    lib.clEnqueueMapBuffer.restype = vp
    lib.clEnqueueUnmapMemObject.argtypes = [vp, vp, vp, u32, vp, ctypes.POINTER(vp)]
    lib.clEnqueueUnmapMemObject.restype = i32
    return lib


class RawMaps:
    """clEnqueueMapBuffer / clEnqueueUnmapMemObject without pyopencl's MemoryMap.

    pyopencl unmaps a MemoryMap when it is garbage-collected and aborts the process if
    that unmap fails. NVIDIA's runtime refuses (CL_INVALID_VALUE) the unmaps of repeated
    maps of one host-pointer buffer that were left open, which the seed's "without unmap"
    condition does on purpose; here the refusal is counted instead.
    """

    CL_MAP_READ = 1

    def __init__(self, cl):
        self.cl = cl
        self.lib = _opencl_lib()

    @staticmethod
    def _wait_list(wait_for):
        ids = [e.int_ptr for e in wait_for or ()]
        return len(ids), ((ctypes.c_void_p * len(ids))(*ids) if ids else None)

    def map_read(self, queue, buf, nbytes: int, wait_for=None, blocking: bool = False):
        """Map ``nbytes`` of ``buf`` for reading; returns (host address, pyopencl Event)."""
        n, ids = self._wait_list(wait_for)
        ev, err = ctypes.c_void_p(), ctypes.c_int32(0)
        ptr = self.lib.clEnqueueMapBuffer(queue.int_ptr, buf.int_ptr, int(blocking), self.CL_MAP_READ, 0, nbytes,
                                          n, ids, ctypes.byref(ev), ctypes.byref(err))
        if err.value != 0:
            raise RuntimeError(f"clEnqueueMapBuffer returned {err.value} ({CL_ERRORS.get(err.value, 'error')})")
        return ptr, self.cl.Event.from_int_ptr(ev.value, retain=False)

    def unmap(self, queue, buf, ptr: int, wait_for=None):
        """Enqueue the unmap; returns (Event or None, OpenCL error code)."""
        n, ids = self._wait_list(wait_for)
        ev = ctypes.c_void_p()
        err = self.lib.clEnqueueUnmapMemObject(queue.int_ptr, buf.int_ptr, ptr, n, ids, ctypes.byref(ev))
        return (self.cl.Event.from_int_ptr(ev.value, retain=False) if err == 0 else None), err




def native_callback_lib() -> Path:
    """Build (once per source version) the native callback and loop; raises OSError without a compiler."""
    return cbuild.build(NATIVE_SRC, "libwb_clcb.so", ["-O2", "-shared", "-fPIC", "-pthread"])


DEP_OUT_FIELDS = ("ns", "callbacks", "waited", "unmaps_refused", "error", "error_at")
DEP_ERROR_AT = ("", "a worker step", "the combine", "the map", "the unmap", "the callback", "the wait", "clFinish",
                "host memory")


def native_dependency_loop():
    """``wb_dep_time`` of event_overhead_host.c, bound to the ICD loader pyopencl loaded (built on first use)."""
    lib = ctypes.CDLL(str(native_callback_lib()))
    path = _opencl_lib_path()
    rc = lib.wb_dep_open(path.encode())
    if rc:
        why = "library not loaded" if rc < 0 else f"symbol {rc} missing"
        raise OSError(f"event_overhead_host.c could not bind OpenCL in {path}: {why}")
    vp, i32, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    fn = lib.wb_dep_time
    fn.argtypes = [vp, ctypes.POINTER(vp), ctypes.POINTER(i32), i32, vp, vp, sz, sz, ctypes.c_long, i32, i32, i32,
                   ctypes.POINTER(ctypes.c_longlong)]
    fn.restype = i32
    return fn


def native_unavailable() -> str | None:
    """Why callback_impl=native cannot run here, or None."""
    try:
        native_callback_lib()
    except OSError as exc:
        return f"{exc}; install gcc (apt-get install gcc) or set callback_impl=ctypes"
    return None


class Callbacks:
    """Registers callbacks on events and counts their invocations (one implementation each)."""

    def __init__(self, impl: str):
        if impl not in CALLBACK_IMPLS:
            raise ValueError(impl)
        self.impl = impl
        self._hits: list[int] = []  # list.append is atomic under the GIL
        if impl == "native":
            self._lib = _opencl_lib()
            self._native = ctypes.CDLL(str(native_callback_lib()))
            self._fn = ctypes.cast(self._native.count_event, ctypes.c_void_p)
            self._counter = ctypes.c_long(0)
            self._user = ctypes.cast(ctypes.byref(self._counter), ctypes.c_void_p)
        elif impl == "ctypes":
            self._lib = _opencl_lib()
            self._cfn = _EVENT_CB(lambda ev, status, user: self._hits.append(status))  # kept alive by self
            self._fn = ctypes.cast(self._cfn, ctypes.c_void_p)
            self._user = None

    def reset(self) -> None:
        if self.impl == "native":
            self._counter.value = 0
        else:
            self._hits.clear()

    def count(self) -> int:
        if self.impl == "native":
            return self._counter.value
        return len(self._hits)

    def attach(self, event, exec_type: int) -> None:
        if self.impl == "pyopencl":
            import pyopencl as cl

            try:
                event.set_callback(exec_type, self._py_cb)
            except (cl.LogicError, cl.RuntimeError) as exc:
                raise CallbackUnsupported(str(exc)) from None
            return
        err = self._lib.clSetEventCallback(event.int_ptr, exec_type, self._fn, self._user)
        if err != 0:
            raise CallbackUnsupported(f"clSetEventCallback returned {err} ({CL_ERRORS.get(err, 'error')})")

    def _py_cb(self, status) -> None:
        self._hits.append(status)

    def drain(self, expected: int, timeout_s: float = 10.0) -> int:
        """Wait until ``expected`` callbacks ran (callbacks may trail clFinish); returns the count."""
        deadline = time.perf_counter() + timeout_s
        got = self.count()
        while got < expected and time.perf_counter() < deadline:
            time.sleep(20e-6)  # yield the core (and the GIL) to the runtime's callback thread
            got = self.count()
        return got


def probe_exec_types(target: Target, cbs: Callbacks) -> dict[int, str | None]:
    """For each execution state: None if a callback on it works, else the platform's refusal."""
    cl = target.cl
    buf = cl.Buffer(target.ctx, cl.mem_flags.READ_WRITE, 16)
    kern = cl.Kernel(target.program, "scale_offset")
    kern.set_args(buf, buf, _f32(1.0), _f32(0.0))
    out: dict[int, str | None] = {}
    for _name, t in EXEC_TYPES:
        ev = cl.enqueue_nd_range_kernel(target.queue, kern, (4,), None)
        cbs.reset()
        try:
            cbs.attach(ev, t)
            target.queue.finish()
            out[t] = None if cbs.drain(1, timeout_s=5.0) == 1 else "registered, but the callback never ran"
        except CallbackUnsupported as exc:
            target.queue.finish()
            out[t] = str(exc)
    return out


def _f32(x: float):
    import numpy as np

    return np.float32(x)


# --- waiting on another thread ----------------------------------------------------------------

class WaitThread:
    """A thread that waits on each event handed to it, in order (the seed's clWaitForEvents loop).

    ``wait`` is ``clWaitForEvents`` through pyopencl (it releases the GIL while blocked) or
    any blocking call taking the item (CUDA: ``Event.synchronize``).
    """

    _STOP = object()

    def __init__(self, wait=None):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._wait = wait
        self.waited = 0
        self.error: BaseException | None = None
        self._t = threading.Thread(target=self._loop, daemon=True, name="event-waiter")
        self._t.start()

    def _loop(self) -> None:
        wait = self._wait
        if wait is None:
            import pyopencl as cl

            wait = lambda ev: cl.wait_for_events([ev])  # noqa: E731
        while True:
            item = self._q.get()
            if item is self._STOP:
                return
            try:
                wait(item)
                self.waited += 1
            except BaseException as exc:  # surfaced by join(): a failed wait must not look like a fast one
                self.error = exc

    def put(self, event) -> None:
        self._q.put(event)

    def join(self) -> int:
        self._q.put(self._STOP)
        self._t.join()
        if self.error is not None:
            raise self.error
        return self.waited
