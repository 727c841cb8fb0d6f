"""Reports: a run as GitHub-flavoured Markdown (A/B comparisons: :mod:`workbench.compare`), and a
Jupyter notebook that reloads the run from its bundle and redraws its tables and charts.

Markdown layout: the "run disturbed" warnings, a one-line verdict and the claims table (the
seed's findings checked on this run: :mod:`workbench.analysis` computes all three), the results
table, the study's tables with medians and CIs, charts as PNG
files beside the Markdown (relative links, so the folder can be pasted into an issue), the
study's own sections, the seed's published figures (labelled as the seed's), and
``<details>`` blocks for the environment + reproduce command and the raw samples.

Everything from the run record (it may come from someone else's bundle) reaches Markdown
and notebook cells through :func:`workbench.untrusted.escape`, by the context it lands in.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from . import claims as claimsmod
from . import outfile, stats
from .analysis import Analysis, analyse, charts_of, sections_of
from .env import REPO_ROOT, summary_line
from .tables import results_display
from .store import RunRecord, write_bundle
from .untrusted import details, escape

# --- formatting helpers ------------------------------------------------------------------------


def _cell(x: Any) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "n/a"
        if x == 0:
            return "0"
        return f"{x:.4g}" if abs(x) < 1e5 else f"{x:,.0f}"
    if isinstance(x, (list, dict)):
        return escape(json.dumps(x, default=str), "cell")
    return escape(x, "cell")


def md_table(df: pd.DataFrame, max_rows: int = 200) -> str:
    """A GitHub table; every row has as many cells as the header, so columns align."""
    if df is None or len(df) == 0:
        return "_(no rows)_"
    df = df.head(max_rows)
    cols = [escape(c, "cell") for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


def claims_markdown(claims: pd.DataFrame) -> str:
    """The claims table: the seed's finding and figure beside the live figure, with a status."""
    if claims is None or not len(claims):
        return ""
    return "## The seed's claims on this machine\n\n" + md_table(claimsmod.display(claims))


def head_markdown(a: Analysis) -> list[str]:
    """What every report starts with: the disturbance warnings, the verdict, the claims table."""
    parts = [f"> **Warning:** {escape(line)}" for line in a.disturbance]
    parts.append(f"**Verdict:** {a.verdict}")
    claims = claims_markdown(a.claims)
    if claims:
        parts.append(claims)
    return parts


def seed_section(study: ModuleType | None) -> str:
    seed = getattr(study, "SEED_FIGURES", None) if study else None
    if not seed:
        return ""
    machine = seed.get("machine", "the seed author's machine")
    parts = [f"## The seed's published figures\n\nAs published in {seed.get('source', study.SEED)}, "
             f"measured on **{machine}** (not this machine)."]
    for name, rows in seed.get("tables", {}).items():
        parts.append(f"**{name}** (seed)\n\n" + md_table(pd.DataFrame(rows)))
    for note in seed.get("notes", []):
        parts.append(f"> {note}")
    return "\n\n".join(parts)


def render_charts(charts: dict, out_dir: Path) -> dict[str, str]:
    """Save each chart as PNG; returns name -> file name. A chart that fails to render is skipped."""
    import vl_convert as vlc

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, chart in charts.items():
        path = out_dir / f"{name}.png"
        try:
            path.write_bytes(vlc.vegalite_to_png(chart.to_json(), scale=1.5))
        except Exception as exc:  # rendering is best-effort; the table still carries the numbers
            (out_dir / f"{name}.error.txt").write_text(str(exc))
            continue
        files[name] = path.name
    return files


def markdown(rec: RunRecord, charts_dir: Path | None = None, charts_rel: str = "",
             analysis: Analysis | None = None) -> str:
    """The report text; with ``charts_dir`` the charts are rendered there and linked."""
    a = analysis or analyse(rec)
    study = a.study
    title = study.TITLE if study else escape(rec.study)
    parts = [f"# {title}: run {escape(rec.run_id, 'code')}", *head_markdown(a),
             f"Machine: {escape(summary_line(rec.env))}  \nStatus: {escape(rec.status)}; created "
             f"{escape(rec.created_utc)} UTC; harness floor {stats.fmt_ns(rec.floor_ns or float('nan'))} per call; "
             f"origin: {escape(rec.origin)}."]
    if rec.error:
        parts.append(details("Error", escape(rec.error, "block")))
    parts.append("## Results\n\n" + md_table(results_display(a.results)))
    for name, df in a.tables.items():
        if not name.startswith("_"):  # "_name" tables are chart data, not for reading
            parts.append(f"### {escape(name)}\n\n" + md_table(df))
    if charts_dir is not None:
        files = render_charts(charts_of(a), charts_dir)
        if files:
            parts.append("## Charts\n\n" + "\n\n".join(f"![{n}]({charts_rel}{f})" for n, f in files.items()))
    parts.extend(sections_of(a))
    parts.extend(f"> {escape(e)}" for e in a.errors)
    seed = seed_section(study)
    if seed:
        parts.append(seed)
    parts.append(details("Environment and reproduce command",
                         f"Reproduce:\n\n{escape(rec.reproduce, 'block', 'sh')}\n\nEnvironment:\n\n"
                         f"{escape(json.dumps(rec.env, indent=1, default=str), 'block', 'json')}"))
    raw = "\n".join(f"- {escape(v.variant, 'code')} ({'ok' if v.correct else 'FAILED'}): "
                    + ", ".join(f"{x:.0f}" for x in v.samples_ns) for v in rec.variants)
    parts.append(details("Raw samples (ns per call)", raw or "_(none)_"))
    return "\n\n".join(parts) + "\n"


