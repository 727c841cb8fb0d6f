"""Times IREE modules through the Python runtime (``iree.runtime``), one process per driver setup.

Run as ``python -m studies.cpu_reduction.iree_py`` with a JSON job on stdin and a JSON list
of results on stdout. A separate process per worker count is needed because the runtime
builds its local-task executor once per process, from flags parsed before the first device
(``--task_topology_group_count``); it also keeps a crash in one module from killing the run.

Job: ``{"driver": "local-task"|"local-sync", "workers": w, "repeat": r,
"programs": [{"key", "vmfb", "input"}]}``. Each result: ``{"key", "value", "samples_ns",
"loops"}`` or ``{"key", "error"}``. The timed call is ``f(x)`` with ``x`` already a device
array: one synchronous invocation (VM invoke, submit, wait on the fence, result view),
like the seed's ``BenchmarkIteration``.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    job = json.load(sys.stdin)
    import numpy as np
    import iree.runtime as rt

    from workbench.running import harness

    if job["driver"] == "local-task":
        rt.flags.parse_flags(f"--task_topology_group_count={int(job['workers'])}")
    config = rt.Config(job["driver"])
    results = []
    inputs: dict[str, object] = {}
    for prog in job["programs"]:
        try:
            if prog["input"] not in inputs:
                inputs.clear()  # one input alive at a time: sizes go up to 64M elements
                inputs[prog["input"]] = rt.asdevicearray(config.device, np.load(prog["input"]))
            x = inputs[prog["input"]]
            ctx = rt.SystemContext(config=config)
            ctx.add_vm_module(rt.VmModule.mmap(config.vm_instance, prog["vmfb"]))
            fn = ctx.modules.module["sum"]
            value = float(np.asarray(fn(x).to_host()))
            m = harness.time_callable(lambda: fn(x), repeat=int(job["repeat"]))
            results.append({"key": prog["key"], "value": value, "samples_ns": m.samples_ns, "loops": m.loops})
        except Exception as exc:  # reported per program; the others still run
            results.append({"key": prog["key"], "error": f"{type(exc).__name__}: {exc}"})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
