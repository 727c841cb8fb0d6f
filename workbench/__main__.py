"""``python -m workbench`` and the ``workbench`` console script: the command-line interface
(see workbench.cli)."""

import os
import sys

from .cli import main


def console() -> int:
    """The CLI's exit code; a reader that closed the pipe (``... | head``) is not an error of ours."""
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(console())
