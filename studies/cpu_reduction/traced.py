"""One provider's Python-side iterations in Tracy zones, for a capture of their own.

Run as ``python -m studies.cpu_reduction.traced`` with a JSON job on stdin, under IREE's Tracy
runtime (:func:`workbench.running.capture.run` sets the environment); prints a JSON result on stdout.
Nothing here is timed: the study's timings run in other processes, without zones.

Job: ``{"provider": "iree-task"|"torch", "workers": w, "iterations": k, "input": ".npy",
"vmfb": ".vmfb" (IREE), "connect_s": s}``. Result: ``{"value", "iterations", "zones"}`` (the
last call's sum and :func:`workbench.running.tracy.status`) or ``{"error"}``.

Zones (:mod:`workbench.running.tracy`), the same layout for both providers so their timelines read alike:

- ``py.module_load`` (IREE): the runtime context, the module's mmap and load, the input's
  upload; its text is the module's file name;
- ``py.iteration``, one per iteration, holding ``py.invoke`` (IREE: the call ``f(x)``, in which
  IREE's own ``iree_vm_invoke`` and the dispatches run) or ``py.torch_sum`` (``torch.sum(x)``),
  then ``py.to_host`` (the result as a Python float).

The torch process loads IREE's Tracy runtime only to be a Tracy client: torch has no zones of
its own, so its capture holds the Python zones alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    job = json.load(sys.stdin)
    import numpy as np
    import iree.runtime as rt  # with IREE_PY_RUNTIME=tracy: the Tracy client the zones go through

    from workbench.running import tracy

    if not tracy.active():
        json.dump({"error": "IREE's Tracy runtime is not loaded (IREE_PY_RUNTIME=tracy missing)"}, sys.stdout)
        return
    if not tracy.wait_connected(float(job.get("connect_s", 60))):
        json.dump({"error": f"no Tracy capture connected within {job.get('connect_s', 60)} s"}, sys.stdout)
        return
    k, w = int(job["iterations"]), int(job["workers"])
    if job["provider"] == "torch":
        import torch

        torch.set_num_threads(w)
        x = torch.from_numpy(np.load(job["input"]))
        for _ in range(k):
            with tracy.zone("py.iteration"):
                with tracy.zone("py.torch_sum"):
                    r = torch.sum(x)
                with tracy.zone("py.to_host"):
                    value = float(r)
    else:
        with tracy.zone("py.module_load", text=Path(job["vmfb"]).name):
            rt.flags.parse_flags(f"--task_topology_group_count={w}")
            config = rt.Config("local-task")
            ctx = rt.SystemContext(config=config)
            ctx.add_vm_module(rt.VmModule.mmap(config.vm_instance, job["vmfb"]))
            fn = ctx.modules.module["sum"]
            x = rt.asdevicearray(config.device, np.load(job["input"]))
        for _ in range(k):
            with tracy.zone("py.iteration"):
                with tracy.zone("py.invoke"):
                    r = fn(x)
                with tracy.zone("py.to_host"):
                    value = float(np.asarray(r.to_host()))
    json.dump({"value": value, "iterations": k, "zones": tracy.status()}, sys.stdout)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
