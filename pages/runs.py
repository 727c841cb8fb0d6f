"""Runs: browse stored and committed runs, A/B-compare two, download reports and bundles."""

import pandas as pd
import streamlit as st

from pages._ui import committed, downloads, get_store, run_key
from workbench import compare
from workbench.analysis import analyse
from workbench.env import summary_line
from workbench.store import StoreError, parse_bundle
from workbench.study import registry
from workbench.untrusted import escape, safe_stem


@st.cache_resource(max_entries=16, show_spinner=False)
def _compare_text(key_a: tuple, key_b: tuple, n_runs: int, _a, _b) -> str:
    """The A/B Markdown, once per pair of run states and number of stored runs (A/A runs
    among them change the verdicts); it bootstraps every common variant."""
    return compare.markdown(compare.compare_runs(_a, _b, compare.history(_a, _b, store, committed(_a.study)[0])))


@st.cache_resource(max_entries=32, show_spinner=False)
def _verdict(key: tuple, _rec) -> str:
    """A run's verdict, once per run state (study verdicts analyse the whole run)."""
    return analyse(_rec).verdict


st.title("Runs")
store = get_store()
if store is None:
    st.stop()

with st.expander("Import a result bundle (JSON from another machine)"):
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

records = {}
rows = []
stored = store.runs()
for r in stored:
    rows.append({**{k: r[k] for k in ("run_id", "study", "status", "created_utc", "machine", "variants",
                                       "failed_checks")}, "source": "store"})
headers = [{k: r[k] for k in ("run_id", "study", "status", "created_utc", "params", "fingerprint")} for r in stored]
for study_id in registry():
    for rec in committed(study_id)[0]:
        records[rec.run_id] = rec
        rows.append({"run_id": rec.run_id, "study": rec.study, "status": rec.status, "created_utc": rec.created_utc,
                     "machine": summary_line(rec.env), "variants": len(rec.variants),
                     "failed_checks": sum(not v.correct for v in rec.variants), "source": rec.origin})
        headers.append({"run_id": rec.run_id, "study": rec.study, "status": rec.status,
                        "created_utc": rec.created_utc, "params": rec.params, "fingerprint": rec.env.get("fingerprint")})
if not rows:
    st.info("No runs yet: run a study first.")
    st.stop()
df = pd.DataFrame(rows)
studies = ["(all)"] + sorted(df["study"].unique())
pick = st.selectbox("Study", studies, key="runs:study")
view = df if pick == "(all)" else df[df["study"] == pick]
st.dataframe(view, hide_index=True, width="stretch")


def load(run_id):
    return records.get(run_id) or store.load(run_id)


ids = list(view["run_id"])
st.subheader("A/B comparison")
# By default two runs of one study with the fewest differing parameters (same machine first,
# then the newest pair), B the newer; nothing when no study has two runs.
shown = sorted((h for h in headers if h["run_id"] in set(ids)), key=lambda h: h["created_utc"] or "", reverse=True)
pair = compare.most_similar_pair(shown)
c1, c2 = st.columns(2)
a_id = c1.selectbox("A (baseline)", ids, index=ids.index(pair[0]) if pair else None, key="runs:a",
                    placeholder="pick a run")
b_id = c2.selectbox("B", ids, index=ids.index(pair[1]) if pair else None, key="runs:b", placeholder="pick a run")
if a_id and b_id and a_id != b_id:
    a, b = load(a_id), load(b_id)
    if a.study != b.study:
        st.error(f"Not compared: A is a run of {escape(a.study)} and B of {escape(b.study)}; only runs of one study "
                 "are compared.")
    else:
        try:
            text = _compare_text(run_key(a), run_key(b), len(stored), a, b)
        except Exception as exc:  # noqa: BLE001 - a run from a bundle may hold what no analysis expects
            text = f"The comparison failed: {escape(type(exc).__name__)}: {escape(exc)}"
        st.markdown(text)
        st.download_button("Download comparison (Markdown)", text,
                           file_name=f"compare-{safe_stem(a_id)}-{safe_stem(b_id)}.md", key="runs:cmpdl")
elif pair is None:
    st.caption("No two runs of one study to compare yet: run a study twice (or `python -m workbench ab`).")
else:
    st.caption("Pick two different runs of one study to compare.")

st.subheader("Export one run")
one = st.selectbox("Run", ids, key="runs:one")
if one:
    rec = load(one)
    try:
        verdict = _verdict(run_key(rec), rec)
    except Exception as exc:  # noqa: BLE001 - as above
        verdict = f"(none: {escape(type(exc).__name__)}: {escape(exc)})"
    st.markdown(f"**Verdict:** {verdict}")
    downloads(rec, key=f"runs:{one}")
