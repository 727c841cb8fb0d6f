"""Tracy reader: a real IREE 3.13 capture (0.11.2), captures of Tracy 0.11.1 - 0.14.0 checked
against each version's own tracy-csvexport, version gates, bounded decompression."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from workbench.traces import TraceError, load, phases, tracy
from workbench.traces.model import validate
from tests.support.paths import DATA

CAPTURE = DATA / "iree_sum_c8" / "sum_c8_6it.tracy"


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
    p = tmp_path / "v15.tracy"
    p.write_bytes(_payload_with_version(15))
    with pytest.raises(TraceError, match=r"tracy: v15.tracy: Tracy file version 0\.15\.0 is not supported "
                                         r"\(read: 0\.11\.0 - 0\.14\.0"):
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
    p = tmp_path / "v15.tracy"
    p.write_bytes(_payload_with_version(15))
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


VERSIONS = DATA / "tracy_versions"


def _csv(path: Path) -> list[dict]:
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("version", ["0.11.1", "0.12.2", "0.13.1", "0.14.0"])
def test_tracy_versions_match_their_own_csvexport(version):
    from collections import Counter

    df, meta = load(VERSIONS / f"demo-{version}.tracy")
    validate(df)
    assert meta["tracy_version"] == version
    rows = _csv(VERSIONS / f"demo-{version}.u.csv")
    zones = df[df["category"] == "zone"]
    # CPU zones: every one tracy-csvexport lists (it drops zero-length zones), on the same thread
    tid_of_index = meta["thread_map"]
    theirs = Counter((r["name"], int(r["ns_since_start"]), int(r["exec_time_ns"]), tid_of_index[int(r["thread"])],
                      r.get("value") or None) for r in rows if r["src_file"])
    texts = "value" in rows[0]  # the zone text column is new in 0.12
    ours = Counter((a["srcloc"], s, d, meta["thread_ids"][str(t)], a["text"] if texts else None)
                   for a, s, d, t in zip(zones["args"], zones["start_ns"], zones["dur_ns"], zones["track"]) if d > 0)
    assert ours == theirs and len(zones) == 44
    # dynamic names and zone texts come from the zone extras
    tiles = zones[[a["srcloc"] == "tile" for a in zones["args"]]]
    assert len(tiles) == 16 and all(str(n).startswith("tile_") for n in tiles["name"])
    assert set(zones["track"].astype(str)) == {"Main thread", "worker-0", "worker-1"}
    assert zones[zones["name"] == "prepare"]["depth"].eq(1).all()
    # messages on their threads
    msgs = df[df["category"] == "message"]
    assert Counter(zip(msgs["name"].astype(str), msgs["start_ns"])) == Counter(
        (r["MessageName"], int(r["total_ns"])) for r in _csv(VERSIONS / f"demo-{version}.m.csv"))
    assert (msgs["kind"] == "instant").all() and set(msgs["track"].astype(str)) == {"Main thread"}
    gpu = df[df["category"] == "kernel"]
    assert len(gpu) == 8 and set(gpu["track"].astype(str)) == {"GPU: emulated GPU queue"}
    plots = df[df["category"] == "plot"]
    assert len(plots) == 8 and sorted(a["value"] for a in plots["args"]) == [0, 0, 0, 0, 1, 3, 5, 7]
    if version == "0.11.1":
        return  # that exporter has no -g or -p
    assert Counter(zip(gpu["name"].astype(str), gpu["start_ns"], gpu["dur_ns"])) == Counter(
        (r["name"], int(r["Time from start of program"]), int(r["GPU execution time"]))
        for r in _csv(VERSIONS / f"demo-{version}.g.csv"))
    assert Counter(zip(plots["start_ns"], (a["value"] for a in plots["args"]))) == Counter(
        (int(r["ns_since_start"]), float(r["value"])) for r in rows if not r["src_file"])


def test_tracy_gpu_zones_keep_their_cpu_submit_times():
    df, _ = load(VERSIONS / "demo-0.14.0.tracy")
    gpu = df[df["category"] == "kernel"]
    launches = df[df["name"] == "launch"]
    ends = launches["start_ns"] + launches["dur_ns"]
    # each kernel was submitted inside a "launch" zone of the main thread
    for a in gpu["args"]:
        assert ((launches["start_ns"] <= a["cpu_start_ns"]) & (a["cpu_end_ns"] <= ends)).any()


def test_tracy_zstd_bomb_is_refused_by_the_per_block_cap(tmp_path):
    import zstandard

    # one block whose frame inflates to 64 MiB: Tracy never writes a block over 64 KiB
    block = zstandard.ZstdCompressor().compress(b"\0" * (64 << 20))
    p = tmp_path / "bomb.tracy"
    p.write_bytes(b"tr\xfdP\x01\x01" + struct.pack("<I", len(block)) + block)
    with pytest.raises(TraceError, match=r"^tracy: bomb.tracy: corrupted compressed block 0 \(a block inflates "
                                         r"beyond Tracy's 64 KiB buffer\)"):
        load(p)


# --- the zone trees: one walker for CPU and GPU zones, one set of bounds --------------------

def _cpu_zone(start: int, children: bytes = b"", n_children: int = 0, end: int = 5) -> bytes:
    return struct.pack("<hqII", 1, start, 0, n_children) + children + struct.pack("<q", end)


def _gpu_zone(start: int, children: bytes = b"", n_children: int = 0, end: int = 5, query: bool = True) -> bytes:
    head = struct.pack("<qqh3sHQ", start, 2 * start, 2, b"\0\0\0", 0, n_children)  # GPU clock: 2x
    return head + children + struct.pack("<qq", end, 2 * end) + (b"\0\0" if query else b"")


KINDS = {"cpu": (tracy._CPU_ZONE, _cpu_zone), "gpu": (tracy._gpu_zone(query_ids=True), _gpu_zone)}


@pytest.mark.parametrize("kind", KINDS)
def test_a_zone_tree_accumulates_its_deltas_in_write_order(kind):
    record, zone = KINDS[kind]
    # root at 100, its child starts 1 later and lasts 5; the root ends 5 after the child; then a sibling
    data = zone(100, zone(1), 1) + zone(3)
    fields, start, end, depth = tracy._walk_zones(tracy._Reader(data, "t.tracy"), 2, record, "thread 't'")
    assert depth.tolist() == [0, 1, 0]
    assert start[:, -1].tolist() == ([100, 101, 114] if kind == "cpu" else [200, 202, 228])
    assert end[:, -1].tolist() == ([111, 106, 119] if kind == "cpu" else [222, 212, 238])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("damage, fragment", [
    ("children", "zone data"), ("top", "zone data"), ("cut", "zone data"), ("times", "zone times out of range")])
def test_cpu_and_gpu_zone_trees_are_bounded_alike(kind, damage, fragment):
    """Untrusted input: a child count (or a thread's zone count) larger than the data could
    hold, a tree cut short, or times no capture has are one line, for either kind of zone."""
    record, zone = KINDS[kind]
    data, top = zone(0, zone(1), 1), 1
    if damage == "children":
        data = zone(0, zone(1), 1 << 30)
    elif damage == "top":
        top = 1 << 60
    elif damage == "cut":
        data = data[:-1]
    else:
        data = zone(2**61, zone(2**61), 1)
    with pytest.raises(TraceError, match=fragment):
        tracy._walk_zones(tracy._Reader(data, "t.tracy"), top, record, "thread 't'")
