"""The seed's published figures (seed 003), as data: shown beside the live ones, labelled as
the seed's, never used as results."""

# The seed's `time` output, as printed (5 runs per build; 8 host threads in both configurations).
SEED_RUNS = {
    (256, "baseline"): [("3m55.375s", "7m14.192s", "0m30.148s"), ("3m54.487s", "7m6.775s", "0m34.678s"),
                        ("3m54.633s", "7m20.381s", "0m30.620s"), ("3m54.992s", "7m12.464s", "0m29.610s"),
                        ("3m55.471s", "7m14.342s", "0m29.815s")],
    (256, "patch"): [("3m53.404s", "3m39.869s", "0m16.149s"), ("3m54.713s", "3m41.018s", "0m16.129s"),
                     ("3m55.242s", "3m55.148s", "0m17.130s"), ("3m55.374s", "3m40.411s", "0m15.818s"),
                     ("3m55.189s", "3m40.144s", "0m15.846s")],
    (1048576, "baseline"): [("12m29.975s", "24m2.244s", "8m8.153s"), ("12m15.391s", "23m51.018s", "8m0.809s"),
                            ("12m5.424s", "23m38.585s", "7m47.714s"), ("12m10.456s", "23m51.691s", "7m54.324s"),
                            ("12m37.735s", "24m19.671s", "8m15.752s")],
    (1048576, "patch"): [("4m42.600s", "16m14.593s", "0m40.444s"), ("4m43.579s", "15m33.805s", "0m38.537s"),
                         ("4m42.211s", "16m32.926s", "0m40.271s"), ("4m44.256s", "15m49.290s", "0m39.116s"),
                         ("4m42.013s", "15m39.447s", "0m38.517s")],
}


SEED_FIGURES = {
    "source": "seed 003_dccaa0ad43ebb428.txt: Julian Brown's microbenchmark in the review thread (8 threads "
              "launching OpenMP kernels, then joined and checked), `time` output before and after the "
              "stacks-caching patch",
    "machine": "the patch author's machine, NVIDIA GPU via libgomp's nvptx plugin (model not stated)",
    "tables": {
        "time_runs": [
            {"launches": n, "threads": 8, "build": build,
             "policy": "per_call" if build == "baseline" else "locked_cache",
             "run": i + 1, "real": r, "user": u, "sys": s}
            for (n, build), runs in SEED_RUNS.items() for i, (r, u, s) in enumerate(runs)
        ],
    },
    "notes": [
        "baseline: the stacks block is allocated and freed (cuMemAlloc/cuMemFree) at every launch and each "
        "launch synchronises; patch: one cached block, reused if large enough, locked during the kernel.",
        "The soft-stack block was about 50 MB on the author's hardware with default options.",
        "256 launches: real time about the same (3m55s) but user 7m14s -> 3m40s and sys 30s -> 16s.",
        "1,048,576 launches: real 12m10s -> 4m42s, user 23m51s -> 15m49s, sys 8m -> 40s.",
        "Across a set of GPU benchmarks the author saw about 11-12% improvement; the sync removal was dropped.",
    ],
}
