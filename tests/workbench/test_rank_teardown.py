"""A rank that runs torch.profiler still ends its process group (issue 28: the mc2-split
notebook's gloo rank aborted with "terminate called without an active exception" after the
profiler ran). A profiler first started while a group exists keeps the group alive past
``destroy_process_group``, and gloo's threads run on into the interpreter's teardown;
``workbench.running.rank.init_rank(profiled=True)`` starts the profiler before the group exists."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_RANK = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from workbench.running.rank import init_rank
init_rank("gloo", 60, profiled=sys.argv[2] == "profiled")
x = torch.ones(8)
with profile(activities=[ProfilerActivity.CPU]):  # what a worker's trace does mid-run
    dist.all_reduce(x, async_op=True).wait()
dist.destroy_process_group()
threads = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
print(sorted(t for t in threads if "gloo" in t))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_threads_after_destroy(how: str) -> str:
    env = os.environ | {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "RANK": "0", "WORLD_SIZE": "1",
                        "LOCAL_RANK": "0"}
    proc = subprocess.run([sys.executable, "-c", _RANK, str(ROOT), how], capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_a_profiled_rank_leaves_no_gloo_thread_after_destroying_its_group():
    # without the early start (torch 2.13) this lists gloo_tcp_loop and two pt_gloo_runloop threads
    assert _gloo_threads_after_destroy("profiled") == "[]"
