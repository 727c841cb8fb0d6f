"""Per-program trace of the fused kernel -> span table (one lane per SM).

The kernel writes one record per schedule row (see ``kernels.triton.ag_gemm``): role, ticket,
SM id, start, ready, end in global-timer ns, followed (format version 2) by the row itself:
source rank, M-tile, N-tile or k-group, k-range. A fetch row becomes one ``fetch`` span; a
GEMM row becomes a ``wait`` span (start -> its flags seen; empty for local tiles) and a
``gemm`` span (ready -> end). Version-1 records (the kernel before its ticket queue) carry no
row: their task indices are decoded with ``HbmLayout``. Times are rebased to the first task's start (the global
timer's epoch means nothing across machines); ``args`` keeps the decoded tile indices.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from workbench.traces.model import from_records

SOURCE = "ag-gemm-programs"
ATTACH_KIND = "trace/ag-gemm-programs-json"
#: what each program role is for the GPU-time breakdown (workbench.traces.overlap): a fetch
#: moves a peer's tile (communication), a GEMM row computes; waits on flags are neither
ROLES = {"fetch": "communication", "gemm": "computation"}


TIMES = ["role", "ticket", "smid", "start_ns", "ready_ns", "end_ns"]


def encode(records, layout: dict[str, Any], rank: int, meta: dict[str, Any]) -> bytes:
    """The attachment: the raw records plus what is needed to decode them."""
    from kernels.triton.ag_gemm import ITEM_FIELDS

    records = [list(map(int, r)) for r in records]
    v2 = bool(records) and len(records[0]) == len(TIMES) + len(ITEM_FIELDS)
    return json.dumps({"format": SOURCE, "version": 2 if v2 else 1, "rank": rank, "layout": layout, "meta": meta,
                       "fields": TIMES + list(ITEM_FIELDS) if v2 else TIMES, "records": records}).encode()


def _task(doc: dict[str, Any], lay, index: int, rec: list[int], fetch: bool) -> tuple[int, int, int, str]:
    """(source rank, M-tile, N-tile or k-group, k-range label) of record ``index``."""
    if doc.get("version", 1) >= 2:
        _kind, src, m_tile, nk, kb, ke = rec[6:12]
        return src, m_tile, nk, f"k{kb}-{ke}"
    rank = int(doc["rank"])
    if fetch:
        return (*lay.fetch_task(index, rank), "")
    return (*lay.gemm_tile(index - lay.num_fetch_tasks, rank), "")


def to_spans(doc: dict[str, Any]) -> pd.DataFrame:
    """Decode an attachment into the workbench span table (``workbench.traces.model``)."""
    from kernels.triton.ag_gemm import ROLE_FETCH, ROLE_GEMM, HbmLayout

    lay = HbmLayout(**doc["layout"])
    rank = int(doc["rank"])
    recs = [r for r in doc["records"] if r[0] in (ROLE_FETCH, ROLE_GEMM)]
    if not recs:
        return from_records([], source=SOURCE)
    t0 = min(r[3] for r in recs)
    out: list[dict[str, Any]] = []
    process = f"rank {rank}"
    for task, rec in enumerate(doc["records"]):
        role, ticket, smid, start, ready, end = rec[:6]
        track = f"SM {smid:03d}"
        if role == ROLE_FETCH:
            src, m_tile, k_group, _ = _task(doc, lay, task, rec, True)
            out.append({"process": process, "track": track, "name": f"fetch r{src} m{m_tile} k{k_group}",
                        "category": "fetch", "start_ns": start - t0, "dur_ns": end - start,
                        "args": {"ticket": ticket, "src": src, "m_tile": m_tile, "k_group": k_group}})
        elif role == ROLE_GEMM:
            src, m_tile, n_tile, krange = _task(doc, lay, task, rec, False)
            args = {"ticket": ticket, "src": src, "m_tile": m_tile, "n_tile": n_tile, "local": src == rank,
                    "k_range": krange}
            if ready > start:
                out.append({"process": process, "track": track, "name": f"wait r{src} m{m_tile}",
                            "category": "wait", "start_ns": start - t0, "dur_ns": ready - start, "args": args})
            out.append({"process": process, "track": track, "name": f"gemm r{src} m{m_tile} n{n_tile} {krange}".strip(),
                        "category": "gemm", "start_ns": ready - t0, "dur_ns": end - ready, "args": args})
    order = sorted({o["track"] for o in out})
    return from_records(out, source=SOURCE, track_order=order)


def summary(spans: pd.DataFrame) -> dict[str, float]:
    """Kernel span, when the last fetch landed, how long GEMM programs waited in total, and
    when the first GEMM row on a peer's rows started computing (its first k-group's flag seen:
    how soon the fetch, by SMs or copy engines, feeds the GEMM)."""
    if spans.empty:
        return {}
    end = spans["start_ns"] + spans["dur_ns"]
    by = spans.groupby("category", observed=True)
    out = {"kernel_us": float(end.max() - spans["start_ns"].min()) / 1e3}
    if "fetch" in by.groups:
        f = spans[spans["category"] == "fetch"]
        out["last_fetch_end_us"] = float((f["start_ns"] + f["dur_ns"]).max()) / 1e3
        out["fetch_busy_us"] = float(f["dur_ns"].sum()) / 1e3
    if "wait" in by.groups:
        out["wait_total_us"] = float(spans.loc[spans["category"] == "wait", "dur_ns"].sum()) / 1e3
    g = spans[spans["category"] == "gemm"]
    out["gemm_busy_us"] = float(g["dur_ns"].sum()) / 1e3
    remote = g[[isinstance(a, dict) and a.get("local") is False for a in g["args"]]] if "args" in g else g.iloc[:0]
    if len(remote):
        out["first_remote_gemm_us"] = float(remote["start_ns"].min()) / 1e3
    return out


def overlap(spans: pd.DataFrame) -> dict[str, float]:
    """The fused kernel's own overlap from its per-program records: how much of the fetch
    time (union over SMs) ran while some SM computed a GEMM tile, and the converse."""
    from workbench.traces.overlap import breakdown

    b = breakdown(spans, roles=ROLES)
    if b.empty:
        return {}
    r = b.iloc[0]
    return {"kernel_us": r["total_us"], "fetch_us": r["communication_us"], "gemm_us": r["computation_us"],
            "fetch_hidden_us": r["comm_hidden_us"], "fetch_hidden_pct": r["overlap_pct"],
            "gemm_under_fetch_pct": r["comp_overlapped_pct"], "neither_pct": r["idle_pct"]}
