"""GPU timing with the harness's one clock, DistTimer, on one GPU without a process group
(runs on the GPU machines; skips without a GPU). Its distributed side is tested under gloo
in tests/workbench/test_harness.py and by every multi-GPU study test."""

import pytest

from workbench.base import env
from workbench.running import harness

pytestmark = pytest.mark.gpu


def test_cuda_event_timing_scales_with_work():
    import torch

    small = torch.randn(1 << 16, device="cuda")  # launch-bound: ~10 us per call from Python
    big = torch.randn(1 << 28, device="cuda")  # 1 GiB read + written: ~0.5 ms at HBM speed
    timer = harness.DistTimer()
    m_small = timer.measure(lambda: small.mul_(1.0), repeat=5)
    m_big = timer.measure(lambda: big.mul_(1.0), repeat=5)
    assert m_small.clock == "cuda-event" and len(m_small.extra["rank_median_ns"]) == 1
    assert min(m_big.samples_ns) > 10 * min(m_small.samples_ns)


def test_l2_flush_is_not_counted_in_the_samples():
    import torch

    x = torch.randn(1 << 20, device="cuda")
    cold = harness.DistTimer(flush_l2=True).measure(lambda: x.sum(), repeat=10)
    flush = torch.empty((256 << 20) // 4, dtype=torch.int32, device="cuda")
    flush_alone = harness.DistTimer().measure(lambda: flush.zero_(), repeat=5)
    # The flush runs before each call, outside that call's events.
    assert sorted(cold.samples_ns)[5] < min(flush_alone.samples_ns) / 2


def test_the_sleep_kernel_hides_the_host_s_launch_cost():
    import torch

    x = torch.zeros(16, device="cuda")

    def op():  # 100 tiny kernels: the host takes longer to launch each than the GPU to run it
        for _ in range(100):
            x.add_(1.0)

    launched = harness.DistTimer().samples(op, repeat=10, warmup=2)
    queued = harness.DistTimer(sleep_cycles=harness.SLEEP_CYCLES).samples(op, repeat=10, warmup=2)
    assert queued.median_ns < 0.8 * launched.median_ns, (queued.median_ns, launched.median_ns)


def test_environment_names_the_gpus():
    e = env.capture()
    assert e.get("gpu_count", 0) >= 1 and e["gpu_names"]
