"""mc2-split's verdict and report sections: Markdown from the analysis tables only.

Formulas are code spans (``x = 384 × 8192 × 2 B``), never bare ``*`` or ``_`` (which Markdown
reads as emphasis), and every string from a run goes through
:func:`workbench.untrusted.escape`.
"""

from __future__ import annotations

import pandas as pd

from workbench.derived import fmt_derived
from workbench.untrusted import escape as esc

from . import seed
from .analysis import is_inflation
from .plan import short_chunks


def _row(tbls: dict[str, pd.DataFrame], name: str) -> dict:
    t = tbls.get(name)
    return t.iloc[0].to_dict() if t is not None and len(t) else {}


def _derived(tbls: dict[str, pd.DataFrame], name: str) -> dict | None:
    d = tbls.get("derived")
    hit = d[d["name"] == name] if d is not None and len(d) else []
    return hit.iloc[0].to_dict() if len(hit) else None


def _failed(tbls: dict[str, pd.DataFrame]) -> str:
    live = tbls.get("live")
    if live is None or not len(live):
        return ""
    bad = live.loc[~live["correct"].astype(bool), "variant"].tolist()
    return f" {len(bad)} variant(s) FAILED their check (times not counted): {esc(', '.join(bad))}." if bad else ""


def _model_verdict(tbls: dict[str, pd.DataFrame]) -> str:
    plan = _row(tbls, "_plan")
    key = tbls.get("key")
    if key is None or not len(key):
        return "No split could be planned; see the derivation."
    rows = {r["row"].split(" (")[0].split(":")[0]: r for r in key.to_dict("records")}
    serial = rows.get("serial")
    parts = []
    for name in ("the seed's split", "best split"):
        r = rows.get(name)
        if r:
            parts.append(f"{name} [{esc(r['chunks'])}] {r['predicted (us)']:,.1f} us "
                         f"({esc(r['gain over serial (model)'])} faster)")
    text = (f"Simulated with the given fits (contention {esc(plan.get('contention'))}; a model, not a measurement): "
            f"serial {serial['predicted (us)']:,.1f} us" if serial else "Simulated with the given fits")
    text += ("; " + "; ".join(parts) if parts else "") + "."
    floor = rows.get("model floor")
    if floor:
        text += f" No split beats {floor['predicted (us)']:,.1f} us even with no contention (the model's floor)."
    if plan and not plan.get("plan_ok"):
        text += f" The seed's split has no valid answer here: {esc(plan.get('reason'))}."
    return text


def _inflation_verdict(tbls: dict[str, pd.DataFrame]) -> str:
    t = tbls["key"]
    cases = "; ".join(f"halves of {r.half_us:.0f} us: {r.pipelined_us:.0f} us, gain {r.gain_us:+.0f} us "
                      f"(seed: {r.seed_gain_us:+.0f})" for r in t.itertuples())
    return ("The seed's inflation examples through the simulator (a 200 us matmul split in two beside a 300 us "
            f"all-reduce, serial 500 us): {cases}.")


def _gain_text(d: dict | None, backend: str) -> str:
    """A gain over serial as the verdict may state it: its size and direction only when clear."""
    if not d:
        return ""
    if d["status"] != "clear":
        return f"; no clear change against serial {esc(backend)} ({fmt_derived(d, status=False)})"
    word = "faster" if d["point"] > 0 else "slower"
    return (f", {abs(d['point']):.1f}% {word} than serial {esc(backend)} in the same run "
            f"(gain {fmt_derived(d, status=False)})")


