"""GPU timing with CUDA events (runs on the GPU machines; skips without a GPU)."""

import pytest

from workbench import env, harness

pytestmark = pytest.mark.gpu


def test_cuda_event_timing_scales_with_work():
    import torch

    small = torch.randn(1 << 16, device="cuda")  # launch-bound: ~10 us per call from Python
    big = torch.randn(1 << 28, device="cuda")  # 1 GiB read + written: ~0.5 ms at HBM speed
    m_small = harness.time_cuda(lambda: small.mul_(1.0), repeat=5)
    m_big = harness.time_cuda(lambda: big.mul_(1.0), repeat=5)
    assert m_small.clock == "cuda-event"
    assert min(m_big.samples_ns) > 10 * min(m_small.samples_ns)


def test_l2_flush_is_not_counted_in_the_samples():
    import torch

    x = torch.randn(1 << 20, device="cuda")
    cold = harness.time_cuda(lambda: x.sum(), repeat=10, flush_l2=True)
    flush = torch.empty((256 << 20) // 4, dtype=torch.int32, device="cuda")
    flush_alone = harness.time_cuda(lambda: flush.zero_(), repeat=5)
    # The flush runs between samples, outside each sample's events.
    assert sorted(cold.samples_ns)[5] < min(flush_alone.samples_ns) / 2


def test_environment_names_the_gpus():
    e = env.capture()
    assert e.get("gpu_count", 0) >= 1 and e["gpu_names"]
