"""``analyze`` of the cpu-reduction study: every table, and every derived quantity with its CI.

All arithmetic on a run record happens here; the verdict, the claims, the charts and the report
only read and format these tables. Every derived quantity (ratios to torch, speedups over
workers, IREE's Python cost, per-call allocation, fork/join costs and their ratio, runtime
overhead and compute share per profiled iteration, c=8 minus c=2 per phase, the GRAIN_SIZE step)
is a row in the project's derived form (:mod:`workbench.evidence.derived`: point, 95% CI, status, why) of
one table per experiment, and all of them together are the ``derived`` table.

``_run`` (the run's shape: n, worker counts, machine, harness floor) and ``_environment`` (its
environment as lines) are read by the claims and the report, not shown as tables.

Nothing is derived across instruments or runs: overhead = total - compute of the same profiled
iteration, never a profile's compute against a timing run's total; the allocation is torch.sum
minus torch.sum(out=) paired by interleaved round.

Null controls (:data:`NULLS`, the run's ``nulls`` table and its ``drift`` between blocks,
:class:`workbench.evidence.engine.Evidence`): IREE's one-workgroup dispatch at w over 1 worker (one
workgroup runs on one worker whatever the count) and the run's declared A/A twins (``aa:``
variants: the same configuration timed again in a later block). torch.sum below GRAIN_SIZE at
w threads over 1 is *not* a null: it is what claim 000-grain-serial tests. Every comparison of
two blocks (ratios to torch, speedups over workers, IREE's Python cost and fork/join, c=8
against c=2 per capture) carries that drift; comparisons timed in the same interleaved rounds
(the allocation, OpenMP's fork/join) pair by round instead.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workbench.evidence import derived, engine, stats, tables
from workbench.data.record import RunRecord

from . import profiles
from .plan import AA, GRAIN_SIZE, IREE_PROVIDERS, SINGLE_THREAD, fork_join_c, fork_join_n
from .seed import SEED_DISPATCH_MODEL, SEED_KEY_TIMES, SEED_OVERVIEW, SEED_PHASES
from workbench.traces.phases import PHASES

SEED_MACHINE = "seed, 7975WX"
#: the tables in derived form (one row per derived quantity); together they are ``derived``
DERIVED_TABLES = ("vs_torch", "speedup", "python_cost", "grain", "alloc", "forkjoin", "forkjoin_compare", "overhead",
                  "phase_diff", "python_share")
#: torch.sum's time at w threads over its time at 1 thread inside this band: the thread count
#: does not matter (the serial path); outside it the parallel path runs (a run-to-run drift of
#: ~10% between two separately timed variants stays inside)
SERIAL_BAND = (0.8, 1.25)


def series(provider, c, split) -> str:
    """Display name of a measured series: ``torch``, ``iree-bench c=1``, ``iree-bench c=8 aligned``."""
    if c is None or c is pd.NA or c != c:
        return str(provider)
    c = int(c)
    return f"{provider} c={c}" + (f" {split}" if c > 1 and isinstance(split, str) else "")


def column_name(c: int, split) -> str:
    """The seed-shaped overview's name for an IREE program: ``IREE no-split``, ``IREE c=8 aligned``."""
    return "IREE no-split" if int(c) == 1 else f"IREE c={int(c)}" + (f" {split}" if isinstance(split, str) else "")


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
    return df


def analyze(rec: RunRecord) -> dict[str, pd.DataFrame]:
    p = rec.params
    df = variants(rec)
    samples = engine.Evidence(rec, NULLS)
    ok = checked(df, samples)
    plain = ok[ok["experiment"] == ""] if len(ok) else ok
    profs = profiles.load_profiles(rec) if rec.attachments else []
    iters = profiles.iteration_table(profs)
    over = profiles.overhead_table(samples, iters)
    out: dict[str, pd.DataFrame] = {"_run": run_table(rec), **samples.level_tables()}
    if len(plain):
        _timing_tables(plain, p, samples, profiles.compute_us(over), rec.outputs, out)
    if len(ok):
        _put(out, "alloc", _alloc(ok, samples))
        _put(out, "forkjoin", _forkjoin(ok, p, samples))
        _put(out, "forkjoin_compare", _forkjoin_compare(ok, p, samples))
    bw = rec.outputs.get("bandwidth", {})
    if bw:
        out["bandwidth"] = pd.DataFrame([{"workers": int(w), "copy_gbps": b["copy_gbps"],
                                          "bytes_per_copy": b["bytes_per_copy"], "samples": len(b["samples_ns"]),
                                          "correct": b["correct"]} for w, b in sorted(bw.items(), key=lambda kv: int(kv[0]))])
    if profs:
        _phase_tables(samples, profs, iters, over, out)
    _put(out, "seed_overview", seed_overview(out))
    _put(out, "dispatch_model", _dispatch_model(out, p, plain))
    out["_environment"] = _environment(rec, out)
    parts = [out[k].assign(table=k) for k in DERIVED_TABLES if k in out and len(out[k])]
    if parts:
        out["derived"] = derived.derived_table(pd.concat(parts, ignore_index=True).to_dict("records"))
    return out


