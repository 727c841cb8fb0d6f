"""Hostile parameters (issue: safety): NaN, infinities and overflowing sizes are exit 2 naming
the parameter; non-physical MC² fits are refused with the reason; the simulator is bounded."""

from __future__ import annotations

import math
import time

import pytest

from studies.mc2_split.plan import CostModel, Fit
from studies.mc2_split.simulate import simulate
from workbench.cli import main
from workbench.seam.registry import registry
from workbench.seam.study import Param, ParamError, ParamSpace

NON_FINITE = ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400"]
BAD_SIZES = ["infk", "1e400k", "-infMi"]


def _params(kind: str):
    return [(sid, p.name) for sid, m in registry().items() for p in m.SPACE.params if p.kind == kind]


@pytest.mark.parametrize("study_id, name", _params("float"))
@pytest.mark.parametrize("text", NON_FINITE)
def test_non_finite_floats_exit_2_and_store_nothing(study_id, name, text, store, capsys):
    assert main(["--store", str(store.path), "run", study_id, "--set", f"{name}={text}"]) == 2
    err = capsys.readouterr().err
    assert f"parameter '{name}'" in err and len(err.strip().splitlines()) == 1
    assert store.runs() == []


@pytest.mark.parametrize("study_id, name", _params("int")[::5])  # a sample: one code path for all
@pytest.mark.parametrize("text", BAD_SIZES)
def test_overflowing_sizes_exit_2(study_id, name, text, store, capsys):
    assert main(["--store", str(store.path), "run", study_id, "--set", f"{name}={text}"]) == 2
    err = capsys.readouterr().err
    assert f"parameter '{name}'" in err and "Traceback" not in err


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "nan", "1e999"])
def test_every_float_is_finite_also_inside_lists(value):
    space = ParamSpace((Param("x", "float", [1.0], multi=True), Param("y", "float", 1.0)),
                       presets={"smoke": {}, "quick": {}})
    for values in ({"x": [1.0, value]}, {"x": f"1,{value}"}, {"y": value}):
        with pytest.raises(ParamError, match="finite"):
            space.resolve(values)


@pytest.mark.parametrize("fits, fragment", [
    (("nan,nan", "47,16"), "finite"),
    (("16.5,0.192", "47,inf"), "finite"),
    (("16.5,0", "47,16"), "must be positive"),
    (("16.5,-0.2", "47,16"), "must be positive"),
    (("16.5,0.192", "47,0"), "must be positive"),
    (("1e300,0.192", "47,16"), "not a plausible cost"),
    (("16.5,0.192,3", "47,16"), "fixed_us,us_per_row"),
])
def test_non_physical_mc2_fits_are_refused_with_the_reason(fits, fragment, store, capsys):
    start = time.monotonic()
    code = main(["--store", str(store.path), "run", "mc2-split", "--set", f"mm_fit={fits[0]}",
                 "--set", f"comm_fit={fits[1]}"])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - start < 10 and store.runs() == []


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_the_simulator_refuses_times_it_could_not_finish(bad):
    model = CostModel(Fit(16.5, bad, "row"), Fit(47, 16, "MiB"), 8192, 2)
    with pytest.raises(ValueError, match="not finite"):
        simulate([1024, 1024], model)
    with pytest.raises(ValueError, match="not positive"):
        simulate([1024, 1024], CostModel(Fit(16.5, 0.2, "row"), Fit(47, 16, "MiB"), 8192, 2), contention=0.0)
