"""The baseline's collective library (issue 47): NCCL's debug output read into facts, absent
facts said to be absent, old runs "not recorded", a failed probe never failing its run."""

from __future__ import annotations

import json

import pytest

from workbench.running import collectives, launcher
from workbench.base.env import REPO_ROOT
from workbench.seam.study import RunContext

TRACES = REPO_ROOT / "traces" / "ag-gemm"

# The lines NCCL 2.28 writes with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING, as its
# format strings make them (src/init.cc, src/enqueue.cc); host, pid, tid and device vary.
LOG = """\
vm:1234:1234 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.
vm:1234:1234 [0] NCCL INFO NCCL version 2.28.9+cuda12.9
vm:1234:1250 [0] NCCL INFO comm 0x5581 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0
vm:1234:1250 [0] NCCL INFO 32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
vm:1234:1250 [0] NCCL INFO CC Off, workFifoBytes 1048576
vm:1234:1250 [0] NCCL INFO AllReduce: 67108864 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}
vm:1234:1250 [0] NCCL INFO AllReduce: 67108864 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}
vm:1234:1250 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..15}
vm:1234:1250 [0] NCCL INFO AllGather: 2097152 Bytes -> Algo RING proto SIMPLE
"""


def test_the_log_gives_the_version_and_each_size_s_algorithm_and_protocol_once():
    got = collectives.parse_log(LOG)
    assert got["log_version"] == "NCCL 2.28.9+cuda12.9"
    assert got["calls"] == [
        {"collective": "AllGather", "bytes": 2097152, "algo": "RING", "proto": "SIMPLE", "channels": ""},
        {"collective": "AllReduce", "bytes": 4194304, "algo": "RING", "proto": "LL128", "channels": "0..15"},
        {"collective": "AllReduce", "bytes": 67108864, "algo": "RING", "proto": "SIMPLE", "channels": "0..31"}]
    assert got["channels"] == "32 coll, 32 collnet, 0 nvls, 32 p2p"
    assert "NCCL_NVLS_ENABLE set by environment to 0." in got["nvls"]


def test_facts_the_log_does_not_hold_are_said_to_be_missing():
    got = collectives.parse_log("vm:1:1 [0] NCCL INFO Bootstrap : Using eth0\n")
    assert got["log_version"] == got["channels"] == got["cta_policy"] == got["symmetric_memory"] == \
        collectives.NOT_IN_LOG
    assert got["calls"] == []
    rows = {r["fact"]: r["value"] for r in collectives.summary({"vendor": "NCCL", "version": "2.28.9", **got})}
    assert rows["algorithm and protocol"] == collectives.NOT_IN_LOG


def test_one_rank_chooses_no_algorithm_and_the_summary_says_so():
    """NCCL's own log of the baselines' calls at one rank (1x H100, NCCL 2.28.9, 2026-12-06; the
    committed excerpt) has no TUNING line: at one rank NCCL copies instead of choosing."""
    text = (TRACES / "nccl_ws1_h100_20261206.log").read_text()
    got = collectives.parse_log(text)
    assert got["log_version"] == "NCCL 2.28.9+cuda13.0" and got["calls"] == []
    assert got["channels"] == "64 coll, 64 collnet, 0 nvls, 64 p2p"
    facts = lambda ws: {r["fact"]: r["value"] for r in collectives.summary(
        {"vendor": "NCCL", "version": "2.28.9", "world_size": ws, **got})}
    assert facts(1)["algorithm and protocol"] == collectives.ONE_RANK
    assert facts(4)["algorithm and protocol"] == collectives.NOT_IN_LOG  # at 4 ranks it is only missing
    # the probe's record from the same call (written before records carried their world size)
    # read the same library from its own launch's log
    record = json.loads((TRACES / "collective_probe_ws1_h100_20261206.json").read_text())
    assert {k: record[k] for k in ("log_version", "calls", "channels")} == \
        {k: got[k] for k in ("log_version", "calls", "channels")}
    assert record["path"].endswith("libnccl.so.2") and "world_size" not in record


def test_rccl_says_so():
    got = collectives.parse_log("h:1:1 [0] NCCL INFO RCCL version 2.22.3+hip6.4 HEAD:abc\n")
    assert got["log_version"] == "RCCL 2.22.3+hip6.4"


def test_the_library_file_is_found_in_the_process_maps():
    maps = ("7f00-7f10 r-xp 00000000 08:01 42 /usr/lib/libc.so.6\n"
            "7f20-7f30 r-xp 00000000 08:01 43 /venv/site-packages/nvidia/nccl/lib/libnccl.so.2\n")
    assert collectives.loaded_library(("libnccl",), maps) == "/venv/site-packages/nvidia/nccl/lib/libnccl.so.2"
    assert collectives.loaded_library(("librccl",), maps) is None


def test_old_runs_say_not_recorded_and_a_failed_probe_says_why():
    assert collectives.summary(None) == [{"fact": "collective library", "value": collectives.NOT_RECORDED}]
    assert "probe failed: LaunchError" in collectives.summary({"error": "LaunchError: x"})[0]["value"]


def test_a_probe_that_cannot_launch_returns_its_error(monkeypatch):
    def fail(*a, **kw):
        raise launcher.LaunchError("torchrun exited with 1: no GPU\nlog tail")

    monkeypatch.setattr(launcher, "launch", fail)
    got = launcher.probe_collectives([{"op": "all_reduce", "numel": 4, "dtype": "float16"}], 2, RunContext())
    assert got == {"error": "LaunchError: torchrun exited with 1: no GPU"}


def test_the_probe_is_the_one_worker_outside_the_studies_a_spec_may_name():
    assert launcher._worker(launcher.COLLECTIVES_PROBE) is collectives
    assert len(launcher._worker_source_sha256(launcher.COLLECTIVES_PROBE)) == 64
    with pytest.raises(launcher.LaunchError):
        launcher._worker_source_sha256("workbench.cli")  # a module path is no study id


@pytest.mark.gpu
def test_the_probe_on_one_gpu_names_the_library_torch_loaded():
    got = launcher.probe_collectives([{"op": "all_reduce", "numel": 1 << 20, "dtype": "float16"}], 1, RunContext(),
                            timeout_s=180)
    assert "error" not in got, got
    assert got["vendor"] in ("NCCL", "RCCL") and got["version"][0].isdigit()
    assert got["log_version"].startswith(got["vendor"]) and got["world_size"] == 1
    if not got["calls"]:
        assert {r["fact"]: r["value"] for r in collectives.summary(got)}["algorithm and protocol"] == \
            collectives.ONE_RANK