def checked(df: pd.DataFrame, ev: engine.Evidence) -> pd.DataFrame:
    """The variants table's checked rows with samples (the ones the engine compares)."""
    return df[df["correct"].astype(bool) & df["variant"].isin(ev.variants)] if len(df) else df


def null_pairs(ev: engine.Evidence) -> list[tuple[str, str, str]]:
    """The run's null controls (label, block a, block b): IREE's one-workgroup dispatch at w
    vs 1 worker, and the A/A twins (``aa:`` variants vs their originals, timed in a later
    block). Not torch.sum below GRAIN_SIZE at w threads vs 1: claim 000-grain-serial tests that
    quantity, and a claim's quantity is never a null."""
    ok, p, out = checked(variants(ev.rec), ev), ev.rec.params, []
    if not len(ok):
        return out
    if "workers" in p:
        one = ok[(ok["provider"] == "iree-bench") & (ok["n"] == fork_join_n(p)) & (ok["c"] == 1)
                 & (ok["experiment"] == "")]
        for first, r, w in _versus_one_worker(one):
            out.append((f"one workgroup: IREE n={int(r.n)} (c=1) at {w} workers / 1 worker", first.variant, r.variant))
    for r in ok[ok["experiment"] == AA].itertuples():
        original = r.variant[len(AA) + 1:]
        if original in ev:
            out.append((f"A/A: {original}, a later block / the first", original, r.variant))
    return out


#: the study's null controls (workbench.evidence.engine)
NULLS = engine.Nulls(twins="", pairs=null_pairs,
                     source="IREE's one-workgroup dispatch at w workers vs 1, A/A twins (aa: variants)")


def _put(out: dict, name: str, df: pd.DataFrame | None) -> None:
    if df is not None and len(df):
        out[name] = df


def run_table(rec: RunRecord) -> pd.DataFrame:
    """One row: what the run was (size, worker counts, machine, the harness floor): the report
    and the claims read the run's shape from here, not from the record."""
    p, env = rec.params, rec.env or {}
    return pd.DataFrame([{"n": int(p.get("n", 0)), "w_max": max(p.get("workers", [1])),
                          "workers": ", ".join(map(str, p.get("workers", []))),
                          "experiments": ", ".join(p.get("experiments", [])),
                          "cores": rec.outputs.get("cores", env.get("cpu_logical")),
                          "machine": f"{env.get('cpu_model', '?')}, {env.get('cpu_logical', '?')} logical CPUs",
                          "floor_ns": rec.floor_ns if rec.floor_ns else float("nan"),
                          "target_cpu": p.get("target_cpu", "")}])


# --- grid: overview, scaling, sizes, grain, Python cost ---------------------------------------------

def _timing_tables(plain, p, samples, comp, outputs, out) -> None:
    ov, vs = _overview(plain, p, samples, comp)
    _put(out, "overview", ov)
    at_n = plain[plain["n"] == p["n"]]
    if len(at_n):
        sc = at_n[["series", "provider", "c", "split", "w", "median_ns", "ci_lo_ns", "ci_hi_ns", "median_us",
                   "ci_lo_us", "ci_hi_us", "noise", "floor_note"]].sort_values(["series", "w"]).reset_index(drop=True)
        out["scaling"] = sc
        _put(out, "speedup", _speedup(at_n, samples))
        vs += _fastest_vs_fastest(at_n, samples, p["n"])
        _put(out, "python_cost", _python_cost(at_n, samples))
    if vs:
        out["vs_torch"] = pd.DataFrame(vs)
    _put(out, "sizes", _sizes(plain, p, outputs))
    grain = _grain(plain, p, samples)
    if grain:
        out["grain"], out["_grain"] = grain


