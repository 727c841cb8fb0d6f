"""Phase breakdowns, key timestamps, allocation spans and one-iteration timelines from the
profiles a cpu-reduction run attached.

The run attaches, per profiled (chunk count, workers), an ireeperf-jsonl export (IREE's
native profiler) and/or a Tracy capture (raw ``.tracy``, or trimmed to a few iterations as
gzip'd Chrome JSON for committed bundles). They are read back through
:mod:`workbench.traces` (the importers and :mod:`workbench.traces.phases`' IREE rules), so
the page, the report and the CLI all see the same spans.

Per-iteration rules (issue #18): the phases of one iteration tile it, so they sum to that
iteration's total; the first :data:`WARMUP_ITERATIONS` iterations of every capture are
warm-up and dropped; medians are taken over the remaining (steady-state) iterations, and a
capture with fewer than :data:`MIN_FOR_MEDIAN` of them says how many it has and is never
called a median. Overhead = total - compute is computed per iteration from the same
capture, never across runs.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.evidence import engine
from workbench import traces
from workbench.data.record import RunRecord
from workbench.traces import export, phases
from workbench.traces.phases import PHASES, zone_names
from workbench.base.untrusted import attachment_file


#: attachment name: profile_n<N>[_c<C>[_<split>]]_w<W>_<bench|python|torch>.<ext>; ``bench``
#: profiles iree-benchmark-module, ``python`` the iree.runtime call path and ``torch`` torch.sum
#: (no c), both in Python zones (:mod:`.traced`); ``tracy.json.gz`` is a Tracy capture trimmed
#: to a few iterations (Chrome JSON of its zones, gzip'd)
NAME_RE = re.compile(r"profile_n(\d+)(?:_c(\d+)(?:_(aligned|even|partial-tile))?)?_w(\d+)_(bench|python|torch)\."
                     r"(ireeperf\.jsonl|tracy|tracy\.json\.gz)$")
VIA = {"bench": "iree-benchmark-module", "python": "iree.runtime (Python)", "torch": "torch.sum (Python)"}
SOURCES = {"ireeperf.jsonl": "ireeperf", "tracy": "tracy", "tracy.json.gz": "tracy"}
#: the first iterations of every capture are warm-up: first-touch page faults, workers
#: woken from cold, lazy executable set-up; they are dropped before any median
WARMUP_ITERATIONS = 3
#: fewer steady-state iterations than this: values are listed, never called a median
MIN_FOR_MEDIAN = 5
#: what each phase covers, in the seed's words (for the breakdown table)
DESCRIPTIONS = {
    "VM setup": ("vm_invoke, semaphore/fence create, buffer alloca, queue_execute "
                 "(ireeperf: first submit to the iteration's last submit)"),
    "scheduling delay": "main thread's fence wait (ireeperf: last submit) -> first dispatch tile starts",
    "dispatch compute": "union of dispatch tiles over all workers (wall clock)",
    "inter-dispatch": "between dispatch spans: retire, barrier, issue of the next dispatch",
    "cleanup + wake-up": "last tile end -> iteration end: signal, wake-up, result view, vm_end_invoke",
}
#: per-call allocation and release zones of IREE 3.13's runtime, grouped as the seed's
#: "Per-call allocations ~15 us (semaphores, fences, cmd buffer, heap buffer)"; matched as
#: substrings of Tracy's static zone names
ALLOC_GROUPS = (
    ("semaphores", ("semaphore_create", "semaphore_destroy")),
    ("fences", ("fence_create", "fence_destroy")),
    ("transient buffers (queue alloca/dealloca)", ("queue_alloca", "queue_dealloca", "transient_buffer_create",
                                                   "transient_buffer_destroy", "_reservation")),
    ("buffer views and heap buffers", ("buffer_view_create", "buffer_view_destroy", "heap_buffer_wrap",
                                       "heap_buffer_destroy", "vm_buffer_destroy", "buffer_recycle")),
    ("command-buffer state (resource sets, arenas, queue items)",
     ("resource_set_allocate", "resource_set_free", "arena_allocate", "arena_reset", "block_pool_acquire",
      "block_pool_release", "compute_item_allocate", "command_buffer_create", "command_buffer_destroy")),
    ("malloc/free (outside the above)", ("allocator_libc_alloc", "allocator_libc_free", "allocator_libc_realloc")),
)
#: Tracy zones that signal a semaphore (the worker that wakes the main thread)
SIGNAL_ZONES = ("iree_hal_semaphore_list_signal", "iree_hal_semaphore_signal")
#: worker zones the per-thread timeline shows beside the shards: the warm wait for work and
#: the signal (neither overlaps a shard on its thread)
WORKER_ZONES = ("iree_task_worker_wait_warm_compute_process", "iree_hal_semaphore_list_signal")
#: the Python zones of a traced capture (:mod:`.traced`): one iteration, the provider's call in
#: it (IREE's ``f(x)``, or ``torch.sum``), the result to a Python float
PY_ITERATION, PY_CALLS, PY_TO_HOST = "py.iteration", ("py.invoke", "py.torch_sum"), "py.to_host"
PY_PREFIX = "py."
#: the Python side's parts of an iteration, beside IREE's phases: in the call but outside IREE's
#: runtime (``py.invoke`` - ``iree_vm_invoke``), and outside the call (``py.iteration`` -
#: ``py.invoke``: ``py.to_host`` and the loop); torch's call is one part, torch.sum's own work
PY_PHASES = ("Python binding, in the call", "Python, outside the call")
TORCH_CALL = "torch.sum (the call)"
PY_TOTAL = "py.iteration"


def attachment_name(n: int, c: int | None, w: int, source: str, via: str, split: str | None = None,
                    trimmed: bool = False) -> str:
    ext = "ireeperf.jsonl" if source == "ireeperf" else ("tracy.json.gz" if trimmed else "tracy")
    chunks = "" if c is None else f"_c{c}" + (f"_{split}" if split and c > 1 else "")
    return f"profile_n{n}{chunks}_w{w}_{via}.{ext}"


def load_profiles(rec: RunRecord) -> list[dict]:
    """Each attached profile as ``{n, c, split, w, source, via, spans, meta, per_iter, py_iter,
    error}`` (``analyze`` calls this once per record): ``per_iter`` IREE's phases per iteration
    (None for torch), ``py_iter`` the Python zones' iterations (:func:`python_iterations`; None
    without them)."""
    out = []
    for name, _kind, blob in rec.attachments:
        m = NAME_RE.fullmatch(name)
        if not m or (m[2] is None) != (m[5] == "torch"):
            continue
        c = None if m[2] is None else int(m[2])
        n, w, via, ext = int(m[1]), int(m[4]), m[5], m[6]
        split = m[3] or ("even" if c and c > 1 else None)  # names before the split existed were even splits
        item = {"n": n, "c": c, "split": split, "w": w, "source": SOURCES[ext], "via": VIA[via], "name": name,
                "trimmed": ext == "tracy.json.gz", "spans": None, "per_iter": None, "py_iter": None, "error": None}
        with attachment_file(name, blob) as path:
            try:
                spans, meta = traces.load(path)
                item["spans"], item["meta"] = spans, meta
                item["py_iter"] = python_iterations(spans)
                if via != "torch":
                    item["per_iter"] = phases.iterations(spans, source="tracy" if item["source"] == "tracy" else None)
            except Exception as exc:  # TraceError / PhaseError: shown in the tables, never fatal
                item["error"] = f"{type(exc).__name__}: {exc}"
        out.append(item)
    return out


def python_iterations(spans: pd.DataFrame) -> pd.DataFrame | None:
    """One row per ``py.iteration`` zone (outermost on its thread, in time order), None when the
    capture has none: ``start_ns``, ``total_ns``, the call inside it (``call_ns``,
    ``call_start_ns``, ``call``: ``py.invoke`` or ``py.torch_sum``), IREE's runtime inside the
    call (``runtime_ns``: the outermost ``iree_vm_invoke`` zones within the call's window; NaN
    without any), ``to_host_ns`` and ``vm_start_ns`` (the first ``iree_vm_invoke``'s start: the
    key of IREE's phase row of the same iteration). A zone belongs to the iteration whose window
    holds it whole, on the same thread."""
    zones = zone_names(spans)
    it = spans[zones == PY_ITERATION]
    if it.empty:
        return None
    rows = []
    for track, g in it.groupby("track", observed=True, sort=False):
        g = g[g["depth"] == g["depth"].min()].sort_values("start_ns")
        st = g["start_ns"].to_numpy()
        en = st + g["dur_ns"].to_numpy()
        on = spans["track"] == track
        part = {}
        for what, names in (("call", PY_CALLS), ("to_host", (PY_TO_HOST,)), ("vm", (phases.VM_INVOKE,))):
            z = spans[on & zones.isin(names)]
            if what == "vm" and len(z):
                z = z[z["depth"] == z["depth"].min()]
            zs = z["start_ns"].to_numpy()
            ze = zs + z["dur_ns"].to_numpy()
            i = np.searchsorted(st, zs, side="right") - 1
            ok = (i >= 0) & (ze <= en[np.maximum(i, 0)])
            part[what] = pd.DataFrame({"i": i[ok], "start": zs[ok], "end": ze[ok],
                                       "name": zones[z.index].to_numpy()[ok]})
        call = part["call"].drop_duplicates("i")
        vm = part["vm"].merge(call[["i", "start", "end"]], on="i", suffixes=("", "_call"))
        vm = vm[(vm["start"] >= vm["start_call"]) & (vm["end"] <= vm["end_call"])]
        k = pd.RangeIndex(len(st))
        call = call.set_index("i").reindex(k)
        rows.append(pd.DataFrame({
            "track": str(track), "start_ns": st, "total_ns": en - st, "call": call["name"].to_numpy(),
            "call_ns": (call["end"] - call["start"]).to_numpy(dtype=float),
            "call_start_ns": call["start"].to_numpy(dtype=float),
            "runtime_ns": (vm["end"] - vm["start"]).groupby(vm["i"]).sum().reindex(k).to_numpy(dtype=float),
            "to_host_ns": (part["to_host"]["end"] - part["to_host"]["start"]).groupby(part["to_host"]["i"]).sum()
            .reindex(k).to_numpy(dtype=float),
            "vm_start_ns": vm.groupby("i")["start"].min().reindex(k).to_numpy(dtype=float)}))
    out = pd.concat(rows, ignore_index=True)
    return out.assign(iteration=np.arange(len(out)))


def trim_tracy(path: Path, keep: int) -> bytes:
    """A Tracy capture cut to its first ``WARMUP_ITERATIONS + keep`` iterations (Python
    iterations where it has them; every zone of every thread that overlaps them), as gzip'd
    Chrome JSON: a committed bundle keeps a few tens of KB instead of megabytes, and the phase
    rules read it as they read the capture."""
    spans, _ = traces.load(path)
    # a capture with Python zones is cut at whole Python iterations (torch.sum's has no others)
    per_iter = python_iterations(spans)
    per_iter = phases.iterations(spans) if per_iter is None else per_iter
    last = per_iter.iloc[min(len(per_iter), WARMUP_ITERATIONS + keep) - 1]
    t0, t1 = int(per_iter["start_ns"].iloc[0]), int(last["start_ns"] + last["total_ns"])
    win = spans[(spans["start_ns"] + spans["dur_ns"] >= t0) & (spans["start_ns"] <= t1)]
    return gzip.compress(export.to_chrome_json(win).encode(), 9)


def capture_label(p: dict) -> str:
    if p["c"] is None:
        return f"{p['source']} torch.sum w={p['w']} (python)"
    split = f" {p['split']}" if p.get("split") and p["c"] > 1 else ""
    return f"{p['source']} c={p['c']}{split} w={p['w']} ({'python' if 'Python' in p['via'] else 'bench'})"


def steady(per_iter: pd.DataFrame) -> pd.DataFrame:
    """The steady-state iterations: all but the first :data:`WARMUP_ITERATIONS` (all of them
    when the capture has no more than that)."""
    return per_iter.iloc[WARMUP_ITERATIONS:] if len(per_iter) > WARMUP_ITERATIONS else per_iter


def _key(p: dict) -> dict:
    return {"capture": capture_label(p), "source": p["source"], "via": p["via"], "n": p["n"], "c": p["c"],
            "split": p.get("split"), "w": p["w"]}


def iteration_table(profiles: list[dict]) -> pd.DataFrame:
    """One row per profiled iteration: its phases, total, compute and overhead in us (the
    phases sum to the total), and whether it is warm-up."""
    frames = []
    for p in profiles:
        if p["per_iter"] is None:
            continue
        it = p["per_iter"]
        cols = phases.phase_columns(it)
        df = pd.DataFrame({c: it[c] / 1e3 for c in cols})
        df.insert(0, "iteration", it["iteration"].to_numpy())
        df["start_ns"] = it["start_ns"].to_numpy()
        df["total_us"] = it["total_ns"] / 1e3
        df["compute_us"] = it["dispatch compute"] / 1e3
        df["overhead_us"] = df["total_us"] - df["compute_us"]
        df["warmup"] = np.arange(len(it)) < (WARMUP_ITERATIONS if len(it) > WARMUP_ITERATIONS else 0)
        for k, v in reversed(list(_key(p).items())):
            df.insert(0, k, v)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def capture_series(ev: engine.Evidence, it: pd.DataFrame, col: str, label: str,
                   timeline: str = "IREE") -> engine.Series:
    """One capture's steady-state iterations of ``col`` as the engine reads them: one block (the
    capture), each iteration a round (a part and its total of one iteration pair), the run's
    load (a capture is no variant of the run). ``timeline``: whose iterations they number (the
    IREE iterations and the Python ones of one capture pair only among themselves)."""
    block = f"capture {it['capture'].iloc[0]}"
    return ev.series(it[col].to_numpy(dtype=float), label, block, rounds=it["iteration"].astype(int).tolist(),
                     timeline=f"{block}, {timeline} iterations")


def python_table(profiles: list[dict]) -> pd.DataFrame:
    """One row per Python iteration (``py.iteration``) of every capture with Python zones, in us:
    the iteration, the call (``py.invoke`` / ``py.torch_sum``), IREE's runtime inside the call
    (``iree_vm_invoke``; NaN for torch), the binding's part of the call (call - runtime), the
    result to a float (``py.to_host``) and the iteration outside the call (iteration - call);
    ``vm_start_ns`` keys the row to IREE's phase row of the same iteration."""
    frames = []
    for p in profiles:
        py = p.get("py_iter")
        if py is None or not len(py):
            continue
        df = pd.DataFrame({"iteration": py["iteration"].to_numpy(), "call": py["call"].to_numpy(),
                           "total_us": py["total_ns"] / 1e3, "call_us": py["call_ns"] / 1e3,
                           "runtime_us": py["runtime_ns"] / 1e3, "to_host_us": py["to_host_ns"] / 1e3,
                           "vm_start_ns": py["vm_start_ns"].to_numpy()})
        df["binding_us"] = df["call_us"] - df["runtime_us"]
        df["outside_us"] = df["total_us"] - df["call_us"]
        df["warmup"] = np.arange(len(df)) < (WARMUP_ITERATIONS if len(df) > WARMUP_ITERATIONS else 0)
        for k, v in reversed(list((_key(p) | {"provider": "torch" if p["c"] is None else "iree-task"}).items())):
            df.insert(0, k, v)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: what the Python rows of a breakdown cover
