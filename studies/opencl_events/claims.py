"""The seed's claims (seed 001, Yichao Yu's "OpenCL Event Overhead" wiki page), each with its
test on the analysis tables (:mod:`.analysis`: the ``derived`` table, paired by round).

The seed's results are plots only; its prose states the findings, quoted here. A test that
compares two CIs (small vs large buffers, 7 vs 28 workers) calls a difference only when the
intervals do not overlap (a conservative test). With several worker counts in one run a claim
holds only where it holds for each; a mixed outcome is inconclusive and says where it held.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.evidence.claims import Claim, ClaimResult, Seed, agree, all_hold, apart, bound, not_testable, retold, within

from .analysis import BASELINES, CALLBACK, LARGE, SMALL, UNMAP, WAIT, excess_text, size_label

SEED_MACHINE = "AMD RX 5500 XT, Intel UHD 530/640"
SEED_AMD = "AMD RX 5500 XT"
#: "little effect" of unmapping: its time per run within this fraction of the baseline's
UNMAP_MARGIN = 0.10
README = "traces/opencl-events/README.md"


def _experiment(tbls) -> str | None:
    dv = tbls.get("derived")
    if dv is None or not len(dv):
        return None
    return str(dv["experiment"].iloc[0])


def _rows(dv: pd.DataFrame, quantity: str, provider: str | None = None, bucket: str | None = None) -> pd.DataFrame:
    sel = dv["quantity"] == quantity
    if provider is not None:
        sel &= dv["provider"] == provider
    if bucket is not None:
        sel &= dv["bucket"] == bucket
    return dv[sel]


def _label(workers) -> str:
    return f"{int(workers)} workers: " if workers else ""


def _combine(parts: list[tuple[int, ClaimResult]]) -> ClaimResult:
    """One result from one per worker count: the common status, else inconclusive with where
    each held."""
    return agree([(_label(w).rstrip(": ") or "here", r) for w, r in parts])


def _cuda_note(exp: str) -> str:
    return ("CUDA counterpart: cudaLaunchHostFunc (in the stream: the next kernel waits for it) for the callback, "
            "cudaEventSynchronize on another thread for the wait" if exp == "cuda" else "")


def _above(d, limit: float, live: str, exp: str) -> ClaimResult:
    """:func:`workbench.evidence.claims.bound` above ``limit``, with the CUDA note on a CUDA run."""
    res = bound(d, above=limit, live=live)
    return retold(res, why="; ".join(x for x in (res.why, _cuda_note(exp)) if x))


def callbacks_cost_at_small_sizes(tbls, rec) -> ClaimResult:
    """The CL_COMPLETE callback's time per run over the baseline at 4-64 KiB, as a ratio."""
    exp = _experiment(tbls)
    if exp is None:
        return not_testable("no valid point with a baseline in this run")
    cb, base, dv = CALLBACK[exp], BASELINES[exp], tbls["derived"]
    rel, ex = _rows(dv, "bucket relative", cb, SMALL), _rows(dv, "bucket excess", cb, SMALL)
    if not len(rel):
        return not_testable(f"needs {cb} and {base} at buffer sizes of 4-64 KiB (this run has none there)")
    parts = []
    ex = ex.set_index("workers")
    for _i, r in rel.iterrows():
        live = f"{cb} {excess_text(ex.loc[r['workers']], unit=True)} ({excess_text(r)}) at {SMALL}"
        parts.append((r["workers"], _above(r, 1.0, live, exp)))
    return _combine(parts)


def overhead_fades_with_size(tbls, rec) -> ClaimResult:
    """The callback's ratio over the baseline at 4-64 KiB against at 2 MiB and more."""
    exp = _experiment(tbls)
    if exp is None:
        return not_testable("no valid point with a baseline in this run")
    if exp == "dependency":
        return not_testable("stated for one kernel per run (experiment=callbacks or wait); chains: "
                            "001-dep-callback-rises")
    cb, dv = CALLBACK[exp], tbls["derived"]
    small, large = _rows(dv, "bucket relative", cb, SMALL), _rows(dv, "bucket relative", cb, LARGE)
    if not len(small) or not len(large):
        sizes = tbls["points"]["size_bytes"]
        return not_testable(f"needs buffers of 4-64 KiB and of 2 MiB or more (this run: {size_label(int(sizes.min()))} "
                            f"to {size_label(int(sizes.max()))})")
    s, big = small.iloc[0], large.iloc[0]
    live = f"{cb} / {BASELINES[exp]}: {excess_text(s)} at {SMALL}, {excess_text(big)} at {LARGE}"
    return apart(s, big, live=live, why=_cuda_note(exp))


