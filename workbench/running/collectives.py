"""Provenance of a baseline's collective library: which NCCL (or RCCL) ran it and how.

A baseline such as ``all_gather_into_tensor`` + matmul or a serial NCCL all-reduce is only
as meaningful as what ran it: the library file torch loaded, its version, the algorithm and
protocol NCCL's tuner picked for the baseline's sizes, its channels, whether NVLink multicast
(NVLS) or symmetric-memory kernels were on, and its CTA policy. NCCL says most of that only
in its own debug output (``NCCL_DEBUG=INFO``, subsystems ``INIT,ENV,TUNING``; the per-call
``TUNING`` line is how NCCL 2.19+ names its choice, ``AllReduce: 67108864 Bytes -> Algo RING
proto SIMPLE channel{Lo..Hi}={0..31}``), and that output is process-wide and fixed at NCCL's
first use. Turning it on in a timed run would add a log write to every timed call, so the
study's worker never does: :func:`probe` runs a short launch of its own (this module's
:func:`main` on the same ranks, the same environment plus the debug variables), makes each
baseline call once after a warm-up, and returns what rank 0's log and process say. The
timed run is not changed; the probe costs one launch (a few seconds).

On ROCm, PyTorch's ``nccl`` backend is RCCL: the same variables, ``RCCL version`` in the log,
``librccl.so`` in the process's maps. Missing facts are said to be missing ("not in the log"),
never guessed; runs made before the probe existed say "not recorded" (:func:`summary`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .rank import init_rank


#: NCCL's debug output the probe turns on (rank 0 prints the per-call TUNING lines)
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}
#: the environment variables that steer NCCL/RCCL's choices, recorded as they were set
ENV_PREFIXES = ("NCCL_", "RCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM_")
#: the log is read up to this much (a probe makes a handful of calls; a log is a few 100 KB)
MAX_LOG_BYTES = 4 << 20
NOT_RECORDED = "not recorded (runs before the collective probe, issue 47)"
NOT_IN_LOG = "not in the library's log"
#: why a one-rank probe's log has no TUNING line: NCCL's taskAppend hands a collective of a
#: one-rank communicator to ncclLaunchOneRank (a copy to itself, or nothing in place) before
#: any algorithm or protocol is chosen (src/enqueue.cc; NCCL 2.28.9's log on one H100 agrees)
ONE_RANK = "no algorithm choice at one rank (NCCL runs no collective algorithm for a single rank)"

_VERSION = re.compile(r"\b(NCCL|RCCL) version (\S+)")
_CALL = re.compile(r"\b(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AllToAll|Send|Recv): (\d+) Bytes -> "
                   r"Algo (\w+) proto (\w+)(?: channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\})?")
_CHANNELS = re.compile(r"(\d+) coll channels, (\d+) collnet channels, (\d+) nvls channels, (\d+) p2p channels")
_CTA_POLICY = re.compile(r"CTA ?[Pp]olicy[^\n]*?(\w+)\s*$", re.M)
_CGA = re.compile(r"(?:cgaClusterSize|CGA cluster size|NCCL_CGA_CLUSTER_SIZE)\D*(\d+)")
#: lines that say whether NVLS multicast or symmetric-memory kernels are available / used
_NVLS_HINTS = ("NVLS multicast support", "NVLS", "nvlsSupport", "MNNVL")
_SYMM_HINTS = ("symmetric", "Symmetric", "NCCL_WIN", "window registration", "ncclCommWindowRegister")


def library(torch_module=None) -> dict[str, Any]:
    """What this process has loaded: vendor and version (torch's view), the library file (from
    ``/proc/self/maps``) and the NCCL/RCCL variables set in its environment."""
    import torch

    torch = torch_module or torch
    vendor = "RCCL" if getattr(torch.version, "hip", None) else "NCCL"
    info: dict[str, Any] = {"vendor": vendor}
    try:
        info["version"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as exc:  # torch without NCCL, or no GPU: say why
        info["version"] = f"unknown ({type(exc).__name__})"
    info["path"] = loaded_library(("librccl", "libnccl") if vendor == "RCCL" else ("libnccl",)) or \
        "not found in the process's maps (linked statically into torch?)"
    info["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) and k not in DEBUG_ENV
                   and k != "NCCL_DEBUG_FILE"}
    return info


def loaded_library(names: tuple[str, ...], maps: str | None = None) -> str | None:
    """The first mapped file whose name starts with one of ``names`` (``/proc/self/maps``)."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return None
    for line in maps.splitlines():
        path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
        if path and Path(path).name.startswith(names):
            return path
    return None


