"""Running a study: validation, the machine lock, per-point storage, final status.

The CLI and the app share this path (the app starts the CLI in a subprocess), so anything
the UI shows can be reproduced headless with the run's ``reproduce`` command.

Only one study times kernels on a machine at a time: :func:`machine_lock` takes an
exclusive machine-wide ``flock``, and a second run (another browser session, another
terminal, another user) waits in line rather than timing on a busy machine. While a run
holds the lock, every process it starts dies with it (:mod:`workbench.base.procs`), and a
watchdog stops a run that reports no progress for :func:`stall_limit_s` seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import getpass
import json
import math
import os
import shlex
import signal
import stat
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from ..base import env as envmod
from . import harness
from ..base import interrupt, procs
from ..base import machine_load as load
from ..seam.events import Emitter
from .launcher import LaunchError, Topology
from ..data.record import RunRecord, new_run_id, now_utc
from ..seam.registry import registry
from ..evidence.stats import median_ci_half_width_rel
from ..results.store import Store, StoreError
from ..seam.study import Cancelled, ParamError, RunContext, StudyUnavailable, validate

#: the default lock file: a fixed path, not the temp folder ($TMPDIR differs between shells)
DEFAULT_LOCK = Path("/tmp/perf-workbench-machine.lock")
#: default seconds without progress before the watchdog stops a run
DEFAULT_STALL_S = 1200
#: seconds a stalled run has to reach a checkpoint before the watchdog raises where it is
STALL_GRACE_S = 10.0


class LockError(RuntimeError):
    """The machine lock file cannot be opened; the message says how to fix it."""


class Stalled(RuntimeError):
    """The run reported no progress for too long (the watchdog stopped it)."""


def lock_path() -> Path:
    """``$WORKBENCH_LOCK``, else :data:`DEFAULT_LOCK`: one file per machine, for every user."""
    return Path(os.environ.get("WORKBENCH_LOCK") or DEFAULT_LOCK)


def _lock_name(path: Path) -> str:
    """The lock as the user set it (``WORKBENCH_LOCK=PATH``), or the default path."""
    return f"the machine lock WORKBENCH_LOCK={path}" if os.environ.get("WORKBENCH_LOCK") else f"the machine lock {path}"


def _open_lock(path: Path) -> tuple[int, bool]:
    """(fd, writable). Created mode 0666 so every user can queue on it; a file another user
    created read-only still locks (flock needs no write access), it only cannot say who holds it.
    Only a regular file is a lock: a device (``/dev/full``), a FIFO or a folder is refused by
    name before anything is written to it."""
    try:
        fd, writable = _open_lock_file(path)
    except OSError as exc:
        why = "a symbolic link (never followed)" if exc.errno == errno.ELOOP and path.is_symlink() else \
            exc.strerror or str(exc)
        raise LockError(f"cannot open {_lock_name(path)}: {why}; set WORKBENCH_LOCK to a file every user of this "
                        "machine can read") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
            "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise LockError(f"{_lock_name(path)} is {kind}, not a lock file; set WORKBENCH_LOCK to a regular file every "
                        "user of this machine can read")
    return fd, writable


def _open_lock_file(path: Path) -> tuple[int, bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_NONBLOCK: opening a FIFO would wait for a writer (it is refused once open)
    flags = os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        # Open an existing file without O_CREAT: in a sticky /tmp the kernel refuses O_CREAT on
        # another user's file (fs.protected_regular), even when its mode allows writing.
        return os.open(path, os.O_RDWR | flags), True
    except FileNotFoundError:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o666)
            os.fchmod(fd, 0o666)  # the umask narrowed it
            return fd, True
        except FileExistsError:
            return _open_lock_file(path)  # another process created it in between
    except PermissionError:
        pass
    return os.open(path, os.O_RDONLY | flags), False


def holder_text(raw: str) -> str:
    """What the lock file says about the run holding it, for a queued run's message."""
    try:
        doc = json.loads(raw)
        params = " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
                          for k, v in doc.get("params", {}).items())
        text = (f"study {doc['study']} ({params[:300]}{'...' if len(params) > 300 else ''}) started "
                f"{doc['since']} by {doc.get('user', '?')}, pid {doc['pid']}")
        return " ".join(text.split())
    except (ValueError, KeyError, TypeError, AttributeError):
        return "another run (the lock file does not say which)"