def _overview(plain, p, samples, comp) -> tuple[pd.DataFrame | None, list[dict]]:
    """The overview at n and the largest w: total (timing run), its ratio to torch at the same
    w and to the fastest torch, and, from one profile's own iterations, its total, compute,
    overhead and compute share."""
    w_max = max(p.get("workers", [1]))
    ov = plain[(plain["n"] == p["n"]) & ((plain["w"] == w_max) | plain["provider"].isin(SINGLE_THREAD))].copy()
    if not len(ov):
        return None, []
    at_n = plain[(plain["n"] == p["n"]) & (plain["provider"] == "torch")]
    torch_at = {int(r.w): r for r in at_n.itertuples()}
    # A descheduled thread stalls an OpenMP barrier: at the largest w torch can be slower and
    # far noisier than at fewer threads, so each IREE row is also set against the fastest torch.
    best = at_n.loc[at_n["median_ns"].idxmin()] if len(at_n) else None
    extra, vs = [], []
    for r in ov.itertuples():
        e: dict = {}
        ctx = {"series": r.series, "provider": r.provider, "c": r.c, "split": r.split, "w": int(r.w)}
        base = torch_at.get(int(r.w))
        if base is not None and r.provider != "torch":
            d = samples.ratio(base.variant, r.variant,
                              f"{r.series} / torch.sum (time per call, n={p['n']:,}, w={r.w})")
            vs.append(d.row(**ctx, against="torch at the same w", torch_w=int(base.w)))
            e.update(vs_torch=d.point, vs_torch_lo=d.lo, vs_torch_hi=d.hi, vs_torch_status=d.status,
                     vs_torch_n=min(d.n_a, d.n_b))
        if best is not None and r.provider in IREE_PROVIDERS:
            d = samples.ratio(best["variant"], r.variant,
                              f"{r.series} / the fastest torch.sum (w={int(best['w'])}), n={p['n']:,}")
            vs.append(d.row(**ctx, against="the fastest torch", torch_w=int(best["w"])))
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
    ov = pd.concat([ov.reset_index(drop=True), pd.DataFrame(extra, index=range(len(ov)))], axis=1)
    cols = ["series", "provider", "c", "split", "w", "median_us", "ci_lo_us", "ci_hi_us", "noise", "vs_torch",
            "vs_torch_lo", "vs_torch_hi", "vs_torch_status", "vs_torch_n",
            "vs_best_torch", "vs_best_torch_lo", "vs_best_torch_hi",
            "best_torch_w", "best_torch_us", "profile", "profile_iterations", "profile_total_us",
            "profile_total_lo_us", "profile_total_hi_us", "compute_us", "compute_lo_us", "compute_hi_us",
            "overhead_us", "overhead_lo_us", "overhead_hi_us", "compute_share_pct", "compute_share_lo_pct",
            "compute_share_hi_pct", "profile_status", "floor_note", "load_note"]
    for c in cols:
        if c not in ov:
            ov[c] = np.nan
    return ov[cols].rename(columns={"median_us": "total_us"}).reset_index(drop=True), vs


def _fastest_vs_fastest(at_n, samples, n) -> list[dict]:
    """The fastest IREE (any provider, c and w) over the fastest torch.sum (any w): how much
    PyTorch beats IREE by at n, whatever either needs to get there."""
    t = at_n[at_n["provider"] == "torch"]
    i = at_n[at_n["provider"].isin(IREE_PROVIDERS)]
    if not len(t) or not len(i):
        return []
    bt, bi = t.loc[t["median_ns"].idxmin()], i.loc[i["median_ns"].idxmin()]
    d = samples.ratio(bt["variant"], bi["variant"],
                      f"fastest IREE ({bi['series']}, w={int(bi['w'])}) / fastest torch.sum (w={int(bt['w'])}), "
                      f"n={n:,}")
    return [d.row(series=bi["series"], provider=bi["provider"], c=bi["c"], split=bi["split"], w=int(bi["w"]),
                  against="fastest vs fastest", torch_w=int(bt["w"]))]


def _speedup(at_n, samples) -> pd.DataFrame:
    """Per multi-threaded series at n: speedup from 1 worker to each w (time at 1 / time at w),
    and which w is its best (the largest speedup)."""
    rows = []
    multi = at_n[~at_n["provider"].isin(SINGLE_THREAD)]
    for s, g in multi.groupby("series", sort=True):
        for one, r, w in _versus_one_worker(g):
            d = samples.ratio(r.variant, one.variant,
                              f"{s}: speedup from 1 to {w} workers (time at 1 / time at {w})")
            rows.append(d.row(series=s, provider=r.provider, c=r.c, split=r.split, w=w, t1_us=one.median_us,
                              tw_us=r.median_us))
    df = pd.DataFrame(rows)
    if len(df):
        df["best"] = df.groupby("series")["point"].transform("max") == df["point"]
    return df


def _versus_one_worker(g: pd.DataFrame):
    """(the row at 1 worker, the row at w, w) for each w > 1 of a group also measured at 1."""
    by_w = {int(r.w): r for r in g.itertuples()}
    if 1 in by_w:
        for w in sorted(by_w):
            if w > 1:
                yield by_w[1], by_w[w], w


def _python_cost(at_n, samples) -> pd.DataFrame:
    """IREE's Python cost per (c, split, w): the iree.runtime call (iree-task) minus
    iree-benchmark-module running the same module with the same workers, in the same run."""
    rows = []
    task = at_n[at_n["provider"] == "iree-task"]
    bench = {(int(r.c), r.split if isinstance(r.split, str) else None, int(r.w)): r
             for r in at_n[at_n["provider"] == "iree-bench"].itertuples()}
    for r in task.itertuples():
        key = (int(r.c), r.split if isinstance(r.split, str) else None, int(r.w))
        b = bench.get(key)
        if b is None:
            continue
        d = samples.difference(b.variant, r.variant,
                               f"IREE Python cost, {series('iree', r.c, r.split)[5:]} w={r.w}: iree.runtime call - "
                               "iree-benchmark-module", "us", scale=1e-3, physical_min=0.0)
        rows.append(d.row(c=key[0], split=key[1], w=key[2], python_us=r.median_us, bench_us=b.median_us,
                          harnesses="two harnesses: a perf_counter loop around the Python call vs google-benchmark's "
                                 "loop in iree-benchmark-module"))
    return pd.DataFrame(rows)


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
    # faster than streaming from DRAM: the input stayed in cache between calls
    sz["note"] = np.where(sz["median_us"] < sz["floor_us"], "below the copy-bandwidth floor: the input fits in "
                          "cache, so the floor does not bound it", "")
    return sz.reset_index(drop=True)


