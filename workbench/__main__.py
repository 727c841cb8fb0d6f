"""``python -m workbench`` and the ``workbench`` console script: the command-line interface
(see workbench.cli)."""

import os
import sys

from . import interrupt  # the standard library only: its handlers are set before the CLI's imports


def console() -> int:
    """The CLI's exit code. A Ctrl-C or SIGTERM while Python imports the CLI (pandas, the
    studies: a second or more on a loaded machine) stops it with 130 too; SIGINT is set even
    where the shell left it ignored. A reader that closed the pipe (``... | head``) is not an
    error of ours."""
    with interrupt.handled():
        try:
            from .cli import main

            interrupt.check()  # recorded while the imports ran
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return 130
        try:
            return main()
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0


if __name__ == "__main__":
    sys.exit(console())
