"""``wb.explore``: a study's knobs as ipywidgets, driven here as a person would drive them: a
preset picked, a knob changed, Run pressed, the run's head (claims, key table) and its charts
redrawn in place; a bad knob gets the CLI's line; an interrupt keeps and shows its points;
without ipywidgets, one printed line."""

from __future__ import annotations

import sys

import pytest

import workbench as wb
from workbench.knobs import READY
from workbench.data.record import VariantResult
from workbench.seam.registry import get

ipywidgets = pytest.importorskip("ipywidgets")


def test_the_widgets_are_the_studys_typed_space():
    ex = wb.explore("cpu-reduction", preset="smoke")
    space = get("cpu-reduction").SPACE
    assert list(ex.widgets) == space.names
    kinds = {name: type(w).__name__ for name, w in ex.widgets.items()}
    assert kinds["providers"] == "SelectMultiple"  # several values, from a list
    assert kinds["chunks"] == "Text"  # several numbers, comma-separated
    assert kinds["profiler"] == "Dropdown" and kinds["n"] == "IntText" and kinds["target_cpu"] == "Text"
    smoke = space.defaults("smoke")
    assert ex.values()["providers"] == smoke["providers"]  # a list, as validate() takes it
    assert ex.widgets["chunks"].value == ",".join(map(str, smoke["chunks"]))
    assert list(ex.widgets["providers"].value) == smoke["providers"]
    ex.preset.value = "quick"  # the preset drop-down resets every knob
    assert ex.widgets["chunks"].value == ",".join(map(str, space.defaults("quick")["chunks"]))
    ex.preset.value = None
    assert ex.widgets["n"].value == space.defaults()["n"] and ex.status.value == READY


def test_a_knob_changed_run_pressed_and_the_run_drawn_in_place(store):
    ex = wb.explore("calibration", preset="smoke")
    assert type(ex.widgets["torch"]).__name__ == "Checkbox"
    ex.widgets["repeat"].value = 4
    ex.widgets["threads"].value = 1
    ex.button.click()
    first = ex.run
    assert first is not None and first.params["repeat"] == 4 and first.params["threads"] == 1
    assert [r["run_id"] for r in store.runs()] == [first.id]  # the same store as the CLI
    assert f"run <code>{first.id}</code>" in ex.head.value
    assert "<strong>Verdict:</strong>" in ex.head.value and "<strong>Per-call floors of this machine</strong>" in ex.head.value
    assert ex.charts.value.count("<img") == 2 and "complete" in ex.status.value
    assert not ex.button.disabled and ex.progress.value == 1.0
    ex.widgets["repeat"].value = 5
    ex.button.click()
    assert ex.run.id != first.id and ex.run.params["repeat"] == 5 and f"<code>{ex.run.id}</code>" in ex.head.value


def test_a_bad_knob_gets_the_clis_line_and_runs_nothing(store):
    ex = wb.explore("calibration", preset="smoke")
    ex.widgets["threads"].value = 0
    ex.button.click()
    assert "parameter &#x27;threads&#x27;: 0 is below the minimum (allowed 1..256)" in ex.status.value
    assert ex.run is None and store.runs() == []


def test_explore_refuses_what_the_study_refuses(store):
    """More fork/join threads than CPUs: calibration refuses it as cpu-reduction refuses more
    workers than CPUs, on the page, in the CLI and here alike."""
    from studies.calibration import CPUS

    ex = wb.explore("calibration", preset="smoke")
    ex.widgets["threads"].value = CPUS + 3
    ex.button.click()
    assert f"{CPUS + 3} threads is beyond this machine&#x27;s {CPUS} usable CPUs" in ex.status.value
    assert ex.run is None and store.runs() == []


def test_an_interrupt_keeps_and_shows_the_finished_points(store, monkeypatch):
    def interrupted(params, ctx):
        ctx.record(VariantResult("first", {}, [10.0, 11.0, 12.0], True, "ok"))
        raise KeyboardInterrupt

    monkeypatch.setattr(get("calibration"), "run", interrupted)
    ex = wb.explore("calibration", preset="smoke")
    ex.button.click()
    assert "interrupted; 1 finished point kept in run" in ex.status.value
    assert ex.run.status == "interrupted" and "This run is interrupted." in ex.head.value


def test_an_unknown_preset_is_bad_input():
    with pytest.raises(wb.BadInput, match="unknown preset 'huge'; calibration has smoke, quick"):
        wb.explore("calibration", preset="huge")


def test_without_ipywidgets_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets raises ImportError
    assert wb.explore("calibration") is None
    assert capsys.readouterr().out == ("wb.explore needs ipywidgets (pip install ipywidgets); "
                                       "wb.run(...) runs a study without it\n")
