"""Reports: a run in the forms people share (A/B comparisons of two runs:
:mod:`workbench.reading.comparison`), and a Jupyter notebook that reloads the run from its bundle and
redraws its tables and charts.

Every form starts the same way (:func:`head_markdown`, from :mod:`workbench.reading.analysis`): the
"run disturbed" warnings, the verdict and the claims table (the seed's findings checked on
this run), then the study's seed-shaped key table and key chart (``KEY_TABLE``,
``KEY_CHART``). Then:

- ``md`` (:func:`write_markdown`): the full report; charts as PNG files in ``<stem>_files/``
  beside it (relative links, for a repository or a wiki), every table, the study's sections,
  the seed's figures, and ``<details>`` blocks for the environment, the reproduce command and
  every raw sample;
- ``issue`` (:func:`issue_markdown`): what renders completely in a GitHub issue with nothing
  attached, no image links, charts as Mermaid (:mod:`workbench.presentation.mermaid`, in real units) or
  compact text. By default about two screens (at most :data:`ISSUE_SHORT_LIMIT` characters):
  the disturbance line, the verdict, the claims, the key table, the key chart with the
  seed's line, the machine and the reproduce command, and how to get the full report and the
  bundle. ``full=True`` (``--full``) adds every table, chart, note and the raw samples'
  summary while it fits in :data:`ISSUE_LIMIT` (GitHub refuses bodies over 65,536); parts
  that do not fit are named at the end;
- ``html`` (:func:`html_report`): the full report as one self-contained file, charts as data
  URIs, no script and no network reference, for mail or chat.

Everything from the run record (it may come from someone else's bundle) reaches Markdown,
HTML and notebook cells through :func:`workbench.base.untrusted.escape`, by the context it lands
in; the HTML is rendered from that Markdown with raw HTML, links and images turned off.
"""

from __future__ import annotations

import base64
import html as htmlmod
import io
import json
import os
import re
import resource
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
from markdown_it import MarkdownIt

from ..evidence import claims as claimsmod
from . import mermaid
from ..base import outfile, units
from ..evidence import stats
from ..reading.analysis import Analysis, analyse, charts_of, sections_of
from ..base.env import REPO_ROOT, summary_line
from ..base.names import seed_text, seed_title, titled_cells
from ..base.names import title as name_title
from ..data.record import RunRecord
from ..seam.registry import registry
from ..results.store import write_bundle
from ..evidence.tables import cell_text, key_columns, md_table, number_formats, readable, results_display
from ..base.untrusted import MAX_FIELD_CHARS, clip, details, escape

#: the longest issue report: GitHub refuses an issue body over 65,536 characters
ISSUE_LIMIT = 60_000
#: the default issue report: about two screens, what a reader of an issue reads
ISSUE_SHORT_LIMIT = 15_000
#: rows of the key table in the default issue report (the full report has every row)
SHORT_ROWS = 12
#: rows of a table in an issue report (the full table is in the md/html report and the bundle)
ISSUE_ROWS = 30
FORMATS = ("md", "issue", "html", "ipynb")

# --- formatting helpers ------------------------------------------------------------------------


def narrow_table(df: pd.DataFrame, max_rows: int = ISSUE_ROWS, max_columns: int = 10) -> str:
    """A wide table as Markdown: the columns that differ between rows (at most
    ``max_columns``), the constant ones said once above it."""
    df = readable(df)  # the column names and units people read (the constants' line too)
    cols, constant = key_columns(df, max_columns)
    formats = number_formats(df)
    said = {k: v for k, v in constant.items() if isinstance(v, (list, dict)) or not (pd.isna(v) or v == "")}
    same = "; ".join(f"{escape(k)} = {escape(cell_text(v, formats.get(k)))}" for k, v in said.items())
    hidden = [c for c in df.columns if str(c) not in cols and str(c) not in constant]
    notes = (f"All rows: {same}.\n\n" if same else "") + md_table(df[cols], max_rows)
    if hidden:
        notes += f"\n\n_({len(hidden)} more columns in the full report: {escape(', '.join(map(str, hidden)))}.)_"
    return notes


