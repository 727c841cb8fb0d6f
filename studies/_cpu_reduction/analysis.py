"""``analyze`` of the cpu-reduction study: every table, and every derived quantity with its CI.

All arithmetic on a run record happens here (the verdict and the report only format these
tables). Derived quantities (ratios to torch, per-call allocation, fork/join costs, runtime
overhead and compute share per profiled iteration, the GRAIN_SIZE step) are rows of the
``derived`` table in the project's derived-quantity form (:mod:`workbench.derived`); the tables that
show them carry the same figures beside their inputs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from workbench import derived, stats, tables
from workbench.store import RunRecord

from . import profiles
from .plan import GRAIN_SIZE, IREE_PROVIDERS, SINGLE_THREAD, fork_join_c, fork_join_n
from .seed import SEED_DISPATCH_MODEL, SEED_KEY_TIMES, SEED_PHASES

#: a median within this factor of the harness floor is dominated by the harness
FLOOR_FACTOR = 5
SEED_MACHINE = "seed, 7975WX"


def series(provider, c, split) -> str:
    """Display name of a measured series: ``torch``, ``iree-bench c=1``, ``iree-bench c=8 aligned``."""
    if c is None or c is pd.NA or c != c:
        return str(provider)
    c = int(c)
    return f"{provider} c={c}" + (f" {split}" if c > 1 and isinstance(split, str) else "")


def variants(rec: RunRecord) -> pd.DataFrame:
    """The per-variant table with the study's columns (records from before the ``provider``
    and ``split`` names are read as what they were: ``impl``, and the even split)."""
    df = tables.with_us(tables.variants_table(rec))
    if df.empty:
        return df
    if "provider" not in df and "impl" in df:
        df = df.rename(columns={"impl": "provider"})
    df["c"] = df["c"].astype("Int64") if "c" in df else pd.Series(pd.NA, index=df.index, dtype="Int64")
    if "split" not in df:
        df["split"] = np.where(df["c"].fillna(1) > 1, "even", None)
    df["experiment"] = df["experiment"].fillna("") if "experiment" in df else ""
    df["series"] = [series(p, c, s) for p, c, s in zip(df["provider"], df["c"], df["split"])]
    floor = rec.floor_ns or float("nan")
    df["floor_note"] = np.where(df["median_ns"] < FLOOR_FACTOR * floor,
                                f"within {FLOOR_FACTOR}x the harness floor ({stats.fmt_ns(floor)})", "")
    return df


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    p = rec.params
    df = variants(rec)
    out: dict[str, pd.DataFrame] = {}
    samples = {v.variant: v.samples_ns for v in rec.variants if v.correct and v.samples_ns}
    profs = profiles.load_profiles(rec) if rec.attachments else []
    iters = profiles.iteration_table(profs)
    over = profiles.overhead_table(iters)
    ok = df[df["correct"]] if len(df) else df
    plain = ok[ok["experiment"] == ""] if len(ok) else ok
    rows: list[dict] = []
    if len(plain):
        out["overview"] = _overview(plain, p, samples, profiles.compute_us(over), rows)
        sc = plain[plain["n"] == p["n"]]
        if len(sc):
            out["scaling"] = sc[["series", "provider", "c", "split", "w", "median_ns", "ci_lo_ns", "ci_hi_ns",
                                 "median_us", "ci_lo_us", "ci_hi_us", "noise", "floor_note"]].sort_values(
                ["series", "w"]).reset_index(drop=True)
        sizes = _sizes(plain, p, rec.outputs)
        if sizes is not None:
            out["sizes"] = sizes
        grain = _grain(plain, p, samples, rows)
        if grain:
            out["grain"], out["_grain"] = grain
    if len(ok):
        alloc = _alloc(ok, samples, rows)
        if len(alloc):
            out["alloc"] = alloc
        fj = _forkjoin(ok, p, samples, rows)
        if len(fj):
            out["forkjoin"] = fj
    bw = rec.outputs.get("bandwidth", {})
    if bw:
        out["bandwidth"] = pd.DataFrame([{"workers": int(w), "copy_gbps": b["copy_gbps"],
                                          "bytes_per_copy": b["bytes_per_copy"], "samples": len(b["samples_ns"]),
                                          "correct": b["correct"]} for w, b in sorted(bw.items(), key=lambda kv: int(kv[0]))])
    if profs:
        _phase_tables(profs, iters, over, out, rows)
    model = _dispatch_model(out, p, plain)
    if len(model):
        out["dispatch_model"] = model
    if rows:
        out["derived"] = derived.derived_table(rows)
    return out


def _overview(plain, p, samples, comp, rows) -> pd.DataFrame:
    """The seed-shaped overview at n and the largest w: total (timing run) and, from one
    profile's own iterations, its total, compute, overhead and compute share."""
    w_max = max(p.get("workers", [1]))
    ov = plain[(plain["n"] == p["n"]) & ((plain["w"] == w_max) | plain["provider"].isin(SINGLE_THREAD))].copy()
    torch_row = ov[ov["provider"] == "torch"]
    base = samples.get(torch_row["variant"].iloc[0]) if len(torch_row) else None
    # A descheduled thread stalls an OpenMP barrier: at the largest w torch can be slower and
    # far noisier than at fewer threads, so each IREE row is also set against the fastest torch.
    at_n = plain[(plain["n"] == p["n"]) & (plain["provider"] == "torch")]
    best = at_n.loc[at_n["median_ns"].idxmin()] if len(at_n) else None
    extra = []
    for r in ov.itertuples():
        e: dict = {}
        if base is not None and r.provider != "torch":
            d = derived.ratio(base, samples[r.variant], f"{r.series} / torch (time per call, n={p['n']:,}, w={r.w})")
            rows.append(d.row(table="overview"))
            e.update(vs_torch=d.point, vs_torch_lo=d.lo, vs_torch_hi=d.hi)
        if best is not None and r.provider in IREE_PROVIDERS:
            d = derived.ratio(samples[best["variant"]], samples[r.variant],
                              f"{r.series} / the fastest torch (w={int(best['w'])}), n={p['n']:,}")
            rows.append(d.row(table="overview"))
            e.update(vs_best_torch=d.point, vs_best_torch_lo=d.lo, vs_best_torch_hi=d.hi,
                     best_torch_w=int(best["w"]), best_torch_us=float(best["median_us"]))
        split = r.split if isinstance(r.split, str) else None
        prof = comp.get((int(r.n), int(r.c), split, int(r.w))) if r.provider in ("iree-bench", "iree-task") \
            and r.c is not pd.NA else None
        if prof:
            e.update(profile=prof["capture"], profile_iterations=prof["iterations"])
            for q, col in (("total", "profile_total"), ("compute", "compute"), ("overhead", "overhead"),
                           ("compute share", "compute_share")):
                x = prof[q]
                unit = "pct" if q == "compute share" else "us"
                e.update({f"{col}_{unit}": x["point"], f"{col}_lo_{unit}": x["lo"], f"{col}_hi_{unit}": x["hi"]})
            e["profile_status"] = prof["overhead"]["status"]
        extra.append(e)
    ov = pd.concat([ov.reset_index(drop=True), pd.DataFrame(extra)], axis=1)
    cols = ["series", "provider", "c", "split", "w", "median_us", "ci_lo_us", "ci_hi_us", "noise", "vs_torch",
            "vs_torch_lo", "vs_torch_hi", "vs_best_torch", "vs_best_torch_lo", "vs_best_torch_hi", "best_torch_w",
            "best_torch_us", "profile", "profile_iterations", "profile_total_us", "profile_total_lo_us",
            "profile_total_hi_us", "compute_us",
            "compute_lo_us", "compute_hi_us", "overhead_us", "overhead_lo_us", "overhead_hi_us", "compute_share_pct",
            "compute_share_lo_pct", "compute_share_hi_pct", "profile_status", "floor_note"]
    for c in cols:
        if c not in ov:
            ov[c] = np.nan
    return ov[cols].rename(columns={"median_us": "total_us"}).reset_index(drop=True)


