"""IREE tools for the cpu-reduction study: compile with a cache, benchmark, run, profile.

Tools are called as the wheels' binaries (not the ``.venv/bin`` Python trampolines, which
add an interpreter start to every call). Every failure raises
:class:`workbench.running.harness.ExternalCommandError` carrying the command and IREE's own text.
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
from workbench.running import capture
from workbench.base.env import STATE_DIR
from workbench.running.harness import ExternalCommandError, parse_gbench, run_command

#: the seed's compiler flags (``--iree-llvmcpu-target-cpu`` is set per run: ``host`` as the seed)
SEED_FLAGS = ("--iree-opt-level=O2", "--iree-opt-data-tiling")
TARGET_FLAGS = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu")
CACHE_DIR = STATE_DIR / "cache" / "iree"
PROFILE_MODES = "queue-events,host-execution,command-region-events"
#: an LLVM CPU name (``host``, ``x86-64-v4``, ``znver4``, ``sapphirerapids``...)
TARGET_CPU_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
#: a dispatch export's name in the module's read-only data
DISPATCH_NAME_RE = re.compile(r"^\w+_dispatch_\d+\w*$")
#: a VM call of a command-buffer operation, one instruction per line of the disassembly
VM_CALL_RE = re.compile(r"\bvm\.call(?:\.variadic)?(?:\.yieldable)? @hal\.command_buffer\.(\w+)\b")


def seed_flags(target_cpu: str = "host") -> tuple[str, ...]:
    """The seed's flags for ``target_cpu`` (the seed compiled with ``host``)."""
    if not TARGET_CPU_RE.fullmatch(target_cpu):
        raise ValueError(f"not an LLVM CPU name: {target_cpu!r}")
    return (*SEED_FLAGS, f"--iree-llvmcpu-target-cpu={target_cpu}")


def compiler_installed() -> bool:
    return importlib.util.find_spec("iree") is not None and importlib.util.find_spec("iree.compiler") is not None


def versions() -> dict[str, str]:
    out = {}
    for p in ("iree-base-compiler", "iree-base-runtime"):
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


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


class NotPrecompiled(FileNotFoundError):
    """No compiler here and no module compiled elsewhere for this program and these flags."""


def _mlir_sha(prog: Program, all_flags: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps([prog.mlir, all_flags]).encode()).hexdigest()[:16]


