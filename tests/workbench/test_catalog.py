"""Runs told apart and addressable: labels from the parameters that differ, origin, machine and
time; tags, notes and delete; committed bundles by the same ids in the CLI and the app; an old
store migrates (and a read-only old store still opens)."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from workbench.results.catalog import Catalog, label_params, origin_kind, param_label, titles
from workbench.cli import main
from workbench.data.record import RunRecord, VariantResult
from workbench.seam.registry import get, registry
from workbench.results.store import SCHEMA_VERSION, Store, StoreError, committed_runs, to_bundle


def _rec(run_id, repeat=5, threads=1, origin="local", created="2026-01-01T00:00:00Z", gpu=False):
    env = {"fingerprint": "f", "cpu_model": "Test CPU"} | ({"gpu_names": ["NVIDIA H200"] * 4, "gpu_count": 4} if gpu else {})
    return RunRecord(run_id=run_id, study="calibration", params={"repeat": repeat, "threads": threads, "torch": False},
                     env=env, status="complete", created_utc=created, origin=origin,
                     reproduce="python -m workbench run calibration",
                     variants=[VariantResult("empty-call", {}, [30.0, 31.0, 32.0], True, "ok")])


def test_labels_show_the_parameters_that_differ_then_origin_machine_and_time(store):
    store.save(_rec("20260101-000000-calibration-aaaaaa", repeat=5))
    store.save(_rec("20260101-000001-calibration-bbbbbb", repeat=50, created="2026-01-01T00:00:01Z", gpu=True,
                    origin="bundle:from-h200"))
    hs = Catalog(store, committed=lambda sid: ([], [])).headers(study="calibration")
    assert [h.label for h in hs] == ["repeat=50", "repeat=5"]  # threads and torch are the same: not shown
    newest = hs[0]
    assert newest.origin == "imported" and newest.machine == "4x NVIDIA H200" and newest.when() == "2026-01-01 00:00 UTC"
    assert newest.title() == "repeat=50 · imported · 4x NVIDIA H200 · 2026-01-01 00:00 UTC"


def test_runs_alike_in_label_machine_and_minute_have_distinct_titles(store):
    """A picker that shows titles merges equal ones (Streamlit's selectbox did: the page then
    showed another run than the one picked)."""
    for run_id in ("20260101-000000-calibration-aaaaaa", "20260101-000010-calibration-bbbbbb"):
        store.save(_rec(run_id, repeat=5, created="2026-01-01T00:00:" + run_id[13:15] + "Z"))
    hs = Catalog(store, committed=lambda sid: ([], [])).headers(study="calibration")
    assert hs[0].title() == hs[1].title()
    shown = titles(hs)
    assert shown == {"20260101-000010-calibration-bbbbbb": hs[0].title() + " · bbbbbb",
                     "20260101-000000-calibration-aaaaaa": hs[0].title() + " · aaaaaa"}
    study = get("calibration")
    assert label_params(study, [{"repeat": 1, "threads": 1}, {"repeat": 1, "threads": 2}]) == ["threads"]
    assert param_label({"comms": ["a", "b", "c", "d", "e"], "w": 2}, ["comms", "w"]) == "comms=a,b,...(+3) w=2"
    assert origin_kind("committed:traces/x.bundle.json") == "committed" and origin_kind("local") == "local"


def test_a_study_may_declare_its_label_parameters(monkeypatch):
    study = get("calibration")
    monkeypatch.setattr(study, "LABEL_PARAMS", ("threads",), raising=False)
    assert label_params(study, [{"repeat": 1, "threads": 1}, {"repeat": 2, "threads": 1}]) == ["threads"]


def test_tags_note_and_delete_in_the_store(store):
    store.save(_rec("20260101-000000-calibration-aaaaaa"))
    got = store.annotate("20260101-000000-calibration-aaaaaa", add=["baseline", "bios-v2"], note="  before\nthe update ")
    assert got == {"tags": ["baseline", "bios-v2"], "note": "before the update"}
    got = store.annotate("20260101-000000-calibration-aaaaaa", remove=["bios-v2"])
    assert got["tags"] == ["baseline"] and got["note"] == "before the update"
    assert store.runs()[0]["tags"] == ["baseline"]
    with pytest.raises(StoreError, match="plain word"):
        store.annotate("20260101-000000-calibration-aaaaaa", add=["<script>"])
    assert store.delete("20260101-000000") == "20260101-000000-calibration-aaaaaa"
    assert store.runs() == [] and store.annotations() == {}
    assert sqlite3.connect(store.path).execute("SELECT COUNT(*) FROM variants").fetchone()[0] == 0


def test_a_running_run_is_not_deleted(store):
    rec = _rec("20260101-000000-calibration-aaaaaa")
    rec.status = "running"
    store.begin(rec)
    with pytest.raises(StoreError, match="still running"):
        store.delete(rec.run_id)


def _v1_store(path):
    """A store as schema 1 made it (no annotations table, no blocks column), with one run."""
    s = Store(path)
    s.save(_rec("20260101-000000-calibration-aaaaaa"))
    s.close()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE annotations")
    con.execute("ALTER TABLE variants DROP COLUMN blocks")
    con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    con.commit()
    con.close()


def test_a_schema_1_store_migrates_when_opened_and_keeps_its_runs(tmp_path):
    path = tmp_path / "old.sqlite"
    _v1_store(path)
    s = Store(path)
    assert s.schema_version == SCHEMA_VERSION
    assert [r["run_id"] for r in s.runs()] == ["20260101-000000-calibration-aaaaaa"]
    s.annotate("20260101-000000-calibration-aaaaaa", add=["kept"])
    assert sqlite3.connect(path).execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == \
        str(SCHEMA_VERSION)
    assert all(v.blocks is None for v in s.load("20260101-000000-calibration-aaaaaa").variants)


def test_a_schema_1_store_that_cannot_be_written_still_opens_without_tags(tmp_path, monkeypatch):
    """A read-only old store (another user's, a read-only mount) is read as it is."""
    path = tmp_path / "old.sqlite"
    _v1_store(path)
    before = path.read_bytes()
    monkeypatch.setattr(Store, "writable", lambda self: False)
    s = Store(path, create=False)
    assert s.schema_version == 1 and s.runs()[0]["tags"] == [] and s.annotations() == {}
    assert s.load("20260101-000000-calibration-aaaaaa").variants  # read without a blocks column
    with pytest.raises(StoreError, match="cannot hold tags"):
        s.annotate("20260101-000000-calibration-aaaaaa", add=["x"])
    s.close()
    assert path.read_bytes() == before


COMMITTED = [r for sid in sorted(registry()) for r in committed_runs(sid)]


@pytest.mark.skipif(not COMMITTED, reason="no committed bundles under traces/")
def test_committed_runs_have_the_same_ids_in_the_cli_without_a_store(tmp_path, capsys):
    rec = COMMITTED[0]
    none = tmp_path / "none.sqlite"
    out = tmp_path / "r.issue.md"
    assert main(["--store", str(none), "report", rec.run_id[:22], "--format", "issue", "-o", str(out)]) == 0
    assert rec.run_id in out.read_text() and not none.exists()
    assert main(["--store", str(none), "export", rec.run_id, "-o", str(tmp_path / "b.json")]) == 0
    capsys.readouterr()
    assert main(["--store", str(none), "runs", "--all", "--study", rec.study, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert rec.run_id in {r["run_id"] for r in listed} and {r["origin"] for r in listed} == {"committed"}
    assert main(["--store", str(none), "report", "no-such-run", "-o", str(out)]) == 2
    assert "no run with id" in capsys.readouterr().err


@pytest.mark.skipif(not COMMITTED, reason="no committed bundles under traces/")
def test_tag_and_delete_from_the_cli(store, capsys, monkeypatch):
    sp = str(store.path)
    store.save(_rec("20260101-000000-calibration-aaaaaa"))
    committed = COMMITTED[0].run_id
    assert main(["--store", sp, "tag", committed, "h200", "--note", "the reference run"]) == 0
    capsys.readouterr()
    main(["--store", sp, "runs", "--all", "--json"])
    by_id = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert by_id[committed]["tags"] == ["h200"] and by_id[committed]["note"] == "the reference run"
    # a committed run is a file of the checkout: not deleted from here
    assert main(["--store", sp, "delete", committed, "--yes"]) == 2
    # no terminal and no --yes: nothing deleted
    monkeypatch.setattr("sys.stdin", open(os.devnull))
    assert main(["--store", sp, "delete", "20260101-000000-calibration-aaaaaa"]) == 2
    assert Store(sp).has("20260101-000000-calibration-aaaaaa")
    assert main(["--store", sp, "delete", "20260101-000000-calibration-aaaaaa", "--yes"]) == 0
    assert not Store(sp).has("20260101-000000-calibration-aaaaaa")


def test_an_imported_bundle_is_labelled_imported(store, tmp_path, capsys):
    path = tmp_path / "x.bundle.json"
    path.write_text(json.dumps(to_bundle(_rec("20260101-000000-calibration-aaaaaa"))))
    assert main(["--store", str(store.path), "import", str(path)]) == 0
    capsys.readouterr()
    main(["--store", str(store.path), "runs", "--json"])
    (row,) = json.loads(capsys.readouterr().out)
    assert row["origin"] == "imported" and row["source"] == "bundle:x.bundle.json"


# --- committed bundles known without reading them (issue 44: an error line in under a second) ------

def _committed_tree(tmp_path, n: int = 3):
    from workbench.results.store import write_bundle

    root = tmp_path / "traces"
    (root / "calibration").mkdir(parents=True)
    paths = []
    for i in range(n):
        rec = _rec(f"2026010{i}-000000-calibration-{i:06x}", repeat=5 + i)
        paths.append(write_bundle(rec, root / "calibration" / f"run{i}.bundle.json"))
    return root, paths


def test_the_index_resolves_run_ids_then_reads_only_the_bundle_asked_for(tmp_path, monkeypatch):
    from workbench.results import catalog as cat

    root, paths = _committed_tree(tmp_path)
    index_file = tmp_path / "cache" / "committed.json"
    first = cat.CommittedIndex(root, index_file)
    assert set(first.run_ids("calibration")) == {"20260100-000000-calibration-000000", "20260101-000000-calibration-000001",
                                                 "20260102-000000-calibration-000002"}
    assert index_file.exists()
    # a fresh process: the ids come from the index, and a known bundle is built without its schema check
    checked = []
    monkeypatch.setattr(cat.wbstore, "check_bundle", lambda doc: checked.append(doc), raising=False)
    monkeypatch.setattr("workbench.results.store.check_bundle", lambda doc: checked.append(doc))
    again = cat.CommittedIndex(root, index_file)
    assert len(again.run_ids("calibration")) == 3 and checked == []
    rec = again.read(paths[1])
    assert rec.run_id == "20260101-000000-calibration-000001" and checked == []
    # a bundle that changed is read (and checked) again, whatever the index says
    doc = json.loads(paths[1].read_text())
    doc["run"]["params"]["repeat"] = 99
    paths[1].write_text(json.dumps(doc))
    rec = cat.CommittedIndex(root, index_file).read(paths[1])
    assert rec.params["repeat"] == 99 and len(checked) == 1


def test_bytes_that_differ_from_the_index_are_checked_even_at_the_same_size_and_time(tmp_path):
    from workbench.results import catalog as cat

    root, paths = _committed_tree(tmp_path, 1)
    index_file = tmp_path / "index.json"
    cat.CommittedIndex(root, index_file).run_ids("calibration")
    st = paths[0].stat()
    text = paths[0].read_text()
    bad = text.replace('"status": "complete"', '"status": "complet3"')  # same length, not a valid status
    assert len(bad) == len(text)
    paths[0].write_text(bad)
    os.utime(paths[0], ns=(st.st_atime_ns, st.st_mtime_ns))  # size and time as the index knows them
    with pytest.raises(StoreError):
        cat.CommittedIndex(root, index_file).read(paths[0])
