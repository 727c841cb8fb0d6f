"""The seed's claims, judged on this run: ``SEED_CLAIMS`` and the claims table.

A study declares its seed's findings as data (``SEED_CLAIMS``, a list of :class:`Claim`): a
human ``title``, the seed's sentence (quoted or closely paraphrased, citing the seed), its
figure and machine, where the seed gives a number the claim's quantity is compared with its
``magnitude`` (:class:`Seed`: the figure and its tolerance), and a ``test`` on the run's
analysis tables. The test picks the quantity (a derived row the engine built) and states
the direction with one of this module's judgements (:func:`bound`, :func:`within`,
:func:`outside`, :func:`all_hold`, :func:`agree`, :func:`fact`); it never sets a status
itself. :func:`evaluate` runs every test and returns the claims table that leads the page,
the reports and the notebook, and is in the ``--json`` record.

Statuses (``docs/reading-a-run.md``):

- ``holds``: the live CI supports the seed's finding here, and where the seed gives a
  figure, that figure lies in the live CI (within its tolerance);
- ``direction holds``: the direction holds, but the seed's figure lies outside the live CI:
  the finding holds, not its size ("direction holds; the seed's 32.7% is outside the live CI");
- ``contradicted``: its CI supports the opposite;
- ``inconclusive``: its CI allows both, or something keeps the CI from deciding (measured
  under load, drift not measured, too few samples: the quantity's ``caveat``);
- ``not testable here``: this run cannot test it; ``why`` says what it would need.

A test that raises is reported as ``not testable here`` with the exception as the reason, so
one broken claim never hides the others or the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Callable, Sequence

import pandas as pd

from .derived import MIN_SAMPLES, Derived, fmt_derived, item
from ..data.record import RunRecord

STATUSES = ("holds", "direction holds", "contradicted", "inconclusive", "not testable here")
COLUMNS = ["id", "title", "seed_text", "seed_value", "seed_machine", "status", "live", "why", "direction", "magnitude",
           "sources"]
#: the keys of each claim in the ``--json`` record
JSON_KEYS = ("id", "title", "seed_text", "seed_value", "status", "live", "why", "direction", "magnitude")
#: magnitude: where the seed's figure lies against the live CI
IN_CI, OUTSIDE_CI, NOT_COMPARED = "in the live CI", "outside the live CI", "not compared"


@dataclass(frozen=True)
class Seed:
    """The seed's figure a claim's quantity is compared with, in the quantity's unit, and
    how far from it still counts as the seed's size: ``tolerance`` (absolute, or a fraction
    of ``value`` with ``relative``). ``text`` prints it ("32.7%"); default: the value."""

    value: float
    tolerance: float = 0.0
    relative: bool = False
    text: str = ""

    @property
    def window(self) -> tuple[float, float]:
        tol = abs(self.value) * self.tolerance if self.relative else self.tolerance
        return self.value - tol, self.value + tol

    @property
    def label(self) -> str:
        return self.text or f"{self.value:g}"


@dataclass(frozen=True)
class ClaimResult:
    """A claim's result as the judgements of this module give it (never built by a study)."""

    status: str  # one of STATUSES
    live: str = ""  # the live figure with its CI, e.g. "compute 77% [74, 80] of 92 us"
    why: str = ""  # e.g. "needs >= 8 workers; this machine has 2"
    #: the figures the direction was read from (the seed's magnitude is compared with each)
    quantities: tuple[Derived, ...] = ()


@dataclass(frozen=True)
class Claim:
    id: str  # e.g. "000-overhead-dominates": anchors, tooltips and JSON; people read the title
    seed_text: str  # the seed's sentence, quoted or closely paraphrased, citing the seed
    seed_value: str  # the seed's figure, e.g. "compute 18% of 56 us"
    seed_machine: str
    test: Callable[[dict[str, pd.DataFrame], "RunRecord"], ClaimResult]
    #: what the claim needs of a run's parameters: why a run with ``params`` cannot test it,
    #: or None (the form warns before such a run starts: :func:`untestable`)
    needs: Callable[[dict], str | None] | None = None
    title: str = ""  # what the claim says, in a few words ("IREE's runtime overhead dominates")
    magnitude: Seed | None = None  # the seed's figure for the test's quantity, where it gives one


# --- the judgements a claim's test returns ----------------------------------------------------------

def not_testable(why: str, live: str = "") -> ClaimResult:
    return ClaimResult("not testable here", live, why)


def undecided(why: str, live: str = "", quantities: tuple[Derived, ...] = ()) -> ClaimResult:
    """Inconclusive for a reason no CI settles (a mixed outcome, a missing piece)."""
    return ClaimResult("inconclusive", live, why, quantities)


