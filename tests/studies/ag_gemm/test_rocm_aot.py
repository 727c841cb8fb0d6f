"""The ROCm path of the ag-gemm and mc2-split kernels, checked where it can be: every Triton
kernel of the two studies compiled ahead of time for AMD's gfx942 (MI300X/MI325X) and gfx950
(MI350X/MI355X) by Triton's AMD backend on this CPU, with the arguments its host code passes on
ROCm (no TMA descriptors, flags by a one-thread kernel): AMDGCN and a linked code object each,
and the flag protocol's system-scope release and acquire present as L2 write-back and
invalidate. Nothing here runs on an AMD GPU (none is lent)."""

from __future__ import annotations

import pytest

from kernels.triton import aot


@pytest.fixture(scope="module")
def compiled():
    why = aot.unavailable()
    if why:
        pytest.skip(why)
    rows = aot.compile_all(quick=True)
    linker = [r for r in rows if not r["ok"] and "lld" in r["error"].lower()]
    if linker:  # the backend is there but cannot link a code object: say exactly that
        pytest.skip(f"Triton's AMD backend cannot link here: {linker[0]['error']}")
    return rows


def test_every_kernel_compiles_for_gfx942_and_gfx950(compiled):
    bad = [f"{r['kernel']} {r['arch']}: {r['error']}" for r in compiled if not r["ok"]]
    assert not bad, bad
    names = {r["kernel"].split(": ")[-1].split(",")[0] for r in compiled}
    assert {"ag-gemm hbm kernel", "_set_flag_kernel", "_two_shot_kernel", "_two_shot_pull_kernel",
            "_pull_persistent_kernel", "_pull_persistent_kernel (fallback)"} <= names, names
    assert {r["arch"] for r in compiled} == set(aot.ARCHS)
    assert all(r["hsaco_bytes"] > 1000 for r in compiled)


@pytest.mark.parametrize("arch", aot.ARCHS)
def test_flag_protocol_keeps_its_system_scope_on_amd(arch):
    if aot.unavailable():
        pytest.skip(aot.unavailable())
    launches = {lc.name: lc for lc in aot.launches(quick=True)}
    for name in ("ag-gemm copy-engine flags: _set_flag_kernel", "mc2-split all-reduce: _pull_persistent_kernel"):
        asm = aot.compile_for(launches[name], arch).asm["amdgcn"]
        # release at system scope: write L2 back before the atomic; acquire: invalidate after it
        assert "global_atomic" in asm and "buffer_wbl2 sc0 sc1" in asm, name
    asm = aot.compile_for(launches["mc2-split all-reduce: _pull_persistent_kernel"], arch).asm["amdgcn"]
    assert "buffer_inv sc0 sc1" in asm
