"""Running a study: validation, the machine lock, per-point storage, final status.

The CLI and the app share this path (the app starts the CLI in a subprocess), so anything
the UI shows can be reproduced headless with the run's ``reproduce`` command.

Only one study times kernels on a machine at a time: :func:`machine_lock` takes an
exclusive machine-wide ``flock``, and a second run (another browser session, another
terminal) waits in line rather than timing on a busy machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
import tempfile
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from . import env as envmod
from . import harness
from .store import RunRecord, Store, committed_runs, new_run_id, now_utc, write_run_bundle
from .study import Cancelled, ParamError, RunContext, StudyUnavailable, validate

LOCK_NAME = "perf-workbench-machine.lock"


@contextlib.contextmanager
def machine_lock(on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Exclusive lock for timing on this machine; waits (queues) while another run holds it.

    The lock file is machine-wide (``$WORKBENCH_LOCK``, else in the system temp folder), so
    runs into different stores, from the CLI or any browser session, never overlap."""
    # One lock per machine, not per store: runs into different stores still share the CPUs.
    lock_path = Path(os.environ.get("WORKBENCH_LOCK", str(Path(tempfile.gettempdir()) / LOCK_NAME)))
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            if on_wait:
                on_wait(f"queued: waiting for {holder} to finish")
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} since {now_utc()}")
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)


def set_args(params: dict[str, Any]) -> list[str]:
    """``--set name=value`` arguments for the CLI; a list becomes comma-separated (a sweep)."""
    args = []
    for name, value in params.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        args += ["--set", f"{name}={value}"]
    return args


def reproduce_command(study_id: str, params: dict[str, Any]) -> str:
    """The exact CLI command that repeats a run with these parameters."""
    return shlex.join(["python", "-m", "workbench", "run", study_id, *set_args(params)])


def execute(
    study: ModuleType,
    values: dict[str, Any],
    store: Store,
    *,
    preset: str | None = None,
    progress: Callable[[float, str], None] | None = None,
    cancel=None,
) -> RunRecord:
    """Validate, wait for the machine, run, store each point as it lands, return the record.

    Raises :class:`ParamError` (nothing stored) or :class:`StudyUnavailable`. A study that
    fails mid-way is stored with status ``failed`` and the error text; points it finished
    stay. Ctrl-C stores the run as ``interrupted`` and re-raises.
    """
    params = validate(study, values, preset=preset)
    reason = study.requires(params)
    if reason:
        raise StudyUnavailable(reason)
    rec = RunRecord(run_id=new_run_id(study.ID), study=study.ID, params=params, env={}, created_utc=now_utc(),
                    reproduce=reproduce_command(study.ID, params))
    say = progress or (lambda f, m: None)
    with machine_lock(on_wait=lambda m: say(0.0, m)):
        say(0.0, "measuring the harness floor")
        rec.floor_ns = harness.floor_ns()
        rec.env = envmod.capture()
        store.begin(rec)
        ctx = RunContext(progress=progress, on_record=lambda v: store.add_variant(rec.run_id, v),
                         on_attach=lambda n, k, d: store.add_attachment(rec.run_id, n, k, d), cancel=cancel)
        try:
            outputs = study.run(params, ctx) or {}
        except (KeyboardInterrupt, Cancelled):
            store.finish(rec.run_id, "interrupted", error="interrupted by the user; finished points were kept")
            raise
        except StudyUnavailable as exc:
            store.finish(rec.run_id, "failed", error=str(exc))
            raise
        except Exception as exc:
            store.finish(rec.run_id, "failed", error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
            exc.run_id = rec.run_id  # the stored (failed) run, for callers that keep partial results
            raise
        # Torch may have been imported by the study: read its CUDA/NCCL versions now.
        rec.env = envmod.refresh(rec.env)
        store.update_env(rec.run_id, rec.env)
        store.finish(rec.run_id, "complete", outputs=outputs)
    return store.load(rec.run_id)


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


def run_benchmark(study: ModuleType, values: dict[str, Any], show: Callable[[RunRecord], bool], *,
                  bundle_dir: Path | None = None, bundle_stem: str = "bench", unavailable_status: int = 2) -> int:
    """The benchmark scripts' run: execute in a fresh store (progress on stderr), keep and
    bundle a failed run's finished points, print the table with ``show``. Without the hardware
    it prints the committed runs instead and returns ``unavailable_status``; bad parameters
    return 2. Otherwise 0 when the run finished and ``show`` says every check (and target) held."""
    try:
        rec, error = execute_keep_partial(study, values, Store(),
                                          progress=lambda f, m: print(f"[{f:4.0%}] {m}", file=sys.stderr, flush=True))
    except ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StudyUnavailable as exc:
        recs = committed_runs(study.ID)
        print(f"cannot run here: {exc}\ncommitted results ({len(recs)} runs under traces/{study.ID}/):")
        for committed in recs:
            show(committed)
        return unavailable_status
    if error:
        print(f"run failed: {error}", file=sys.stderr)
    if bundle_dir:
        print(f"bundle: {write_run_bundle(rec, bundle_dir, bundle_stem, bool(error))}", file=sys.stderr)
    return 0 if show(rec) and not error else 1
