"""The parameter form of a study page (a preset picker, the headline knobs, the rest under
"Advanced"), what the values leave untested, and the Run button that starts the job."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import streamlit as st

from workbench.evidence import claims as wbclaims
from workbench.running import jobs
from workbench.results.catalog import Header, estimate_s
from workbench.results.store import Store
from workbench.seam.study import ParamError, validate
from workbench.base.untrusted import escape

from .store import has_gpu, session_alive, this_machine


def _widget(p, default: Any, key: str):
    label = p.name + (f" ({p.unit})" if p.unit else "")
    if p.multi:
        if p.choices:
            return st.multiselect(label, list(p.choices), default=[d for d in default if d in p.choices],
                                  help=p.help, key=key)
        return st.text_input(label, ",".join(str(d) for d in default), help=f"{p.help} (comma-separated)", key=key)
    if p.choices:
        choices = list(p.choices)
        return st.selectbox(label, choices, index=choices.index(default) if default in choices else 0, help=p.help, key=key)
    if p.kind == "bool":
        return st.checkbox(label, value=bool(default), help=p.help, key=key)
    if p.kind == "int":
        return st.number_input(label, value=int(default), min_value=int(p.min) if p.min is not None else None,
                               max_value=int(p.max) if p.max is not None else None, step=1, help=p.help, key=key)
    if p.kind == "float":
        return st.number_input(label, value=float(default), min_value=float(p.min) if p.min is not None else None,
                               max_value=float(p.max) if p.max is not None else None, help=p.help, key=key,
                               format="%g")
    return st.text_input(label, str(default), help=p.help, key=key)


#: the form's preset picker: this entry starts from the declared defaults
DEFAULTS = "(defaults)"


def _preset_choice(study: ModuleType) -> str | None:
    """The preset the form starts from: picked from the study's presets (each with its one
    line), ``?preset=NAME`` in the URL (shareable links, browser tests) first, else quick."""
    presets = list(study.SPACE.presets)
    url = st.query_params.get("preset")
    first = url if url in presets else "quick" if "quick" in presets else DEFAULTS
    options = [DEFAULTS] + presets
    purposes = study.SPACE.purposes
    pick = st.columns([3, 2])[0].selectbox(
        "Start from a preset", options, index=options.index(first), key=f"{study.ID}:preset",
                        format_func=lambda o: o if o == DEFAULTS else f"{o}: {purposes.get(o, '')}".rstrip(": "),
                        help="Each preset sets some knobs (the manual's page of this study lists them); "
                             "the form below starts from its values")
    return None if pick == DEFAULTS else pick


def _widget_key(study: ModuleType, preset: str | None, name: str) -> str:
    # one widget generation per preset: picking another preset starts the form from its values
    return f"{study.ID}:{'q' if preset == 'quick' else preset or 'f'}:{name}"


def param_form(study: ModuleType) -> tuple[dict[str, Any] | None, str | None, dict[str, Any]]:
    """The study's knobs from its space: a preset picker, the headline knobs, the rest under
    "Advanced", GPU-only knobs hidden on a machine without a GPU (their values kept). Returns
    (values or None, the error that made them invalid or None, the raw widget values)."""
    space = study.SPACE
    preset = _preset_choice(study)
    defaults = space.defaults(preset)
    hidden = [] if has_gpu() else [n for n in space.gpu_only]
    first = [space[n] for n in space.headline] if space.headline else list(space.params)
    rest = [space[n] for n in space.advanced if n not in hidden] if space.headline else []
    raw = {n: defaults[n] for n in hidden}
    cols = st.columns(3)
    for i, q in enumerate(q for q in first if q.name not in hidden):
        with cols[i % 3]:
            raw[q.name] = _widget(q, defaults[q.name], _widget_key(study, preset, q.name))
    if rest:
        with st.expander(f"Advanced ({len(rest)} more knob{'' if len(rest) == 1 else 's'})"):
            cols = st.columns(3)
            for i, q in enumerate(rest):
                with cols[i % 3]:
                    raw[q.name] = _widget(q, defaults[q.name], _widget_key(study, preset, q.name))
    if hidden:
        st.caption(f"{len(hidden)} GPU-only knob{'' if len(hidden) == 1 else 's'} hidden: no GPU on this machine (a "
                   "run keeps the preset's values).", help=f"Hidden: {', '.join(hidden)}")
    try:
        return validate(study, raw), None, raw
    except ParamError as exc:
        return None, str(exc), raw


def untested_claims(study: ModuleType, values: dict[str, Any]) -> None:
    """Under the form: which of the seed's claims these values cannot test, grouped by what
    they would need."""
    lost = wbclaims.untestable(study, values)
    if not lost:
        return
    by_need: dict[str, list[str]] = {}
    for cid, why in lost:
        by_need.setdefault(why, []).append(cid)
    n = len(getattr(study, "SEED_CLAIMS", []))
    st.warning(f"With these values the run cannot test {len(lost)} of the seed's {n} claims: " + "; ".join(
        f"{', '.join(escape(c, 'code') for c in ids)} ({escape(why)})" for why, ids in by_need.items()))


def _start(study: ModuleType, values: dict[str, Any], store: Store, headers: list[Header]) -> str | None:
    """Start a run of ``values``; the reason it cannot start, or None."""
    if st.session_state.get(f"{study.ID}:job") is not None:
        return "A run of this study is already in progress in this session."
    refused = study.requires(values)
    if refused:
        return f"Cannot run with these parameters here: {refused}"
    for k in ("last_error", "notice", "live", "job:seen"):
        st.session_state.pop(f"{study.ID}:{k}", None)
    st.session_state[f"{study.ID}:estimate"] = estimate_s(study, values, headers, this_machine()["fingerprint"])[0]
    st.session_state[f"{study.ID}:job"] = jobs.start(study.ID, values, store_path=store.path,
                                                     owner_alive=session_alive())
    return None


@st.fragment
def run_form(study: ModuleType, store: Store | None, headers: list[Header]) -> None:
    """The knobs, what they imply (duration, claims they leave untested) and Run, as one
    fragment: a knob's change reruns this part only; Run starts the job and reruns the page
    (its progress shows right under the button, the run shown below greys out)."""
    values, error, _ = param_form(study)
    if values is not None:
        untested_claims(study, values)
    c1, c2 = st.columns([1, 9], vertical_alignment="center")
    if values is not None:
        c2.caption(f"Estimated duration: {escape(estimate_s(study, values, headers, this_machine()['fingerprint'])[1])}")
    if c1.button("Run", type="primary", key=f"{study.ID}:run", width="stretch"):
        problem = error or (None if store is not None else "no results store to keep the run in")
        problem = problem or _start(study, values, store, headers)
        if problem:
            st.error(escape(problem))  # next to the button, where the eye is
        else:
            st.rerun()
