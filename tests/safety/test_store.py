"""Store paths, the machine lock, processes a run starts, the watchdog, and many writers at
once (issue: safety). Every bad store path exits 2 with one line and leaves the file alone."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from workbench.base import procs
from workbench.running import runner
from workbench.cli import main
from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import APPLICATION_ID, Store, StoreError, to_bundle
from workbench.seam.study import Param, ParamSpace
from tests.support.paths import ROOT



def _one_error_line(err: str, fragment: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]


def _record(run_id: str, variants: int = 3) -> RunRecord:
    return RunRecord(run_id=run_id, study="calibration", params={"repeat": 3}, env={"fingerprint": "f", "cpu_model": "X"},
                     status="complete", created_utc="2026-01-01T00:00:00Z",
                     variants=[VariantResult(f"v{i}", {"i": i}, [1.0, 2.0, 3.0], True, "ok") for i in range(variants)])


# --- store paths ---------------------------------------------------------------------------------

def _look_alike(path: Path, extra_sql: str = "", drop: str = "") -> None:
    store = Store(path)
    store.close()
    con = sqlite3.connect(path)
    if drop:
        con.execute(f"DROP TABLE {drop}")
    if extra_sql:
        con.executescript(extra_sql)
    con.commit()
    con.close()


def _corrupt_row(path: Path) -> None:
    store = Store(path)
    store.save(_record("r1"))
    store.close()
    con = sqlite3.connect(path)
    con.execute("UPDATE runs SET params='{not json' WHERE run_id='r1'")
    con.commit()
    con.close()


STORE_PATHS = {
    "a folder": (lambda p: p.mkdir(), "is a folder"),
    "a FIFO": (lambda p: os.mkfifo(p), "not a regular file"),
    "an empty file": (lambda p: p.write_bytes(b""), "empty file"),
    "a text file": (lambda p: p.write_text("hello"), "not SQLite"),
    "another application's SQLite": (lambda p: sqlite3.connect(p).execute("CREATE TABLE x (a)").connection.commit(),
                                     "another application"),
    "a look-alike without its tables": (lambda p: _look_alike(p, drop="variants"), "missing tables: variants"),
    "a look-alike with a view": (lambda p: _look_alike(p, "CREATE VIEW v AS WITH RECURSIVE c(x) AS (SELECT 1 UNION "
                                                          "ALL SELECT x + 1 FROM c) SELECT x FROM c;"),
                                 "unexpected view v"),
    "a look-alike with a trigger": (lambda p: _look_alike(p, "CREATE TRIGGER t AFTER INSERT ON runs BEGIN "
                                                             "DELETE FROM variants; END;"), "unexpected trigger t"),
    "a store with a corrupt row": (_corrupt_row, "corrupt params"),
}


@pytest.mark.parametrize("case", list(STORE_PATHS))
@pytest.mark.parametrize("command", [["runs"], ["import", "BUNDLE"], ["run", "calibration", "--preset", "smoke"]])
def test_bad_store_paths_exit_2_with_one_line_and_stay_untouched(case, command, tmp_path, capsys):
    make, fragment = STORE_PATHS[case]
    if case == "a store with a corrupt row" and command[0] != "runs":
        pytest.skip("a corrupt row only matters to a command that reads it")
    path = tmp_path / "results.sqlite"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    bundle = tmp_path / "b.bundle.json"
    bundle.write_text(json.dumps(to_bundle(_record("20260101-000000-calibration-aaaaaa"))))
    capsys.readouterr()
    start = time.monotonic()
    assert main(["--store", str(path), *[str(bundle) if a == "BUNDLE" else a for a in command]]) == 2
    assert time.monotonic() - start < 20  # a FIFO or a recursive view must not hang it
    _one_error_line(capsys.readouterr().err, fragment)
    if before is not None:
        assert path.read_bytes() == before
    # a file with the workbench's application id is opened (read-only) and may keep WAL files beside it
    ours = case.startswith(("a store with", "a look-alike"))
    assert sorted(p.name for p in tmp_path.iterdir() if not (ours and p.name.endswith(("-wal", "-shm")))) == \
        sorted(["results.sqlite", "b.bundle.json"])


def test_a_path_with_hash_question_mark_and_percent_works(tmp_path, capsys):
    folder = tmp_path / "a#b?c%41d"
    folder.mkdir()
    path = folder / "r#1?x=%2e.sqlite"
    Store(path).save(_record("r1"))
    assert main(["--store", str(path), "runs", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["r1"]
    other = folder / "other#?.sqlite"
    other.write_text("not ours")
    assert main(["--store", str(other), "runs"]) == 2 and other.read_text() == "not ours"


def test_a_mistyped_store_folder_is_never_created(tmp_path, capsys):
    missing = tmp_path / "typo" / "deeper" / "results.sqlite"
    for command in (["runs"], ["compare", "a", "b"], ["report", "latest"], ["export", "latest", "-o", "x.json"],
                    ["run", "calibration", "--preset", "smoke"]):
        assert main(["--store", str(missing), *command]) == 2
        err = capsys.readouterr().err
        assert "does not exist" in err or "no results store" in err, err
    assert not (tmp_path / "typo").exists()


def test_a_read_only_store_is_refused_before_anything_is_measured(tmp_path, capsys, monkeypatch):
    path = tmp_path / "results.sqlite"
    Store(path).save(_record("r1"))
    measured = []
    monkeypatch.setattr(runner.harness, "floor_ns", lambda: measured.append(1) or 1.0)
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "lock"))
    monkeypatch.setattr(Store, "writable", lambda self: False)  # as root, no file is read-only
    assert main(["--store", str(path), "run", "calibration", "--preset", "smoke"]) == 2
    _one_error_line(capsys.readouterr().err, "read-only")
    assert main(["--store", str(path), "import", str(tmp_path / "x.json")]) == 2
    assert measured == [] and not (tmp_path / "lock").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_file_is_readable_but_not_writable(tmp_path):
    path = tmp_path / "results.sqlite"
    Store(path).save(_record("r1"))
    path.chmod(0o444)
    store = Store(path)
    assert [r["run_id"] for r in store.runs()] == ["r1"] and not store.writable()


def test_a_run_whose_process_died_is_shown_interrupted(tmp_path):
    store = Store(tmp_path / "results.sqlite")
    rec = _record("20260101-000000-calibration-dead00", variants=2)
    rec.status = "running"
    dead = subprocess.Popen(["true"])
    dead.wait()
    store.begin(RunRecord(run_id=rec.run_id, study=rec.study, params={}, env={}, created_utc=rec.created_utc))
    owner = {"host": os.uname().nodename, "boot": "", "pid": dead.pid, "start": "1"}
    store._conn.execute("UPDATE meta SET value=? WHERE key=?", (json.dumps(owner), "owner:" + rec.run_id))
    store._conn.commit()
    assert store.runs()[0]["status"] == "interrupted"
    assert "ended without finishing" in store.load(rec.run_id).error
    Store(store.path)  # a writer stores what readers saw
    assert sqlite3.connect(store.path).execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    # a live run stays running
    store.begin(RunRecord(run_id="alive", study="calibration", params={}, env={}, created_utc="2026-01-02T00:00:00Z"))
    assert {r["run_id"]: r["status"] for r in Store(store.path).runs()}["alive"] == "running"


def test_the_store_is_in_wal_mode(store):
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- the machine lock ----------------------------------------------------------------------------

def test_the_default_lock_does_not_follow_tmpdir(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKBENCH_LOCK", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert runner.lock_path() == runner.DEFAULT_LOCK


def test_the_lock_is_usable_by_every_user_and_says_who_holds_it(tmp_path, monkeypatch):
    lock = tmp_path / "sub" / "machine.lock"
    monkeypatch.setenv("WORKBENCH_LOCK", str(lock))
    held, release = threading.Event(), threading.Event()

    def holder():
        with runner.machine_lock(study="calibration", params={"repeat": 50, "threads": [1, 2]}):
            held.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(30)
    assert lock.stat().st_mode & 0o777 == 0o666
    messages = []
    threading.Timer(0.5, release.set).start()
    with runner.machine_lock(on_wait=messages.append, study="x"):
        pass
    t.join()
    (msg,) = messages
    assert "calibration" in msg and "repeat=50" in msg and "threads=1,2" in msg and f"pid {os.getpid()}" in msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens read-only files for writing")
def test_a_lock_file_others_made_read_only_still_locks(tmp_path, monkeypatch):
    lock = tmp_path / "machine.lock"
    lock.write_text("")
    lock.chmod(0o444)
    monkeypatch.setenv("WORKBENCH_LOCK", str(lock))
    with runner.machine_lock(study="calibration"):
        pass


def test_an_unusable_lock_path_exits_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("WORKBENCH_LOCK", str(tmp_path / "file" / "machine.lock"))
    assert main(["--store", str(tmp_path / "r.sqlite"), "run", "calibration", "--preset", "smoke"]) == 2
    assert "machine lock" in capsys.readouterr().err


# --- processes a run starts die with it --------------------------------------------------------

def _alive(pid: int) -> bool:
    return procs.start_ticks(pid) != "" and not procs._zombie(pid)


def test_children_started_under_the_lock_are_killed_with_their_groups_and_orphans(tmp_path):
    before = subprocess.Popen(["sleep", "60"])  # not the run's: must survive
    try:
        with procs.Children():
            direct = subprocess.Popen(["sleep", "60"])
            grouped = subprocess.Popen(["sh", "-c", "sleep 60 & echo $! > grandchild; wait"], cwd=tmp_path,
                                       start_new_session=True)
            orphaner = subprocess.Popen(["sh", "-c", "sleep 60 & echo $! > orphan"], cwd=tmp_path)
            orphaner.wait()  # its sleep is now an orphan, adopted by this (subreaper) process
            for name in ("grandchild", "orphan"):
                while not (tmp_path / name).exists() or not (tmp_path / name).read_text().strip():
                    time.sleep(0.05)
            grandchild, orphan = (int((tmp_path / n).read_text()) for n in ("grandchild", "orphan"))
            assert all(map(_alive, (direct.pid, grandchild, orphan)))
        time.sleep(0.2)
        assert not any(map(_alive, (direct.pid, grouped.pid, grandchild, orphan)))
        assert _alive(before.pid)
    finally:
        before.kill()
        before.wait()


_KILLED_PARENT = r"""
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from workbench.base import procs
if sys.argv[2] == "bound":  # PDEATHSIG: the child dies with the thread that started it
    p = subprocess.Popen(procs.bound(["sleep", "60"]))
