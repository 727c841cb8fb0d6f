"""Results store: per-point writes, foreign files, bundles (the runner that writes them: test_runner)."""

import json
import sqlite3

import pytest

from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import Store, StoreError, from_bundle, read_bundle, to_gbench, write_bundle


def _record(run_id="r1", study="calibration"):
    return RunRecord(run_id=run_id, study=study, params={"repeat": 3}, env={"fingerprint": "abc", "cpu_model": "X"},
                     created_utc="2026-01-01T00:00:00Z", reproduce="python -m workbench run calibration",
                     variants=[VariantResult("a", {"w": 1}, [10.0, 11.0, 12.0], True, "ok")],
                     attachments=[("t.json", "trace/chrome-json", b'{"traceEvents": []}')])


def test_save_load_roundtrip(store):
    rec = _record()
    store.save(rec)
    back = store.load("r1")
    assert back.variants[0].samples_ns == [10.0, 11.0, 12.0]
    assert back.attachments == rec.attachments
    assert store.resolve_id("latest") == "r1"


def test_foreign_sqlite_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE x (a)")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another application"):
        Store(path)
    assert path.read_bytes() == before


def test_corrupt_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "bad.sqlite"
    path.write_bytes(b"not a database at all" * 10)
    with pytest.raises(StoreError, match="not a workbench results file"):
        Store(path)
    assert path.read_bytes() == b"not a database at all" * 10


def test_bundle_roundtrip_and_import(tmp_path, store):
    rec = _record("r2")
    path = write_bundle(rec, tmp_path / "r2.bundle.json")
    back = read_bundle(path)
    assert back.run_id == "r2" and back.attachments == rec.attachments and back.origin.startswith("bundle:")
    store.save(back)
    assert store.load("r2").variants[0].params == {"w": 1}


def test_rereading_a_bundle_skips_only_the_check_its_bytes_passed(tmp_path, monkeypatch):
    import workbench.results.store as store_mod

    path = write_bundle(_record("r3"), tmp_path / "r3.bundle.json")
    checks = []
    real = store_mod.check_bundle
    monkeypatch.setattr(store_mod, "check_bundle", lambda doc: (checks.append(1), real(doc)))
    first, second = read_bundle(path), read_bundle(path)
    assert len(checks) == 1 and first is not second and first.to_json() == second.to_json()
    # one byte changed (a sample that is not a number): checked again, and refused every time
    path.write_text(path.read_text().replace("10.0", '"ten"', 1))
    for _ in range(2):
        with pytest.raises(StoreError, match="samples_ns"):
            read_bundle(path)
    assert len(checks) == 3


@pytest.mark.parametrize("doc, fragment", [
    ({"format": "something-else"}, "not a perf-workbench result bundle"),
    ({"format": "perf-workbench-bundle", "version": 99, "run": {}}, "newer"),
    ({"format": "perf-workbench-bundle", "version": 1, "run": {"run_id": "x"}}, "run: .study. is a required property"),
    ([1, 2, 3], "not a perf-workbench result bundle"),
])
def test_bad_bundles_get_clear_errors(doc, fragment):
    with pytest.raises(StoreError, match=fragment):
        from_bundle(doc)


def test_gbench_export_has_one_row_per_sample():
    from workbench.running.harness import parse_gbench

    doc = to_gbench(_record())
    back = parse_gbench(json.dumps(doc))
    assert back == {"calibration/a": [10.0, 11.0, 12.0]}


def test_gbench_export_gives_a_failed_check_no_timings():
    from workbench.running.harness import parse_gbench

    rec = _record()
    rec.variants.append(VariantResult("wrong", {}, [1.0, 2.0, 3.0], False, "sum off by 4"))
    doc = to_gbench(rec)
    (row,) = [r for r in doc["benchmarks"] if r["name"] == "calibration/wrong"]
    assert row["error_occurred"] and "sum off by 4" in row["error_message"] and "real_time" not in row
    assert "calibration/wrong" not in parse_gbench(json.dumps(doc))


def test_a_failed_benchmark_run_is_bundled_under_a_name_that_says_so(tmp_path):
    from workbench.results.store import write_run_bundle

    rec = _record()
    ok = write_run_bundle(rec, tmp_path, "bench-ws2", failed=False)
    bad = write_run_bundle(rec, tmp_path, "bench-ws2", failed=True)
    assert ok.name == f"bench-ws2-{rec.run_id}.bundle.json"
    assert bad.name == f"bench-ws2-{rec.run_id}-FAILED.bundle.json"
    assert read_bundle(bad).run_id == rec.run_id
