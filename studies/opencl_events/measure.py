"""The seed's three OpenCL experiments, one class each, and the sweep that drives them.

Clock: ``time.perf_counter_ns`` on the host around R repetitions, from the first enqueue
until the queue has finished *and* every callback or wait of those R runs has returned
(callbacks can trail ``clFinish``; the work is not done for the application until they
ran). One sample = that total / R, as in the seed ("time per run measured from the total
time of 1024 repetitions").
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from workbench.data.record import VariantResult
from workbench.seam.study import RunContext, Steps

from . import clrt
from .analysis import MIN_REPS

GAIN, OFFSET = 1.5, 0.25
# Worker trees of the dependency experiment: branching factor per level below the root.
TREES = {7: (2, 2), 28: (3, 2, 3)}  # 7 = 1 + 2 + 2*2, 28 = 1 + 3 + 3*2 + 3*2*3
STEP_GAIN, STEP_MIX = 0.5, 0.5


def combo_label(combo: str) -> str:
    """``"001"`` -> ``"(0,0,1)"``: the seed's (CL_SUBMITTED, CL_RUNNING, CL_COMPLETE) tuple."""
    return "(" + ",".join(combo) + ")"


def dep_label(unmap: bool, wait: bool, cb: bool) -> str:
    flags = [name for name, on in (("unmap", unmap), ("wait", wait), ("cb", cb)) if on]
    return ",".join(flags) if flags else "plain"


DEP_CONDITIONS = [(u, w, c) for u in (False, True) for w in (False, True) for c in (False, True)]


@dataclass
class Outcome:
    """What one timed batch left behind: per-run ns and, if something was off, why."""

    ns_per_run: float
    problem: str | None = None


def _close(a: np.ndarray, ref: np.ndarray) -> tuple[bool, str]:
    # One rounding of a multiply-add may be fused (fma) on the device: allow a few ulps.
    ok = np.allclose(a, ref, rtol=1e-5, atol=1e-6)
    if ok:
        return True, f"matches NumPy on {a.size} elements"
    bad = int(np.argmax(~np.isclose(a, ref, rtol=1e-5, atol=1e-6)))
    return False, f"element {bad}: got {a[bad]!r}, NumPy {ref[bad]!r}"


# --- experiments 1 and 2: one kernel per run, with callbacks or a waiting thread ----------------

class KernelRuns:
    """R runs of ``scale_offset`` over one buffer; conditions add callbacks or a waiter thread.

    Condition names: ``"SRC"`` bit strings (callbacks on CL_SUBMITTED, CL_RUNNING,
    CL_COMPLETE; ``"000"`` is none) or ``"wait"`` (clWaitForEvents on another thread).
    """

    def __init__(self, target: clrt.Target, size_bytes: int, cbs: clrt.Callbacks, seed: int = 0):
        cl = target.cl
        self.t = target
        self.cbs = cbs
        self.n = size_bytes // 4
        self.host_in = np.random.default_rng(seed).random(self.n, dtype=np.float32)
        mf = cl.mem_flags
        self.buf_in = cl.Buffer(target.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=self.host_in)
        self.buf_out = cl.Buffer(target.ctx, mf.WRITE_ONLY, size_bytes)
        self.kern = cl.Kernel(target.program, "scale_offset")
        self.kern.set_args(self.buf_in, self.buf_out, np.float32(GAIN), np.float32(OFFSET))

    def verify(self) -> tuple[bool, str]:
        cl = self.t.cl
        out = np.empty(self.n, np.float32)
        cl.enqueue_copy(self.t.queue, out, self.buf_out)
        self.t.queue.finish()
        return _close(out, self.host_in * np.float32(GAIN) + np.float32(OFFSET))

    def prime(self) -> None:
        """Run the kernel once into a poisoned output, so verify() sees this kernel's work."""
        cl = self.t.cl
        cl.enqueue_fill_buffer(self.t.queue, self.buf_out, np.float32(np.nan), 0, self.n * 4)
        cl.enqueue_nd_range_kernel(self.t.queue, self.kern, (self.n,), None)
        self.t.queue.finish()

    def time(self, condition: str, reps: int) -> Outcome:
        cl, q, kern, n = self.t.cl, self.t.queue, self.kern, (self.n,)
        q.finish()
        if condition == "wait":
            waiter = clrt.WaitThread()  # holds each event until it has waited on it
            t0 = time.perf_counter_ns()
            for _ in range(reps):
                waiter.put(cl.enqueue_nd_range_kernel(q, kern, n, None))
            q.finish()
            waited = waiter.join()
            dt = time.perf_counter_ns() - t0
            problem = None if waited == reps else f"the waiting thread returned from {waited} of {reps} waits"
            return Outcome(dt / reps, problem)
        types = [t for bit, (_name, t) in zip(condition, clrt.EXEC_TYPES) if bit == "1"]
        cbs = self.cbs
        cbs.reset()
        events = []  # held until the callbacks ran: the runtime may call back on a released event
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            ev = cl.enqueue_nd_range_kernel(q, kern, n, None)
            for t in types:
                cbs.attach(ev, t)
            events.append(ev)
        q.finish()
        expected = reps * len(types)
        got = cbs.drain(expected) if types else 0
        dt = time.perf_counter_ns() - t0
        problem = None if got == expected else f"{got} of {expected} callbacks ran within 10 s"
        return Outcome(dt / reps, problem)

    def close(self) -> None:
        self.buf_in.release()
        self.buf_out.release()


