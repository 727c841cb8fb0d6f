"""Start the distributed worker under torchrun and stream its events back.

The worker (rank 0) appends JSON events to a file; this module tails it while the process
group runs, hands each event to a callback, and kills the whole process group (it runs in
its own session) on timeout, cancel or error, so no rank is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from workbench.env import REPO_ROOT

WORKER = Path(__file__).with_name("worker.py")
# NVLink multicast stays off on the shared GPU hosts (it can take their GPUs out of service).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class WorkerFailed(RuntimeError):
    """The distributed worker exited with an error; carries its message and log tail."""


def run_worker(cfg: dict, world_size: int, on_event: Callable[[dict], None], timeout_s: float,
               poll_s: float = 0.1) -> list[dict]:
    """Run the worker on ``world_size`` local processes; returns all events.

    ``on_event`` may raise (e.g. the run was cancelled): the process group is killed first.
    """
    with tempfile.TemporaryDirectory(prefix="mc2split-") as tmp:
        cfg_path, ev_path, log_path = Path(tmp, "cfg.json"), Path(tmp, "events.jsonl"), Path(tmp, "log.txt")
        cfg_path.write_text(json.dumps(cfg))
        ev_path.touch()
        env = dict(os.environ)
        env.update(SAFE_ENV)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("OMP_NUM_THREADS", "1")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world_size}",
               str(WORKER), "--config", str(cfg_path), "--out", str(ev_path)]
        events: list[dict] = []
        with open(log_path, "w") as log, open(ev_path) as evf:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO_ROOT),
                                    start_new_session=True)
            deadline = time.monotonic() + timeout_s
            buf = ""
            try:
                while True:
                    rc = proc.poll()
                    buf += evf.read()
                    *lines, buf = buf.split("\n")
                    for line in lines:
                        if line.strip():
                            events.append(json.loads(line))
                            on_event(events[-1])
                    if rc is not None:
                        break
                    if time.monotonic() > deadline:
                        raise WorkerFailed(f"the distributed run passed its {timeout_s:.0f} s timeout and was killed "
                                           f"(raise timeout_s, or lower reps/points)")
                    time.sleep(poll_s)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        if proc.returncode != 0:
            errors = [e["text"] for e in events if e.get("type") == "error"]
            tail = log_path.read_text()[-3000:]
            raise WorkerFailed(f"torchrun exited with {proc.returncode}: {errors[0] if errors else ''}\n{tail}")
        return events
