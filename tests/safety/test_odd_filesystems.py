"""Stores on read-only file systems and machine locks that are not files (issue 42).

A store on a read-only mount (a CD, a read-only bind mount, a snapshot) is listed and read: a
WAL store is read through a ``-shm`` file that cannot be made there, so it is read as
immutable. The read-only mount is a bind mount in a mount namespace of the test's own
(``unshare``, as root or through a user namespace); where neither is allowed, a folder without
write permission stands in (the same failure for a user who is not root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.safety.hostile import ROOT, cli, refused, valid_doc, write


def _ro_mount_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs none /mnt && mount -o remount,ro /mnt"],
                           capture_output=True)
    return probe.returncode == 0


def _read_only(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m workbench ARGS`` with ``folder`` read-only (a read-only bind mount of itself)."""
    cmd = [sys.executable, "-m", "workbench", *args]
    env = os.environ | {"WORKBENCH_LOCK": "/tmp/perf-workbench-test-ro.lock"}
    if _RO_MOUNT:
        script = f'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
        return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(folder), *cmd], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env=env)
    folder.chmod(0o555)
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    finally:
        folder.chmod(0o755)


_RO_MOUNT = _ro_mount_works()
needs_read_only = pytest.mark.skipif(not _RO_MOUNT and os.geteuid() == 0,
                                     reason="no read-only mount here (unshare -rm refused) and root writes any folder")


@pytest.fixture()
def ro_store(tmp_path) -> Path:
    """A WAL store with one imported run, closed cleanly (no -wal, no -shm left)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    store = folder / "results.sqlite"
    assert cli("import", str(write(tmp_path, valid_doc())), store=store).code == 0
    assert sorted(p.name for p in folder.iterdir()) == ["results.sqlite"]
    return store


@needs_read_only
def test_a_store_on_a_read_only_file_system_is_listed_and_read(ro_store):
    folder = ro_store.parent
    got = _read_only(folder, "--store", str(ro_store), "runs", "--json")
    assert got.returncode == 0, got.stderr
    assert "20260101-000000-calibration-abc123" in got.stdout and got.stderr == ""
    got = _read_only(folder, "--store", str(ro_store), "report", "latest", "--format", "issue", "-o",
                     str(ro_store.parent.parent / "r.md"))
    assert got.returncode == 0, got.stderr
    assert (ro_store.parent.parent / "r.md").read_text().startswith("### ")


@needs_read_only
def test_writing_to_a_read_only_store_is_one_line_naming_it(ro_store):
    got = _read_only(ro_store.parent, "--store", str(ro_store), "run", "calibration", "--preset", "smoke")
    lines = got.stderr.strip().splitlines()
    assert got.returncode == 2 and len(lines) == 1, got.stderr
    assert "read-only" in lines[0] and str(ro_store) in lines[0] and "corrupt" not in lines[0]
    got = _read_only(ro_store.parent, "--store", str(ro_store), "tag", "latest", "x")
    assert got.returncode == 2 and "read-only" in got.stderr and "corrupt" not in got.stderr


@needs_read_only
def test_a_read_only_store_with_unsaved_changes_in_its_log_says_so(ro_store):
    (ro_store.parent / "results.sqlite-wal").write_bytes(b"\0" * 4096)  # a log the store was not checkpointed from
    got = _read_only(ro_store.parent, "--store", str(ro_store), "runs")
    lines = got.stderr.strip().splitlines()
    assert got.returncode == 2 and len(lines) == 1, got.stderr
    assert "write-ahead log" in lines[0] and "writable folder" in lines[0]


@pytest.mark.parametrize("make, kind", [
    (lambda p: Path("/dev/full"), "a device"),
    (lambda p: Path("/dev/null"), "a device"),
    (lambda p: (os.mkfifo(p / "fifo"), p / "fifo")[1], "a FIFO"),
    (lambda p: (p / "dir").mkdir() or p / "dir", "Is a directory"),
    (lambda p: (os.symlink("/dev/full", p / "link"), p / "link")[1], "symbolic link"),
    (lambda p: (os.symlink(p / "loop", p / "loop"), p / "loop")[1], "symbolic link"),
    (lambda p: Path("/proc/1/nonexistent/x.lock"), "cannot open"),
])
def test_a_lock_that_is_not_a_lock_file_is_one_line_naming_workbench_lock(make, kind, tmp_path):
    lock = make(tmp_path)
    got = cli("run", "calibration", "--preset", "smoke", store=tmp_path / "s.sqlite",
              env={"WORKBENCH_LOCK": str(lock)})
    refused(got, f"WORKBENCH_LOCK={lock}", kind)
    assert "study failed" not in got.err and "OSError" not in got.err
