"""Harness: calibration of inner loops, raw samples, floor, google-benchmark JSON."""

import json
import sys
import time

import pytest

from workbench import harness


def test_calibrated_samples_are_long_against_the_clock():
    m = harness.time_callable(lambda: None, repeat=5, min_sample_s=2e-3)
    assert len(m.samples_ns) == 5
    assert m.loops > 100  # an empty call is ~tens of ns: thousands of calls per 2 ms sample
    assert all(s > 0 for s in m.samples_ns)


def test_per_call_time_is_close_to_a_known_sleep():
    m = harness.time_callable(lambda: time.sleep(0.002), repeat=3, min_sample_s=1e-3)
    assert m.loops == 1
    assert all(2e6 <= s < 2e7 for s in m.samples_ns)


def test_budget_limits_repetitions_but_keeps_three():
    m = harness.time_callable(lambda: time.sleep(0.01), repeat=1000, budget_s=0.01, min_sample_s=1e-3)
    assert 3 <= len(m.samples_ns) < 10


def test_floor_is_positive_and_small():
    assert 0 < harness.floor_ns() < 5_000


GBENCH = {
    "context": {"date": "x"},
    "benchmarks": [
        {"name": "BM_sum/process_time/real_time", "run_name": "BM_sum/process_time/real_time", "run_type": "iteration",
         "repetitions": 3, "real_time": 170.5, "cpu_time": 160, "time_unit": "us"},
        {"name": "BM_sum/process_time/real_time", "run_name": "BM_sum/process_time/real_time", "run_type": "iteration",
         "repetitions": 3, "real_time": 171.5, "cpu_time": 160, "time_unit": "us"},
        {"name": "BM_sum/process_time/real_time_mean", "run_name": "BM_sum/process_time/real_time",
         "run_type": "aggregate", "aggregate_name": "mean", "real_time": 171, "time_unit": "us"},
    ],
}


def test_parse_gbench_keeps_repetitions_and_drops_aggregates():
    out = harness.parse_gbench(json.dumps(GBENCH))
    assert out == {"BM_sum/process_time/real_time": [170500.0, 171500.0]}


def test_parse_gbench_rejects_other_json():
    with pytest.raises(ValueError, match="google-benchmark"):
        harness.parse_gbench('{"traceEvents": []}')


def test_run_gbench_reports_the_failed_command_and_its_text():
    cmd = [sys.executable, "-c", "import sys; sys.stderr.write('INVALID_ARGUMENT; bad module'); sys.exit(3)"]
    with pytest.raises(harness.ExternalCommandError) as err:
        harness.run_gbench(cmd)
    assert "INVALID_ARGUMENT" in str(err.value) and err.value.returncode == 3


def test_run_gbench_parses_a_command_output():
    cmd = [sys.executable, "-c", f"print({json.dumps(json.dumps(GBENCH))})"]
    assert harness.run_gbench(cmd)["BM_sum/process_time/real_time"] == [170500.0, 171500.0]


def test_run_command_turns_a_timeout_into_a_clear_error():
    cmd = [sys.executable, "-c", "import time; time.sleep(5)"]
    with pytest.raises(harness.ExternalCommandError, match="timed out after 1 s"):
        harness.run_command(cmd, timeout_s=1)


def test_a_slow_first_call_does_not_end_calibration_at_one_loop():
    calls = []

    def fn():
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.01)  # a cold first call, longer than a whole sample

    m = harness.time_callable(fn, repeat=3, min_sample_s=1e-3)
    assert m.loops > 1
