"""Paths checked as paths before any run-id lookup, and parameters checked once before any child
run starts (issue 42)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import workbench as wb
from tests.safety.hostile import cli, refused, stored_runs, valid_doc, write
from workbench.results import catalog


def _never_opened():
    raise AssertionError("a path was looked up as a run id (every committed bundle read)")


def _chain(tmp_path: Path, links: int) -> Path:
    target = write(tmp_path, valid_doc(), "real.json")
    for i in range(links):
        link = tmp_path / f"c{i}.json"
        link.symlink_to(target)
        target = link
    return target


@pytest.mark.parametrize("make, why", [
    (lambda p: (p / "loop.json").symlink_to(p / "loop.json") or p / "loop.json", "loops"),
    (lambda p: (p / "zero.json").symlink_to("/dev/zero") or p / "zero.json", "a device"),
    (lambda p: (p / "null").symlink_to("/dev/null") or p / "null", "a device"),
    (lambda p: _chain(p, 59), "chain of links too long"),
    (lambda p: (p / "folder.json").mkdir() or p / "folder.json", "a folder"),
    (lambda p: (p / "plainfolder").mkdir() or p / "plainfolder", "a folder"),
    (lambda p: (os.mkfifo(p / "fifo.json"), p / "fifo.json")[1], "a FIFO"),
    (lambda p: (p / "dangling.json").symlink_to(p / "gone.json") or p / "dangling.json", "a link to a missing file"),
    (lambda p: p / "missing.json", "No such file"),
])
def test_a_path_that_is_not_a_regular_file_is_one_line_and_no_id_lookup(make, why, tmp_path, monkeypatch):
    path = make(tmp_path)
    monkeypatch.chdir(tmp_path)
    for ref in (str(path), path.name):
        assert catalog.is_path(ref)
        with pytest.raises(Exception) as exc:
            catalog.find_run(ref, _never_opened)
        assert why in str(exc.value) and "\n" not in str(exc.value)
        with pytest.raises(wb.BadInput, match=why):
            wb.load(ref)


def test_a_chain_of_links_short_enough_is_read(tmp_path):
    assert wb.load(str(_chain(tmp_path, 20))).id == "20260101-000000-calibration-abc123"


@pytest.mark.parametrize("ref", ["latest", "20260101-000000-calibration", "2026"])
def test_ids_and_prefixes_are_still_ids(ref, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "latest").write_text("a file named latest does not hide the newest run")
    assert not catalog.is_path(ref)


def test_the_cli_reads_such_paths_as_paths(tmp_path):
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    refused(cli("report", str(tmp_path / "zero.json"), "--format", "issue"), "a device")
    refused(cli("compare", str(tmp_path / "zero.json"), str(tmp_path / "zero.json")), "a device")


@pytest.mark.parametrize("sets, fragment", [(["repeat=nan"], "parameter 'repeat'"),
                                            (["nosuch=1"], "nosuch"),
                                            (["repeat=-3"], "repeat")])
def test_repeat_runs_checks_the_parameters_once_before_any_child(sets, fragment, tmp_path):
    store = tmp_path / "s.sqlite"
    args = [a for s in sets for a in ("--set", s)]
    got = cli("run", "calibration", "--repeat-runs", "3", *args, store=store)
    refused(got, fragment)
    assert "run 1 of 3" not in got.out  # no child was started
    assert "kept" not in got.err and stored_runs(store) == 0


def test_repeat_runs_checks_the_store_and_precision_before_any_child(tmp_path):
    got = cli("run", "calibration", "--repeat-runs", "2", "--precision", "nan%", store=tmp_path / "s.sqlite")
    refused(got, "precision")
    assert "run 1 of 2" not in got.out