def _grain(plain, p, samples):
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
        d = samples.ratio(by_w[1].variant, by_w[w_max].variant,
                          f"torch.sum n={n:,}: time at {w_max} threads / at 1 thread")
        wide.append(d.row(n=int(n), w_max=w_max, w1_us=by_w[1].median_us, wmax_us=by_w[w_max].median_us,
                          torch_path="serial (n < GRAIN_SIZE)" if n < GRAIN_SIZE else "parallel (two-pass, OpenMP)"))
    if not wide:
        return None
    chart = t.assign(series=[f"torch.sum, {w} thread(s)" for w in t["w"]])[
        ["series", "n", "w", "median_ns", "ci_lo_ns", "ci_hi_ns"]].sort_values(["series", "n"]).reset_index(drop=True)
    return pd.DataFrame(wide), chart


# --- alloc and fork/join ----------------------------------------------------------------------------

def alloc_path(n: int, w: int) -> str:
    """Which of torch.sum's paths a point takes (TensorIteratorReduce.cpp, the seed's quote):
    serial below GRAIN_SIZE or at one thread (only the output is allocated), else the
    two-pass reduction (the output and a buffer of one partial sum per thread)."""
    if n < GRAIN_SIZE or w == 1:
        return "serial (output only)"
    return "two-pass (output + per-thread buffer)"


def _alloc(ok, samples: engine.Evidence) -> pd.DataFrame:
    """torch.sum(a) - torch.sum(a, out=o), the median of per-round differences (interleaved
    rounds), per (n, w) and the path torch takes there: at w=1 the serial path (the output
    alone: the seed's ~0.6 us), at the machine's thread count and n >= GRAIN_SIZE the two-pass
    path the seed measured its 2.0 us on (the output and the 128-byte buffer at 32 threads).
    Both sides pay the same fork/join in each round, so it cancels in the pairs (its noise
    stays in the CI)."""
    a = ok[ok["experiment"] == "alloc"]
    out = []
    for (n, w), g in a.groupby(["n", "w"]):
        by = {r.provider: r for r in g.itertuples()}
        if not {"torch", "torch-out"} <= set(by):
            continue
        name = f"per-call allocation: torch.sum - torch.sum(out=), n={n:,}, w={w}"
        d = samples.difference(by["torch-out"].variant, by["torch"].variant, name, "us", interleaved=True,
                               physical_min=0.0, scale=1e-3)
        out.append(d.row(n=int(n), w=int(w), path=alloc_path(int(n), int(w)), torch_us=by["torch"].median_us,
                         torch_out_us=by["torch-out"].median_us, rounds=d.n_a,
                         pairing="median of per-round differences (interleaved rounds)" if d.paired
                         else "unpaired (not timed in shared rounds)"))
    return pd.DataFrame(out)


def _forkjoin_groups(ok, p) -> list[tuple[str, str, pd.DataFrame, bool]]:
    """(key, what, points, interleaved): OpenMP as torch.sum pays it and IREE's task system."""
    t = ok[(ok["experiment"] == "forkjoin") & (ok["provider"] == "torch")]
    groups = [("openmp", "OpenMP fork/join (torch.sum, n=32,768: one grain of work)", t, True)]
    if len(ok) and "workers" in p:
        fj_n, fj_c = fork_join_n(p), fork_join_c(p)
        ib = ok[(ok["provider"] == "iree-bench") & (ok["n"] == fj_n) & (ok["experiment"] == "")]
        groups += [("iree-task", f"IREE task system ({fj_c} tiles of 16 elements, n={fj_n})", ib[ib["c"] == fj_c],
                    False),
                   ("iree-one", f"IREE, one workgroup (n={fj_n}, no split)", ib[ib["c"] == 1], False)]
    return groups


def _forkjoin(ok, p, samples: engine.Evidence) -> pd.DataFrame:
    """Fork/join: time at w minus time at 1 for the smallest parallel torch.sum (paired by
    round) and for IREE's one-tile-per-worker dispatch (iree-benchmark-module repetitions, two
    blocks: with the run's drift)."""
    out = []
    for key, what, g, interleaved in _forkjoin_groups(ok, p):
        for one, r, w in _versus_one_worker(g):
            d = samples.difference(one.variant, r.variant, f"{what}: time at {w} minus at 1 worker", "us",
                                   interleaved=interleaved, scale=1e-3)
            out.append(d.row(mechanism=what, key=key, n=int(r.n), w=w, t1_us=one.median_us, tw_us=r.median_us,
                             pairing="per interleaved round" if d.paired else "two blocks (with the run's drift)"))
    return pd.DataFrame(out)


