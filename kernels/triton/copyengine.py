"""Copy engines and stream-written flags: the copy-engine fetch of the fused all-gather + GEMM
kernel (``HbmKnobs(fetch="ce")``, kernels/triton/ag_gemm.py), on NVIDIA and AMD GPUs.

The kernel keeps the seed's design (GEMM programs wait on ready flags over a staging buffer);
here the peers' rows reach the staging buffer by copy engines instead of the kernel's own fetch
rows, so no SM is taken by communication:

- one side stream per peer (nearest first), each waiting for the caller's stream at the point
  where the call starts (after its symmetric-memory barrier), so the copies of every peer run
  at once, on their own links and copy engines;
- per chunk (:class:`Chunk`: rows of one or more M-tiles, all of K or one k-group of it), a copy
  from the peer's symmetric-memory buffer into the staging buffer (``cudaMemcpyAsync`` through
  ``Tensor.copy_`` for whole rows; ``cudaMemcpy2DAsync`` for a k-group, whose rows are strided),
  then the chunk's flag set to the launch's epoch *by the stream*, behind the copy;
- the chunks of all peers issued round-robin (every peer's first chunk, then every peer's
  second, ...), the order in which the GEMM's queue takes the remote tiles
  (``HbmLayout.arrival_tiles``).

Flags: ``cuStreamWriteValue32`` through PyTorch's symmetric-memory op (the stream front end
writes the value after a system-scope fence: no kernel, no SM; what torch's own fused
all-gather matmul uses) where it exists, which is CUDA; elsewhere (ROCm: PyTorch has no
``hipStreamWriteValue32`` binding) a one-thread Triton kernel on that stream stores the flag
with a release at system scope (an SM slot for a microsecond per chunk). ``FlagWriter.how``
says which ran; the study reports it beside the provider.

Launch order (the one subtle part): the kernel is launched *before* the copies are issued, so
its local-shard tiles start while the host is still queueing copies (a few us each); the
copy streams wait on an event recorded before the launch, never on the kernel. The kernel's
waits depend on work that CUDA cannot see (the CUDA driver's manual warns that an ordering
expressed only through stream memory operations may deadlock if the scheduler serialises the
streams): the producers here need no SM, and every wait gives up after ``MAX_SPINS`` polls and
raises the kernel's error word, so such a case shows as a failed check, never as a hang.

Under Triton's interpreter (CPU tensors) the copies and flag writes run at once, before the
launch (the interpreter runs programs one after another: a wait could never end).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import triton
import triton.language as tl


def is_rocm() -> bool:
    """True on a ROCm build of PyTorch (AMD GPUs through HIP)."""
    import torch

    return getattr(torch.version, "hip", None) is not None


@dataclass(frozen=True)
class Chunk:
    """One copy: rows [r0, r1) and columns [c0, c1) of peer ``src``'s shard into the same place
    of its staging rows, then flag ``flag`` set."""

    src: int
    r0: int
    r1: int
    c0: int
    c1: int
    flag: int


def plan(layout, rank: int) -> list[list[Chunk]]:
    """The chunks of every peer (nearest first), each peer's in copy order: M-tile blocks of
    ``layout.m_tiles_per_flag`` tiles in order; inside one, its k-groups in order (a remote
    tile computes its k-groups in that order). One chunk per flag."""
    lay = layout
    out = []
    for step in range(1, lay.world_size):
        src = (rank + step) % lay.world_size
        chunks = []
        for j in range(lay.flags_per_shard_m):
            m0 = j * lay.m_tiles_per_flag
            r0, r1 = m0 * lay.block_m, min((m0 + lay.m_tiles_per_flag) * lay.block_m, lay.m_shard)
            for g in range(lay.k_groups):
                c0 = g * lay.k_tiles_per_flag * lay.block_k
                c1 = min((g + 1) * lay.k_tiles_per_flag * lay.block_k, lay.k)
                chunks.append(Chunk(src, r0, r1, c0, c1, lay.flag_index(src, m0, g)))
        out.append(chunks)
    return out


def round_robin(per_peer: list[list[Chunk]]) -> list[Chunk]:
    """Every peer's first chunk, then every peer's second, ...: the host's issue order."""
    longest = max((len(c) for c in per_peer), default=0)
    return [c[i] for i in range(longest) for c in per_peer if i < len(c)]


@lru_cache(maxsize=1)
def _memcpy2d():
    """(``cudaMemcpy2DAsync`` taking dst, dpitch, src, spitch, width, height, stream as ints,
    the library's name) from CuPy or cuda-python, or (None, "") on ROCm or with neither."""
    if is_rocm():
        return None, ""
    try:
        from cupy.cuda import runtime as cp

        def copy(dst, dpitch, src, spitch, width, height, stream):
            cp.memcpy2DAsync(dst, dpitch, src, spitch, width, height, cp.memcpyDefault, stream)
        return copy, "CuPy"
    except ImportError:
        pass
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return None, ""
    kind = rt.cudaMemcpyKind.cudaMemcpyDefault  # the direction from the addresses (a peer's, or pinned host memory)

    def copy(dst, dpitch, src, spitch, width, height, stream):
        err, = rt.cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, rt.cudaStream_t(stream))
        if err != rt.cudaError_t.cudaSuccess:
            raise RuntimeError(f"cudaMemcpy2DAsync failed: {err}")
    return copy, "cuda-python"


def can_copy_2d(t) -> bool:
    """Strided (2-D) copies by a copy engine are available for tensors like ``t``: CUDA with
    cuda-python or CuPy, or any CPU tensor (the interpreter copies with torch)."""
    return not t.is_cuda or _memcpy2d()[0] is not None


