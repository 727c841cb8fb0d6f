"""The notebook side of the public API (:mod:`workbench.api`): charts that travel, a run's head
and a trace's summary as HTML, and a progress bar in a cell.

Charts leave a kernel as one output each that carries the Vega-Lite spec *and* a PNG of it
(:class:`ChartView`): JupyterLab draws the spec where it has a renderer for it, and GitHub's
notebook viewer, nbconvert's HTML and any other front end without one show the PNG, so a
notebook renders offline and on GitHub. (Altair's default renderer loads Vega from a CDN:
exported notebooks were blank offline.) The PNG is drawn by vl-convert, as in the reports
(:func:`workbench.presentation.report.render_charts`).

A run and a trace show in a notebook as HTML built from the same Markdown as the reports
(:mod:`workbench.presentation.report`), every string from the run escaped there and rendered with raw HTML
off (:func:`workbench.presentation.report.md_to_html`); a run's head is the page's head: disturbance
warnings, verdict, the seed's claims, the key table and the key chart.
"""

from __future__ import annotations

import base64
import html
import json
import time
from typing import Any

import altair as alt
import pandas as pd

from ..evidence import claims as claimsmod
from . import report
from ..reading.analysis import Analysis
from .progress import ProgressBar
from ..evidence.tables import md_table, results_display
from ..traces import analysis as trace_analysis
from ..traces import ranks
from ..base.untrusted import escape

#: rows of a table in a run's head or a trace's summary (the whole table is a DataFrame away)
HEAD_ROWS = 30
#: pixels of a chart drawn as a static image where its spec says "as wide as the page"
STATIC_WIDTH_PX = 900
#: the largest Vega-Lite spec a chart's output carries (beyond it, only its PNG)
SPEC_MAX_BYTES = 100_000
#: seconds between two redraws of a progress bar (each is a message to the front end)
PROGRESS_EVERY_S = 0.25

# The MIME type of the Vega-Lite version this altair writes, in Jupyter's "+json" form: a notebook
# holds a JSON object only under a "+json" type (nbformat refuses altair 6's own ".json" form).
VEGALITE_MIME = f"application/vnd.vegalite.{alt.SCHEMA_VERSION.split('.')[0]}+json"


class ChartView:
    """One chart, shown as its Vega-Lite spec and a PNG of it (see the module docstring).
    ``chart`` is the altair chart; :meth:`png` its picture (drawn once)."""

    def __init__(self, name: str, chart: Any):
        self.name = name
        self.chart = chart
        self._png: bytes | None = None

    def png(self) -> bytes | None:
        """The chart as PNG bytes, or None where it cannot be drawn (the spec still shows)."""
        if self._png is None:
            self._png = report.render_charts({self.name: self.chart}).get(self.name)
        return self._png

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": f"<chart {self.name}>"}
        spec = self.chart.to_dict()
        # a spec with thousands of rows of data (a trace's timeline: 1.6 MB) would make every
        # notebook that shows it megabytes: the PNG alone leaves then, .chart keeps the spec
        if len(json.dumps(spec, separators=(",", ":"))) <= SPEC_MAX_BYTES:
            bundle[VEGALITE_MIME] = spec
        else:
            bundle["text/plain"] += " (a picture: its interactive spec is too large for a notebook; .chart has it)"
        png = self.png()
        if png is not None:
            bundle["image/png"] = base64.b64encode(png).decode()
        else:
            bundle["text/plain"] += f" (no PNG: {report.png_blocked() or 'vl-convert could not draw it'})"
        return bundle

    def __repr__(self) -> str:
        return f"<chart {self.name}>"


class Charts(dict):
    """Chart name -> :class:`ChartView`; a notebook shows each as its own output."""

    def _ipython_display_(self) -> None:
        from IPython.display import display  # start-up: only where a notebook shows them

        for view in self.values():
            display(view)
        if not self:
            display(HtmlOutput("<p><em>No charts.</em></p>", "(no charts)"))


class TableView:
    """Tables as people read them in a notebook (:meth:`workbench.api.Run.display`): each under
    its title, in the units its figures read in (:func:`workbench.evidence.tables.readable`), at most
    :data:`HEAD_ROWS` rows each (the DataFrames of ``run.tables`` hold every row, in stored units)."""

    def __init__(self, titled: list[tuple[str, pd.DataFrame]]):
        self.titled = titled

    def _markdown(self) -> str:
        parts = []
        for title, df in self.titled:
            more = f"\n\n_(the first {HEAD_ROWS} of {len(df)} rows)_" if len(df) > HEAD_ROWS else ""
            parts.append(f"**{escape(title)}**\n\n" + md_table(df, HEAD_ROWS) + more)
        return "\n\n".join(parts) or "_No tables._"

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        # the HTML once: a Markdown and a plain copy of every table would triple the notebook
        names = ", ".join(title for title, _ in self.titled)
        return {"text/html": report.md_to_html(self._markdown()), "text/plain": f"<tables: {names}>"}

    def __str__(self) -> str:
        return self._markdown()


