"""``run STUDY``: one run, or ``--repeat-runs N`` fresh-process runs judged across; and what
``ab`` shares with it (the precision options, the failure lines)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from typing import Any, Callable

from ..seam import events
from ..base import procs
from ..running.launcher import LaunchError, Topology
from ..seam.registry import get
from ..results.store import StoreError
from ..seam.study import Cancelled, ParamError, StudyUnavailable
from ..base.untrusted import plain
from .base import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNAVAILABLE, Command, err, find_study, open_store, plain_block
from ..presentation.progress import ProgressBar
from .studies import knobs_text

#: the most runs one --repeat-runs group may have
MAX_REPEAT_RUNS = 50
#: seconds an interrupted child run may take to store what it kept (a few; more under load)
CHILD_STOP_S = 30.0


def precision_arguments(s: argparse.ArgumentParser) -> None:
    from ..running.runner import DEFAULT_PRECISION_CAP_S

    s.add_argument("--precision", metavar="PCT", help="repeat each variant until its median's 95%% CI half-width is "
                                                      "within PCT of the median (e.g. 2%%), or until --precision-cap")
    s.add_argument("--precision-cap", type=float, default=DEFAULT_PRECISION_CAP_S, metavar="S",
                   help="seconds the whole run may spend on --precision (default %(default)g)")


def measuring(study, close: Callable[[], None], kept: str, interrupted: Callable[[BaseException], str],
              measure: Callable[[], Any]) -> tuple[Any, int]:
    """``(measure(), EXIT_OK)``, or ``(None, exit code)`` with the reason on stderr (after
    ``close()`` ends the progress bar). ``kept`` names what a failed run keeps (its finished
    points, or rounds); ``interrupted(exc)`` says what an interrupted one kept."""
    from ..running import runner

    try:
        result = measure()
    except (ParamError, runner.LockError) as exc:
        code, msg = EXIT_BAD_INPUT, str(exc)
    except StudyUnavailable as exc:
        code, msg = EXIT_UNAVAILABLE, runner.failure_text(study, exc, kept)
    except (KeyboardInterrupt, Cancelled) as exc:
        code, msg = EXIT_INTERRUPTED, "; ".join(filter(None, [interrupted(exc), runner.unfinished_text(exc, kept)]))
    except StoreError as exc:  # the store cannot take the run (a full disk): before it started, or mid-way
        code, msg = EXIT_BAD_INPUT, runner.failure_text(study, exc, kept)
    except Exception as exc:  # the study failed: stored as failed with its error, once a run was stored
        code, msg = EXIT_FAILED, runner.failure_text(study, exc, kept)
    else:
        close()
        return result, EXIT_OK
    close()
    err(msg)
    return None, code


def deprecations(study, values: dict) -> None:
    """One line on stderr per parameter named the old way (``--set seed=`` of an old reproduce
    command still runs)."""
    for line in study.SPACE.deprecated(values):
        print(f"deprecated: {line}", file=sys.stderr)


def summary_text(a) -> str:
    """The ``run`` summary of an analysis: disturbance warnings, verdict, claims, results."""
    from ..evidence.tables import render, results_display

    lines = [f"warning: {line}" for line in a.disturbance]
    lines.append(f"verdict: {a.verdict}")
    lines.append(f"levels: {a.levels}")
    if len(a.claims):
        claims = a.claims[["id", "status", "live", "why"]].rename(
            columns={"id": "claim", "status": "here", "live": "live figure (95% CI)"})
        lines += ["", "the seed's claims on this machine:", render(claims, "plain", max_rows=None)]
    lines += ["", render(results_display(a.results), "plain", max_rows=None)]
    lines += [f"error: {e}" for e in a.errors]
    return "\n".join(lines)


def _help_study(argv: list[str]):
    """The study of ``run STUDY --help`` (None where argv is not that, or names no study)."""
    if "-h" not in argv and "--help" not in argv:
        return None
    words = [w for w in argv if not w.startswith("-")]
    if len(words) < 2 or words[0] != "run":
        return None
    try:
        return get(words[1])
    except KeyError:
        return None


@contextlib.contextmanager
def _topology_flags(args):
    """The node flags of ``run`` as the ``WORKBENCH_*`` variables the launcher reads, for this
    run only; a topology that cannot work raises :class:`ParamError`."""
    flags = {"WORKBENCH_NNODES": args.nnodes, "WORKBENCH_RDZV_ENDPOINT": args.rdzv_endpoint,
             "WORKBENCH_NODE_RANK": args.node_rank, "WORKBENCH_RDZV_ID": args.rdzv_id}
    given = {k: str(v) for k, v in flags.items() if v is not None}
    saved = {k: os.environ.get(k) for k in given}
    os.environ.update(given)
    try:
        if given:
            try:
                Topology.from_env()
            except LaunchError as exc:
                raise ParamError("nnodes", str(exc)) from None
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _child_run(cmd: list[str]) -> tuple[int, str]:
    """(exit status, stdout) of a CLI run in a child process. The child has a session of its
    own, so an interrupt reaches it once, from here: a Ctrl-C or SIGTERM recorded while it runs
    is passed on as one SIGINT (the child stores its run as interrupted), the child waited for,
    and the interrupt raised. It gets SIGTERM should this process die first."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(procs.bound(cmd, signal.SIGTERM), stdout=out, text=True, start_new_session=True)
        try:
            code = procs.wait(proc)
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(CHILD_STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
        out.seek(0)
        return code, out.read()


def _run_group(text: str | None) -> dict | None:
    """``--run-group ID:i/N`` as the record's ``outputs["run_group"]``."""
    if not text:
        return None
    gid, _, pos = text.partition(":")
    index, _, runs = pos.partition("/")
    return {"id": gid, "index": int(index), "runs": int(runs)}


class Run(Command):
    """``run STUDY``: check every argument, run, store, print the summary (or ``--json``)."""

    name, help = "run", "run a study and store the result"

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("study", help="a study id (python -m workbench list); 'run STUDY --help' lists its knobs")
        s.add_argument("--set", action="append", metavar="NAME=VALUE",
                       help="parameter value; comma-separated values sweep a list parameter "
                            "(python -m workbench knobs STUDY lists them)")
        presets = s.add_mutually_exclusive_group()
        presets.add_argument("--quick", action="store_true", help="the study's quick preset (same as --preset quick)")
        presets.add_argument("--preset", help="start from one of the study's presets (smoke, quick, or its own, e.g. "
                                              "mc2-split's cpu); --set values override it")
        s.add_argument("--json", action="store_true", help="print only the run record (JSON) on stdout")
        s.add_argument("--progress-file", help=argparse.SUPPRESS)  # JSON-lines progress for the app
        s.add_argument("--repeat-runs", type=int, default=1, metavar="N",
                       help="run it N times, each in a fresh process (one run group), then judge its derived numbers "
                            "and claims across the runs (the run-to-run level: docs/reading-a-run.md)")
        s.add_argument("--run-group", help=argparse.SUPPRESS)  # set by --repeat-runs on each of its runs
        nodes = s.add_argument_group("several nodes (studies that start torchrun; docs/cli.md: runs that span nodes)",
                                     "default: the WORKBENCH_NNODES, WORKBENCH_NODE_RANK, WORKBENCH_RDZV_ENDPOINT and "
                                     "WORKBENCH_RDZV_ID variables; every other node runs `python -m workbench.running.launcher "
                                     "agent`")
        nodes.add_argument("--nnodes", type=int, help="nodes the run spans (world_size counts the ranks of all of them)")
        nodes.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="where the nodes meet (torchrun's rendezvous)")
        nodes.add_argument("--node-rank", type=int, help="this node's rank for a static rendezvous (0 hosts the store); "
                                                         "leave out for elastic c10d")
        nodes.add_argument("--rdzv-id", help="names an elastic rendezvous (default: workbench)")
        precision_arguments(s)
        # `run STUDY --help`: the study's knobs under the options
        named = _help_study(argv)
        if named is not None:
            s.epilog = f"{named.ID}'s knobs (--set NAME=VALUE):\n\n{knobs_text(named)}"
            s.formatter_class = argparse.RawDescriptionHelpFormatter

    @classmethod
    def run(cls, args) -> int:
        try:
            with _topology_flags(args):
                return cls._repeat_runs(args) if args.repeat_runs != 1 else cls._run(args)
        except ParamError as exc:
            err(str(exc))
            return EXIT_BAD_INPUT

    @staticmethod
    def _prepared(args, check_store: bool = False) -> tuple | None:
        """``(plan, store)`` of ``run``: every argument checked once (:func:`workbench.running.runner.plan`)
        before anything is made or measured (bad input stores nothing), the store opened (and
        ``check_store``: found writable, where no run of this process will check it); None with
        the reason on stderr."""
        study = find_study(args.study)
        if study is None:
            return None
        from ..running import runner

        try:
            values = study.SPACE.parse_sets(args.set or [])
            if not args.run_group:  # said once, by the command the user typed
                deprecations(study, values)
            plan = runner.plan(study, values, preset="quick" if args.quick else args.preset,
                               precision=args.precision, precision_cap_s=args.precision_cap)
            store = open_store(args.store)
            if check_store:
                store.check_writable()
            return plan, store
        except (ParamError, StoreError) as exc:
            err(str(exc))
            return None

    @classmethod
    def _run(cls, args) -> int:
        """One run: its record as stored (the store's writability is checked once, by the runner,
        before the machine is taken)."""
        prepared = cls._prepared(args)
        if prepared is None:
            return EXIT_BAD_INPUT
        plan, store = prepared
        from ..running import runner

        # The app reads the event stream (--progress-file); a terminal gets the bar. stderr then
        # carries only what went wrong.
        emitter = events.Emitter(args.progress_file) if args.progress_file else None
        bar = ProgressBar() if emitter is None else None
        rec, code = measuring(plan.study, bar.close if bar else (lambda: None), "points",
                              lambda exc: runner.interrupted_text(store, getattr(exc, "run_id", None)),
                              lambda: runner.execute_plan(plan, store, progress=bar, events=emitter,
                                                          run_group=_run_group(args.run_group)))
        if rec is None:
            return code
        from ..reading.analysis import analyse, json_fields

        a = analyse(rec, plan.study)
        if args.json:
            print(json.dumps(rec.to_json() | json_fields(a), default=str))
        else:
            print(f"run {rec.run_id} ({rec.status}) stored in {store.path}")
            print(summary_text(a))
            for warning in rec.outputs.get("warnings", []) if isinstance(rec.outputs, dict) else []:
                print(f"warning: {plain(warning)}")
            print(f"reproduce: {rec.reproduce}")
        return EXIT_OK if all(v.correct for v in rec.variants) else EXIT_FAILED

    @classmethod
    def _repeat_runs(cls, args) -> int:
        """``run --repeat-runs N``: the same command N times, each in a fresh process (its own
        interpreter, thread pools, allocator state and placement: pyperf's worker processes), as
        one run group; then each derived number's figure per run, the interval across runs and the
        claims judged across runs (:mod:`workbench.reading.across`)."""
        if not 2 <= args.repeat_runs <= MAX_REPEAT_RUNS:
            err(f"--repeat-runs: {args.repeat_runs} is outside 2..{MAX_REPEAT_RUNS} (1 is a plain run)")
            return EXIT_BAD_INPUT
        if args.json or args.progress_file:
            err("--repeat-runs prints the across-run view; it does not take --json or --progress-file")
            return EXIT_BAD_INPUT
        if cls._prepared(args, check_store=True) is None:  # the children's checks, once, before any starts
            return EXIT_BAD_INPUT
        from ..reading import across
        from ..reading.analysis import analyse

        group = secrets.token_hex(4)
        base = [a for i, a in enumerate(args.argv) if not a.startswith("--repeat-runs")
                and not (i and args.argv[i - 1] == "--repeat-runs")]
        ids = []
        for i in range(args.repeat_runs):
            print(f"run {i + 1} of {args.repeat_runs} (group {group}), in a fresh process", flush=True)
            code, out = _child_run([sys.executable, "-m", "workbench", *base, "--json", "--run-group",
                                    f"{group}:{i + 1}/{args.repeat_runs}"])
            if code not in (EXIT_OK, EXIT_FAILED):  # the child said why on stderr
                kept = f"; the {len(ids)} run(s) before it are kept ({', '.join(ids)})" if ids else ""
                err(f"the group stopped at run {i + 1} of {args.repeat_runs} (exit status {code}){kept}")
                return code
            ids.append(json.loads(out)["run_id"])
        store = open_store(args.store, create=False)
        analyses = [analyse(store.load(run_id)) for run_id in ids]
        print(plain_block(across.markdown(across.summary(analyses))))
        return EXIT_OK
