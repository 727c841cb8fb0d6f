"""Background study runs for the app: a CLI subprocess per run, polled for progress.

The app never times kernels in its own process: a run is ``python -m workbench run ...`` in
a subprocess, so it survives widget interaction and reruns, and the machine lock in
``workbench.runner`` queues runs from several browser sessions instead of timing them on top
of each other.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .env import REPO_ROOT
from .runner import set_args


@dataclass
class Job:
    study: str
    proc: subprocess.Popen
    progress_path: Path
    stdout_path: Path
    stderr_path: Path
    command: list[str]
    started: float = field(default_factory=time.time)

    def progress(self) -> tuple[float, str]:
        try:
            lines = self.progress_path.read_text().splitlines()
        except OSError:
            return 0.0, "starting"
        for line in reversed(lines):
            try:
                doc = json.loads(line)
                return float(doc["fraction"]), str(doc["message"])
            except (ValueError, KeyError):
                continue  # a line still being written
        return 0.0, "starting"

    @property
    def done(self) -> bool:
        return self.proc.poll() is not None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def record(self) -> dict[str, Any] | None:
        """The run record the CLI printed (``--json``), once finished."""
        if not self.done:
            return None
        try:
            return json.loads(self.stdout_path.read_text() or "null")
        except (OSError, ValueError):
            return None

    def error_text(self) -> str:
        try:
            lines = [l for l in self.stderr_path.read_text().splitlines() if not l.startswith("[")]
        except OSError:
            return ""
        return "\n".join(lines[-20:])

    def cleanup(self) -> None:
        """Remove the job's folder (progress, stdout, stderr) once its record and error were read."""
        shutil.rmtree(self.progress_path.parent, ignore_errors=True)

    def cancel(self) -> None:
        """Interrupt (SIGINT): the runner stores the run as interrupted, keeping its points."""
        if not self.done:
            self.proc.send_signal(signal.SIGINT)


def start(study_id: str, values: dict[str, Any], quick: bool = False, store_path: str | os.PathLike | None = None) -> Job:
    workdir = Path(tempfile.mkdtemp(prefix="wb-job-"))
    progress_path, stdout_path, stderr_path = workdir / "progress.jsonl", workdir / "out.json", workdir / "err.txt"
    cmd = [sys.executable, "-m", "workbench"]
    if store_path:
        cmd += ["--store", str(store_path)]
    cmd += ["run", study_id, *set_args(values), "--json", "--progress-file", str(progress_path)]
    if quick:
        cmd.append("--quick")
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        proc = subprocess.Popen(cmd, cwd=str(REPO_ROOT), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    return Job(study_id, proc, progress_path, stdout_path, stderr_path, cmd)
