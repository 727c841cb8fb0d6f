"""Committed result READMEs are generated, not copied (issue 30): every table between
``<!-- generated -->`` markers in ``traces/<study>/README.md`` is what the tool prints from the
bundles today, and a block that disagrees fails here (refresh with
``python -m workbench readme --refresh``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.committed_claims import analyses  # the committed bundles, analysed once per session
from workbench.reading import readme
from workbench.base.env import REPO_ROOT

READMES = readme.readmes(REPO_ROOT)


def _bundles(path: Path) -> readme.Bundles:
    study = path.parent.name
    return readme.Bundles(path.parent, lambda bundle: analyses(study)[bundle.name])


def test_the_committed_result_readmes_hold_generated_blocks():
    assert {p.parent.name for p in READMES} >= {"cpu-reduction", "mc2-split", "ag-gemm", "opencl-events",
                                                "launch-cache"}


@pytest.mark.parametrize("path", READMES, ids=[p.parent.name for p in READMES])
def test_every_generated_block_is_what_the_tool_prints_today(path):
    stale = readme.differences(path.read_text(encoding="utf-8"), _bundles(path))
    assert not stale, f"{path}: refresh with `python -m workbench readme --refresh`: {stale}"


def test_a_block_that_disagrees_with_the_bundles_fails(tmp_path):
    """A README whose table was copied by hand (or left behind by a change of the tool) is
    found: one altered cell is enough."""
    path = REPO_ROOT / "traces" / "cpu-reduction" / "README.md"
    text = path.read_text(encoding="utf-8")
    bundles = _bundles(path)
    assert not readme.differences(text, bundles)
    altered = text.replace("| 000-split-scales |", "| 000-split-scales (edited) |", 1)
    assert altered != text
    assert readme.differences(altered, bundles) == [
        "<!-- generated:claims bundles=many-core-16cpu.bundle.json,many-core-phases-16cpu.bundle.json,"
        "seed-c8-shapes-16cpu.bundle.json -->"]
    assert readme.refresh(altered, bundles) == text


def test_a_marker_must_name_a_bundle_beside_the_readme(tmp_path):
    bundles = readme.Bundles(tmp_path)
    for name in ("../cpu-reduction/many-core-16cpu.bundle.json", "missing.bundle.json"):
        with pytest.raises(readme.BlockError, match="no such bundle"):
            readme.refresh(f"<!-- generated:drift bundle={name} -->\n<!-- /generated -->\n", bundles)
    with pytest.raises(readme.BlockError, match="unknown generated block kind"):
        readme.refresh("<!-- generated:nonsense -->\n<!-- /generated -->\n", bundles)


def test_claims_by_run_lists_every_bundle_beside_the_readme_oldest_first():
    path = REPO_ROOT / "traces" / "mc2-split" / "README.md"
    block = next(m for m in readme.BLOCK_RE.finditer(path.read_text(encoding="utf-8")) if m["kind"] == "claims-by-run")
    first = block["body"].strip("\n").split("\n\n")[0]  # the runs' table (the counts per claim follow it)
    rows = [line.split(" | ") for line in first.splitlines()[2:]]
    bundles = sorted(path.parent.glob("*.bundle.json"))
    assert sorted(r[0].strip("| ") for r in rows) == sorted(p.name.removesuffix(".bundle.json").rsplit("-", 1)[-1]
                                                             for p in bundles)
    dates = [r[1] for r in rows]
    assert dates == sorted(dates) and {r[2] for r in rows} == {"2", "4"}  # world_size, from params


def test_a_printout_block_shows_the_committed_file_fenced_and_nothing_else(tmp_path):
    """A script's printout beside the README, as printed: fenced so that nothing in it renders
    (a backtick run in it gets a longer fence); a path, a bundle or an oversized file refused."""
    (tmp_path / "probe.txt").write_text("# GPU: x\n  same block ``` 7.97 [7.95, 8.19]\n", encoding="utf-8")
    text = "<!-- generated:printout file=probe.txt -->\n<!-- /generated -->\n"
    out = readme.refresh(text, readme.Bundles(tmp_path))
    assert out == ("<!-- generated:printout file=probe.txt -->\n````text\n# GPU: x\n  same block ``` 7.97 [7.95, 8.19]\n"
                   "````\n<!-- /generated -->\n")
    (tmp_path / "big.txt").write_bytes(b"x" * (readme.MAX_PRINTOUT_BYTES + 1))
    (tmp_path / "a.bundle.json").write_text("{}", encoding="utf-8")
    for name, why in (("../probe.txt", "no such printout"), ("a.bundle.json", "no such printout"),
                      ("missing.txt", "no such printout"), ("big.txt", "at most")):
        with pytest.raises(readme.BlockError, match=why):
            readme.refresh(f"<!-- generated:printout file={name} -->\n<!-- /generated -->\n", readme.Bundles(tmp_path))