PY_NOTES = {
    PY_PHASES[0]: "py.invoke - iree_vm_invoke: the binding's argument and result handling around IREE's call",
    PY_PHASES[1]: "py.iteration - the call: py.to_host (the result as a float) and the Python loop",
    TORCH_CALL: "py.torch_sum: torch.sum's whole call (torch has no zones of its own)",
    PY_TOTAL: "the Python iteration (py.iteration): what a Python caller waits per call",
}


def phase_table(ev: engine.Evidence, profiles: list[dict], iters: pd.DataFrame,
                py: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (capture, phase): median us over the steady-state iterations (or the
    iteration values when there are too few), share of the median total, p10/p90, count.
    Captures with Python zones add the Python side's parts (:data:`PY_PHASES`, or torch.sum's
    call) and the Python iteration, their shares of the Python iteration's median."""
    rows = []
    py = py if py is not None else pd.DataFrame()
    for p in profiles:
        key = _key(p)
        mine = py[(py["capture"] == key["capture"]) & ~py["warmup"]] if len(py) else py
        if p["per_iter"] is None and not len(mine):
            rows.append(key | {"phase": "unavailable", "median_us": np.nan, "lo_us": np.nan, "hi_us": np.nan,
                               "share_pct": np.nan, "p10_us": np.nan,
                               "p90_us": np.nan, "iterations": 0, "warmup_dropped": 0, "statistic": "",
                               "note": p["error"] or "no IREE iterations and no Python zones in the capture"})
            continue
        if p["per_iter"] is not None:
            it = iters[(iters["capture"] == key["capture"]) & ~iters["warmup"]]
            parts = [(phase, it, "total_us" if phase == "total" else phase) for phase in [*PHASES, "total"]]
            rows += _breakdown_rows(ev, key, parts, len(p["per_iter"]), "IREE",
                                    lambda ph: DESCRIPTIONS.get(ph, "median iteration time (not the sum of the medians)"))
        if len(mine):
            call = (TORCH_CALL, mine, "call_us") if p["c"] is None else (PY_PHASES[0], mine, "binding_us")
            rows += _breakdown_rows(ev, key, [call, (PY_PHASES[1], mine, "outside_us"), (PY_TOTAL, mine, "total_us")],
                                    len(p["py_iter"]), "Python", PY_NOTES.get)
    return pd.DataFrame(rows)