def write_markdown(rec: RunRecord, path: str | Path) -> Path:
    """Write ``path`` (Markdown) and its charts in ``<stem>_files/`` beside it; raises
    ``outfile.OutputError`` (one line) when it cannot, before the charts are drawn."""
    path = outfile.check_target(path)
    files_dir = path.parent / f"{path.stem}_files"
    try:
        files_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise outfile.OutputError(f"cannot write {files_dir}: {exc.strerror or exc}") from None
    return outfile.write(path, markdown(rec, charts_dir=files_dir, charts_rel=f"{files_dir.name}/"))


# --- notebook ----------------------------------------------------------------------------------

# The workbench must be importable: installed, or this checkout (found from the notebook's
# folder upwards, else where it was generated) on sys.path.
_IMPORT_WORKBENCH = (
    "import sys, pathlib, tempfile\n"
    f"for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents, pathlib.Path({str(REPO_ROOT)!r})]:\n"
    "    if (p / 'workbench' / '__init__.py').exists():\n"
    "        sys.path.insert(0, str(p)); break\n")


def _notebook(cells: list):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    return nb


def _analysis_cells() -> list:
    """The cells that show an analysis ``a`` (None: no run): disturbance, verdict and claims
    first, then the results table, the study's tables and its charts."""
    import nbformat

    return [
        nbformat.v4.new_code_cell(
            "from IPython.display import Markdown\n"
            "Markdown('\\n\\n'.join(report.head_markdown(a)) if a else 'No run to show.')"),
        nbformat.v4.new_code_cell("results_display(a.results) if a else None"),
        nbformat.v4.new_code_cell(
            "for name, df in (a.tables if a else {}).items():\n"
            "    if not name.startswith('_'):  # '_name' tables are chart data\n"
            "        print(name); display(df)"),
        nbformat.v4.new_code_cell(
            "for name, chart in (charts_of(a) if a else {}).items():\n"
            "    display(chart)"),
    ]


def notebook(rec: RunRecord, bundle_name: str):
    """A notebook that reloads the run from ``bundle_name`` (beside it) and redraws it."""
    import nbformat

    return _notebook([
        nbformat.v4.new_markdown_cell(
            f"# {escape(rec.study)}: run {escape(rec.run_id, 'code')}\n\nReloads the run from "
            f"{escape(bundle_name, 'code')} (no results store needed) and redraws its tables and charts.\n\n"
            f"Reproduce on your machine:\n\n{escape(rec.reproduce, 'block', 'sh')}"),
        nbformat.v4.new_code_cell(
            _IMPORT_WORKBENCH +
            "from workbench.store import read_bundle\n"
            "from workbench.study import get\n"
            "from workbench import report\n"
            "from workbench.analysis import analyse, charts_of\n"
            "from workbench.tables import results_display\n"
            f"rec = read_bundle({bundle_name!r})\n"
            "a = analyse(rec, get(rec.study))"),
        *_analysis_cells(),
        nbformat.v4.new_code_cell(
            "from workbench.env import summary_line\n"
            "print(summary_line(rec.env))\n"
            "print(rec.reproduce)"),
    ])


def write_notebook(rec: RunRecord, path: str | Path) -> Path:
    """Write the notebook and its bundle (``<stem>.bundle.json``) side by side; raises
    ``outfile.OutputError`` (one line) when it cannot."""
    import nbformat

    path = outfile.check_target(path)
    bundle = write_bundle(rec, path.parent / f"{path.stem}.bundle.json")
    return outfile.write(path, nbformat.writes(notebook(rec, bundle.name)))


