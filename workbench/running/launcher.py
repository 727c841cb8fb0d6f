"""One launcher for the distributed studies: torchrun on this node (and on other nodes), the
event stream back, and no process left behind.

:func:`launch` starts ``torchrun`` in its own session with a study's worker module
(``studies/<study>/worker.py``, which defines ``main(config, emitter)``), tails the run's
event stream (:mod:`workbench.seam.events`) into the ``RunContext``, and kills torchrun's whole
process group on a timeout, a cancel, Ctrl-C (``KeyboardInterrupt`` at the follow loop's
checkpoint, :mod:`workbench.base.interrupt`; the CLI turns SIGTERM into the same) or any error,
and Linux ends torchrun if the process that started it dies (SIGKILL too,
:func:`workbench.base.procs.bound`), so no rank keeps timing after the machine lock is released.
:data:`workbench.running.rank.MULTICAST_OFF` is the one definition of the NVLink-multicast-off environment, used by
every launch and by ``scripts/gpu/common.sh`` (``python -m workbench.running.launcher env``).

Several nodes. A run spans nodes with torchrun's rendezvous; the topology comes from the
environment of the process that starts the run (:meth:`Topology.from_env`):
``WORKBENCH_NNODES`` (default 1), ``WORKBENCH_RDZV_ENDPOINT`` (host:port), and either
``WORKBENCH_NODE_RANK`` (static rendezvous: node 0 hosts the store at the endpoint, ranks in
node order) or none (elastic c10d rendezvous, ranks in the order torch assigns), plus
``WORKBENCH_RDZV_ID``. The study's ``world_size`` counts all ranks; each node runs
``world_size / nnodes`` of them. The node that runs the study (the CLI, the app) is the
*storing node*; every other node runs an agent with the same topology:

    python -m workbench.running.launcher agent --nnodes 2 --nproc-per-node 4 --rdzv-endpoint head:29500

How the results of other nodes reach the store: the worker's collectives carry them (each
sample is reduced to the maximum over all ranks, every rank's samples are all-gathered), and
one rank writes the events: local rank 0 of the storing node, whatever its global rank (only
there does the launcher set ``WORKBENCH_EVENTS``). The storing node's launcher publishes the
run's spec (study id, config, world size, the worker file's SHA-256) in torchrun's
store, so an agent needs no copy of the parameters, only the same checkout (a different
worker file is refused). Only the storing node's CLI stores the run: once. The spec names the
study by its id; the ranks get its worker from :func:`workbench.seam.registry.worker`.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import collectives
from ..base import interrupt, procs
from ..seam import registry
from .rank import MULTICAST_OFF
from ..base.env import REPO_ROOT
from ..seam.events import Collected, Emitter, EventTail, apply
from ..seam.study import Cancelled

#: the one worker of the workbench's own (not a study's) a spec may name, beside the study ids:
#: the collective library's probe (:mod:`workbench.running.collectives`)
COLLECTIVES_PROBE = "workbench:collectives"
KILL_GRACE_S = 5.0  # SIGTERM first (torchrun forwards it to its ranks), SIGKILL after this


class LaunchError(RuntimeError):
    """The distributed run failed, timed out or could not start; the message says which,
    with the workers' own error text and the tail of torchrun's log."""


@dataclass(frozen=True)
class Topology:
    """Nodes of a run and how they meet (see the module docstring)."""

    nnodes: int = 1
    node_rank: int | None = None
    rdzv_endpoint: str = ""
    rdzv_id: str = "workbench"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Topology":
        e = os.environ if environ is None else environ
        try:
            nnodes = int(e.get("WORKBENCH_NNODES", "1"))
            node_rank = int(e["WORKBENCH_NODE_RANK"]) if e.get("WORKBENCH_NODE_RANK", "") != "" else None
        except ValueError as exc:
            raise LaunchError(f"WORKBENCH_NNODES and WORKBENCH_NODE_RANK must be integers ({exc})") from None
        topo = cls(nnodes, node_rank, e.get("WORKBENCH_RDZV_ENDPOINT", ""), e.get("WORKBENCH_RDZV_ID") or "workbench")
        topo.check()
        return topo

    def check(self) -> None:
        if self.nnodes < 1:
            raise LaunchError(f"nnodes must be >= 1, not {self.nnodes}")
        if self.nnodes > 1 and not re.fullmatch(r"[A-Za-z0-9_.\-\[\]:]+:\d+", self.rdzv_endpoint):
            raise LaunchError(f"a run on {self.nnodes} nodes needs WORKBENCH_RDZV_ENDPOINT=host:port "
                              f"(--rdzv-endpoint; got {self.rdzv_endpoint!r})")
        if self.node_rank is not None and not 0 <= self.node_rank < self.nnodes:
            raise LaunchError(f"node rank {self.node_rank} is not in 0..{self.nnodes - 1}")

    def environ(self) -> dict[str, str]:
        """The ``WORKBENCH_*`` variables that give this topology to :meth:`from_env`."""
        env = {"WORKBENCH_NNODES": str(self.nnodes), "WORKBENCH_RDZV_ENDPOINT": self.rdzv_endpoint,
               "WORKBENCH_RDZV_ID": self.rdzv_id}
        return env | ({"WORKBENCH_NODE_RANK": str(self.node_rank)} if self.node_rank is not None else {})

    def run_args(self) -> list[str]:
        """The ``python -m workbench run`` flags of this topology (none on one node)."""
        if self.nnodes == 1:
            return []
        args = ["--nnodes", str(self.nnodes), "--rdzv-endpoint", self.rdzv_endpoint]
        args += ["--node-rank", str(self.node_rank)] if self.node_rank is not None else []
        return args + (["--rdzv-id", self.rdzv_id] if self.rdzv_id != "workbench" else [])

    def agent_args(self, nproc_per_node: int) -> list[str]:
        """The command every other node runs for its ``nproc_per_node`` ranks of the run."""
        args = ["python", "-m", "workbench.running.launcher", "agent", "--nnodes", str(self.nnodes),
                "--nproc-per-node", str(nproc_per_node), "--rdzv-endpoint", self.rdzv_endpoint]
        if self.node_rank is not None:
            args += ["--node-rank", "N"]  # each other node its own rank
        return args + (["--rdzv-id", self.rdzv_id] if self.rdzv_id != "workbench" else [])

    def local_processes(self, world_size: int) -> int:
        """Ranks on each node; a world size the nodes cannot share evenly is refused."""
        if world_size % self.nnodes:
            raise LaunchError(f"world_size={world_size} ranks cannot be split evenly over {self.nnodes} nodes "
                              f"(WORKBENCH_NNODES); use a multiple of {self.nnodes}")
        return world_size // self.nnodes

    def torchrun_args(self, nproc_per_node: int) -> list[str]:
        args = [f"--nproc-per-node={nproc_per_node}", "--max-restarts=0"]
        if self.nnodes == 1:
            return args + ["--standalone"]
        args.append(f"--nnodes={self.nnodes}")
        if self.node_rank is not None:
            host, port = self.rdzv_endpoint.rsplit(":", 1)
            return args + ["--rdzv-backend=static", f"--node-rank={self.node_rank}", f"--master-addr={host}",
                           f"--master-port={port}"]
        return args + ["--rdzv-backend=c10d", f"--rdzv-endpoint={self.rdzv_endpoint}", f"--rdzv-id={self.rdzv_id}"]

    def describe(self) -> dict[str, Any]:
        return {"nnodes": self.nnodes, "node_rank": self.node_rank, "rdzv_endpoint": self.rdzv_endpoint or None,
                "rendezvous": "standalone" if self.nnodes == 1 else ("static" if self.node_rank is not None else "c10d")}


def local_share(world_size: int, backend: str) -> tuple[int, str | None]:
    """The ranks this node runs of ``world_size`` (topology from the environment) and why it
    cannot (a topology the ranks do not fit; gloo ranks beyond the CPU cores), else None.
    GPU counts are the study's to check: it knows how it counts them."""
    try:
        topo = Topology.from_env()
        local = topo.local_processes(world_size)
    except LaunchError as exc:
        return 0, str(exc)
    cpus = os.cpu_count() or 1
    if backend == "gloo" and local > cpus:
        return local, (f"world_size={world_size} puts {local} gloo processes on this node; they need {local} CPU "
                       f"cores to run side by side and this machine has {cpus}. Lower world_size to "
                       f"{cpus * topo.nnodes} or less")
    return local, None


