"""Runs: every stored and committed run, told apart (label, origin, machine, time, tags, note);
import a bundle, A/B-compare two runs, tag, annotate, delete and export one."""

import pandas as pd
import streamlit as st

from pages._ui import (catalog, comparison, downloads, get_store, manage_run, run_key, show_comparison, show_table,
                       shown_defensively)
from workbench.reading import comparison as compare
from workbench.results.catalog import titles
from workbench.base.env import summary_line
from workbench.results.store import StoreError, parse_bundle
from workbench.seam.registry import registry
from workbench.base.untrusted import escape, safe_stem


@st.cache_resource(max_entries=32, show_spinner=False)
def _analysed(key: tuple, _rec):
    """A run's analysis, once per run state (study verdicts analyse the whole run)."""
    from workbench.reading.analysis import analyse

    return analyse(_rec, registry().get(_rec.study))


st.title("Runs")
store = get_store()
if store is None:
    st.stop()

runs = catalog(store)
headers = runs.headers()
tab_runs, tab_ab, tab_import = st.tabs(["Runs", "A/B comparison", "Import a bundle"])
with tab_import:
    up = st.file_uploader("Result bundle", type=["json"], key="runs:import")
    if up is not None and st.button("Import", key="runs:do-import"):
        try:
            rec = parse_bundle(up.getvalue(), origin="bundle:upload", what=f"{up.name}")
            if store.import_run(rec):  # one transaction: all of the run, or nothing
                st.success(f"Imported {escape(rec.run_id, 'code')} ({escape(rec.study)}) from "
                           f"{escape(summary_line(rec.env))}")
            else:
                st.info(f"Run {escape(rec.run_id, 'code')} is already in the store.")
        except StoreError as exc:
            st.error(f"Not imported: {escape(exc)}")
        except Exception as exc:  # noqa: BLE001 - an upload must never replace the page with a traceback
            st.error(f"Not imported: {escape(up.name)} could not be read ({escape(type(exc).__name__)}: {escape(exc)})")

if not headers:
    tab_runs.info("No runs yet: run a study first.")
    st.stop()
by_id = {h.run_id: h for h in headers}
df = pd.DataFrame([{"run_id": h.run_id, "study": h.study, "label": h.label or "defaults", "origin": h.origin,
                    "machine": h.machine, "created": h.when(), "status": h.status, "variants": h.variants,
                    "failed_checks": h.failed_checks, "tags": " ".join(h.tags), "note": h.note,
                    "source": h.source} for h in headers])
studies = ["(all)"] + sorted(df["study"].unique())
pick = tab_runs.selectbox("Study", studies, key="runs:study")
view = df if pick == "(all)" else df[df["study"] == pick]
with tab_runs:
    show_table(view, key="runs:table", max_columns=12, first=("run_id", "study", "label", "origin", "machine"))


def load(run_id):
    return runs.load(run_id)


ids = list(view["run_id"])


def _show_comparison(a_id: str, b_id: str) -> None:
    """B against A, two runs of one study: the forest plot, the verdict and the tables."""
    cmp = comparison(load(a_id), load(b_id), runs, len(headers))
    show_comparison(cmp)
    with st.expander("Reproduce A and B"):
        st.code(f"# A\n{cmp['reproduce_a']}\n# B\n{cmp['reproduce_b']}", language="sh")
    st.download_button("Download comparison (Markdown)", compare.markdown(cmp),
                       file_name=f"compare-{safe_stem(a_id)}-{safe_stem(b_id)}.md", key="runs:cmpdl")


with tab_runs:
    st.subheader("One run: verdict, tags and note, report")
    one = st.selectbox("Run", ids, format_func=titles([by_id[i] for i in ids], prefix_study=True).__getitem__,
                       key="runs:one")
    if one:
        def show_one() -> None:
            rec = load(one)
            try:
                a = _analysed(run_key(rec), rec)
                verdict = a.verdict
            except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what no analysis expects
                a, verdict = None, f"(none: {escape(type(exc).__name__)}: {escape(exc)})"
            st.caption(f"Run {escape(one, 'code')} · {escape(by_id[one].origin)} ({escape(by_id[one].source)}) · "
                       f"{escape(summary_line(rec.env))}")
            st.markdown(f"**Verdict:** {verdict}")
            with st.expander("Share this run"):
                downloads(rec, key=f"runs:{one}", a=a)

        with st.columns([2, 5])[0]:
            manage_run(store, by_id[one], key=f"runs:manage:{one}")  # a bad run can still be deleted
        shown_defensively(show_one, f"Run {one}")

with tab_ab:
    st.subheader("A/B comparison")
    # Runs of one study: the study first, then A and B among its runs. By default the two runs
    # with the fewest differing parameters (same machine first, then the newest pair), B the newer.
    pair = compare.most_similar_pair(headers)
    studies_with_pairs = [sid for sid in sorted({h.study for h in headers})
                          if sum(h.study == sid for h in headers) >= 2]
    if not studies_with_pairs:
        st.caption("No two runs of one study to compare yet: run a study twice (or `python -m workbench ab`).")
        st.stop()
    first = by_id[pair[0]].study if pair else studies_with_pairs[0]
    c0, c1, c2 = st.columns([1, 2, 2])
    study_id = c0.selectbox("Study", studies_with_pairs, index=studies_with_pairs.index(first), key="runs:ab-study")
    mine = [h for h in headers if h.study == study_id]
    ids_ab = [h.run_id for h in mine]
    pair = compare.most_similar_pair(mine) or (ids_ab[1], ids_ab[0])
    # the run id first in every label: two runs of one label and machine minutes apart read alike otherwise,
    # and a long label is cut at the box's end
    names = {i: f"{i} · {t}" for i, t in titles(mine).items()}
    a_id = c1.selectbox("A (baseline)", ids_ab, index=ids_ab.index(pair[0]), key=f"runs:a:{study_id}",
                        format_func=names.__getitem__)
    b_id = c2.selectbox("B", ids_ab, index=ids_ab.index(pair[1]), key=f"runs:b:{study_id}", format_func=names.__getitem__)
    if a_id == b_id:
        st.caption("Pick two different runs to compare.")
        st.stop()
    shown_defensively(lambda: _show_comparison(a_id, b_id), f"The comparison of {a_id} and {b_id}")
