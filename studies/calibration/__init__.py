"""Calibration: the floor of this machine and of the harness.

Question: below which time is a figure on this machine dominated by the measurement
itself? Measures, on the host clock (``time.perf_counter_ns``), one probe per ``provider``
(the compared dimension; the fork/join's grid axis is ``threads``):

- ``empty-call``: an empty Python call timed by the harness (the harness floor);
- ``perf-counter``: one ``perf_counter_ns`` read, and the clock's resolution (``outputs``);
- ``torch-dispatch``: a no-op torch op (``aten::alias`` through ``Tensor.view_as``), the
  cost of reaching any torch kernel from Python;
- ``forkjoin/wN``: a fork/join round trip of N persistent Python threads (barrier in,
  barrier out) for N = 1..threads, the wake-up cost any thread pool pays.

Every other study reads its short figures against these: a median within
``workbench.evidence.tables.FLOOR_FACTOR`` x the run's own harness floor is marked as dominated by the
measurement.
"""

from __future__ import annotations

import dataclasses

import importlib.util
import os
import threading
import time

import pandas as pd

from workbench.evidence import derived, engine, stats, tables
from workbench.running import harness
from workbench.data.record import RunRecord, VariantResult
from workbench.seam.study import Param, ParamError, ParamSpace, RunContext, expand
from workbench.base.untrusted import escape
from workbench.evidence.verdict import Finding

ID = "calibration"
TITLE = "Calibration: machine and harness floor"
SEED = "(none: the floor every seed's figures are read against)"
#: the seed by what it is (its file name is SEED)
SEED_TITLE = "none: the floor every seed is read against"
SEED_SUMMARY = "Empty call, clock resolution, torch dispatch and thread wake-up cost on this machine."
RUNS_ON = "any CPU"
#: every variant is timed by ``harness.time_callable``, which repeats to ``--precision``
HONOURS_PRECISION = True
#: no seed, so no seed claims: the claims table of a calibration run is empty
SEED_CLAIMS: list = []
KEY_TABLE = "floors"
KEY_CHART = "floors"
#: what each table and chart is called where people read it (workbench.base.names; ids stay in the API)
TITLES = {"floors": "Per-call floors of this machine", "forkjoin": "Thread fork/join round trip per thread count",
          "chart:floors": "Per-call floors (median, 95% CI)", "chart:forkjoin": "Thread fork/join round trip against threads"}

#: the CPUs this process may run on (its affinity; the machine's count where that is not readable)
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

#: what the study compares (workbench.evidence.engine): each probe's time per call (the default metric);
#: torch dispatch and each fork/join against their baselines, timed in blocks of their own (so
#: with the run's drift between blocks, from the A/A twins of every probe)
BASELINES = (
    engine.Baseline(base={"provider": "empty-call"}, only={"provider": ["torch-dispatch"]}, stat="difference",
                    name="torch dispatch minus an empty call", physical_min=0.0),
    engine.Baseline(base={"provider": "python-threads", "threads": 1}, match=("provider",),
                    only={"provider": ["python-threads"]}, stat="difference",
                    name="fork/join with {threads} threads minus with 1"),
)
#: two kinds of quantity: a thread's fork/join drifts between blocks by far more than a call or a
#: clock read (on a quiet 16-CPU host, judged against the drift pooled over every probe, 10.9%
#: of the fork/join twins were called clear); each null is judged against the others of its kind
NULLS = engine.Nulls(twins="again (reverse order) / first", source="every probe timed again in reverse order "
                                                                   "(aa: variants)",
                     kind=lambda p: "fork/join" if p["provider"] == "python-threads" else "call")

SPACE = ParamSpace(
    params=(
        Param("repeat", "int", 30, "samples per variant", min=3, max=10_000),
        Param("threads", "int", min(4, CPUS), "largest fork/join thread count (at most this machine's usable CPUs: "
              "more threads than CPUs would time the scheduler)", min=1, max=256),
        Param("torch", "bool", True, "include the torch dispatch floor"),
    ),
    presets={"smoke": {"repeat": 5, "threads": min(2, CPUS), "torch": False}, "quick": {"repeat": 10}},
    headline=("repeat", "threads", "torch"),
    purposes={"smoke": "the tests' run: 5 samples, 2 threads, no torch; seconds",
              "quick": "10 samples of every floor: well under a minute"},
)


