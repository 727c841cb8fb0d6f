"""Home: what the workbench is, this machine, its floor, every study and the recent runs, each a
link to its page."""

import re

import streamlit as st

from pages._ui import catalog, get_store, study_link, this_machine
from workbench.reading.analysis import analyse
from workbench.results.catalog import answers_seed
from workbench.base.machine_load import quietest
from workbench.seam.registry import registry
from workbench.base.untrusted import escape

st.title("Perf Study Workbench")
st.markdown(
    "Live reproductions of published performance studies of **runtime overhead** and "
    "**compute/communication overlap**. Every figure is a median with a 95% bootstrap CI and its noise "
    "(IQR/median), measured after a correctness check, stored with the machine's environment and the exact "
    "command that reproduces it. Seed figures are shown beside live ones, always labelled as the seed's.")


def _cpu_line(e: dict) -> str:
    """The CPU's counts and settings in words (the model is the metric above it)."""
    cores = e.get("cpu_physical")
    smt = {True: "SMT on", False: "no SMT"}.get(e.get("smt"), "")
    parts = [f"{e.get('cpu_logical', '?')} logical CPUs" + (f" on {cores} cores" if cores else ""), smt,
             f"governor {e['cpu_governor']}" if e.get("cpu_governor") else "frequency governor not readable"]
    return ", ".join(p for p in parts if p)


e = this_machine()
st.subheader("This machine")
c1, c2, c3 = st.columns(3)
c1.metric("CPU", e.get("cpu_model", "?"))
c1.caption(escape(_cpu_line(e)))
c2.metric("Memory", f"{e.get('mem_total_gib', '?')} GiB")
c2.caption(escape(e.get("os", "")))
c3.metric("GPUs", ", ".join(e.get("gpu_names") or []) or "none")
c3.caption(f"machine fingerprint {escape(e.get('fingerprint', '?'), 'code')} (runs are grouped by it)")

store = get_store()
floor_txt = "no calibration run yet: run the Calibration study to measure it"
if store is not None:
    cal_study = registry()["calibration"]
    mine = [r for r in store.runs(study="calibration", limit=20) if r["status"] == "complete"
            and r["fingerprint"] == e["fingerprint"]]
    # the quietest complete run of the study's own configuration (not a smoke run), newest first among equals
    full = [r for r in mine if answers_seed(cal_study, r["params"])] or mine
    if full:
        rec = quietest([store.load(r["run_id"], attachments=False) for r in full])
        a = analyse(rec)
        checked = a.tables["floors"][a.tables["_floors"]["correct"].astype(bool).to_numpy()]  # same rows, in order
        floor_txt = escape("; ".join(f"{r['variant']} {r['median']} (95% CI {r['95% CI']})"
                                     for r in checked.to_dict("records")))
        floor_txt += f" (run {escape(rec.run_id, 'code')}, the quietest of {len(full)}"
        floor_txt += (", a smoke run" if not answers_seed(cal_study, rec.params) else "") + ")"
        if a.disturbance:
            floor_txt += f". **Disturbed:** {escape(a.disturbance[0])} These floors may be high."
st.markdown(f"**Floor on this machine** (Calibration study): {floor_txt}")

st.subheader("Studies")
runs = catalog(store)
for study in registry().values():
    reason = study.requires(study.SPACE.defaults())
    mine = runs.headers(study=study.ID, committed=True)
    with st.container(border=True):
        a, b = st.columns([2, 3], vertical_alignment="center")
        with a:
            study_link(study.ID, f"**{re.split(r'[:(]', study.TITLE)[0].strip()}**")
            st.caption(escape(study.TITLE))
        b.markdown(f"Seed: {escape(getattr(study, 'SEED_TITLE', study.SEED))}  \n"
                   + ("Runs on this machine" if not reason else "Cannot run with its defaults here; committed runs "
                      "to open") + f" · {len(mine)} run{'' if len(mine) == 1 else 's'} stored or committed")

st.subheader("Recent runs")
if store is not None:
    recent = runs.headers(committed=False, limit=10)
    if recent:
        for h in recent:
            study_link(h.study, escape(f"{h.study}: {h.label or 'defaults'} · {h.machine} · {h.when()} · {h.status}"
                                       + (f" · {h.failed_checks} failed checks" if h.failed_checks else "")),
                       run_id=h.run_id)
    else:
        st.info("No runs stored yet: run a study from its page (sidebar), or see the committed runs on Runs.")
