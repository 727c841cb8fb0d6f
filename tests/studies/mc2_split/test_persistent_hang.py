"""mc2-split's ``triton-persistent`` all-reduce: the hang of the committed ws2 runs and its fix.

The optimistic launch's programs sit on SMs while they wait for matmuls queued after them on
another stream; a matmul that needs those SMs then waits for them while they wait for its flag
(kernels/triton/allreduce.py's module doc). Fixed by two launches per op: the optimistic one
gives its SMs back after ``YIELD_SPINS`` polls, the fallback one (queued behind the op's last
matmul, an order CUDA sees) resumes where each program stopped. Under Triton's interpreter the
ranks are emulated one launch at a time (``studies/mc2_split/emulate.py``); on a GPU the cycle
is forced on one device (every SM held by the optimistic launch, cuBLAS matmuls behind it).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.interpreted import run_interpreted

SCENARIOS = {
    # chunks of several sizes, every launch finishing its work: the fallback finds nothing to do
    "clean": dict(world=3, rows=20, n=24, chunks=[2, 7, 5], persistent=True),
    # rank 1's matmul not done when its optimistic launch runs: it must give up and stop, and the
    # fallback launch (run once the flag is set) signal for it
    "late-ready": dict(world=2, rows=16, n=16, chunks=[8, 8], persistent=True, late_ready=1, yield_spins=4),
    # every rank's optimistic reduce before any signal: all programs stop; the fallback reduces
    # each chunk exactly once (a second reduction would add the partials again)
    "early-reduce": dict(world=3, rows=24, n=16, chunks=[8, 16], persistent=True, early_reduce=True, yield_spins=4),
    # a peer that never arrives: the fallback's waits give up (counted) and the check fails
    "peer-missing": dict(world=3, rows=8, n=16, chunks=[8], skip_push_from=1, max_spins=5, yield_spins=3,
                         persistent=True),
}


@pytest.fixture(scope="module")
def runs():
    return dict(zip(SCENARIOS, run_interpreted("studies.mc2_split.emulate", list(SCENARIOS.values()))))


def test_clean_op_needs_no_fallback_work(runs):
    r = runs["clean"]
    assert r["ok"] and r["counters"] == [3 * 3] * 3, r
    assert r["early_stops"] == [0, 0, 0] and r["timeouts"] == [0, 0, 0]
    assert all(p == [3] * 3 for p in r["progress"])  # every program, and program 0's signals, at chunk 3


def test_optimistic_launch_gives_up_when_its_matmul_is_not_done_and_the_fallback_signals(runs):
    r = runs["late-ready"]
    assert r["ok"], r
    assert r["early_stops"] == [0, 2], r  # rank 1's program 0 stopped once per chunk, nobody else
    assert r["counters"] == [2 * 2] * 2 and r["timeouts"] == [0, 0]


def test_reduce_resumes_without_reducing_a_chunk_twice(runs):
    r = runs["early-reduce"]
    assert r["ok"], r  # a chunk reduced twice would hold the partials' sum plus the others again
    assert r["early_stops"] == [2 * 2] * 3 and r["counters"] == [2 * 3] * 3, r


def test_a_lost_arrival_still_fails_the_check_and_is_counted(runs):
    r = runs["peer-missing"]
    assert not r["ok"]
    assert r["timeouts"][0] > 0 and r["timeouts"][2] > 0, r


def test_progress_must_cover_the_grid():
    from kernels.triton.allreduce import pull_persistent

    out = torch.zeros(4, 8, dtype=torch.float16)
    flags = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="progress of ctas"):
        pull_persistent(out, [out.clone()], [torch.zeros(1, dtype=torch.int64)], torch.zeros(1, dtype=torch.int64),
                        flags, 1, 0, torch.zeros(2, dtype=torch.int32), 4, torch.zeros(4, dtype=torch.int64), 0)


@pytest.mark.gpu
def test_starved_persistent_launch_yields_its_sms_instead_of_hanging():
    # Every SM holds the optimistic launch's programs before the matmuls are queued: with one
    # launch that waits out its polls this took the poll limit and summed unwritten rows (the
    # committed hangs); with the fix the programs stop, the matmuls run, the fallback finishes.
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from studies.mc2_split.emulate import starved_persistent

    r = starved_persistent(limit_s=60.0)
    assert not r["gave_up"] and r["ok"], r
    assert r["early_stops"] > 0 and r["timeouts"] == 0, r
    assert r["wall_s"] < 10, r