def _sizes(plain, p, outputs) -> pd.DataFrame | None:
    w_max = max(p.get("workers", [1]))
    sz = plain[((plain["w"] == w_max) | plain["provider"].isin(SINGLE_THREAD)) & plain["n"].isin(p.get("sizes", []))]
    if "sizes" not in p.get("experiments", []) or sz["n"].nunique() < 2:
        return None
    bw = outputs.get("bandwidth", {}).get(str(w_max))
    floor_gbps = bw["copy_gbps"] if bw else float("nan")
    sz = sz[["series", "provider", "c", "split", "w", "n", "median_ns", "ci_lo_ns", "ci_hi_ns", "median_us",
             "floor_note"]].sort_values(["series", "n"]).copy()
    # A streaming sum reads 4 bytes per element; the floor lets those reads move at the copy's
    # aggregate rate (STREAM convention: read + write bytes per second).
    sz["floor_us"] = sz["n"] * 4 / floor_gbps / 1e3
    sz["overhead_share"] = 1 - sz["floor_us"] / sz["median_us"]
    sz["overhead_dominates"] = sz["overhead_share"] > 0.5
    # faster than streaming from DRAM: the input stayed in cache between calls
    sz["note"] = np.where(sz["median_us"] < sz["floor_us"], "below the copy-bandwidth floor: the input fits in "
                          "cache, so the floor does not bound it", "")
    return sz.reset_index(drop=True)


