"""Nsight Systems SQLite: schema drift (suffixed tables, versions) and files that carry SQL."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from workbench.traces import TraceError, load
from workbench.traces.model import validate
from tests.support.paths import DATA

FIXTURE = DATA / "two_streams_gpu0" / "nsys_small.sqlite"


def _changed(tmp_path, *statements) -> Path:
    p = tmp_path / "report.sqlite"
    shutil.copy(FIXTURE, p)
    con = sqlite3.connect(p)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return p


def test_nsys_sync_osrt_nvtx_domains_and_version():
    df, meta = load(FIXTURE)
    validate(df)
    assert meta["export_schema_version"] == "3.24.14"
    sync = df[df["category"] == "cuda_sync"].iloc[0]
    call = df[df["name"] == "cudaStreamSynchronize"].iloc[0]
    # the synchronization sits on the thread of the runtime call that waited, inside it
    assert sync["name"] == "Stream synchronize" and sync["track"] == call["track"]
    assert sync["correlation"] == call["correlation"] and sync["depth"] == call["depth"] + 1
    assert set(df[df["category"] == "osrt"]["name"].astype(str)) == {"pthread_cond_wait", "ioctl"}
    steps = df[(df["category"] == "nvtx") & (df["kind"] == "span")]
    assert len(steps) == 2 and all(a == {"domain": "training"} for a in steps["args"])
    # the domain-creation row is not an event of its own
    assert "training" not in set(df["name"].astype(str))


def test_nsys_suffixed_tables_resolve_to_the_newest(tmp_path):
    p = _changed(tmp_path, "ALTER TABLE NVTX_EVENTS RENAME TO NVTX_EVENTS_V3",
                 "CREATE TABLE NVTX_EVENTS_V2 (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER)",
                 "INSERT INTO NVTX_EVENTS_V2 VALUES (1, 2, 59, 'stale', 1)")
    df, meta = load(p)
    assert "NVTX_EVENTS_V3" in meta["tables"] and "stale" not in set(df["name"].astype(str))
    assert (df["category"] == "nvtx").sum() == 3


def test_nsys_unknown_schema_major_is_refused(tmp_path):
    p = _changed(tmp_path, "UPDATE META_DATA_EXPORT SET value = '4.0.2' WHERE name = 'EXPORT_SCHEMA_VERSION'")
    with pytest.raises(TraceError, match=r"^nsys-sqlite: report.sqlite: an Nsight Systems export of schema version "
                                         r"4.0.2 .*which this reader does not know \(it reads 2.x, 3.x"):
        load(p)


@pytest.mark.parametrize("statements,msg", [
    (["DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
      "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE c(start) AS (SELECT 1 UNION ALL SELECT start + 1 "
      "FROM c) SELECT start, start AS end FROM c"], "'CUPTI_ACTIVITY_KIND_KERNEL' is a view, not a table"),
    (["CREATE TRIGGER t AFTER INSERT ON StringIds BEGIN DELETE FROM StringIds; END"],
     "table 'StringIds' has triggers"),
])
def test_nsys_views_and_triggers_where_tables_are_expected_are_refused(tmp_path, statements, msg):
    p = _changed(tmp_path, *statements)
    t = time.monotonic()
    with pytest.raises(TraceError, match=f"^nsys-sqlite: report.sqlite: {msg}"):
        load(p)
    assert time.monotonic() - t < 5


def test_nsys_rows_over_the_cap_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_TRACE_MAX_ROWS", "4")
    with pytest.raises(TraceError, match=r"^nsys-sqlite: nsys_small.sqlite: table '\w+' has over 4 rows "
                                         r"\(limit: WORKBENCH_TRACE_MAX_ROWS\)"):
        load(FIXTURE)