def retold(res: ClaimResult, live: str | None = None, why: str | None = None) -> ClaimResult:
    """The same judgement with its live figure or its reason said another way."""
    return replace(res, live=res.live if live is None else live, why=res.why if why is None else why)


def unsettled(d: Derived | dict, live: str, why: str = "") -> ClaimResult | None:
    """The claim's result when the quantity cannot decide it whatever its CI says, else None:
    not testable when it is not meaningful; inconclusive when a caveat keeps its CI from
    deciding (under load, drift not measured, too few samples, an interval short of 95%).
    Every judgement of a derived quantity asks this first."""
    d = item(d)
    if d.status == "not meaningful" or not math.isfinite(d.point):
        return ClaimResult("not testable here", live, d.why or "the live figure is not meaningful", (d,))
    if d.caveat or min(d.n_a, d.n_b) < MIN_SAMPLES:
        return ClaimResult("inconclusive", live, why or d.caveat or d.why, (d,))
    return None


def bound(d: Derived | dict, *, above: float | None = None, below: float | None = None, live: str = "",
          why: str = "", contradicted_why: str = "") -> ClaimResult:
    """A claim that a quantity lies above ``above`` (or below ``below``): holds when its whole
    CI does, contradicted when its whole CI lies on the other side, inconclusive when it
    straddles the bound or :func:`unsettled` says the CI cannot decide. ``live`` defaults to
    the formatted quantity; ``contradicted_why`` is said when it is contradicted."""
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
        return ClaimResult("inconclusive", live, why or f"the CI includes {limit:g}", (d,))
    holds = over if above is not None else under
    return ClaimResult("holds" if holds else "contradicted", live, why if holds else (contradicted_why or why), (d,))


def within(d: Derived | dict, lo: float, hi: float, *, live: str = "", apart: str = "") -> ClaimResult:
    """A claim that a quantity is "about" something: holds when its whole CI lies in [lo, hi],
    contradicted (``apart`` says why) when wholly outside, else inconclusive."""
    d = item(d)
    live = live or fmt_derived(d, status=False)
    early = unsettled(d, live)
    if early is not None:
        return early
    if lo <= d.lo and d.hi <= hi:
        return ClaimResult("holds", live, "", (d,))
    if d.hi < lo or d.lo > hi:
        return ClaimResult("contradicted", live, apart or f"the whole CI lies outside [{lo:.3g}, {hi:.3g}]", (d,))
    return ClaimResult("inconclusive", live, f"the CI reaches beyond [{lo:.3g}, {hi:.3g}]", (d,))


def outside(d: Derived | dict, lo: float, hi: float, *, live: str = "", why: str = "") -> ClaimResult:
    """A claim that a quantity leaves [lo, hi]: holds when its whole CI lies outside it,
    contradicted when its whole CI lies inside, else inconclusive."""
    d = item(d)
    live = live or fmt_derived(d, status=False)
    early = unsettled(d, live)
    if early is not None:
        return early
    if d.hi < lo or d.lo > hi:
        return ClaimResult("holds", live, why or f"the CI leaves [{lo:g}, {hi:g}]", (d,))
    if lo <= d.lo and d.hi <= hi:
        return ClaimResult("contradicted", live, f"the whole CI lies in [{lo:g}, {hi:g}]", (d,))
    return ClaimResult("inconclusive", live, f"the CI straddles an end of [{lo:g}, {hi:g}]", (d,))


def apart(a: Derived | dict, b: Derived | dict, *, live: str, why: str = "") -> ClaimResult:
    """A claim that quantity ``a`` lies above ``b`` (both figures of this run): holds when a's
    whole CI lies above b's, contradicted when wholly below, inconclusive when they overlap (a
    conservative test: two 95% CIs that do not overlap differ at well under 5%) or either
    cannot decide (:func:`unsettled`)."""
    a, b = item(a), item(b)
    for d in (a, b):
        early = unsettled(d, live)
        if early is not None:
            return retold(early, why="; ".join(x for x in (early.why, why) if x))
    if a.lo > b.hi:
        return ClaimResult("holds", live, why, (a, b))
    if a.hi < b.lo:
        return ClaimResult("contradicted", live, why, (a, b))
    return ClaimResult("inconclusive", live, "; ".join(x for x in ("the two CIs overlap", why) if x), (a, b))


def fact(ok: bool | None, live: str, why: str = "") -> ClaimResult:
    """A claim about a checked fact, not a timing (a formulation passed its check, failures
    were seen): holds when ``ok``, contradicted when not, inconclusive when None."""
    return ClaimResult("inconclusive" if ok is None else "holds" if ok else "contradicted", live, why)


