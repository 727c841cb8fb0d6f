"""MC² split page."""
import streamlit as st

import studies.mc2_split as study
from pages._ui import study_page
from workbench.untrusted import escape


def page_extras(record, tables) -> None:
    """The split's verdict and the readings of the seed, above the generic tables."""
    plan = record.outputs.get("plan")
    if plan:
        if plan["ok"]:
            st.success(f"Seed heuristic: {escape(plan['chunks'])} ({escape(plan['bound'])}-bound)")
        else:
            st.error(f"The seed's split has no valid answer: {escape(plan['reason'])}. The simulation shows the "
                     "unsplit case.")
    best = record.outputs.get("best")
    pred = record.outputs.get("predicted", {})
    if best:
        gap = pred.get("heuristic_over_best")
        st.info(f"Best split (exact search, {escape(best['align'])}-row tiles, <= {escape(best['max_chunks'])} "
                f"chunks): {escape(best['chunks'])}, {best['makespan_us']:.1f} us simulated"
                + (f"; the heuristic is {gap:.1%} slower" if gap is not None else ""))
    elif record.outputs.get("best_skipped"):
        st.warning(escape(record.outputs["best_skipped"]))
    st.caption("How the seed was read: " + " ".join(study.SEED_FIGURES["notes"][1:]))


study_page(study, extras=page_extras)