def waiting_costs_less(tbls, rec) -> ClaimResult:
    """The callback minus the waiting thread at 4-64 KiB (paired by round): above 0 when the
    callback costs more."""
    exp = _experiment(tbls)
    if exp is None:
        return not_testable("no valid point with a baseline in this run")
    if exp not in WAIT:
        return not_testable("needs a thread waiting on the events: experiment=wait or dependency (this run: "
                            f"{exp})")
    rows = _rows(tbls["derived"], "bucket callback - wait", CALLBACK[exp], SMALL)
    if not len(rows):
        return not_testable(f"needs {CALLBACK[exp]} and {WAIT[exp]} at buffer sizes of 4-64 KiB")
    parts = []
    for _i, r in rows.iterrows():
        live = f"{CALLBACK[exp]} - {WAIT[exp]} {excess_text(r, unit=True)} at {SMALL}"
        parts.append((r["workers"], _above(r, 0.0, live, exp)))
    return _combine(parts)


def chains_smaller_relative_overhead(tbls, rec) -> ClaimResult:
    """The callback's ratio over plain at 4-64 KiB per worker: smaller with 28 workers (more
    work per event) than with 7."""
    exp = _experiment(tbls)
    if exp != "dependency":
        return not_testable("needs experiment=dependency (worker chains); the comparison with one kernel per run is "
                            f"across runs, see {README}")
    rel = _rows(tbls["derived"], "bucket relative", "cb", SMALL).set_index("workers")
    if not {7, 28} <= set(rel.index):
        return not_testable(f"needs both 7 and 28 workers at 4-64 KiB per worker (this run: "
                            f"{', '.join(map(str, sorted(rel.index))) or 'neither'})")
    r7, r28 = rel.loc[7], rel.loc[28]
    live = f"cb / plain at {SMALL} a worker: 7 workers {excess_text(r7)}, 28 workers {excess_text(r28)}"
    return apart(r7, r28, live=live, why=f"7 vs 28 workers in one run (vs one kernel per run: across runs, {README})")


def unmapping_has_little_effect(tbls, rec) -> ClaimResult:
    """Unmap over plain, per size range: within ``UNMAP_MARGIN`` of plain's time everywhere."""
    exp = _experiment(tbls)
    if exp not in UNMAP:
        return not_testable(f"needs experiment=dependency (the map/unmap of its final buffer); this run: {exp}")
    rows = _rows(tbls["derived"], "bucket relative", UNMAP[exp])
    if not len(rows):
        return not_testable("needs the unmap and plain conditions at the same sizes")
    lo, hi = 1 - UNMAP_MARGIN, 1 + UNMAP_MARGIN
    parts = []
    for w, g in rows.groupby("workers", sort=True):
        # the size range farthest from 1 speaks for all of them
        far = g.loc[(g[["lo", "hi"]].astype(float) - 1).abs().max(axis=1).idxmax()]
        live = f"unmap / plain at worst {excess_text(far)} ({far['bucket']})"
        res = all_hold([within(r, lo, hi) for r in g.to_dict("records")], live)
        why = "" if res.status == "holds" else f"'little' = within {UNMAP_MARGIN:.0%} of plain's time per run"
        parts.append((w, retold(res, why="; ".join(x for x in (res.why, why) if x))))
    return _combine(parts)