def verdict(tbls: dict[str, pd.DataFrame]) -> str:
    """The best split against serial with the backend's own collective (the key table's best
    row), stated only where its CI is clear; the seed's split beside it."""
    if is_inflation(tbls):
        return _inflation_verdict(tbls)
    plan = _row(tbls, "_plan")
    if not plan.get("live"):
        return _model_verdict(tbls) + _failed(tbls)
    head, backend = plan.get("headline"), plan.get("backend") or "default"
    backend = "NCCL" if backend == "nccl" else backend
    live = tbls["live"].set_index("variant")
    if not head:
        return "No overlapped split passed its check." + _failed(tbls)
    row = live.loc[head]
    what = "the search's best split" if row["is_best"] else "the fastest split measured"
    if row["n_chunks"] == 1:
        what += ", left unsplit"
    text = (f"Best split {esc(head)} ({what} of {esc(row['comm'])}, the fastest configuration) "
            f"[{esc(row['chunks'])}]: {row['measured_us']:,.1f} us [{row['ci_lo_us']:,.1f}, {row['ci_hi_us']:,.1f}]"
            + _gain_text(_derived(tbls, f"gain of {head} over serial {plan.get('backend')}"), backend))
    if pd.notna(row.get("err_fit")):
        text += (f"; predicted {row['predicted_fit_us']:,.1f} us with the fitted contention (error "
                 f"{100 * row['err_fit']:+.1f}% [{100 * row['err_fit_lo']:+.1f}, {100 * row['err_fit_hi']:+.1f}])")
    seed_split = "overlap/default/heuristic"
    if seed_split in live.index and seed_split != head:
        chunks = short_chunks(live.loc[seed_split, "chunks"])
        text += (f". The seed's split [{esc(chunks)}] with {esc(backend)} as shipped: "
                 f"{live.loc[seed_split, 'measured_us']:,.1f} us"
                 + _gain_text(_derived(tbls, f"gain of {seed_split} over serial {plan.get('backend')}"), backend))
    return text + "." + _failed(tbls)


def _fits_section(plan: dict) -> str:
    if not plan.get("mm_fit"):
        return ""
    return ("## Cost fits\n\n"
            f"- CostMM(m) = {esc(plan['mm_fit'])} ({esc(plan['mm_fit_source'])})\n"
            f"- CostComm(x) = {esc(plan['comm_fit'])} ({esc(plan['comm_fit_source'])}), "
            f"{esc('x = m × N × sizeof(dtype)', 'code')}\n"
            f"- contention factor {esc(plan.get('contention'))} while both engines run (the seed: 1.15)\n")


def _derivation_section(tbls: dict[str, pd.DataFrame], plan: dict) -> str:
    steps = tbls.get("derivation")
    if steps is None or not len(steps):
        return ""
    head = (f"Result: **{esc(plan['chunks'])}** ({esc(plan['bound'])}-bound)" if plan.get("plan_ok") else
            f"**No valid split**: {esc(plan.get('reason'))}. The simulator shows the unsplit case.")
    lines = "\n".join(f"{i + 1}. **{esc(r.step)}**: {esc(r.derivation, 'code')}"
                      for i, r in enumerate(steps.itertuples()))
    best = ""
    if plan.get("best_chunks"):
        gap = plan.get("heuristic_over_best")
        best = (f"\n\nBest split (exact search over {esc(plan['best_align'])}-row tiles, at most "
                f"{esc(plan['best_max_chunks'])} chunks): {esc(plan['best_chunks'])}, {plan['best_us']:,.1f} us "
                "simulated" + (f"; the seed's split is {gap:.1%} slower in the model" if gap == gap else "") + ".")
    elif plan.get("best_skipped"):
        best = f"\n\n{esc(plan['best_skipped'])}."
    return ("## The seed's split, step by step\n\n" + lines + "\n\n" + head + best +
            "\n\nReadings of the seed: the short block is `max(a, b, c)` with `rule=example` (the seed's example), "
            "`min(a, b, c)` with `rule=text` (its text); communication-bound puts the short block first.")