def _breakdown_rows(ev: engine.Evidence, key: dict, parts: list[tuple[str, pd.DataFrame, str]], captured: int,
                    timeline: str, note) -> list[dict]:
    """Rows of :func:`phase_table` for one capture's parts (``(phase, iterations, column)``;
    the last part is the total), each median with the engine's interval."""
    k = len(parts[-1][1])
    stat = f"median of {k} steady-state iterations" if k >= MIN_FOR_MEDIAN else (
        f"only {k} steady-state iteration(s): not a median")
    total = float(parts[-1][1][parts[-1][2]].median())
    rows = []
    for phase, frame, col in parts:
        name = f"{phase}, {key['capture']}"
        d = (ev.median(capture_series(ev, frame, col, name, timeline), name, "us", per="iterations") if k else
             engine.not_meaningful(name, "no steady-state iteration", "us"))
        x = frame[col]
        med = float(x.median())
        rows.append(key | {"phase": phase, "median_us": med, "lo_us": d.lo, "hi_us": d.hi,
                           "share_pct": 100.0 * med / total if total else np.nan,
                           "p10_us": float(x.quantile(0.1)), "p90_us": float(x.quantile(0.9)),
                           "iterations": k, "warmup_dropped": captured - k, "statistic": stat, "note": note(phase)})
    return rows