# --- experiment 3: worker chains, a final kernel into a host-pointer buffer, a map -------------

def tree_parents(workers: int) -> list[int]:
    """Parent worker index of each logical worker (-1 for the root), level by level."""
    parents = [-1]
    level = [0]
    for branch in TREES[workers]:
        nxt = []
        for p in level:
            for _ in range(branch):
                parents.append(p)
                nxt.append(len(parents) - 1)
        level = nxt
    assert len(parents) == workers
    return parents


def dependency_reference(n: int, parents: list[int]) -> np.ndarray:
    """NumPy twin of worker_step for every worker, then combine (same summation order)."""
    i = np.arange(n, dtype=np.uint32)
    slices: list[np.ndarray] = []
    for w, p in enumerate(parents):
        h = i * np.uint32(2654435761) + np.uint32(w * 40503)  # uint32 wrap-around, like the kernel
        inp = (h & np.uint32(0xFFFF)).astype(np.float32) * np.float32(1.0 / 65536.0)
        par = slices[p] if p >= 0 else np.float32(1.0)
        slices.append(inp * np.float32(STEP_GAIN) + par * np.float32(STEP_MIX))
    acc = np.zeros(n, np.float32)
    for s in slices:
        acc = acc + s
    return acc


class DependencyRuns:
    """One run = every worker's next step (chained on its own previous step and its parent's
    step), the final ``combine`` into a host-pointer buffer, and a non-blocking map of it.

    Conditions ``(unmap, wait, cb)``: unmap the mapping after its map event; wait for the
    map event on another thread; a CL_COMPLETE callback on the map event. Without unmap the
    mappings stay open until the batch is timed (the seed's "coding error" case), then are
    released untimed.

    ``host="native"`` enqueues the runs from C (kernels/opencl/event_overhead_host.c's ``wb_dep_time``, the same loop) as
    the seed's C++ test did: the Python loop adds pyopencl's cost to every enqueue, and its
    waiting thread competes with the enqueuing one for the GIL (on an H200 that made waiting
    cost more than a callback, the reverse of the seed's finding).
    """

    def __init__(self, target: clrt.Target, size_bytes: int, workers: int, cbs: clrt.Callbacks,
                 host: str = "python"):
        cl = target.cl
        self.t = target
        self.cbs = cbs
        self.n = size_bytes // 4
        self.parents = tree_parents(workers)
        self.q, self.out_of_order = target.out_of_order_queue()
        mf = cl.mem_flags
        self.buf = cl.Buffer(target.ctx, mf.READ_WRITE, size_bytes * workers)
        self.host = np.zeros(self.n, np.float32)  # the host pointer behind host_buf
        self.host_buf = cl.Buffer(target.ctx, mf.WRITE_ONLY | mf.USE_HOST_PTR, hostbuf=self.host)
        self.steps = []
        for w, p in enumerate(self.parents):
            k = cl.Kernel(target.program, "worker_step")
            k.set_args(self.buf, np.uint32(self.n), np.uint32(w), np.int32(p), np.float32(STEP_GAIN),
                       np.float32(STEP_MIX))
            self.steps.append(k)
        self.combine = cl.Kernel(target.program, "combine")
        self.combine.set_args(self.buf, self.host_buf, np.uint32(self.n), np.uint32(workers))
        self.maps = clrt.RawMaps(cl)
        self.unmaps_refused = 0  # left-open maps whose later unmap the runtime refused (NVIDIA does)
        self.native = None
        if host == "native":
            if cbs.impl != "native":
                raise ValueError("the native loop registers the native callback: use callback_impl=native")
            self.native = clrt.native_dependency_loop()
            self._steps = (ctypes.c_void_p * workers)(*[k.int_ptr for k in self.steps])
            self._parents = (ctypes.c_int * workers)(*self.parents)

    def _time_native(self, condition: tuple[bool, bool, bool], reps: int) -> Outcome:
        unmap, wait, cb = condition
        out = (ctypes.c_longlong * len(clrt.DEP_OUT_FIELDS))()
        self.native(self.q.int_ptr, self._steps, self._parents, len(self.steps), self.combine.int_ptr,
                    self.host_buf.int_ptr, self.n, self.n * 4, reps, int(unmap), int(wait), int(cb), out)
        r = dict(zip(clrt.DEP_OUT_FIELDS, out))
        self.unmaps_refused += r["unmaps_refused"]
        if r["error"]:
            err = r["error"]
            raise RuntimeError(f"{clrt.DEP_ERROR_AT[r['error_at']]} failed with OpenCL error {err} "
                               f"({clrt.CL_ERRORS.get(err, 'error')})")
        problem = None
        if cb and r["callbacks"] != reps:
            problem = f"{r['callbacks']} of {reps} map-event callbacks ran within 10 s"
        if wait and r["waited"] != reps:
            problem = f"the waiting thread returned from {r['waited']} of {reps} waits"
        return Outcome(r["ns"] / reps, problem)

    def time(self, condition: tuple[bool, bool, bool], reps: int) -> Outcome:
        if self.native is not None:
            return self._time_native(condition, reps)
        cl, q, n = self.t.cl, self.q, (self.n,)
        unmap, wait, cb = condition
        cbs = self.cbs
        q.finish()
        cbs.reset()
        waiter = clrt.WaitThread() if wait else None
        keep: list[Any] = []  # events with callbacks, held until the callbacks ran
        open_maps: list[int] = []
        prev_step: list[Any] = [None] * len(self.steps)
        prev_tail: list[Any] = []  # last run's combine + map (+ unmap): WAR hazards on buf and host_buf
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            step_ev = []
            for w, (k, p) in enumerate(zip(self.steps, self.parents)):
                deps = list(prev_tail[:1])  # combine of the last run read every slice
                if prev_step[w] is not None:
                    deps.append(prev_step[w])
                if p >= 0:
                    deps.append(step_ev[p])
                step_ev.append(cl.enqueue_nd_range_kernel(q, k, n, None, wait_for=deps or None))
            prev_step = step_ev
            comb = cl.enqueue_nd_range_kernel(q, self.combine, n, None, wait_for=step_ev + prev_tail[1:])
            ptr, map_ev = self.maps.map_read(q, self.host_buf, self.n * 4, wait_for=[comb])
            tail = [comb, map_ev]
            if cb:
                cbs.attach(map_ev, clrt.CL_COMPLETE)
                keep.append(map_ev)
            if wait:
                waiter.put(map_ev)
            if unmap:
                unmap_ev, err = self.maps.unmap(q, self.host_buf, ptr, wait_for=[map_ev])
                if err:
                    raise RuntimeError(f"clEnqueueUnmapMemObject returned {err} ({clrt.CL_ERRORS.get(err, 'error')})")
                tail.append(unmap_ev)
            else:
                open_maps.append(ptr)
            prev_tail = tail
        q.finish()
        got_cb = cbs.drain(reps) if cb else 0
        waited = waiter.join() if waiter else 0
        dt = time.perf_counter_ns() - t0
        problem = None
        if cb and got_cb != reps:
            problem = f"{got_cb} of {reps} map-event callbacks ran within 10 s"
        if wait and waited != reps:
            problem = f"the waiting thread returned from {waited} of {reps} waits"
        for ptr in open_maps:  # untimed: close the mappings left open
            self.unmaps_refused += self.maps.unmap(q, self.host_buf, ptr)[1] != 0
        q.finish()
        return Outcome(dt / reps, problem)

    def prime(self) -> None:
        """One untimed run into a poisoned host buffer, so verify() sees this run's output."""
        self.t.cl.enqueue_fill_buffer(self.q, self.host_buf, np.float32(np.nan), 0, self.n * 4)
        self.time((True, False, False), 1)

    def verify(self) -> tuple[bool, str]:
        ptr, _ev = self.maps.map_read(self.q, self.host_buf, self.n * 4, blocking=True)
        got = np.ctypeslib.as_array((ctypes.c_float * self.n).from_address(ptr)).copy()
        self.maps.unmap(self.q, self.host_buf, ptr)
        self.q.finish()
        return _close(got, dependency_reference(self.n, self.parents))

    def close(self) -> None:
        self.buf.release()
        self.host_buf.release()


