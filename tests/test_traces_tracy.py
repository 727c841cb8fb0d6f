"""Tracy reader on a real IREE 3.13 capture: threads, nesting, dynamic names, version gate."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from workbench.traces import TraceError, load, phases, tracy
from workbench.traces.model import validate

CAPTURE = Path(__file__).parent / "data" / "traces" / "iree_tracy_sum_c8" / "sum_c8_6it.tracy"


@pytest.fixture(scope="module")
def capture():
    return load(CAPTURE)


def test_zones_threads_and_dynamic_names(capture):
    df, meta = capture
    validate(df)
    assert meta["tracy_version"] == "0.11.2"
    # lanes keep the capture's thread order (Tracy writes threads in order of appearance)
    assert df["track"].cat.categories[0] == "Main thread"
    assert {"iree-worker-0", "iree-worker-1"} <= set(df["track"].cat.categories)
    zones = phases.zone_names(df)
    tiles = df[zones == phases.DISPATCH_TILES]
    # IREE names each tile zone after its dispatch (a dynamic name from the zone extras)
    assert set(tiles["name"].astype(str)) == {"sum_dispatch_0_reduction_8x125000_f32",
                                              "sum_dispatch_1_reduction_8_f32"}
    assert set(tiles["track"].astype(str)) <= {"iree-worker-0", "iree-worker-1"}
    # children lie inside their parents: depth-1 zones start after some depth-0 zone of the thread
    main = df[df["track"] == "Main thread"]
    assert main["depth"].max() >= 5
    assert (df["dur_ns"] >= 0).all()


def test_tracy_phases_tile_iterations(capture):
    df, _ = capture
    it = phases.iterations(df)
    assert len(it) == 6
    assert (it[list(phases.PHASES)].sum(axis=1) == it["total_ns"]).all()
    assert (it[list(phases.PHASES)] >= 0).all().all()


def _payload_with_version(minor: int) -> bytes:
    raw = tracy.decompress(CAPTURE.read_bytes())
    return raw[:5] + bytes([0, minor, 0]) + raw[8:]


def test_version_gate_names_found_and_supported(tmp_path):
    p = tmp_path / "v13.tracy"
    p.write_bytes(_payload_with_version(13))
    with pytest.raises(TraceError, match=r"tracy: v13.tracy: Tracy file version 0\.13\.0 is not supported "
                                         r"\(supported: 0\.11\.x"):
        load(p)


def test_legacy_container_is_refused(tmp_path):
    p = tmp_path / "old.tracy"
    p.write_bytes(b"tlZ\x04" + b"\x00" * 64)
    with pytest.raises(TraceError, match="legacy Tracy container"):
        load(p)


def test_lz4_container_reads_the_same(tmp_path):
    import lz4.block

    raw = tracy.decompress(CAPTURE.read_bytes())
    # Re-pack as Tracy's LZ4 container: 2 streams, 64 KiB blocks, each stream's history as dict.
    out, dicts = [b"tr\xfdP", bytes([0, 2])], [b"", b""]
    for i, off in enumerate(range(0, len(raw), 65536)):
        chunk = raw[off: off + 65536]
        comp = lz4.block.compress(chunk, store_size=False, dict=dicts[i % 2])
        dicts[i % 2] = (dicts[i % 2] + chunk)[-65536:]
        out += [struct.pack("<I", len(comp)), comp]
    p = tmp_path / "lz4.tracy"
    p.write_bytes(b"".join(out))
    a, _ = load(p)
    b, _ = load(CAPTURE)
    assert len(a) == len(b) and (a["start_ns"].to_numpy() == b["start_ns"].to_numpy()).all()


@pytest.mark.parametrize("frac", [0.1, 0.5, 0.97])
def test_truncated_capture(tmp_path, frac):
    data = CAPTURE.read_bytes()
    p = tmp_path / "cut.tracy"
    p.write_bytes(data[: int(len(data) * frac)])
    with pytest.raises(TraceError, match="^tracy: cut.tracy: truncated"):
        load(p)


def test_other_versions_go_through_tracy_csvexport_on_path(tmp_path, monkeypatch):
    # A stand-in for Tracy's tool, printing its documented `-u` columns.
    tool = tmp_path / "bin" / "tracy-csvexport"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n"
                    "echo name,src_file,src_line,ns_since_start,exec_time_ns,thread\n"
                    "echo outer,a.c,1,100,900,0\necho inner,a.c,2,200,100,0\necho work,b.c,3,150,50,1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    p = tmp_path / "v13.tracy"
    p.write_bytes(_payload_with_version(13))
    df, meta = load(p)
    assert meta["reader"] == "tracy-csvexport"
    assert list(df["track"].cat.categories) == ["thread 0", "thread 1"]
    assert df.set_index("name").loc["inner", "depth"] == 1


def _iree_iteration(main: list[tuple[str, int, int, int]], tiles: list[tuple[int, int]]):
    """A Tracy-shaped span table of one iteration: main-thread zones (name, depth, start, end)
    and dispatch tiles (start, end) on a worker."""
    from workbench.traces.model import from_records

    recs = [{"track": "Main thread", "name": n, "depth": d, "start_ns": s, "dur_ns": e - s, "args": {"zone": n}}
            for n, d, s, e in main]
    recs += [{"track": "iree-worker-0", "name": "sum_dispatch_0", "start_ns": s, "dur_ns": e - s,
              "args": {"zone": phases.DISPATCH_TILES}} for s, e in tiles]
    return from_records(recs, source="tracy")


def test_tracy_wait_is_the_fence_wait_not_any_wait_zone():
    # a semaphore wait inside a queue operation comes before the fence await: VM setup runs on to the await
    df = _iree_iteration([(phases.VM_INVOKE, 0, 0, 1000), (phases.QUEUE_EXECUTE, 1, 100, 200),
                          ("iree_hal_semaphore_wait", 1, 250, 260), ("iree_hal_module_fence_await", 1, 300, 900),
                          ("iree_hal_fence_wait", 2, 305, 900)], tiles=[(500, 800)])
    row = phases.iree_tracy_iterations(df).iloc[0]
    assert (row["VM setup"], row["scheduling delay"], row["dispatch compute"], row["cleanup + wake-up"]) == (
        300, 200, 300, 200)


def test_tracy_tile_before_the_wait_leaves_no_scheduling_delay():
    # the worker starts while the host is still inside queue_execute: VM setup runs to the first tile
    df = _iree_iteration([(phases.VM_INVOKE, 0, 0, 1000), (phases.QUEUE_EXECUTE, 1, 100, 400),
                          ("iree_hal_module_fence_await", 1, 450, 900)], tiles=[(300, 800)])
    it = phases.iree_tracy_iterations(df)
    row = it.iloc[0]
    assert (row["VM setup"], row["scheduling delay"]) == (300, 0)
    assert it[list(phases.PHASES)].sum(axis=1).iloc[0] == row["total_ns"] == 1000