def claims_markdown(claims: pd.DataFrame, columns: list[str] | None = None, level: int = 2,
                    why_at: str | None = None) -> str:
    """The claims table, as Markdown under a heading of ``level``, with the seed's machine said
    once above it; ``columns``: those of :func:`workbench.evidence.claims.display` to show (default all).
    With ``why_at`` (a run's lead: where the reasons are), the claims the run could not test and
    has no figure for are named in one line under the table instead of a row each."""
    if claims is None or not len(claims):
        return ""
    shown = claimsmod.display(claims)
    untested: list[str] = []
    if why_at:
        shown, untested = claimsmod.untested_apart(shown)
    parts = [f"{'#' * level} The seed's claims on this machine", seed_machine_line(claims)]
    if len(shown):
        parts.append(md_table(shown[columns] if columns else shown))
    if untested:
        parts.append(f"Not testable in this run, with no figure (why: {why_at}): {escape(', '.join(untested))}.")
    return "\n\n".join(parts)


def seed_machine_line(claims: pd.DataFrame) -> str:
    """Where the seed's figures of the claims table were measured (said once, above it)."""
    return f"The seed's figures: measured on {escape(claimsmod.seed_machine(claims))} unless a row names another source."


def head_markdown(a: Analysis, claims_columns: list[str] | None = None, level: int = 2,
                  why_at: str | None = None) -> list[str]:
    """What every report starts with: the disturbance warnings, the verdict, the claims table
    (``claims_columns``, ``level``, ``why_at``: see :func:`claims_markdown`)."""
    parts = [f"> **Warning:** {escape(line)}" for line in a.disturbance]
    parts.append(f"**Verdict:** {a.verdict}")
    parts.append(f"**What the CIs cover:** {escape(a.levels)}")
    claims = claims_markdown(a.claims, claims_columns, level, why_at)
    if claims:
        parts.append(claims)
    return parts


def run_line(rec: RunRecord) -> str:
    """Machine, status, time, harness floor and origin of a run, as Markdown."""
    return (f"Machine: {escape(summary_line(rec.env))}  \nStatus: {escape(rec.status)}; created "
            f"{escape(rec.created_utc)} UTC; harness floor {stats.fmt_ns(rec.floor_ns or float('nan'))} per call; "
            f"origin: {escape(rec.origin)}.")


def seed_section(study: ModuleType | None) -> str:
    seed = getattr(study, "SEED_FIGURES", None) if study else None
    if not seed:
        return ""
    machine = seed.get("machine", "the seed author's machine")
    parts = [f"## The seed's published figures\n\nAs published in {seed_text(seed.get('source'), study)}, "
             f"measured on **{machine}** (not this machine)."]
    for name, rows in seed.get("tables", {}).items():
        parts.append(f"**{name}** (seed)\n\n" + md_table(pd.DataFrame(rows)))
    for note in seed.get("notes", []):
        parts.append(f"> {note}")
    return "\n\n".join(parts)


def table_title(a: Analysis, name: str) -> str:
    """A table of the run as people read its name (:func:`workbench.base.names.title`), escaped."""
    return escape(name_title(a.study, name, a.tables))


def shown_table(a: Analysis, name: str) -> pd.DataFrame:
    """A table of the run as a report shows it: its rows' table ids as titles
    (:func:`workbench.base.names.titled_cells`); the units and headers come with the rendering."""
    return titled_cells(a.tables[name], a.study, a.tables)


def chart_title(a: Analysis, name: str) -> str:
    """A chart of the run as people read its name, escaped."""
    return escape(name_title(a.study, name, a.tables, kind="chart"))


def key_names(a: Analysis, charts: dict) -> tuple[str | None, str | None]:
    """The study's ``KEY_TABLE`` and ``KEY_CHART`` when this run has them: the table, else
    None (the results table leads then); the chart, else the study's first chart."""
    table = getattr(a.study, "KEY_TABLE", None)
    chart = getattr(a.study, "KEY_CHART", None)
    return (table if table in a.tables else None), (chart if chart in charts else next(iter(charts), None))


