"""Phase breakdown and one-iteration timelines from the profiles a cpu-reduction run attached.

The run attaches, per profiled chunk count, an ireeperf-jsonl export (IREE's native
profiler) and/or a Tracy capture. They are read back through :mod:`workbench.traces` (the
importers and :mod:`workbench.traces.phases`' IREE rules), so the page, the report and the
CLI all see the same spans.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

from workbench.store import RunRecord

#: attachment name: profile_n<N>_c<C>_w<W>_<bench|python>.<ireeperf.jsonl|tracy>; ``bench``
#: profiles iree-benchmark-module, ``python`` the iree.runtime call path
NAME_RE = re.compile(r"profile_n(\d+)_c(\d+)_w(\d+)_(bench|python)\.(ireeperf\.jsonl|tracy)$")
VIA = {"bench": "iree-benchmark-module", "python": "iree.runtime (Python)"}
SOURCES = {"ireeperf.jsonl": "ireeperf", "tracy": "tracy"}
#: what each phase covers, in the seed's words (for the breakdown table)
DESCRIPTIONS = {
    "VM setup": ("vm_invoke, semaphore/fence create, buffer alloca, queue_execute "
                 "(ireeperf: first submit to the iteration's last submit)"),
    "scheduling delay": "main thread's fence wait (ireeperf: last submit) -> first dispatch tile starts",
    "dispatch compute": "union of dispatch tiles over all workers (wall clock)",
    "inter-dispatch": "between dispatch spans: retire, barrier, issue of the next dispatch",
    "cleanup + wake-up": "last tile end -> iteration end: signal, wake-up, result view, vm_end_invoke",
}


def attachment_name(n: int, c: int, w: int, source: str, via: str) -> str:
    ext = {v: k for k, v in SOURCES.items()}[source]
    return f"profile_n{n}_c{c}_w{w}_{via}.{ext}"


def load_profiles(rec: RunRecord) -> list[dict]:
    """Each attached profile as ``{n, c, w, source, spans, meta, per_iter, error}``.

    Parsed once per set of attachments: the page calls this from the verdict, ``analyze`` and
    the report sections on every rerun, and parsing the Tracy captures takes most of a second.
    The dicts are fresh per call; the span tables inside are shared and must not be modified.
    """
    blobs = tuple((name, blob) for name, _kind, blob in rec.attachments if NAME_RE.match(name))
    return [dict(item) for item in _parse_profiles(blobs)]


@functools.lru_cache(maxsize=4)
def _parse_profiles(blobs: tuple[tuple[str, bytes], ...]) -> tuple[dict, ...]:
    from workbench import traces
    from workbench.traces import phases
    from workbench.untrusted import attachment_file

    out = []
    for name, blob in blobs:
        m = NAME_RE.match(name)
        n, c, w, via, ext = int(m[1]), int(m[2]), int(m[3]), m[4], m[5]
        item = {"n": n, "c": c, "w": w, "source": SOURCES[ext], "via": VIA[via], "name": name, "spans": None,
                "per_iter": None, "error": None}
        with attachment_file(name, blob) as path:
            try:
                spans, meta = traces.load(path)
                item["spans"], item["meta"] = spans, meta
                item["per_iter"] = phases.iterations(spans)
            except Exception as exc:  # TraceError / PhaseError: shown in the tables, never fatal
                item["error"] = f"{type(exc).__name__}: {exc}"
        out.append(item)
    return tuple(out)


def phase_table(profiles: list[dict], skip_first: int = 3) -> pd.DataFrame:
    """One row per (capture, phase): median us, share of the iteration, p10/p90."""
    from workbench.traces import phases

    rows = []
    for p in profiles:
        key = {"source": p["source"], "via": p["via"], "n": p["n"], "c": p["c"], "w": p["w"]}
        if p["per_iter"] is None:
            rows.append(key | {"phase": "unavailable", "median_us": float("nan"), "share_pct": float("nan"),
                               "p10_us": float("nan"), "p90_us": float("nan"), "iterations": 0,
                               "note": p["error"]})
            continue
        summ = phases.summarize(p["per_iter"], skip_first=min(skip_first, max(len(p["per_iter"]) - 1, 0)))
        for r in summ.to_dict("records"):
            rows.append(key | r | {"iterations": summ.attrs.get("iterations", 0),
                                   "note": DESCRIPTIONS.get(r["phase"], "median iteration time")})
    return pd.DataFrame(rows)


def compute_us(phase_df: pd.DataFrame) -> dict[tuple[int, int, int], tuple[float, str]]:
    """(n, c, w) -> (median dispatch compute us, source).

    Preference (later wins): Tracy of the Python path, Tracy of iree-benchmark-module, then
    ireeperf, the lightest profiler (Tracy's zones slow every dispatch down).
    """
    out: dict[tuple[int, int, int], tuple[float, str]] = {}
    if phase_df.empty:
        return out
    d = phase_df[phase_df["phase"] == "dispatch compute"]
    for source, via in (("tracy", VIA["python"]), ("tracy", VIA["bench"]), ("ireeperf", VIA["bench"])):
        for r in d[(d["source"] == source) & (d["via"] == via)].itertuples():
            out[(int(r.n), int(r.c), int(r.w))] = (float(r.median_us), source)
    return out


def timeline_table(profiles: list[dict], max_rows_per_capture: int = 400) -> pd.DataFrame:
    """Key spans (see :func:`_key_spans`) of the median steady-state iteration of each capture,
    times relative to the iteration's start."""
    frames = []
    for p in profiles:
        if p["per_iter"] is None or p["spans"] is None:
            continue
        t0, t1 = steady_window(p)
        s = _key_spans(p["spans"], p["source"])
        win = s[(s["start_ns"] + s["dur_ns"] >= t0) & (s["start_ns"] <= t1)].head(max_rows_per_capture)
        names = win["name"].astype(str)
        role = np.where(names.str.contains("_dispatch_") | (win["category"].astype(str) == "dispatch"), "dispatch",
                        np.where(names.str.contains("wait", case=False), "wait", "runtime"))
        frames.append(pd.DataFrame({
            "capture": capture_label(p), "source": p["source"], "via": p["via"], "c": p["c"], "w": p["w"],
            "track": win["track"].astype(str), "name": win["name"].astype(str),
            "category": win["category"].astype(str), "depth": win["depth"].astype("Int64"),
            "kind": win["kind"].astype(str), "role": role,
            "start_us": (win["start_ns"].clip(lower=t0) - t0) / 1e3,
            "end_us": (win["start_ns"].clip(lower=t0) - t0 + win["dur_ns"]).clip(upper=t1 - t0) / 1e3,
            "iteration_us": (t1 - t0) / 1e3,
        }))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["capture", "source", "via", "c", "w", "track", "name", "category", "depth", "kind", "role", "start_us",
                 "end_us", "iteration_us"])