def parse_log(text: str) -> dict[str, Any]:
    """NCCL/RCCL debug output -> the facts a baseline needs beside it: version line, every
    distinct (collective, bytes) with its algorithm, protocol and channel range, the
    channel counts, NVLS and symmetric-memory lines, CTA policy and cluster size (each
    absent fact: :data:`NOT_IN_LOG`)."""
    text = text[:MAX_LOG_BYTES]
    out: dict[str, Any] = {}
    m = _VERSION.search(text)
    out["log_version"] = f"{m[1]} {m[2]}" if m else NOT_IN_LOG
    calls: dict[tuple[str, int], dict] = {}
    for m in _CALL.finditer(text):
        key = (m[1], int(m[2]))
        calls.setdefault(key, {"collective": m[1], "bytes": int(m[2]), "algo": m[3], "proto": m[4],
                               "channels": f"{m[5]}..{m[6]}" if m[5] is not None else ""})
    out["calls"] = sorted(calls.values(), key=lambda c: (c["collective"], c["bytes"]))
    m = _CHANNELS.search(text)
    out["channels"] = (f"{m[1]} coll, {m[2]} collnet, {m[3]} nvls, {m[4]} p2p" if m else NOT_IN_LOG)
    lines = [_strip(line) for line in text.splitlines()]
    out["nvls"] = _first(lines, _NVLS_HINTS)
    out["symmetric_memory"] = _first(lines, _SYMM_HINTS)
    m = _CTA_POLICY.search("\n".join(lines))
    out["cta_policy"] = m[0].strip() if m else NOT_IN_LOG
    m = _CGA.search(text)
    out["cga_cluster_size"] = m[1] if m else NOT_IN_LOG
    return out


def _strip(line: str) -> str:
    """A log line without NCCL's ``host:pid:tid [dev] NCCL INFO`` prefix."""
    return re.sub(r"^.*?\b(?:NCCL|RCCL) (?:INFO|WARN)\s*", "", line).strip()


def _first(lines: list[str], hints: tuple[str, ...]) -> str:
    """The distinct lines that mention one of ``hints`` (at most three), or :data:`NOT_IN_LOG`."""
    found = list(dict.fromkeys(line for line in lines if any(h in line for h in hints)))[:3]
    return "; ".join(found) if found else NOT_IN_LOG


def summary(record: dict | None) -> list[dict[str, str]]:
    """One row per fact of a probe's record (``outputs["collective"]``) for tables and reports;
    a run without one says :data:`NOT_RECORDED`; a probe that failed says why; a probe at one
    rank, whose log never has an algorithm, says so (:data:`ONE_RANK`)."""
    if not record:
        return [{"fact": "collective library", "value": NOT_RECORDED}]
    if record.get("error"):
        return [{"fact": "collective library", "value": f"probe failed: {record['error']}"}]
    rows = [{"fact": "library", "value": f"{record.get('vendor', '?')} {record.get('version', '?')}"},
            {"fact": "library file", "value": str(record.get("path", "?"))},
            {"fact": "version in its log", "value": str(record.get("log_version", NOT_IN_LOG))}]
    for call in record.get("calls") or []:
        rows.append({"fact": f"{call['collective']} of {call['bytes']:,} B",
                     "value": f"algorithm {call['algo']}, protocol {call['proto']}"
                              + (f", channels {call['channels']}" if call.get("channels") else "")})
    if not record.get("calls"):
        rows.append({"fact": "algorithm and protocol",
                     "value": ONE_RANK if record.get("world_size") == 1 else NOT_IN_LOG})
    rows += [{"fact": "channels", "value": str(record.get("channels", NOT_IN_LOG))},
             {"fact": "NVLink multicast (NVLS)", "value": str(record.get("nvls", NOT_IN_LOG))},
             {"fact": "symmetric memory", "value": str(record.get("symmetric_memory", NOT_IN_LOG))},
             {"fact": "CTA policy", "value": str(record.get("cta_policy", NOT_IN_LOG))},
             {"fact": "CTA cluster size", "value": str(record.get("cga_cluster_size", NOT_IN_LOG))}]
    env = record.get("env") or {}
    rows.append({"fact": "NCCL/RCCL variables set", "value": ", ".join(f"{k}={v}" for k, v in env.items()) or "none"})
    return rows


def main(config: dict[str, Any], emitter) -> None:
    """The probe on every rank (under torchrun): each call once to warm up and once more,
    then rank 0 reads its own process's library and NCCL log."""
    import torch
    import torch.distributed as dist

    device = init_rank("nccl")
    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    world = dist.get_world_size()
    for call in config["calls"]:
        x = torch.zeros(int(call["numel"]), dtype=dtypes[call.get("dtype", "float16")], device=device)
        for _ in range(2):
            if call["op"] == "all_gather":
                out = torch.empty(world * x.numel(), dtype=x.dtype, device=device)
                dist.all_gather_into_tensor(out, x)
            else:
                dist.all_reduce(x)
        torch.cuda.synchronize(device)
    dist.barrier()
    if dist.get_rank() == 0:
        record = library(torch) | {"world_size": world}
        pid = os.getpid()
        logs = [p for p in Path(config["log_dir"]).glob(f"nccl.*.{pid}.log")]
        text = logs[0].read_text(errors="replace")[:MAX_LOG_BYTES] if logs else ""
        record |= parse_log(text) if text else {"log_version": "no log written (NCCL_DEBUG_FILE)"}
        emitter.outputs(collective=record)
    dist.destroy_process_group()
