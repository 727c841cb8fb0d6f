"""Ctrl-C, SIGTERM and SIGHUP during a measurement: recorded by the handler, acted on by the run.

Python runs a signal handler in the main thread at the next bytecode, wherever that is: in
a ctypes callback called from C (opencl-events), in an at-fork hook of ``subprocess``, in
``logging``'s lock release. An exception raised there is printed as "Exception ignored"
and dropped, and the run timed on until a second signal (3 of 201 interrupts were lost so).
Outside a run it is the same: an import wrapped in a bare ``except:`` swallowed it while the
CLI started (1 SIGTERM in 8 at 0.2 s). So the handler (:func:`on_signal`, set by
:func:`handled` for the CLI's whole life) raises nothing: it records which signal came,
sets :data:`requested` and writes a byte to a pipe that wakes any :func:`sleep`. The code
raises ``KeyboardInterrupt`` itself at its checkpoints (:func:`check`): between samples
(:mod:`workbench.running.harness`), when a study reports progress or a point
(:class:`workbench.seam.study.RunContext`), while it waits for a child process
(:func:`workbench.base.procs.run`, :func:`workbench.base.procs.wait`), queues for the machine lock or
follows torchrun, and where the CLI has imported itself and ends a command. A signal that
comes after a run's last checkpoint is raised when the measuring block (:func:`deferred`)
ends, so an interrupted command still exits 130.

A second signal while the first one waits raises at once: the way out of code where no
checkpoint comes (a study's own endless loop, a long report), at the old risk of a lost
raise. The watchdog's alarm (:mod:`workbench.running.runner`) goes the same way with its own
exception, and re-arms itself to raise at once if no checkpoint takes the recorded stop in
time. Signals reach only the main thread; elsewhere :func:`deferred` changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from typing import Callable, Iterator

#: the signals a run turns into an interrupt (a closed terminal sends SIGHUP, ``kill`` SIGTERM)
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_deferring = 0
_pending: BaseException | None = None
_wake_r, _wake_w = -1, -1
#: set when a stop was requested; for threads and loops that wait on an event
requested = threading.Event()


def _open_pipe() -> None:
    global _wake_r, _wake_w
    if _wake_r < 0:
        _wake_r, _wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)


def request(exc: BaseException) -> None:
    """Record a stop (first one wins): the next :func:`check` raises ``exc``. Safe in a
    signal handler: it sets a flag and writes one byte to a non-blocking pipe."""
    global _pending
    if _pending is None:
        _pending = exc
    requested.set()
    if _wake_w >= 0:
        try:
            os.write(_wake_w, b"\0")
        except OSError:  # full: a wake-up is already waiting
            pass


def check() -> None:
    """A checkpoint: raise the recorded stop (``KeyboardInterrupt`` for a signal). It stays
    recorded until the measuring block ends, so a study that catches it (``except
    Exception`` around a variant catches the watchdog's) meets it again at the next one."""
    if _pending is not None:
        raise _pending.with_traceback(None)


def sleep(seconds: float) -> None:
    """Sleep, but return at once when a stop is recorded (or was before); then :func:`check`."""
    if _pending is None and seconds > 0:
        if _wake_r >= 0 and threading.current_thread() is threading.main_thread():
            select.select([_wake_r], [], [], seconds)
            _drain()
        else:
            requested.wait(seconds)
    check()


def _drain() -> None:
    try:
        while os.read(_wake_r, 512):
            pass
    except OSError:  # empty
        pass


def on_signal(signum, frame) -> None:
    """The handler of :data:`SIGNALS`: an interrupt recorded, for the next checkpoint; raised
    now when one is recorded already (a second Ctrl-C)."""
    _open_pipe()
    exc = KeyboardInterrupt(signal.Signals(signum).name)
    if _pending is None:
        request(exc)
    else:
        raise exc


@contextlib.contextmanager
def handled(signals=SIGNALS) -> Iterator[None]:
    """:func:`on_signal` handles ``signals`` within the block (the CLI's whole command), the
    previous handlers after. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """The measuring block: a stop recorded before it or in it is raised at its checkpoints,
    or at its end, unless an exception (that one, raised at a checkpoint) is on its way out;
    none is left recorded after it.

    Where a signal of :data:`SIGNALS` still has Python's default handling (the Python API in a
    script or a notebook kernel: SIGINT raises at once, SIGTERM and SIGHUP end the process
    with the run left ``running``), :func:`on_signal` takes it over for the block, so the run
    stops as it does in the CLI."""
    global _deferring, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _open_pipe()
    _drain()
    defaults = {signal.SIGINT: signal.default_int_handler}
    taken = {sig: signal.signal(sig, on_signal) for sig in SIGNALS
             if signal.getsignal(sig) is defaults.get(sig, signal.SIG_DFL)}
    _deferring += 1
    try:
        yield
        if _deferring == 1:
            check()  # the stop came after the last checkpoint
    finally:
        _deferring -= 1
        for sig, handler in taken.items():
            signal.signal(sig, handler)
        if not _deferring:
            _pending = None
            requested.clear()


@contextlib.contextmanager
def stops_first() -> Iterator[None]:
    """An exception raised in the block once a stop is recorded is taken for its
    consequence (a child process that the terminal's Ctrl-C reached as well failed), and the
    stop is raised instead."""
    try:
        yield
    except Exception as exc:
        if _pending is not None:
            raise _pending.with_traceback(None) from exc
        raise


def alarm_handler(make: Callable[[], BaseException], rearm: Callable[[], None]) -> Callable:
    """A SIGALRM handler that records ``make()`` like an interrupt (raised at a checkpoint)
    while measuring and calls ``rearm`` (the alarm again after a grace); when a stop is
    recorded already (the grace ran out without a checkpoint), or outside measuring, it
    raises at once."""
    def handler(signum, frame) -> None:
        if _deferring and _pending is None:
            request(make())
            rearm()
        else:
            raise (_pending or make()).with_traceback(None)
    return handler