def _forkjoin_compare(ok, p, samples: engine.Evidence) -> pd.DataFrame:
    """IREE's task-system fork/join over OpenMP's at each w both measured: a ratio of two
    differences (OpenMP's paired by round, IREE's two blocks with the run's drift; the seed:
    ~15 vs ~13 us), combined by the engine from both figures' draws."""
    groups = {key: {int(r.w): r for r in g.itertuples()} for key, _what, g, _i in _forkjoin_groups(ok, p)}
    omp, iree = groups.get("openmp", {}), groups.get("iree-task", {})
    if 1 not in omp or 1 not in iree:
        return pd.DataFrame()
    rows = []
    for w in sorted(set(omp) & set(iree) - {1}):
        name = f"fork/join 1 -> {w} workers: IREE task system / OpenMP"
        o = samples.difference(omp[1].variant, omp[w].variant, f"OpenMP fork/join 1 -> {w}", "ns", scale=1.0,
                               interleaved=True)
        i = samples.difference(iree[1].variant, iree[w].variant, f"IREE fork/join 1 -> {w}", "ns", scale=1.0)
        if not o.paired:
            d = engine.not_meaningful(name, "OpenMP's samples are not paired by round", "x", 1.0)
        elif not (o.point > 0 and o.lo > 0):
            d = engine.not_meaningful(name, "OpenMP's fork/join is not clearly above 0: no ratio", "x", 1.0)
        else:
            d = samples.combine(name, lambda a, b: a / b, [i, o], "x", null=1.0)
        rows.append(d.row(w=w, openmp_us=o.point / 1e3, iree_us=i.point / 1e3))
    return pd.DataFrame(rows)


# --- phases -----------------------------------------------------------------------------------------

def _phase_tables(ev: engine.Evidence, profs, iters, over, out) -> None:
    py = profiles.python_table(profs)
    out["phases"] = profiles.phase_table(ev, profs, iters, py)
    if len(iters):
        out["_phase_iterations"] = iters
    if len(iters):
        out["_phase_chart"] = _phase_chart(iters, py)
    if len(py):
        out["_python_iterations"] = py
    _put(out, "python_share", _python_share(ev, py))
    _put(out, "overhead", over)
    _put(out, "phase_compare", _phase_compare(out["phases"]))
    _put(out, "phase_diff", _phase_differences(ev, iters))
    kt = profiles.key_times(profs)
    if len(kt):
        seed = {(c, ev_): t for c, evs in SEED_KEY_TIMES.items() for ev_, t in evs}
        seed |= {(c, "dispatch_0 starts (first shard)"): t for (c, e), t in seed.items()
                 if e == "first dispatch_0 shard starts"}
        seed |= {(c, "dispatch_0 ends (last shard ends)"): t for (c, e), t in seed.items()
                 if e == "last dispatch_0 shard ends"}
        kt["seed_t_us"] = [seed.get((c, e.split(" (reduce")[0]), np.nan) for c, e in zip(kt["c"], kt["event"])]
        out["key_times"] = kt
    _put(out, "iree_allocs", profiles.alloc_table(ev, profs))
    out["timeline"] = profiles.timeline_table(profs)
    pictures = [{"capture": profiles.capture_label(q), "text": profiles.ascii_timeline(q)}
                for q in profs if q["per_iter"] is not None]
    if pictures:
        out["timeline_ascii"] = pd.DataFrame(pictures)


#: the chart's stacking order: IREE's phases, then the Python side's parts
CHART_PHASES = (*PHASES, *profiles.PY_PHASES)


def _phase_chart(iters: pd.DataFrame, py: pd.DataFrame) -> pd.DataFrame:
    """Chart data: per capture, the phases of its median steady-state iteration (the one whose
    total is nearest the median total: the iteration the key timestamps and the timeline show),
    which sum to that iteration's total, then, where the capture has Python zones, the Python
    side's parts of the same iteration (the bar then ends at the Python iteration's total); and
    the seed's one traced iteration per c. torch.sum's capture has no phases: its breakdown and
    timeline show it."""
    rows = []
    st = py[~py["warmup"]] if len(py) else py
    for cap, g in iters[~iters["warmup"]].groupby("capture", sort=False):
        it = g.loc[(g["total_us"] - g["total_us"].median()).abs().idxmin()]
        label = f"live {cap}: iteration {int(it['iteration'])}, the median of {len(g)}"
        parts = [(ph, float(it[ph])) for ph in PHASES]
        total = float(it["total_us"])
        mine = st[(st["capture"] == cap) & (st["vm_start_ns"] == it["start_ns"])] if len(st) else st
        if len(mine):
            m = mine.iloc[0]
            parts += [(profiles.PY_PHASES[0], float(m["binding_us"])), (profiles.PY_PHASES[1], float(m["outside_us"]))]
            total = float(m["total_us"])
        rows += [{"capture": label, "source": "live", "c": int(it["c"]), "w": int(it["w"]), "phase": ph,
                  "order": CHART_PHASES.index(ph), "us": us, "total_us": total} for ph, us in parts]
    for c, seed in SEED_PHASES.items():
        label = f"seed c={c}{' fixed' if c == 8 else ''} @32w (7975WX, one traced iteration)"
        rows += [{"capture": label, "source": "seed", "c": c, "w": 32, "phase": ph, "order": i, "us": seed[ph],
                  "total_us": seed["total"]} for i, ph in enumerate(PHASES)]
    return pd.DataFrame(rows)


