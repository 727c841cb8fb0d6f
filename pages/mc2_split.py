"""MC² split page: the generic study page, plus the spread over repeated runs."""
import streamlit as st

import studies.mc2_split as study
from pages._ui import committed, study_page


@st.cache_resource(max_entries=8, show_spinner=False)
def _spread(run_ids: tuple[str, ...], _records: tuple):
    return study.across_runs(list(_records))[0]


def page_extras(record, tables) -> None:
    """The best split's gain over serial NCCL in every committed run (and this one), per world
    size and configuration: one run's figure beside the spread over repeated runs."""
    recs, _ = committed(study.ID)
    recs = list(recs) + ([record] if record.run_id not in {r.run_id for r in recs} else [])
    table = _spread(tuple(r.run_id for r in recs), tuple(recs))
    if not len(table):
        return
    st.subheader("Across runs: the best split's gain over serial with the backend's own collective")
    st.caption(f"Each run's gain is measured within that run (95% CI from its samples) and describes that run. The "
               f"configuration's gain is the interval across runs (two-level bootstrap: runs, then each run's "
               f"samples; t interval): the target (at least {study.TARGET_PCT:.0f}% faster) is met only where that "
               f"interval clears it, from at least 5 runs. 'best of each run's configurations' is the figure a run's "
               f"target line states. Committed runs and this run.")
    st.dataframe(study.spread_display(table), hide_index=True, width="stretch")


study_page(study, extras=page_extras)