def _grain(plain, p, samples, rows):
    """torch at w=1 and the largest w around GRAIN_SIZE: per n, time(w_max) / time(1) with CI."""
    w_max = max(p.get("workers", [1]))
    if "grain" not in p.get("experiments", []) or w_max == 1:
        return None
    t = plain[(plain["provider"] == "torch") & plain["n"].isin(p.get("grain_sizes", [])) & plain["w"].isin([1, w_max])]
    wide = []
    for n, g in t.groupby("n"):
        by_w = {int(r.w): r for r in g.itertuples()}
        if 1 not in by_w or w_max not in by_w:
            continue
        d = derived.ratio(samples[by_w[1].variant], samples[by_w[w_max].variant],
                          f"torch.sum n={n:,}: time at {w_max} threads / at 1 thread")
        rows.append(d.row(table="grain"))
        wide.append({"n": int(n), "w1_us": by_w[1].median_us, "w1_lo_us": by_w[1].ci_lo_us,
                     "w1_hi_us": by_w[1].ci_hi_us, "w_max": w_max, "wmax_us": by_w[w_max].median_us,
                     "wmax_lo_us": by_w[w_max].ci_lo_us, "wmax_hi_us": by_w[w_max].ci_hi_us,
                     "ratio": d.point, "ratio_lo": d.lo, "ratio_hi": d.hi, "status": d.status,
                     "torch_path": "serial (n < GRAIN_SIZE)" if n < GRAIN_SIZE else "parallel (two-pass, OpenMP)"})
    if not wide:
        return None
    chart = t.assign(series=[f"torch, {w} thread(s)" for w in t["w"]])[
        ["series", "n", "w", "median_ns", "ci_lo_ns", "ci_hi_ns"]].sort_values(["series", "n"]).reset_index(drop=True)
    chart["grain_size"] = GRAIN_SIZE
    return pd.DataFrame(wide), chart


def _alloc(ok, samples, rows) -> pd.DataFrame:
    """torch.sum(a) - torch.sum(a, out=o) at w=1, paired by interleaved round."""
    a = ok[ok["experiment"] == "alloc"]
    out = []
    for (n, w), g in a.groupby(["n", "w"]):
        by = {r.provider: r for r in g.itertuples()}
        if not {"torch", "torch-out"} <= set(by):
            continue
        d = derived.difference(samples[by["torch-out"].variant], samples[by["torch"].variant],
                               f"per-call allocation: torch.sum - torch.sum(out=), n={n:,}, w={w}", "us",
                               paired=True, physical_min=0.0, scale=1e-3)
        rows.append(d.row(table="alloc"))
        out.append({"n": int(n), "w": int(w), "torch_us": by["torch"].median_us, "torch_out_us": by["torch-out"].median_us,
                    "alloc_us": d.point, "alloc_lo_us": d.lo, "alloc_hi_us": d.hi, "status": d.status,
                    "why": d.why, "rounds": len(samples[by["torch"].variant]),
                    "pairing": "median of per-round differences (interleaved rounds)"})
    return pd.DataFrame(out)


def _forkjoin(ok, p, samples, rows) -> pd.DataFrame:
    """Fork/join: time at w minus time at 1 for the smallest parallel torch.sum (paired by
    round) and for IREE's one-tile-per-worker dispatch (iree-benchmark-module repetitions)."""
    out = []
    t = ok[(ok["experiment"] == "forkjoin") & (ok["provider"] == "torch")]
    groups = [("OpenMP fork/join (torch.sum, n=32,768: one grain of work)", t, True)]
    if len(ok) and {"workers"} <= set(p):
        fj_n, fj_c = fork_join_n(p), fork_join_c(p)
        ib = ok[(ok["provider"] == "iree-bench") & (ok["n"] == fj_n)]
        groups += [(f"IREE task system ({fj_c} tiles of 16 elements, n={fj_n})", ib[ib["c"] == fj_c], False),
                   (f"IREE, one workgroup (n={fj_n}, no split)", ib[ib["c"] == 1], False)]
    for what, g, paired in groups:
        by_w = {int(r.w): r for r in g.itertuples()}
        if 1 not in by_w:
            continue
        for w in sorted(by_w):
            if w == 1:
                continue
            d = derived.difference(samples[by_w[1].variant], samples[by_w[w].variant],
                                   f"{what}: time at {w} minus at 1 worker", "us", paired=paired, scale=1e-3)
            rows.append(d.row(table="forkjoin"))
            out.append({"mechanism": what, "n": int(by_w[w].n), "w": w, "t1_us": by_w[1].median_us,
                        "tw_us": by_w[w].median_us, "forkjoin_us": d.point, "lo_us": d.lo, "hi_us": d.hi,
                        "status": d.status, "why": d.why,
                        "pairing": "per interleaved round" if paired else "independent (bootstrap of both medians)"})
    return pd.DataFrame(out)


