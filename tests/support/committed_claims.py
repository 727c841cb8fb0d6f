"""What the claims tests of every study check on its committed bundles: the claims table of each
bundle has the statuses its data supports, with a live figure and CI where it tests anything and
a reason where it cannot."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from workbench.reading.analysis import Analysis, analyse
from workbench.results.store import committed_runs

NT = "not testable here"


@lru_cache(maxsize=None)
def analyses(study_id: str) -> dict[str, Analysis]:
    """Each committed bundle of the study, analysed once per test session, by file name."""
    recs = {Path(r.origin).name: r for r in committed_runs(study_id)}
    if not recs:
        pytest.skip(f"no committed {study_id} bundles")
    return {name: analyse(r) for name, r in recs.items()}


def check_statuses(a: Analysis, expected: dict[str, str]) -> list[dict]:
    """Assert the bundle's claim statuses and the shape of each row; returns the rows."""
    assert not a.errors, a.errors
    assert dict(zip(a.claims["id"], a.claims["status"])) == expected
    rows = a.claims.to_dict("records")
    for r in rows:
        if r["status"] == NT:
            assert r["why"] and not r["why"].startswith("its test"), r
        else:
            assert "[" in r["live"], r  # the live figure with its CI
    return rows
