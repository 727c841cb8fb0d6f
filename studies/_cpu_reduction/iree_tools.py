"""IREE tools for the cpu-reduction study: compile with a cache, benchmark, run, profile.

Tools are called as the wheels' binaries (not the ``.venv/bin`` Python trampolines, which
add an interpreter start to every call). Every failure raises
:class:`workbench.harness.ExternalCommandError` carrying the command and IREE's own text.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernels.iree.sum_programs import Program
from workbench import procs
from workbench.env import REPO_ROOT
from workbench.harness import ExternalCommandError, parse_gbench, run_command

#: the seed's compiler flags, plus the target selection every llvm-cpu build needs
SEED_FLAGS = ("--iree-opt-level=O2", "--iree-opt-data-tiling", "--iree-llvmcpu-target-cpu=host")
TARGET_FLAGS = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu")
CACHE_DIR = REPO_ROOT / ".workbench" / "cache" / "iree"
PROFILE_MODES = "queue-events,host-execution,command-region-events"


def versions() -> dict[str, str]:
    return {p: importlib.metadata.version(p) for p in ("iree-base-compiler", "iree-base-runtime")}


def runtime_tool(name: str, tracy: bool = False) -> str:
    """Path of a runtime tool; ``tracy=True`` picks the Tracy-instrumented build (IREE_PY_RUNTIME=tracy)."""
    pkg = "iree._runtime_libs_tracy" if tracy else "iree._runtime_libs"
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{pkg} is not installed (pip install iree-base-runtime)")
    path = Path(list(spec.submodule_search_locations)[0]) / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found in the iree-base-runtime wheel")
    return str(path)


def compiler_tool() -> str:
    from iree.compiler.tools.binaries import find_tool

    return find_tool("iree-compile")


def _run(cmd: list[str], timeout_s: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_command(cmd, timeout_s, env)


@dataclass
class Compiled:
    vmfb: Path
    info: dict  # key, flags, versions, dispatch/copy/fill counts, compile_s, cached


def compile_program(prog: Program, flags: tuple[str, ...] = SEED_FLAGS, cache_dir: Path | None = None) -> Compiled:
    """Compile (or reuse) the program's .vmfb, keyed by (N, C, flags, compiler version).

    The key hashes the MLIR text too, so an edited template never reuses a stale module. The
    sidecar JSON records what the compiled module really contains (from ``iree-dump-module``):
    dispatches, and fill/copy command-buffer operations (a materialised pad).
    """
    cache_dir = Path(cache_dir or CACHE_DIR)
    cache_dir.mkdir(parents=True, exist_ok=True)
    ver = versions()["iree-base-compiler"]
    all_flags = TARGET_FLAGS + tuple(flags)
    digest = hashlib.sha256(json.dumps([prog.mlir, all_flags, ver]).encode()).hexdigest()[:16]
    stem = f"sum_n{prog.n}_c{prog.c}_{digest}"
    vmfb, side = cache_dir / f"{stem}.vmfb", cache_dir / f"{stem}.json"
    if vmfb.exists() and side.exists():
        info = json.loads(side.read_text())
        info["cached"] = True
        return Compiled(vmfb, info)
    src = cache_dir / f"{stem}.mlir"
    src.write_text(prog.mlir)
    tmp = vmfb.with_suffix(f".tmp{os.getpid()}")
    cmd = [compiler_tool(), *all_flags, str(src), "-o", str(tmp)]
    t0 = time.perf_counter()
    _run(cmd)
    compile_s = time.perf_counter() - t0
    os.replace(tmp, vmfb)  # atomic: a concurrent run never reads a half-written module
    info = {"key": stem, "n": prog.n, "c": prog.c, "m": prog.m, "pad": prog.pad, "flags": list(flags),
            "compiler": ver, "compile_cmd": " ".join(cmd[:-1] + [str(vmfb)]), "compile_s": round(compile_s, 3),
            **module_ops(vmfb)}
    side.write_text(json.dumps(info, indent=1))
    info["cached"] = False
    return Compiled(vmfb, info)


def module_ops(vmfb: Path) -> dict:
    """Dispatch names and command-buffer dispatch/fill/copy call counts of a compiled module."""
    text = _run([runtime_tool("iree-dump-module"), str(vmfb)]).stdout
    # Export names appear in several (sometimes truncated) places: keep the longest per ordinal.
    names: dict[str, str] = {}
    for name in re.findall(r"`(\w+?_dispatch_(\d+)\w*)", text):
        full, ordinal = name
        if len(full) > len(names.get(ordinal, "")):
            names[ordinal] = full
    return {"dispatches": len(re.findall(r"vm\.call\.variadic @hal\.command_buffer\.dispatch\b", text)),
            "fills": len(re.findall(r"vm\.call @hal\.command_buffer\.fill_buffer\b", text)),
            "copies": len(re.findall(r"vm\.call @hal\.command_buffer\.copy_buffer\b", text)),
            "dispatch_names": [names[k] for k in sorted(names, key=int)]}


def device_flags(driver: str, workers: int) -> list[str]:
    if driver == "local-sync":
        return ["--device=local-sync"]
    return ["--device=local-task", f"--task_topology_group_count={workers}"]


def run_module(vmfb: Path, input_npy: Path, driver: str, workers: int) -> float:
    """Run ``@sum`` once through the C++ tool and return the f32 result (read from .npy)."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.npy"
        _run([runtime_tool("iree-run-module"), f"--module={vmfb}", "--function=sum", *device_flags(driver, workers),
              f"--input=@{input_npy}", f"--output=@{out}"])
        return float(np.load(out))


