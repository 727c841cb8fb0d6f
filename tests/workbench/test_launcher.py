"""The one torchrun launcher: topology, no process left behind on a timeout, a cancel or an
error, worker errors reported, and a run on two local "nodes" (two torchrun agents on
127.0.0.1, gloo, 2 ranks each) stored once with results from all four ranks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import studies.ag_gemm as ag_gemm
import studies.mc2_split as mc2_split
from workbench.running import launcher, runner
from workbench.running.launcher import LaunchError, Topology
from workbench.seam.study import Cancelled, RunContext
from tests.support.paths import ROOT



# --- topology ---------------------------------------------------------------------------------

def test_topology_from_the_environment():
    assert Topology.from_env({}) == Topology()
    t = Topology.from_env({"WORKBENCH_NNODES": "2", "WORKBENCH_RDZV_ENDPOINT": "head:29500"})
    assert t.local_processes(8) == 4
    assert t.torchrun_args(4) == ["--nproc-per-node=4", "--max-restarts=0", "--nnodes=2", "--rdzv-backend=c10d",
                                  "--rdzv-endpoint=head:29500", "--rdzv-id=workbench"]
    static = Topology.from_env({"WORKBENCH_NNODES": "2", "WORKBENCH_NODE_RANK": "1",
                                "WORKBENCH_RDZV_ENDPOINT": "10.0.0.1:29500"})
    assert static.torchrun_args(4)[-4:] == ["--rdzv-backend=static", "--node-rank=1", "--master-addr=10.0.0.1",
                                            "--master-port=29500"]
    assert "--standalone" in Topology().torchrun_args(2)


@pytest.mark.parametrize("environ, fragment", [
    ({"WORKBENCH_NNODES": "2"}, "needs WORKBENCH_RDZV_ENDPOINT=host:port"),
    ({"WORKBENCH_NNODES": "2", "WORKBENCH_RDZV_ENDPOINT": "head; rm -rf /:1"}, "needs WORKBENCH_RDZV_ENDPOINT"),
    ({"WORKBENCH_NNODES": "two"}, "must be integers"),
    ({"WORKBENCH_NNODES": "2", "WORKBENCH_NODE_RANK": "2", "WORKBENCH_RDZV_ENDPOINT": "h:1"}, "not in 0..1"),
])
def test_a_bad_topology_is_named(environ, fragment):
    with pytest.raises(LaunchError, match=fragment):
        Topology.from_env(environ)


def test_the_reproduce_command_of_a_run_on_several_nodes_names_the_nodes_and_the_agent():
    elastic = runner.reproduce_command("ag-gemm", {"world_size": 16}, Topology(2, None, "head:29500"))
    assert elastic == ("python -m workbench run ag-gemm --set world_size=16 --nnodes 2 --rdzv-endpoint head:29500  "
                       "# other nodes: python -m workbench.running.launcher agent --nnodes 2 --nproc-per-node 8 "
                       "--rdzv-endpoint head:29500")
    static = runner.reproduce_command("mc2-split", {"world_size": 4}, Topology(2, 0, "head:1", "job7"))
    assert "--nnodes 2 --rdzv-endpoint head:1 --node-rank 0 --rdzv-id job7  # other nodes:" in static
    assert "--node-rank N --rdzv-id job7" in static
    assert runner.reproduce_command("calibration", {"repeat": 5}, Topology()) == \
        "python -m workbench run calibration --set repeat=5"


def test_the_cli_node_flags_are_checked_and_last_one_run(monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.delenv("WORKBENCH_NNODES", raising=False)
    assert main(["run", "calibration", "--nnodes", "2"]) == 2
    assert "needs WORKBENCH_RDZV_ENDPOINT=host:port (--rdzv-endpoint" in capsys.readouterr().err
    assert main(["run", "mc2-split", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "--set", "live=on",
                 "--set", "backend=gloo", "--set", "world_size=3"]) == 3
    assert "cannot be split evenly over 2 nodes" in capsys.readouterr().err
    assert "WORKBENCH_NNODES" not in os.environ and "WORKBENCH_RDZV_ENDPOINT" not in os.environ


def test_a_world_the_nodes_cannot_share_is_refused_before_starting(monkeypatch):
    monkeypatch.setenv("WORKBENCH_NNODES", "2")
    monkeypatch.setenv("WORKBENCH_RDZV_ENDPOINT", "127.0.0.1:1")
    reason = mc2_split.requires(mc2_split.SPACE.resolve({"backend": "gloo", "world_size": "3", "live": "on"}))
    assert "cannot be split evenly over 2 nodes" in reason
    reason = ag_gemm.requires(ag_gemm.SPACE.resolve({"backend": "gloo", "world_size": "3", "m": "96"}))
    assert "cannot be split evenly over 2 nodes" in reason


@pytest.mark.parametrize("study, fragment", [
    ("os.path", "is not a study id"), ("studies.mc2_split.worker", "is not a study id"),
    ("calibration", "no study 'calibration' with a worker"), ("no-such-study", "no study 'no-such-study'"),
])
def test_only_a_study_s_worker_is_launched_and_the_spec_names_its_id(study, fragment):
    # a spec is data (torchrun's store on another node): it names a study, never a module path
    with pytest.raises(LaunchError, match=fragment):
        launcher.launch(study, {}, 1, RunContext(), timeout_s=5)
    with pytest.raises(LaunchError, match=fragment):
        launcher._check_spec({"study": study, "world_size": 1, "worker_sha256": ""}, 1)


def test_the_registry_finds_a_worker_by_study_id():
    from workbench.seam import registry

    assert registry.worker_file("mc2-split") == ROOT / "studies" / "mc2_split" / "worker.py"
    assert registry.worker_file("ag-gemm").name == "worker.py"


def test_the_shell_scripts_read_the_one_multicast_off_setting():
    out = subprocess.run([sys.executable, "-m", "workbench.running.launcher", "env"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "export " + " ".join(f"{k}={v}" for k, v in launcher.MULTICAST_OFF.items())
    assert "workbench.running.launcher env" in (ROOT / "scripts" / "gpu" / "common.sh").read_text()


# --- the process group on every way out ------------------------------------------------------

def _fake_torchrun(monkeypatch, tmp_path, body: str) -> Path:
    """torchrun replaced by a script that starts a grandchild (``sleep 60``), writes its pid,
    then runs ``body``; returns the pid file."""
    pidfile = tmp_path / "grandchild.pid"
    script = ("import json, os, subprocess, sys, time\n"
              "p = subprocess.Popen(['sleep', '60'])\n"
              f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
              "def emit(**e):\n"
              "    with open(os.environ['WORKBENCH_EVENTS'], 'a') as fh:\n"
              "        fh.write(json.dumps({'v': 1, 't': 0, 'rank': 0, **e}) + '\\n')\n" + body)
    monkeypatch.setattr(launcher, "torchrun_command", lambda topo, nproc: [sys.executable, "-c", script])
    return pidfile


def _gone(pidfile: Path) -> bool:
    pid = int(pidfile.read_text())
    for _ in range(50):
        stat = Path(f"/proc/{pid}/stat")
        # gone, or a zombie waiting for a PID 1 that does not reap (containers): not running
        if not stat.exists() or stat.read_text().split(")")[1].split()[0] == "Z":
            return True
        time.sleep(0.1)
    return False


STUCK = "emit(event='progress', fraction=0.5, message='stuck')\ntime.sleep(60)\n"


def test_a_timeout_kills_the_whole_process_group(monkeypatch, tmp_path):
    pidfile = _fake_torchrun(monkeypatch, tmp_path, STUCK)
    seen = []
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match="did not finish within timeout_s=2 s.*stuck"):
        launcher.launch("mc2-split", {}, 2, RunContext(progress=lambda f, m: seen.append((f, m))),
                        timeout_s=2)
    assert time.monotonic() - t0 < 30 and (0.5, "stuck") in seen
    assert _gone(pidfile)


def test_a_cancel_kills_the_whole_process_group(monkeypatch, tmp_path):
    pidfile = _fake_torchrun(monkeypatch, tmp_path, STUCK)
    cancel = threading.Event()
    ctx = RunContext(progress=lambda f, m: cancel.set(), cancel=cancel)  # cancelled once the run is under way
    with pytest.raises(Cancelled):
        launcher.launch("mc2-split", {}, 2, ctx, timeout_s=60)
    assert _gone(pidfile)


def test_ctrl_c_or_any_error_while_reading_events_kills_the_whole_process_group(monkeypatch, tmp_path):
    pidfile = _fake_torchrun(monkeypatch, tmp_path, STUCK)

    def interrupted(fraction, message):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        launcher.launch("mc2-split", {}, 2, RunContext(progress=interrupted), timeout_s=60)
    assert _gone(pidfile)


def test_torchrun_ends_when_the_process_that_started_it_is_killed(monkeypatch, tmp_path):
    # SIGKILL leaves the CLI no chance to kill the group: the kernel's parent-death signal does
    pidfile = tmp_path / "torchrun.pid"
    script = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    cli = (f"import sys\nfrom workbench.running import launcher\nfrom workbench.seam.study import RunContext\n"
           f"launcher.torchrun_command = lambda topo, nproc: [sys.executable, '-c', {script!r}]\n"
           f"launcher.launch('mc2-split', {{}}, 2, RunContext(), timeout_s=60)\n")
    proc = subprocess.Popen([sys.executable, "-c", cli], cwd=ROOT, env=launcher.worker_env())
    try:
        for _ in range(300):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.1)
        proc.kill()
        proc.wait()
        assert _gone(pidfile)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_failed_rank_s_error_and_torchrun_s_log_are_reported(monkeypatch, tmp_path):
    body = ("emit(event='error', text='ValueError: rank 1 broke', trace='')\n"
            "print('torchrun: child failed', flush=True)\nsys.exit(1)\n")
    _fake_torchrun(monkeypatch, tmp_path, body)
    with pytest.raises(LaunchError, match=r"(?s)exited with 1: rank 0: ValueError: rank 1 broke.*child failed"):
        launcher.launch("mc2-split", {}, 2, RunContext(), timeout_s=30)


def test_a_run_whose_reporting_rank_never_finished_is_a_failure(monkeypatch, tmp_path):
    _fake_torchrun(monkeypatch, tmp_path, "emit(event='progress', fraction=0.1, message='m')\n")
    with pytest.raises(LaunchError, match="without the reporting rank finishing"):
        launcher.launch("mc2-split", {}, 2, RunContext(), timeout_s=30)


# --- two local nodes -----------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_nodes(store, monkeypatch, study, values: dict, preset: str, storing_node_rank: int | None):
    """Run ``study`` on 4 ranks: the CLI in a child process is the storing node, an agent in
    another the other node; ``storing_node_rank`` None uses the elastic c10d rendezvous.

    The two are siblings, as two nodes are strangers: were the agent a descendant of the
    process that runs the study, the run's cleanup (every process started below it while it
    held the machine lock, workbench.base.procs) would kill the agent's torchrun whenever it is
    still shutting down as the storing node finishes (exit 241, -SIGTERM, about 1 run in 3 at
    a load of 6-8)."""
    endpoint = f"127.0.0.1:{_free_port()}"
    monkeypatch.setenv("WORKBENCH_NNODES", "2")
    monkeypatch.setenv("WORKBENCH_RDZV_ENDPOINT", endpoint)
    monkeypatch.setenv("WORKBENCH_RDZV_ID", f"test-{os.getpid()}")
    agent_cmd = [sys.executable, "-m", "workbench.running.launcher", "agent", "--nnodes", "2", "--nproc-per-node", "2",
                 "--rdzv-endpoint", endpoint, "--timeout-s", "150"]
    if storing_node_rank is not None:
        monkeypatch.setenv("WORKBENCH_NODE_RANK", str(storing_node_rank))
        agent_cmd += ["--node-rank", str(1 - storing_node_rank)]
    agent = subprocess.Popen(agent_cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, env=launcher.worker_env())
    cli = [sys.executable, "-m", "workbench", "--store", str(store.path), "run", study.ID, "--preset", preset,
           *runner.set_args(values | {"world_size": 4, "timeout_s": 150})]
    try:
        run = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=300)
        agent_out, _ = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
    assert run.returncode == 0, run.stderr[-3000:]
    # Kineto prints a USDT line per profiler start/stop; without them the agent's error shows
    said = "\n".join(line for line in agent_out.splitlines() if not line.startswith("USDT:"))
    assert agent.returncode == 0, (agent.returncode, said[-3000:])
    return store.load("latest"), store.runs()


def _assert_all_ranks(rec, runs):
    assert rec.status == "complete", rec.error
    assert [r["run_id"] for r in runs] == [rec.run_id], "stored once"
    assert rec.variants and all(v.correct for v in rec.variants), [v.check for v in rec.variants if not v.correct]
    timed = [v for v in rec.variants if v.samples_ns]
    assert timed and all(len(v.extra["rank_median_ns"]) == 4 for v in timed)
    launch = rec.outputs.get("launch") or rec.outputs["live"]["launch"]
    ranks = launch["ranks"]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2, 3] and {r["node"] for r in ranks} == {0, 1}
    assert launch["nnodes"] == 2 and launch["nproc_per_node"] == 2
    assert "--nnodes 2 --rdzv-endpoint 127.0.0.1:" in rec.reproduce and "--nproc-per-node 2" in rec.reproduce
    return launch


@pytest.mark.slow
def test_mc2_split_live_check_on_two_local_nodes(store, monkeypatch):
    values = {"mm_fit": "5,0.02", "comm_fit": "50,100", "uniform": "2", "reps": 2, "points": "128"}
    rec, runs = _two_nodes(store, monkeypatch, mc2_split, values, "smoke", None)
    launch = _assert_all_ranks(rec, runs)
    assert launch["rendezvous"] == "c10d"
    assert rec.outputs["live"]["by_provider"]["default"]["best"]["chunks"]
    assert any(name.startswith("best_") for name, _, _ in rec.attachments), "a trace came back through the events"


@pytest.mark.slow
def test_ag_gemm_cpu_path_on_two_local_nodes_reported_by_a_rank_other_than_0(store, monkeypatch):
    # static rendezvous, this process on node 1: global rank 0 runs on the agent's node, and
    # the storing node's local rank 0 (global rank 2) reports
    values = {"m": "64", "shard": "rows", "interpret": "false", "trace": "off"}  # the launcher, not the study
    rec, runs = _two_nodes(store, monkeypatch, ag_gemm, values, "cpu", storing_node_rank=1)
    launch = _assert_all_ranks(rec, runs)
    assert launch["rendezvous"] == "static" and launch["reporting_rank"] == 2
    assert {v.params["provider"] for v in rec.variants} == {"nccl", "all-gather-cat", "all-gather", "matmul"}
    assert not ag_gemm.analyze(rec)["summary"].empty
