"""Tracy captures of a child process: a private port, a hard timeout, zones only.

The parent's side of :mod:`workbench.running.tracy`: :func:`run` starts the IREE wheel's
``iree-tracy-capture`` on a free port of 127.0.0.1, then the traced program with that port as
its ``TRACY_PORT`` (:func:`child_env`), and kills the program at a hard timeout. A private port
matters: a capture on Tracy's default port 8086 connects to whichever process holds it, and on
a shared machine that may be another user's.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from pathlib import Path
from typing import Callable

from ..base import procs
from .harness import ExternalCommandError


def capture_tool() -> str:
    """The IREE wheel's ``iree-tracy-capture`` (the Tracy version of the wheel's runtime)."""
    spec = importlib.util.find_spec("iree._runtime_libs_tracy")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("iree._runtime_libs_tracy is not installed (pip install iree-base-runtime)")
    path = Path(list(spec.submodule_search_locations)[0]) / "iree-tracy-capture"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found in the iree-base-runtime wheel")
    return str(path)


def free_port() -> int:
    """A TCP port free on localhost now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(port: int, base: dict | None = None) -> dict[str, str]:
    """The environment of a traced child: IREE's Tracy runtime, listening on ``port`` of
    127.0.0.1 only (``TRACY_ONLY_LOCALHOST`` alone would listen on ``::1``), alive at exit until
    the capture has drained (``TRACY_NO_EXIT``), zones only: no system tracing (with root
    rights Tracy would sample call stacks and context switches, megabytes a second and a
    busy core on a small machine)."""
    return dict(os.environ if base is None else base, IREE_PY_RUNTIME="tracy", TRACY_PORT=str(port),
                TRACY_NO_EXIT="1", TRACY_ONLY_LOCALHOST="1", TRACY_ONLY_IPV4="1", TRACY_NO_SYS_TRACE="1",
                TRACY_NO_SAMPLING="1")


def run(out: Path, run_child: Callable[[dict, float], str], timeout_s: float = 120,
            drain_s: float = 30) -> str:
    """Capture ``run_child(env, timeout_s)`` into ``out`` (a ``.tracy`` file); returns the
    command line that reproduces it.

    ``run_child`` runs the traced program to its end under ``env`` (:func:`child_env`) and is
    given the hard timeout it must kill the program at; it returns the program's command line
    and raises when the program fails. ``iree-tracy-capture`` starts first and listens on a
    private port (two captures at once never see each other's program); once the program ends
    it gets ``drain_s`` to write the file. Failures raise
    :class:`workbench.running.harness.ExternalCommandError` with the capture's own output.
    """
    out = Path(out)
    port = free_port()
    log_path = out.with_name(out.name + ".log")
    cap_cmd = [capture_tool(), "-o", str(out), "-f", "-a", "127.0.0.1", "-p", str(port)]
    env = child_env(port)
    # the capture's progress goes to a file: a pipe nobody reads fills up, blocks the capture
    # and loses most of the zones
    with open(log_path, "w") as log_fh:
        cap = subprocess.Popen(procs.bound(cap_cmd), stdout=log_fh, stderr=subprocess.STDOUT)
        try:
            cmd = run_child(env, timeout_s)
            try:
                procs.wait(cap, drain_s)
            except subprocess.TimeoutExpired:
                raise ExternalCommandError(cap_cmd, -1, f"the capture did not finish {drain_s:.0f} s after the "
                                                        "program ended") from None
        finally:
            if cap.poll() is None:
                cap.kill()
                cap.wait()
    log = log_path.read_text(errors="replace").replace("\r", "\n")[-2000:]
    if cap.returncode != 0 or not out.exists():
        raise ExternalCommandError(cap_cmd, cap.returncode or -1, log or "no capture file written")
    shown = " ".join(f"{k}={env[k]}" for k in env if k.startswith("TRACY_") or k == "IREE_PY_RUNTIME")
    return f"{shown} {cmd}  # with: {' '.join(cap_cmd)}"