def overhead_table(ev: engine.Evidence, iters: pd.DataFrame) -> pd.DataFrame:
    """Per capture: total, compute, overhead (= total - compute of the same iteration) and
    compute share, each the median over the steady-state iterations with its interval."""
    rows = []
    if iters.empty:
        return pd.DataFrame()
    for cap, g in iters[~iters["warmup"]].groupby("capture", sort=False):
        first = g.iloc[0]
        base = {k: first[k] for k in ("capture", "source", "via", "n", "c", "split", "w")} | {"iterations": len(g)}
        cols = {what: capture_series(ev, g, col, f"{what}, {cap}")
                for what, col in (("total", "total_us"), ("compute", "compute_us"), ("overhead", "overhead_us"))}
        quantities = {what: ev.median(x, x.label, "us", physical_min=0.0, per="iterations") for what, x in cols.items()}
        quantities["compute share"] = ev.share(cols["compute"], cols["total"], f"compute share, {cap}")
        # fewer than MIN_FOR_MEDIAN iterations: shown, never clear (the engine's one rule)
        rows += [d.row(**base, quantity=what) for what, d in quantities.items()]
    return pd.DataFrame(rows)


def compute_us(over: pd.DataFrame) -> dict[tuple[int, int, str | None, int], dict]:
    """(n, c, split, w) -> {compute, overhead, total, share rows, capture} from one capture.

    Preference (later wins): Tracy of the Python path, Tracy of iree-benchmark-module, then
    ireeperf, the lightest profiler (Tracy's zones slow every dispatch down)."""
    out: dict = {}
    if over.empty:
        return out
    for source, via in (("tracy", VIA["python"]), ("tracy", VIA["bench"]), ("ireeperf", VIA["bench"])):
        d = over[(over["source"] == source) & (over["via"] == via)]
        for cap, g in d.groupby("capture", sort=False):
            r = g.iloc[0]
            split = r["split"] if isinstance(r["split"], str) else None
            out[(int(r["n"]), int(r["c"]), split, int(r["w"]))] = {
                "capture": cap, "iterations": int(r["iterations"]), **{q: row for q, row in
                                                                       zip(g["quantity"], g.to_dict("records"))}}
    return out