@contextlib.contextmanager
def machine_lock(on_wait: Callable[[str], None] | None = None, study: str = "?",
                 params: dict[str, Any] | None = None) -> Iterator[None]:
    """Exclusive lock for timing on this machine; waits (queues) while another run holds it.

    The lock file (:func:`lock_path`) is machine-wide, so runs into different stores, from
    the CLI, any browser session or any user, never overlap. The holder writes its study,
    parameters and pid into it, which a queued run shows. Processes started while the lock
    is held are killed before it is released."""
    path = lock_path()
    fd, writable = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait(f"queued: waiting for {holder_text(os.pread(fd, 65536, 0).decode(errors='replace'))} to finish")
            _wait_for_lock(fd)
        except OSError as exc:  # a file system or file that cannot be locked (nothing is stored yet)
            raise LockError(f"cannot lock {_lock_name(path)}: {exc.strerror or exc}; set WORKBENCH_LOCK to a "
                            "file on a local file system that every user of this machine can read") from None
        if writable:
            info = json.dumps({"pid": os.getpid(), "user": _user(), "study": study, "params": params or {},
                               "since": now_utc()}, default=str).encode()
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, info, 0)
            except OSError:  # a full disk: who holds the lock goes unsaid, the lock holds all the same
                pass
        try:
            with procs.Children():
                yield
        finally:
            if writable:
                with contextlib.suppress(OSError):  # a file that takes no truncation: the lock goes all the same
                    os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _wait_for_lock(fd: int) -> None:
    """Queue for the lock, a recorded Ctrl-C ending the wait (a blocking ``flock`` would
    resume after the signal and wait for the other run to finish)."""
    while True:
        interrupt.sleep(0.1)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def stall_limit_s() -> float:
    """``$WORKBENCH_STALL_S`` (0 switches the watchdog off), else :data:`DEFAULT_STALL_S`;
    anything but a finite number of seconds >= 0 raises :class:`ParamError` (a NaN limit
    would stop every run at once)."""
    raw = os.environ.get("WORKBENCH_STALL_S", "").strip()
    if not raw:
        return float(DEFAULT_STALL_S)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ParamError("WORKBENCH_STALL_S", f"{raw[:40]!r} is not a number of seconds >= 0 (0 switches the "
                                              "watchdog off)")
    return value


@contextlib.contextmanager
def _watchdog(limit_s: float) -> Iterator[Callable[[], None]]:
    """Yields ``touch``: each call restarts a ``limit_s`` timer; when it runs out, the run
    gets :class:`Stalled` at its next checkpoint, as a Ctrl-C would (:mod:`workbench.base.interrupt`:
    a wait for a child process or the machine lock is one), or where it is when no checkpoint
    came within :data:`STALL_GRACE_S`. Off outside the main thread, where signals cannot be
    handled."""
    if limit_s <= 0 or threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return

    on_alarm = interrupt.alarm_handler(lambda: Stalled(
        f"no progress for {limit_s:g} s: stopped by the watchdog (set WORKBENCH_STALL_S to allow longer, 0 to "
        "switch it off)"), lambda: signal.setitimer(signal.ITIMER_REAL, min(limit_s, STALL_GRACE_S)))
    old = signal.signal(signal.SIGALRM, on_alarm)
    touch = lambda: signal.setitimer(signal.ITIMER_REAL, limit_s)  # noqa: E731
    touch()
    try:
        yield touch
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def set_args(params: dict[str, Any]) -> list[str]:
    """``--set name=value`` arguments for the CLI; a list becomes comma-separated (a sweep)."""
    args = []
    for name, value in params.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        args += ["--set", f"{name}={value}"]
    return args