def all_hold(results: Sequence[ClaimResult], live: str, what: str = "") -> ClaimResult:
    """Several parts of one claim: holds when all hold, not testable when one is, contradicted
    when one is (``what`` says why), else inconclusive with the parts' reasons."""
    statuses = [r.status for r in results]
    figures = tuple(d for r in results for d in r.quantities)
    if all(s in ("holds", "direction holds") for s in statuses):
        return ClaimResult("holds", live, "", figures)
    if "not testable here" in statuses:
        return ClaimResult("not testable here", live, next(r.why for r in results if r.status == "not testable here"),
                           figures)
    if "contradicted" in statuses:
        return ClaimResult("contradicted", live, what or next(r.why for r in results if r.status == "contradicted"),
                           figures)
    return ClaimResult("inconclusive", live, "; ".join(dict.fromkeys(r.why for r in results if r.why)), figures)


def agree(parts: Sequence[tuple[str, ClaimResult]]) -> ClaimResult:
    """One result from one per setting (a run's modes, worker counts, collectives): their
    common status, else inconclusive with where each held."""
    live = "; ".join(f"{m}: {r.live}" if len(parts) > 1 else r.live for m, r in parts)
    statuses = {r.status for _m, r in parts}
    whys = [f"{m}: {r.why}" if len(parts) > 1 else r.why for m, r in parts if r.why]
    figures = tuple(d for _m, r in parts for d in r.quantities)
    if len(statuses) == 1:
        return ClaimResult(statuses.pop(), live, "; ".join(dict.fromkeys(whys)), figures)
    return ClaimResult("inconclusive", live, "; ".join(f"{m}: {r.status}" for m, r in parts), figures)


# --- the claims table ----------------------------------------------------------------------------

def magnitude(claim: Claim, res: ClaimResult) -> tuple[str, str]:
    """(where the seed's figure lies against the live CIs, the sentence that says so): outside
    when any figure the direction was read from excludes it (within its tolerance)."""
    seed = claim.magnitude
    figures = [d for d in res.quantities if math.isfinite(d.lo) and math.isfinite(d.hi)]
    if seed is None:
        return "", ""
    if not figures:
        return NOT_COMPARED, ""
    lo, hi = seed.window
    missed = [d for d in figures if not (lo <= d.hi and d.lo <= hi)]
    if not missed:
        cis = "; ".join(fmt_derived(d, status=False) for d in figures)
        plural = "s" if len(figures) > 1 else ""
        if all(d.lo <= seed.value <= d.hi for d in figures):
            return IN_CI, f"the seed's {seed.label} lies in the live CI{plural} {cis}"
        return IN_CI, f"the seed's {seed.label} lies within its tolerance ({lo:g} to {hi:g}) of the live CI{plural} {cis}"
    cis = "; ".join(fmt_derived(d, status=False) for d in missed[:3])
    which = "" if len(figures) == 1 else f" of {len(missed)} of {len(figures)} figures"
    tol = f", even with its tolerance ({lo:g} to {hi:g})" if hi > lo else ""
    return OUTSIDE_CI, f"the seed's {seed.label} is outside the live CI{which} {cis}{tol}"


def judged(claim: Claim, res: ClaimResult) -> dict[str, str]:
    """The claims-table row of one claim's result: the direction's status, and where the seed
    gives a figure, whether its size holds too (no claim holds while the seed's figure lies
    outside its live CI)."""
    where, said = magnitude(claim, res)
    status, why = res.status, res.why
    if said:
        if status == "holds" and where == OUTSIDE_CI:
            status, why = "direction holds", "; ".join(x for x in ("direction holds", said, res.why) if x)
        elif status == "holds":
            why = "; ".join(x for x in ("direction and size hold", said, res.why) if x)
        elif status in ("contradicted", "inconclusive"):
            why = "; ".join(x for x in (res.why, said) if x)
    return {"status": status, "live": res.live, "why": why, "direction": res.status, "magnitude": where,
            # each figure's variants (a|b), figures apart by ";": a claim's quantity is never a null control
            "sources": ";".join(dict.fromkeys(d.sources for d in res.quantities if d.sources))}


def _result(claim: Claim, tables: dict[str, pd.DataFrame], rec: RunRecord) -> ClaimResult:
    try:
        res = claim.test(tables, rec)
        if not isinstance(res, ClaimResult) or res.status not in STATUSES:
            return not_testable(f"its test returned {res!r}, not a ClaimResult with a status of {STATUSES}")
        return res
    except Exception as exc:  # a broken test must not hide the other claims
        return not_testable(f"its test failed on this run ({type(exc).__name__}: {exc})")


