"""Messages that say what happened (issue 28): "stored as a failed run" only when it was; a full
disk named as a full disk, never a corrupt store; settings that are not numbers refused
before anything is made."""

from __future__ import annotations

import sqlite3

import pytest

from tests.safety.hostile import cli, refused, stored_runs
from workbench import cli as wbcli
from workbench.base import env as envmod
from workbench.results import store as wbstore
from workbench.results.store import Store


def _errors(stderr: str) -> list[str]:
    """The error lines (a run in this process draws its progress on stderr too)."""
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "soon"])
def test_a_stall_limit_that_is_no_number_of_seconds_is_refused(value, tmp_path):
    store = tmp_path / "results.sqlite"
    for args in (["run", "calibration", "--preset", "smoke"], ["ab", "calibration", "--preset", "smoke"]):
        refused(cli(*args, store=store, env={"WORKBENCH_STALL_S": value}), "WORKBENCH_STALL_S")
    assert not store.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5"])
def test_a_precision_cap_that_is_no_number_of_seconds_is_refused(value, tmp_path):
    store = tmp_path / "results.sqlite"
    refused(cli("run", "calibration", "--preset", "smoke", "--precision", "2%", "--precision-cap", value,
                store=store), "precision-cap")
    assert not store.exists()


def test_a_lock_that_cannot_be_locked_stores_nothing_and_says_so(tmp_path):
    store = tmp_path / "results.sqlite"
    (tmp_path / "lockdir").mkdir()
    result = cli("run", "calibration", "--preset", "smoke", store=store,
                 env={"WORKBENCH_LOCK": str(tmp_path / "lockdir")})
    refused(result, "machine lock")
    assert "stored as" not in result.err and stored_runs(store) == 0


def test_a_failure_before_the_run_is_stored_says_nothing_was_stored(store, monkeypatch, capsys):
    def broken():
        raise OSError("the environment could not be read")

    monkeypatch.setattr(envmod, "capture", broken)
    assert wbcli.main(["--store", str(store.path), "run", "calibration", "--preset", "smoke"]) == 1
    err = _errors(capsys.readouterr().err)
    assert len(err) == 1 and "nothing was stored" in err[0] and "stored as" not in err[0], err
    assert store.runs() == []


# The CLI in a process of its own whose store can grow by PAGES pages at most: SQLite then
# answers SQLITE_FULL as on a full disk, and the run's process ends (its run reads interrupted).
_FILLING = r"""
import sqlite3, sys
sys.path.insert(0, sys.argv[1])
from workbench.results import store
real, pages = sqlite3.connect, int(sys.argv[2])

def connect(*args, **kw):
    con = real(*args, **kw)
    con.execute(f"PRAGMA max_page_count = {con.execute('PRAGMA page_count').fetchone()[0] + pages}")
    return con

store.sqlite3.connect = connect
from workbench.cli import main
sys.exit(main(sys.argv[3:]))
"""


def test_a_disk_that_fills_during_a_run_is_named_and_the_points_before_are_kept(tmp_path):
    import subprocess
    import sys

    from tests.safety.hostile import ROOT

    path = tmp_path / "results.sqlite"
    Store(path).close()
    proc = subprocess.run([sys.executable, "-c", _FILLING, str(ROOT), "4", "--store", str(path), "run",
                           "calibration", "--set", "repeat=300"], capture_output=True, text=True, timeout=300,
                          env=__import__("os").environ | {"WORKBENCH_LOCK": str(tmp_path / "lock")})
    err = _errors(proc.stderr)
    assert proc.returncode == 2 and len(err) == 1, proc.stderr[-2000:]
    assert "is full" in err[0] and "corrupt" not in err[0], err
    (run,) = Store(path).runs()
    assert run["variants"] >= 1, "the points stored before the disk filled are kept"
    # its end stored as failed where the disk still took that, else it reads interrupted
    said = {"failed": "stored as failed run", "interrupted": "reads as interrupted"}[run["status"]]
    assert f"{said} {run['run_id']}" in err[0] or (said in err[0] and run["run_id"] in err[0]), err


def test_a_disk_full_at_the_start_stores_nothing_and_says_the_disk_is_full(store, monkeypatch, capsys):
    def full(self, rec):
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode = 13  # SQLITE_FULL
        raise error

    monkeypatch.setattr(Store, "_insert_run", full)
    code = wbcli.main(["--store", str(store.path), "run", "calibration", "--preset", "smoke"])
    err = _errors(capsys.readouterr().err)
    monkeypatch.undo()
    assert code == 2 and len(err) == 1 and "is full" in err[0] and "stored as" not in err[0], err
    assert Store(store.path).runs() == []


def test_an_io_error_with_no_space_left_is_a_full_disk_not_a_corrupt_store(tmp_path, monkeypatch):
    """Reading a WAL store needs its shared-memory file: on a full disk SQLite says only "disk
    I/O error" (SQLITE_IOERR); the free space tells it from damage."""
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = 10 | (18 << 8)  # SQLITE_IOERR_SHMSIZE
    monkeypatch.setattr(wbstore, "_no_space", lambda path: True)
    assert "is full" in wbstore.disk_full(tmp_path / "r.sqlite", error)
    monkeypatch.setattr(wbstore, "_no_space", lambda path: False)
    assert wbstore.disk_full(tmp_path / "r.sqlite", error) is None
    corrupt = sqlite3.DatabaseError("database disk image is malformed")
    corrupt.sqlite_errorcode = 11
    monkeypatch.setattr(wbstore, "_no_space", lambda path: True)
    assert wbstore.disk_full(tmp_path / "r.sqlite", corrupt) is None
