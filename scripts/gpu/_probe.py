"""What the GPU probes (``overlap_probe.py``, ``chunk_probe.py``) share: this checkout
importable, one NCCL rank per GPU under torchrun with NVLink multicast off, the mc2-split
seed's matmul shape as the default, and the matmul's SM carve-out undone on the way out."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from kernels.triton.collectives import set_matmul_carveout  # noqa: E402
from workbench.running.rank import init_rank  # noqa: E402

#: the mc2-split seed's K and N (its M x K by K x N fp16 matmul)
SEED_K, SEED_N = 3072, 8192


def arguments(doc: str) -> argparse.ArgumentParser:
    """The probe's parser: its docstring as the help, and the matmul's ``--k`` and ``--n``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=SEED_K, help="inner dimension of the matmul")
    ap.add_argument("--n", type=int, default=SEED_N, help="columns of the matmul's output")
    return ap


@contextmanager
def nccl_rank():
    """This rank on its GPU (``workbench.running.rank.init_rank``: multicast off, however torchrun was
    started): yields (device, rank, world size); then the carve-out goes and the group ends."""
    import torch
    import torch.distributed as dist

    device = init_rank("nccl")
    blas_default = torch.backends.cuda.preferred_blas_library()
    try:
        yield device, dist.get_rank(), dist.get_world_size()
    finally:
        set_matmul_carveout(0, blas_default)
        dist.destroy_process_group()
