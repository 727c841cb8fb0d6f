"""GPU-time breakdown and compute/communication overlap, for any span table with GPU work.

GPU work is the spans of category ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` (every
importer names them so), plus the categories a caller maps with ``roles`` (per-program
records of a fused kernel: the ag-gemm study maps its ``fetch`` lanes to communication and
its ``gemm`` lanes to computation). Annotation ranges (``gpu_user_annotation``, NVTX, roctx),
host calls and synchronisation waits are never GPU work. Each span of GPU work gets one type
(:func:`classify`):

- **communication**: the user's ``comm`` pattern first (a custom all-to-all), then the
  built-in :data:`COMM_RULES` (NCCL/RCCL/MSCCL kernels, DeepEP's expert-parallel
  dispatch/combine, PyTorch symmetric-memory and NVSHMEM kernels, custom all-reduce kernels,
  peer-to-peer copies on the copy engines). When none of them finds any communication but
  kernel names look like it (``dispatch``, ``combine``, ``all_gather``...),
  :func:`suggest_comm` says how many and offers a pattern for them;
- **fused**: kernels that communicate and compute inside one launch (:data:`FUSED_RULES`);
  from a kernel-level trace their inner overlap is unknown, so they count in neither
  computation nor communication. Per-program records of such a kernel (``roles``) show it;
- **memory**: copies and memsets within a device;
- **computation**: every other kernel.

Figures per rank and device, each the length of a union of intervals (never a sum of span
durations, which double-counts concurrent streams): ``total`` (first GPU work start to last
end), ``busy`` (any GPU work), ``idle`` (total minus busy), ``computation``, ``communication``,
``memory``, ``fused``; ``comm_hidden`` = communication ∩ computation, ``overlap_pct`` = hidden /
communication (the share of communication hidden under computation: Holistic Trace Analysis's
``comp_comm_overlap_pctg``), ``comp_overlapped_pct`` = hidden / computation (the converse).
All of them come from one sweep over the merged intervals of each type (:func:`_sweep`),
which also gives the exclusive states (:func:`states`: "computation only", "computation +
communication", ...: what HTA's kernel-type breakdown lists) and the state timeline
(:func:`state_spans`).

Per step (:func:`steps`): GPU work belongs to the step (``ProfilerStep#N`` from a profiler
schedule, or a host range named ``step``/``iteration``) whose host range launched it (the
runtime call with the same correlation id starts inside it), else the step whose host range
its own start falls in; :func:`step_summary` gives each figure's median over steps and its
95% bootstrap CI over steps (step-to-step variation within one run: not run-to-run).
"""

from __future__ import annotations

import json
import re
from typing import Mapping

import numpy as np
import pandas as pd

from ..evidence import stats
from ..evidence.tables import render
from ..base.untrusted import PatternError, escape, user_regex
from .analysis import STEP_NAMES, merged_intervals
from .model import KERNEL, from_columns

#: the types of GPU work, in the order of their bits in the sweep's state masks
TYPES = ("computation", "communication", "memory", "fused")
COMP, COMM, MEM, FUSED = (1 << i for i in range(len(TYPES)))
#: categories that are GPU work whatever their name
WORK_CATEGORIES = (KERNEL, "gpu_memcpy", "gpu_memset")
#: host categories of runtime calls (their correlation ids link a kernel to its launch)
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "hip_api", "hsa_api")
#: host categories that can carry step ranges
STEP_CATEGORIES = ("user_annotation", "nvtx", "marker")

#: built-in communication rules (searched in kernel and copy names; the first match names it)
COMM_RULES: dict[str, str] = {
    # NCCL and RCCL kernels (ncclKernel_*, ncclDevKernel_*; RCCL keeps NCCL's names), MSCCL, MSCCL++
    "NCCL/RCCL/MSCCL": r"^(?:void\s+)?(?:nccl|rccl|msccl)",
    # DeepEP's expert-parallel all-to-all (intranode over NVLink, internode over NVSHMEM/IBGDA):
    # deep_ep::intranode::dispatch, dpsk::ep::internode::combine (DeepSeek's own builds), ...
    "DeepEP": r"\b(?:deep_ep|dpsk::ep)::",
    # PyTorch symmetric memory (one/two-shot and multimem all-reduce, all-gather, barriers), NVSHMEM
    "symmetric memory": r"c10d::symmetric_memory::|\bnvshmemi?_|\bnvshmem::",
    # custom all-reduce kernels over peer memory: vLLM/SGLang's cross_device_reduce, TensorRT-LLM's
    "custom all-reduce": r"\bcross_device_reduce|\b(?:one|two)ShotAllReduce|\ballreduce_fusion_kernel",
    # copies between devices on the copy engines (Kineto, nsys and rocprof name them "Memcpy PtoP")
    "peer-to-peer copy": r"^Memcpy PtoP",
    # TransformerEngine's userbuffers (tensor-parallel comm overlap) communication kernels
    "userbuffers": r"\buserbuffers_",
}
#: known fused communication + computation kernels (their inner overlap needs per-program records)
FUSED_RULES: dict[str, str] = {
    "ag-gemm hbm-buffer (this workbench)": r"\bag_gemm_hbm_kernel\b",
    "Flux": r"\bflux::",
}
_COMM = re.compile("|".join(f"(?:{p})" for p in COMM_RULES.values()))
_FUSED = re.compile("|".join(f"(?:{p})" for p in FUSED_RULES.values()))