def _dispatch_index(names: pd.Series) -> pd.Series:
    return pd.to_numeric(names.str.extract(r"_dispatch_(\d+)", expand=False), errors="coerce")


def key_times(profiles: list[dict]) -> pd.DataFrame:
    """The seed's "key timestamps" list for the median steady-state iteration of each capture:
    us from the iteration's start, with the thread where one is known."""
    rows = []
    for p in profiles:
        if p["per_iter"] is None:
            continue
        t0, t1 = steady_window(p)
        s = p["spans"]
        s = s[(s["start_ns"] >= t0) & (s["start_ns"] + s["dur_ns"] <= t1)]
        zones = _zones(s)
        tiles = s[zones == "iree_hal_cmd_execute_dispatch_tiles"] if p["source"] == "tracy" else \
            s[s["category"].astype(str) == "dispatch"]
        idx = _dispatch_index(tiles["name"].astype(str))
        row = per_iter_row(p, t0)
        events: list[tuple[str, float, str]] = [("iteration starts (vm_invoke)", 0.0, _main_track(p))]
        if p["source"] == "tracy":
            events.append(("main thread blocks (fence wait starts)", row["VM setup"] / 1e3, _main_track(p)))
        d0, d1 = tiles[idx == 0], tiles[idx >= 1]
        if len(d0) and p["source"] == "tracy":
            first = d0.loc[d0["start_ns"].idxmin()]
            last_start = d0.loc[d0["start_ns"].idxmax()]
            last_end = d0.loc[(d0["start_ns"] + d0["dur_ns"]).idxmax()]
            events += [("first dispatch_0 shard starts", (first["start_ns"] - t0) / 1e3, str(first["track"])),
                       ("last dispatch_0 shard starts", (last_start["start_ns"] - t0) / 1e3, str(last_start["track"])),
                       ("last dispatch_0 shard ends", (last_end["start_ns"] + last_end["dur_ns"] - t0) / 1e3,
                        str(last_end["track"]))]
        elif len(d0):  # ireeperf: one span per dispatch, no shards, no threads
            events += [("dispatch_0 starts (first shard)", (d0["start_ns"].min() - t0) / 1e3, ""),
                       ("dispatch_0 ends (last shard ends)", ((d0["start_ns"] + d0["dur_ns"]).max() - t0) / 1e3, "")]
        if len(d1):
            r1 = d1.loc[d1["start_ns"].idxmin()]
            events.append((f"dispatch_1 starts (reduce {p['c']} partials, {r1['dur_ns'] / 1e3:.2f} us)",
                           (r1["start_ns"] - t0) / 1e3, str(r1["track"]) if p["source"] == "tracy" else ""))
        if p["source"] == "tracy" and len(tiles):
            done = int((tiles["start_ns"] + tiles["dur_ns"]).max())
            sig = s[zones.isin(SIGNAL_ZONES) & (s["start_ns"] >= done)]
            if len(sig):
                r = sig.loc[sig["start_ns"].idxmin()]
                events.append(("semaphore signal (wakes the main thread)", (r["start_ns"] - t0) / 1e3, str(r["track"])))
        events.append(("iteration ends (vm_end_invoke)", (t1 - t0) / 1e3, _main_track(p)))
        events += _python_events(p, t0)
        for what, t_us, track in sorted(events, key=lambda e: e[1]):
            rows.append({"capture": capture_label(p), "c": p["c"], "w": p["w"], "source": p["source"],
                         "event": what, "t_us": t_us, "thread": track})
    return pd.DataFrame(rows)


