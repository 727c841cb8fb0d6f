"""Copy engines and stream-written flags: the copy-engine fetch of the fused all-gather + GEMM
kernel (``HbmKnobs(fetch="ce")``, kernels/triton/ag_gemm.py), on NVIDIA and AMD GPUs.

The kernel keeps the seed's design (GEMM programs wait on ready flags over a staging buffer);
here the peers' rows reach the staging buffer by copy engines instead of the kernel's own fetch
rows, so no SM is taken by communication:

- one side stream per peer (nearest first), each waiting for the caller's stream at the point
  where the call starts (after its symmetric-memory barrier), so the copies of every peer run
  at once, on their own links and copy engines;
- per chunk (:class:`Chunk`: whole rows of one or more M-tiles, one contiguous block), one
  1-D copy from the peer's symmetric-memory buffer into the staging buffer, then the chunk's
  flag set to the launch's epoch *by the stream*, behind the copy. Chunks are never cut along
  K: that made 4x the chunks at M=1024, and every chunk costs the host its calls (below); a
  k-group is also a 2-D (strided) copy, which moved about half the bytes per second of a 1-D
  one on an H100 (``benchmarks/ag_gemm_ce_copies.py``);
- the chunks of all peers issued round-robin (every peer's first chunk, then every peer's
  second, ...), the order in which the GEMM's queue takes the remote tiles
  (``HbmLayout.arrival_tiles``);
- everything a call issues is worked out once per buffer (addresses, sizes, streams): a call
  costs the host one driver call per copy and one per flag (cuda-python's ``cuMemcpyAsync``
  and ``cuStreamWriteValue32``, 3-4 us each on the H100 hosts here) where cuda-python exists,
  else PyTorch's ``copy_`` on views made once and its stream-write op under a stream switch.
  The PyTorch calls made per chunk before (views, stream switch, copy, flag: about 40 us a
  chunk on those hosts, 16 chunks at M=1024) were the copy-engine kernel's slowness at small
  M: the host, not the copy engines (traces/ag-gemm/README.md, "The copy-engine fetch at
  small M").

Flags: ``cuStreamWriteValue32`` (the stream front end writes the value after a system-scope
fence: no kernel, no SM; what torch's own fused all-gather matmul uses), through cuda-python
or else PyTorch's symmetric-memory op, on CUDA; elsewhere (ROCm: PyTorch has no
``hipStreamWriteValue32`` binding) a one-thread Triton kernel on that stream stores the flag
with a release at system scope (an SM slot for a microsecond per chunk). ``FlagWriter.how``
says which ran; the study reports it beside the provider.

Launch order (the one subtle part): the copies are queued *before* the kernel's launch (a
Triton launch costs the host some 60-100 us, four chunks' copies and flags about 30 us), so
they run while the host launches the kernel; the copy streams wait on an event recorded at the
start of the call, never on the kernel. The kernel's waits depend on work that CUDA cannot see
(the CUDA driver's manual warns that an ordering expressed only through stream memory
operations may deadlock if the scheduler serialises the streams): the producers here need no
SM, and every wait gives up after ``MAX_SPINS`` polls and raises the kernel's error word, so
such a case shows as a failed check, never as a hang.

Under Triton's interpreter (CPU tensors) the copies and flag writes are done at once, before
the launch (the interpreter runs programs one after another: a wait could never end).
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
    """One copy: rows [r0, r1) of peer ``src``'s shard (all of K) into the same rows of its
    staging rows, then flag ``flag`` set."""

    src: int
    r0: int
    r1: int
    flag: int


def plan(layout, rank: int) -> list[list[Chunk]]:
    """The chunks of every peer (nearest first), each peer's in copy order: row blocks of
    ``layout.m_tiles_per_flag`` M-tiles, one flag each (the layout has one k-group)."""
    lay = layout
    if lay.k_groups != 1:
        raise ValueError("copy-engine chunks are whole rows: the layout must have one k-group")
    out = []
    for step in range(1, lay.world_size):
        src = (rank + step) % lay.world_size
        chunks = []
        for j in range(lay.flags_per_shard_m):
            m0 = j * lay.m_tiles_per_flag
            r0, r1 = m0 * lay.block_m, min((m0 + lay.m_tiles_per_flag) * lay.block_m, lay.m_shard)
            chunks.append(Chunk(src, r0, r1, lay.flag_index(src, m0, 0)))
        out.append(chunks)
    return out


def round_robin(per_peer: list[list[Chunk]]) -> list[Chunk]:
    """Every peer's first chunk, then every peer's second, ...: the host's issue order."""
    longest = max((len(c) for c in per_peer), default=0)
    return [c[i] for i in range(longest) for c in per_peer if i < len(c)]


