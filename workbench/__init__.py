"""Perf Study Workbench core library, and its public Python API: ``import workbench as wb``
(:mod:`workbench.api`; docs/python.md).

Imports flow one way: ``pages -> studies -> workbench``. Nothing in this package imports
streamlit, and GPU stacks (torch.cuda, triton, cupy) are imported inside functions so the
package loads on any machine. The API's names are attributes loaded on first use (a module
``__getattr__``), so ``import workbench`` and ``python -m workbench list`` stay quick; no
submodule shares one of these names (a submodule, once imported, would replace it here).
"""

import importlib

__version__ = "0.1.0"

#: the public API: name -> the module that defines it
API = {name: "api" for name in ("studies", "runs", "run", "load", "default_run", "compare", "ab", "trace", "Run", "Comparison",
                                "Trace", "Error", "BadInput", "Unavailable", "RunFailed", "Interrupted",
                                "tracy_zone", "tracy_message", "tracy_plot", "tracy_thread_name")}
API["explore"] = "knobs"


def __getattr__(name: str):
    if name not in API:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{API[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API))