# --- the sweep ----------------------------------------------------------------------------------

@dataclass
class PointResult:
    condition: Any
    samples_ns: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def sweep_point(runs, conditions: list, reps: int, measurements: int,
                on_round: Callable[[int], None], warmup: int = 1) -> dict[Any, PointResult]:
    """Measure every condition ``measurements`` times, conditions interleaved round by round
    (so drift of clocks or load spreads over all of them), after ``warmup`` untimed rounds."""
    res = {c: PointResult(c) for c in conditions}
    for rnd in range(warmup + measurements):
        for c in conditions:
            out = runs.time(c, reps)
            if rnd >= warmup:
                res[c].samples_ns.append(out.ns_per_run)
            if out.problem:
                res[c].problems.append(out.problem)
        on_round(rnd)
    return res


# --- one point of a sweep, recorded ----------------------------------------------------------------

def measure_point(ctx: RunContext, runs, conditions: list, label, point: dict, params, refused,
                   progress: Steps, where: str) -> None:
    """Check the kernels, time the conditions the platform supports (interleaved rounds), check
    again, and record every condition under its ``provider`` name; a refused or unchecked one
    keeps its reason and no samples. One step of ``progress`` per point.

    ``runs`` is a KernelRuns, DependencyRuns or CudaRuns; ``label(c)`` names a condition as the
    seed does; ``refused(c)`` is the platform's refusal of a callback that ``c`` needs, or None.
    """
    def record(c, samples, ok, check, extra=None, blocks=None):
        name = variant_name(point.get("workers"), label(c), point["size_bytes"])
        ctx.record(VariantResult(name, {**point, "provider": label(c)}, samples, ok, check, extra or {},
                                 blocks if samples else None))

    reps = params["reps"]
    progress.say(f"{where}: checking the kernels")
    runs.prime()
    ok, check = runs.verify()
    live = []
    for c in conditions:
        why = refused(c) or (None if ok else f"kernel check failed before timing: {check}")
        if why:
            record(c, [], False, why)
        else:
            live.append(c)
    if not live:
        progress.tick(f"{where}: nothing to time")
        return
    if params["target_ms"]:
        reps = reps_for(runs.time(live[0], min(reps, PILOT_REPS)).ns_per_run, params["target_ms"], reps)
    rounds = params["measurements"] + 1
    res = sweep_point(runs, live, reps, params["measurements"],
                      lambda rnd: progress.say(f"{where}: round {rnd + 1} of {rounds}"))
    blocks = [ctx.block() for _ in range(params["measurements"])]  # one block per round: conditions pair by round
    ok_after, check_after = runs.verify()
    for c in live:
        r = res[c]
        good = ok_after and not r.problems
        msg = (f"before and after timing: {check_after}" if good else
               "; ".join(sorted(set(r.problems))) or f"kernel check failed after timing: {check_after}")
        record(c, r.samples_ns, good, msg, {"reps": reps}, blocks)
    progress.tick(f"{where}: done")


