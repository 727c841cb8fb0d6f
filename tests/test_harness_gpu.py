"""GPU timing with CUDA events (runs on the GPU machines; skips without a GPU)."""

import pytest

from workbench import env, harness

pytestmark = pytest.mark.gpu


def test_cuda_event_timing_scales_with_work():
    import torch

    small = torch.randn(1 << 16, device="cuda")
    big = torch.randn(1 << 26, device="cuda")
    m_small = harness.time_cuda(lambda: small.mul_(1.0), repeat=5)
    m_big = harness.time_cuda(lambda: big.mul_(1.0), repeat=5)
    assert m_small.clock == "cuda-event"
    assert min(m_big.samples_ns) > 10 * min(m_small.samples_ns)


def test_l2_flush_makes_a_cache_resident_read_slower():
    import torch

    x = torch.randn(1 << 20, device="cuda")  # 4 MB: fits in L2
    hot = harness.time_cuda(lambda: x.sum(), repeat=10)
    cold = harness.time_cuda(lambda: x.sum(), repeat=10, flush_l2=True)
    flush = torch.empty((256 << 20) // 4, dtype=torch.int32, device="cuda")
    flush_alone = harness.time_cuda(lambda: flush.zero_(), repeat=5)
    cold_med, hot_med = sorted(cold.samples_ns)[5], sorted(hot.samples_ns)[5]
    # The flush runs between samples and must not be counted in them.
    assert cold_med < min(flush_alone.samples_ns) / 2
    assert cold_med >= hot_med * 0.9


def test_environment_names_the_gpus():
    e = env.capture()
    assert e.get("gpu_count", 0) >= 1 and e["gpu_names"]
