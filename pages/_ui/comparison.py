"""Two runs of a study, B against A: the cached comparison, its forest plot and tables, and the
"Compare with..." picker."""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from workbench.presentation import charts as wbcharts
from workbench.reading import comparison as compare
from workbench.results.catalog import Catalog, Header, titles
from workbench.data.record import RunRecord
from workbench.base.untrusted import escape

from .run import run_key
from .tables import show_chart


@st.cache_resource(max_entries=16, show_spinner="comparing the runs...")
def _comparison(key_a: tuple, key_b: tuple, n_runs: int, _a: RunRecord, _b: RunRecord, _runs: Catalog) -> dict:
    """The A/B comparison, once per pair of run states and number of runs (A/A runs among
    them change the verdicts); it bootstraps every common variant."""
    return compare.compare_runs(_a, _b, compare.history(_a, _b, _runs.store, _runs.committed(_a.study)))


def comparison(a: RunRecord, b: RunRecord, runs: Catalog, n_runs: int) -> dict:
    """B against A (:func:`workbench.reading.comparison.compare_runs`), with the A/A runs of the store and
    the committed bundles; ``n_runs``: how many runs there are (a new one may be an A/A pair)."""
    return _comparison(run_key(a), run_key(b), n_runs, a, b, runs)


def show_comparison(cmp: dict) -> None:
    """An A/B comparison: its forest plot of B/A per variant with CIs, then the verdict and
    the tables (:func:`workbench.reading.comparison.markdown`)."""
    forest = compare.forest_table(cmp)
    if forest["ratio"].notna().any():
        show_chart(wbcharts.forest(forest))
    else:
        st.caption("No variant has a ratio to draw: none has valid samples in both runs.")
    st.markdown(compare.markdown(cmp, level=4, reproduce=False))


def compare_with(study: ModuleType, runs: Catalog, header: Header, headers: list[Header], slot) -> None:
    """"Compare with...": another run of this study against the one shown (A), as an A/B
    forest plot below the run's buttons (``slot``)."""
    others = [h.run_id for h in headers if h.run_id != header.run_id]
    names = {i: f"{i} · {t}" for i, t in titles(headers).items()}  # the run id first: alike labels told apart
    other = st.selectbox("Compare with...", others, index=None, format_func=names.__getitem__,
                         placeholder="Compare with another run of this study...", key=f"{study.ID}:cmp:{header.run_id}",
                         label_visibility="collapsed")
    if not other:
        return
    a, b = runs.load(header.run_id), runs.load(other)
    with slot.expander(f"A/B: {escape(names[other])} (B) against the run shown (A)", expanded=True):
        try:
            show_comparison(comparison(a, b, runs, len(headers)))
        except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what no analysis expects
            st.error(f"The comparison failed: {escape(type(exc).__name__)}: {escape(exc)}")
