"""Processes a run starts die with it, so nothing times after the machine lock is released.

A study starts measurement processes: the launch-cache C program, ``iree-benchmark-module``,
``torchrun`` and its workers (in a session of their own). Three mechanisms, all in
:class:`Children`, which the runner holds while it holds the machine lock:

- on exit (normal end, exception, Ctrl-C, SIGTERM) every process started since, found in
  ``/proc`` by parent pid (this process is a child subreaper meanwhile, so a descendant whose
  parent died stays in its tree), every process group led by one of them, and every process
  carrying this run's token (below) get SIGTERM, then SIGKILL after :data:`GRACE_S`.
  Processes that existed before (an app server a test started) are spared;
- the run's token, ``$WORKBENCH_RUN_TOKEN``, is in the environment every child inherits; a
  sentinel process (its own session, idle on a pipe) kills every process carrying it when
  this process dies without saying goodbye, even by SIGKILL;
- :func:`bound` wraps a command so that the child gets a signal as soon as the thread that
  started it dies (``PR_SET_PDEATHSIG``), without waiting for the sentinel.

No ``preexec_fn`` anywhere: it runs Python between fork and exec (the at-fork hooks too),
where a signal's handler could run as well. The parent-death signal is set after the exec
instead, by a few lines of Python that then exec the command (:func:`bound`), or by the
program itself (the launch-cache C program's ``parent=``). :func:`run` and :func:`wait` wait
for a child the way a run must: a recorded Ctrl-C or SIGTERM (:mod:`workbench.base.interrupt`)
ends the wait within :data:`POLL_S`.

A launcher keeps all of this working by starting its processes from the thread that runs the
study, through :func:`bound`, and not removing ``WORKBENCH_RUN_TOKEN`` from the
environment it gives them. Linux only (``/proc``, ``prctl``); elsewhere the runner's own
handling of the study's exceptions is all there is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from . import interrupt

GRACE_S = 3.0
#: longest a wait for a child goes without looking for a recorded interrupt
POLL_S = 0.1
TOKEN_VAR = "WORKBENCH_RUN_TOKEN"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37

try:
    _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True) if os.name == "posix" else None
    _PRCTL = _LIBC.prctl if _LIBC is not None and Path("/proc/self/stat").exists() else None
except (OSError, AttributeError):
    _PRCTL = None


def _stat(pid: int | str) -> tuple[int, int, str] | None:
    """(parent pid, process group, start time in clock ticks since boot) of ``pid``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the name in (...) may hold spaces and ')'
    try:
        return int(fields[1]), int(fields[2]), fields[19]
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot): a reused pid has another value; '' when gone."""
    st = _stat(pid)
    return st[2] if st else ""


def _table() -> dict[int, tuple[int, int, str]]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(entry)
            if st:
                out[int(entry)] = st
    return out


def descendants(root: int | None = None) -> dict[int, str]:
    """Every process below ``root`` (default: this one) by parent pid, plus the members of
    the process groups they lead: pid -> start ticks."""
    root = os.getpid() if root is None else root
    if not Path("/proc").is_dir():
        return {}
    table = _table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _pgid, _start) in table.items():
        kids.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(kids.get(pid, []))
    leaders = {pid for pid in found if table[pid][1] == pid}
    found |= {pid for pid, (_ppid, pgid, _start) in table.items() if pgid in leaders and pid != root}
    return {pid: table[pid][2] for pid in found if pid in table}


def carrying(token: str) -> dict[int, str]:
    """Processes whose environment holds ``TOKEN_VAR=token``: pid -> start ticks."""
    needle = f"{TOKEN_VAR}={token}".encode()
    out = {}
    for entry in os.listdir("/proc") if Path("/proc").is_dir() else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            ticks = start_ticks(int(entry))
            if ticks:
                out[int(entry)] = ticks
    return out


# The sentinel: idle on its stdin (a pipe from the run's process); "done" ends it quietly,
# end-of-file (the run's process died) makes it kill every process that carries the token.
_SENTINEL = r"""
import sys
sys.path.insert(0, sys.argv[2])
if sys.stdin.read() != "done":
    from workbench.base import procs
    procs.kill(procs.carrying(sys.argv[1]))
