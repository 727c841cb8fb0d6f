"""Home: what the workbench is, this machine, its floor, the studies and recent runs."""

import pandas as pd
import streamlit as st

from pages._ui import catalog, get_store, show_table
from workbench import env
from workbench.analysis import analyse
from workbench.registry import registry
from workbench.untrusted import escape

st.title("Perf Study Workbench")
st.markdown(
    "Live reproductions of published performance studies of **runtime overhead** and "
    "**compute/communication overlap**. Every figure is a median with a 95% bootstrap CI and its noise "
    "(IQR/median), measured after a correctness check, stored with the machine's environment and the exact "
    "command that reproduces it. Seed figures are shown beside live ones, always labelled as the seed's.")


@st.cache_data(ttl=600)
def _env():
    return env.capture()


e = _env()
st.subheader("This machine")
c1, c2, c3 = st.columns(3)
c1.metric("CPU", e.get("cpu_model", "?"))
c1.caption(f"{e.get('cpu_logical', '?')} logical CPUs, SMT: {e.get('smt', 'unknown')}, governor: "
           f"{e.get('cpu_governor', 'not readable')}")
c2.metric("Memory", f"{e.get('mem_total_gib', '?')} GiB")
c3.metric("GPUs", ", ".join(e.get("gpu_names", [])) or "none")
st.caption(env.summary_line(e))

store = get_store()
floor_txt = "no calibration run yet: run the Calibration study to measure it"
if store is not None:
    cal = [r for r in store.runs(study="calibration", limit=5) if r["status"] == "complete"
           and r["fingerprint"] == e["fingerprint"]]
    if cal:
        tables = analyse(store.load(cal[0]["run_id"], attachments=False)).tables
        checked = tables["floors"][tables["_floors"]["correct"].astype(bool).to_numpy()]  # same rows, in order
        floor_txt = escape("; ".join(f"{r['variant']} {r['median']} (95% CI {r['95% CI']})"
                                     for r in checked.to_dict("records")))
st.markdown(f"**Floor on this machine** (Calibration study): {floor_txt}")

st.subheader("Studies")
rows = [{"study": m.ID, "title": m.TITLE, "seed": m.SEED, "what the seed is": m.SEED_SUMMARY,
         "runs here": m.requires(m.SPACE.defaults()) or "yes"} for m in registry().values()]
show_table(pd.DataFrame(rows), key="home:studies")

st.subheader("Recent runs")
if store is not None:
    recent = catalog(store).headers(committed=False, limit=10)
    if recent:
        show_table(pd.DataFrame([{"run_id": h.run_id, "study": h.study, "label": h.label or "defaults",
                                  "machine": h.machine, "created": h.when(), "status": h.status,
                                  "variants": h.variants, "tags": " ".join(h.tags)} for h in recent]),
                   key="home:recent")
    else:
        st.info("No runs stored yet: run a study from its page (sidebar), or see the committed runs on Runs.")