def runs_on_gpu(params) -> bool:
    """The floors of the CPU side: the machine is named by its CPUs, on a GPU node too."""
    return False


def requires(params) -> str | None:
    if params["torch"] and importlib.util.find_spec("torch") is None:
        return ("the torch dispatch floor needs PyTorch: `pip install torch` (the CPU build will do), "
                "or run without it (--set torch=false)")
    return None


def validate(params) -> None:
    # as cpu-reduction refuses more workers than CPUs: a fork/join of more threads than CPUs times
    # the scheduler's queue, not a wake-up (the page, the CLI and wb.explore all refuse it here)
    if params["threads"] > CPUS:
        raise ParamError("threads", f"{params['threads']} threads is beyond this machine's {CPUS} usable CPUs "
                                    f"(allowed 1..{CPUS})")


class _ForkJoin:
    """N persistent worker threads; one round = release all, wait until all did one unit."""

    def __init__(self, n: int):
        self.n = n
        self.start = threading.Barrier(n + 1)
        self.done = threading.Barrier(n + 1)
        self.count = [0] * n
        self.stop = False
        self.threads = [threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _work(self, i: int) -> None:
        while True:
            self.start.wait()
            if self.stop:
                return
            self.count[i] += 1
            self.done.wait()

    def round(self) -> None:
        self.start.wait()
        self.done.wait()

    def close(self) -> None:
        self.stop = True
        self.start.wait()
        for t in self.threads:
            t.join()


#: the probes (the compared dimension, ``provider``); ``threads`` is the grid axis of the last
PROVIDERS = ("empty-call", "perf-counter", "torch-dispatch", "python-threads")


def _grid(params) -> list[dict]:
    """The declared sweep: every provider once, the fork/join of Python threads at 1..threads."""
    probes = [p for p in PROVIDERS[:3] if p != "torch-dispatch" or params["torch"]]
    return [{"provider": p} for p in probes] + expand({"provider": ["python-threads"],
                                                       "threads": list(range(1, params["threads"] + 1))},
                                                      ["provider", "threads"])


def run(params, ctx: RunContext) -> dict:
    grid = _grid(params)
    steps = ctx.steps(2 * len(grid))
    res_ns = float("nan")
    for point in grid:
        what = point["provider"] + (f" with {point['threads']} threads" if "threads" in point else "")
        steps.say(what)
        if point["provider"] == "perf-counter":
            res_ns = harness.clock_resolution_ns()
        ctx.record(_in_block(_measure(point, params["repeat"], res_ns), ctx.block()))
        steps.tick(f"{what}: done")
    # the A/A null controls: every probe again, in reverse order (ABBA over the run), each in a
    # block of its own: their spread is the run's drift between blocks
    for point in reversed(grid):
        twin = _measure(point, params["repeat"], res_ns)
        twin.variant, twin.params = f"aa:{twin.variant}", {**point, "twin_of": twin.variant}
        ctx.record(_in_block(twin, ctx.block()))
        steps.tick(f"{twin.variant}: done")
    ctx.progress(1.0, "done")
    return {"clock_resolution_ns": res_ns}


def _in_block(v: VariantResult, block: int) -> VariantResult:
    """A variant timed alone: all its samples in one block of the run."""
    v.blocks = [block] * len(v.samples_ns)
    return v


def _measure(point: dict, repeat: int, res_ns: float) -> VariantResult:
    """One probe, checked before its time counts."""
    provider = point["provider"]
    if provider == "empty-call":
        m = harness.time_callable(lambda: None, repeat=repeat)
        return VariantResult("empty-call", point, m.samples_ns, True, "no output to check", {"loops": m.loops})
    if provider == "perf-counter":
        m = harness.time_callable(time.perf_counter_ns, repeat=repeat)
        return VariantResult("perf-counter", point, m.samples_ns, res_ns > 0,
                             f"clock advances; resolution {res_ns:.0f} ns", {"loops": m.loops})
    if provider == "torch-dispatch":
        import torch

        x = torch.randn(4)
        y = x.view_as(x)
        ok = torch.equal(x, y) and y.data_ptr() == x.data_ptr()
        m = harness.time_callable(lambda: x.view_as(x), repeat=repeat)
        return VariantResult("torch-dispatch", point, m.samples_ns, ok,
                             "view_as returns an alias of the input" if ok else "view_as did not alias",
                             {"loops": m.loops, "torch": torch.__version__})
    n = point["threads"]
    pool = _ForkJoin(n)
    try:
        m = harness.time_callable(pool.round, repeat=repeat)
        rounds = m.loops * (repeat + m.warmup)
        # Calibration rounds happen before measure's own rounds: count is at least that.
        ok = all(c >= rounds for c in pool.count) and len(set(pool.count)) == 1
        check = f"each of {n} threads ran {pool.count[0]} units" if ok else f"uneven work {pool.count}"
    finally:
        pool.close()
    return VariantResult(f"forkjoin/w{n}", point, m.samples_ns, ok, check, {"loops": m.loops})


#: runs stored before the compared dimension was named ``provider`` called it ``kind``
_OLD_KINDS = {"harness": "empty-call", "clock": "perf-counter", "torch": "torch-dispatch", "forkjoin": "python-threads"}


def current_names(rec: RunRecord) -> RunRecord:
    """The record with its probes named ``provider`` (runs stored before that call it ``kind``,
    with other names: :data:`_OLD_KINDS`); a copy, the stored run unchanged."""
    if not any("kind" in v.params and "provider" not in v.params for v in rec.variants):
        return rec

    def upgraded(p: dict) -> dict:
        out = {("provider" if k == "kind" else k): v for k, v in p.items()}
        out["provider"] = _OLD_KINDS.get(out.get("provider"), out.get("provider"))
        return out

    return dataclasses.replace(rec, variants=[dataclasses.replace(v, params=upgraded(v.params)) for v in rec.variants])


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    rec = current_names(rec)
    ev = engine.Evidence(rec, NULLS)
    compared = derived.derived_table(row for b in BASELINES for row in ev.compare(b))
    rec = dataclasses.replace(rec, variants=[v for v in rec.variants if not v.params.get("twin_of")])
    df = tables.variants_table(rec)
    forkjoin = df[df["variant"].str.startswith("forkjoin/")] if len(df) else df
    # the key table as people read it (times in their own unit; checks and notes are in the
    # results table); the numbers stay for the charts and the verdict
    shown = tables.results_display(df)[["variant", "median", "95% CI", "IQR/median"]]
    shown.insert(1, "threads", df["threads"].astype("Int64") if "threads" in df else pd.NA)
    return {"floors": shown, "_floors": df, "forkjoin": forkjoin, "derived": compared, **ev.level_tables()}


def _median(row) -> str:
    return f"{stats.fmt_ns(row['median_ns'])} [{stats.fmt_ns(row['ci_lo_ns'])}, {stats.fmt_ns(row['ci_hi_ns'])}]"


def findings(tbls: dict[str, pd.DataFrame]) -> list[Finding]:
    """The floors with their CIs (what the run measured, a fact), then what torch dispatch and
    each fork/join add (the engine's derived rows)."""
    fl = tbls["_floors"]
    ok = fl[fl["correct"].astype(bool)].set_index("variant") if len(fl) else fl
    named = (("empty-call", "harness floor (an empty call)"), ("perf-counter", "clock read"),
             ("torch-dispatch", "torch dispatch"), ("forkjoin/w1", "fork/join of 1 thread"))
    found = [f"{what} {_median(ok.loc[name])}" for name, what in named if name in ok.index]
    out = [Finding("floors", text="Per call: " + "; ".join(found))] if found else []
    return out + [Finding(str(r["name"]), r) for r in tbls["derived"].to_dict("records")]


def charts(tbls: dict[str, pd.DataFrame], only: str | None = None) -> dict:
    from workbench.presentation import charts as wbcharts  # altair is not installed on the GPU nodes

    # floors span ns (a clock read) to tens of us (a fork/join): points with whiskers on a log
    # axis (the helper's choice when values span a decade or more), in the unit the largest reads in
    f = tbls["_floors"]
    unit = wbcharts.units.pick(list(f["median_ns"]) + list(f["ci_hi_ns"]), "ns")
    out = {} if only not in (None, "floors") else \
        {"floors": wbcharts.median_ci_bars(f, unit=unit, title="Per-call floor: median per call, 95% CI whiskers")}
    if len(tbls["forkjoin"]) and only in (None, "forkjoin"):
        fj = tbls["forkjoin"].replace({"provider": {"python-threads": "Python threads: barrier in, barrier out"}})
        out["forkjoin"] = wbcharts.sweep_chart(fj, x="threads", x_title="threads",
                                               title="Thread fork/join round trip vs threads (median, 95% CI)")
    return out