class HtmlOutput:
    """HTML with its plain-text twin, for :func:`IPython.display.display`."""

    def __init__(self, text_html: str, text_plain: str):
        self.text_html, self.text_plain = text_html, text_plain

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/html": self.text_html, "text/plain": self.text_plain}


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (where a cell can show a progress bar)."""
    try:
        from IPython import get_ipython  # start-up: IPython only where it is asked about
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def png_tag(png: bytes, alt_text: str) -> str:
    return f'<img alt="{html.escape(alt_text)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _details(summary: str, body_html: str) -> str:
    return f"<details><summary>{html.escape(summary)}</summary>{body_html}</details>"


def run_head_html(a: Analysis, charts: Charts, key_chart: bool = True) -> str:
    """A run as its page leads with it: title and machine, disturbance warnings, verdict, the
    seed's claims (their reasons on demand), failed checks and analysis errors, the key table
    (or the results) and, with ``key_chart``, the key chart as a picture."""
    rec, study = a.rec, a.study
    title = study.TITLE if study else escape(rec.study)
    head = report.head_markdown(a, claimsmod.LEAD_COLUMNS, level=5, why_at="below")
    parts = [report.md_to_html("\n\n".join([f"#### {title}: run {escape(rec.run_id, 'code')}", *head]))]
    if len(a.claims):
        parts.append(_details("Why each claim has its status, and the seed's own words",
                              report.md_to_html(md_table(claimsmod.display(a.claims)[claimsmod.WHY_COLUMNS]))))
    rest = [report.run_line(rec)]
    if rec.status != "complete":
        reason = rec.error.strip().splitlines()[0] if rec.error and rec.error.strip() else ""
        rest.append(f"> **This run is {escape(rec.status)}.** {escape(reason)}")
    failed = [v for v in rec.variants if not v.correct]
    if failed:
        rest.append("**Correctness check FAILED (times not counted):** "
                    + escape("; ".join(f"{v.variant}: {v.check}" for v in failed)))
    rest += [f"> {escape(e)}" for e in a.errors]
    key_table, key = report.key_names(a, charts)
    if key_table:
        rest.append(f"**{report.table_title(a, key_table)}**\n\n" + report.narrow_table(report.shown_table(a, key_table),
                                                                                       HEAD_ROWS))
    else:
        rest.append("**Results**\n\n" + report.narrow_table(results_display(a.results), HEAD_ROWS))
    parts.append(report.md_to_html("\n\n".join(rest)))
    if key_chart and key:
        png = charts[key].png()
        if png is not None:
            parts.append(png_tag(png, key))
    return f'<div class="workbench-run">{"".join(parts)}</div>'


def trace_html(spans: pd.DataFrame, meta: dict, name: str, top: int = 10, lanes: int = 12) -> str:
    """A trace as ``python -m workbench trace FILE`` summarises it: format, counts, wall time,
    clock, what the importer dropped, the categories, the lanes, the top names by total time
    and, for several ranks, the ranks."""
    doc = trace_analysis.summary(spans, meta)
    wall_ms = (doc["end_ns"] - doc["start_ns"]) / 1e6 if doc["start_ns"] is not None else 0.0
    md = [f"#### Trace {escape(name, 'code')}",
          f"Format {escape(doc['format'], 'code')} · {doc['span_count']:,} spans · {doc['instant_count']:,} instants "
          f"· wall {wall_ms:,.3f} ms · clock: {escape(doc['clock'])}  \n"
          f"Dropped or adjusted events: {escape(trace_analysis.dropped_text(doc['dropped']) or 'none')}  \n"
          "Categories: " + escape(", ".join(f"{k}={v}" for k, v in doc["by_category"].items()))]
    lane_table = trace_analysis.track_summary(spans)
    if len(lane_table):
        shown = lane_table.drop(columns=["first_us", "last_us"]).head(lanes)
        md.append(f"**Lanes** ({len(shown)} of {len(lane_table)})\n\n" + md_table(shown))
        md.append(f"**Top {top} names by self time**\n\n" + md_table(trace_analysis.name_stats(spans).head(top)))
    if ranks.is_multi_rank(spans):
        md.append(f"**Ranks**: {escape(ranks.slowest(spans)['text'])}\n\n" + md_table(ranks.rank_summary(spans)))
    body = report.md_to_html("\n\n".join(md))
    return f'<div class="workbench-trace">{body}</div>'


class Progress:
    """A run's progress for :func:`workbench.api.run`: ``how`` True shows a bar in the cell (a
    display updated in place, at most every :data:`PROGRESS_EVERY_S`) or, outside a notebook,
    the CLI's bar on stderr; a callable gets ``(fraction, message)``; False shows nothing."""

    def __init__(self, how: Any, title: str):
        self.title, self.last_s, self.handle, self.bar = title, 0.0, None, None
        self.fn = how if callable(how) else None
        if how is True and in_kernel():
            from IPython.display import display  # start-up: only in a notebook

            self.handle = display(HtmlOutput(self._html(0.0, "waiting for the machine"), title), display_id=True)
        elif how is True:
            self.bar = self.fn = ProgressBar()

    def _html(self, fraction: float, message: str) -> str:
        return (f'<div><b>{html.escape(self.title)}</b> <progress value="{fraction:.3f}" max="1" style="width:20em">'
                f"</progress> {fraction * 100:.0f}% {html.escape(message)}</div>")

    def __call__(self, fraction: float, message: str) -> None:
        if self.fn is not None:
            self.fn(fraction, message)
        elif self.handle is not None and time.monotonic() - self.last_s >= PROGRESS_EVERY_S:
            self.last_s = time.monotonic()
            self.handle.update(HtmlOutput(self._html(fraction, message), f"{fraction:.0%} {message}"))

    def close(self, message: str) -> None:
        """The last state: what became of the run."""
        if self.handle is not None:
            self.handle.update(HtmlOutput(f"<div><b>{html.escape(self.title)}</b>: {html.escape(message)}</div>", message))
        if self.bar is not None:
            self.bar.close()
