"""The seed's claims, checked on this run: ``SEED_CLAIMS`` and the claims table.

A study declares its seed's findings as data (``SEED_CLAIMS``, a list of :class:`Claim`): the
seed's sentence (quoted or closely paraphrased, citing the seed), its figure and machine, and
a test on the run's analysis tables. :func:`evaluate` runs every test and returns the claims
table that leads the page, the reports and the notebook, and is in the ``--json`` record.

A test reads tables only (``analyze`` already did the arithmetic, derived quantities with their
CIs included) and returns a :class:`ClaimResult` with one of four statuses:

- ``holds``: the live figure's CI supports the seed's finding here;
- ``contradicted``: its CI supports the opposite;
- ``inconclusive``: its CI allows both (state the figure anyway);
- ``not testable here``: this run cannot test it (a missing experiment, too few workers on
  this machine, a profile with too few iterations); ``why`` says what it would need.

A test that raises is reported as ``not testable here`` with the exception as the reason, so
one broken claim never hides the others or the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import pandas as pd

from .derived import MIN_SAMPLES, Derived, fmt_derived, item
from .record import RunRecord

STATUSES = ("holds", "contradicted", "inconclusive", "not testable here")
COLUMNS = ["id", "seed_text", "seed_value", "seed_machine", "status", "live", "why"]
#: the keys of each claim in the ``--json`` record
JSON_KEYS = ("id", "seed_text", "seed_value", "status", "live", "why")


@dataclass(frozen=True)
class ClaimResult:
    status: str  # one of STATUSES
    live: str = ""  # the live figure with its CI, e.g. "compute 77% [74, 80] of 92 us"
    why: str = ""  # e.g. "needs >= 8 workers; this machine has 2"


@dataclass(frozen=True)
class Claim:
    id: str  # e.g. "000-overhead-dominates"
    seed_text: str  # the seed's sentence, quoted or closely paraphrased, citing the seed
    seed_value: str  # the seed's figure, e.g. "compute 18% of 56 us"
    seed_machine: str
    test: Callable[[dict[str, pd.DataFrame], "RunRecord"], ClaimResult]
    #: what the claim needs of a run's parameters: why a run with ``params`` cannot test it,
    #: or None (the form warns before such a run starts: :func:`untestable`)
    needs: Callable[[dict], str | None] | None = None


def not_testable(why: str, live: str = "") -> ClaimResult:
    return ClaimResult("not testable here", live, why)


def unsettled(d: Derived | dict, live: str, why: str = "") -> ClaimResult | None:
    """The claim's result when the quantity cannot decide it whatever its CI says, else None:
    not testable when it is not meaningful; inconclusive when it is inconclusive for a reason
    other than where its CI lies (too few samples: a CI of 3 proves nothing; measured under
    load). Every claim test that reads a derived quantity's CI asks this first."""
    d = item(d)
    if d.status == "not meaningful" or not math.isfinite(d.point):
        return not_testable(d.why or "the live figure is not meaningful", live)
    if d.status == "inconclusive" and (min(d.n_a, d.n_b) < MIN_SAMPLES or not d.why.startswith("the CI includes")):
        return ClaimResult("inconclusive", live, why or d.why)
    return None


def bound(d: Derived | dict, *, above: float | None = None, below: float | None = None, live: str = "",
          why: str = "") -> ClaimResult:
    """A claim that a derived quantity lies above ``above`` (or below ``below``): holds when its
    whole CI does, contradicted when its whole CI lies on the other side, inconclusive when the
    CI straddles the bound, or the quantity has too few samples for a CI or was measured under
    load (whatever its bootstrap says), not testable when the quantity is not meaningful.
    ``live`` defaults to the formatted quantity."""
    d = item(d)
    live = live or fmt_derived(d, status=False)
    early = unsettled(d, live, why)
    if early is not None:
        return early
    if (above is None) == (below is None):
        raise ValueError("bound() takes exactly one of above= or below=")
    limit = above if above is not None else below
    over, under = d.lo > limit, d.hi < limit
    if not (over or under):
        return ClaimResult("inconclusive", live, why or f"the CI includes {limit:g}")
    holds = over if above is not None else under
    return ClaimResult("holds" if holds else "contradicted", live, why)


