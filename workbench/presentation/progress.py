"""The command line's progress bar: one line on stderr, redrawn in place on a terminal and
printed as plain lines otherwise (the CLI's runs and the notebook's display outside Jupyter)."""

import sys

from ..base.untrusted import plain


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last = ""

    def __call__(self, fraction: float, message: str) -> None:
        width = 30
        filled = int(round(fraction * width))
        line = f"[{'#' * filled}{'.' * (width - filled)}] {fraction * 100:5.1f}% {plain(message)}"
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120))
            self.stream.flush()
        elif message != self.last:
            self.stream.write(line + "\n")
        self.last = message

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