"""


def _prctl(option: int, value: int) -> bool:
    if _PRCTL is None:
        return False
    return _PRCTL(option, value, 0, 0, 0) == 0


# Runs in the child after its exec: asks for the signal, makes sure the parent is still the
# one that started it (it may have died before prctl), then becomes the command.
_BOUND = ("import ctypes, os, sys\n"
          "ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[1]), 0, 0, 0)  # PR_SET_PDEATHSIG\n"
          "if os.getppid() != int(sys.argv[2]):\n"
          "    os._exit(1)\n"
          "os.execvp(sys.argv[3], sys.argv[3:])\n")


def bound(cmd: Sequence[str], sig: int = signal.SIGKILL) -> list[str]:
    """``cmd`` so that it gets ``sig`` when the thread that starts it dies, SIGKILL included
    (start it from the main thread); ``cmd`` itself where Linux has no ``prctl``."""
    if _PRCTL is None:
        return list(cmd)
    return [sys.executable, "-I", "-S", "-c", _BOUND, str(int(sig)), str(os.getpid()), *cmd]


def run(cmd: Sequence[str], timeout_s: float, input: str | None = None, **popen) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout_s)``
    that a recorded interrupt ends: the child is killed and reaped, then the interrupt raised."""
    proc = subprocess.Popen(list(cmd), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                # input goes with the first call only: a repeated communicate() goes on where it was
                out, err = proc.communicate(input, timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
                interrupt.check()  # a child that a terminal's Ctrl-C ended too is no result
                return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                input = None
                interrupt.check()
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(proc.args, timeout_s) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def wait(proc: subprocess.Popen, timeout_s: float | None = None) -> int:
    """``proc.wait(timeout_s)``, raising a recorded interrupt within :data:`POLL_S` (the
    caller ends ``proc`` on the way out, as on any exception)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        interrupt.check()
        step = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
        try:
            code = proc.wait(step)
            interrupt.check()
            return code
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout_s) from None


def kill(pids: dict[int, str], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM, then SIGKILL after ``grace_s``, to the processes (pid -> start ticks) that
    are still the same processes; returns the pids that were signalled."""
    alive = {pid: t for pid, t in pids.items() if start_ticks(pid) == t}
    for pid in alive:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(alive)
        if all(start_ticks(pid) != t or _zombie(pid) for pid, t in alive.items()):
            break
        time.sleep(0.05)
    for pid, t in alive.items():
        if start_ticks(pid) == t and not _zombie(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    _reap(alive)
    return sorted(alive)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _reap(pids) -> None:
    """Collect our own children among ``pids`` that exited (adopted orphans have no Popen)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


class Children:
    """Context manager: on exit, kill every process started below this one since entry, and
    have a sentinel do it should this process die first (see the module docstring)."""

    def __enter__(self) -> "Children":
        self.before = descendants()
        self._was_subreaper = None
        if _PRCTL is not None:
            flag = ctypes.c_int(0)
            if _PRCTL(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0:
                self._was_subreaper = flag.value
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        self.token = secrets.token_hex(12)
        self._old_token = os.environ.get(TOKEN_VAR)
        self.sentinel = None
        if Path("/proc").is_dir():
            env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
            self.sentinel = subprocess.Popen([sys.executable, "-I", "-c", _SENTINEL, self.token,
                                              str(Path(__file__).resolve().parents[2])],
                                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             env=env, start_new_session=True, text=True)
        os.environ[TOKEN_VAR] = self.token
        return self

    def kill_new(self) -> list[int]:
        new = {pid: t for pid, t in descendants().items() if self.before.get(pid) != t}
        new.update(carrying(self.token))
        if self.sentinel is not None:
            new.pop(self.sentinel.pid, None)
        return kill(new) if new else []

    def __exit__(self, *exc) -> None:
        try:
            self.kill_new()
        finally:
            if self._old_token is None:
                os.environ.pop(TOKEN_VAR, None)
            else:
                os.environ[TOKEN_VAR] = self._old_token
            if self.sentinel is not None:
                try:
                    self.sentinel.communicate("done", timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self.sentinel.kill()
                    self.sentinel.wait()
            if self._was_subreaper is not None:
                _prctl(_PR_SET_CHILD_SUBREAPER, self._was_subreaper)