def torchrun_command(topology: Topology, nproc_per_node: int) -> list[str]:
    """torchrun with the worker bootstrap of this module as every rank's program."""
    return [sys.executable, "-m", "torch.distributed.run", *topology.torchrun_args(nproc_per_node),
            "-m", "workbench.running.launcher", "worker"]


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of torchrun and its ranks: multicast off, this checkout importable."""
    env = dict(os.environ) | MULTICAST_OFF
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env | extra


def kill_group(proc: subprocess.Popen) -> None:
    """End the process group of ``proc`` (started with ``start_new_session``): SIGTERM, then
    SIGKILL after :data:`KILL_GRACE_S`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=KILL_GRACE_S)
            break
        except subprocess.TimeoutExpired:
            continue
    # the group may outlive its leader (a rank that ignored SIGTERM)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def start_torchrun(cmd: list[str], **kw) -> subprocess.Popen:
    """torchrun in a session of its own (its group is killed as one), bound to this process's
    life: SIGTERM when it dies, which torchrun passes on to its ranks."""
    return subprocess.Popen(procs.bound(cmd, signal.SIGTERM), cwd=str(REPO_ROOT), start_new_session=True, **kw)


def _worker(study: str):
    """The worker module of a spec's study id (or the collective probe): from the registry,
    never imported as a module path (a spec from torchrun's store is data)."""
    return collectives if study == COLLECTIVES_PROBE else registry.worker(study)


