"""ag-gemm's copy-engine fetch (``HbmKnobs(fetch="ce")``, provider ``hbm-buffer-ce``): flag
granularity and chunk order from the shape, the chunk plan, the arrival-ordered GEMM queue,
and the kernel under Triton's interpreter fed by the copies (peers emulated in one process;
the copies and flag writes run before the launch there, the GPU queues them after it)."""

from __future__ import annotations

import pytest
import torch

from tests.support.interpreted import run_interpreted
from kernels.triton import copyengine
from kernels.triton.ag_gemm import HbmBuffer, HbmKnobs, ce_granularity
from studies.ag_gemm import mechanisms

SMALL = dict(block_m=16, block_n=16, block_k=16)


def test_granularity_is_whole_rows_one_block_per_tile_in_one_wave_else_four():
    # one wave: one chunk per M-tile (a remote tile waits for its own rows only)
    assert ce_granularity(4, one_wave=True) == 1
    # several waves: 4 row blocks per peer shard; fewer tiles than blocks; chunks asked for
    assert ce_granularity(32, one_wave=False) == 8
    assert ce_granularity(3, one_wave=False) == 1
    assert ce_granularity(32, one_wave=False, chunks=2) == 16
    assert ce_granularity(4, one_wave=True, chunks=2) == 2