def _python_events(p: dict, t0: int) -> list[tuple[str, float, str]]:
    """The Python side of the iteration that starts its ``iree_vm_invoke`` at ``t0``: when the
    Python iteration and the call start (before 0) and when the call returns and the iteration
    ends (after IREE's last event), us from ``t0``."""
    py = _python_row(p, t0)
    if py is None:
        return []
    start, call0, call1 = py["start_ns"], py["call_start_ns"], py["call_start_ns"] + py["call_ns"]
    return [("Python iteration starts (py.iteration)", (start - t0) / 1e3, py["track"]),
            ("Python call starts (py.invoke)", (call0 - t0) / 1e3, py["track"]),
            ("Python call returns (py.invoke ends)", (call1 - t0) / 1e3, py["track"]),
            ("Python iteration ends (after py.to_host)", (start + py["total_ns"] - t0) / 1e3, py["track"])]


def _python_row(p: dict, t0: int) -> pd.Series | None:
    """The Python iteration whose call holds the ``iree_vm_invoke`` that starts at ``t0``."""
    py = p.get("py_iter")
    if py is None or not len(py):
        return None
    row = py[py["vm_start_ns"] == t0]
    return row.iloc[0] if len(row) else None


def display_window(p: dict) -> tuple[int, int]:
    """(start_ns, end_ns) a timeline shows: the median steady-state iteration, widened to the
    Python iteration that holds it where the capture has Python zones; torch.sum's capture
    (no IREE iterations): its median steady-state Python iteration."""
    if p["per_iter"] is None:
        st = steady(p["py_iter"])
        row = st.loc[(st["total_ns"] - st["total_ns"].median()).abs().idxmin()]
        return int(row["start_ns"]), int(row["start_ns"] + row["total_ns"])
    t0, t1 = steady_window(p)
    py = _python_row(p, t0)
    return (t0, t1) if py is None else (int(py["start_ns"]), int(py["start_ns"] + py["total_ns"]))


