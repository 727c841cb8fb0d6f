"""``python -m workbench``: the command-line interface (see workbench.cli)."""

import sys

from .cli import main

sys.exit(main())