def benchmark(vmfb: Path, input_npy: Path, workers: int, repeat: int, min_time_s: float,
              extra: list[str] | None = None, tracy: bool = False, env: dict | None = None) -> tuple[list[float], str]:
    """``iree-benchmark-module`` on local-task: per-iteration ns of each repetition, and the command."""
    cmd = [runtime_tool("iree-benchmark-module", tracy=tracy), f"--module={vmfb}", "--function=sum",
           *device_flags("local-task", workers), f"--input=@{input_npy}",
           f"--benchmark_repetitions={repeat}", f"--benchmark_min_time={min_time_s:g}s",
           "--benchmark_format=json", *(extra or [])]
    proc = _run(cmd, env=env)
    rows = parse_gbench(proc.stdout)
    if not rows:
        raise ExternalCommandError(cmd, 0, "no benchmark rows in the JSON output:\n" + proc.stderr[-2000:])
    return next(iter(rows.values())), " ".join(cmd)


def capture_ireeperf(vmfb: Path, input_npy: Path, workers: int, out_dir: Path,
                     min_time_s: float = 0.01) -> tuple[Path, str]:
    """IREE's native profiler around a short benchmark; returns the ireeperf-jsonl path."""
    prof = out_dir / "run.ireeprof"
    _, cmd = benchmark(vmfb, input_npy, workers, 1, min_time_s,
                       [f"--device_profiling_mode={PROFILE_MODES}", f"--device_profiling_output={prof}"])
    jsonl = out_dir / "run.ireeperf.jsonl"
    _run([runtime_tool("iree-profile"), "export", "--format=ireeperf-jsonl", f"--output={jsonl}", str(prof)])
    return jsonl, cmd


def capture_tracy(out_dir: Path, traced: Callable[[dict], str], timeout_s: float = 60) -> tuple[Path, str]:
    """A Tracy capture of ``traced(env)``, which runs an IREE program under ``env`` (the
    Tracy-instrumented runtime: ``IREE_PY_RUNTIME=tracy``) and returns its command line.

    ``iree-tracy-capture`` is started first and listens; the program runs with
    ``TRACY_NO_EXIT=1`` so it stays alive until the capture has drained its events.
    """
    out = out_dir / "run.tracy"
    log_path = out_dir / "capture.log"
    cap_cmd = [runtime_tool("iree-tracy-capture", tracy=True), "-o", str(out), "-f"]
    # The capture's progress goes to a file: a pipe nobody reads fills up, blocks the capture
    # and loses most of the zones.
    with open(log_path, "w") as log_fh:
        cap = subprocess.Popen(cap_cmd, stdout=log_fh, stderr=subprocess.STDOUT, **procs.popen_kwargs())
        try:
            cmd = traced(dict(os.environ, TRACY_NO_EXIT="1", IREE_PY_RUNTIME="tracy"))
            try:
                cap.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise ExternalCommandError(cap_cmd, -1, f"capture did not finish in {timeout_s:.0f} s") from None
        finally:
            if cap.poll() is None:
                cap.kill()
                cap.wait()
    log = log_path.read_text(errors="replace").replace("\r", "\n")[-2000:]
    if cap.returncode != 0 or not out.exists():
        raise ExternalCommandError(cap_cmd, cap.returncode or -1, log or "no capture file written")
    return out, f"TRACY_NO_EXIT=1 IREE_PY_RUNTIME=tracy {cmd}  # with: {' '.join(cap_cmd)}"


def traced_benchmark(vmfb: Path, input_npy: Path, workers: int, min_time_s: float = 0.01) -> Callable[[dict], str]:
    """For :func:`capture_tracy`: a short ``iree-benchmark-module`` run of the Tracy build."""
    return lambda env: benchmark(vmfb, input_npy, workers, 1, min_time_s, tracy=True, env=env)[1]
