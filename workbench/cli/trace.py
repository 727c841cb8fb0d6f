"""``trace FILE ...`` and ``trace diff A B`` (:mod:`workbench.traces.cli`; ``python -m workbench
trace`` goes there directly, without the rest of the CLI's imports: workbench.__main__)."""

from __future__ import annotations

from .base import Command


class Trace(Command):
    name, takes_store = "trace", False
    help = "summarise traces (several files: ranks of one run) or 'trace diff A B'"

    @classmethod
    def arguments(cls, s, argv):
        from ..traces import cli as trace_cli

        trace_cli.add_arguments(s)

    @classmethod
    def run(cls, args) -> int:
        from ..traces import cli as trace_cli

        return trace_cli.run(args)
