"""Cost bounded by work, not only by bytes (issue 28): a sweep or a list parameter over its limit
and a bundle of too many variants are refused before any work, with the limit in the one line;
a trace larger than may be read is refused from its size, before a byte is read; a report's
cost grows with its variants and stays small per variant. Each: exit 0 or 2, one line, nothing
stored on a refusal, within a time and memory bound."""

from __future__ import annotations

import json
import resource
import time

from tests.safety.hostile import cli, refused, stored_runs, valid_doc, write
from workbench.data.schema import MAX_VARIANTS
from workbench.seam.study import MAX_LIST_VALUES, MAX_SWEEP_POINTS


def test_a_sweep_over_the_limit_is_refused_before_anything_is_made(tmp_path):
    store = tmp_path / "results.sqlite"
    # x 2 workers x 6 providers: 12,000 points, and the run's A/A twins (the engine's null controls)
    chunks = ",".join(str(c) for c in range(1, 1001))
    result = cli("run", "cpu-reduction", "--set", f"chunks={chunks}", "--set", "workers=1,2",
                 "--set", "experiments=grid", store=store, timeout_s=120)
    refused(result, "12,00", f"{MAX_SWEEP_POINTS:,}")
    assert result.peak_rss_mb < 1024
    assert not store.exists() and not (tmp_path / "machine.lock").exists()


def test_a_list_parameter_over_the_limit_is_refused(tmp_path):
    store = tmp_path / "results.sqlite"
    sizes = ",".join(str(16 * (i + 1)) for i in range(MAX_LIST_VALUES + 1))
    refused(cli("run", "opencl-events", "--set", f"sizes={sizes}", store=store, timeout_s=120),
            "sizes", f"{MAX_LIST_VALUES:,}")
    assert not store.exists()


def test_a_bundle_of_too_many_variants_is_refused_fast(tmp_path):
    doc = valid_doc(variants=MAX_VARIANTS + 1)
    bundle = write(tmp_path, doc)
    store = tmp_path / "results.sqlite"
    for args in (["import", str(bundle)], ["report", str(bundle), "--format", "issue", "-o", str(tmp_path / "r.md")]):
        start = time.monotonic()
        result = cli(*args, store=store, timeout_s=300)
        refused(result, "run.variants", f"{MAX_VARIANTS:,}")
        assert time.monotonic() - start < 120 and result.peak_rss_mb < 1536
    assert stored_runs(store) == 0 and not (tmp_path / "r.md").exists()


def _cpu_s(*args: str) -> float:
    """CPU seconds (user + system) of one CLI call and its children: unlike wall time, barely
    moved by other work on the machine (a loaded CI run once took 12 s of wall time for the
    one-variant report and 10.7 s for the 500-variant one)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = cli(*args, timeout_s=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.code == 0, result.err[-2000:]
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_a_report_costs_per_variant_not_per_variant_squared(tmp_path):
    """Two reports, n and 4n variants: the larger costs far less than 16x the smaller (a
    quadratic step would) once the fixed cost (imports, one chart) is taken out. Each size is
    timed three times, interleaved, and its least CPU time kept: under a second suite's load one
    call's CPU time rose by half, and the fixed cost is subtracted, so one slow baseline could
    hide or fake the whole difference. At 1,000 and 4,000 variants the per-variant cost stands
    well above that noise (500 variants cost about 0.1 s over one: a floor, not a measure). It
    caught the engine pairing each variant with its baseline by scanning every base with ``==``
    (4,000 variants: 25 s of 48)."""
    bundles = {}
    for n in (1, 1000, 4000):
        doc = valid_doc(variants=n)
        doc["run"]["run_id"] = f"20260101-000000-calibration-n{n}"
        bundles[n] = write(tmp_path, doc, f"n{n}.bundle.json")
    cpu_s = {n: [] for n in bundles}
    for _ in range(3):
        for n, bundle in bundles.items():
            cpu_s[n].append(_cpu_s("report", str(bundle), "--format", "issue", "-o", str(tmp_path / f"n{n}.md")))
    least = {n: min(times) for n, times in cpu_s.items()}
    per_n, per_4n = max(least[1000] - least[1], 0.1), least[4000] - least[1]
    assert per_4n < 10 * per_n, cpu_s  # linear: about 4x; quadratic: 16x


def test_a_trace_larger_than_may_be_read_is_refused_before_reading(tmp_path):
    """A sparse 3 GiB file: the refusal comes from its size, in a process allowed far less
    memory than the file (reading it would fail or be killed, not refuse in one line)."""
    trace = tmp_path / "huge.json"
    with open(trace, "wb") as fh:
        fh.write(b'[{"ph": "X", "name": "k", "ts": 1, "dur": 1, "pid": 1, "tid": 1},')
        fh.truncate(3 << 30)
    start = time.monotonic()
    result = cli("trace", str(trace), timeout_s=120, mem_mb=1024)
    refused(result, "huge.json", "MiB", "WORKBENCH_TRACE_INFLATE_MAX_MB", "nothing was read")
    assert time.monotonic() - start < 60


def test_the_read_limit_follows_its_variable(tmp_path):
    trace = tmp_path / "t.json"
    events = [{"ph": "X", "name": f"k{i}", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(40_000)]
    trace.write_text(json.dumps(events))  # ~2.4 MB
    refused(cli("trace", str(trace), env={"WORKBENCH_TRACE_INFLATE_MAX_MB": "1"}), "t.json", "1 MiB")
    assert cli("trace", str(trace)).code == 0