@lru_cache(maxsize=1)
def _driver():
    """(``cuMemcpyAsync(dst, src, bytes, stream)``, ``cuStreamWriteValue32(stream, address,
    value)``, both taking ints) from cuda-python's driver bindings, or None on ROCm or without
    cuda-python. A driver call costs the host about a microsecond; PyTorch's ``copy_`` and
    stream-write op, with their dispatch and stream switch, several."""
    if is_rocm():
        return None
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None

    def ok(res, what):
        if res[0] != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what} failed: {res[0]}")

    def copy(dst, src, nbytes, stream):
        ok(cu.cuMemcpyAsync(dst, src, nbytes, stream), "cuMemcpyAsync")

    def write(stream, address, value):
        # flags 0: the driver fences (system scope) before the write, so the copy is visible first
        ok(cu.cuStreamWriteValue32(stream, address, value, 0), "cuStreamWriteValue32")
    return copy, write


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
        self.streams = [torch.cuda.Stream(device=buf.stage.device) for _ in self.per_peer] if self.cuda else []
        stream_of = {cs[0].src: i for i, cs in enumerate(self.per_peer) if cs}
        # per chunk, worked out once: its stream, its staging rows and the peer's (views), and
        # for the driver path their addresses, its size and its flag's address
        self.ops = []
        for c in self.order:
            dst, src = buf.stage_rows(c.src)[c.r0:c.r1], peers[c.src][c.r0:c.r1]
            if not (dst.is_contiguous() and src.is_contiguous()):
                raise ValueError("fetch='ce' copies contiguous row blocks: every peer's shard must be contiguous")
            stream = self.streams[stream_of[c.src]] if self.cuda else None
            self.ops.append((c, stream, dst, src, dst.numel() * dst.element_size()))
        self.driver = _driver() if self.cuda else None
        fsize = buf.flags.element_size()
        self.calls = [(dst.data_ptr(), src.data_ptr(), nbytes, stream.cuda_stream, buf.flags.data_ptr() + c.flag * fsize)
                      for c, stream, dst, src, nbytes in self.ops] if self.driver else []
        self._start = torch.cuda.Event() if self.cuda else None

    @property
    def mechanism(self) -> str:
        if self.driver:
            copy, flags = "cuMemcpyAsync via cuda-python", "cuStreamWriteValue32 via cuda-python (stream front end, no kernel)"
        else:
            copy, flags = "hipMemcpyAsync" if is_rocm() else "cudaMemcpyAsync", self.flag.how
        return f"copy engine ({copy}, {len(self.order)} chunks of whole rows), flags: {flags}"

    def mark_start(self) -> None:
        """Record where the call starts on the caller's stream (before the copies and the kernel's
        launch): the copy streams wait for that point, never for the kernel."""
        if self.cuda:
            self._start.record()
            for s in self.streams:
                s.wait_event(self._start)

    def issue(self, epoch: int) -> None:
        """Queue every chunk's copy and flag write (on CPU tensors: do them now)."""
        import torch

        flags = self.buf.flags
        if self.driver is not None:
            copy, write = self.driver
            for dst, src, nbytes, stream, flag in self.calls:
                copy(dst, src, nbytes, stream)
                write(stream, flag, epoch)
            return
        for c, stream, dst, src, _ in self.ops:
            if stream is None:
                dst.copy_(src)
                self.flag(flags, c.flag, epoch)
                continue
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)  # one contiguous block: cudaMemcpyAsync
                self.flag(flags, c.flag, epoch)

    def join(self) -> None:
        """The caller's stream waits for every copy (the next call may overwrite staging)."""
        import torch

        if self.cuda:
            main = torch.cuda.current_stream()
            for s in self.streams:
                main.wait_stream(s)
