"""Environment capture: what machine, software and code produced a result.

Keys are gathered by small readers (a registry, as in pyperf's metadata collection); any
reader that fails leaves its key out rather than failing the run. ``fingerprint`` hashes
the machine-identity keys only, so runs from different machines are never mixed silently.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from . import procs

REPO_ROOT = Path(__file__).resolve().parents[2]


def _state_dir() -> Path:
    """Where the results store, build caches and reports live: ``.workbench/`` of the checkout
    the package runs from (``pip install -e .`` keeps it there), else, for a package installed
    from a wheel, ``$XDG_DATA_HOME/perf-workbench`` (``~/.local/share/perf-workbench``), never
    inside site-packages."""
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT / ".workbench"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "perf-workbench"


STATE_DIR = _state_dir()

# Keys that identify the machine; software versions are excluded so an upgrade of numpy
# does not make two runs on the same box look like two machines.
FINGERPRINT_KEYS = ("cpu_model", "cpu_logical", "cpu_physical", "mem_total_gib", "gpu_names", "os")

PACKAGES = ("torch", "triton", "iree-base-compiler", "iree-base-runtime", "pyopencl", "numpy",
            "scipy", "pandas", "streamlit", "cupy-cuda12x", "cupy-cuda13x", "cupy",
            "nvidia-nccl-cu12", "nvidia-nccl-cu13")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu() -> dict[str, Any]:
    info: dict[str, Any] = {"arch": platform.machine()}
    cpuinfo = _read("/proc/cpuinfo") or ""
    flags: set[str] = set()
    physical = set()  # (physical id, core id): distinct cores, whatever SMT adds
    phys_id = None
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "model name" and "cpu_model" not in info:
            info["cpu_model"] = val
        elif key == "flags" and not flags:
            flags = set(val.split())
        elif key == "physical id":
            phys_id = val
        elif key == "core id":
            physical.add((phys_id, val))
    info["cpu_logical"] = os.cpu_count()
    info["cpu_affinity"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if physical:
        info["cpu_physical"] = len(physical)
        info["smt"] = bool(info["cpu_logical"] and info["cpu_logical"] > len(physical))
    simd = [f for f in ("avx512f", "avx2", "avx", "sse4_2", "neon", "asimd") if f in flags]
    if simd:
        info["simd"] = simd
    gov = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if gov:
        info["cpu_governor"] = gov
    info.update(_turbo_smt())
    fmax = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if fmax and fmax.isdigit():
        info["cpu_max_mhz"] = int(fmax) // 1000
    return info


def _turbo_smt() -> dict[str, Any]:
    """Turbo/boost and SMT state where the kernel exposes them (both change per-call times)."""
    info: dict[str, Any] = {}
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")  # intel_pstate: 1 = turbo off
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")  # acpi-cpufreq, amd-pstate: 1 = boost on
    if no_turbo in ("0", "1"):
        info["cpu_turbo"] = no_turbo == "0"
    elif boost in ("0", "1"):
        info["cpu_turbo"] = boost == "1"
    control = _read("/sys/devices/system/cpu/smt/control")  # on, off, forceoff, notsupported, notimplemented
    if control:
        info["smt_control"] = control
    active = _read("/sys/devices/system/cpu/smt/active")
    if active in ("0", "1"):
        info["smt_active"] = active == "1"
    return info


def _memory() -> dict[str, Any]:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return {"mem_total_gib": round(int(line.split()[1]) / 2**20, 1)}
    return {}


def _os() -> dict[str, Any]:
    return {"os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "hostname": platform.node()}


def _packages() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"packages": versions}


def _gpu() -> dict[str, Any]:
    if not shutil.which("nvidia-smi"):
        return {}
    try:  # procs.run: a Ctrl-C while nvidia-smi hangs ends the wait (workbench.base.interrupt)
        out = procs.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                        20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = [r.split(", ") for r in out.splitlines() if r.strip()]
    if not rows:
        return {}
    info: dict[str, Any] = {"gpu_names": [r[0] for r in rows], "gpu_count": len(rows),
                            "gpu_driver": rows[0][1] if len(rows[0]) > 1 else None}
    try:
        topo = procs.run(["nvidia-smi", "topo", "-m"], 20).stdout
        if "NV" in topo:
            links = {tok for line in topo.splitlines()[1:] for tok in line.split() if tok.startswith("NV")}
            info["interconnect"] = "NVLink (" + ", ".join(sorted(links)) + ")" if links else "NVLink"
        elif len(rows) > 1:
            info["interconnect"] = "PCIe"
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def _torch_cuda() -> dict[str, Any]:
    if "torch" not in sys.modules:
        # Importing torch costs seconds; only ask it when a study already loaded it.
        return {}
    import torch

    info: dict[str, Any] = {"torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["cuda_runtime"] = torch.version.cuda
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # NCCL absent from this build: leave the key out
            pass
    if getattr(torch.version, "hip", None):
        info["hip_runtime"] = torch.version.hip
    return info


def _git() -> dict[str, Any]:
    try:
        commit = procs.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"], 10).stdout.strip()
        dirty = procs.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                          10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    if not commit:
        return {}
    return {"workbench_commit": commit + ("-dirty" if dirty else "")}


def _env_vars() -> dict[str, Any]:
    # every NCCL_* setting can change collective timings (NCCL_CGA_CLUSTER_SIZE alone decides whether
    # an all-reduce runs beside a matmul on an H200), so all are kept; NCCL_VERSION is a container
    # label, not the library torch loads (that one is recorded as "nccl")
    keep = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST", "OCL_ICD_VENDORS", "IREE_PY_RUNTIME")
    found = {k: v for k, v in sorted(os.environ.items()) if k in keep or (k.startswith("NCCL_") and k != "NCCL_VERSION")}
    return {"env_vars": found} if found else {}


READERS: tuple[Callable[[], dict[str, Any]], ...] = (_cpu, _memory, _os, _packages, _gpu, _torch_cuda, _git, _env_vars)
# Readers whose answer depends on what the process has imported (torch is asked only once a
# study loaded it): read again after a run, without repeating the subprocess-based ones.
LATE_READERS: tuple[Callable[[], dict[str, Any]], ...] = (_torch_cuda,)


def _apply(env: dict[str, Any], readers) -> dict[str, Any]:
    for reader in readers:
        try:
            env.update(reader())
        except Exception as exc:  # a reader must never fail a run; record why it is missing
            env.setdefault("capture_errors", []).append(f"{reader.__name__}: {exc}")
    return env


def capture() -> dict[str, Any]:
    """The environment of this process, with its fingerprint under ``fingerprint``."""
    env = _apply({}, READERS)
    env["fingerprint"] = fingerprint(env)
    return env


def refresh(env: dict[str, Any]) -> dict[str, Any]:
    """``env`` with the import-dependent keys read again (after a study ran); same fingerprint."""
    return _apply(dict(env), LATE_READERS)


def fingerprint(env: dict[str, Any]) -> str:
    ident = {k: env.get(k) for k in FINGERPRINT_KEYS}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:12]


def summary_line(env: Any) -> str:
    """One line for tables and report headers, whatever ``env`` holds (a run imported before
    bundles were typed may hold anything there)."""
    env = env if isinstance(env, dict) else {}
    parts = [str(env.get("cpu_model", "unknown CPU")), f"{env.get('cpu_logical', '?')} logical CPUs"]
    names = env.get("gpu_names")
    if isinstance(names, list) and names:
        parts.append(f"{len(names)}x {names[0]}")
    parts.append(str(env.get("os", "")))
    return ", ".join(p for p in parts if p) + f" [{env.get('fingerprint', '?')}]"
