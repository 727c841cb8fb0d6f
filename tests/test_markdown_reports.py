"""Exported Markdown renders on GitHub: checked for every study's report and the checker itself."""

import pytest

from workbench import report, runner
from workbench.store import committed_runs
from workbench.study import registry


def test_lint_catches_each_kind_of_breakage(tmp_path):
    bad = "\n".join([
        "| a | b |", "|---|---|", "| 1 | 2 | 3 |",
        "![chart](/abs/path.png)", "![chart](missing.png)",
        "<details><summary>x</summary>",
        "```mermaid", "gantt", "    title t", "    this is not a task", "```",
    ])
    problems = lint_markdown(bad, base_dir=tmp_path)
    text = "\n".join(problems)
    assert "3 cells" in text and "absolute" in text and "does not exist" in text
    assert "not closed" in text and "neither a keyword nor a task" in text


def test_lint_accepts_escaped_pipes_and_valid_gantt(tmp_path):
    (tmp_path / "c.png").write_bytes(b"png")
    ok = "\n".join(["| a | b |", "|---|---|", "| x \\| y | 2 |", "![c](c.png)",
                    "<details><summary>s</summary>\n\nbody\n\n</details>",
                    "```mermaid", "gantt", "  dateFormat x", "  axisFormat %L", "  section T1",
                    "  vm_setup :a1, 0, 12", "```"])
    assert lint_markdown(ok, base_dir=tmp_path) == []


def _records(study_id, store):
    study = registry()[study_id]
    if study.requires(study.SPACE.defaults("smoke")) is None:
        return [runner.execute(study, {}, store, preset="smoke")]
    return committed_runs(study_id)


@pytest.mark.parametrize("study_id", sorted(registry()))
def test_every_study_report_lints_clean(study_id, store, tmp_path):
    recs = _records(study_id, store)
    if not recs:
        pytest.skip(f"{study_id} cannot run here and has no committed runs")
    for rec in recs[:2]:
        path = report.write_markdown(rec, tmp_path / f"{rec.run_id}.md")
        problems = lint_markdown(path.read_text(), base_dir=path.parent)
        assert problems == [], problems