def _phase_tables(profs, iters, over, out, rows) -> None:
    ph = profiles.phase_table(profs, iters)
    out["phases"] = ph
    if len(iters):
        out["_phase_iterations"] = iters
    if len(over):
        out["overhead"] = over
        for r in over.to_dict("records"):
            rows.append({"name": f"{r['quantity']} per iteration, {r['capture']}", "point": r["point"], "lo": r["lo"],
                         "hi": r["hi"], "unit": r["unit"], "null": 0.0, "status": r["status"], "why": r["why"],
                         "n_a": r["iterations"], "n_b": r["iterations"], "paired": True, "table": "overhead"})
    cmp_ = _phase_compare(ph)
    if len(cmp_):
        out["phase_compare"] = cmp_
    rows += _phase_differences(iters)
    kt = profiles.key_times(profs)
    if len(kt):
        seed = {(c, ev): t for c, evs in SEED_KEY_TIMES.items() for ev, t in evs}
        seed |= {(c, "dispatch_0 starts (first shard)"): t for (c, ev), t in seed.items()
                 if ev == "first dispatch_0 shard starts"}
        seed |= {(c, "dispatch_0 ends (last shard ends)"): t for (c, ev), t in seed.items()
                 if ev == "last dispatch_0 shard ends"}
        kt["seed_t_us"] = [seed.get((c, ev.split(" (reduce")[0]), np.nan) for c, ev in zip(kt["c"], kt["event"])]
        out["key_times"] = kt
    al = profiles.alloc_table(profs)
    if len(al):
        out["iree_allocs"] = al
    out["timeline"] = profiles.timeline_table(profs)
    pictures = [{"capture": profiles.capture_label(q), "text": profiles.ascii_timeline(q)}
                for q in profs if q["per_iter"] is not None]
    if pictures:
        out["timeline_ascii"] = pd.DataFrame(pictures)


def _phase_differences(iters: pd.DataFrame) -> list[dict]:
    """c=8 minus c=2 of each phase, per (workers, profiler): the seed's "more chunks lower
    compute but raise scheduling delay", from the steady-state iterations of both captures."""
    out = []
    if iters.empty:
        return out
    st = iters[~iters["warmup"]]
    for (w, source, via), g in st.groupby(["w", "source", "via"], sort=True):
        by_c = {int(c): gc for c, gc in g.groupby("c")}
        if not {2, 8} <= set(by_c):
            continue
        for phase in ("scheduling delay", "dispatch compute", "total_us"):
            label = "total" if phase == "total_us" else phase
            d = derived.difference(by_c[2][phase].to_numpy(), by_c[8][phase].to_numpy(),
                                   f"{label}: c=8 minus c=2, {source} ({via}), {w} workers", "us")
            if min(len(by_c[2]), len(by_c[8])) < profiles.MIN_FOR_MEDIAN:
                d = dataclasses.replace(d, status="not meaningful",
                                        why="fewer than 5 steady-state iterations in a capture")
            out.append(d.row(table="phases"))
    return out


def _phase_compare(ph: pd.DataFrame) -> pd.DataFrame:
    """The seed's side-by-side c=2 | c=8 table, per (workers, profiler): live medians with
    their share of the median total, and the seed's figures beside them."""
    from workbench.traces.phases import PHASES

    ph = ph[ph["phase"] != "unavailable"]
    out = []
    for (w, source, via), g in ph.groupby(["w", "source", "via"], sort=True):
        caps = {int(c): gc for c, gc in g.groupby("c")}
        if not ({2, 8} & set(caps)):
            continue
        for phase in [*PHASES, "total"]:
            row = {"w": int(w), "profiler": f"{source} ({via})", "phase": phase}
            for c in sorted(caps):
                r = caps[c][caps[c]["phase"] == phase].iloc[0]
                share = "" if phase == "total" else f" ({r['share_pct']:.0f}%)"
                row[f"c={c} {r['split'] or ''}".strip()] = f"{r['median_us']:.1f}{share}"
            for c, seed in SEED_PHASES.items():
                v = seed[phase]
                row[f"seed c={c}{' fixed' if c == 8 else ''} @32w"] = (
                    f"{v:.1f}" if phase == "total" else f"{v:.1f} ({100 * v / seed['total']:.0f}%)")
            out.append(row)
        stat = {"w": int(w), "profiler": f"{source} ({via})", "phase": "statistic"}
        for c in sorted(caps):
            r = caps[c].iloc[0]
            stat[f"c={c} {r['split'] or ''}".strip()] = r["statistic"]
        for c in SEED_PHASES:
            stat[f"seed c={c}{' fixed' if c == 8 else ''} @32w"] = "one traced iteration"
        out.append(stat)
    return pd.DataFrame(out)


