"""What a study's form is made of (workbench.seam.study's ParamSpace): about five headline knobs,
a purpose for every preset, GPU-only knobs named, the RNG seed renamed with the old name still
read, claims a choice leaves untested, and a duration estimate from this machine's runs."""

from __future__ import annotations

import pytest

from workbench.results.catalog import Header, estimate_s
from workbench.evidence.claims import untestable
from workbench.cli import main
from workbench.seam.registry import get, registry
from workbench.seam.study import MAX_HEADLINE, ParamError, ParamSpace, Param


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_every_study_declares_a_short_form_and_a_purpose_per_preset(study_id):
    space = registry()[study_id].SPACE
    assert 0 < len(space.headline) <= MAX_HEADLINE
    assert set(space.purposes) == set(space.presets), "every preset has its one line"
    assert "seed" not in space.names, "'seed' means the report a study reproduces; the RNG's is rng_seed"


def test_a_space_refuses_a_long_headline_and_unknown_names():
    params = tuple(Param(f"p{i}", "int", 1) for i in range(10))
    with pytest.raises(ValueError, match="at most"):
        ParamSpace(params, headline=tuple(p.name for p in params))
    with pytest.raises(ValueError, match="unknown"):
        ParamSpace(params, gpu_only=("nope",))


def test_the_old_rng_parameter_name_still_reads_with_a_deprecation_line(capsys):
    space = get("cpu-reduction").SPACE
    assert space.resolve({"seed": 7})["rng_seed"] == 7
    assert space.upgrade({"seed": 7, "n": 5}) == {"rng_seed": 7, "n": 5}
    assert space.deprecated({"seed": 7}) and not space.deprecated({"rng_seed": 7})
    # an old reproduce command's --set seed= is accepted, and said to be old (bad input stops it later)
    assert main(["run", "calibration", "--set", "seed=1"]) != 0  # calibration has no RNG parameter at all
    assert main(["run", "cpu-reduction", "--set", "seed=1", "--set", "n=1"]) == 2
    assert "deprecated: parameter 'seed' is now 'rng_seed'" in capsys.readouterr().err
    with pytest.raises(ParamError):
        space.resolve({"no_such_knob": 1})


def test_dropping_c1_makes_the_split_claim_untestable_and_says_why():
    study = get("cpu-reduction")
    assert not untestable(study, study.SPACE.defaults())
    lost = dict(untestable(study, study.SPACE.resolve({"chunks": [2, 8]})))
    title = "Splitting the reduction makes IREE scale with workers"  # 000-split-scales, named for readers
    assert title in lost and "chunks with 1" in lost[title]


def test_the_estimate_scales_this_machines_pace_to_the_sweep():
    study = get("cpu-reduction")
    base = study.SPACE.defaults("quick")
    h = Header(run_id="r", study=study.ID, status="complete", created_utc="2026-01-01T00:00:00Z", machine="m",
               origin="local", source="", params=base, variants=10, failed_checks=0, fingerprint="me",
               finished_utc="2026-01-01T00:01:00Z")
    seconds, line = estimate_s(study, base, [h], "me")
    assert seconds == pytest.approx(60) and "about 60 s" in line
    doubled = {**base, "workers": base["workers"] + [3]} if len(base["workers"]) < 3 else base
    if doubled is not base:
        assert estimate_s(study, doubled, [h], "me")[0] > seconds
    assert estimate_s(study, base, [h], "another machine")[0] is None