def launch(kernel, grid, *args, **kwargs) -> None:
    """The flag kernel's launches go through here (kernels/triton/aot.py records them)."""
    kernel[grid](*args, **kwargs)


@triton.jit
def _set_flag_kernel(flags, index, value):
    # the copy before it on this stream is complete (stream order): publish it at system scope
    tl.atomic_xchg(flags + index, value, sem="release", scope="sys")


class FlagWriter:
    """``flags[index] = value`` on the current stream, behind the work queued there."""

    def __init__(self, device_is_cuda: bool = True):
        self.fn = None
        self.how = "host store (interpreter)"
        if not device_is_cuda:
            return
        if not is_rocm():
            try:
                import torch
                import torch.distributed._symmetric_memory  # noqa: F401  (registers the symm_mem ops)
                from torch._C._distributed_c10d import _SymmetricMemory

                probe = torch.zeros(1, dtype=torch.uint32, device="cuda")
                _SymmetricMemory.stream_write_value32(probe, 0, 1)  # raises where the op is missing
                self.fn = _SymmetricMemory.stream_write_value32
                self.how = "cuStreamWriteValue32 (stream front end, no kernel)"
            except (ImportError, AttributeError, RuntimeError):
                pass
        if self.fn is None:
            self.how = "one-thread flag kernel (release, system scope)"

    def __call__(self, flags, index: int, value: int) -> None:
        import torch

        if not flags.is_cuda:
            flags[index] = value
        elif self.fn is not None:
            self.fn(flags.view(torch.uint32), index, value)
        else:
            write_by_kernel(flags, index, value)


def write_by_kernel(flags, index: int, value: int) -> None:
    """``flags[index] = value`` by a one-thread kernel on the current stream (ROCm's way)."""
    launch(_set_flag_kernel, (1,), flags, index, value, num_warps=1)


class CopyEngineFetch:
    """The copy-engine fetch of one :class:`~kernels.triton.ag_gemm.HbmBuffer`: its chunks,
    streams and flag writer. ``peers``: every rank's shard as a tensor on this device (a peer's
    symmetric-memory buffer; the local shard is never copied), or in pinned host memory where
    one GPU emulates its peers (a copy within one GPU may run as a kernel on the SMs, which the
    persistent GEMM holds; a copy from host memory is always a copy engine's)."""

    def __init__(self, buf, peers):
        import torch

        if buf.knobs.stage_layout != "rows":
            raise ValueError("fetch='ce' copies whole row blocks: it needs stage_layout='rows'")
        if len(peers) != buf.world_size:
            raise ValueError(f"fetch='ce' needs every rank's shard ({buf.world_size}), got {len(peers)}")
        self.buf, self.peers = buf, peers
        self.per_peer = plan(buf.layout, buf.rank)
        self.order = round_robin(self.per_peer)
        self.cuda = buf.stage.is_cuda
        self.flag = FlagWriter(self.cuda)
        self.two_d = can_copy_2d(buf.stage)
        if not self.two_d and any(c.c0 or c.c1 != buf.layout.k for c in self.order):
            raise ValueError("k-group chunks need 2-D copies (cuda-python or CuPy on CUDA)")
        self.streams = [torch.cuda.Stream(device=buf.stage.device) for _ in self.per_peer] if self.cuda else []
        self.stream_of = {cs[0].src: i for i, cs in enumerate(self.per_peer) if cs}
        self._start = None

    @property
    def mechanism(self) -> str:
        two_d = any(c.c0 or c.c1 != self.buf.layout.k for c in self.order)
        copy = f"cudaMemcpy2DAsync via {_memcpy2d()[1] or 'torch'}" if two_d else "cudaMemcpyAsync"
        if is_rocm():
            copy = "hipMemcpyAsync"
        return f"copy engine ({copy}, {len(self.order)} chunks), flags: {self.flag.how}"

    def mark_start(self) -> None:
        """Record where the call starts on the caller's stream (before the kernel's launch): the
        copy streams wait for that point, never for the kernel."""
        import torch

        if self.cuda:
            self._start = torch.cuda.Event()
            self._start.record()
            for s in self.streams:
                s.wait_event(self._start)

    def issue(self, epoch: int) -> None:
        """Queue every chunk's copy and flag write (on CPU tensors: do them now)."""
        import torch

        stage = self.buf.stage_rows
        for c in self.order:
            dst = stage(c.src)[c.r0:c.r1, c.c0:c.c1]
            src = self.peers[c.src][c.r0:c.r1, c.c0:c.c1]
            if not self.cuda:
                dst.copy_(src)
                self.flag(self.buf.flags, c.flag, epoch)
                continue
            with torch.cuda.stream(self.streams[self.stream_of[c.src]]):
                if c.c0 == 0 and c.c1 == self.buf.layout.k:
                    dst.copy_(src, non_blocking=True)  # whole rows: one contiguous block, cudaMemcpyAsync
                else:
                    es = dst.element_size()
                    _memcpy2d()[0](dst.data_ptr(), dst.stride(0) * es, src.data_ptr(), src.stride(0) * es,
                                (c.c1 - c.c0) * es, c.r1 - c.r0, torch.cuda.current_stream().cuda_stream)
                self.flag(self.buf.flags, c.flag, epoch)

    def join(self) -> None:
        """The caller's stream waits for every copy (the next call may overwrite staging)."""
        import torch

        if self.cuda:
            main = torch.cuda.current_stream()
            for s in self.streams:
                main.wait_stream(s)