#: (quantity, column, name) of the Python side per traced capture (:func:`_python_share`)
PYTHON_PARTS = (
    ("iteration", "total_us", "Python iteration (py.iteration)"),
    ("call", "call_us", "the call (py.invoke / py.torch_sum)"),
    ("binding in the call", "binding_us", "Python binding in the call (py.invoke - iree_vm_invoke)"),
    ("outside the call", "outside_us", "Python outside the call (py.iteration - the call)"),
    ("to_host", "to_host_us", "result to a Python float (py.to_host)"),
)


def _python_share(ev: engine.Evidence, py: pd.DataFrame) -> pd.DataFrame:
    """The seed's question "in the runtime or around it?" from the Python zones of each traced
    capture (:mod:`.traced`): per capture, the median over its steady-state iterations, with its
    interval (one capture, one block: drift cannot enter), of the Python iteration, the
    call, the binding's part of the call (IREE captures), the iteration outside the call and
    ``py.to_host``, and IREE's runtime's share of the Python iteration (``iree_vm_invoke`` /
    ``py.iteration``, paired per iteration), each from the engine (its order-statistic
    interval; the run's load). Tracy's own cost per zone
    (``benchmarks/tracy_zones.py``) is inside the Python parts."""
    if py.empty:
        return pd.DataFrame()
    rows = []
    for cap, g in py[~py["warmup"]].groupby("capture", sort=False):
        first = g.iloc[0]
        base = {k: first[k] for k in ("capture", "provider", "via", "n", "c", "split", "w")} | {"iterations": len(g)}
        def part(col: str, label: str) -> engine.Series:
            return profiles.capture_series(ev, g, col, label, "Python")

        items = [(q, ev.median(part(col, f"{name}, {cap}"), f"{name}, {cap}", "us", physical_min=0.0,
                               per="iterations"))
                 for q, col, name in PYTHON_PARTS if g[col].notna().any()]
        if g["runtime_us"].notna().any():
            name = f"IREE's runtime share of the Python iteration (iree_vm_invoke / py.iteration), {cap}"
            items.append(("runtime share", ev.share(part("runtime_us", name), part("total_us", name), name)))
        for q, d in items:
            if len(g) < profiles.MIN_FOR_MEDIAN:
                d = engine.not_meaningful(d.name, f"only {len(g)} steady-state iteration(s): not a median", d.unit)
            rows.append(d.row(**base, quantity=q))
    return pd.DataFrame(rows)


def _phase_differences(ev: engine.Evidence, iters: pd.DataFrame) -> pd.DataFrame:
    """c=8 against c=2 per (workers, profiler), from the steady-state iterations of both
    captures (unpaired: two captures are two blocks, so the run's drift enters): the seed's
    "more chunks lower compute but raise scheduling delay" (differences) and its "net result
    roughly the same wall-clock" (the ratio of totals)."""
    out = []
    if iters.empty:
        return pd.DataFrame()
    st = iters[~iters["warmup"]]
    for (w, source, via), g in st.groupby(["w", "source", "via"], sort=True):
        by_c = {int(c): gc for c, gc in g.groupby("c")}
        if not {2, 8} <= set(by_c):
            continue
        ctx = {"w": int(w), "source": source, "via": via, "iterations": min(len(by_c[2]), len(by_c[8]))}

        def side(c: int, col: str):
            return profiles.capture_series(ev, by_c[c], col, f"{col}, c={c}, {source} ({via}), {w} workers")

        items = [(phase, ev.difference(side(2, phase), side(8, phase),
                                       f"{phase}: c=8 minus c=2, {source} ({via}), {w} workers", "us", scale=1.0))
                 for phase in ("scheduling delay", "dispatch compute")]
        items.append(("total", ev.ratio(side(2, "total_us"), side(8, "total_us"),
                                        f"iteration total: c=8 / c=2, {source} ({via}), {w} workers")))
        for phase, d in items:  # fewer than 5 steady-state iterations in a capture: shown, never clear
            out.append(d.row(quantity=phase, **ctx))
    return pd.DataFrame(out)


