"""The declared sweep of the cpu-reduction study, expanded into measured points.

A :class:`Sweep` names, for one experiment, the providers (the compared dimension) and the
grid axes: each axis is a study parameter whose list is crossed, or fixed values (``"max"``
is the largest of ``workers``). :func:`points` expands the sweeps of the requested
experiments with :func:`workbench.seam.study.expand` and deduplicates by variant name, so a
configuration two experiments share is measured once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from workbench.seam.study import expand

IREE_PROVIDERS = ("iree-task", "iree-sync", "iree-bench")
SINGLE_THREAD = ("numpy", "iree-sync")  # measured at w = 1 only
#: PyTorch's GRAIN_SIZE (aten/src/ATen/TensorIterator.h): below it a reduction runs serially
GRAIN_SIZE = 32_768
#: the experiment name of the A/A twins: a point of the grid timed again in a later block of
#: the run (the run's declared null controls; their spread is its drift between blocks)
AA = "aa"
#: the grid points that get a twin: (provider, c) at n and one worker
AA_POINTS = (("torch", None), ("iree-bench", 1))


@dataclass(frozen=True)
class Point:
    """One measured configuration: provider (the compared dimension), elements, chunks and
    split (IREE only), workers; ``experiment`` names the interleaved experiments whose
    samples are paired by round (``alloc``, ``forkjoin``), empty for an ordinary point."""

    provider: str
    n: int
    c: int | None
    w: int
    split: str | None = None
    experiment: str = ""

    @property
    def name(self) -> str:
        chunk = "" if self.c is None else f"/c={self.c}" + (f"/{self.split}" if self.c > 1 and self.split else "")
        prefix = f"{self.experiment}:" if self.experiment else ""
        return f"{prefix}{self.provider}/n={self.n}{chunk}/w={self.w}"

    @property
    def program_key(self) -> tuple[int, int, str | None]:
        """(n, c, split) of the IREE program this point runs (split None without a split)."""
        return (self.n, self.c or 1, self.split if (self.c or 1) > 1 else None)

    @property
    def params(self) -> dict:
        out = {"provider": self.provider, "n": self.n, "c": self.c, "split": self.split, "w": self.w}
        return out | ({"experiment": self.experiment} if self.experiment else {})


def profile_workers(params) -> list[int]:
    return sorted({w or max(params["workers"]) for w in params["profile_workers"]})


@dataclass(frozen=True)
class Sweep:
    """One experiment's grid. ``providers``: a parameter naming them, or a fixed tuple;
    ``axes``: point field -> parameter name (its list is crossed) or a tuple of values
    (``"max"``: the largest of ``workers``; ``"n"``: the ``n`` parameter); ``interleaved``:
    the points are timed in alternating rounds (paired samples), under ``experiment``."""

    providers: str | tuple[str, ...]
    axes: dict[str, str | tuple[Any, ...]] = field(default_factory=dict)
    interleaved: bool = False


def _values(spec, params) -> list:
    """An axis' values: a parameter's list, or fixed values with tokens resolved."""
    if isinstance(spec, str):
        v = params[spec]
        return list(v) if isinstance(v, list) else [v]
    tokens = {"max": [max(params["workers"])], "n": [params["n"]], "workers": list(params["workers"]),
              "fork_join_n": [fork_join_n(params)], "fork_join_c": [fork_join_c(params)]}
    return [x for v in spec for x in (tokens[v] if isinstance(v, str) and v in tokens else [v])]


def fork_join_c(params) -> int:
    """Workgroups of IREE's fork/join probe: one per worker of the largest worker count."""
    return max(params["workers"])


def fork_join_n(params) -> int:
    """Elements of IREE's fork/join probe: 16 per workgroup (one vector each: the dispatch is
    all scheduling, no compute)."""
    return 16 * fork_join_c(params)


def points(params: dict, sweeps: dict[str, tuple[Sweep, ...]]) -> list[Point]:
    """Every measured configuration of the requested experiments, deduplicated by name, and
    the A/A twins of :data:`AA_POINTS` (timed last, in blocks of their own; a run without the
    grid times the first of them and its twin, so every run measures its drift)."""
    out: dict[str, Point] = {}
    for exp in params["experiments"]:
        for sweep in sweeps.get(exp, ()):
            _add(out, sweep, exp, params)
    if "grid" not in params["experiments"]:
        # every run measures its drift between blocks (issue 41): a run without the grid (a
        # phases run, whose captures are blocks) times the first A/A point and its twin anyway
        for provider, c in AA_POINTS:
            if provider in params["providers"]:
                p = Point(provider, params["n"], c, 1)
                out.setdefault(p.name, p)
                break
    for provider, c in AA_POINTS:
        twin = [p for p in out.values() if p.provider == provider and p.n == params["n"] and p.w == 1
                and p.c == c and not p.experiment]
        if twin:
            p = twin[0]
            out.setdefault(f"{AA}:{p.name}", Point(p.provider, p.n, p.c, p.w, p.split, AA))
    return list(out.values())


def count(params: dict, sweeps: dict[str, tuple[Sweep, ...]]) -> int:
    """How many points :func:`points` gives at most (before deduplication), without expanding."""
    return sum(math.prod(len(_values(spec, params)) for spec in (sweep.providers, *sweep.axes.values()))
               for exp in params["experiments"] for sweep in sweeps.get(exp, ())) + 2 * len(AA_POINTS)


def _add(out: dict, sweep: Sweep, exp: str, params: dict) -> None:
    axes = {"provider": _values(sweep.providers, params)} | {k: _values(v, params) for k, v in sweep.axes.items()}
    for combo in expand(axes, list(axes)):
        p = _point(combo, params, exp if sweep.interleaved else "")
        out.setdefault(p.name, p)


def _point(combo: dict, params: dict, experiment: str) -> Point:
    provider = combo["provider"]
    w = 1 if provider in SINGLE_THREAD else int(combo.get("w", 1))
    if provider in IREE_PROVIDERS:
        c = int(combo.get("c", 1))
        split = combo.get("split", params["split"][0]) if c > 1 else None
    else:
        c, split = None, None
    return Point(provider, int(combo["n"]), c, w, split, experiment)


def programs(pts: list[Point]) -> list[tuple[int, int, str | None]]:
    """The IREE programs (n, c, split) the points run."""
    return sorted({p.program_key for p in pts if p.provider in IREE_PROVIDERS}, key=lambda k: (k[0], k[1], k[2] or ""))