def reproduce_command(study_id: str, params: dict[str, Any], topology=None, options: str = "") -> str:
    """The exact CLI command that repeats a run with these parameters (and ``options``, e.g.
    :func:`precision_args`); a run started across several nodes (``topology``,
    :class:`workbench.running.launcher.Topology`) adds its node flags and, as a shell comment, what
    every other node runs."""
    cmd = shlex.join(["python", "-m", "workbench", "run", study_id, *set_args(params),
                      *(topology.run_args() if topology else [])]) + options
    if topology is None or topology.nnodes == 1:
        return cmd
    ranks = params.get("world_size")
    per_node = ranks // topology.nnodes if isinstance(ranks, int) else "RANKS_PER_NODE"
    return f"{cmd}  # other nodes: {shlex.join(topology.agent_args(per_node))}"


def _topology():
    """The nodes a run was asked to span (``WORKBENCH_NNODES`` ..., or the CLI's flags); None
    when they are not valid (a study that launches ranks says why)."""
    try:
        return Topology.from_env()
    except LaunchError:
        return None


#: default seconds a run with ``--precision`` may spend before it stops repeating
DEFAULT_PRECISION_CAP_S = 300.0


def check_precision(study: ModuleType, precision: float | None) -> None:
    """A precision target is for studies whose timings repeat through :mod:`workbench.running.harness`
    (they set ``HONOURS_PRECISION = True``); the others would ignore it silently."""
    if precision is None:
        return
    if not 0 < precision <= 0.5:
        raise ParamError("precision", f"{precision:.4g} is not a fraction of the median in (0, 0.5] (e.g. 2%)")
    if not getattr(study, "HONOURS_PRECISION", False):
        able = ", ".join(sid for sid, mod in registry().items() if getattr(mod, "HONOURS_PRECISION", False))
        raise ParamError("precision", f"study {study.ID} does not repeat to a precision target (its samples are not "
                                      f"taken by the workbench harness's repeat loop); studies that do: {able}")


def parse_precision(value: str | float | None, cap_s: float = DEFAULT_PRECISION_CAP_S) -> float | None:
    """``2%``, ``"0.02"`` or ``0.02`` -> 0.02 (None stays None), after checking ``cap_s``
    (``--precision-cap``: ``nan`` would be accepted by every comparison); raises
    :class:`ParamError`."""
    if not (math.isfinite(cap_s) and cap_s > 0):
        raise ParamError("precision-cap", f"{cap_s} is not a number of seconds > 0")
    if value is None:
        return None
    t = str(value).strip()
    try:
        fraction = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ParamError("precision", f"expected a percentage such as 2% (or a fraction such as 0.02), got {value!r}") \
            from None
    if not 0 < fraction <= 0.5:
        raise ParamError("precision", f"{value} is outside (0%, 50%]")
    return fraction


def precision_args(precision: float | None, cap_s: float) -> str:
    """The reproduce command's ``--precision`` options."""
    if precision is None:
        return ""
    cap = "" if cap_s == DEFAULT_PRECISION_CAP_S else f" --precision-cap {cap_s:g}"
    return f" --precision {precision * 100:g}%{cap}"


def precision_run(precision: float | None, cap_s: float):
    """The block in which the study's harness repeats to ``precision`` (a fraction of the
    median) for at most ``cap_s`` seconds in all (:func:`harness.repeat_to_precision`)."""
    return harness.repeat_to_precision(precision, cap_s) if precision is not None else contextlib.nullcontext()


def note_precision(v, precision: float | None) -> None:
    """Record in the variant whether its samples met the precision target."""
    if precision is None or not v.samples_ns:
        return
    half = median_ci_half_width_rel(v.samples_ns)
    v.extra["precision"] = {"target_rel": precision, "half_width_rel": half, "met": bool(half <= precision),
                            "samples": len(v.samples_ns)}


def missed_precision(variants, precision: float | None, cap_s: float, outputs: dict) -> None:
    """A warning in ``outputs["warnings"]`` naming the variants that missed the target."""
    missed = [v.variant for v in variants if not v.extra.get("precision", {}).get("met", True)]
    if precision is not None and missed:
        outputs.setdefault("warnings", []).append(
            f"{len(missed)} variant(s) missed the {precision:.1%} precision target within the {cap_s:g} s cap: "
            f"{', '.join(missed[:10])}{' ...' if len(missed) > 10 else ''}")


