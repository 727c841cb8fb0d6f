"""The study seam: typed parameters, validation messages, presets, the registry."""

import pytest

from workbench.seam import registry as wbregistry
from workbench.seam import study as wbstudy
from workbench.seam.study import Param, ParamError, ParamSpace


SPACE = ParamSpace(
    params=(
        Param("n", "int", 1000, min=1, max=64 * 2**20, unit="elements"),
        Param("workers", "int", [1], multi=True, min=1, max=32),
        Param("dtype", "str", "float16", choices=("float16", "bfloat16")),
        Param("flush", "bool", False),
    ),
    presets={"smoke": {"n": 10}, "quick": {"workers": [1, 2]}},
)


def test_parse_sets_and_sweep_lists():
    values = SPACE.parse_sets(["n=1e6", "workers=1,2,4", "flush=true"])
    params = SPACE.resolve(values)
    assert params == {"n": 1_000_000, "workers": [1, 2, 4], "dtype": "float16", "flush": True}
    assert wbstudy.expand(params, ["workers"]) == [{"workers": 1}, {"workers": 2}, {"workers": 4}]


def test_size_suffixes():
    assert SPACE.resolve({"n": "64Mi"})["n"] == 64 * 2**20
    assert SPACE.resolve({"n": "4k"})["n"] == 4000


@pytest.mark.parametrize("values, param, fragment", [
    ({"n": "0"}, "n", "below the minimum"),
    ({"n": "abc"}, "n", "expected int"),
    ({"workers": "1,64"}, "workers", "above the maximum"),
    ({"dtype": "int8"}, "dtype", "not one of"),
    ({"bogus": "1"}, "bogus", "unknown parameter"),
    ({"workers": ""}, "workers", "at least one value"),
])
def test_bad_values_name_the_parameter(values, param, fragment):
    with pytest.raises(ParamError) as err:
        SPACE.resolve(values)
    assert err.value.param == param
    assert fragment in str(err.value) and param in str(err.value)


def test_presets_apply_and_unknown_preset_fails():
    assert SPACE.defaults("smoke")["n"] == 10
    assert SPACE.defaults("quick")["workers"] == [1, 2]
    with pytest.raises(ParamError):
        SPACE.defaults("nope")


def test_preset_with_unknown_parameter_is_rejected_at_definition():
    with pytest.raises(ValueError):
        ParamSpace(params=(Param("a", "int", 1),), presets={"smoke": {"b": 2}})


def test_registry_finds_studies_and_each_has_smoke_and_quick():
    reg = wbregistry.registry()
    assert "calibration" in reg
    for mod in reg.values():
        assert "smoke" in mod.SPACE.presets and "quick" in mod.SPACE.presets, mod.ID
        assert mod.__doc__.strip(), mod.ID
        # Each preset must itself validate.
        wbstudy.validate(mod, {}, preset="smoke")
        wbstudy.validate(mod, {}, preset="quick")


def test_registry_rejects_a_study_without_presets(monkeypatch):
    import types

    mod = types.ModuleType("studies.fake")
    mod.__doc__ = "fake"
    for attr in wbregistry.REQUIRED_ATTRS:
        setattr(mod, attr, None)
    mod.ID = "fake"
    mod.SPACE = ParamSpace(params=(Param("a", "int", 1),))
    with pytest.raises(ImportError, match="smoke"):
        wbregistry.check_module(mod)