def evaluate(study: ModuleType | None, tables: dict[str, pd.DataFrame], rec: "RunRecord") -> pd.DataFrame:
    """The claims table of a run: one row per claim in ``study.SEED_CLAIMS`` (columns
    :data:`COLUMNS`); empty for a study without claims."""
    rows = []
    for claim in getattr(study, "SEED_CLAIMS", None) or []:
        rows.append({"id": claim.id, "title": claim.title or claim.id, "seed_text": claim.seed_text,
                     "seed_value": claim.seed_value, "seed_machine": claim.seed_machine,
                     **judged(claim, _result(claim, tables, rec))})
    return pd.DataFrame(rows, columns=COLUMNS)


def untestable(study: ModuleType | None, params: dict) -> list[tuple[str, str]]:
    """(claim title, why) for each of the study's claims that a run with ``params`` cannot
    test, by the claims' declared ``needs``."""
    out = []
    for claim in getattr(study, "SEED_CLAIMS", None) or []:
        try:
            why = claim.needs(params) if claim.needs is not None else None
        except (KeyError, TypeError, ValueError):
            why = None  # parameters of another shape: the run itself will say
        if why:
            out.append((claim.title or claim.id, why))
    return out


def seed_machine(claims: pd.DataFrame) -> str:
    """The machine most of the seed's figures were measured on (said once above the table;
    a row measured elsewhere names its own), or '' for no claims."""
    machines = claims["seed_machine"].value_counts(sort=True) if len(claims) else pd.Series(dtype=int)
    return str(machines.index[0]) if len(machines) else ""


def display(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims table as people read it (page, report): each claim by its title, the verdict
    on it and the live figure first, the seed's figure and sentence after; the id last (for
    anchors and searching). The seed's machine is said once (:func:`seed_machine`); only a
    figure from another machine names it in its cell."""
    common = seed_machine(claims)
    figure = [v if m == common else f"{v} ({m})" for v, m in zip(claims["seed_value"], claims["seed_machine"])]
    titles = claims["title"] if "title" in claims else claims["id"]
    return pd.DataFrame({"claim": titles, "here": claims["status"], "live figure (95% CI)": claims["live"],
                         "why": claims["why"], "seed's figure": figure, "seed's claim": claims["seed_text"],
                         "id": claims["id"]})


def untested_apart(shown: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows of :func:`display` worth a row in a run's lead, and the titles of the claims the
    run could not test and has no figure for (a smoke run has several: a row each of nothing
    but "not testable here" made the page a screen taller; the lead names them in one line)."""
    empty = (shown["here"] == "not testable here") & (shown["live figure (95% CI)"].fillna("").str.strip() == "")
    return shown[~empty], shown.loc[empty, "claim"].tolist()


#: the columns of :func:`display` a run's lead shows (page, short issue report, notebook): the
#: status and both figures; the reasons and the seed's words (:data:`WHY_COLUMNS`) on demand
LEAD_COLUMNS = ["claim", "here", "live figure (95% CI)", "seed's figure"]
WHY_COLUMNS = ["claim", "why", "seed's claim"]


def tally(claims: pd.DataFrame) -> str:
    """The claims table in one phrase: "of the seed's 6 claims: 2 hold, 1 holds in direction
    only, 3 not testable here" ("" for none)."""
    if claims is None or not len(claims):
        return ""
    words = {"holds": ("holds", "hold"), "direction holds": ("holds in direction only", "hold in direction only"),
             "contradicted": ("contradicted",) * 2, "inconclusive": ("inconclusive",) * 2,
             "not testable here": ("not testable here",) * 2}
    counts = claims["status"].value_counts()
    parts = [f"{int(counts[s])} {words[s][int(counts[s] != 1)]}" for s in STATUSES if s in counts]
    return f"of the seed's {len(claims)} claim{'s' if len(claims) != 1 else ''}: " + ", ".join(parts)


def to_json(claims: pd.DataFrame) -> list[dict[str, str]]:
    """The claims table as the ``--json`` record's ``"claims"`` list."""
    return [{k: str(r.get(k, "") or "") for k in JSON_KEYS} for r in claims.to_dict("records")]


def check_claims(study: ModuleType) -> None:
    """Registry check: ``SEED_CLAIMS`` is a list of :class:`Claim` with unique ids and a title each."""
    claims = getattr(study, "SEED_CLAIMS", None)
    if claims is None:
        return
    if not isinstance(claims, (list, tuple)) or not all(isinstance(c, Claim) for c in claims):
        raise ImportError(f"study {study.ID}: SEED_CLAIMS must be a list of workbench.evidence.claims.Claim")
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ImportError(f"study {study.ID}: SEED_CLAIMS has duplicate ids {sorted({i for i in ids if ids.count(i) > 1})}")
    untitled = [c.id for c in claims if not c.title.strip()]
    if untitled:
        raise ImportError(f"study {study.ID}: claims {untitled} need a title (what the claim says, in words)")