def compile_program(prog: Program, flags: tuple[str, ...] | None = None, cache_dir: Path | None = None) -> Compiled:
    """Compile (or reuse) the program's .vmfb, keyed by (MLIR text, flags, compiler version).

    The key hashes the MLIR text, so an edited template never reuses a stale module. The
    sidecar JSON records what the compiled module really contains (from ``iree-dump-module``):
    dispatches, and fill/copy command-buffer operations (a materialised pad). Without the
    compiler (a machine that only has the runtime), a module compiled elsewhere for the same
    MLIR and flags is taken from the cache; its sidecar names the compiler that built it.
    """
    cache_dir = Path(cache_dir or CACHE_DIR)
    all_flags = TARGET_FLAGS + tuple(seed_flags() if flags is None else flags)
    src_key = _mlir_sha(prog, all_flags)
    if not compiler_installed():
        return _precompiled(prog, src_key, all_flags, cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    ver = versions()["iree-base-compiler"]
    digest = hashlib.sha256(json.dumps([prog.mlir, all_flags, ver]).encode()).hexdigest()[:16]
    stem = f"sum_n{prog.n}_c{prog.c}_{digest}"
    vmfb, side = cache_dir / f"{stem}.vmfb", cache_dir / f"{stem}.json"
    if vmfb.exists() and side.exists():
        try:
            info = json.loads(side.read_text())
        except (OSError, ValueError):  # not ours to trust: compiled again and replaced
            info = {}
        if info.get("source_key") == src_key:
            info["cached"] = True
            return Compiled(vmfb, info)
    # Every file is written under a name of this process and renamed into place: two runs (or
    # two test processes) compiling the same module never read each other's half-written file.
    src = cache_dir / f"{stem}.mlir"
    _write_atomic(src, prog.mlir)
    tmp = vmfb.with_suffix(f".tmp{os.getpid()}")
    cmd = [compiler_tool(), *all_flags, str(src), "-o", str(tmp)]
    t0 = time.perf_counter()
    _run(cmd)
    compile_s = time.perf_counter() - t0
    os.replace(tmp, vmfb)  # atomic: a concurrent run never reads a half-written module
    info = {"key": stem, "source_key": src_key, "n": prog.n, "c": prog.c, "m": prog.m, "pad": prog.pad,
            "split": prog.split, "shards": prog.shards, "rem": prog.rem, "label": prog.label,
            "flags": list(all_flags[len(TARGET_FLAGS):]), "compiler": ver,
            "compile_cmd": " ".join(cmd[:-1] + [str(vmfb)]), "compile_s": round(compile_s, 3), **module_ops(vmfb)}
    _write_atomic(side, json.dumps(info, indent=1))
    info["cached"] = False
    return Compiled(vmfb, info)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _precompiled(prog: Program, src_key: str, all_flags: tuple[str, ...], cache_dir: Path) -> Compiled:
    for side in sorted(cache_dir.glob(f"sum_n{prog.n}_c{prog.c}_*.json")) if cache_dir.is_dir() else []:
        try:
            info = json.loads(side.read_text())
        except (OSError, ValueError):
            continue
        vmfb = side.with_suffix(".vmfb")
        if info.get("source_key") == src_key and vmfb.exists():
            info["cached"] = True
            return Compiled(vmfb, info)
    raise NotPrecompiled(f"iree-base-compiler is not installed and no module for N={prog.n}, c={prog.c} "
                         f"({prog.label}) with flags {' '.join(all_flags[len(TARGET_FLAGS):])} was compiled into "
                         f"{cache_dir}: pip install iree-base-compiler==3.13.0, or precompile on another machine "
                         "(python -m studies.cpu_reduction.precompile)")


def not_precompiled(keys, target_cpu: str, cache_dir: Path | None = None) -> list[str]:
    """Which of the (n, c, split) programs have no module in the cache for ``target_cpu``
    (for a machine without the compiler), as readable labels."""
    from kernels.iree.sum_programs import program

    absent = []
    for n, c, split in keys:
        prog = program(n, c, split or "aligned")
        try:
            _precompiled(prog, _mlir_sha(prog, TARGET_FLAGS + seed_flags(target_cpu)),
                         TARGET_FLAGS + seed_flags(target_cpu), Path(cache_dir or CACHE_DIR))
        except NotPrecompiled:
            absent.append(f"N={n} c={c} ({prog.label})")
    return absent


def module_ops(vmfb: Path) -> dict:
    """Dispatch names (from ``iree-dump-module``'s flatbuffer JSON) and the command-buffer
    dispatch/fill/copy calls of the module's VM code (one instruction per disassembly line)."""
    tool = runtime_tool("iree-dump-module")
    doc = json.loads(_run([tool, "--output=flatbuffer-json", str(vmfb)]).stdout)
    names = []
    for seg in doc.get("rodata_segments", []):
        data = seg.get("embedded_data")
        if isinstance(data, list) and 0 < len(data) <= 256:
            text = bytes(data).decode("utf-8", errors="replace")
            if DISPATCH_NAME_RE.fullmatch(text):
                names.append(text)
    names.sort(key=lambda s: int(s.split("_dispatch_")[1].split("_")[0]))
    calls: dict[str, int] = {}
    for line in _run([tool, "--output=disassembly", str(vmfb)]).stdout.splitlines():
        m = VM_CALL_RE.search(line)
        if m:
            calls[m[1]] = calls.get(m[1], 0) + 1
    return {"dispatches": calls.get("dispatch", 0), "fills": calls.get("fill_buffer", 0),
            "copies": calls.get("copy_buffer", 0), "dispatch_names": names}


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


def benchmark(vmfb: Path, input_npy: Path, workers: int, repeat: int, min_time: str,
              extra: list[str] | None = None, tracy: bool = False, env: dict | None = None,
              timeout_s: float = 300) -> tuple[list[float], str]:
    """``iree-benchmark-module`` on local-task: per-iteration ns of each repetition, and the command.

    ``min_time`` is google-benchmark's: ``"0.01s"`` (run at least that long) or ``"30x"``
    (exactly 30 iterations per repetition: a profile with a known number of iterations)."""
    cmd = [runtime_tool("iree-benchmark-module", tracy=tracy), f"--module={vmfb}", "--function=sum",
           *device_flags("local-task", workers), f"--input=@{input_npy}",
           f"--benchmark_repetitions={repeat}", f"--benchmark_min_time={min_time}",
           "--benchmark_format=json", *(extra or [])]
    proc = _run(cmd, timeout_s, env=env)
    rows = parse_gbench(proc.stdout)
    if not rows:
        raise ExternalCommandError(cmd, 0, "no benchmark rows in the JSON output:\n" + proc.stderr[-2000:])
    return next(iter(rows.values())), " ".join(cmd)


def capture_ireeperf(vmfb: Path, input_npy: Path, workers: int, out_dir: Path,
                     iterations: int = 30) -> tuple[Path, str]:
    """IREE's native profiler around ``iterations`` benchmark iterations; returns the
    ireeperf-jsonl path and the command."""
    prof = out_dir / "run.ireeprof"
    _, cmd = benchmark(vmfb, input_npy, workers, 1, f"{iterations}x",
                       [f"--device_profiling_mode={PROFILE_MODES}", f"--device_profiling_output={prof}"])
    jsonl = out_dir / "run.ireeperf.jsonl"
    _run([runtime_tool("iree-profile"), "export", "--format=ireeperf-jsonl", f"--output={jsonl}", str(prof)])
    return jsonl, cmd


def capture_tracy(out_dir: Path, traced: Callable[[dict, float], str], timeout_s: float = 120) -> tuple[Path, str]:
    """A Tracy capture of ``traced(env, timeout_s)``, which runs an IREE program under ``env``
    (the Tracy-instrumented runtime on a private port: :func:`workbench.running.capture.run`), kills
    it at ``timeout_s`` and returns its command line."""
    out = out_dir / "run.tracy"
    return out, capture.run(out, traced, timeout_s)


def traced_benchmark(vmfb: Path, input_npy: Path, workers: int, iterations: int = 30) -> Callable[[dict, float], str]:
    """For :func:`capture_tracy`: ``iterations`` iterations of ``iree-benchmark-module``'s Tracy build."""
    return lambda env, timeout_s: benchmark(vmfb, input_npy, workers, 1, f"{iterations}x", tracy=True, env=env,
                                            timeout_s=timeout_s)[1]
