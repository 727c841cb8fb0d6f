"""Interrupt stress: SIGINT and SIGTERM at random times into runs of the CPU studies, under a
background load; none may be lost.

    python benchmarks/interrupts.py                       # 500 tries, load 2, 4 at a time
    python benchmarks/interrupts.py --tries 100 --studies calibration,launch-cache --json

Each try runs one study's long sweep (:data:`SWEEPS`: each would time on for a minute or
more) through the CLI with its own store and machine lock, sends it one signal (SIGINT or
SIGTERM, alternating) at a time drawn uniformly from ``0 .. WINDOW_S[study]`` seconds after
its run took the machine lock (its first progress line), or, for one try in five, from its
start (so some land while the CLI starts and queues): most land while it measures, in a child
process, a ctypes callback, between phases. Then it judges the try:

- **lost**: the process had not exited ``--stop-s`` seconds after the signal (it is then
  killed), or it went on to finish its sweep;
- **wrong**: it exited, but not with 130 (Ctrl-C before the CLI set its handlers is the one
  excused case: nothing stored), or the store fails ``PRAGMA integrity_check``, or its run
  is not ``interrupted`` (an interrupt that came before the run was stored leaves none), or
  a process the run started (found by a marker in its environment) is still there
  :data:`LEFTOVER_S` seconds after the exit.

The loss rate's upper bound is the one-sided 95% Clopper-Pearson bound: with 0 lost in n
tries, ``1 - 0.05 ** (1 / n)`` (0.6% for 500, 3.0% for 100). ``--load N`` runs N busy loops
beside the tries. ``--mode fork`` (the default) imports the CLI and the studies once and
forks one child per try that calls the CLI's ``main``, so a try costs its run, not Python's
imports (which is what lets a test drive 100 of them in CI's time); ``--mode exec`` starts
``python -m workbench`` per try, exactly as a user does. Exit status 1 when one was lost or
wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._run import Session, background_load  # noqa: E402

#: calibration refuses more fork/join threads than this process may run on
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
# Sweeps that store a first point within seconds and would run on for half a minute or more
# (calibration at 2 threads: 34 s on the loaded 2-CPU machine).
SWEEPS = {
    "calibration": ["--set", "repeat=3000", "--set", f"threads={min(2, CPUS)}", "--set", "torch=false"],
    "cpu-reduction": ["--preset", "smoke", "--set", "providers=torch,numpy,iree-task", "--set", "experiments=grid",
                      "--set", "split=even", "--set", "repeat=1000", "--set", "chunks=1,2,3,4,5,6,7,8",
                      "--set", "workers=1,2"],
    "launch-cache": ["--preset", "smoke", "--set", "repeat=50", "--set", "launches=24000"],
    "mc2-split": ["--preset", "smoke", "--set", "reps=500", "--set", "uniform=2,3,4"],
    "opencl-events": ["--preset", "smoke", "--set", "measurements=60", "--set", "reps=2048",
                      "--set", "sizes=4096,8192,16384,32768,65536,131072,262144,1048576"],
}
#: seconds after a run took the machine lock within which its signal lands
WINDOW_S = {"calibration": 1.5, "cpu-reduction": 3.0, "launch-cache": 2.0, "mc2-split": 5.0, "opencl-events": 2.0}
SIGNALS = (signal.SIGINT, signal.SIGTERM)
MARK_VAR = "WB_STRESS_MARK"
LEFTOVER_S = 10.0


@dataclass
class Try:
    study: str
    sig: signal.Signals
    delay_s: float
    early: bool  # delay_s counts from the start of the process, not from the machine lock
    folder: Path
    mark: str
    pid: int = 0
    proc: subprocess.Popen | None = None  # exec mode; reaped by os.waitpid like a fork
    started: float = 0.0
    locked: float | None = None
    signalled: float | None = None
    ended: float | None = None
    status: int | None = None  # as os.waitpid gives it
    lost: bool = False
    wrong: list[str] = field(default_factory=list)
    at_signal: str = ""  # the run's last progress line when its signal was sent
    before_run: bool = False

    @property
    def store(self) -> Path:
        return self.folder / "results.sqlite"

    def argv(self) -> list[str]:
        return ["--store", str(self.store), "run", self.study, *SWEEPS[self.study]]

    def env(self) -> dict[str, str]:
        return {"WORKBENCH_LOCK": str(self.folder / "machine.lock"), MARK_VAR: self.mark}


def marked(mark: str) -> list[int]:
    """Processes whose environment carries ``MARK_VAR=mark``."""
    needle = f"{MARK_VAR}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _start_fork(t: Try) -> None:
    """A child of this (single-threaded) process that runs the CLI's main on the try."""
    from workbench import cli

    # The signals stay blocked across the fork: a child's at-fork hooks (logging's, random's)
    # run before it gets back here, and a KeyboardInterrupt raised inside one is "Exception
    # ignored" (a signal 5-25 ms after the fork was lost so: an artefact of this driver, whose
    # forks the CLI never makes). Unblocked below, it is raised where the child catches it.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    t.pid = os.fork()
    if t.pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    code = 70
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.setpgid(0, 0)
        for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
            out = os.open(t.folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        os.environ.update(t.env())
        code = cli.main(t.argv())
    except KeyboardInterrupt:  # Ctrl-C before the CLI set its handlers: Python's own
        code = 130
    except BaseException:  # noqa: BLE001 - reported through the exit status and stderr
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _start_exec(t: Try) -> None:
    with open(t.folder / "stdout.txt", "w") as out, open(t.folder / "stderr.txt", "w") as err:
        t.proc = subprocess.Popen([sys.executable, "-m", "workbench", *t.argv()], cwd=ROOT, stdout=out, stderr=err,
                                  env=os.environ | t.env() | {"PYTHONPATH": str(ROOT)}, start_new_session=True)
    t.pid = t.proc.pid


def _holds_lock(t: Try) -> bool:
    """Whether the try's run has taken the machine lock: its first progress line is there
    (a runtime may print warnings on stderr before it)."""
    return b"measuring the harness floor" in (t.folder / "stderr.txt").read_bytes()


def _last_line(t: Try) -> str:
    lines = (t.folder / "stderr.txt").read_bytes().decode(errors="replace").replace("\r", "\n").splitlines()
    return lines[-1].strip()[-100:] if lines else "(nothing yet)"


def _runs(store: Path) -> tuple[str, list[tuple[str, int]]]:
    """(integrity_check, [(status, points)]) of a try's store; ('ok', []) when none was made."""
    if not store.exists():
        return "ok", []
    con = sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        check = con.execute("PRAGMA integrity_check").fetchone()[0]
        runs = con.execute("SELECT r.status, (SELECT COUNT(*) FROM variants v WHERE v.run_id = r.run_id) "
                           "FROM runs r").fetchall()
    finally:
        con.close()
    return check, runs


def _judge(t: Try) -> None:
    code = os.waitstatus_to_exitcode(t.status) if t.status is not None else None
    err = (t.folder / "stderr.txt").read_text(errors="replace")[-600:] if (t.folder / "stderr.txt").exists() else ""
    try:
        check, runs = _runs(t.store)
    except sqlite3.Error as exc:
        check, runs = f"unreadable: {exc}", []
    t.before_run = not runs
    if check != "ok":
        t.wrong.append(f"integrity_check: {check}")
    if [s for s, _ in runs] == ["complete"]:
        t.lost = True  # it went on to the end of its sweep
    elif t.lost:
        pass
    elif code != 130 and not (code == -t.sig and not runs):
        t.wrong.append(f"exit {code}: {err.strip().splitlines()[-1:] if err.strip() else ''}")
    if runs and [s for s, _ in runs] != ["interrupted"] and not t.lost:
        t.wrong.append(f"runs {runs}")
    deadline = time.monotonic() + LEFTOVER_S
    while marked(t.mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = marked(t.mark)
    if left:
        t.wrong.append(f"processes left: {left}")
        for pid in left:
            _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def stress(tries: int, studies: list[str], mode: str = "fork", parallel: int = 4, stop_s: float = 30.0,
           seed: int = 0, progress=None) -> list[Try]:
    """Run ``tries`` interrupted runs (study and signal in turn, times at random), ``parallel``
    at once; returns them judged (see the module docstring)."""
    rng = random.Random(seed)
    todo = [Try(studies[i % len(studies)], SIGNALS[(i // len(studies)) % len(SIGNALS)],
                rng.uniform(0.0, WINDOW_S[studies[i % len(studies)]]), rng.random() < 0.2, Path(), uuid.uuid4().hex)
            for i in range(tries)]
    rng.shuffle(todo)
    start = _start_fork if mode == "fork" else _start_exec
    done: list[Try] = []
    active: list[Try] = []
    with tempfile.TemporaryDirectory(prefix="wb-stress-") as tmp:
        while todo or active:
            while todo and len(active) < parallel:
                t = todo.pop()
                t.folder = Path(tmp) / f"try{len(done) + len(active):04d}"
                t.folder.mkdir()
                (t.folder / "stderr.txt").touch()  # the run's progress lines go there
                t.started = time.monotonic()
                start(t)
                active.append(t)
            now = time.monotonic()
            for t in list(active):
                pid, status = os.waitpid(t.pid, os.WNOHANG)
                if t.locked is None and (t.early or _holds_lock(t)):
                    t.locked = t.started if t.early else now
                if pid:
                    t.status, t.ended = status, now
                elif t.signalled is None and t.locked is not None and now - t.locked >= t.delay_s:
                    os.kill(t.pid, t.sig)
                    t.signalled = now
                    t.at_signal = _last_line(t)
                elif t.signalled is not None and now - t.signalled > stop_s:
                    t.lost = True
                    os.killpg(t.pid, signal.SIGKILL)
                    _, t.status = os.waitpid(t.pid, 0)
                    t.ended = time.monotonic()
                if t.ended is not None:
                    if t.proc is not None:
                        t.proc.returncode = os.waitstatus_to_exitcode(t.status)
                    if t.signalled is None:
                        t.wrong.append("exited before its signal (lengthen its sweep in SWEEPS)")
                    _judge(t)
                    active.remove(t)
                    done.append(t)
                    if progress:
                        progress(t, len(done))
            time.sleep(0.02)
    return done


def upper_bound(lost: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate seen ``lost`` times in ``n``."""
    if n == 0:
        return 1.0
    if lost >= n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(level, lost + 1, n - lost))


def summary(done: list[Try]) -> list[dict]:
    """One row per (study, signal), then the total."""
    groups: dict[tuple[str, str], list[Try]] = {}
    for t in done:
        groups.setdefault((t.study, t.sig.name), []).append(t)
    groups[("all", "all")] = done
    rows = []
    for (study, sig), ts in groups.items():
        lat = sorted(t.ended - t.signalled for t in ts if t.signalled is not None and not t.lost)
        lost = sum(t.lost for t in ts)
        rows.append({"study": study, "signal": sig, "tries": len(ts), "before_run": sum(t.before_run for t in ts),
                     "lost": lost, "wrong": sum(bool(t.wrong) for t in ts), "loss_upper_95": upper_bound(lost, len(ts)),
                     "stop_median_s": lat[len(lat) // 2] if lat else None, "stop_max_s": lat[-1] if lat else None})
    return rows


def table(rows: list[dict]) -> str:
    out = ["| study | signal | tries | signal before the run was stored | lost | wrong | loss rate, 95% upper bound "
           "| stop after the signal: median / max s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        stop = "-" if r["stop_median_s"] is None else f"{r['stop_median_s']:.2f} / {r['stop_max_s']:.2f}"
        out.append(f"| {r['study']} | {r['signal']} | {r['tries']} | {r['before_run']} | {r['lost']} | {r['wrong']} "
                   f"| {r['loss_upper_95']:.2%} | {stop} |")
    return "\n".join(out)


def unavailable(study_id: str) -> str | None:
    """Why ``study_id``'s sweep cannot run here, or None. Asked in a child process: the
    answer may start a runtime's threads (an OpenCL platform), which a fork does not carry."""
    code = ("import sys\nfrom benchmarks.interrupts import SWEEPS\nfrom workbench.seam.registry import get\n"
            "sid = sys.argv[1]; args = SWEEPS[sid]; study = get(sid)\n"
            "preset = args[args.index('--preset') + 1] if '--preset' in args else None\n"
            "sets = dict(a.split('=', 1) for a in args[1::2] if '=' in a)\n"
            "print(study.requires(study.SPACE.resolve(sets, preset=preset)) or '')\n")
    proc = subprocess.run([sys.executable, "-c", code, study_id], cwd=ROOT, capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})
    if proc.returncode:
        return f"its requirements could not be checked: {proc.stderr.strip().splitlines()[-1:]}"
    return proc.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=500)
    ap.add_argument("--studies", default=",".join(SWEEPS), help="comma-separated (default: every CPU study)")
    ap.add_argument("--mode", choices=["fork", "exec"], default="fork")
    ap.add_argument("--parallel", type=int, default=4, help="tries at once (each with its own store and lock)")
    ap.add_argument("--load", type=int, default=2, help="busy loops beside the tries")
    ap.add_argument("--stop-s", type=float, default=30.0, help="seconds a run may take to stop after its signal")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="the rows and the failures as JSON on stdout")
    args = ap.parse_args(argv)
    studies = []
    for sid in args.studies.split(","):
        if sid not in SWEEPS:
            ap.error(f"{sid}: not a CPU study of this benchmark ({', '.join(SWEEPS)})")
        reason = unavailable(sid)
        if reason:
            print(f"skipped {sid}: {reason}", file=sys.stderr)
        else:
            studies.append(sid)
    if not studies:
        print("no study can run here", file=sys.stderr)
        return 2
    if args.mode == "fork":
        import torch  # noqa: F401  (imported once, before the forks: cpu-reduction times torch.sum)
    # As a terminal gives it: a driver started in the background has SIGINT ignored, which its
    # tries would inherit until the CLI sets its own handler (a signal then would be lost by
    # the driver's doing, not the CLI's).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    bench = Session()
    with background_load(args.load):
        done = stress(args.tries, studies, args.mode, args.parallel, args.stop_s, args.seed,
                      progress=lambda t, n: print(f"[{n}/{args.tries}] {t.study} {t.sig.name} at {t.delay_s:.2f} s: "
                                                  f"{'LOST' if t.lost else 'wrong: ' + '; '.join(t.wrong) if t.wrong else 'ok'}",
                                                  file=sys.stderr, flush=True))
    rows = summary(done)
    failures = [{"study": t.study, "signal": t.sig.name, "delay_s": t.delay_s, "from_start": t.early,
                 "at_signal": t.at_signal, "lost": t.lost, "wrong": t.wrong} for t in done if t.lost or t.wrong]
    if args.json:
        print(json.dumps({"rows": rows, "failures": failures}))
    else:
        print(f"Interrupt stress: {len(done)} tries ({args.mode} mode, {args.parallel} at a time), SIGINT and SIGTERM "
              f"at random times, {args.load} busy loops beside them.\n")
        print(f"Machine: {bench.machine()}.\n")
        print(table(rows))
        for f in failures:
            print(f"- {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
