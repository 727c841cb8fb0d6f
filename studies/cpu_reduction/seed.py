"""The seed's published figures (seed 000), as data: shown beside the live ones, labelled as
the seed's, never used as results."""

#: the seed's overview (sum 1D N=1M @32 threads/workers), per column: total, compute, runtime
#: overhead and the ratio to MKL, as published (compute and overhead from one Tracy iteration)
SEED_OVERVIEW = {
    "MKL": {"total": "15 us", "vs": "1.0x"},
    "IREE no-split": {"total": "61 us", "compute": "39.5 us", "overhead": "21.5 us", "vs": "4.1x"},
    "IREE c=8 fixed": {"total": "59 us", "compute": "9.9 us", "overhead": "49.1 us", "vs": "3.9x"},
    "IREE c=2": {"total": "61 us", "compute": "22.7 us", "overhead": "38.3 us", "vs": "4.1x"},
}
SEED_MACHINE = "32-core AMD Zen4 7975WX"
#: the seed's thread-scaling table (ms per call, iree-benchmark-module and torch.sum with MKL)
SEED_SCALING_MS = {
    "no-split": {1: 0.059, 2: 0.065, 4: 0.065, 8: 0.065, 16: 0.065, 32: 0.066},
    "c=8 fixed": {1: 0.080, 2: 0.069, 4: 0.056, 8: 0.055, 16: 0.063, 32: 0.059},
    "MKL": {1: 0.031, 2: 0.022, 4: 0.015, 8: 0.011, 16: 0.010, 32: 0.015},
}

SEED_FIGURES = {
    "source": "seed 000_a9087dd746f9e088.txt: IREE issue #24011, '[CPU] Reduction (sum) performance study on AMD "
              "Zen4 7975WX' (PyTorch 2.9.0+cpu with MKL; IREE --iree-opt-level=O2 --iree-opt-data-tiling "
              "--iree-llvmcpu-target-cpu=host, on top of codegen fix #24010)",
    "machine": "32-core AMD Zen4 7975WX, AVX-512, 32 threads",
    "tables": {
        "Overview: sum 1D N=1M @32 threads/workers": [
            {"": label, **{col: SEED_OVERVIEW[col].get(q, "") for col in SEED_OVERVIEW}}
            for q, label in (("total", "Total (measured)"), ("compute", "Compute"), ("overhead", "Runtime overhead"),
                             ("vs", "vs MKL"))],
        "Comparison summary: PyTorch/OpenMP vs IREE HAL/task system": [
            {"": "Dispatch floor", "PyTorch/OpenMP": "1.1 us", "IREE": "~10 us"},
            {"": "Thread fork/join", "PyTorch/OpenMP": "~13 us (OpenMP)", "IREE": "~15 us (task scheduler)"},
            {"": "Per-call allocations", "PyTorch/OpenMP": "2 us (output + 128B buffer)",
             "IREE": "~15 us (semaphores, fences, cmd buffer, heap buffer)"},
            {"": "Total @32t, 1M sum", "PyTorch/OpenMP": "15 us", "IREE": "56 us"},
        ],
        "Tracy breakdown, c=2 vs c=8 fixed @32w (us, % of iteration)": [
            {"phase": "VM setup", "c=2 (60.7 us)": "12.6 (21%)", "c=8 fixed (56.0 us)": "12.4 (22%)"},
            {"phase": "Scheduling delay", "c=2 (60.7 us)": "5.8 (10%)", "c=8 fixed (56.0 us)": "14.8 (26%)"},
            {"phase": "Dispatch 0 compute", "c=2 (60.7 us)": "22.8 (37%)", "c=8 fixed (56.0 us)": "~10 (18%)"},
            {"phase": "Inter-dispatch + dispatch_1", "c=2 (60.7 us)": "3.1 (5%)", "c=8 fixed (56.0 us)": "3.7 (7%)"},
            {"phase": "Cleanup + wakeup", "c=2 (60.7 us)": "16.4 (27%)", "c=8 fixed (56.0 us)": "15.1 (27%)"},
        ],
        "Thread scaling (ms per call)": [
            {"workers": w, **{name: ms[w] for name, ms in SEED_SCALING_MS.items()}} for w in SEED_SCALING_MS["MKL"]],
    },
    "notes": [
        "Seed's 'c=8 fixed' used tile 124992 (a multiple of 16) after codegen fix #24010: 9 shards in dispatch 0 "
        "(8 x 124,992 + 64). The live c=8 is split=aligned: the same 8 tiles of 124,992 in dispatch 0, the 64 "
        "remaining elements summed with the 8 partials in dispatch 1 (IREE 3.13 compiles the seed's partial 9th "
        "tile through a slow dynamic-shape path: split=partial-tile shows it).",
        "Seed's MKL column is torch.sum with PyTorch 2.9.0+cpu (MKL/OpenMP); the live 'torch' is this venv's torch.",
        "Seed per-thread timeline (c=8 fixed, 56 us): T1 vm_setup 12.4 us then blocked 40.2 us; dispatch_0 "
        "shards of ~5 us on T2-T9 between t=27.3 and t=37.2 us; dispatch_1 (reduce 9->1, 0.04 us) at t=41.0 us "
        "on T10; iteration ends t=55.5 us.",
    ],
}

#: the seed's Tracy single-iteration breakdown @32 workers (us), keyed by c, in the phase
#: names of workbench.traces.phases (the seed's "Inter-dispatch + dispatch_1" row is
#: inter-dispatch plus dispatch_1's 0.04-0.1 us of compute)
SEED_PHASES = {
    2: {"total": 60.7, "VM setup": 12.6, "scheduling delay": 5.8, "dispatch compute": 22.8, "inter-dispatch": 3.1,
        "cleanup + wake-up": 16.4},
    8: {"total": 56.0, "VM setup": 12.4, "scheduling delay": 14.8, "dispatch compute": 10.0, "inter-dispatch": 3.7,
        "cleanup + wake-up": 15.1},
}
#: the seed's key timestamps (us from iteration start) of its one traced iteration per c
SEED_KEY_TIMES = {
    8: [("iteration starts (vm_invoke)", 0.0), ("main thread blocks (fence wait starts)", 12.5),
        ("first dispatch_0 shard starts", 27.3), ("last dispatch_0 shard starts", 32.2),
        ("last dispatch_0 shard ends", 37.2), ("dispatch_1 starts", 41.0),
        ("semaphore signal (wakes the main thread)", 44.4), ("iteration ends (vm_end_invoke)", 55.5)],
    2: [("iteration starts (vm_invoke)", 0.0), ("main thread blocks (fence wait starts)", 12.6),
        ("first dispatch_0 shard starts", 22.9), ("last dispatch_0 shard starts", 25.7),
        ("last dispatch_0 shard ends", 45.5), ("dispatch_1 starts", 48.7),
        ("iteration ends (vm_end_invoke)", 58.7)],
}
#: the seed's dispatch-model rows (PyTorch/OpenMP vs IREE), as published
SEED_DISPATCH_MODEL = {
    "dispatch floor": ("1.1 us", "~10 us"),
    "thread fork/join": ("~13 us (OpenMP @32t, single-thread minus parallel)", "~15 us (task scheduler)"),
    "per-call allocations": ("2 us (output + 128 B buffer; torch.sum(a) - torch.sum(a, out=out))",
                             "~15 us (semaphores, fences, cmd buffer, heap buffer)"),
    "total @ the largest w, 1M sum": ("15 us (@32t)", "56 us (@32w)"),
}
