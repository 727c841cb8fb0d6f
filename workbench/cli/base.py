"""What every command shares: the command class, exit codes, the error line, the progress bar,
and finding runs, studies and the store."""

from __future__ import annotations

import argparse
import sys

from ..results.catalog import Catalog, find_run
from ..seam.registry import get
from ..results.store import Store, StoreError
from ..base.untrusted import plain

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class Command:
    """One subcommand (asv's ``commands/``): its name and help, its arguments beside the code
    that reads them (:meth:`arguments`), and :meth:`run`, which returns the exit code. Only the
    command a command line names gets its arguments (:meth:`setup_arguments`): their imports
    (the trace command's parser imports pandas) wait until it is chosen."""

    name: str = ""
    help: str = ""
    #: whether it takes ``--store`` after its name too
    takes_store: bool = True

    @classmethod
    def setup_arguments(cls, subparsers, chosen: bool, argv: list[str]) -> argparse.ArgumentParser:
        """The command's parser under ``subparsers``; with its own arguments when ``chosen``."""
        # argparse formats a subcommand's help with %: "95% CI" would end `--help` in a traceback
        s = subparsers.add_parser(cls.name, help=cls.help.replace("%", "%%"), description=cls.help)
        if cls.takes_store:  # also after the command; SUPPRESS keeps the top-level value when absent
            s.add_argument("--store", default=argparse.SUPPRESS, help="results store (SQLite file)")
        s.set_defaults(fn=cls.run)
        if chosen:
            cls.arguments(s, argv)
        return s

    @classmethod
    def arguments(cls, s: argparse.ArgumentParser, argv: list[str]) -> None:
        """Add the command's arguments to ``s`` (``argv``: the whole command line)."""

    @classmethod
    def run(cls, args: argparse.Namespace) -> int:
        raise NotImplementedError


def err(msg: str) -> None:
    print(f"error: {plain(msg)}", file=sys.stderr)  # one line, no terminal escapes from a bundle


def open_store(path: str | None, create: bool = True) -> Store:
    """The store; commands that only read pass ``create=False`` (a mistyped path is an error)."""
    return Store(path, create=create) if path else Store(create=create)


def catalog(args) -> tuple[Catalog, str]:
    """The runs this command can address (:meth:`Catalog.open` of ``--store``)."""
    return Catalog.open(args.store)


def load_runs(args, *refs: str, opened: tuple[Catalog, str] | None = None):
    """Runs by id (unique prefix or ``latest``) from the store or the committed bundles under
    ``traces/`` (``opened``: :func:`catalog`'s answer, when the caller has it), or by path to
    a result bundle (:func:`find_run`). Prints the reason and returns None when one cannot be
    loaded."""
    once = [opened]

    def open_once() -> tuple[Catalog, str]:
        if once[0] is None:
            once[0] = catalog(args)
        return once[0]

    try:
        return [find_run(ref, open_once) for ref in refs]
    except (StoreError, KeyError) as exc:
        err(str(exc.args[0] if isinstance(exc, KeyError) else exc))
        return None


def load_one(args):
    """The run ``args.run`` names (:func:`load_runs`), or None when it cannot be loaded."""
    runs = load_runs(args, args.run)
    return runs[0] if runs else None


def find_study(study_id: str):
    """The study module, or None with the reason (unknown study, the known ones) on stderr."""
    try:
        return get(study_id)
    except KeyError as exc:
        err(exc.args[0])
        return None


def fmt_table(rows: list[list[str]], header: list[str]) -> str:
    """Aligned text for the terminal (cells may come from bundles: no terminal escapes)."""
    import pandas as pd

    from ..evidence.tables import render

    return render(pd.DataFrame(rows, columns=header), "plain", max_rows=None)


def plain_block(text: str) -> str:
    """Multi-line text for the terminal: each line through :func:`plain` (no escape sequences)."""
    return "\n".join(plain(line) for line in text.splitlines())