#: kernel names that look like communication (searched case-insensitively) when no rule found any:
#: :func:`suggest_comm` offers them, it never counts them by itself
LOOKS_LIKE_COMM = ("dispatch", "combine", "all_?gather", "all_?reduce", "reduce_?scatter", "all_?to_?all", "a2a",
                   "send", "recv", "broadcast", "barrier")
_LOOKS = re.compile("|".join(f"({w})" for w in LOOKS_LIKE_COMM), re.I)

#: figures of :func:`breakdown` (and per step), in output order
FIGURES = ("total_us", "busy_us", "idle_us", "computation_us", "communication_us", "memory_us", "fused_us",
           "comm_hidden_us", "comm_exposed_us", "overlap_pct", "comp_overlapped_pct", "idle_pct")


#: steps needed for a CI over steps (with fewer, the bootstrap only restates the values)
MIN_STEPS_FOR_CI = 3


class OverlapError(ValueError):
    """A breakdown that cannot be computed as asked (a bad pattern); one line."""


def comm_pattern(comm: str | None):
    """The user's communication pattern, compiled for a linear-time engine
    (:func:`workbench.base.untrusted.user_regex`); raises :class:`OverlapError` for a bad one."""
    if not comm:
        return None
    try:
        return user_regex(comm, "--comm")
    except PatternError as exc:
        raise OverlapError(str(exc)) from None


def classify(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None) -> pd.Categorical:
    """The type of GPU work of each row (:data:`TYPES`), missing for everything else.

    ``comm``: a regular expression (searched in names) that makes GPU work communication,
    before every built-in rule. ``roles``: category -> type for per-program records.
    Rules run once per distinct name, not per row.
    """
    user = comm_pattern(comm)
    roles = dict(roles or {})
    bad = set(roles.values()) - set(TYPES)
    if bad:
        raise OverlapError(f"unknown types in roles: {sorted(bad)} (use {', '.join(TYPES)})")
    code = {t: i for i, t in enumerate(TYPES)}
    names = df["name"].cat.categories
    by_rule = {"user": 1, "communication": 1, "fused": 3}
    name_type = np.array([by_rule.get(_name_type(str(n), user), -1) for n in names] + [-1], dtype=np.int8)
    name_of = name_type[df["name"].cat.codes.to_numpy()]  # -1 (missing name) -> -1
    comm_hit = name_of == code["communication"]
    cats = list(df["category"].cat.categories)
    cat_codes = df["category"].cat.codes.to_numpy()
    span = (df["kind"] == "span").to_numpy()

    def of(*wanted: str) -> np.ndarray:
        return span & np.isin(cat_codes, [i for i, c in enumerate(cats) if c in wanted])

    out = np.full(len(df), -1, dtype=np.int8)
    kernel = of(KERNEL)
    out[kernel] = np.where(name_of[kernel] == code["fused"], code["fused"],
                           np.where(comm_hit[kernel], code["communication"], code["computation"]))
    copies = of("gpu_memcpy", "gpu_memset")
    out[copies] = np.where(comm_hit[copies], code["communication"], code["memory"])
    for c, t in roles.items():  # per-program records: the caller's types win
        out[of(c)] = code[t]
    return pd.Categorical.from_codes(out, categories=list(TYPES))


def _name_type(name: str, user) -> str | None:
    """A name's type by the rules: "user" (the user's pattern), a built-in type, or None."""
    if user is not None and user.search(name):
        return "user"
    if _COMM.search(name):
        return "communication"
    if _FUSED.search(name):
        return "fused"
    return None


def _work(df: pd.DataFrame, comm: str | None, roles: Mapping[str, str] | None, per_device: bool = True
          ) -> pd.DataFrame:
    """The GPU work rows with ``type`` and the group columns (rank and device, NA as -1;
    every device as -1 when not ``per_device``)."""
    types = classify(df, comm, roles)
    keep = ~pd.isna(types)
    w = df.loc[keep, ["rank", "device", "name", "start_ns", "dur_ns", "correlation"]].copy()
    w["type"] = types[keep]
    w["rank"] = w["rank"].fillna(-1).astype(np.int64)
    w["device"] = w["device"].fillna(-1).astype(np.int64) if per_device else np.int64(-1)
    return w