@dataclasses.dataclass(frozen=True)
class Plan:
    """A run's parameters, each checked once (:func:`plan`): what :func:`execute_plan` runs."""

    study: ModuleType
    params: dict[str, Any]
    precision: float | None  # a fraction of the median (0.02), or None
    precision_cap_s: float
    stall_s: float


def plan(study: ModuleType, values: dict[str, Any], *, preset: str | None = None,
         precision: str | float | None = None, precision_cap_s: float = DEFAULT_PRECISION_CAP_S) -> Plan:
    """Check a run's arguments before anything is made or measured: ``values`` over ``preset``,
    the precision target (``2%`` or 0.02) and its cap, ``$WORKBENCH_STALL_S``. Raises
    :class:`ParamError` (bad input stores nothing)."""
    params = validate(study, values, preset=preset)
    fraction = parse_precision(precision, precision_cap_s)
    check_precision(study, fraction)
    return Plan(study, params, fraction, precision_cap_s, stall_limit_s())


def execute(study: ModuleType, values: dict[str, Any], store: Store, *, preset: str | None = None,
            precision: str | float | None = None, precision_cap_s: float = DEFAULT_PRECISION_CAP_S,
            **kw) -> RunRecord:
    """:func:`execute_plan` of :func:`plan` (``kw``: its keyword arguments)."""
    return execute_plan(plan(study, values, preset=preset, precision=precision, precision_cap_s=precision_cap_s),
                        store, **kw)


def _as_stored(value: Any) -> Any:
    """``value`` as the store keeps it and reads it back (JSON, ``str`` for the rest)."""
    return json.loads(json.dumps(value, default=str))


class _Stored:
    """A run as this process stores it: each write goes to the store and to ``rec`` as the
    store reads it back, so the run returns what it stored without reading it again (its
    attachments may be megabytes of traces)."""

    def __init__(self, store: Store, rec: RunRecord):
        self.store, self.rec = store, rec
        self.attachments: dict[str, tuple[str, bytes]] = {}

    @staticmethod
    def _variant(v):
        return dataclasses.replace(v, params=_as_stored(v.params), samples_ns=list(v.samples_ns),
                                   extra=_as_stored(v.extra), blocks=None if v.blocks is None else list(v.blocks))

    def add_variant(self, v) -> None:
        self.store.add_variant(self.rec.run_id, v)
        self.rec.variants.append(self._variant(v))

    def replace_variant(self, v) -> None:
        """The variant of the same name (one that gained repeats) replaced, or added."""
        self.store.replace_variant(self.rec.run_id, v)
        same = [i for i, old in enumerate(self.rec.variants) if old.variant == v.variant]
        if same:
            self.rec.variants[same[-1]] = self._variant(v)
        else:
            self.rec.variants.append(self._variant(v))

    def attach(self, name: str, kind: str, data: bytes) -> None:
        self.store.add_attachment(self.rec.run_id, name, kind, data)
        self.attachments[name] = (kind, bytes(data))

    def finish(self, outputs: dict[str, Any]) -> None:
        """Stored complete, with ``outputs`` and the environment as it is now."""
        self.store.update_env(self.rec.run_id, self.rec.env)
        self.rec.finished_utc = self.store.finish(self.rec.run_id, "complete", outputs=outputs)
        self.rec.status, self.rec.outputs, self.rec.env = "complete", _as_stored(outputs), _as_stored(self.rec.env)
        self.rec.attachments = [(n, k, d) for n, (k, d) in sorted(self.attachments.items())]


