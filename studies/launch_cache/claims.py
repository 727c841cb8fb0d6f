"""The seed's claims (seed 003, the GCC review of caching libgomp's nvptx soft-stack block), each
with its test on the analysis tables (:mod:`.analysis`: the ``derived`` ratios, paired by phase).

The seed's timings are `time` runs (five per build, 8 host threads); the live ones are phases
(``repeat`` per variant). A ratio of phase times with fewer than five phases a side is shown
but inconclusive, whatever it looks like. Where a run has several modes (the CPU's two malloc
settings), a claim holds only where it holds in each; a mixed outcome is inconclusive and says
where each held. Which claims hold on the committed runs: ``traces/launch-cache/README.md``.
"""

from __future__ import annotations

import pandas as pd

from workbench.evidence.claims import Claim, ClaimResult, Seed, agree, all_hold, bound, not_testable, within
from workbench.evidence.derived import fmt_derived

SEED = "seed 003"
SEED_MACHINE = "NVIDIA GPU (model not stated), libgomp nvptx, 8 host threads"
#: "about the same" real time: the ratio's whole CI within this factor of 1 (the seed: 1.00)
SAME = 0.10
#: the seed's GPU timings synchronise after every launch (the patch kept that; the removal was dropped)
SYNCED = {"cpu": None, "gpu": "True"}
README = "traces/launch-cache/README.md"


def _run(tbls) -> dict:
    return tbls["_run"].iloc[0].to_dict()


def _ratios(tbls, quantity: str, provider: str) -> pd.DataFrame:
    """The ``quantity`` rows of ``provider`` in the modes the seed's comparison uses."""
    dv = tbls.get("derived")
    if dv is None or not len(dv):
        return pd.DataFrame()
    g = dv[(dv["quantity"] == quantity) & (dv["provider"] == provider)]
    want = SYNCED.get(_run(tbls)["target"])
    return g[g["mode"] == want] if want is not None else g


def _mode_label(tbls, mode: str) -> str:
    run = _run(tbls)
    return f"sync={mode}" if run["mode"] == "sync" else f"{run['mode']}={mode}"


def _clocks(g: pd.DataFrame, clocks) -> dict[str, dict]:
    return {r["clock"]: r for r in g.to_dict("records") if r["clock"] in clocks}


def _one_phase(tbls) -> ClaimResult | None:
    phases = tbls["policies"]["phases"]
    if len(phases) and int(phases.max()) < 2:
        return not_testable(f"needs phases to compare: at least 2 a variant, 5 for a CI (this run: "
                            f"{int(phases.max())}; the seed ran 5)")
    return None


def _per_mode(tbls, provider: str, clocks, test) -> ClaimResult:
    g = _ratios(tbls, "vs per_call", provider)
    if not len(g):
        return not_testable(f"needs per_call and {provider} in the same run (the seed's baseline and patch)")
    if _one_phase(tbls):
        return _one_phase(tbls)
    parts = []
    for mode, gm in g.groupby("mode", sort=False):
        rows = _clocks(gm, clocks)
        live = ", ".join(f"{c} {fmt_derived(rows[c], status=False)}" for c in clocks if c in rows)
        pol = tbls["policies"].set_index("variant")
        phases = min(_phases(pol, r) for r in rows.values())
        parts.append((_mode_label(tbls, mode), test(rows, f"{provider} / per_call: {live} ({phases} phases)")))
    return agree(parts)


def _phases(pol: pd.DataFrame, r: dict) -> int:
    """The fewer phases of the two variants a ratio compares."""
    return int(min(pol.loc[r["variant"], "phases"], pol.loc[r["baseline"], "phases"]))


def _long_kernels(tbls) -> ClaimResult | None:
    if int(_run(tbls)["passes"]) > 1:
        return None
    return not_testable("needs long kernels (passes > 1; the seed's ran ~0.9 s each at 256 launches); this run's "
                        "kernels make one pass")


def about_one(d, live: str, apart: str) -> ClaimResult:
    """A ratio "about the same": holds when its whole CI lies within 1 +- :data:`SAME`,
    contradicted (``apart`` says why) when wholly outside, else inconclusive; a ratio of too few
    phases is inconclusive whatever its CI."""
    return within(d, 1 - SAME, 1 + SAME, live=live, apart=apart)


def below_one(d, live: str, contradicted_why: str) -> ClaimResult:
    """A ratio below 1 (:func:`workbench.evidence.claims.bound`), with why when it is not."""
    return bound(d, below=1.0, live=live, contradicted_why=contradicted_why)


def few_long_kernels_real_same(tbls, rec) -> ClaimResult:
    """locked_cache's real time over per_call's within 1 +- :data:`SAME`, with long kernels."""
    skip = _long_kernels(tbls)
    if skip:
        return skip

    def test(rows, live):
        if "real" not in rows:
            return not_testable("no real-time ratio", live)
        return about_one(rows["real"], live, f"real time is more than {SAME:.0%} apart (why: {README})")
    return _per_mode(tbls, "locked_cache", ("real",), test)


def few_long_kernels_user_sys_fall(tbls, rec) -> ClaimResult:
    """locked_cache's user and sys time over per_call's both below 1, with long kernels."""
    skip = _long_kernels(tbls)
    if skip:
        return skip

    def test(rows, live):
        return all_hold([bound(rows[c], below=1.0) for c in ("user", "sys") if c in rows], live,
                     "user or sys time does not fall")
    return _per_mode(tbls, "locked_cache", ("user", "sys"), test)