def _phase_compare(ph: pd.DataFrame) -> pd.DataFrame:
    """The seed's side-by-side c=2 | c=8 table, per (workers, profiler): live medians with
    their CI and share of the median total, and the seed's figures beside them."""
    ph = ph[ph["phase"] != "unavailable"]
    out = []
    for (w, source, via), g in ph.groupby(["w", "source", "via"], sort=True):
        caps = {int(c): gc for c, gc in g.groupby("c")}
        if not ({2, 8} & set(caps)):
            continue
        shown = [ph for ph in dict.fromkeys(g["phase"]) if all((caps[c]["phase"] == ph).any() for c in caps)]
        for phase in shown:
            row = {"w": int(w), "profiler": f"{source} ({via})", "phase": phase}
            for c in sorted(caps):
                r = caps[c][caps[c]["phase"] == phase].iloc[0]
                share = "" if phase in ("total", profiles.PY_TOTAL) else f" ({r['share_pct']:.0f}%)"
                row[f"c={c} {r['split'] or ''}".strip()] = f"{_ci_text(r['median_us'], r['lo_us'], r['hi_us'])}{share}"
            for c, seed in SEED_PHASES.items():
                v = seed.get(phase)
                row[f"seed c={c}{' fixed' if c == 8 else ''} @32w"] = (
                    "n/a (C++ harness, no Python)" if v is None else
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


def _ci_text(x, lo, hi) -> str:
    if not (isinstance(lo, float) and math.isfinite(lo)):
        return f"{x:.1f}"
    return f"{x:.1f} [{lo:.1f}, {hi:.1f}]"


# --- the seed-shaped tables -------------------------------------------------------------------------

def seed_overview(out: dict) -> pd.DataFrame | None:
    """The seed's overview, live rows each followed by the seed's: torch.sum and each IREE
    program (no split, each c; through iree-benchmark-module as the seed, else the Python
    runtime) at n and the largest w: total, compute and runtime overhead (from the run's own
    profile of that program, when it has one) and the ratio to torch.sum at the same w."""
    ov = out.get("overview")
    if ov is None or not len(ov):
        return None
    run = out["_run"].iloc[0]
    iree = key_programs(ov)
    cols = {"torch.sum": r for r in ov[ov["provider"] == "torch"].to_dict("records")}
    for r in iree.sort_values(["c", "split"], na_position="first").to_dict("records"):
        cols[column_name(r["c"], r["split"] if int(r["c"]) > 1 else None)] = r
    profiled = bool(ov["profile"].notna().any())

    def live(q: str, col: str, r: dict) -> str:
        if q == "total":
            return _us(r["total_us"], r["ci_lo_us"], r["ci_hi_us"])
        if col == "torch.sum":
            return "1x" if q == "vs" else ""  # the seed: "MKL total is a black-box measurement"
        if q == "vs":
            return _vs(r)
        if not profiled:
            return "not profiled in this run"
        text = _us(r[f"{q}_us"], r[f"{q}_lo_us"], r[f"{q}_hi_us"])
        if text and q == "compute":
            text += f" ({r['compute_share_pct']:.0f}% [{r['compute_share_lo_pct']:.0f}, {r['compute_share_hi_pct']:.0f}])"
        return text or "not profiled"

    labels = {"total": f"Total (N={int(run['n']):,}, {int(run['w_max'])} threads/workers)",
              "compute": "Compute (profile, median iteration; share)",
              "overhead": "Runtime overhead (total - compute per iteration)", "vs": "vs torch.sum (same w)"}
    rows = []
    for q, label in labels.items():
        rows.append({"": f"{label}, live", **{c: live(q, c, r) for c, r in cols.items()}})
        rows.append({"": f"{label.split(' (')[0]}, seed (7975WX @32)",
                     **{c: SEED_OVERVIEW.get(_seed_column(c), {}).get(q, "") for c in cols}})
    return pd.DataFrame(rows)


def key_programs(ov: pd.DataFrame) -> pd.DataFrame:
    """The IREE rows of the overview that the key table shows: iree-benchmark-module (the
    seed's instrument), else the Python runtime."""
    iree = ov[ov["provider"] == "iree-bench"]
    return iree if len(iree) else ov[ov["provider"] == "iree-task"]


def _seed_column(col: str) -> str:
    """The seed's overview column for a live one (the seed's "c=8 fixed" is the aligned c=8)."""
    return {"torch.sum": "MKL", "IREE no-split": "IREE no-split", "IREE c=8 aligned": "IREE c=8 fixed",
            "IREE c=2 aligned": "IREE c=2", "IREE c=2 even": "IREE c=2"}.get(col, "")


def _us(x, lo=float("nan"), hi=float("nan")) -> str:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return ""
    d = 2 if abs(x) < 1 else 1
    return f"{x:,.{d}f} us [{lo:,.{d}f}, {hi:,.{d}f}]" if math.isfinite(lo) else f"{x:,.{d}f} us"


def _vs(r: dict) -> str:
    if not isinstance(r.get("vs_torch"), float) or not math.isfinite(r["vs_torch"]):
        return ""
    n = int(r["vs_torch_n"])
    return derived.fmt_derived({"name": "", "point": r["vs_torch"], "lo": r["vs_torch_lo"], "hi": r["vs_torch_hi"],
                                "unit": "x", "null": 1.0, "status": str(r["vs_torch_status"]), "n_a": n, "n_b": n})


def _dispatch_model(out, p, plain) -> pd.DataFrame:
    """The seed's "PyTorch vs IREE dispatch model" table, from this run's tables."""
    fj, alloc, al, ov = (out.get(k) for k in ("forkjoin", "alloc", "iree_allocs", "overview"))
    w_max = max(p.get("workers", [1]))

    def timed(rows, what):
        if not len(rows):
            return f"not measured (experiment {what})"
        r = rows.iloc[0]
        return _us(r["median_us"], r["ci_lo_us"], r["ci_hi_us"]) + f" (n={int(r['n'])}, 1 thread)"

    rows = []
    if len(plain) and "workers" in p:
        at = plain[(plain["n"] == fork_join_n(p)) & (plain["w"] == 1)]
        rows.append(("dispatch floor", timed(at[at["provider"] == "torch"], "forkjoin"),
                     timed(at[(at["provider"] == "iree-bench") & (at["c"] == 1)], "forkjoin")))
    if fj is not None and len(fj):
        def last(key):
            g = fj[fj["key"] == key]
            if not len(g):
                return "n/a"
            r = g.sort_values("w").iloc[-1]
            return derived.fmt_derived(r) + f" (1 -> {int(r['w'])})"
        rows.append(("thread fork/join", last("openmp"), last("iree-task")))
    if alloc is not None and len(alloc):
        # the clear figure where there is one (a large sum's noise can hide the allocation)
        a = alloc.sort_values(["status", "n"], key=lambda c: c != "clear" if c.name == "status" else c).iloc[0]
        tor = derived.fmt_derived(a) + f" (n={int(a['n']):,}, w={int(a['w'])})"
    else:
        tor = "not measured (experiment alloc)"
    if al is not None and len(al):
        tot = al[al["group"] == "total"].sort_values("w").iloc[-1]
        ir = (f"{_us(tot['median_us'], tot['lo_us'], tot['hi_us'])} in {tot['calls_per_iteration']:.0f} zones per call "
              f"({tot['statistic']}; Tracy zone time, {tot['capture']})")
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
                         _us(t["total_us"].iloc[0], t["ci_lo_us"].iloc[0], t["ci_hi_us"].iloc[0]) + fastest,
                         _us(i["total_us"].iloc[0], i["ci_lo_us"].iloc[0], i["ci_hi_us"].iloc[0])
                         + f" ({i['series'].iloc[0]})"))
    table = []
    for what, torch_live, iree_live in rows:
        s = SEED_DISPATCH_MODEL.get("total @ the largest w, 1M sum" if what.startswith("total") else what, ("", ""))
        table.append({"": what, "PyTorch/OpenMP (live)": torch_live, "IREE (live)": iree_live,
                      f"PyTorch/OpenMP ({SEED_MACHINE})": s[0], f"IREE ({SEED_MACHINE})": s[1]})
    return pd.DataFrame(table)