def study_notebook(study: ModuleType):
    """A study's own notebook, generated from the library (never hand-maintained).

    It runs the study's smoke preset live when this machine can (``requires`` is None), else
    it loads the result bundles committed under ``traces/<study>/``, then draws every table,
    chart and the seed's figures.
    """
    import nbformat

    return _notebook([
        nbformat.v4.new_markdown_cell(f"# {study.TITLE}\n\nSeed: `{study.SEED}` — {study.SEED_SUMMARY}\n\n"
                                      f"{(study.__doc__ or '').strip()}"),
        nbformat.v4.new_code_cell(
            _IMPORT_WORKBENCH +
            "from workbench import report, runner\n"
            "from workbench.analysis import analyse, charts_of\n"
            "from workbench.tables import results_display\n"
            "from workbench.store import Store, committed_runs\n"
            "from workbench.study import get\n"
            f"study = get({study.ID!r})\n"
            "params = study.SPACE.defaults('smoke')  # edit, or use 'quick' / {} for the full defaults\n"
            "reason = study.requires(params)\n"
            "if reason is None:\n"
            "    store = Store(pathlib.Path(tempfile.mkdtemp()) / 'results.sqlite')\n"
            "    rec = runner.execute(study, params, store)\n"
            "else:\n"
            "    print('Cannot run here:', reason)\n"
            "    runs = committed_runs(study.ID)\n"
            "    rec = runs[0] if runs else None\n"
            "    print('Showing the committed run', rec.run_id if rec else None)\n"
            "a = analyse(rec, study) if rec else None"),
        *_analysis_cells(),
        nbformat.v4.new_code_cell(
            "from IPython.display import Markdown\n"
            "Markdown(report.seed_section(study) or 'This study has no seed figures.')"),
    ])


def write_study_notebooks(out_dir: str | Path) -> list[Path]:
    """``notebooks/<study>.ipynb`` for every registered study."""
    import nbformat

    from .study import registry

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for study_id, study in registry().items():
        path = out_dir / f"{study_id}.ipynb"
        nbformat.write(study_notebook(study), str(path))
        paths.append(path)
    return paths


# --- checks on exported Markdown --------------------------------------------------------------

_MERMAID_KINDS = ("gantt", "flowchart", "graph", "sequenceDiagram", "timeline", "xychart-beta")


def _cells(line: str) -> int:
    """Cells in a table row, not counting escaped pipes."""
    body = line.strip().replace("\\|", "")
    return body.strip("|").count("|") + 1


def lint_markdown(text: str, base_dir: Path | None = None) -> list[str]:
    """Problems that would break the report on GitHub: misaligned tables, absolute or missing
    image links, unbalanced ``<details>``, Mermaid blocks that do not parse. Empty when fine."""
    import re

    problems: list[str] = []
    lines = text.splitlines()
    in_code = False
    fence_lang = ""
    block: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not in_code:
                in_code, fence_lang, block = True, line[3:].strip(), []
            else:
                if fence_lang == "mermaid":
                    problems += [f"mermaid block ending line {i + 1}: {p}" for p in _lint_mermaid(block)]
                in_code = False
            continue
        if in_code:
            block.append(line)
            continue
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1]):
            n = _cells(line)
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                if _cells(lines[j]) != n:
                    problems.append(f"table row on line {j + 1} has {_cells(lines[j])} cells, header has {n}")
                j += 1
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", line):
            if target.startswith(("/", "file:")) or re.match(r"^[A-Za-z]:\\", target):
                problems.append(f"image link on line {i + 1} is absolute: {target}")
            elif base_dir is not None and not target.startswith("http") and not (base_dir / target).exists():
                problems.append(f"image on line {i + 1} does not exist beside the report: {target}")
    if in_code:
        problems.append("a code fence is not closed")
    depth = 0
    for m in re.finditer(r"</?details>", text):
        depth += 1 if m.group() == "<details>" else -1
        if depth < 0:
            problems.append("</details> without <details>")
            depth = 0
    if depth:
        problems.append(f"{depth} <details> block(s) not closed")
    return problems


def _lint_mermaid(block: list[str]) -> list[str]:
    import re

    body = [l.strip() for l in block if l.strip() and not l.strip().startswith("%%")]
    if not body:
        return ["empty diagram"]
    kind = body[0].split()[0]
    if kind not in _MERMAID_KINDS:
        return [f"unknown diagram type {kind!r}"]
    if kind != "gantt":
        return []
    problems = []
    for line in body[1:]:
        if re.match(r"^(title|dateFormat|axisFormat|tickInterval|todayMarker|excludes|section)\b", line):
            continue
        if ":" not in line:
            problems.append(f"gantt line is neither a keyword nor a task: {line!r}")
            continue
        name, spec = line.split(":", 1)
        parts = [p.strip() for p in spec.split(",")]
        if not name.strip() or not parts or any(p == "" for p in parts):
            problems.append(f"malformed gantt task: {line!r}")
    return problems