def dependency_callback_rises(tbls, rec) -> ClaimResult:
    """cb minus plain at the smallest against the largest total size, per worker count."""
    exp = _experiment(tbls)
    if exp != "dependency":
        return not_testable(f"needs experiment=dependency (this run: {exp})")
    ex = _rows(tbls["derived"], "excess", "cb")
    ex = ex[np.isfinite(ex["point"].astype(float))]
    if not len(ex):
        return not_testable("needs the cb and plain conditions")
    parts = []
    for w, g in ex.groupby("workers", sort=True):
        g = g.sort_values("total_bytes")
        if len(g) < 2:
            parts.append((w, not_testable("needs at least two sizes")))
            continue
        small, big = g.iloc[0], g.iloc[-1]
        live = (f"cb - plain {excess_text(small, unit=True)} at {size_label(int(small['total_bytes']))} total, "
                f"{excess_text(big)} at {size_label(int(big['total_bytes']))} ({int(big['reps'])} runs a "
                "measurement)")
        why = f"a delay per measurement, spread over its runs: the level per run is not the seed's ({README})"
        parts.append((w, apart(big, small, live=live, why=why)))
    return _combine(parts)


def _needs(*experiments: str):
    """A claim's ``needs``: one of these experiments."""
    return lambda p: None if p["experiment"] in experiments else f"needs experiment={' or '.join(experiments)}"


def _needs_small_and_large(p) -> str | None:
    if p["experiment"] not in ("callbacks", "wait"):
        return "stated for one kernel per run: needs experiment=callbacks or wait"
    sizes = p["sizes"]
    if not any(4096 <= s <= 65536 for s in sizes) or max(sizes) < 2 << 20:
        return "needs sizes of 4-64 KiB and of 2 MiB or more"
    return None


SEED_CLAIMS = [
    Claim(id="001-callbacks-cost-at-small-sizes", title="A completion callback on every event costs a lot at small sizes",
          seed_text="\"there is a pretty big overhead on both GPUs\" with a callback on every event (seed 001, section 1)",
          seed_value="AMD ~3x, Intel ~10 us a run, at small sizes",
          seed_machine=SEED_MACHINE, test=callbacks_cost_at_small_sizes,
          magnitude=Seed(3.0, tolerance=0.25, relative=True, text="~3x (AMD)"),
          needs=lambda p: None if any(4096 <= s <= 65536 for s in p["sizes"]) else "needs a size of 4-64 KiB"),
    Claim(id="001-overhead-fades-with-size", title="The callback's overhead fades with buffer size",
          seed_text="the overhead is \"3x for small sizes and remains significant until a buffer size of about 2 to "
                    "4 MiB\" (seed 001, section 1)",
          seed_value="3x at small sizes, fading by 2-4 MiB", seed_machine=SEED_AMD, test=overhead_fades_with_size,
          needs=_needs_small_and_large),
    Claim(id="001-waiting-costs-less", title="Waiting on another thread costs less than a callback",
          seed_text="waiting on another thread: overhead \"almost completely gone on the AMD GPU\" (seed 001, "
                    "section 2)",
          seed_value="AMD: wait ~0 (callback ~3x)",
          seed_machine=SEED_MACHINE, test=waiting_costs_less, needs=_needs("wait", "dependency")),
    Claim(id="001-chains-smaller-relative-overhead", title="Longer worker chains have a smaller relative overhead",
          seed_text="7 and 28 workers: \"the relative overhead is much smaller also it is still significant for "
                    "smaller worker numbers\" (seed 001, section 3)",
          seed_value="larger with 7 workers than 28", seed_machine=SEED_AMD,
          test=chains_smaller_relative_overhead, needs=_needs("dependency")),
    Claim(id="001-unmapping-little-effect", title="Unmapping has almost no effect",
          seed_text="\"On the AMD GPU, the unmapping has almost zero effect\" (seed 001, section 3)",
          seed_value=f"~0 (tested: within {UNMAP_MARGIN:.0%} of plain's time)",
          seed_machine=SEED_AMD, test=unmapping_has_little_effect, needs=_needs("dependency")),
    Claim(id="001-dep-callback-rises", title="The map event's callback cost rises with total size",
          seed_text="the map event's callback is \"roughly a fixed amount for small buffer sizes then increases\" "
                    "(seed 001, section 3)",
          seed_value="rises at 4-15 MiB total to ~0.4 ms a run",
          seed_machine=SEED_AMD, test=dependency_callback_rises, needs=_needs("dependency")),
]