def measure_twin(ctx: RunContext, runs, baseline, name: str, point: dict, params) -> None:
    """The run's A/A null control: a point's baseline timed again, alone and after every other
    point, in a block of its own (``aa:`` variant): its ratio to the first timing is the drift
    between blocks of this run (:func:`workbench.evidence.engine.estimate_drift`)."""
    runs.prime()
    ok, check = runs.verify()
    res = sweep_point(runs, [baseline], params["reps"], params["measurements"], lambda rnd: None)[baseline] \
        if ok else None
    good = ok and not res.problems
    samples = res.samples_ns if good else []
    ctx.record(VariantResult(f"aa:{name}", {**point, "provider": "aa", "twin_of": name}, samples, good,
                             check if good else f"kernel check failed: {check}", {"reps": params["reps"]},
                             [ctx.block()] * len(samples) if samples else None))


PILOT_REPS = 8  # runs of the baseline that set the runs per measurement under target_ms


def reps_for(ns_per_run: float, target_ms: float, reps: int) -> int:
    """Runs per measurement that take about ``target_ms``: at most ``reps``, at least MIN_REPS."""
    return int(min(reps, max(MIN_REPS, round(target_ms * 1e6 / max(ns_per_run, 1.0)))))


def variant_name(workers, label: str, size: int) -> str:
    return (f"w{workers} " if workers else "") + f"{label} {size}B"
