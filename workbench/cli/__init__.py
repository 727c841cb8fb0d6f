"""The workbench CLI, a contract other tools rely on.

    python -m workbench list
    python -m workbench run STUDY [--set name=value ...] [--quick | --preset NAME] [--precision 2%] [--store PATH] [--json]
                            [--nnodes N --rdzv-endpoint HOST:PORT [--node-rank R] [--rdzv-id ID]]
    python -m workbench runs [--study ID] [--all] [--json]
    python -m workbench tag RUN [TAG ...] [--remove TAG] [--note TEXT]
    python -m workbench delete RUN [RUN ...] [--yes]
    python -m workbench compare RUN_A RUN_B [--json]
    python -m workbench ab STUDY [--set name=value ...] --a name=value ... --b name=value ... [--rounds R] [--json]
    python -m workbench report RUN --format md|issue|html|ipynb -o PATH
    python -m workbench export RUN -o FILE [--format bundle|gbench]
    python -m workbench export RUN -o FOLDER --format attachments   # its traces, one file each
    python -m workbench import FILE [FILE ...]
    python -m workbench notebooks [-o DIR]
    python -m workbench trace FILE [FILE ...] [--json] [--phases] [--chrome OUT.json]
    python -m workbench trace diff A B [--json]

RUN is a run id, a unique prefix of one or ``latest`` (the store's newest run), of the results
store or of a result bundle committed under ``traces/<study>/`` (the ids ``runs --all`` lists),
or the path of a bundle file.

Exit codes: 0 success, 1 the run failed or a check failed, 2 bad input (parameter, file,
store or output path, unknown study or run), 3 the study cannot run on this machine, 130
interrupted (Ctrl-C or SIGTERM). Progress goes to stderr; ``--json`` prints only the record
on stdout, with the analysis's ``verdict``, ``claims`` and ``disturbance`` added. ``list`` imports
no study dependencies beyond the study modules (no scipy).

One class per command (asv's ``commands/``), its arguments beside the code that reads them:
``studies`` (list, knobs), ``run``, ``runs`` (runs, delete, tag), ``compare``, ``ab``, ``files``
(report, export, import, notebooks), ``readme``, ``trace``; :class:`~workbench.cli.base.Command`
says how one is built. This module builds the parser from :data:`COMMANDS` and runs one.
"""

from __future__ import annotations

import argparse
import sys

# Only what every command needs is imported by the command modules at their top: an error line
# (a typo, an unknown run) comes before pandas, the studies and the statistics are imported (half
# a second or more on a loaded 2-core machine; benchmarks/cli.py times it). The rest is imported
# by the commands that use it.
from ..base import interrupt
from ..base.untrusted import guarded, has_surrogates
from .ab import AB
from .base import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNAVAILABLE, Command, err
from .compare import Compare
from .files import Export, Import, Notebooks, Report
from .readme import Readme
from .run import Run, summary_text
from .runs import Delete, Runs, Tag
from .studies import Knobs, List
from .trace import Trace

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_UNAVAILABLE", "Command",
           "build_parser", "main", "summary_text"]

#: the commands, in the order ``--help`` lists them
COMMANDS: tuple[type[Command], ...] = (List, Knobs, Run, Runs, Delete, Tag, Compare, Readme, AB, Report, Export,
                                       Import, Notebooks, Trace)


def _chosen(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option or --store's value)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--store":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. With ``argv`` only the command it names gets its arguments (and the
    imports they need: the trace command's parser imports pandas), so a mistyped run id or
    study is answered before the heavy imports; without, every command's."""
    p = argparse.ArgumentParser(prog="python -m workbench", description="Perf Study Workbench")
    p.add_argument("--store", help="results store (SQLite file); default $WORKBENCH_STORE or .workbench/results.sqlite")
    sub = p.add_subparsers(dest="command", required=True)
    chosen = _chosen(argv) if argv is not None else None
    for command in COMMANDS:
        command.setup_arguments(sub, argv is None or command.name == chosen, argv or [])
    return p


#: arguments that are paths: a file name need not be UTF-8 (Linux names are bytes)
_PATH_ARGUMENTS = ("store", "output", "files", "progress_file", "chrome")


def _undecodable(args: argparse.Namespace) -> str | None:
    """The first argument (as its option reads) holding bytes that are not UTF-8, paths aside."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if name not in _PATH_ARGUMENTS and any(isinstance(v, str) and has_surrogates(v) for v in values):
            return name.replace("_", "-")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code. Standard output and error pass through
    :class:`~workbench.base.untrusted.TerminalStream` (no control or bidi character reaches the
    terminal), and a failure to write them is one line on stderr and exit 2 (``| head``
    closing the pipe early: exit 0, quietly): :func:`workbench.base.untrusted.guarded`.

    SIGTERM and SIGHUP (a closed terminal, ``kill PID``) act as Ctrl-C: a run stores its
    finished points as interrupted and its child processes are killed, instead of the CLI
    dying with the run left running. SIGINT is set too: a process started in the background
    inherits it ignored, and the app cancels with it. The signal is recorded and acted on at
    the next checkpoint (workbench.base.interrupt); a second one at once. Set before parsing, so one
    that comes meanwhile is not lost either (python -m workbench sets them before the CLI's
    imports: workbench.__main__)."""
    return guarded(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            return EXIT_BAD_INPUT if exc.code else EXIT_OK
        bad = _undecodable(args)
        if bad:
            err(f"argument {bad}: not valid UTF-8 text (undecodable bytes); nothing was done")
            return EXIT_BAD_INPUT
        args.argv = argv  # --repeat-runs starts the same command again in fresh processes
        interrupt.check()  # one that came while the CLI started
        code = args.fn(args)
        interrupt.check()  # one that came after the command's last checkpoint
        return code
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