def env_markdown(rec: RunRecord, indent: int | None = 1) -> str:
    """The ``<details>`` block with the reproduce command and the environment."""
    return details("Environment and reproduce command",
                   f"Reproduce:\n\n{escape(rec.reproduce, 'block', 'sh')}\n\nEnvironment:\n\n"
                   f"{escape(json.dumps(rec.env, indent=indent, default=str), 'block', 'json')}")


def samples_summary(rec: RunRecord) -> pd.DataFrame:
    """Per variant: count, min, median, max and spread of its raw samples (ns)."""
    rows = []
    for v in rec.variants:
        x = np.asarray(v.samples_ns, dtype=float)
        lo, med, p90, hi = np.percentile(x, [0, 50, 90, 100]) if x.size else (np.nan,) * 4
        rows.append({"variant": v.variant, "check": "ok" if v.correct else "FAILED", "samples": x.size,
                     "min": stats.fmt_ns(lo), "median": stats.fmt_ns(med), "p90": stats.fmt_ns(p90) if x.size else "n/a",
                     "max": stats.fmt_ns(hi)})
    return pd.DataFrame(rows, columns=["variant", "check", "samples", "min", "median", "p90", "max"])


#: how many device pixels a chart's CSS pixel gets in its PNG (sharp on a high-density screen)
PNG_SCALE = 1.5


def compact_png(png: bytes) -> bytes:
    """A chart's PNG as a 256-colour palette image: a chart has a few colours and their
    anti-aliased edges, so it looks the same at a tenth of the bytes (a 900-pixel timeline: 720
    KB as drawn, 44 KB as a palette), and a notebook with a dozen charts stays small. The
    bytes as they came when Pillow cannot read them."""
    from PIL import Image  # start-up: only where a chart is drawn

    try:
        with Image.open(io.BytesIO(png)) as im:
            palette = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
            out = io.BytesIO()
            palette.save(out, format="PNG", optimize=True)
    except (OSError, ValueError):
        return png
    return out.getvalue() if out.tell() < len(png) else png


def raw_samples(rec: RunRecord) -> str:
    """Every raw sample, a line per variant, in the unit its median reads in (``us``: ``2.03,
    2.01, ...``; never ``1222847`` ns)."""
    lines = []
    for v in rec.variants:
        x = [float(s) for s in v.samples_ns]
        unit = units.pick(x, "ns") if x else "ns"
        shown = ", ".join(units.number(units.convert(s, "ns", unit), 4) for s in x)
        lines.append(f"- {escape(v.variant, 'code')} ({'ok' if v.correct else 'FAILED'}, {unit}): {shown}")
    return "\n".join(lines)