def _floor_section(tbls: dict[str, pd.DataFrame]) -> str:
    rows = tbls["seed_floor"].set_index("quantity")["value"]
    floor, own = rows[seed.FLOOR_ROW], rows["seed's split, no contention (factor 1)"]
    fixed = rows["all-reduce fixed cost per chunk for 1262 us (seed's split, contention 1)"]
    slope = rows["all-reduce us/MiB for 1262 us (seed's split, contention 1.15, 47 us per chunk)"]
    factor = rows["contention factor for 1262 us (seed's split)"]
    with_f = rows["seed's split under the seed's fits, contention 1.15"]
    verdict_text = "lies below" if floor > seed.FUSED_US else "is within"
    return ("## The seed's 1262 us against its own fits\n\n"
            f"The seed's measured fused operator (1262 us, 32.7% faster than its 1874 us serial) **{verdict_text} "
            f"what its own fits allow**. Under CostMM = 16.5 us + 0.192 us/row and CostComm = 47 us + 16 us/MiB "
            f"(the lines through its 803, 1071 and 143 us and its m1 = 768), no 128-row split is faster than "
            f"{floor:,.0f} us even if the two engines did not slow each other at all (contention factor 1), and "
            f"its own split [512, 896 × 4] takes {own:,.0f} us ({with_f:,.0f} us with its 1.15). For 1262 us, "
            "at least one of these would have to be true of the fused operator: each chunk's all-reduce costs at "
            f"most {fixed:.1f} us fixed instead of 47 us (no contention); or its all-reduce moves data at "
            f"{slope:.1f} us/MiB instead of 16 ({16 / slope:.2f}x the bandwidth; contention 1.15); or the engines "
            f"speed each other up (a contention factor of {factor:.2f}). So the fused op's communication is not the "
            "standalone HCCL all-reduce its CostComm was fitted to.")


def _trace_section(tbls: dict[str, pd.DataFrame]) -> str:
    ov = tbls.get("trace_overlap")
    if ov is None or not len(ov):
        return ""
    ranks = ov["rank"].nunique()
    al = tbls.get("trace_alignment")
    how = "; ".join(dict.fromkeys(al["alignment"])) if al is not None and len(al) else ""
    return ("## Measured overlap (torch.profiler, one call each)\n\n"
            f"{ranks} rank(s) per profiled call" + (f", aligned by {esc(how)}" if ranks > 1 else
                                                   " (this run attached rank 0's traces only)") +
            ". A profiled call runs a little slower than a timed one; `overlap_us` is how long the collective "
            "ran under the matmul (the `trace_overlap` table).")


def _gantt_section(tbls: dict[str, pd.DataFrame]) -> str:
    gantt = tbls.get("_gantt")
    if gantt is None or not len(gantt):
        return ""
    return "## Gantt (simulated, ASCII)\n\n" + esc(ascii_gantt(gantt[gantt["shown"].astype(bool)]), "block")


def report_sections(tbls: dict[str, pd.DataFrame]) -> list[str]:
    plan = _row(tbls, "_plan")
    secs = [_fits_section(plan), _derivation_section(tbls, plan), _gantt_section(tbls), _floor_section(tbls),
            _trace_section(tbls)]
    if plan.get("live"):
        secs.append("`live`: `err` uses the given contention factor, `err_fit` the (compute, comm) factors fitted "
                    "to the seed's and the uniform splits of the same collective (the best split is then searched "
                    "with them, so its error is out of sample); `gain` is against serial with the backend's own "
                    "collective in the same run, in % with its 95% CI from the raw samples. `contention`: the one factor that makes the simulator give "
                    "each measured split.")
    return [s for s in secs if s]


def ascii_gantt(gantt: pd.DataFrame, width: int = 72) -> str:
    """One text line per split and engine; digits mark the chunk running."""
    end = gantt["end_us"].max()
    lines = []
    for split, g in gantt.groupby("split", sort=False):
        lines.append(str(split))
        for engine in ("compute", "comm"):
            row = [" "] * width
            for seg in g[g["engine"] == engine].itertuples():
                a = int(seg.start_us / end * width)
                b = max(a + 1, int(seg.end_us / end * width))
                for i in range(a, min(b, width)):
                    row[i] = str(int(seg.chunk) % 10)
            lines.append(f"  {engine:>7} |{''.join(row)}|")
    return "\n".join(lines)