def _environment(rec: RunRecord, out: dict) -> pd.DataFrame:
    """The run's environment as lines (item, text): machine, IREE build and flags, the check,
    copy bandwidth, the compiled programs, load, failed captures. Raw text: the report escapes."""
    outputs, run = rec.outputs or {}, out["_run"].iloc[0]
    floor = stats.fmt_ns(run["floor_ns"])
    lines = [("machine", f"{run['machine']}; torch threads set per variant; harness floor {floor} per call"),
             ("IREE", f"{outputs.get('iree_versions', {})}, flags {' '.join(map(str, outputs.get('iree_flags', [])))}"),
             ("correctness", str(outputs.get("tolerance", "")))]
    bw = out.get("bandwidth")
    if bw is not None and len(bw):
        lines.append(("copy bandwidth (same run)", ", ".join(f"{r.workers} thread(s) {r.copy_gbps:.1f} GB/s"
                                                             for r in bw.itertuples())))
    for key, info in outputs.get("programs", {}).items():
        pad = f", pad {info['pad']} elements materialised as {info['fills']} fill + {info['copies']} copy" \
            if info.get("copies") else ""
        # IREE 3.13 compiles a chunk length that is not a multiple of 16 through a much slower
        # reduction path (figures: traces/cpu-reduction/README.md, "The seed's c=8 fixed")
        slow = (f"; tile {info['m']} is not a multiple of 16: IREE 3.13's slow reduction codegen"
                if info["c"] > 1 and info["m"] % 16 else "")
        if info.get("split") == "partial-tile" and info.get("shards", 0) * info["m"] != info["n"]:
            slow = "; a partial last tile: IREE 3.13's dynamic-shape (slow) codegen"
        lines.append((f"program {key}", f"{info.get('label', '')}, {info['dispatches']} dispatch(es) "
                                        f"{info['dispatch_names']}{pad}{slow}"))
    load, load_end = outputs.get("loadavg_start"), outputs.get("loadavg_end")
    if load:
        busy = max(load[0], (load_end or [0])[0]) > 0.5 * (outputs.get("cores") or 1)
        lines.append(("load average (1/5/15 min)", f"at start {', '.join(f'{x:.2f}' for x in load)}"
                      + (f", at end {', '.join(f'{x:.2f}' for x in load_end)}" if load_end else "")
                      + (" -- WARNING: other processes were running; multi-thread figures suffer most"
                         if busy else "")))
    lines += [("capture failed", str(err)) for err in outputs.get("capture_errors", [])]
    return pd.DataFrame(lines, columns=["item", "text"])
