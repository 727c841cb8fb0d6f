"""Runs: every stored and committed run, told apart (label, origin, machine, time, tags, note);
import a bundle, A/B-compare two runs, tag, annotate, delete and export one."""

import pandas as pd
import streamlit as st

from pages._ui import catalog, downloads, get_store, manage_run, run_key, show_table
from workbench import report
from workbench.env import summary_line
from workbench.store import StoreError, parse_bundle
from workbench.study import registry
from workbench.untrusted import escape, safe_stem


@st.cache_resource(max_entries=16, show_spinner=False)
def _compare_text(key_a: tuple, key_b: tuple, _a, _b) -> str:
    """The A/B Markdown, once per pair of run states (it bootstraps every common variant)."""
    return report.compare_markdown(_a, _b)


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
    one = st.selectbox("Run", ids, format_func=lambda i: f"{by_id[i].study}: {by_id[i].title()}", key="runs:one")
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
        manage_run(store, by_id[one], key=f"runs:manage:{one}")
        with st.expander("Share this run"):
            downloads(rec, key=f"runs:{one}", a=a)

with tab_ab:
    st.subheader("A/B comparison")
    c1, c2 = st.columns(2)
    # Newest first: by default the newest run (B) against the one before it (A, the baseline).
    a_id = c1.selectbox("A (baseline)", ids, index=min(1, len(ids) - 1), key="runs:a")
    b_id = c2.selectbox("B", ids, key="runs:b")
    if a_id and b_id and a_id != b_id:
        a, b = load(a_id), load(b_id)
        if a.study != b.study:
            st.warning("A and B are runs of different studies; only variants with the same name are compared.")
        try:
            text = _compare_text(run_key(a), run_key(b), a, b)
        except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what no analysis expects
            text = f"The comparison failed: {escape(type(exc).__name__)}: {escape(exc)}"
        st.markdown(text)
        st.download_button("Download comparison (Markdown)", text,
                           file_name=f"compare-{safe_stem(a_id)}-{safe_stem(b_id)}.md", key="runs:cmpdl")
    else:
        st.caption("Pick two different runs to compare.")