@pytest.mark.parametrize("ws,m,programs", [(2, 1024, 132), (4, 1024, 132), (2, 4096, 132), (2, 16384, 132)])
def test_chunks_at_the_issue_shapes_are_contiguous_row_blocks_never_cut_along_k(ws, m, programs):
    # the cause of the copy-engine kernel's slowness at M=1024 was 2-D copies (a k-group of an
    # M-tile: 128 strided rows); every chunk must be one contiguous block of whole rows
    k, ms = 8192, m // ws
    lay = HbmKnobs(fetch="ce").layout(ms, 3584, k, ws, programs)
    assert lay.k_groups == 1
    shards = [torch.empty(ms, k, dtype=torch.float16) for _ in range(ws)]
    ptrs = torch.tensor([s.data_ptr() for s in shards])
    buf = HbmBuffer(shards[0], ptrs, torch.empty(k, 3584, dtype=torch.float16), 0, ws, HbmKnobs(fetch="ce"),
                    peers=shards)
    one_wave = ws * (ms // 128) * 14 <= programs
    assert len(buf.ce.ops) == (ws - 1) * ((ms // 128) if one_wave else 4)
    for c, _, dst, src, nbytes in buf.ce.ops:
        assert dst.is_contiguous() and src.is_contiguous() and dst.shape == src.shape == (c.r1 - c.r0, k)
        assert nbytes == (c.r1 - c.r0) * k * 2
    assert sum(op[4] for op in buf.ce.ops) == (ws - 1) * ms * k * 2  # every peer row once


@pytest.mark.parametrize("ws,m_shard,n,k,programs,chunks", [(2, 80, 32, 48, 2, 2), (4, 64, 48, 80, 64, 3),
                                                            (3, 1024, 3584, 8192, 132, 0), (4, 4096, 3584, 8192, 132, 0)])
def test_plan_copies_every_peer_row_and_column_once_one_flag_per_chunk(ws, m_shard, n, k, programs, chunks):
    kn = HbmKnobs(**(SMALL if m_shard < 128 else {}), fetch="ce", ce_chunks=chunks)
    lay = kn.layout(m_shard, n, k, ws, programs)
    for rank in range(ws):
        per_peer = copyengine.plan(lay, rank)
        assert [cs[0].src for cs in per_peer] == [(rank + s) % ws for s in range(1, ws)]  # nearest first
        for cs in per_peer:
            cover = torch.zeros(m_shard, k, dtype=torch.int32)
            for c in cs:
                cover[c.r0:c.r1] += 1
            assert bool((cover == 1).all())
        flags = [c.flag for cs in per_peer for c in cs]
        assert len(set(flags)) == len(flags) and all(0 <= f < lay.num_flags for f in flags)
        order = copyengine.round_robin(per_peer)
        assert sorted(order, key=repr) == sorted([c for cs in per_peer for c in cs], key=repr)
        assert [c.src for c in order[:ws - 1]] == [cs[0].src for cs in per_peer]  # every peer's first chunk first
        tiles = lay.arrival_tiles(rank)
        assert len(tiles) == len(set(tiles)) == lay.num_gemm_tiles
        assert all(src == rank for src, _, _ in tiles[:lay.tiles_per_shard * lay.n_tiles])  # the local shard first


def test_ce_needs_row_staging_and_every_peer():
    shard = torch.randn(16, 16).half()
    ptrs = torch.tensor([shard.data_ptr()] * 2)
    with pytest.raises(ValueError, match="stage_layout='rows'"):
        HbmBuffer(shard, ptrs, torch.randn(16, 16).half(), 0, 2, HbmKnobs(**SMALL, fetch="ce", stage_layout="tiles"),
                  peers=[shard, shard])
    with pytest.raises(ValueError, match="every rank's shard"):
        HbmBuffer(shard, ptrs, torch.randn(16, 16).half(), 0, 2, HbmKnobs(**SMALL, fetch="ce"), peers=[shard])
    with pytest.raises(ValueError, match="fetch must be one of"):
        HbmBuffer(shard, ptrs, torch.randn(16, 16).half(), 0, 2, HbmKnobs(**SMALL, fetch="dma"), peers=[shard, shard])


SCENARIOS = {
    # one wave (every tile its program): one chunk per M-tile; three launches (epochs)
    "one-wave-tiles": dict(world_size=2, m=64, n=32, k=64, knobs=dict(SMALL, fetch="ce", programs=8), launches=3),
    # several waves: row blocks of 2 M-tiles, the last one partial (3 tiles a shard), stream-K on
    "waves-row-blocks": dict(world_size=2, m=96, n=32, k=48, knobs=dict(SMALL, fetch="ce", programs=5, ce_chunks=2)),
    # four ranks, shapes off the tiles, pointer loads
    "ws4-pointers": dict(world_size=4, m=36, n=20, k=24, knobs=dict(SMALL, fetch="ce", programs=40, tma=False,
                                                                   ce_chunks=2)),
    # the copy engines never copy the last chunk: the tiles that need it give up, never hang
    "lost-chunk": dict(world_size=2, m=64, n=32, k=64, knobs=dict(SMALL, fetch="ce", programs=8),
                       launches=1, drop_chunks=1, max_spins=3),
}


@pytest.fixture(scope="module")
def runs():
    return dict(zip(SCENARIOS, run_interpreted("studies.ag_gemm.emulate", list(SCENARIOS.values()))))


@pytest.mark.parametrize("name, chunks, mpf", [("one-wave-tiles", 2, 1), ("waves-row-blocks", 2, 2),
                                              ("ws4-pointers", 3, 1)])
def test_kernel_fed_by_copies_matches_reference(runs, name, chunks, mpf):
    for r in runs[name]:
        assert r["ok"] and not r["timed_out"], r
        assert (r["k_groups"], r["m_tiles_per_flag"], r["chunks"]) == (1, mpf, chunks)
        assert r["mechanism"]["sms_for_comm"].startswith("0") and r["mechanism"]["fetch"].startswith("copy engine")


def test_a_chunk_never_copied_times_out_instead_of_hanging(runs):
    assert all(r["timed_out"] and not r["ok"] for r in runs["lost-chunk"]), runs["lost-chunk"]


def test_mechanism_tags_name_the_mover_the_gemm_and_the_sms():
    sm = mechanisms.tags("hbm-buffer")
    assert sm["fetch"].startswith("SM loads") and "shared" in sm["sms_for_comm"]
    assert mechanisms.short(mechanisms.tags("hbm-buffer-ce")).startswith("copy engine; Triton")
    assert mechanisms.short(mechanisms.tags("nccl")).startswith("NCCL")
    rocm = mechanisms.tags("ce-chunked", vend="rocm")
    assert "hipMemcpyAsync" in rocm["fetch"] and "hipBLASLt" in rocm["gemm"]
    recorded = {"mechanism": {"fetch": "copy engine (cudaMemcpy2DAsync via CuPy, 24 chunks), flags: x",
                              "gemm": "persistent Triton GEMM, local shard first, TMA descriptors", "sms_for_comm": "0"}}
    assert mechanisms.short(mechanisms.tags("hbm-buffer-ce", recorded)) == "copy engine; Triton, TMA; comm SMs: 0"
    assert copyengine.FlagWriter(device_is_cuda=False).how.startswith("host store")


def test_trace_summary_says_when_the_first_remote_tile_started():
    import pandas as pd

    from studies.ag_gemm import spans

    rows = [{"category": "gemm", "start_ns": 0, "dur_ns": 50_000, "args": {"local": True}},
            {"category": "wait", "start_ns": 0, "dur_ns": 3_000, "args": {"local": False}},
            {"category": "gemm", "start_ns": 3_000, "dur_ns": 40_000, "args": {"local": False}},
            {"category": "gemm", "start_ns": 9_000, "dur_ns": 40_000, "args": {"local": False}}]
    got = spans.summary(pd.DataFrame(rows))
    assert got["first_remote_gemm_us"] == 3.0 and got["wait_total_us"] == 3.0
    assert "first_remote_gemm_us" not in spans.summary(pd.DataFrame(rows[:1]))
