"""Phase breakdowns: named rules per source that cut each iteration into phases.

An iteration's phases tile it exactly (no overlap, no gap), so per iteration the phase
durations sum to the iteration's wall time and the shares to 100%. Over many iterations
:func:`summarize` reports the median of each phase and shares of the *sum of medians* (so
the shares still sum to 100%; the median of the totals is reported beside it).

IREE rules (seed 000's Tracy breakdown, same five phases from either source):

==================  ===============================================  ========================================
phase               from Tracy zones                                  from ireeperf-jsonl events
==================  ===============================================  ========================================
VM setup            iteration start -> the main thread starts its     first queue submit of the iteration ->
                    fence wait (:data:`FENCE_WAITS`) after the last   its last queue submit (the host's last
                    ``queue_execute`` before the first tile           call before it waits)
scheduling delay    fence wait starts -> first dispatch tile starts   last submit -> first dispatch starts
dispatch compute    union of dispatch tile zones (all workers)        union of dispatch spans
inter-dispatch      first tile start -> last tile end, not covered    same, between dispatch spans
cleanup + wake-up   last tile end -> iteration end                    last dispatch end -> next iteration starts
==================  ===============================================  ========================================

Tracy iterations are the ``iree_vm_invoke`` zones of the main thread (the benchmark calls the
function once per iteration); ireeperf iterations are the queue submissions from one
``alloca``/``execute`` group to the next (the jsonl has no VM zones).

Where scheduling delay starts. The seed starts it when the host blocks ("fence_await starts ->
first shard starts"), so VM setup holds everything the host does before it blocks:
``queue_execute`` and the ``dealloca`` issued after it. The Tracy rule keys on the fence-wait
zones by name, not on any zone with "wait" in it, so a semaphore wait inside a queue
operation cannot end VM setup early. The jsonl has no host wait events; the iteration's last
queue submission (the ``dealloca`` after the ``execute``) is the host's last call before its
fence wait, so both sources cut at the same point of the host's program (the jsonl misses
only how long that last call takes). When the first tile starts before the host waits (the
workers pick the work up while the host is still inside ``queue_execute`` or the
``dealloca``), scheduling delay is 0 and VM setup runs to the first tile, from both sources
alike: the host's own submission is then on the critical path and the workers' pick-up
latency hides behind it, costing no wall time. Phases tile wall time, so that latency has
no share of its own; keying the delay on the ``queue_execute`` instead would report it, but
would then also count the host's remaining submission work as delay in every ordinary
iteration and no longer match the seed's numbers.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .analysis import STEP_NAMES, busy_intervals
from .model import from_records

PHASES = ("VM setup", "scheduling delay", "dispatch compute", "inter-dispatch", "cleanup + wake-up")
#: GPU step phases (Kineto / torch.profiler traces)
GPU_STEP_PHASES = ("host until first GPU op", "GPU busy", "GPU idle between ops", "after last GPU op")
_NOT_PHASES = ("iteration", "start_ns", "total_ns")


def phase_columns(per_iter: pd.DataFrame) -> list[str]:
    """The phase columns of a per-iteration table, in order."""
    return [c for c in per_iter.columns if c not in _NOT_PHASES]

#: Tracy zone names the IREE rules key on (IREE 3.13 runtime)
VM_INVOKE = "iree_vm_invoke"
QUEUE_EXECUTE = "iree_hal_device_queue_execute"
DISPATCH_TILES = "iree_hal_cmd_execute_dispatch_tiles"
#: the main thread blocking on an invocation's fence (nested: the VM's await, the HAL wait,
#: the semaphore wait; any of them marks when the host stops submitting and blocks)
FENCE_WAITS = ("iree_hal_module_fence_await", "iree_hal_fence_wait", "iree_async_semaphore_multi_wait")


class PhaseError(ValueError):
    """The trace lacks what a phase rule needs; the message says what."""


def union_ns(start_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """Total length of the union of intervals."""
    bs, be = busy_intervals(start_ns, end_ns)
    return int((be - bs).sum())


def zone_names(df: pd.DataFrame) -> pd.Series:
    """Static zone (source-location) names; Tracy rows carry them in ``args["zone"]`` because
    ``name`` shows the dynamic name (IREE names dispatch tile zones after the dispatch)."""
    static = [a.get("zone") if isinstance(a, dict) else None for a in df["args"]]
    return pd.Series(static, index=df.index, dtype="object").fillna(df["name"].astype("object")).astype(str)


def _iteration_row(it: int, t0: int, t_wait: int, d_start: np.ndarray, d_end: np.ndarray, t_end: int) -> dict:
    """Tile one iteration [t0, t_end] into the five phases (clamped so they never go negative)."""
    first, last = int(d_start.min()), int(d_end.max())
    t_wait = min(max(t_wait, t0), first)
    compute = union_ns(d_start, d_end)
    t_end = max(t_end, last)
    return {"iteration": it, "start_ns": t0, "total_ns": t_end - t0,
            "VM setup": t_wait - t0, "scheduling delay": first - t_wait, "dispatch compute": compute,
            "inter-dispatch": (last - first) - compute, "cleanup + wake-up": t_end - last}


def iree_jsonl_iterations(df: pd.DataFrame) -> pd.DataFrame:
    """Per-iteration IREE phases from an ireeperf-jsonl span table (one row per iteration)."""
    q = df[(df["category"] == "queue") & df["name"].astype(str).str.startswith("submit ")]
    q = q.sort_values("start_ns")
    disp = df[df["category"] == "dispatch"]
    if q.empty or disp.empty:
        raise PhaseError("ireeperf-jsonl phases need queue events and host-execution dispatches "
                         "(--device_profiling_mode=queue-events,host-execution)")
    ops = q["name"].astype(str).str.slice(7).tolist()
    t = q["start_ns"].tolist()
    # submission ids; an event without one (NaN) joins its group but matches no dispatch
    sub = q["correlation"].to_numpy(dtype="float64", na_value=np.nan).tolist()
    # group submissions: a new iteration starts at an alloca/execute that follows an execute
    groups: list[dict] = []
    cur: dict | None = None
    for op, ts, sid in zip(ops, t, sub):
        if cur is None or (cur["exec_ns"] is not None and op != "dealloca"):
            cur = {"start_ns": ts, "exec_ns": None, "subs": []}
            groups.append(cur)
        if op == "execute" and cur["exec_ns"] is None:
            cur["exec_ns"] = ts
        cur["last_submit_ns"] = ts  # the host's last queue call before it waits (module docstring)
        if sid == sid:
            cur["subs"].append(sid)
    groups = [g for g in groups if g["exec_ns"] is not None]
    d_sub = disp["correlation"].to_numpy(dtype="float64", na_value=np.nan)
    d_st = disp["start_ns"].to_numpy()
    d_en = d_st + disp["dur_ns"].to_numpy()
    all_end = int((df["start_ns"] + df["dur_ns"]).max())
    rows = []
    for i, g in enumerate(groups):
        m = np.isin(d_sub, g["subs"])
        if not m.any():
            continue
        t_next = groups[i + 1]["start_ns"] if i + 1 < len(groups) else None
        if t_next is None:  # last iteration: ends when its last event ends
            ev = df[np.isin(df["correlation"].to_numpy(dtype="float64", na_value=np.nan), g["subs"])]
            t_next = int((ev["start_ns"] + ev["dur_ns"]).max()) if len(ev) else all_end
        rows.append(_iteration_row(len(rows), g["start_ns"], g["last_submit_ns"], d_st[m], d_en[m], t_next))
    if not rows:
        raise PhaseError("no iteration has both an execute submission and its dispatches")
    return pd.DataFrame(rows)


def iree_tracy_iterations(df: pd.DataFrame) -> pd.DataFrame:
    """Per-iteration IREE phases from Tracy zones (``iree_vm_invoke`` per iteration)."""
    names = df["name"].astype(str)
    zones = zone_names(df)
    inv = df[(names == VM_INVOKE) & (zones == VM_INVOKE)].sort_values("start_ns")
    tiles = df[zones == DISPATCH_TILES]
    if inv.empty or tiles.empty:
        raise PhaseError(f"Tracy phases need '{VM_INVOKE}' and '{DISPATCH_TILES}' zones "
                         "(capture with IREE_PY_RUNTIME=tracy)")
    main_track = inv["track"].iloc[0]
    # one iteration per outermost vm_invoke on the main thread
    inv = inv[(inv["track"] == main_track)]
    inv = inv[inv["depth"] == inv["depth"].min()]
    main = df[df["track"] == main_track]
    m_names = zones[main.index]
    waits = main[m_names.isin(FENCE_WAITS)]
    qexec = main[m_names == QUEUE_EXECUTE]
    t_st = tiles["start_ns"].to_numpy()
    t_en = t_st + tiles["dur_ns"].to_numpy()
    w_st = waits["start_ns"].to_numpy()
    q_st = qexec["start_ns"].to_numpy()
    rows = []
    for s, d in zip(inv["start_ns"].tolist(), inv["dur_ns"].tolist()):
        e = s + d
        m = (t_st >= s) & (t_en <= e)
        if not m.any():
            continue
        first = int(t_st[m].min())
        # the fence wait for this work follows the last queue_execute before the first tile; a
        # tile that starts before the wait leaves no scheduling delay (module docstring)
        qs = q_st[(q_st >= s) & (q_st <= first)]
        after = qs.max() if len(qs) else s
        w = w_st[(w_st >= after) & (w_st <= e)]
        t_wait = int(w.min()) if len(w) else first
        rows.append(_iteration_row(len(rows), s, t_wait, t_st[m], t_en[m], e))
    if not rows:
        raise PhaseError(f"no '{VM_INVOKE}' zone encloses '{DISPATCH_TILES}' zones")
    return pd.DataFrame(rows)


#: GPU work that counts as busy in a step
_GPU_OPS = ("kernel", "gpu_memcpy", "gpu_memset")


def gpu_step_iterations(df: pd.DataFrame, step: str = STEP_NAMES) -> pd.DataFrame:
    """Per-step phases of a torch.profiler / Kineto trace.

    Steps are the host ``user_annotation`` spans whose name matches ``step`` (``ProfilerStep#N``
    from a profiler schedule, or a ``record_function("step")``). A step's GPU ops are those whose
    ``correlation`` matches a runtime call made inside the step; the step's window runs from
    its start to the later of its end and its last GPU op's end. Phases: host time until the
    first GPU op starts (Python, dispatch, launch latency), GPU busy (union of kernels, copies,
    memsets), GPU idle between the first and last op, and what follows the last op.
    """
    cat = df["category"].astype(str)
    names = df["name"].astype(str)
    steps = df[(cat == "user_annotation") & names.str.match(step)].sort_values("start_ns")
    gpu = df[cat.isin(_GPU_OPS)]
    if steps.empty or gpu.empty:
        raise PhaseError("GPU step phases need host 'user_annotation' step spans (ProfilerStep#N or "
                         "record_function('step')) and GPU kernels/copies")
    calls = df[cat.isin(("cuda_runtime", "hip_api")) & df["correlation"].notna()]
    c_st = calls["start_ns"].to_numpy()
    c_corr = calls["correlation"].to_numpy(dtype=np.int64)
    g_corr = gpu["correlation"].to_numpy(dtype="float64", na_value=np.nan)
    g_st = gpu["start_ns"].to_numpy()
    g_en = g_st + gpu["dur_ns"].to_numpy()
    rows = []
    for s, d in zip(steps["start_ns"].tolist(), steps["dur_ns"].tolist()):
        corr = c_corr[(c_st >= s) & (c_st < s + d)]
        m = np.isin(g_corr, corr)
        if not m.any():
            continue
        first, last = int(g_st[m].min()), int(g_en[m].max())
        end = max(s + d, last)
        busy = union_ns(g_st[m], g_en[m])
        rows.append({"iteration": len(rows), "start_ns": int(s), "total_ns": int(end - s),
                     "host until first GPU op": max(first - s, 0), "GPU busy": busy,
                     "GPU idle between ops": (last - max(first, s)) - busy,
                     "after last GPU op": end - last})
    if not rows:
        raise PhaseError("no step launched GPU work (no kernel correlates with a runtime call inside a step)")
    out = pd.DataFrame(rows)
    # a GPU op that started before its step (queued earlier) is clipped to the step window
    out["GPU idle between ops"] = out["GPU idle between ops"].clip(lower=0)
    out["GPU busy"] = out["total_ns"] - out[["host until first GPU op", "GPU idle between ops",
                                             "after last GPU op"]].sum(axis=1)
    return out


#: source format -> rule producing per-iteration phases
RULES: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "ireeperf-jsonl": iree_jsonl_iterations,
    "tracy": iree_tracy_iterations,
    "chrome-json": gpu_step_iterations,
}


def iterations(df: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Per-iteration phase table (columns ``iteration, start_ns, total_ns`` + the rule's phases:
    :data:`PHASES` for IREE sources, :data:`GPU_STEP_PHASES` for Kineto traces)."""
    src = source or (str(df["source"].iloc[0]) if len(df) else "")
    rule = RULES.get(src)
    if rule is None:
        raise PhaseError(f"no phase rules for source '{src}' (rules exist for: {', '.join(RULES)})")
    return rule(df)


