"""``wb.explore(study)``: a study's knobs in a notebook, the twin of its page's form.

The widgets come from the study's typed ``SPACE``, as the page's form does (a multi-valued
knob with choices is a multiple selection, one without is comma-separated text, a knob with
choices a drop-down, then check box, integer, number or text), with its presets as a
drop-down that resets the knobs. **Run** checks the values as the CLI does (the same
messages), runs the study through :func:`workbench.api.run` (the same store, and the machine
lock: a run waits while another times), and redraws the run's head (warnings, verdict, the
seed's claims, the key table) and its charts in place. Interrupting the kernel stops a run
and keeps its finished points, which are then shown. Without ipywidgets it says so in one
printed line.
"""

from __future__ import annotations

import html
from types import ModuleType
from typing import Any

from . import api
from .presentation import jupyter
from .seam.study import Param, ParamError, validate

#: what the status line says before the first run
READY = "Set the knobs and press Run."


def explore(study: str, *, preset: str | None = "quick", store: api.StorePath = None) -> Explorer | None:
    """The knobs of ``study`` as widgets, starting from ``preset`` (None: the defaults), with a
    Run button; the runs go to ``store`` (default: the results store). None, with a printed
    line, where ipywidgets is not installed."""
    try:
        import ipywidgets  # start-up: the widgets only where they are asked for
    except ImportError:
        print("wb.explore needs ipywidgets (pip install ipywidgets); wb.run(...) runs a study without it")
        return None
    mod = api.study_module(study)
    if preset is not None and preset not in mod.SPACE.presets:
        raise api.BadInput(f"unknown preset {preset!r}; {mod.ID} has {', '.join(mod.SPACE.presets)}")
    return Explorer(mod, ipywidgets, preset, store)


def _shown(p: Param, value: Any) -> Any:
    """A knob's value as its widget holds it."""
    if p.multi and p.choices:
        return tuple(v for v in value if v in p.choices)
    if p.multi:
        return ",".join(str(v) for v in value)
    return value


class Explorer:
    """The widgets of one study (``widgets``: knob name -> widget, ``preset``, ``button``), the
    status line, the progress bar, and the last run (``run``) drawn in ``head`` and ``charts``."""

    def __init__(self, study: ModuleType, w: ModuleType, preset: str | None, store: api.StorePath):
        self.study, self.store, self.run = study, store, None
        self.widgets = {p.name: self._widget(w, p) for p in study.SPACE.params}
        self.preset = w.Dropdown(description="preset", options=[("defaults", None)] + [(n, n) for n in study.SPACE.presets],
                                 value=preset)
        self.preset.observe(lambda change: self.set_preset(change["new"]), names="value")
        self.button = w.Button(description="Run", button_style="primary", tooltip="run the study with these knobs")
        self.button.on_click(self.start)
        self.progress = w.FloatProgress(min=0.0, max=1.0, layout=w.Layout(width="20em", visibility="hidden"))
        self.status = w.HTML(READY)
        self.head, self.charts = w.HTML(), w.HTML()
        title = w.HTML(f"<h4>{html.escape(study.TITLE)}</h4><p>Seed: {html.escape(study.SEED_SUMMARY)}</p>")
        knobs = w.GridBox(list(self.widgets.values()), layout=w.Layout(grid_template_columns="repeat(3, 1fr)"))
        self.box = w.VBox([title, self.preset, knobs, w.HBox([self.button, self.progress]), self.status, self.head,
                           self.charts])
        self.set_preset(preset)

    @staticmethod
    def _widget(w: ModuleType, p: Param):
        common = {"description": p.name + (f" ({p.unit})" if p.unit else ""), "tooltip": p.help,
                  "style": {"description_width": "initial"}}
        if p.multi and p.choices:
            return w.SelectMultiple(options=list(p.choices), rows=min(len(p.choices), 6), **common)
        if p.multi:
            return w.Text(placeholder="comma-separated", **common)
        if p.choices:
            return w.Dropdown(options=list(p.choices), **common)
        # no bounds on the number widgets: validate() refuses a value out of range with the CLI's message
        kind = {"bool": w.Checkbox, "int": w.IntText, "float": w.FloatText}.get(p.kind, w.Text)
        return kind(**common)

    def set_preset(self, preset: str | None) -> None:
        """Every knob to the study's defaults under ``preset`` (as the page's form starts)."""
        for name, value in self.study.SPACE.defaults(preset).items():
            self.widgets[name].value = _shown(self.study.SPACE[name], value)

    def values(self) -> dict[str, Any]:
        """The knobs as the widgets hold them (unchecked: :func:`validate` checks them)."""
        return {name: list(wid.value) if isinstance(wid.value, tuple) else wid.value for name, wid in self.widgets.items()}

    def _say(self, text: str, error: bool = False) -> None:
        colour = "#b00020" if error else "inherit"
        self.status.value = f'<span style="color:{colour}">{html.escape(text)}</span>'

    def _progress(self, fraction: float, message: str) -> None:
        self.progress.value = fraction
        self._say(message)

    def start(self, _button=None) -> None:
        """Check the knobs, run the study, show the run (or say in one line why not)."""
        try:
            values = validate(self.study, self.values())
        except ParamError as exc:
            self._say(str(exc), error=True)
            return
        self.button.disabled, self.progress.layout.visibility = True, "visible"
        try:
            self.show(api.run(self.study.ID, store=self.store, progress=self._progress, **values))
        except (api.Error, api.Interrupted) as exc:
            self._say(str(exc), error=True)
            if getattr(exc, "run", None) is not None:  # a failed or interrupted run keeps its points
                self.show(exc.run, keep_status=True)
        finally:
            self.button.disabled, self.progress.layout.visibility = False, "hidden"

    def show(self, run: api.Run, keep_status: bool = False) -> None:
        """Draw ``run``: its head (warnings, verdict, claims, key table) and every chart."""
        self.run = run
        self.head.value = jupyter.run_head_html(run.analysis, run.charts(), key_chart=False)
        pictures = [jupyter.png_tag(png, name) for name, view in run.charts().items() if (png := view.png())]
        self.charts.value = "".join(pictures) or "<p><em>No charts.</em></p>"
        if not keep_status:
            self._say(f"Run {run.id}: {run.status}. This explorer's .run holds it (tables, reports).")

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.box._repr_mimebundle_(include=include, exclude=exclude)
