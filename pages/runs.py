"""Runs: every stored and committed run, told apart (label, origin, machine, time, tags, note);
import a bundle, A/B-compare two runs, tag, annotate, delete and export one."""

import pandas as pd
import streamlit as st

from pages._ui import catalog, downloads, get_store, manage_run, run_key, show_table
from workbench import compare
from workbench.catalog import titles
from workbench.env import summary_line
from workbench.store import StoreError, parse_bundle
from workbench.registry import registry
from workbench.untrusted import escape, safe_stem


@st.cache_resource(max_entries=16, show_spinner=False)
def _comparison(key_a: tuple, key_b: tuple, n_runs: int, _a, _b) -> dict:
    """The A/B comparison, once per pair of run states and number of runs (A/A runs among
    them change the verdicts); it bootstraps every common variant."""
    return compare.compare_runs(_a, _b, compare.history(_a, _b, store, runs.committed(_a.study)))


@st.cache_resource(max_entries=32, show_spinner=False)
def _analysed(key: tuple, _rec):
    """A run's analysis, once per run state (study verdicts analyse the whole run)."""
    from workbench.analysis import analyse

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


with tab_runs:
    st.subheader("One run: verdict, tags and note, report")
    one = st.selectbox("Run", ids, format_func=titles([by_id[i] for i in ids], prefix_study=True).__getitem__,
                       key="runs:one")
    if one:
        rec = load(one)
        try:
            a = _analysed(run_key(rec), rec)
            verdict = a.verdict
        except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what no analysis expects
            a, verdict = None, f"(none: {escape(type(exc).__name__)}: {escape(exc)})"
        st.caption(f"Run {escape(one, 'code')} · {escape(by_id[one].origin)} ({escape(by_id[one].source)}) · "
                   f"{escape(summary_line(rec.env))}")
        st.markdown(f"**Verdict:** {verdict}")
        with st.columns([2, 5])[0]:
            manage_run(store, by_id[one], key=f"runs:manage:{one}")
        with st.expander("Share this run"):
            downloads(rec, key=f"runs:{one}", a=a)

with tab_ab:
    st.subheader("A/B comparison")
    # By default two runs of one study with the fewest differing parameters (same machine first,
    # then the newest pair), B the newer; nothing when no study has two runs.
    pair = compare.most_similar_pair([h for h in headers if h.run_id in set(ids)])
    c1, c2 = st.columns(2)
    # the run id's tail too: two runs of one configuration in one minute have the same title
    title = lambda i: f"{by_id[i].study}: {by_id[i].title()} · {i[-6:]}"  # noqa: E731
    a_id = c1.selectbox("A (baseline)", ids, index=ids.index(pair[0]) if pair else None, key="runs:a",
                        format_func=title, placeholder="pick a run")
    b_id = c2.selectbox("B", ids, index=ids.index(pair[1]) if pair else None, key="runs:b", format_func=title,
                        placeholder="pick a run")
    if a_id and b_id and a_id != b_id:
        a, b = load(a_id), load(b_id)
        if a.study != b.study:
            st.error(f"Not compared: A is a run of {escape(a.study)} and B of {escape(b.study)}; only runs of one "
                     "study are compared.")
        else:
            try:
                cmp = _comparison(run_key(a), run_key(b), len(headers), a, b)
            except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what no analysis expects
                st.error(f"The comparison failed: {escape(type(exc).__name__)}: {escape(exc)}")
            else:
                st.markdown(compare.markdown(cmp, level=3, reproduce=False))
                with st.expander("Reproduce A and B"):
                    st.code(f"# A\n{cmp['reproduce_a']}\n# B\n{cmp['reproduce_b']}", language="sh")
                st.download_button("Download comparison (Markdown)", compare.markdown(cmp),
                                   file_name=f"compare-{safe_stem(a_id)}-{safe_stem(b_id)}.md", key="runs:cmpdl")
    elif pair is None:
        st.caption("No two runs of one study to compare yet: run a study twice (or `python -m workbench ab`).")
    else:
        st.caption("Pick two different runs of one study to compare.")