def capture_label(p: dict) -> str:
    return f"{p['source']} c={p['c']} w={p['w']} ({'python' if 'Python' in p['via'] else 'bench'})"


def steady_window(p: dict) -> tuple[int, int]:
    """(start_ns, end_ns) of the median iteration after the first few (warm-up) iterations."""
    from workbench.traces import phases

    per_iter = p["per_iter"].iloc[3:] if len(p["per_iter"]) > 4 else p["per_iter"]
    return phases.iteration_window(p["spans"], per_iter)


def _key_spans(spans: pd.DataFrame, source: str) -> pd.DataFrame:
    """The spans the seed's picture shows: the main thread's phases and the dispatch shards.

    Tracy: the main thread's HAL calls (the level of ``iree_hal_device_queue_execute``:
    semaphore/fence create, alloca, execute, fence await, buffer view) and every dispatch zone
    on the workers; ireeperf: dispatch spans and command
    regions (it has no per-thread lanes).
    """
    names = spans["name"].astype(str)
    is_dispatch = names.str.contains("_dispatch_") | (spans["category"].astype(str) == "dispatch")
    if source == "tracy":
        inv = spans[names == "iree_vm_invoke"]
        if len(inv):
            main = inv["track"].iloc[0]
            qexec = spans[(names == "iree_hal_device_queue_execute") & (spans["track"] == main)]
            level = int(qexec["depth"].min()) if len(qexec) else int(inv["depth"].min()) + 1
            on_main = (spans["track"] == main) & (spans["depth"] == level)
            return spans[on_main | (is_dispatch & (spans["track"] != main))]
        return spans[is_dispatch]
    return spans[is_dispatch | spans["track"].astype(str).str.contains("command regions")]


def ascii_timeline(p: dict, width: int = 72) -> str:
    """The seed's per-thread picture of the median iteration of one capture (T1..Tn lanes)."""
    from workbench.traces.export import ascii_timeline as draw

    t0, t1 = steady_window(p)
    spans = _key_spans(p["spans"], p["source"])
    dispatch_names = sorted({n for n in spans["name"].astype(str).unique() if "_dispatch_" in n})
    short = {n: "D" + n.split("_dispatch_")[1].split("_")[0] for n in dispatch_names}
    lanes = [f"T{i + 1}" for i in range(len(spans["track"].cat.categories))]
    return draw(spans, start_ns=t0, end=t1, width=width, names=short, track_labels=lanes)