def summarize(per_iter: pd.DataFrame, skip_first: int = 0) -> pd.DataFrame:
    """Median of each phase over iterations, in us, with shares summing to 100%.

    ``skip_first`` drops warm-up iterations. Columns: ``phase, median_us, p10_us, p90_us,
    share_pct``; a final ``total`` row carries the median iteration time.
    """
    it = per_iter.iloc[skip_first:] if len(per_iter) > skip_first else per_iter
    cols = phase_columns(it)
    med = it[cols].median()
    total = med.sum()
    rows = [{"phase": p, "median_us": med[p] / 1e3, "p10_us": it[p].quantile(0.1) / 1e3,
             "p90_us": it[p].quantile(0.9) / 1e3, "share_pct": 100.0 * med[p] / total if total else 0.0}
            for p in cols]
    rows.append({"phase": "total", "median_us": it["total_ns"].median() / 1e3,
                 "p10_us": it["total_ns"].quantile(0.1) / 1e3, "p90_us": it["total_ns"].quantile(0.9) / 1e3,
                 "share_pct": 100.0})
    out = pd.DataFrame(rows)
    out.attrs["iterations"] = len(it)
    return out


def breakdown(df: pd.DataFrame, source: str | None = None, skip_first: int = 1) -> pd.DataFrame:
    """Phase summary of a span table: :func:`iterations` then :func:`summarize`."""
    return summarize(iterations(df, source), skip_first=skip_first)