def many_launches_cut_all_three(tbls, rec) -> ClaimResult:
    """locked_cache's real, user and sys time over per_call's all below 1, with short kernels."""
    if int(_run(tbls)["passes"]) > 1:
        return not_testable("needs many short launches (passes = 1; the seed: 1,048,576 launches); this run's "
                            f"kernels make {int(_run(tbls)['passes'])} passes")

    def test(rows, live):
        return all_hold([bound(rows[c], below=1.0) for c in ("real", "user", "sys") if c in rows], live,
                     "not all three fall")
    return _per_mode(tbls, "locked_cache", ("real", "user", "sys"), test)


def pool_avoids_serialisation(tbls, rec) -> ClaimResult:
    """The pool's real time over locked_cache's below 1, at k times the scratch memory."""
    g = _ratios(tbls, "vs locked_cache", "pool")
    if not len(g):
        return not_testable("needs the pool and locked_cache in the same run")
    if _one_phase(tbls):
        return _one_phase(tbls)
    pol = tbls["policies"].set_index("variant")
    parts = []
    for r in g.to_dict("records"):
        mem = pol.loc[r["variant"], "peak_mib"] / pol.loc[r["baseline"], "peak_mib"]
        live = (f"{r['variant']} / {r['baseline']}: real {fmt_derived(r, status=False)} "
                f"({_phases(pol, r)} phases), "
                f"peak scratch {mem:.2g}x (the policies' counts)")
        parts.append((_mode_label(tbls, r["mode"]), below_one(
            r, live, "the pool is slower here: its queue costs more than the lock with these kernels")))
    return agree(parts)


def cache_wins_despite_lock_wait(tbls, rec) -> ClaimResult:
    """locked_cache's real time over per_call's below 1 on the GPU, the stream synchronised."""
    if _run(tbls)["target"] != "gpu":
        return not_testable("the seed says this of CUDA's allocator (target=gpu); this run allocates with glibc")

    def test(rows, live):
        if "real" not in rows:
            return not_testable("no real-time ratio", live)
        return below_one(rows["real"], live, f"the locked cache takes longer than allocating per launch here "
                                             f"({README})")
    return _per_mode(tbls, "locked_cache", ("real",), test)


def size_limit_free_without_allocations(tbls, rec) -> ClaimResult:
    """size_limit's real time over locked_cache's within 1 +- :data:`SAME` when the
    application allocates nothing between launches."""
    if int(_run(tbls)["data_bytes"] or 0):
        return not_testable("needs a run without application allocations (data_bytes=0), as the seed's timings")
    g = _ratios(tbls, "vs locked_cache", "size_limit")
    if not len(g):
        return not_testable("needs size_limit and locked_cache in the same run")
    if _one_phase(tbls):
        return _one_phase(tbls)
    pol = tbls["policies"].set_index("variant")
    parts = []
    for r in g.to_dict("records"):
        live = f"{r['variant']} / {r['baseline']}: real {fmt_derived(r, status=False)} ({_phases(pol, r)} phases)"
        parts.append((_mode_label(tbls, r["mode"]), about_one(r, live, f"more than {SAME:.0%} apart")))
    return agree(parts)


SEED_CLAIMS = [
    Claim(id="003-few-kernels-real-same", title="With few long kernels, real time stays the same",
          seed_text=f"256 launches: \"real time is about the same, but user/sys time are reduced\" ({SEED})",
          seed_value=f"real 3m55.0s -> 3m55.2s (1.00x); tested as within {SAME:.0%}",
          seed_machine=SEED_MACHINE, test=few_long_kernels_real_same),
    Claim(id="003-few-kernels-user-sys-fall", title="With few long kernels, user and sys time fall",
          seed_text=f"256 launches: \"user/sys time are reduced\" ({SEED})",
          seed_value="user 0.51x (7m14s -> 3m40s), sys 0.53x (30s -> 16s); tested as both below 1",
          seed_machine=SEED_MACHINE, test=few_long_kernels_user_sys_fall),
    Claim(id="003-many-launches-cut-all-three", title="With a million short launches, real, user and sys time all fall",
          seed_text=f"1,048,576 launches: \"Real, user and sys time are all dramatically less\" ({SEED})",
          seed_value="real 0.38x (12m15s -> 4m43s), user 0.66x, sys 0.08x",
          seed_machine=SEED_MACHINE, test=many_launches_cut_all_three),
    Claim(id="003-pool-avoids-serialisation", title="A pool of three blocks avoids serialising host threads",
          seed_text=f"reviewer: a pool of \"up to 3 entries\" allows reuse \"without totally serializing host "
                    f"threads\"; author: x3 of ~50MB \"could start to eat into the GPU heap\" ({SEED})",
          seed_value="a proposal, not measured; tested as pool / locked_cache real below 1, at k x the memory",
          seed_machine=SEED_MACHINE, test=pool_avoids_serialisation),
    Claim(id="003-cache-wins-despite-lock-wait", title="On the GPU the locked cache wins despite the lock wait",
          seed_text=f"CUDA's allocation is \"so slow that we get a benefit with this patch even when the GPU stream "
                    f"has to wait for the CPU to unlock the stacks block\" ({SEED})",
          seed_value="~11-12% across the author's benchmarks; tested as locked_cache / per_call real below 1 (GPU)",
          seed_machine=SEED_MACHINE, test=cache_wins_despite_lock_wait,
          magnitude=Seed(0.885, tolerance=0.005, text="0.88-0.89x (11-12% less real time)")),
    Claim(id="003-size-limit-free-without-allocations", title="The size limit costs nothing when nothing is allocated between launches",
          seed_text=f"the size limit frees the block \"before allocating more memory ... so bigger blocks can still "
                    f"be shared between kernel launches if there's no memory allocation between them\" ({SEED})",
          seed_value=f"not measured; tested as size_limit / locked_cache real within {SAME:.0%} (data_bytes=0)",
          seed_machine=SEED_MACHINE, test=size_limit_free_without_allocations),
]
