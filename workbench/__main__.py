"""``python -m workbench`` and the ``workbench`` console script: the command-line interface
(see workbench.cli)."""

import gc
import os
import sys

from .base import interrupt  # the standard library only: its handlers are set before the CLI's imports

#: commands that read no Arrow data: pandas imports pyarrow, when installed, only to back its
#: strings with it (36 MiB of memory and ~0.1 s per process, a third of `trace --json`'s peak on
#: a 54 MB trace: benchmarks/traces.py); without it pandas keeps strings in Python objects
NO_ARROW = ("trace",)


def console() -> int:
    """The CLI's exit code. A Ctrl-C or SIGTERM while Python imports the CLI (pandas, the
    studies: a second or more on a loaded machine) stops it with 130 too; SIGINT is set even
    where the shell left it ignored. A reader that closed the pipe (``... | head``) is not an
    error of ours."""
    with interrupt.handled():
        if len(sys.argv) > 1 and sys.argv[1] in NO_ARROW:
            sys.modules.setdefault("pyarrow", None)  # `import pyarrow` raises ImportError: pandas goes without
        try:
            if len(sys.argv) > 1 and sys.argv[1] == "trace":  # its own parser: not the whole CLI's imports
                gc.disable()  # pandas' import makes ~10^5 objects, none of them garbage: no collection passes
                from .traces.cli import console as trace

                gc.freeze()  # and later collections do not walk them again
                gc.enable()
                interrupt.check()
                return trace(sys.argv[2:])
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
