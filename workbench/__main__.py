"""``python -m workbench``: the command-line interface (see workbench.cli)."""

import sys

from . import interrupt  # the standard library only: its handlers are set before the CLI's imports

# A Ctrl-C or SIGTERM while Python imports the CLI (pandas, the studies: a second or more on a
# loaded machine) stops it with 130 too; SIGINT is set even where the shell left it ignored.
with interrupt.handled():
    try:
        from .cli import main

        interrupt.check()  # recorded while the imports ran
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())