def _worker_source_sha256(study: str) -> str:
    """The SHA-256 of the study's worker file (the same checkout on every node)."""
    try:
        path = Path(_worker(study).__file__) if study == COLLECTIVES_PROBE else registry.worker_file(study)
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except KeyError as exc:
        raise LaunchError(f"{exc.args[0]} in this checkout") from None


def launch(study: str, config: dict[str, Any], world_size: int, ctx, *, timeout_s: float,
           topology: Topology | None = None, poll_s: float = 0.1, env: dict[str, str] | None = None) -> Collected:
    """Run the worker of the study ``study`` (its id, or :data:`COLLECTIVES_PROBE`):
    ``main(config, emitter)`` on ``world_size`` ranks under torchrun; events go to ``ctx`` as
    they arrive (records, attachments, progress); returns the merged outputs and notes.
    ``env``: variables added to the ranks' environment (on this node; the collective probe's
    NCCL debug output). Raises :class:`LaunchError` when a rank fails or ``timeout_s``
    passes, ``Cancelled`` when ``ctx`` is cancelled; the process group is killed on every way
    out."""
    worker_sha256 = _worker_source_sha256(study)
    topology = topology or Topology.from_env()
    nproc = topology.local_processes(world_size)
    collected = Collected()
    with tempfile.TemporaryDirectory(prefix="wb-launch-") as tmp:
        folder = Path(tmp)
        spec = {"study": study, "config": config, "world_size": world_size, "worker_sha256": worker_sha256,
                "timeout_s": timeout_s}
        (folder / "spec.json").write_text(json.dumps(spec))
        events, log_path = folder / "events.jsonl", folder / "torchrun.log"
        env = worker_env(WORKBENCH_SPEC=str(folder / "spec.json"), WORKBENCH_EVENTS=str(events), **(env or {}))
        tail = EventTail(events)
        with open(log_path, "wb") as log:
            proc = start_torchrun(torchrun_command(topology, nproc), stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                _follow(proc, tail, ctx, collected, folder, time.monotonic() + timeout_s, timeout_s, poll_s)
            except BaseException:
                kill_group(proc)
                raise
            finally:
                if proc.poll() is None:
                    kill_group(proc)
        if proc.returncode != 0 or not collected.done:
            raise LaunchError(_failure(proc.returncode, collected, log_path, topology))
    collected.outputs.setdefault("launch", {}).update(topology.describe() | {"nproc_per_node": nproc})
    return collected


def _follow(proc, tail: EventTail, ctx, collected: Collected, folder: Path, deadline: float, timeout_s: float,
            poll_s: float) -> None:
    """Hand events to ``ctx`` until torchrun exits; raise on cancel or timeout."""
    while True:
        finished = proc.poll() is not None  # read the events after the exit check: none is lost
        for event in tail.poll():
            apply(event, ctx, collected, folder)
        if finished:
            return
        if ctx.cancel_event.is_set():
            raise Cancelled("run cancelled")
        if time.monotonic() > deadline:
            raise LaunchError(f"the distributed run did not finish within timeout_s={timeout_s:.0f} s and was killed "
                              f"(a rank or a rendezvous hung?); last progress: {collected.progress[1] or 'none'}")
        interrupt.sleep(poll_s)  # a recorded Ctrl-C wakes it and is raised here


def _failure(returncode: int, collected: Collected, log_path: Path, topology: Topology) -> str:
    what = (f"torchrun exited with {returncode}" if returncode else
            "torchrun exited without the reporting rank finishing")
    errors = "; ".join(collected.errors[:3])
    remote = (" A rank on another node may have failed first: see that node's agent output."
              if topology.nnodes > 1 else "")
    log = log_path.read_text(errors="replace")[-3000:]
    return f"{what}: {errors or 'no rank reported an error'}.{remote}\n{log}"


# --- inside torchrun: every rank -------------------------------------------------------

def _store(timeout_s: float):
    """torchrun's store for this run's ranks (the one ``init_process_group`` uses)."""
    import torch.distributed as dist

    store, _rank, _world = next(dist.rendezvous("env://", timeout=datetime.timedelta(seconds=timeout_s)))
    return dist.PrefixStore("workbench/", store)


def _run_worker() -> int:
    """The program of every rank: read the spec (a file on the storing node, torchrun's store
    elsewhere), check this checkout, register the rank, run the study's worker."""
    rank, local_rank, world = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    events = os.environ.get("WORKBENCH_EVENTS")
    spec_path = os.environ.get("WORKBENCH_SPEC")
    spec = json.loads(Path(spec_path).read_text()) if spec_path else None
    errors = Emitter(events, rank)  # every rank of the storing node reports its own error
    try:
        store = _store(float(spec["timeout_s"]) if spec else float(os.environ.get("WORKBENCH_TIMEOUT_S", "900")))
        if spec and local_rank == 0:
            store.set("spec", json.dumps(spec))
        if spec is None:
            spec = json.loads(store.get("spec"))
        _check_spec(spec, world)
        store.set(f"rank/{rank}", json.dumps({"rank": rank, "host": socket.gethostname(), "local_rank": local_rank,
                                              "node": int(os.environ.get("GROUP_RANK", 0))}))
        emitter = Emitter(events if local_rank == 0 else None, rank)
        if emitter.active:
            emitter.outputs(launch={"ranks": [json.loads(store.get(f"rank/{r}")) for r in range(world)],
                                    "reporting_rank": rank})
        _worker(spec["study"]).main(spec["config"], emitter)
        emitter.done()
    except BaseException as exc:
        errors.error(f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=8))
        raise
    return 0