else:  # the sentinel: a child in a session of its own (like torchrun), started under Children
    procs.Children().__enter__()
    p = subprocess.Popen(["sleep", "60"], start_new_session=True)
print(p.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["bound", "sentinel"])
def test_a_run_s_child_dies_when_the_run_is_sigkilled(how):
    parent = subprocess.Popen([sys.executable, "-c", _KILLED_PARENT, str(ROOT), how], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


# --- the watchdog ----------------------------------------------------------------------------------

class _Stuck:
    """A study that records one point, then spins without progress."""

    ID = "stuck"
    SPACE = ParamSpace(params=(Param("x", "int", 1),), presets={"smoke": {}, "quick": {}})

    @staticmethod
    def requires(params):
        return None

    @staticmethod
    def run(params, ctx):
        ctx.record(VariantResult("p0", {}, [1.0, 2.0, 3.0], True, "ok"))
        while True:
            time.sleep(0.01)


def test_a_run_without_progress_is_stopped_by_the_watchdog(store, monkeypatch):
    monkeypatch.setenv("WORKBENCH_STALL_S", "1")
    start = time.monotonic()
    with pytest.raises(runner.Stalled):
        runner.execute(_Stuck, {}, store)
    assert time.monotonic() - start < 30
    rec = store.load("latest")
    assert rec.status == "failed" and "no progress for 1 s" in rec.error and len(rec.variants) == 1


# --- many writers ------------------------------------------------------------------------------------

_IMPORTER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from workbench.cli import main
for f in sys.argv[3:]:
    assert main(["--store", sys.argv[2], "import", f]) == 0
"""


def test_threads_and_processes_import_and_run_into_one_store(store, tmp_path):
    """Through the app's store access (a connection per operation): every run complete with
    all its variants, the file intact."""
    from pages._ui import open_store

    bundles = []
    for i in range(16):
        path = tmp_path / f"b{i}.bundle.json"
        path.write_text(json.dumps(to_bundle(_record(f"20260101-000000-calibration-{i:06x}", variants=40))))
        bundles.append(str(path))
    errors: list[BaseException] = []

    def guarded(fn):
        def call():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)
        return call

    def import_some(paths):
        from workbench.results.store import read_bundle

        for p in paths:
            assert open_store().import_run(read_bundle(p))

    def run_one():
        import studies.calibration as cal

        runner.execute(cal, {}, open_store(), preset="smoke")

    procs_ = [subprocess.Popen([sys.executable, "-c", _IMPORTER, str(ROOT), str(store.path), *bundles[i::4]])
              for i in (0, 1)]
    threads = [threading.Thread(target=guarded(lambda p=bundles[i::4]: import_some(p))) for i in (2, 3)]
    threads += [threading.Thread(target=guarded(run_one)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [p.wait(300) for p in procs_] == [0, 0]
    assert not errors, errors
    runs = Store(store.path).runs()
    assert len(runs) == 18 and all(r["status"] == "complete" for r in runs)
    assert sorted(r["variants"] for r in runs if r["run_id"].startswith("20260101-000000"))[0] == 40
    assert sqlite3.connect(store.path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert sqlite3.connect(store.path).execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