def _dispatch_model(out, p, plain) -> pd.DataFrame:
    """The seed's "PyTorch vs IREE dispatch model" table, from this run's tables."""
    fj, alloc, al, ov = (out.get(k) for k in ("forkjoin", "alloc", "iree_allocs", "overview"))
    w_max = max(p.get("workers", [1]))

    def fmt(x, lo, hi, status=""):
        d = 2 if max(abs(x), abs(hi)) < 1 else 1
        return f"{x:.{d}f} us [{lo:.{d}f}, {hi:.{d}f}]" + (f" ({status})" if status else "")

    def timed(rows, what):
        if not len(rows):
            return f"not measured (experiment {what})"
        r = rows.iloc[0]
        return fmt(r["median_us"], r["ci_lo_us"], r["ci_hi_us"]) + f" (n={int(r['n'])}, 1 thread)"

    rows = []
    if len(plain) and "workers" in p:
        at = plain[(plain["n"] == fork_join_n(p)) & (plain["w"] == 1)]
        rows.append(("dispatch floor", timed(at[at["provider"] == "torch"], "forkjoin"),
                     timed(at[(at["provider"] == "iree-bench") & (at["c"] == 1)], "forkjoin")))
    if fj is not None and len(fj):
        def last(mech):
            g = fj[fj["mechanism"].str.startswith(mech)]
            if not len(g):
                return "n/a"
            r = g.sort_values("w").iloc[-1]
            return fmt(r["forkjoin_us"], r["lo_us"], r["hi_us"], r["status"]) + f" (1 -> {int(r['w'])})"
        rows.append(("thread fork/join", last("OpenMP"), last("IREE task")))
    if alloc is not None and len(alloc):
        # the clear figure where there is one (a large sum's noise can hide the allocation)
        a = alloc.sort_values(["status", "n"], key=lambda c: c != "clear" if c.name == "status" else c).iloc[0]
        tor = fmt(a["alloc_us"], a["alloc_lo_us"], a["alloc_hi_us"], a["status"]) + f" (n={int(a['n']):,}, w=1)"
    else:
        tor = "not measured (experiment alloc)"
    if al is not None and len(al):
        tot = al[al["group"] == "total"].sort_values("w").iloc[-1]
        ir = (f"{tot['median_us']:.1f} us in {tot['calls_per_iteration']:.0f} zones per call ({tot['statistic']}; "
              f"Tracy zone time, {tot['capture']})")
    else:
        ir = "not measured in this run (experiment phases with a Tracy profile)"
    rows.append(("per-call allocations", tor, ir))
    if ov is not None and len(ov):
        t = ov[ov["provider"] == "torch"]
        i = ov[ov["provider"].isin(IREE_PROVIDERS) & (ov["w"] == w_max)].sort_values("total_us")
        if len(t) and len(i):
            best = i["best_torch_w"].iloc[0]
            fastest = (f"; fastest torch {i['best_torch_us'].iloc[0]:.1f} us @{int(best)}t"
                       if best == best and int(best) != w_max else "")
            rows.append((f"total @{w_max} threads/workers, N={p['n']:,}",
                         fmt(t["total_us"].iloc[0], t["ci_lo_us"].iloc[0], t["ci_hi_us"].iloc[0]) + fastest,
                         fmt(i["total_us"].iloc[0], i["ci_lo_us"].iloc[0], i["ci_hi_us"].iloc[0])
                         + f" ({i['series'].iloc[0]})"))
    table = []
    for what, torch_live, iree_live in rows:
        s = SEED_DISPATCH_MODEL.get("total @ the largest w, 1M sum" if what.startswith("total") else what, ("", ""))
        table.append({"": what, "PyTorch/OpenMP (live)": torch_live, "IREE (live)": iree_live,
                      f"PyTorch/OpenMP ({SEED_MACHINE})": s[0], f"IREE ({SEED_MACHINE})": s[1]})
    return pd.DataFrame(table)
