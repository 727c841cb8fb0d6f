"""A run in progress: its bar in the study's steps, elapsed and remaining time, Cancel, each
variant as it lands, and what the page says when it ends."""

from __future__ import annotations

from types import ModuleType

import pandas as pd
import streamlit as st

from workbench.running import jobs
from workbench.results.catalog import duration_text
from workbench.data.record import RunRecord
from workbench.evidence.tables import results_display, variants_table
from workbench.base.untrusted import escape

from .run import show
from .tables import show_table


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _live_table(job: jobs.Job) -> pd.DataFrame:
    """The variants a running job stored so far, as the results table (recomputed only when
    one arrived: each is a bootstrap)."""
    state = job.state
    stamp = (state.run_id, tuple((v.variant, len(v.samples_ns)) for v in state.variants.values()))
    cached = st.session_state.get(f"{job.study}:live")
    if cached is None or cached[0] != stamp:
        rec = RunRecord(run_id=state.run_id or "pending", study=job.study, params={}, env={},
                        variants=list(state.variants.values()))
        cached = (stamp, results_display(variants_table(rec)))
        st.session_state[f"{job.study}:live"] = cached
    return cached[1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _finished(study: ModuleType, job: jobs.Job) -> None:
    """A job ended: show its run, and say how it ended (a cancel is not an error)."""
    state = job.poll()
    doc = job.record()
    run_id = (doc or {}).get("run_id") or state.run_id
    kept, took = len(state.variants), _elapsed(job.elapsed_s())
    notice = f"{study.ID}:notice"
    if job.was_cancelled or job.returncode == 130:
        if kept:
            show(study.ID, run_id)
            st.session_state[notice] = ("info", f"Run cancelled after {took}: {_plural(kept, 'finished variant')} "
                                                f"kept in run `{run_id}` (shown below).")
        else:
            st.session_state[notice] = ("info", f"Run cancelled after {took}, before any variant finished: nothing "
                                                "was measured" + (f" (run `{run_id}` is stored without variants)."
                                                                  if run_id else "."))
    elif doc:
        show(study.ID, run_id)
        variants = len(doc.get("variants", []))
        # the progress counted the study's steps (compiles, profiles, rounds too): say how the two relate
        steps = state.step[1] if state.step else None
        also = (f"from its {steps} {state.step[2]} (compiling, profiling and interleaved rounds are steps, not "
                "variants)" if steps is not None and steps != variants else "")
        # (escape trims its text's ends: the space before the step count stays outside it)
        st.session_state[notice] = ("success", f"Run `{run_id}` finished in {took}: {_plural(variants, 'variant')}"
                                               f"{' ' + escape(also) if also else ''} (shown below).")
    else:
        if run_id:
            show(study.ID, run_id)  # a failed run keeps its finished variants and says why
        st.session_state[f"{study.ID}:last_error"] = job.error_text() or f"the run exited with code {job.returncode}"
    job.cleanup()


def _eta(job: jobs.Job, fraction: float, estimate: float | None) -> str:
    """About how long the run has left: from its progress once it has some, else from the
    form's estimate."""
    took = job.elapsed_s()
    if fraction >= 0.05:
        left = took * (1 - fraction) / fraction
    elif estimate:
        left = max(estimate - took, 0)
    else:
        return ""
    return f"about {duration_text(left)} left"


#: scrolls the progress bar into view when Run left it below the screen (our own constant
#: script; nothing from a run reaches it)
_INTO_VIEW = """<script>(() => { let tries = 0; const t = setInterval(() => {
  const bar = document.querySelector('[data-testid=stProgress]');
  if (!bar && ++tries < 40) return;
  clearInterval(t);
  if (bar) { const r = bar.getBoundingClientRect();
    if (r.top < 0 || r.bottom + 60 > window.innerHeight) bar.scrollIntoView({block: 'center'}); }
}, 100); })();</script>"""


def poll_job(study: ModuleType) -> None:
    """The run in progress, right under the Run button: its bar in one unit (the study's
    steps, "3 of 12 points"), elapsed time and time left, Cancel, and each variant's row as
    it lands."""
    key = f"{study.ID}:job"
    job: jobs.Job | None = st.session_state.get(key)
    if job is None:
        return

    @st.fragment(run_every=1.0)
    def _progress():
        state = job.poll()
        fraction, message = job.progress()
        if job.done:
            st.session_state.pop(key, None)
            _finished(study, job)
            st.rerun()
        parts = [f"{state.step[0]} of {state.step[1]} {state.step[2]}" if state.step else "starting",
                 f"{_elapsed(job.elapsed_s())} elapsed",
                 _eta(job, fraction, st.session_state.get(f"{study.ID}:estimate")),
                 f"run `{state.run_id}`" if state.run_id else "waiting for the machine"]
        st.progress(fraction, text=f"Running {escape(study.TITLE)}: {escape(message)}")
        if not st.session_state.get(f"{key}:seen"):  # once per run: bring the bar into view
            st.session_state[f"{key}:seen"] = True
            st.html(_INTO_VIEW, unsafe_allow_javascript=True)
        st.caption(" · ".join(p for p in parts if p))
        if job.cancelled is None:
            if st.button("Cancel run (keeps the finished variants)", key=f"{key}:cancel"):
                job.cancel()
        else:
            st.caption("Cancelling: the finished variants are being stored...")
        kept = len(state.variants)
        if kept:
            st.markdown(f"**This run so far** ({_plural(kept, 'variant')}, each as it lands):")
            show_table(_live_table(job), key=f"{key}:live", max_columns=8, rows=8)

    _progress()