def per_iter_row(p: dict, t0: int) -> pd.Series:
    it = p["per_iter"]
    return it[it["start_ns"] == t0].iloc[0]


def _zones(spans: pd.DataFrame) -> pd.Series:
    return zone_names(spans)


def _main_track(p: dict) -> str:
    if p["source"] != "tracy":
        return ""
    s = p["spans"]
    inv = s[_zones(s) == "iree_vm_invoke"]
    return str(inv["track"].iloc[0]) if len(inv) else ""


def alloc_table(ev: engine.Evidence, profiles: list[dict]) -> pd.DataFrame:
    """IREE's per-call allocation work from Tracy captures: per steady-state iteration, the
    time in allocation/release zones (:data:`ALLOC_GROUPS`; a zone nested inside another
    such zone on the same thread counts once, in the outer one), per group and in total;
    medians over the iterations with the count. Tracy's own per-zone cost is included."""
    rows = []
    for p in profiles:
        if p["source"] != "tracy" or p["per_iter"] is None:
            continue
        s = p["spans"]
        zones = _zones(s)
        group = pd.Series(pd.NA, index=s.index, dtype="object")
        for name, keys in reversed(ALLOC_GROUPS):
            group[zones.str.contains("|".join(map(re.escape, keys)), regex=True)] = name
        a = s[group.notna()].assign(group=group[group.notna()])
        a = _outermost(a)
        per_iter = []
        for it in steady(p["per_iter"]).itertuples():
            t0, t1 = int(it.start_ns), int(it.start_ns + it.total_ns)
            w = a[(a["start_ns"] >= t0) & (a["start_ns"] < t1)]
            per_iter.append({"total": w["dur_ns"].sum() / 1e3, "calls": len(w),
                             **{g: w.loc[w["group"] == g, "dur_ns"].sum() / 1e3 for g, _ in ALLOC_GROUPS},
                             **{f"{g} calls": int((w["group"] == g).sum()) for g, _ in ALLOC_GROUPS}})
        df = pd.DataFrame(per_iter)
        k = len(df)
        stat = f"median of {k} steady-state iterations" if k >= MIN_FOR_MEDIAN else f"only {k} iteration(s)"
        for g in [name for name, _ in ALLOC_GROUPS] + ["total"]:
            calls = df["calls"] if g == "total" else df[f"{g} calls"]
            name = f"{g}, {capture_label(p)}"
            d = ev.median(ev.series(df[g].to_numpy(dtype=float), name, f"capture {capture_label(p)}"), name, "us",
                          physical_min=0.0, per="iterations")
            rows.append({"capture": capture_label(p), "c": p["c"], "w": p["w"], "group": g,
                         "median_us": float(df[g].median()), "lo_us": d.lo, "hi_us": d.hi,
                         "calls_per_iteration": float(calls.median()), "iterations": k, "statistic": stat})
    return pd.DataFrame(rows)


