"""Background study runs for the app: a CLI subprocess per run, polled for progress.

The app never times kernels in its own process: a run is ``python -m workbench run ...`` in
a subprocess, so it survives widget interaction and reruns, and the machine lock in
``workbench.running.runner`` queues runs from several browser sessions instead of timing them on top
of each other.

The app owns its jobs: a job whose owner is gone (``owner_alive`` says False for
:data:`ORPHAN_GRACE_S`, e.g. its browser session ended) is cancelled, so a closed tab cannot
hold the machine lock; a cancelled job that has not stopped after :data:`KILL_AFTER_S` is
killed with its process group; and the app's exit cancels the jobs it started.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..base.env import REPO_ROOT
from ..seam.events import Collected, EventError, EventTail, apply, parse
from .runner import set_args

#: seconds an owner may be gone (a reloading tab reconnects within them) before its job is cancelled
ORPHAN_GRACE_S = 30.0
#: seconds a cancelled job has to store its points and exit before it is killed
KILL_AFTER_S = 30.0
REAP_EVERY_S = 2.0


@dataclass
class Job:
    """One CLI run started by the app. Its event stream (``--progress-file``, see
    :mod:`workbench.seam.events`) says which run it stores, how far it got and each point as it
    is stored; stdout has the final ``--json`` record, stderr only what went wrong."""

    study: str
    proc: subprocess.Popen
    progress_path: Path
    stdout_path: Path
    stderr_path: Path
    command: list[str]
    started: float = field(default_factory=time.time)
    #: False once whoever started the job (a browser session) is gone; None: never orphaned
    owner_alive: Callable[[], bool] | None = None
    cancelled: float | None = None  # monotonic time of the cancel request
    cancel_reason: str = ""
    owner_gone_since: float | None = None
    state: Collected = field(default_factory=Collected)
    bad_events: int = 0
    _tail: EventTail | None = None
    _ended: float | None = None

    def poll(self) -> Collected:
        """The events that arrived since the last call, folded into :attr:`state` (run id,
        progress, step count, the points stored so far)."""
        if self._tail is None:
            self._tail = EventTail(self.progress_path)
        for line in self._tail.poll_lines():
            try:
                apply(parse(line), None, self.state, self.progress_path.parent)
            except (EventError, KeyError, TypeError, ValueError):
                self.bad_events += 1  # a stream from another version: progress is a courtesy
        return self.state

    def progress(self) -> tuple[float, str]:
        """(fraction, message) of the last progress event; (0.0, "starting") before any."""
        fraction, message = self.poll().progress
        return (fraction, message) if message or fraction else (0.0, "starting")

    def elapsed_s(self) -> float:
        """Seconds since the job started, frozen when it ended."""
        if self.done and self._ended is None:
            self._ended = time.time()
        return (self._ended or time.time()) - self.started

    @property
    def done(self) -> bool:
        return self.proc.poll() is not None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    @property
    def was_cancelled(self) -> bool:
        """Ended by a cancel (the user's, or a closed session's): exit 130 after :meth:`cancel`."""
        return self.cancelled is not None and self.returncode == 130

    def record(self) -> dict[str, Any] | None:
        """The run record the CLI printed (``--json``), once finished."""
        if not self.done:
            return None
        try:
            return json.loads(self.stdout_path.read_text() or "null")
        except (OSError, ValueError):
            return None

    def error_text(self) -> str:
        """The last lines of stderr (only errors: the CLI draws no bar when it writes events)."""
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-20:])

    def cleanup(self) -> None:
        """Remove the job's folder (progress, stdout, stderr) once its record and error were read."""
        shutil.rmtree(self.progress_path.parent, ignore_errors=True)

    def cancel(self, reason: str = "cancelled by the user", now: float | None = None) -> None:
        """Interrupt (SIGINT): the runner stores the run as interrupted, keeping its points,
        and kills the processes it started; :func:`reap` kills it if it does not stop."""
        if not self.done:
            self.cancelled = self.cancelled or (time.monotonic() if now is None else now)
            self.cancel_reason = self.cancel_reason or reason
            self.proc.send_signal(signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL to the job's process group (the CLI and the children it did not move out)."""
        if not self.done:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass


_JOBS: list[Job] = []
_LOCK = threading.Lock()
_REAPER: threading.Thread | None = None


def reap(now: float | None = None) -> None:
    """One pass over this process's jobs: cancel orphans, kill cancelled jobs that hang on."""
    now = time.monotonic() if now is None else now
    with _LOCK:
        live = [j for j in _JOBS if not j.done]
        _JOBS[:] = live
    for job in live:
        alive = True
        if job.owner_alive is not None:
            try:
                alive = job.owner_alive()
            except Exception:  # noqa: BLE001 - an owner check must never stop the reaper
                alive = True
        if alive:
            job.owner_gone_since = None
        else:
            job.owner_gone_since = job.owner_gone_since or now
            if now - job.owner_gone_since >= ORPHAN_GRACE_S:
                job.cancel("its browser session ended", now)
        if job.cancelled is not None and now - job.cancelled >= KILL_AFTER_S:
            job.kill()


def _reaper_loop() -> None:
    while True:
        time.sleep(REAP_EVERY_S)
        reap()


def _cancel_all_at_exit() -> None:
    with _LOCK:
        live = [j for j in _JOBS if not j.done]
    for job in live:
        job.cancel("the app stopped")
    deadline = time.monotonic() + 10
    for job in live:
        try:
            job.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            job.kill()


def _track(job: Job) -> None:
    global _REAPER
    with _LOCK:
        _JOBS.append(job)
        if _REAPER is None:
            _REAPER = threading.Thread(target=_reaper_loop, name="workbench-job-reaper", daemon=True)
            _REAPER.start()
            atexit.register(_cancel_all_at_exit)


def start(study_id: str, values: dict[str, Any], quick: bool = False, store_path: str | os.PathLike | None = None,
          owner_alive: Callable[[], bool] | None = None) -> Job:
    workdir = Path(tempfile.mkdtemp(prefix="wb-job-"))
    progress_path, stdout_path, stderr_path = workdir / "progress.jsonl", workdir / "out.json", workdir / "err.txt"
    cmd = [sys.executable, "-m", "workbench"]
    if store_path:
        cmd += ["--store", str(store_path)]
    cmd += ["run", study_id, *set_args(values), "--json", "--progress-file", str(progress_path)]
    if quick:
        cmd.append("--quick")
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        # A session (and process group) of its own: a hard kill reaches the run's children too.
        proc = subprocess.Popen(cmd, cwd=str(REPO_ROOT), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    job = Job(study_id, proc, progress_path, stdout_path, stderr_path, cmd, owner_alive=owner_alive)
    _track(job)
    return job