def _check_spec(spec: dict, world: int) -> None:
    if not isinstance(spec, dict) or not isinstance(spec.get("study"), str):
        raise LaunchError(f"the run's spec names no study: {str(spec)[:200]}")
    if spec["world_size"] != world:
        raise LaunchError(f"the run expects {spec['world_size']} ranks but torchrun started {world}: give every "
                          "node's agent --nproc-per-node = world_size / nnodes")
    if _worker_source_sha256(spec["study"]) != spec["worker_sha256"]:
        raise LaunchError(f"the worker of {spec['study']} on {socket.gethostname()} differs from the storing node's: "
                          "check out the same commit on every node")


def probe_collectives(calls: list[dict[str, Any]], world_size: int, ctx, timeout_s: float = 120.0) -> dict[str, Any]:
    """The collective library's provenance (:mod:`workbench.running.collectives`): each of ``calls``
    (``{"op": "all_reduce"|"all_gather", "numel": elements per rank's input, "dtype":
    "float16"|"bfloat16"|"float32"}``) made once (after one warm-up) on ``world_size`` GPU ranks
    with NCCL's debug output on, in a launch of its own; rank 0's library facts and parsed log.
    Never raises: a failed probe is a record with its ``error``, so the timed run it describes
    still stands."""
    with tempfile.TemporaryDirectory(prefix="wb-nccl-") as tmp:
        env = collectives.DEBUG_ENV | {"NCCL_DEBUG_FILE": str(Path(tmp) / "nccl.%h.%p.log")}
        try:
            got = launch(COLLECTIVES_PROBE, {"calls": calls, "log_dir": tmp}, world_size, ctx, timeout_s=timeout_s,
                         env=env)
        except Exception as exc:  # the probe is provenance, not the measurement
            return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
    return got.outputs.get("collective") or {"error": "the probe's rank 0 reported nothing"}


