"""A rank's side of a torchrun launch (:mod:`workbench.running.launcher` is the starting side): the
multicast-off environment and the rank's process group.

Its own module so that the workers the launcher starts (the studies', and the collective
library's probe, :mod:`workbench.running.collectives`, which the launcher imports) reach it without
importing the launcher back.
"""

from __future__ import annotations

import datetime
import os

#: NVLink multicast stays off on the shared GPU hosts (it can take their GPUs out of service).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def init_rank(backend: str, timeout_s: float | None = None, profiled: bool = False):
    """This rank's default process group under torchrun: ``nccl`` on the GPU of its local
    rank (multicast off whoever started it), ``gloo`` on the CPU; returns the device.

    ``profiled``: the rank will run ``torch.profiler``. Its first start then comes here,
    before the group exists: a profiler first started while a group exists keeps references
    to the group (torch 2.13, held in C++), so ``destroy_process_group`` cannot free it and
    its threads (gloo's loop and workers) run on into the interpreter's teardown, where
    now and then they abort the rank ("terminate called without an active exception")
    after every result is out. Started once before, later profiles leave the group alone."""
    import torch
    import torch.distributed as dist

    if profiled:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]):
            pass
    kw = {"timeout": datetime.timedelta(seconds=timeout_s)} if timeout_s else {}
    if backend == "nccl":
        os.environ.update(MULTICAST_OFF)  # read when NCCL and symmetric memory set up, below
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device, **kw)
        return device
    torch.set_num_threads(1)  # one rank per core
    dist.init_process_group(backend, **kw)
    return torch.device("cpu")
