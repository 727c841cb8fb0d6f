"""The seed's claims (seed 000, IREE issue #24011), each with its test on the analysis tables.

Every test reads the tables of :mod:`.analysis` only; the claims table that
:func:`workbench.claims.evaluate` builds from them leads the page, the reports and the notebook.
"""

from __future__ import annotations

import pandas as pd

from workbench.claims import Claim, ClaimResult, bound, not_testable
from workbench.derived import fmt_derived

SEED_MACHINE = "32-core AMD Zen4 7975WX, 32 workers"
#: a compute share below this means runtime overhead takes most of each iteration
DOMINATES_PCT = 50.0


def overhead_dominates(tbls: dict[str, pd.DataFrame], rec) -> ClaimResult:
    """IREE's compute share per iteration, from one profiler's own iterations (never a profile's
    compute against another run's total), at the seed's shape (c=8) where it was profiled, at
    the most workers profiled; ireeperf first, the lightest profiler (Tracy's zones slow every
    dispatch down)."""
    over = tbls.get("overhead")
    if over is None or not len(over):
        return not_testable("needs a profile of IREE's iterations (experiments=phases with profiler=ireeperf or "
                            "tracy); this run has none")
    shares = over[over["quantity"] == "compute share"]
    at_c8 = shares[shares["c"] == 8]
    pick = at_c8 if len(at_c8) else shares
    pick = pick[pick["w"] == pick["w"].max()].sort_values("source", key=lambda s: s != "ireeperf").iloc[0]
    total = over[(over["capture"] == pick["capture"]) & (over["quantity"] == "total")].iloc[0]
    live = (f"compute {fmt_derived(pick, status=False)} of a {fmt_derived(total, status=False)} iteration "
            f"({pick['capture']}, {int(pick['iterations'])} steady-state iterations)")
    res = bound(pick, below=DOMINATES_PCT, live=live)
    notes = [res.why] if res.why else []
    if int(pick["c"]) != 8:
        notes.append("the seed's c=8 was not profiled in this run")
    if int(pick["w"]) < 32:
        notes.append(f"at {int(pick['w'])} workers (the seed: 32)")
    return ClaimResult(res.status, res.live, "; ".join(notes))


SEED_CLAIMS = [
    Claim(id="000-overhead-dominates",
          seed_text="\"only 18% of wall time is compute; 82% is IREE runtime machinery\": the gap to MKL is "
                    "dominated by runtime overhead, not compute (seed 000, Remaining gap to MKL)",
          seed_value="compute 18% of the iteration (c=8 fixed; Tracy, one traced iteration)",
          seed_machine=SEED_MACHINE, test=overhead_dominates),
]