def per_rank(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`breakdown` of a trace, per rank for several ranks (a ``rank`` column)."""
    if df["rank"].nunique(dropna=True) <= 1:
        return breakdown(df)
    return pd.concat([breakdown(g).assign(rank=int(r)) for r, g in df.groupby("rank", observed=True)],
                     ignore_index=True)


def iteration_window(df: pd.DataFrame, per_iter: pd.DataFrame, which: str | int = "median") -> tuple[int, int]:
    """(start_ns, end_ns) of one iteration: an index, or ``"median"`` (the one nearest the median)."""
    if which == "median":
        idx = int((per_iter["total_ns"] - per_iter["total_ns"].median()).abs().idxmin())
    else:
        idx = int(which)
    row = per_iter.loc[idx]
    return int(row["start_ns"]), int(row["start_ns"] + row["total_ns"])


def phase_spans(per_iter: pd.DataFrame, track: str = "phases", source: str = "phases") -> pd.DataFrame:
    """The phases of each iteration as spans on one lane (to draw above the threads)."""
    recs = []
    cols = phase_columns(per_iter)
    for _, row in per_iter.iterrows():
        t = int(row["start_ns"])
        for p in cols:
            d = int(row[p])
            # gaps are interleaved with the work they sit between: draw work + gaps as one block
            if p in _INTERLEAVED.values():
                continue
            if p in _INTERLEAVED:
                d += int(row[_INTERLEAVED[p]])
                p = f"{p} + {_INTERLEAVED[p]}"
            if d > 0:
                recs.append({"track": track, "name": p, "category": "phase", "start_ns": t, "dur_ns": d,
                             "iteration": int(row["iteration"])})
            t += d
    return from_records(recs, source=source)


#: work phase -> the gap phase interleaved with it
_INTERLEAVED = {"dispatch compute": "inter-dispatch", "GPU busy": "GPU idle between ops"}