def png_blocked() -> str | None:
    """Why this process cannot draw charts as PNG, or None when it can. vl-convert's JavaScript
    engine (V8) reserves tens of GiB of address space as it starts and aborts the whole process
    (SIGTRAP, no Python exception) when it cannot: under any address-space limit (``ulimit -v``,
    RLIMIT_AS; 64 GiB was tried). Charts are then left out and their data stays in the tables."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return (f"charts not drawn as PNG: this process has an address-space limit (ulimit -v {soft >> 10} KiB) "
            "under which the chart renderer (vl-convert) would abort it; the tables hold the charts' data")


def render_charts(charts: dict, out_dir: Path | None = None) -> dict[str, bytes]:
    """Each chart as PNG bytes (written to ``out_dir`` too when given); a chart that fails to
    render is left out (its ``<name>.error.txt`` says why; the tables carry the numbers), and
    every chart where :func:`png_blocked` says the renderer cannot start."""
    if charts and png_blocked():
        return {}
    import vl_convert as vlc  # start-up: a native renderer, only for PNG charts

    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    pngs = {}
    for name, chart in charts.items():
        try:
            pngs[name] = compact_png(vlc.vegalite_to_png(chart.to_json(), scale=PNG_SCALE))
        except Exception as exc:  # rendering is best-effort
            if out_dir is not None:
                (out_dir / f"{name}.error.txt").write_text(str(exc))
            continue
        if out_dir is not None:
            (out_dir / f"{name}.png").write_bytes(pngs[name])
    return pngs


# --- the full report (md, html) ------------------------------------------------------------------

@dataclass
class Block:
    """One part of a report: Markdown (untrusted parts escaped); with ``summary``, a
    ``<details>`` block; with ``chart``, the chart of that name (an image)."""

    md: str = ""
    summary: str = ""
    chart: str = ""


def blocks(a: Analysis, charts: dict) -> list[Block]:
    """The full report of an analysis, in reading order."""
    rec, study = a.rec, a.study
    title = study.TITLE if study else escape(rec.study)
    key_table, key_chart = key_names(a, charts)
    out = [Block(f"# {title}: run {escape(rec.run_id, 'code')}"), *map(Block, head_markdown(a)), Block(run_line(rec))]
    if rec.error:
        out.append(Block(escape(rec.error, "block"), summary="Error"))
    if key_table:
        out.append(Block(f"## {table_title(a, key_table)}\n\n" + md_table(shown_table(a, key_table))))
    if key_chart:
        out.append(Block(chart=key_chart))
    out.append(Block("## Results\n\n" + md_table(results_display(a.results))))
    for name, df in a.tables.items():
        if not name.startswith("_") and name != key_table:  # "_name" tables are chart data, not for reading
            out.append(Block(f"### {table_title(a, name)}\n\n" + md_table(shown_table(a, name))))
    others = [n for n in charts if n != key_chart]
    if others:
        out.append(Block("## Charts"))
        out += [Block(chart=n) for n in others]
    out += [Block(s) for s in sections_of(a)]
    out += [Block(f"> {escape(e)}") for e in a.errors]
    seed = seed_section(study)
    if seed:
        out.append(Block(seed))
    out.append(Block("## Environment, reproduce and raw samples"))
    out.append(Block(env_markdown(rec)))
    out.append(Block(raw_samples(rec) or "_(none)_", summary="Raw samples (per call, each variant in its own unit)"))
    return out


def markdown(rec: RunRecord, charts_dir: Path | None = None, charts_rel: str = "",
             analysis: Analysis | None = None) -> str:
    """The full Markdown report; with ``charts_dir`` the charts are rendered there as PNG and
    linked (``charts_rel`` + file name), else left out."""
    a = analysis or analyse(rec)
    charts = charts_of(a)
    files = set(render_charts(charts, charts_dir)) if charts_dir is not None else set()
    blocked = png_blocked() if charts_dir is not None and charts else None
    parts = []
    for b in blocks(a, charts):
        if b.chart:
            if b.chart in files:
                parts.append(f"![{chart_title(a, b.chart)}]({charts_rel}{b.chart}.png)")
            elif blocked:
                parts.append(f"_({escape(blocked)}.)_")
                blocked = None  # said once
        else:
            parts.append(details(b.summary, b.md) if b.summary else b.md)
    return "\n\n".join(parts) + "\n"


def write_markdown(rec: RunRecord, path: str | Path, analysis: Analysis | None = None) -> Path:
    """Write ``path`` (Markdown) and its charts in ``<stem>_files/`` beside it; raises
    ``outfile.OutputError`` (one line) when it cannot, before the charts are drawn."""
    path = outfile.check_target(path)
    files_dir = path.parent / f"{path.stem}_files"
    try:
        files_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise outfile.OutputError(f"cannot write {files_dir}: {exc.strerror or exc}") from None
    return outfile.write(path, markdown(rec, charts_dir=files_dir, charts_rel=f"{files_dir.name}/", analysis=analysis))


_HTML_STYLE = """body{font:15px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1f2328}table{border-collapse:collapse;margin:1em 0;display:block;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:4px 10px}th{background:#f6f8fa}tr:nth-child(2n){background:#f6f8fa}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;background:#f6f8fa}pre{padding:1em;
overflow-x:auto}blockquote{border-left:4px solid #d0d7de;margin:0;padding:0 1em;color:#59636e}
details{margin:1em 0}summary{cursor:pointer;font-weight:600}img{max-width:100%}
details.section>summary>h2,details.section>summary>h3{display:inline;margin:0}
nav.toc{border:1px solid #d0d7de;padding:.5em 1em;margin:1em 0}nav.toc ul{margin:.3em 0;padding-left:1.2em}
nav.toc li.h3{margin-left:1.2em;font-size:14px}"""


def md_to_html(text: str) -> str:
    """Markdown (tables, strike-through) to HTML with raw HTML, links and images off: what
    the report's Markdown holds from a run is text, and an image could load from the network."""
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable(["link", "image",
                                                                                                 "autolink"])
    return md.render(text)


_HEADING = re.compile(r"<h([23])>(.*?)</h\1>", re.S)


def _contents(html: str, open_titles: set[str]) -> str:
    """``html`` with a table of contents before its first section (a link per h2/h3) and
    every section but ``open_titles`` (the claims, the key table and its chart) collapsed
    into a ``<details>`` whose summary is its heading."""
    heads = list(_HEADING.finditer(html))
    if not heads:
        return html
    toc, parts = [], [html[:heads[0].start()]]
    for i, m in enumerate(heads):
        level, text = m.group(1), m.group(2)
        end = heads[i + 1].start() if i + 1 < len(heads) else len(html)
        sid, body = f"sec-{i + 1}", html[m.end():end]
        toc.append(f'<li class="h{level}"><a href="#{sid}">{text}</a></li>')
        if htmlmod.unescape(re.sub(r"<[^>]+>", "", text)) in open_titles:
            parts.append(f'<h{level} id="{sid}">{text}</h{level}>{body}')
        else:
            parts.append(f'<details class="section" id="{sid}"><summary><h{level}>{text}</h{level}></summary>'
                         f"{body}</details>")
    nav = '<nav class="toc"><strong>Contents</strong><ul>' + "".join(toc) + "</ul></nav>"
    return parts[0] + nav + "".join(parts[1:])


def html_report(rec: RunRecord, analysis: Analysis | None = None) -> str:
    """The full report as one self-contained HTML file: charts as PNG data URIs, inline CSS,
    no script, nothing loaded from anywhere; a table of contents, the lead (verdict, claims,
    key table and chart) open and every other section collapsed."""
    a = analysis or analyse(rec)
    charts = charts_of(a)
    pngs = render_charts(charts)
    key_table, _ = key_names(a, charts)
    body = []
    blocked = png_blocked() if charts else None
    for b in blocks(a, charts):
        if b.chart:
            if b.chart in pngs:
                body.append(f'<figure><img alt="{chart_title(a, b.chart)}" src="data:image/png;base64,'
                            f'{base64.b64encode(pngs[b.chart]).decode()}"></figure>')
            elif blocked:
                body.append(f"<p><em>{escape(blocked, 'html')}.</em></p>")
                blocked = None  # said once
        elif b.summary:
            body.append(f"<details><summary>{escape(b.summary, 'html')}</summary>\n{md_to_html(b.md)}</details>")
        else:
            body.append(md_to_html(b.md))
    title = escape(f"{rec.study}: run {rec.run_id}", "html")
    content = _contents("\n".join(body), {"The seed's claims on this machine",
                                           htmlmod.unescape(table_title(a, key_table)) if key_table else ""})
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>{_HTML_STYLE}</style></head><body>\n" + content + "\n</body></html>\n")


# --- the issue report ---------------------------------------------------------------------------

def _chart_text(chart, name: str) -> str:
    """A chart for an issue: Mermaid when its data has that shape, else its data as a table;
    ``name`` is its title (escaped)."""
    drawn = mermaid.from_chart(chart)
    if drawn:
        return drawn
    got = mermaid.chart_data(chart)
    if got is None:
        return f"_(the chart \"{name}\" is not drawable as text; see the md or html report)_"
    df, x, y, series, _, _, _ = got
    cols = list(dict.fromkeys(c for c in (series, x, y) if c))
    return md_table(df[cols].rename(columns={"_series": "series"}), ISSUE_ROWS)


def short_issue_markdown(rec: RunRecord, a: Analysis, limit: int = ISSUE_SHORT_LIMIT) -> str:
    """The default issue report, about two screens: disturbance, verdict, claims (status and
    both figures), the key table (its first :data:`SHORT_ROWS` rows), the key chart in real
    units with the seed's line, machine and reproduce, and where the rest is."""
    study = a.study
    charts = charts_of(a, only=getattr(study, "KEY_CHART", None))  # the key chart: the others are not drawn here
    key_table, key_chart = key_names(a, charts)
    title = study.TITLE if study else escape(rec.study)
    parts = [f"### {title}: run {escape(rec.run_id, 'code')}",
             *head_markdown(a, claimsmod.LEAD_COLUMNS, level=4, why_at="the full report")]
    if key_table:
        df = a.tables[key_table]
        more = f"\n\n_(the first {SHORT_ROWS} of {len(df)} rows; the full report has every one)_" \
            if len(df) > SHORT_ROWS else ""
        parts.append(f"#### {table_title(a, key_table)}\n\n" + narrow_table(shown_table(a, key_table), max_rows=SHORT_ROWS,
                                                                            max_columns=8)
                     + more)
    if key_chart:
        parts.append(f"#### {chart_title(a, key_chart)}\n\n" + _chart_text(charts[key_chart], chart_title(a, key_chart)))
    parts += [f"> {escape(e)}" for e in a.errors]
    # a reproduce command is a line or two: one of thousands of characters is cut like an inline field
    parts.append(run_line(rec) + "\n\nReproduce:\n\n" + escape(clip(rec.reproduce, MAX_FIELD_CHARS), "block", "sh"))
    parts.append(f"_The full report: `python -m workbench report {rec.run_id} --format issue --full` (every table, "
                 f"chart and note in one issue), `--format md` or `--format html` (charts as images); the run with "
                 f"every raw sample and its environment: `python -m workbench export {rec.run_id} -o "
                 f"run.bundle.json`._")
    text = "\n\n".join(parts) + "\n"
    return _shrunk(text, limit) if len(text) > limit else text


def issue_markdown(rec: RunRecord, analysis: Analysis | None = None, limit: int | None = None,
                   full: bool = False) -> str:
    """The report as one GitHub issue body (see the module docstring): by default the short
    form (:func:`short_issue_markdown`); ``full``: the lead parts always, then the rest in
    order of importance while it fits in ``limit`` characters."""
    a = analysis or analyse(rec)
    if not full:
        return short_issue_markdown(rec, a, limit or ISSUE_SHORT_LIMIT)
    limit = limit or ISSUE_LIMIT
    study = a.study
    charts = charts_of(a)
    key_table, key_chart = key_names(a, charts)
    title = study.TITLE if study else escape(rec.study)
    lead = [f"### {title}: run {escape(rec.run_id, 'code')}", *head_markdown(a), run_line(rec)]
    if key_table:
        lead.append(f"#### {table_title(a, key_table)}\n\n" + narrow_table(shown_table(a, key_table)))
    if key_chart:
        lead.append(f"#### {chart_title(a, key_chart)}\n\n" + _chart_text(charts[key_chart], chart_title(a, key_chart)))
    tail = [env_markdown(rec, indent=None)]
    optional: list[tuple[str, str]] = [("the results table", "#### Results\n\n" + narrow_table(
        results_display(a.results), max_rows=40))]
    optional += [(f"the chart {chart_title(a, n)}", f"#### {chart_title(a, n)}\n\n" + _chart_text(c, chart_title(a, n)))
                 for n, c in charts.items() if n != key_chart]
    optional += [(f"the table {table_title(a, n)}", details(f"Table: {name_title(a.study, n, a.tables)}",
                                                            narrow_table(shown_table(a, n))))
                 for n in a.tables if not n.startswith("_") and n != key_table]
    sections = sections_of(a)
    if sections:
        optional.append(("the study's notes", details("The study's notes", "\n\n".join(sections))))
    optional += [("an analysis error", f"> {escape(e)}") for e in a.errors]
    seed = seed_section(study)
    if seed:
        optional.append(("the seed's figures", details("The seed's published figures", seed)))
    optional.append(("the raw samples", details("Raw samples, summarised (every sample is in the result bundle)",
                                                md_table(samples_summary(rec), 60))))
    if rec.error:
        optional.insert(0, ("the error", details("Error", escape(rec.error[:4000], "block"))))
    footer = (f"_Full report: `python -m workbench report {rec.run_id} --format md` (or `--format html`); raw samples: "
              f"`python -m workbench export {rec.run_id} -o run.bundle.json`._")
    parts, omitted = list(lead), []
    used = sum(len(p) + 2 for p in lead + tail) + len(footer) + 400  # 400: the omitted-parts line
    for what, text in optional:
        if used + len(text) + 2 <= limit:
            parts.append(text)
            used += len(text) + 2
        else:
            omitted.append(what)
    parts += tail
    if omitted:
        parts.append(f"_Left out to fit in one issue: {'; '.join(omitted[:12])}"
                     + (f" and {len(omitted) - 12} more" if len(omitted) > 12 else "") + "._")
    parts.append(footer)
    text = "\n\n".join(parts) + "\n"
    if len(text) > limit:  # the lead alone is too long (a huge key table): cut its rows
        return _shrunk(text, limit)
    return text


def _shrunk(text: str, limit: int) -> str:
    """A last resort for a lead that does not fit: table rows dropped from the end, then (text
    that no table holds: many long warnings, say) the text cut at a line with its open code
    fence and ``<details>`` closed, saying how much was left out."""
    lines = text.splitlines()
    size = sum(len(line) + 1 for line in lines)
    while size + 200 > limit:
        # a data row has the header and the separator (or other rows) above it
        rows = [i for i, l in enumerate(lines) if i >= 2 and l.startswith("|") and lines[i - 1].startswith("|")
                and lines[i - 2].startswith("|")]
        if not rows:
            break
        size -= len(lines.pop(rows[-1])) + 1
    out = "\n".join(lines)
    if len(out) + 200 <= limit:
        return out + "\n\n_(tables cut to fit in one issue)_\n"
    kept, fence, opened = [], None, 0
    for line in lines:
        if sum(len(k) + 1 for k in kept) + len(line) + 400 > limit:
            break
        kept.append(line)
        m = re.match(r"^(`{3,})", line)
        if m and (fence is None or m.group(1) == fence):
            fence = None if fence else m.group(1)
        opened += line.count("<details>") - line.count("</details>")
    cut = len(out) - sum(len(k) + 1 for k in kept)
    tail = ([fence] if fence else []) + ["</details>"] * max(opened, 0)
    return "\n".join(kept + tail) + f"\n\n_(cut to fit in one issue: the last {cut:,} characters are left out; the md " \
        "and html reports have everything)_\n"


def write_report(rec: RunRecord, fmt: str, path: str | Path, analysis: Analysis | None = None,
                 full: bool = False) -> Path:
    """Write the report of ``rec`` in ``fmt`` (one of :data:`FORMATS`) to ``path`` (``full``:
    the issue format's long form); raises ``outfile.OutputError`` (one line) when it cannot."""
    if fmt == "md":
        return write_markdown(rec, path, analysis)
    if fmt == "ipynb":
        return write_notebook(rec, path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; one of {', '.join(FORMATS)}")
    path = outfile.check_target(path)
    text = issue_markdown(rec, analysis, full=full) if fmt == "issue" else html_report(rec, analysis)
    return outfile.write(path, text)


# --- notebook ----------------------------------------------------------------------------------

# Notebooks use the public API (import workbench as wb; docs/python.md) and nothing else: the
# cells run wherever the workbench is installed, from the folder the notebook is in; no path of
# the exporting machine is written. Every chart leaves as its Vega-Lite spec and a PNG
# (workbench.presentation.jupyter.ChartView), so the notebook renders offline and on GitHub.

def _nbformat():
    # imported on use: a GPU node's image lacks nbformat, and the CLI that measures there
    # imports this module but never writes a notebook
    import nbformat

    return nbformat


def _notebook(cells: list):
    nb = _nbformat().v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    return nb


def _run_cells() -> list:
    """The cells that show ``run`` after the head: its other charts, results, tables, reproduce
    command."""
    nbformat = _nbformat()
    return [
        nbformat.v4.new_code_cell("run.charts(key=False)  # every chart but the key chart (in the head above)"),
        nbformat.v4.new_code_cell("run.display(\"results\")  # per variant: median with its 95% CI, spread, check, notes"),
        nbformat.v4.new_code_cell("run.display()  # every table, under its title (run.tables: the DataFrames)"),
        nbformat.v4.new_code_cell("print(run.reproduce)"),
    ]


def notebook(rec: RunRecord, bundle_name: str):
    """A notebook that reloads the run from ``bundle_name`` (beside it) and shows it."""
    nbformat = _nbformat()
    study = registry().get(rec.study)
    title = study.TITLE if study is not None else escape(rec.study)
    return _notebook([
        nbformat.v4.new_markdown_cell(
            f"# {title}: run {escape(rec.run_id, 'code')}\n\nReloads the run from "
            f"{escape(bundle_name, 'code')} beside this notebook: all it needs is the Perf Study Workbench "
            "installed (`pip install -e .` in its checkout), no results store.\n\n"
            f"Reproduce on your machine:\n\n{escape(rec.reproduce, 'block', 'sh')}"),
        nbformat.v4.new_code_cell(f"import workbench as wb\n\nrun = wb.load({bundle_name!r})\nrun"),
        *_run_cells(),
    ])


def write_notebook(rec: RunRecord, path: str | Path, execute: bool = True) -> Path:
    """Write the notebook and its bundle (``<stem>.bundle.json``) side by side, executed in
    that folder so it opens with its outputs (``execute=False``, or a kernel that cannot
    start: without them); raises ``outfile.OutputError`` (one line) when it cannot write."""
    path = outfile.check_target(path)
    bundle = write_bundle(rec, path.parent / f"{path.stem}.bundle.json")
    nb = notebook(rec, bundle.name)
    if execute:
        execute_notebook(nb, path.parent)
    return outfile.write(path, _nbformat().writes(nb))


def kernel_env() -> dict[str, str]:
    """The environment of a notebook's kernel: this process's, with the folder that holds this
    workbench first on ``PYTHONPATH``, so the kernel imports the workbench that wrote the
    notebook (a checkout's, where nothing is installed)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}


def execute_notebook(nb, folder: Path, timeout_s: int = 600) -> str:
    """Run ``nb`` in ``folder`` (as Jupyter would, from the folder it is saved in) with
    :func:`kernel_env`; returns '' or why it did not run. A cell that raises leaves its error
    in the outputs, as Jupyter does."""
    from nbclient import NotebookClient  # start-up: the Jupyter client, only to execute
    from nbclient.exceptions import CellExecutionError

    try:
        NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                       resources={"metadata": {"path": str(folder)}}).execute(env=kernel_env())
    except CellExecutionError as exc:
        return f"a cell failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    except Exception as exc:  # no kernel here: the notebook is still written, without outputs
        return f"not executed ({type(exc).__name__}: {exc})"
    return ""


def study_notebook(study: ModuleType):
    """A study's own notebook, generated from the library (never hand-maintained).

    It opens on the run the study's page opens on (:func:`workbench.api.default_run`: this
    machine's newest complete, checked run that can answer the seed, else the committed headline
    run), so a GPU study on a CPU machine shows its committed GPU run and never stores a smoke
    run taken on the CPU; only where there is no run at all does it run the smoke preset, and
    only where this machine can run the study's defaults. Then the run's charts, tables and the
    seed's figures.
    """
    sid = study.ID
    nbformat = _nbformat()
    return _notebook([
        nbformat.v4.new_markdown_cell(f"# {study.TITLE}\n\nSeed: {escape(seed_title(study))} — {study.SEED_SUMMARY}\n\n"
                                      f"{(study.__doc__ or '').strip()}"),
        nbformat.v4.new_code_cell(
            "import workbench as wb\n\n"
            "# the knobs: wb.explore(...), or the study's page (its folder's README)\n"
            f"run = wb.default_run({sid!r})  # the run its page opens on: yours, else the committed headline run\n"
            "if run is None:  # no run yet: a smoke run, where this machine can run the study\n"
            f"    run = wb.run({sid!r}, preset='smoke')  # or preset='quick', or knobs as keywords (wb.explore)\n"
            "run"),
        *_run_cells(),
        nbformat.v4.new_code_cell("run.seed()  # the seed's published figures, measured on the seed's machine"),
    ])


def write_study_notebooks(out_dir: str | Path) -> list[Path]:
    """``notebooks/<study>.ipynb`` for every registered study."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for study_id, study in registry().items():
        path = out_dir / f"{study_id}.ipynb"
        _nbformat().write(study_notebook(study), str(path))
        paths.append(path)
    return paths