def evaluate(study: ModuleType | None, tables: dict[str, pd.DataFrame], rec: "RunRecord") -> pd.DataFrame:
    """The claims table of a run: one row per claim in ``study.SEED_CLAIMS`` (columns
    :data:`COLUMNS`); empty for a study without claims."""
    rows = []
    for claim in getattr(study, "SEED_CLAIMS", None) or []:
        try:
            res = claim.test(tables, rec)
            if not isinstance(res, ClaimResult) or res.status not in STATUSES:
                res = not_testable(f"its test returned {res!r}, not a ClaimResult with a status of {STATUSES}")
        except Exception as exc:  # a broken test must not hide the other claims
            res = not_testable(f"its test failed on this run ({type(exc).__name__}: {exc})")
        rows.append({"id": claim.id, "seed_text": claim.seed_text, "seed_value": claim.seed_value,
                     "seed_machine": claim.seed_machine, "status": res.status, "live": res.live, "why": res.why})
    return pd.DataFrame(rows, columns=COLUMNS)


def untestable(study: ModuleType | None, params: dict) -> list[tuple[str, str]]:
    """(claim id, why) for each of the study's claims that a run with ``params`` cannot test,
    by the claims' declared ``needs``."""
    out = []
    for claim in getattr(study, "SEED_CLAIMS", None) or []:
        try:
            why = claim.needs(params) if claim.needs is not None else None
        except (KeyError, TypeError, ValueError):
            why = None  # parameters of another shape: the run itself will say
        if why:
            out.append((claim.id, why))
    return out


def seed_machine(claims: pd.DataFrame) -> str:
    """The machine most of the seed's figures were measured on (said once above the table;
    a row measured elsewhere names its own), or '' for no claims."""
    machines = claims["seed_machine"].value_counts(sort=True) if len(claims) else pd.Series(dtype=int)
    return str(machines.index[0]) if len(machines) else ""


def display(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims table as people read it (page, report): the verdict on each claim and the
    live figure first, the seed's figure and sentence after. The seed's machine is said once
    (:func:`seed_machine`); only a figure from another machine names it in its cell."""
    common = seed_machine(claims)
    figure = [v if m == common else f"{v} ({m})" for v, m in zip(claims["seed_value"], claims["seed_machine"])]
    return pd.DataFrame({"claim": claims["id"], "here": claims["status"], "live figure (95% CI)": claims["live"],
                         "why": claims["why"], "seed's figure": figure, "seed's claim": claims["seed_text"]})


def untested_apart(shown: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows of :func:`display` worth a row in a run's lead, and the ids of the claims the run
    could not test and has no figure for (a smoke run has several: a row each of nothing but
    "not testable here" made the page a screen taller; the lead names them in one line)."""
    empty = (shown["here"] == "not testable here") & (shown["live figure (95% CI)"].fillna("").str.strip() == "")
    return shown[~empty], shown.loc[empty, "claim"].tolist()


#: the columns of :func:`display` a run's lead shows (page, short issue report, notebook): the
#: status and both figures; the reasons and the seed's words (:data:`WHY_COLUMNS`) on demand
LEAD_COLUMNS = ["claim", "here", "live figure (95% CI)", "seed's figure"]
WHY_COLUMNS = ["claim", "why", "seed's claim"]


def to_json(claims: pd.DataFrame) -> list[dict[str, str]]:
    """The claims table as the ``--json`` record's ``"claims"`` list."""
    return [{k: str(r[k]) for k in JSON_KEYS} for r in claims.to_dict("records")]


def check_claims(study: ModuleType) -> None:
    """Registry check: ``SEED_CLAIMS`` is a list of :class:`Claim` with unique ids."""
    claims = getattr(study, "SEED_CLAIMS", None)
    if claims is None:
        return
    if not isinstance(claims, (list, tuple)) or not all(isinstance(c, Claim) for c in claims):
        raise ImportError(f"study {study.ID}: SEED_CLAIMS must be a list of workbench.claims.Claim")
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ImportError(f"study {study.ID}: SEED_CLAIMS has duplicate ids {sorted({i for i in ids if ids.count(i) > 1})}")
