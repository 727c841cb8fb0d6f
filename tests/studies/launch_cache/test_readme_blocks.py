"""launch-cache's README blocks (traces/launch-cache/README.md): what each prints from the
committed bundles, and that a run without the figures a block needs is left out, not an error."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from studies.launch_cache import README_BLOCKS
from studies.launch_cache.analysis import seed_tables
from tests.support.committed_claims import analyses

BIG = "gpu-1048576-launches-NVIDIA-H100-80GB-HBM3.bundle.json"
#: an analysis with none of the study's tables (a failed analysis, another study's run)
EMPTY = SimpleNamespace(tables={})


def _all() -> list:
    return [analyses("launch-cache")[name] for name in sorted(analyses("launch-cache"))]


def _rows(md: str) -> list[dict[str, str]]:
    lines = md.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split(" | ")]
    return [dict(zip(head, (c.strip() for c in line.strip("|").split(" | ")))) for line in lines[2:]]


def test_per_launch_takes_each_policy_from_its_largest_tiny_kernel_run_and_the_seed_from_seed_py():
    rows = _rows(README_BLOCKS["per-launch"](_all(), {}))
    assert [r["per launch"] for r in rows] == ["real", "user", "sys"]
    per_call, cached, ratio, seed = list(rows[0])[1:]
    assert per_call == "per_call (us, 16,384-launch run, median [range] of 5 phases)"
    assert cached == "locked_cache (us, 1,048,576-launch run, 1 phase)"
    assert "point figure" in ratio
    assert rows[0][per_call] == "190 [175, 207]" and rows[0][cached] == "28.2"  # 1 phase: no range
    assert all(0 < float(r[ratio]) < 1 for r in rows)  # all three fall
    summary = seed_tables()["seed_summary"].set_index(["launches", "build"])
    assert rows[0][seed].startswith(f"{summary.loc[(1048576, 'patch'), 'real_vs_baseline']:#.2g} (")


def test_per_launch_without_the_large_run_compares_within_the_16384_launch_run():
    rows = _rows(README_BLOCKS["per-launch"]([a for name, a in analyses("launch-cache").items() if name != BIG], {}))
    assert "locked_cache (us, 16,384-launch run, median [range] of 5 phases)" in rows[0]
    assert README_BLOCKS["per-launch"]([EMPTY], {}) == "(no GPU run of tiny kernels ran locked_cache, per_call)"


def test_pool_vs_lock_has_a_row_per_run_and_mode_where_both_ran_with_the_ci_or_why_none():
    rows = _rows(README_BLOCKS["pool-vs-lock"](_all(), {}))
    assert len(rows) == 10  # 256 sync, 4,096 and 16,384 sync/async, 1,048,576 sync, two CPU runs x two malloc modes
    assert not any("data a launch" in r["run"] for r in rows)  # the size-limit runs have no pool
    big = next(r for r in rows if r["run"].startswith("GPU, 1,048,576 launches"))
    assert big["pool / locked_cache real (95% CI)"] == "n/a (1 phase)" and big["pool real (s)"] == "40.1"
    five = [r for r in rows if r["phases"] == "5"]
    assert len(five) == 5 and all("[" in r["pool / locked_cache real (95% CI)"] for r in five)
    assert all("(inconclusive)" in r["pool / locked_cache real (95% CI)"] for r in rows if r["phases"] == "3")
    assert {r["check"] for r in rows} == {"ok"}


def test_size_limit_shows_the_runs_with_application_data_and_size_limits_counters():
    rows = _rows(README_BLOCKS["size-limit"](_all(), {}))
    assert len(rows) == 5 and all("1 MiB of data a launch" in r["run"] for r in rows)
    over = next(r for r in rows if r["run"].startswith("GPU") and "block 200 MB" in r["run"])
    assert over["blocks freed over the limit (a phase)"] == "3,916"
    assert over["size_limit / locked_cache real (95% CI)"].endswith("(clear)")
    oom = next(r for r in rows if "every 64th data allocation fails" in r["run"])
    assert oom["per_call real (s)"] == oom["size_limit / locked_cache real (95% CI)"] == "not run"
    assert oom["out-of-memory retries (a phase)"] == "64" and oom["check"] == "ok"


def test_segments_shows_the_named_providers_sync_variants_of_the_gpu_runs_without_data():
    rows = _rows(README_BLOCKS["segments"](_all(), {"providers": "per_call|locked_cache"}))
    assert {r["variant"] for r in rows} == {"per_call/sync", "locked_cache/sync"}
    assert all(r["run"].startswith("GPU") and "data" not in r["run"] for r in rows)
    # each column in the unit its magnitude calls for (workbench.base.units)
    assert [re.sub(r" \((ns|us|ms|s)\)$", "", c) for c in list(rows[0])[2:]] == ["acquire", "launch", "sync", "release"]


@pytest.mark.parametrize("name", ["pool-vs-lock", "size-limit", "segments"])
def test_a_run_without_the_tables_is_left_out(name):
    args = {"providers": "per_call|locked_cache|pool"}
    assert README_BLOCKS[name]([EMPTY, *_all()], args) == README_BLOCKS[name](_all(), args)
    assert README_BLOCKS[name]([EMPTY], args) == "_(no rows)_"