def _outermost(a: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``a`` not nested inside another row of ``a`` on the same track."""
    keep = []
    for _track, g in a.sort_values(["start_ns", "dur_ns"], ascending=[True, False]).groupby("track", observed=True):
        end = -1
        for idx, st, du in zip(g.index, g["start_ns"].to_numpy(), g["dur_ns"].to_numpy()):
            if st >= end:
                keep.append(idx)
                end = st + du
    return a.loc[keep]


#: the roles a timeline colours spans by
ROLES = ("python", "dispatch", "wait", "runtime")


def timeline_table(profiles: list[dict], max_rows_per_capture: int = 400) -> pd.DataFrame:
    """Key spans (see :func:`_key_spans`) of each capture's :func:`display_window`, times
    relative to its start; ``role`` is one of :data:`ROLES` and ``level`` the span's row in a
    drawing of its lane: the Python zones nested at the top of their lane, every other key span
    of the lane on the row below them (they do not overlap)."""
    frames = []
    for p in profiles:
        if p["spans"] is None or (p["per_iter"] is None and p.get("py_iter") is None):
            continue
        t0, t1 = display_window(p)
        s = _key_spans(p["spans"], p["source"], python=True)
        win = s[(s["start_ns"] + s["dur_ns"] >= t0) & (s["start_ns"] <= t1)].head(max_rows_per_capture)
        names = win["name"].astype(str)
        role = np.select([names.str.startswith(PY_PREFIX),
                          names.str.contains("_dispatch_") | (win["category"].astype(str) == "dispatch"),
                          names.str.contains("wait", case=False)], list(ROLES[:3]), ROLES[3])
        frames.append(pd.DataFrame({
            "capture": capture_label(p), "source": p["source"], "via": p["via"], "c": p["c"], "w": p["w"],
            "track": win["track"].astype(str), "name": win["name"].astype(str),
            "category": win["category"].astype(str), "depth": win["depth"].astype("Int64"),
            "level": _levels(win, role == "python"), "kind": win["kind"].astype(str), "role": role,
            "start_us": (win["start_ns"].clip(lower=t0) - t0) / 1e3,
            "end_us": (win["start_ns"].clip(lower=t0) - t0 + win["dur_ns"]).clip(upper=t1 - t0) / 1e3,
            "iteration_us": (t1 - t0) / 1e3,
            "origin": "the Python iteration's start" if p.get("py_iter") is not None else "the iteration's start",
        }))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["capture", "source", "via", "c", "w", "track", "name", "category", "depth", "level", "kind", "role",
                 "start_us", "end_us", "iteration_us", "origin"])


def _levels(win: pd.DataFrame, python: np.ndarray) -> np.ndarray:
    """Drawing row per span: Python zones by their nesting order on the lane, the lane's other
    key spans one row below its deepest Python zone."""
    depth = win["depth"].fillna(0).to_numpy(dtype=np.int64)
    track = win["track"].astype(str).to_numpy()
    level = np.zeros(len(win), dtype=np.int64)
    for t in np.unique(track):
        on = track == t
        py_depths = np.unique(depth[on & python])
        level[on & python] = np.searchsorted(py_depths, depth[on & python])
        level[on & ~python] = len(py_depths)
    return level


def steady_window(p: dict) -> tuple[int, int]:
    """(start_ns, end_ns) of the median steady-state iteration (warm-up dropped)."""
    return phases.iteration_window(p["spans"], steady(p["per_iter"]))


def _key_spans(spans: pd.DataFrame, source: str, python: bool = False) -> pd.DataFrame:
    """The spans the seed's picture shows: the main thread's phases and, per worker, its
    dispatch shards, its warm wait for work (a worker that woke; the seed's "T7 asleep -- woke
    but no shard") and the semaphore signal that wakes the main thread; with ``python``, the
    Python zones (``py.*``) too.

    Tracy: the main thread's HAL calls (the level of ``iree_hal_device_queue_execute``:
    semaphore/fence create, alloca, execute, fence await, buffer view) and those worker zones;
    ireeperf: dispatch spans and command regions (it has no per-thread lanes).
    """
    names = spans["name"].astype(str)
    is_dispatch = names.str.contains("_dispatch_") | (spans["category"].astype(str) == "dispatch")
    if source == "tracy":
        zones = _zones(spans)
        inv = spans[zones == "iree_vm_invoke"]
        on_worker = is_dispatch | zones.isin(WORKER_ZONES)
        py = zones.str.startswith(PY_PREFIX) & (spans["kind"].astype(str) == "span") if python else False
        if len(inv):
            main = inv["track"].iloc[0]
            qexec = spans[(zones == "iree_hal_device_queue_execute") & (spans["track"] == main)]
            level = int(qexec["depth"].min()) if len(qexec) else int(inv["depth"].min()) + 1
            on_main = (spans["track"] == main) & (spans["depth"] == level)
            return spans[on_main | py | (on_worker & (spans["track"] != main))]
        return spans[on_worker | py]
    return spans[is_dispatch | spans["track"].astype(str).str.contains("command regions")]


def ascii_timeline(p: dict, width: int = 72) -> str:
    """The seed's per-thread picture of the median iteration of one capture (T1..Tn lanes)."""
    t0, t1 = steady_window(p)
    spans = _key_spans(p["spans"], p["source"])
    dispatch_names = sorted({n for n in spans["name"].astype(str).unique() if "_dispatch_" in n})
    short = {n: "D" + n.split("_dispatch_")[1].split("_")[0] for n in dispatch_names}
    lanes = [f"T{i + 1}" for i in range(len(spans["track"].cat.categories))]
    return export.ascii_timeline(spans, start_ns=t0, end=t1, width=width, names=short, track_labels=lanes)