# --- command line: the agent of another node, the environment for shell scripts ---------

def _agent(args: argparse.Namespace) -> int:
    """torchrun for the ranks of this node; its output goes to this terminal."""
    topo = Topology(args.nnodes, args.node_rank, args.rdzv_endpoint, args.rdzv_id)
    topo.check()
    env = worker_env(WORKBENCH_TIMEOUT_S=str(args.timeout_s))
    env.pop("WORKBENCH_SPEC", None)
    env.pop("WORKBENCH_EVENTS", None)
    proc = start_torchrun(torchrun_command(topo, args.nproc_per_node), env=env)
    try:
        return proc.wait(timeout=args.timeout_s)
    except subprocess.TimeoutExpired:
        print(f"agent: no result within {args.timeout_s} s; killed", file=sys.stderr)
        return 124
    finally:
        if proc.poll() is None:
            kill_group(proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.running.launcher", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("worker", help="(inside torchrun) the program of every rank")
    sub.add_parser("env", help="print the multicast-off settings as shell exports")
    ag = sub.add_parser("agent", help="run this node's ranks of a run started on another node")
    e = os.environ
    ag.add_argument("--nnodes", type=int, default=int(e.get("WORKBENCH_NNODES", "2")))
    ag.add_argument("--nproc-per-node", type=int, required=True, help="ranks on this node (world_size / nnodes)")
    ag.add_argument("--node-rank", type=int, default=int(e["WORKBENCH_NODE_RANK"]) if e.get("WORKBENCH_NODE_RANK")
                    else None, help="static rendezvous; leave out for elastic c10d")
    ag.add_argument("--rdzv-endpoint", default=e.get("WORKBENCH_RDZV_ENDPOINT", ""), help="host:port")
    ag.add_argument("--rdzv-id", default=e.get("WORKBENCH_RDZV_ID") or "workbench")
    ag.add_argument("--timeout-s", type=float, default=3600)
    args = ap.parse_args(argv)
    if args.command == "worker":
        return _run_worker()
    if args.command == "env":
        print("export " + " ".join(f"{k}={v}" for k, v in MULTICAST_OFF.items()))
        return 0
    try:
        return _agent(args)
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