def execute_plan(plan: Plan, store: Store, *, progress: Callable[[float, str], None] | None = None, cancel=None,
                 events: Emitter | None = None, run_group: dict | None = None) -> RunRecord:
    """Wait for the machine, run, store each point as it lands, return the record as stored.

    ``events``: the run's event stream for a reader in another process (the app): ``start``
    with the run id, ``progress`` (with the study's step count), ``record`` for each point as
    it is stored, then ``done`` or ``error``. Raises :class:`StudyUnavailable`, or
    ``StoreError`` for a read-only store (before anything is measured). A study that fails
    mid-way is stored with status ``failed`` and the error text; points it finished stay.
    Ctrl-C (and SIGTERM, which the CLI turns into Ctrl-C) stores the run as ``interrupted`` and
    re-raises; the signal is recorded and acted on at the run's next checkpoint
    (:mod:`workbench.base.interrupt`), one that came after the last checkpoint is raised once the run
    is stored. An exception raised after the run was stored carries its id as ``run_id``.
    ``precision`` (e.g. 0.02): see :func:`precision_run`. ``run_group`` (``{"id", "index",
    "runs"}``, from ``--repeat-runs``) goes into the outputs.
    """
    study, params = plan.study, plan.params
    reason = study.requires(params)
    if reason:
        raise StudyUnavailable(reason)
    store.check_writable()
    rec = RunRecord(run_id=new_run_id(study.ID), study=study.ID, params=_as_stored(params), env={},
                    created_utc=now_utc(), reproduce=reproduce_command(
                        study.ID, params, _topology(), precision_args(plan.precision, plan.precision_cap_s)))
    stored, emit = _Stored(store, rec), events or Emitter(None)
    ctx: RunContext | None = None  # made under the watchdog below; say() reads its step count

    def say(fraction: float, message: str) -> None:
        if progress:
            progress(fraction, message)
        emit.progress(fraction, message, ctx.step if ctx is not None else None)

    with tagged(store, rec.run_id), interrupt.deferred(), \
            machine_lock(on_wait=lambda m: say(0.0, m), study=study.ID, params=params):
        say(0.0, "measuring the harness floor")
        rec.floor_ns = harness.floor_ns()
        rec.env = envmod.capture()
        store.begin(rec)
        emit.emit("start", run_id=rec.run_id, study=study.ID)
        # Load over the whole run (workbench.base.machine_load): before it, after each variant, after it.
        before = load.sample()

        def run_load() -> dict[str, Any]:
            group = {"run_group": run_group} if run_group else {}
            return {"load": {"before": before, "after": load.sample()}} | group

        try:
            with _watchdog(plan.stall_s) as touch:
                ctx = _context(plan, stored, touch, say, emit, cancel)
                with precision_run(plan.precision, plan.precision_cap_s), interrupt.stops_first():
                    outputs = study.run(params, ctx) or {}
                missed_precision(ctx.variants, plan.precision, plan.precision_cap_s, outputs)
                interrupt.check()  # a stop recorded after the study's last checkpoint
        except (KeyboardInterrupt, Cancelled) as exc:
            end(store, exc, {rec.run_id: run_load()}, "interrupted", "interrupted by the user; finished points were kept")
            raise
        except StudyUnavailable as exc:
            end(store, exc, {rec.run_id: run_load()}, "failed", str(exc))
            emit.error(str(exc))
            raise
        except Exception as exc:
            # the stored (failed) run's id goes with the exception, for callers that keep partial results
            end(store, exc, {rec.run_id: run_load()}, "failed",
                f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
            emit.error(f"{type(exc).__name__}: {exc}")
            raise
        rec.env = envmod.refresh(rec.env)  # torch may have been imported by the study: its CUDA/NCCL versions now
        stored.finish(outputs | run_load())
        emit.done()
    return rec


def _context(plan: Plan, stored: _Stored, touch: Callable[[], None], say: Callable[[float, str], None],
             emit: Emitter, cancel) -> RunContext:
    """The study's side of a run: its progress (each call feeds the watchdog) and its points,
    each with the machine's load and its precision, stored and sent on the event stream."""

    def progress_and_touch(fraction: float, message: str) -> None:
        touch()
        say(fraction, message)

    def recorded(save: Callable[[Any], None]) -> Callable[[Any], None]:
        def on_variant(v) -> None:
            touch()
            v.extra["load"] = load.sample()
            note_precision(v, plan.precision)
            save(v)
            emit.record(v)
        return on_variant

    return RunContext(progress=progress_and_touch, on_record=recorded(stored.add_variant),
                      on_update=recorded(stored.replace_variant), on_attach=stored.attach, cancel=cancel)


def end(store: Store, exc: BaseException, outputs: dict[str, dict[str, Any]], status: str, error: str) -> None:
    """Store the end of the runs that ``exc`` stopped (run id -> its outputs), and tag ``exc``
    with their ids (``run_id``, the first, and ``run_ids``). When the store cannot take the end
    (a full disk) ``exc`` carries why as ``store_error`` instead: the runs then read as
    interrupted once this process is gone, with the points stored before."""
    exc.run_ids = tuple(outputs)
    exc.run_id = exc.run_ids[0]
    try:
        for run_id, out in outputs.items():
            store.finish(run_id, status, outputs=out, error=error)
    except StoreError as problem:
        exc.store_error = str(problem)


@contextlib.contextmanager
def tagged(store: Store, *run_ids: str) -> Iterator[None]:
    """An interrupt raised around runs once they are stored (after their last checkpoint;
    they are then stored complete) carries their ids as ``run_id`` (the first) and
    ``run_ids``, as one raised inside does."""
    try:
        yield
    except (KeyboardInterrupt, Cancelled) as exc:
        if getattr(exc, "run_id", None) is None and store.has(run_ids[0]):
            exc.run_id, exc.run_ids = run_ids[0], run_ids
        raise


def unfinished_text(exc: BaseException, kept: str) -> str:
    """What became of runs whose end the store could not take (``store_error`` on ``exc``, a
    full disk); '' when it took it."""
    why = getattr(exc, "store_error", None)
    ids = " and ".join(getattr(exc, "run_ids", ()))
    if not why or not ids:
        return ""
    why = "" if isinstance(exc, StoreError) else f" ({why})"  # the same store, the same reason
    return f"run {ids} keeps the {kept} stored before it, and reads as interrupted (its end could not be stored{why})"


def failure_text(study: ModuleType, exc: BaseException, kept: str = "points") -> str:
    """The one line for a run that stopped with ``exc``: the study cannot run here; the store
    could not take it (a full disk: before it started, or mid-way); or it failed, stored as a
    failed run that keeps its finished ``kept`` once a run was stored (``run_ids`` on ``exc``,
    :func:`end`), else nothing stored."""
    if isinstance(exc, StudyUnavailable):
        return f"study {study.ID} cannot run here: {exc}"
    ids = " and ".join(getattr(exc, "run_ids", ()))
    unfinished = unfinished_text(exc, kept)
    if isinstance(exc, StoreError):
        stored = f"stored as failed run {ids} with the {kept} finished before" if ids else ""
        return "; ".join(filter(None, [str(exc), unfinished or stored]))
    stored = f"stored as failed run {ids}; finished {kept} kept" if ids else "nothing was stored"
    return f"study {study.ID} failed: {type(exc).__name__}: {exc} ({unfinished or stored})"


def interrupted_text(store: Store, run_id: str | None) -> str:
    """What an interrupt kept: 'interrupted; 3 points kept in run X' (or none, or before a
    run was stored, or a run that was stored complete: the signal came after its last
    checkpoint)."""
    if run_id is None:
        return "interrupted before the run started; nothing was stored"
    try:
        rec = store.load(run_id, attachments=False)
        kept, status = len(rec.variants), rec.status
    except (StoreError, KeyError):
        kept, status = None, None
    if status == "complete":
        return f"interrupted as run {run_id} finished; it is stored complete"
    if kept == 0:
        return f"interrupted before any point finished; run {run_id} is stored without points"
    return f"interrupted; {'the' if kept is None else kept} finished point{'' if kept == 1 else 's'} kept in run {run_id}"


def execute_keep_partial(study: ModuleType, values: dict[str, Any], store: Store, **kw) -> tuple[RunRecord, str | None]:
    """:func:`execute`, except that a study failing mid-way returns its stored record (status
    ``failed``, the points it finished) and the error text instead of raising. Bad parameters
    and an unavailable study still raise: nothing was stored for them."""
    try:
        return execute(study, values, store, **kw), None
    except (ParamError, StudyUnavailable, KeyboardInterrupt, Cancelled):
        raise
    except Exception as exc:
        run_id = getattr(exc, "run_id", None)
        if run_id is None:
            raise
        return store.load(run_id), f"{type(exc).__name__}: {exc}"