def _sweep(group: np.ndarray, type_code: np.ndarray, start: np.ndarray, end: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """State segments of every group: ``(group, start, end, state)``, where ``state`` is the
    bitmask of the types running (bit i: ``TYPES[i]``; 0: idle) over [start, end), tiling each
    group from its first start to its last end.

    The intervals of each (group, type) are merged first, so each type's bit is set at most
    once at any time; a running sum of +bit at each merged start and -bit at each end, in
    time order per group, is then the state. Each group's sum returns to 0 at its last end,
    so one cumulative sum over all groups (sorted by group, then time) serves every group.
    """
    n_types = np.int64(len(TYPES))
    k, s, e = merged_intervals(group * n_types + type_code, start, end)
    g, bit = k // n_types, np.left_shift(1, k % n_types)
    t = np.r_[s, e]
    delta = np.r_[bit, -bit]
    gg = np.r_[g, g]
    order = np.lexsort((t, gg))
    t, delta, gg = t[order], delta[order], gg[order]
    state = np.cumsum(delta)
    same = gg[1:] == gg[:-1]  # a segment runs to the group's next event
    return gg[:-1][same], t[:-1][same], t[1:][same], state[:-1][same]


def _type_code(types: pd.Series) -> np.ndarray:
    """Index of each row's type in :data:`TYPES` (its bit in the state masks)."""
    return pd.Categorical(types, categories=list(TYPES)).codes.astype(np.int64)


def _figures(seg_group: np.ndarray, seg_len: np.ndarray, seg_state: np.ndarray, n_groups: int) -> dict[str, np.ndarray]:
    """The breakdown's figures (ns and %) per group from its state segments."""
    def where(mask: np.ndarray) -> np.ndarray:
        return np.bincount(seg_group[mask], weights=seg_len[mask], minlength=n_groups)

    total = np.bincount(seg_group, weights=seg_len, minlength=n_groups)
    busy = where(seg_state > 0)
    comp, comm = where((seg_state & COMP) > 0), where((seg_state & COMM) > 0)
    hidden = where(((seg_state & COMP) > 0) & ((seg_state & COMM) > 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = lambda a, b: np.where(b > 0, 100.0 * a / np.where(b > 0, b, 1), np.nan)  # noqa: E731
        return {"total_us": total / 1e3, "busy_us": busy / 1e3, "idle_us": (total - busy) / 1e3,
                "computation_us": comp / 1e3, "communication_us": comm / 1e3,
                "memory_us": where((seg_state & MEM) > 0) / 1e3, "fused_us": where((seg_state & FUSED) > 0) / 1e3,
                "comm_hidden_us": hidden / 1e3, "comm_exposed_us": (comm - hidden) / 1e3,
                "overlap_pct": pct(hidden, comm), "comp_overlapped_pct": pct(hidden, comp),
                "idle_pct": pct(total - busy, total)}


def _grouped(w: pd.DataFrame, by: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct groups (sorted) and each row's group code."""
    code = w.groupby(by, sort=True, observed=True).ngroup().to_numpy(np.int64)
    keys = w[by].drop_duplicates().sort_values(by, kind="stable").reset_index(drop=True)
    return keys, code


def _table(w: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    keys, code = _grouped(w, by)
    st = w["start_ns"].to_numpy()
    g, s, e, state = _sweep(code, _type_code(w["type"]), st, st + w["dur_ns"].to_numpy())
    fig = _figures(g, (e - s).astype(np.float64), state, len(keys))
    spans_per = np.bincount(code, minlength=len(keys))
    return keys.assign(spans=spans_per, **fig)


def _labels(t: pd.DataFrame) -> pd.DataFrame:
    """Rank and device back to nullable integers (-1 meant missing)."""
    for c in ("rank", "device"):
        if c in t:
            t[c] = t[c].astype("Int64").mask(t[c] < 0)
    return t


def has_gpu_work(df: pd.DataFrame, roles: Mapping[str, str] | None = None) -> bool:
    """Whether the table has any GPU work to break down."""
    cats = set(WORK_CATEGORIES) | set(roles or {})
    return bool((df["category"].isin(list(cats)) & (df["kind"] == "span")).any())


def breakdown(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
              per_device: bool = True) -> pd.DataFrame:
    """The GPU-time breakdown per rank and device (see the module docstring).

    Columns: ``rank, device`` (NA where the trace has none, and every device's when not
    ``per_device``: the union over a rank's devices, as HTA computes it), ``spans`` (GPU
    work spans), then :data:`FIGURES` (times in us; ``overlap_pct`` NaN without
    communication, ``comp_overlapped_pct`` NaN without computation). One row per group
    with GPU work.
    """
    return _breakdown(_work(df, comm, roles, per_device))


def _breakdown(w: pd.DataFrame) -> pd.DataFrame:
    if w.empty:
        return pd.DataFrame(columns=["rank", "device", "spans", *FIGURES])
    return _labels(_table(w, ["rank", "device"]))


#: the exclusive parts of :func:`temporal`, by priority: a moment with computation running is
#: computation, else fused, else communication, else memory; nothing running is idle
TEMPORAL = ("computation", "fused", "communication", "memory", "idle")


def temporal(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
             per_device: bool = True) -> pd.DataFrame:
    """Where each rank's GPU time goes, in parts that tile its total: columns ``rank, device,
    total_us``, then per part of :data:`TEMPORAL` its time (``computation_us``, ...,
    ``idle_us``) and share of the total (``computation_pct``, ...).

    ``computation_us``, ``idle_us`` and ``total_us`` are Holistic Trace Analysis's
    ``get_temporal_breakdown`` compute, idle and kernel time; its non-compute time is the sum of
    fused, communication and memory (``per_device=False``: the union over a rank's GPUs, as HTA
    computes it; the same for one GPU per rank).
    """
    cols = ["rank", "device", "total_us", *[f"{p}_us" for p in TEMPORAL], *[f"{p}_pct" for p in TEMPORAL]]
    w = _work(df, comm, roles, per_device)
    if w.empty:
        return pd.DataFrame(columns=cols)
    keys, code = _grouped(w, ["rank", "device"])
    st = w["start_ns"].to_numpy()
    g, s, e, state = _sweep(code, _type_code(w["type"]), st, st + w["dur_ns"].to_numpy())
    part = np.full(len(state), len(TEMPORAL) - 1)  # idle unless a type runs
    for i, bit in reversed(list(enumerate((COMP, FUSED, COMM, MEM)))):  # the highest priority wins
        part[(state & bit) > 0] = i
    ns = np.zeros((len(keys), len(TEMPORAL)))
    np.add.at(ns, (g, part), (e - s).astype(np.float64))
    total = ns.sum(axis=1)
    out = keys.assign(total_us=total / 1e3)
    for i, name in enumerate(TEMPORAL):
        out[f"{name}_us"] = ns[:, i] / 1e3
    with np.errstate(invalid="ignore", divide="ignore"):
        for i, name in enumerate(TEMPORAL):
            out[f"{name}_pct"] = np.where(total > 0, 100.0 * ns[:, i] / np.where(total > 0, total, 1), np.nan)
    return _labels(out)[cols]


def comm_overlap(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
                 per_device: bool = True) -> pd.DataFrame:
    """Communication against computation per rank and device: columns ``rank, device,
    communication_us, computation_us, comm_hidden_us`` (communication ∩ computation),
    ``comm_exposed_us``, ``overlap_pct`` (hidden / communication: Holistic Trace Analysis's
    ``comp_comm_overlap_pctg``, NaN without communication) and ``comp_overlapped_pct``
    (hidden / computation)."""
    cols = ["rank", "device", "communication_us", "computation_us", "comm_hidden_us", "comm_exposed_us",
            "overlap_pct", "comp_overlapped_pct"]
    b = breakdown(df, comm, roles, per_device)
    return b[cols].reset_index(drop=True) if len(b) else pd.DataFrame(columns=cols)


def kernels(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Every kernel, copy and memset name per rank, device and type: columns ``rank, device,
    type, name, count, total_us, self_us`` (the same: GPU work does not nest), ``mean_us,
    std_us`` (sample standard deviation, 0 for one span), ``min_us, max_us, share_pct`` (of the
    type's summed time on that rank and device), most time first within each type. Holistic
    Trace Analysis's ``get_gpu_kernel_breakdown`` lists the same per name, its smaller names
    folded into "others"; :func:`top_kernels` folds them the same way."""
    cols = ["rank", "device", "type", "name", "count", "total_us", "self_us", "mean_us", "std_us", "min_us", "max_us",
            "share_pct"]
    w = _work(df, comm, roles)
    if w.empty:
        return pd.DataFrame(columns=cols)
    g = w.groupby(["rank", "device", "type", "name"], observed=True, sort=False)["dur_ns"]
    t = g.agg(count="count", total_ns="sum", mean_ns="mean", std_ns="std", min_ns="min", max_ns="max").reset_index()
    t["std_ns"] = t["std_ns"].fillna(0.0)
    t["type"] = t["type"].astype(str)
    t["name"] = t["name"].astype(str)
    t = t.sort_values(["rank", "device", "type", "total_ns"], ascending=[True, True, True, False], kind="stable")
    type_ns = t.groupby(["rank", "device", "type"])["total_ns"].transform("sum")
    for c in ("total", "mean", "std", "min", "max"):
        t[f"{c}_us"] = t.pop(f"{c}_ns") / 1e3
    t["self_us"] = t["total_us"]
    t["share_pct"] = 100.0 * t["total_us"] * 1e3 / type_ns.where(type_ns > 0, 1)
    return _labels(t.reset_index(drop=True))[cols]


def suggest_comm(df: pd.DataFrame, comm: str | None = None) -> dict | None:
    """When the rules (and ``comm``) find no communication but kernels are named like it
    (:data:`LOOKS_LIKE_COMM`): ``{"pattern", "kernels", "names", "words", "examples"}``, the
    pattern that would count them (case-insensitive), how many kernel spans and distinct
    names it matches, the words found and up to three names. None otherwise."""
    types = classify(df, comm)
    if (np.asarray(types) == "communication").any():
        return None
    kern = (df["category"] == KERNEL).to_numpy() & (df["kind"] == "span").to_numpy()
    names = np.asarray(df["name"].cat.categories, dtype=object)
    words_of = {}
    for i, n in enumerate(names):
        found = {m.lastgroup or next(w for w, g in zip(LOOKS_LIKE_COMM, m.groups()) if g)
                 for m in _LOOKS.finditer(str(n))}
        if found:
            words_of[i] = found
    if not words_of:
        return None
    codes = df["name"].cat.codes.to_numpy()
    hit = kern & np.isin(codes, list(words_of))
    if not hit.any():
        return None
    used = sorted(set(codes[hit].tolist()))
    words = sorted({w for i in used for w in words_of[i]}, key=LOOKS_LIKE_COMM.index)
    by_count = pd.Series(codes[hit]).value_counts()
    return {"pattern": "(?i)" + "|".join(words), "kernels": int(hit.sum()), "names": len(used),
            "words": [w.replace("_?", "_") for w in words],
            "examples": [str(names[i]) for i in by_count.index[:3]]}


def states(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Exclusive GPU time per rank and device: how long each combination of types ran
    ("computation", "computation + communication", ..., and "idle"), with its share of the
    total. Columns: ``rank, device, state, time_us, share_pct``; the states of one group
    tile its total, so the shares add to 100."""
    return _states(_work(df, comm, roles))


def _states(w: pd.DataFrame) -> pd.DataFrame:
    if w.empty:
        return pd.DataFrame(columns=["rank", "device", "state", "time_us", "share_pct"])
    keys, code = _grouped(w, ["rank", "device"])
    st = w["start_ns"].to_numpy()
    g, s, e, state = _sweep(code, _type_code(w["type"]), st, st + w["dur_ns"].to_numpy())
    t = pd.DataFrame({"g": g, "state": state, "ns": e - s}).groupby(["g", "state"], as_index=False)["ns"].sum()
    t = t[t["ns"] > 0]
    total = t.groupby("g")["ns"].transform("sum")
    out = keys.iloc[t["g"].to_numpy()].reset_index(drop=True)
    out["state"] = [state_name(int(m)) for m in t["state"]]
    out["time_us"] = t["ns"].to_numpy() / 1e3
    out["share_pct"] = 100.0 * t["ns"].to_numpy() / total.to_numpy()
    return _labels(out.sort_values(["rank", "device", "time_us"], ascending=[True, True, False],
                                   kind="stable").reset_index(drop=True))


def state_name(mask: int) -> str:
    """"computation + communication" for a bitmask of :data:`TYPES` ("idle" for 0)."""
    return " + ".join(t for i, t in enumerate(TYPES) if mask & (1 << i)) or "idle"


def top_kernels(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
                top: int = 5) -> pd.DataFrame:
    """Per rank, device and type, the ``top`` names by summed duration and one row for the
    rest ("others (n names)"). Columns: ``rank, device, type, name, count, total_us,
    mean_us, share_pct`` (share of the type's summed span time on that device)."""
    return _top_kernels(_work(df, comm, roles), top)


def _top_kernels(w: pd.DataFrame, top: int) -> pd.DataFrame:
    cols = ["rank", "device", "type", "name", "count", "total_us", "mean_us", "share_pct"]
    if w.empty:
        return pd.DataFrame(columns=cols)
    g = w.groupby(["rank", "device", "type", "name"], observed=True)["dur_ns"].agg(count="count", total_ns="sum")
    g = g.reset_index()
    g["name"] = g["name"].astype(str)  # the names that ran, not the table's every category
    g = g.sort_values(["rank", "device", "type", "total_ns"], ascending=[True, True, True, False],
                                    kind="stable")
    g["pos"] = g.groupby(["rank", "device", "type"], observed=True).cumcount()
    rest = g[g["pos"] >= top]
    kept = g[g["pos"] < top].drop(columns="pos")
    if len(rest):
        others = rest.groupby(["rank", "device", "type"], observed=True).agg(
            count=("count", "sum"), total_ns=("total_ns", "sum"), names=("name", "size")).reset_index()
        others["name"] = [f"others ({n} names)" for n in others.pop("names")]
        kept = pd.concat([kept, others], ignore_index=True).sort_values(["rank", "device", "type"], kind="stable")
    kept["type_ns"] = kept.groupby(["rank", "device", "type"], observed=True)["total_ns"].transform("sum")
    kept["total_us"] = kept["total_ns"] / 1e3
    kept["mean_us"] = kept["total_us"] / kept["count"]
    kept["share_pct"] = 100.0 * kept["total_ns"] / kept["type_ns"]
    kept["type"] = kept["type"].astype(str)
    return _labels(kept[cols].reset_index(drop=True))


def _step_of(df: pd.DataFrame, w: pd.DataFrame, step: str) -> tuple[np.ndarray, pd.DataFrame]:
    """Each GPU work row's step index (-1: none) and the steps (``rank, step, name,
    start_ns, end_ns``) per rank, in time order."""
    cat = df["category"]
    host = df[cat.isin(STEP_CATEGORIES) & (df["kind"] == "span")]
    host = host[host["name"].astype(str).str.match(step)]
    steps = pd.DataFrame({"rank": host["rank"].fillna(-1).astype(np.int64).to_numpy(),
                          "name": host["name"].astype(str).to_numpy(), "start_ns": host["start_ns"].to_numpy(),
                          "end_ns": (host["start_ns"] + host["dur_ns"]).to_numpy()})
    steps = steps.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    steps["step"] = steps.groupby("rank").cumcount()
    out = np.full(len(w), -1, dtype=np.int64)
    if steps.empty:
        return out, steps
    calls = df.loc[cat.isin(RUNTIME_CATEGORIES) & df["correlation"].notna(), ["rank", "start_ns", "correlation"]]
    for rank, st in steps.groupby("rank"):
        s0, s1 = st["start_ns"].to_numpy(), st["end_ns"].to_numpy()

        def inside(t: np.ndarray) -> np.ndarray:  # the step whose host range holds t, else -1
            i = np.searchsorted(s0, t, side="right") - 1
            ok = (i >= 0) & (t < s1[np.maximum(i, 0)])
            return np.where(ok, st.index.to_numpy()[np.maximum(i, 0)], -1)

        mine = (w["rank"] == rank).to_numpy()
        c = calls[calls["rank"].fillna(-1).astype(np.int64) == rank]
        by_corr = pd.Series(inside(c["start_ns"].to_numpy()), index=c["correlation"].to_numpy(dtype=np.int64))
        by_corr = by_corr[~by_corr.index.duplicated()]
        corr = w.loc[mine, "correlation"]
        via_call = by_corr.reindex(corr.fillna(-1).to_numpy(dtype=np.int64)).fillna(-1).to_numpy(np.int64)
        out[mine] = np.where(via_call >= 0, via_call, inside(w.loc[mine, "start_ns"].to_numpy()))
    return out, steps


def steps(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
          step: str = STEP_NAMES) -> pd.DataFrame:
    """The breakdown of each step (see the module docstring): columns ``rank, device, step``
    (0, 1, ... per rank), ``name`` (the step's range, e.g. ``ProfilerStep#12``), ``spans``
    and :data:`FIGURES`; ``total_us`` runs from the step's first GPU work start to its last
    end. Empty when the trace has no steps."""
    return _steps(df, _work(df, comm, roles), step)


def _steps(df: pd.DataFrame, w: pd.DataFrame, step: str) -> pd.DataFrame:
    cols = ["rank", "device", "step", "name", "spans", *FIGURES]
    if w.empty:
        return pd.DataFrame(columns=cols)
    idx, st = _step_of(df, w, step)
    w = w[idx >= 0].assign(step=st["step"].to_numpy()[idx[idx >= 0]], name=st["name"].to_numpy()[idx[idx >= 0]])
    if w.empty:
        return pd.DataFrame(columns=cols)
    w = w.drop(columns="correlation")
    out = _table(w.rename(columns={"name": "step_name"}), ["rank", "device", "step", "step_name"])
    return _labels(out.rename(columns={"step_name": "name"})[cols])


def step_summary(per_step: pd.DataFrame, figures: tuple[str, ...] = FIGURES) -> pd.DataFrame:
    """Each figure's distribution over steps per rank and device: columns ``rank, device,
    figure, steps, median, ci_lo, ci_hi, min, max`` (the CI: 95% bootstrap of the median
    over steps, NaN below :data:`MIN_STEPS_FOR_CI` steps; step-to-step variation of one
    run, not run-to-run)."""
    rows = []
    if per_step.empty:
        return pd.DataFrame(columns=["rank", "device", "figure", "steps", "median", "ci_lo", "ci_hi", "min", "max"])
    for (rank, device), g in per_step.groupby(["rank", "device"], dropna=False, sort=True):
        for f in figures:
            x = g[f].dropna().to_numpy(dtype=float)
            # fewer than MIN_STEPS_FOR_CI steps: the "interval" would only restate them
            lo, hi = stats.median_ci(x) if len(x) >= MIN_STEPS_FOR_CI else (np.nan, np.nan)
            rows.append({"rank": rank, "device": device, "figure": f, "steps": len(x),
                         "median": float(np.median(x)) if len(x) else np.nan, "ci_lo": lo, "ci_hi": hi,
                         "min": float(x.min()) if len(x) else np.nan, "max": float(x.max()) if len(x) else np.nan})
    return pd.DataFrame(rows)


def state_spans(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None,
                track: str = "GPU time") -> pd.DataFrame:
    """The state timeline as a span table (one lane per rank and device: ``"<track> rank 0
    GPU 1"``, spans named by their state, idle included), for the timeline view."""
    w = _work(df, comm, roles)
    if w.empty:
        return from_columns({"start_ns": np.zeros(0, np.int64), "dur_ns": np.zeros(0, np.int64)}, n=0,
                            source="overlap")
    keys, code = _grouped(w, ["rank", "device"])
    st = w["start_ns"].to_numpy()
    g, s, e, state = _sweep(code, _type_code(w["type"]), st, st + w["dur_ns"].to_numpy())
    # consecutive segments in the same state are one span
    new = np.ones(len(g), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (state[1:] != state[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(g) - 1]
    g, s, e, state = g[first], s[first], e[last], state[first]
    names = np.array([state_name(int(m)) for m in range(1 << len(TYPES))], dtype=object)[state]
    lanes = np.array([" ".join([track] + ([f"rank {r}"] if r >= 0 else []) + ([f"GPU {d}"] if d >= 0 else []))
                      for r, d in zip(keys["rank"], keys["device"])], dtype=object)
    rk = keys["rank"].to_numpy()[g]
    return from_columns({"track": lanes[g], "process": lanes[g], "name": names, "category": ["gpu state"] * len(g),
                         "start_ns": s, "dur_ns": e - s,
                         "rank": pd.arrays.IntegerArray(np.maximum(rk, 0).astype(np.int32), rk < 0)},
                        n=len(g), source="overlap", track_order=list(lanes))


def summary(df: pd.DataFrame, comm: str | None = None, roles: Mapping[str, str] | None = None, top: int = 5,
            step: str = STEP_NAMES) -> dict[str, pd.DataFrame]:
    """Every table of the breakdown, for the CLI, the page and reports: ``breakdown``,
    ``states``, ``top_kernels``, ``steps`` (per step) and ``step_summary`` (over steps)."""
    w = _work(df, comm, roles)  # classified once for all of them
    per_step = _steps(df, w, step)
    return {"breakdown": _breakdown(w), "states": _states(w), "top_kernels": _top_kernels(w, top), "steps": per_step,
            "step_summary": step_summary(per_step)}


def where(rank, device) -> str:
    """"rank 0 GPU 1" (parts that are missing left out; "GPU work" when both are)."""
    parts = ([] if pd.isna(rank) else [f"rank {int(rank)}"]) + ([] if pd.isna(device) else [f"GPU {int(device)}"])
    return " ".join(parts) or "GPU work"


#: how each surface names the communication pattern in a hint (a web page names no CLI flag)
COMM_HINT = {"cli": "--comm {pattern}", "python": "comm={pattern}", "page": "the communication field above"}


def headlines(tables: Mapping[str, pd.DataFrame], surface: str = "cli", suggestion: Mapping | None = None
              ) -> list[str]:
    """One line per rank and device: the overlap, and its median and CI over steps. Without
    communication, the line says so and how to name it on ``surface`` (:data:`COMM_HINT`),
    with ``suggestion`` (:func:`suggest_comm`): how many kernels look like communication."""
    out = []
    summ = tables["step_summary"]
    for r in tables["breakdown"].to_dict("records"):
        head = f"{where(r['rank'], r['device'])}: "
        if r["communication_us"] > 0:
            head += (f"{r['overlap_pct']:.1f}% of communication ({r['communication_us']:,.1f} us) hidden under "
                     f"computation")
            s = summ[(summ["figure"] == "overlap_pct") & _same(summ, r)] if len(summ) else summ
            if len(s) and s["steps"].iloc[0] > 0:
                s = s.iloc[0]
                ci = (f" [95% CI {s['ci_lo']:.1f}, {s['ci_hi']:.1f}]" if s["ci_lo"] == s["ci_lo"] else "")
                few = "" if ci else ", too few for a CI over steps"
                n = int(s["steps"])
                head += f" (per step: median {s['median']:.1f}%{ci} over {n} step{'s' if n != 1 else ''}{few})"
        else:
            head += "no known communication kernels found" + _hint(surface, suggestion)
        head += (f"; computation {r['computation_us']:,.1f} us; idle {r['idle_pct']:.1f}% of "
                 f"{r['total_us']:,.1f} us")
        if r["fused_us"] > 0:
            head += f"; fused comm+compute kernels {r['fused_us']:,.1f} us (their inner overlap is not in a kernel trace)"
        out.append(head)
    return out


def suggestion_text(suggestion: Mapping) -> str:
    """"96 kernels (4 names) look like communication (dispatch, combine)"."""
    n, k = suggestion["kernels"], suggestion["names"]
    return (f"{n:,} kernel{'s' if n != 1 else ''} ({k} name{'s' if k != 1 else ''}) look like communication "
            f"({', '.join(suggestion['words'])})")


def _hint(surface: str, suggestion: Mapping | None) -> str:
    if suggestion:
        pattern = repr(suggestion["pattern"])
        return f" but {suggestion_text(suggestion)}: count them with {COMM_HINT[surface].format(pattern=pattern)}" \
            if surface != "page" else f" but {suggestion_text(suggestion)}"
    return f" (name them with {COMM_HINT[surface].format(pattern='REGEX')})" if surface != "page" else \
        " (name them in the communication field above)"


def _same(t: pd.DataFrame, r: Mapping) -> pd.Series:
    """Rows of ``t`` of the rank and device of ``r`` (missing equals missing)."""
    m = pd.Series(True, index=t.index)
    for c in ("rank", "device"):
        m &= (t[c].isna() & pd.isna(r[c])) | (t[c] == r[c]).fillna(False)
    return m


def display(tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables as a person reads them (text and Markdown): where, times in us, shares."""
    b = tables["breakdown"]
    out = {"breakdown": pd.DataFrame({
        "where": [where(r, d) for r, d in zip(b["rank"], b["device"])], "total (us)": b["total_us"],
        "busy (us)": b["busy_us"], "idle %": b["idle_pct"], "computation (us)": b["computation_us"],
        "communication (us)": b["communication_us"], "memory (us)": b["memory_us"], "fused (us)": b["fused_us"],
        "comm hidden (us)": b["comm_hidden_us"], "comm hidden %": b["overlap_pct"],
        "comp under comm %": b["comp_overlapped_pct"]})}
    if not (b["fused_us"] > 0).any():
        out["breakdown"] = out["breakdown"].drop(columns="fused (us)")
    st = tables["states"]
    out["states"] = pd.DataFrame({"where": [where(r, d) for r, d in zip(st["rank"], st["device"])],
                                  "state": st["state"], "time (us)": st["time_us"], "share %": st["share_pct"]})
    tk = tables["top_kernels"]
    names = tk["name"].astype(str)
    out["top_kernels"] = pd.DataFrame({
        "where": [where(r, d) for r, d in zip(tk["rank"], tk["device"])], "type": tk["type"],
        "name": names.where(names.str.len() <= 70, names.str.slice(0, 69) + "…"), "count": tk["count"],
        "total (us)": tk["total_us"], "mean (us)": tk["mean_us"], "share of type %": tk["share_pct"]})
    ss = tables["step_summary"]
    ss = ss[ss["figure"].isin(("overlap_pct", "comp_overlapped_pct", "idle_pct", "computation_us",
                               "communication_us", "comm_exposed_us", "total_us"))]
    out["step_summary"] = pd.DataFrame({
        "where": [where(r, d) for r, d in zip(ss["rank"], ss["device"])], "figure": ss["figure"],
        "steps": ss["steps"], "median": ss["median"],
        "95% CI over steps": [f"[{lo:,.2f}, {hi:,.2f}]" if lo == lo else "-" for lo, hi in zip(ss["ci_lo"], ss["ci_hi"])],
        "min": ss["min"], "max": ss["max"]})
    return out


#: the definitions in a few lines (the CLI's text, reports and the page show them)
DEFINITIONS = ("Each figure is the length of a union of intervals of one rank's GPU (never a sum of kernel times): "
               "total = first GPU op start to last end; busy = any kernel, copy or memset; idle = total - busy; "
               "computation, communication and memory = the union of kernels of that type (NCCL/RCCL/MSCCL, DeepEP, "
               "symmetric-memory, NVSHMEM, custom all-reduce kernels and peer-to-peer copies are communication, "
               "plus the names given as communication); comm hidden = "
               "communication ∩ computation; comm hidden % = hidden / communication (HTA's overlap); comp under "
               "comm % = hidden / computation. Annotation ranges are never GPU work.")


def to_json(tables: Mapping[str, pd.DataFrame]) -> dict:
    """The tables as JSON-ready records (missing values as null)."""
    return {k: json.loads(t.to_json(orient="records")) for k, t in tables.items()}


def markdown(tables: Mapping[str, pd.DataFrame], title: str = "GPU-time breakdown and overlap",
             suggestion: Mapping | None = None) -> str:
    """The breakdown as GitHub Markdown (an issue or a report section): headlines, the
    definitions, the breakdown and per-step tables, the states and the top kernels."""
    shown = display(tables)
    parts = [f"### {escape(title, 'text')}", "",
             *[f"- {escape(h, 'text')}" for h in headlines(tables, suggestion=suggestion)], "",
             DEFINITIONS, "", render(shown["breakdown"], "markdown")]
    if len(shown["step_summary"]):
        parts += ["", "Per step (median over steps, 95% bootstrap CI over steps: the variation between steps of "
                      "this run, not between runs):", "", render(shown["step_summary"], "markdown")]
    parts += ["", "Exclusive states (they tile the total):", "", render(shown["states"], "markdown"),
              "", "Top kernels per type:", "", render(shown["top_kernels"], "markdown")]
    return "\n".join(parts)
