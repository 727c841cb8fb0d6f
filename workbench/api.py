"""The workbench from Python and Jupyter: ``import workbench as wb``.

::

    import workbench as wb

    wb.studies()                                   # DataFrame: id, title, seed, summary, knobs, presets
    run = wb.run("cpu-reduction", preset="smoke", chunks=[1, 2, 8], workers=[1, 2])
    run                                            # in a notebook: the page's head (warnings, verdict,
                                                   # the seed's claims, key table, key chart)
    run.claims, run.results, run.derived           # DataFrames
    run.tables                                     # {name: DataFrame}: the study's tables
    run.charts()                                   # every chart: Vega-Lite spec + PNG
    run.report("issue")                            # the GitHub-issue report (Markdown); "md", "html"
    run.report("ipynb", "out/run.ipynb")           # written files: a notebook and its bundle
    run.export("run.bundle.json")                  # the result bundle

    wb.runs("cpu-reduction")                       # DataFrame: stored and committed runs, newest first
    wb.default_run("ag-gemm")                      # the run its page opens on (a committed one on a CPU machine)
    old = wb.load("20261121-080417-mc2-split-568a86")   # a run id, a prefix, "latest" or a bundle file
    wb.compare(old, run)                           # B against A: diffs, per-variant verdicts (A = B refused)
    wb.compare(old, run).regressions("2%")         # variants clearly slower than A by more than 2%
    wb.ab("calibration", a={"threads": 1}, b={"threads": 2}, both={"repeat": 10})  # interleaved A/B

    spans = wb.trace("traces/examples/iree_sum_c8_50it.tracy")   # any supported format
    spans.breakdown()                              # {name: DataFrame}: per name, phases, ...
    spans.timeline()                               # the timeline chart
    gpu = wb.trace("rank0.json.gz", "rank1.json.gz")   # several files: the ranks of one run
    gpu.overlap(), gpu.temporal(), gpu.idle(), gpu.kernels()   # per rank, as Holistic Trace Analysis

    wb.explore("cpu-reduction")                    # the study's knobs as widgets, a Run button

    with wb.tracy_zone("py.step", text=i):         # a Python zone in IREE's Tracy capture
        f(x)                                       # (inert without IREE_PY_RUNTIME=tracy)

Each function is a thin layer over what ``python -m workbench`` and the pages call: the study
registry, :func:`workbench.seam.study.validate` (the same checks and messages as ``run --set``),
:func:`workbench.running.runner.execute` (the same store, ``$WORKBENCH_STORE`` or ``store=``, and the
same machine lock: a run waits while another times), :func:`workbench.reading.analysis.analyse`,
:mod:`workbench.presentation.report`, :mod:`workbench.reading.comparison`, :mod:`workbench.running.ab_session` and
:mod:`workbench.traces`. What the CLI says in one line, these raise in one line: a notebook
shows ``BadInput: parameter 'chunks': 0 is below the minimum (allowed 1..65536)``, not a
traceback (:class:`Error`, with the CLI's exit code in its docstring).

A run in a notebook shows a progress bar in its cell (``progress=False``: none; a callable
gets ``(fraction, message)``). Interrupting the kernel (Ctrl-C, SIGTERM, SIGHUP) stops it within seconds
and keeps its finished points: :class:`Interrupted` says where (``exc.run``).

``wb.explore`` (:func:`workbench.knobs.explore`) is the notebook twin of a study page.
``wb.tracy_zone``, ``wb.tracy_message``, ``wb.tracy_plot`` and ``wb.tracy_thread_name`` are
:mod:`workbench.running.tracy`'s zones, messages, plots and lane names for a user's own code.
Documentation: docs/python.md.
"""

from __future__ import annotations

import functools
import html
import os
from dataclasses import fields
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pandas as pd

from .reading import comparison
from .base import env
from .presentation import jupyter, report
from .running import runner
from .running.ab_session import DEFAULT_ROUNDS, execute_ab
from .running.ab_session import interrupted_text as ab_interrupted_text
from .reading.analysis import Analysis, analyse, charts_of
from .results.catalog import ORIGINS, Catalog, Header, find_run
from .results.catalog import default_run as default_run_of
from .cli import summary_text
from .base.names import seed_title, title
from .evidence.tables import results_display
from .base.outfile import OutputError
from .data.record import RunRecord
from .seam.registry import get, registry
from .results.store import Store, StoreError, write_bundle
from .seam.study import Cancelled, ParamError, StudyUnavailable, validate
from .traces import TraceError, overlap, phases
from .traces import idle as trace_idle
from .traces import analysis as trace_analysis
from .traces import charts as trace_charts
from .traces import load as load_trace
from .traces.ranks import RankError, load_ranks
from .running.tracy import message as tracy_message
from .running.tracy import plot as tracy_plot
from .running.tracy import thread_name as tracy_thread_name
from .running.tracy import zone as tracy_zone

StorePath = str | os.PathLike | None


class Error(Exception):
    """A one-line error: a notebook shows its line, not a traceback (IPython's
    ``_render_traceback_``); the CLI prints the same line."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class BadInput(Error, ValueError):
    """A parameter, store, file, study or run that cannot be used (the CLI's exit 2); nothing was stored."""


class Unavailable(Error):
    """The study cannot run on this machine: what is missing and how to get it (the CLI's exit 3)."""


class RunFailed(Error):
    """The study failed mid-way (the CLI's exit 1); ``run`` is the stored failed run with its finished points."""

    def __init__(self, message: str, run: Run | None = None):
        super().__init__(message)
        self.run = run


class Interrupted(KeyboardInterrupt):
    """Interrupted (kernel interrupt, Ctrl-C; the CLI's exit 130): the finished points are kept
    in ``run`` (``runs``: both sides of an A/B session). A KeyboardInterrupt, so a notebook
    stops running the cells after it."""

    def __init__(self, message: str, runs: tuple[Run, ...] = ()):
        super().__init__(message)
        self.runs = runs
        self.run = runs[0] if runs else None

    def _render_traceback_(self) -> list[str]:
        return [f"Interrupted: {self}"]


# --- studies and runs ------------------------------------------------------------------------


def studies() -> pd.DataFrame:
    """Every study: ``id``, ``title``, ``seed`` (its title; ``seed_file`` its file), ``summary``, its
    ``knobs`` and ``presets``."""
    return pd.DataFrame([{"id": m.ID, "title": m.TITLE, "seed": seed_title(m), "seed_file": m.SEED,
                          "summary": m.SEED_SUMMARY,
                          "knobs": m.SPACE.names, "presets": list(m.SPACE.presets)} for m in registry().values()])


def study_module(study_id: str) -> ModuleType:
    """The study's module, or :class:`BadInput` naming the known studies."""
    try:
        return get(study_id)
    except KeyError as exc:
        raise BadInput(exc.args[0]) from None


def _open_store(path: StorePath) -> Store:
    """The store a run writes to, checked writable before anything is measured."""
    try:
        store = Store(path) if path else Store()
        store.check_writable()
    except StoreError as exc:
        raise BadInput(str(exc)) from None
    return store


def _catalog(path: StorePath) -> tuple[Catalog, str]:
    try:
        return Catalog.open(path)
    except StoreError as exc:
        raise BadInput(str(exc)) from None


def _kept(store: Store, exc: BaseException) -> tuple[Run, ...]:
    """The runs a stopped run or session stored (``run_id`` / ``run_ids`` on the exception)."""
    out = []
    for run_id in getattr(exc, "run_ids", None) or [getattr(exc, "run_id", None)]:
        if run_id is not None:
            try:
                out.append(Run(store.load(run_id)))
            except (StoreError, KeyError):  # gone meanwhile: the message still names it
                continue
    return tuple(out)


def _measured(study: ModuleType, store: Store, progress: jupyter.Progress, kept: str,
              interrupted: Callable[[BaseException], str], measure: Callable[[], Any]):
    """``measure()``, its exceptions raised as the CLI's lines (:func:`workbench.cli._measuring`
    prints the same lines, with exit codes); ``kept`` names what a stopped run keeps (points,
    rounds), ``interrupted(exc)`` says where. The progress bar ends saying how it went."""
    outcome = "done"
    try:
        return measure()
    except (ParamError, runner.LockError) as exc:
        outcome = str(exc)
        raise BadInput(outcome) from None
    except StoreError as exc:  # the store cannot take the run (a full disk): before it started, or mid-way
        outcome = runner.failure_text(study, exc, kept)
        raise BadInput(outcome) from None
    except StudyUnavailable as exc:
        outcome = runner.failure_text(study, exc, kept)
        raise Unavailable(outcome) from None
    except (KeyboardInterrupt, Cancelled) as exc:
        outcome = "; ".join(filter(None, [interrupted(exc), runner.unfinished_text(exc, kept)]))
        raise Interrupted(outcome, _kept(store, exc)) from None
    except Exception as exc:  # the study failed: stored as failed, with what it finished
        outcome = runner.failure_text(study, exc, kept)
        got = _kept(store, exc)
        raise RunFailed(outcome, got[0] if got else None) from exc
    finally:
        progress.close(outcome)


def run(study: str, *, preset: str | None = None, store: StorePath = None, precision: float | str | None = None,
        precision_cap_s: float = runner.DEFAULT_PRECISION_CAP_S, progress: bool | Callable[[float, str], None] = True,
        **knobs: Any) -> Run:
    """Run ``study`` with its defaults, or ``preset`` (``smoke``, ``quick`` or the study's own),
    overridden by ``knobs`` (a list sweeps a multi-valued knob; text as ``--set`` takes it works
    too), store it and return it. ``precision`` (``"2%"`` or 0.02) repeats each variant until
    its median's CI is that narrow, for at most ``precision_cap_s`` in all. Raises
    :class:`BadInput` (nothing stored), :class:`Unavailable`, :class:`RunFailed` or
    :class:`Interrupted` (both keep the finished points)."""
    mod = study_module(study)
    try:  # every argument checked once, before the store is touched: bad input stores nothing
        plan = runner.plan(mod, knobs, preset=preset, precision=precision, precision_cap_s=precision_cap_s)
    except ParamError as exc:
        raise BadInput(str(exc)) from None
    st = _open_store(store)
    bar = jupyter.Progress(progress, mod.TITLE)
    interrupted = lambda exc: runner.interrupted_text(st, getattr(exc, "run_id", None))  # noqa: E731
    rec = _measured(mod, st, bar, "points", interrupted, lambda: runner.execute_plan(plan, st, progress=bar))
    return Run(rec, mod)


def runs(study: str | None = None, origin: str | None = None, store: StorePath = None) -> pd.DataFrame:
    """The runs ``load`` can address, newest first (``python -m workbench runs --all``): the
    store's and the bundles committed under ``traces/<study>/``; ``origin`` keeps one of
    ``local``, ``imported``, ``committed``."""
    if origin is not None and origin not in ORIGINS:
        raise BadInput(f"origin {origin!r} is not one of {', '.join(ORIGINS)}")
    catalog, _ = _catalog(store)
    try:
        headers = catalog.headers(study=study)
    except StoreError as exc:
        raise BadInput(str(exc)) from None
    return pd.DataFrame([h.to_json() for h in headers if origin is None or h.origin == origin],
                        columns=[f.name for f in fields(Header)])


def default_run(study: str, store: StorePath = None) -> Run | None:
    """The run the study's page opens on (:func:`workbench.results.catalog.default_run`): this machine's
    newest complete run with every check passed that can answer the seed's questions, else the
    study's committed headline run, else the newest run there is; None when the study has no run
    at all. A study notebook opens on it, so the notebook and the page show the same run."""
    mod = study_module(study)
    catalog, _ = _catalog(store)
    try:
        head = default_run_of(catalog.headers(study=mod.ID), mod, env.capture()["fingerprint"])
        return None if head is None else Run(catalog.load(head.run_id), mod)
    except StoreError as exc:
        raise BadInput(str(exc)) from None
    except KeyError as exc:
        raise BadInput(exc.args[0]) from None


def load(ref: str | os.PathLike, store: StorePath = None) -> Run:
    """A run: the path of a result bundle (only the file is needed: no store, no checkout), or
    a run id, a unique prefix of one or ``latest`` from the store or the committed bundles."""
    ref = os.fspath(ref)
    try:
        return Run(find_run(ref, lambda: _catalog(store)))
    except StoreError as exc:
        raise BadInput(str(exc)) from None
    except KeyError as exc:
        raise BadInput(exc.args[0]) from None


def _run_of(x: Run | str | os.PathLike, store: StorePath) -> Run:
    return x if isinstance(x, Run) else load(x, store)


def compare(a: Run | str | os.PathLike, b: Run | str | os.PathLike, store: StorePath = None) -> Comparison:
    """B against A (runs, ids or bundle files; ``python -m workbench compare A B``): what differs,
    then per variant the ratio B/A with its CI and verdict, judged against the run-to-run
    noise of the A/A runs of this configuration in the store and the committed bundles."""
    run_a, run_b = _run_of(a, store), _run_of(b, store)
    catalog, _ = _catalog(store)
    history = comparison.history_in(run_a.record, run_b.record, catalog)
    try:
        return Comparison(comparison.compare_runs(run_a.record, run_b.record, history), run_a, run_b)
    except comparison.CompareError as exc:
        raise BadInput(str(exc)) from None


def ab(study: str, a: dict[str, Any], b: dict[str, Any], *, both: dict[str, Any] | None = None,
       rounds: int = DEFAULT_ROUNDS, preset: str | None = None, store: StorePath = None,
       precision: float | str | None = None, precision_cap_s: float = runner.DEFAULT_PRECISION_CAP_S,
       progress: bool | Callable[[float, str], None] = True) -> Comparison:
    """An interleaved A/B session (``python -m workbench ab``): ``rounds`` rounds per side, A and
    B alternating under one hold of the machine lock, stored as two linked runs, then
    compared (``.a``, ``.b``: the runs). ``both``: knobs of both sides (a knob named like one
    of this function's arguments, such as cpu-reduction's ``rounds``, goes there)."""
    mod = study_module(study)
    try:
        sides = {side: {**(both or {}), **values} for side, values in (("A", a), ("B", b))}
        for values in sides.values():
            validate(mod, values, preset=preset)  # before the store is touched
        fraction = runner.parse_precision(precision, precision_cap_s)
        runner.stall_limit_s()  # a bad $WORKBENCH_STALL_S, before the store is made
    except ParamError as exc:
        raise BadInput(str(exc)) from None
    st = _open_store(store)
    bar = jupyter.Progress(progress, f"{mod.TITLE}: A/B")
    rec_a, rec_b = _measured(mod, st, bar, "rounds", ab_interrupted_text, lambda: execute_ab(
        mod, sides["A"], sides["B"], st, rounds=rounds, preset=preset, progress=bar, precision=fraction,
        precision_cap_s=precision_cap_s))
    run_a, run_b = Run(rec_a, mod), Run(rec_b, mod)
    return Comparison(comparison.compare_runs(rec_a, rec_b, comparison.history(rec_a, rec_b, st)), run_a, run_b)


class Run:
    """One run: its record, its analysis (computed once), tables, charts and reports. A
    notebook shows it as its page's head; ``print(run)`` as the CLI's summary."""

    def __init__(self, record: RunRecord, study: ModuleType | None = None):
        self.record = record
        self._study = study if study is not None else registry().get(record.study)

    @property
    def id(self) -> str:
        return self.record.run_id

    @property
    def study(self) -> str:
        return self.record.study

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def params(self) -> dict[str, Any]:
        return self.record.params

    @property
    def reproduce(self) -> str:
        """The CLI command that repeats this run."""
        return self.record.reproduce

    @cached_property
    def analysis(self) -> Analysis:
        """Everything about the run, from one call of the study's ``analyze``."""
        return analyse(self.record, self._study)

    @property
    def verdict(self) -> str:
        return self.analysis.verdict

    @property
    def disturbance(self) -> list[str]:
        """The "run disturbed" warnings (load, CPU clock), with their figures."""
        return list(self.analysis.disturbance)

    @property
    def claims(self) -> pd.DataFrame:
        """The seed's claims checked on this run: ``id, seed_text, seed_value, seed_machine,
        status, live, why`` (status: holds, contradicted, inconclusive, not testable here)."""
        return self.analysis.claims

    @property
    def results(self) -> pd.DataFrame:
        """Per variant: ``samples``, ``median_ns`` with its 95% CI (``ci_lo_ns``, ``ci_hi_ns``),
        the spread, the correctness check and the notes (noisy, harness floor, load)."""
        return self.analysis.results

    @property
    def derived(self) -> pd.DataFrame:
        """Derived numbers (differences, ratios, shares) with their CIs and status; empty when
        the study derives none."""
        return self.analysis.tables.get("derived", pd.DataFrame())

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The study's tables (its chart data, names starting with ``_``, left out)."""
        return {n: df for n, df in self.analysis.tables.items() if not n.startswith("_")}

    def display(self, name: str | None = None) -> jupyter.TableView:
        """Tables as people read them: ``"results"`` (per variant: median with its 95% CI, spread,
        check, notes), a study table's id, or every study table (``None``), each under its title
        and in the units its figures read in (``run.tables`` keeps ids and stored units)."""
        if name == "results":
            return jupyter.TableView([("Results per variant", results_display(self.results))])
        tables = self.tables
        if name is not None and name not in tables:
            raise BadInput(f"no table {name!r} in this run (its tables: {', '.join(tables) or 'none'}; or 'results')")
        picked = [name] if name is not None else list(tables)
        return jupyter.TableView([(title(self._study, n, self.analysis.tables), report.shown_table(self.analysis, n))
                                  for n in picked])

    @cached_property
    def _charts(self) -> jupyter.Charts:
        return jupyter.Charts({n: jupyter.ChartView(n, c) for n, c in charts_of(self.analysis).items()})

    def charts(self, key: bool = True) -> jupyter.Charts:
        """The study's charts by name, each shown as its Vega-Lite spec and a PNG (``.chart`` is
        the altair chart); ``key=False`` leaves out the key chart that the run's head shows."""
        _, key_chart = report.key_names(self.analysis, self._charts)
        return jupyter.Charts({n: c for n, c in self._charts.items() if key or n != key_chart})

    def report(self, fmt: str = "issue", path: str | os.PathLike | None = None) -> str | Path:
        """The report (``python -m workbench report``): ``issue`` (one GitHub issue body), ``md``,
        ``html``, ``ipynb``. With ``path`` the files are written (md: charts as PNG beside it;
        ipynb: the notebook and its bundle, executed) and the path returned; without, the text
        (Markdown is shown rendered in a notebook; md leaves its charts out)."""
        if fmt not in report.FORMATS:
            raise BadInput(f"report format {fmt!r} is not one of {', '.join(report.FORMATS)}")
        if path is not None:
            try:
                return report.write_report(self.record, fmt, path, analysis=self.analysis)
            except OutputError as exc:
                raise BadInput(str(exc)) from None
        if fmt == "ipynb":
            raise BadInput("an ipynb report is files (a notebook and its bundle): give a path")
        if fmt == "html":
            return report.html_report(self.record, self.analysis)
        text = report.issue_markdown(self.record, self.analysis) if fmt == "issue" else \
            report.markdown(self.record, analysis=self.analysis)
        return Markdown(text)

    def seed(self) -> Markdown:
        """The seed's published figures, labelled as the seed's with its machine (the page's Seed tab)."""
        return Markdown(report.seed_section(self._study) or "This study has no seed figures.")

    def export(self, path: str | os.PathLike) -> Path:
        """Write the result bundle (raw samples, environment, reproduce command, attachments)."""
        try:
            return write_bundle(self.record, path)
        except OutputError as exc:
            raise BadInput(str(exc)) from None

    def __repr__(self) -> str:
        return f"<Run {self.id} ({self.study}, {self.status}, {len(self.record.variants)} variants)>"

    def __str__(self) -> str:
        return summary_text(self.analysis)

    def _repr_html_(self) -> str:
        return jupyter.run_head_html(self.analysis, self._charts)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": str(self)}

    def _ipython_display_(self) -> None:
        # In IPython the key chart is an output of its own after the head (spec and PNG), not a
        # picture inside the HTML: JupyterLab then draws it live, and viewers that strip images
        # from HTML outputs (GitHub's) still show its PNG.
        from IPython.display import display  # start-up: only in a notebook

        display(jupyter.HtmlOutput(jupyter.run_head_html(self.analysis, self._charts, key_chart=False), str(self)))
        _, key_chart = report.key_names(self.analysis, self._charts)
        if key_chart:
            display(self._charts[key_chart])


class Markdown(str):
    """A report's Markdown; a notebook shows it rendered (as the page's issue preview does)."""

    def _repr_markdown_(self) -> str:
        return str(self)


class Comparison:
    """B against A (:func:`compare`, :func:`ab`): ``verdict``, ``table`` (per variant),
    ``warnings``, ``param_diff``, ``env_diff``; ``data`` is the plain comparison
    (:func:`workbench.reading.comparison.compare_runs`), ``a`` and ``b`` the runs."""

    def __init__(self, data: dict[str, Any], a: Run, b: Run):
        self.data, self.a, self.b = data, a, b

    @property
    def verdict(self) -> str:
        return comparison.summary_text(self.data)

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.data["rows"])

    @property
    def warnings(self) -> list[str]:
        return list(self.data["warnings"])

    @property
    def param_diff(self) -> pd.DataFrame:
        return pd.DataFrame(self.data["param_diff"], columns=["param", "a", "b"])

    @property
    def env_diff(self) -> pd.DataFrame:
        return pd.DataFrame(self.data["env_diff"], columns=["key", "a", "b"])

    def markdown(self) -> str:
        """The comparison as GitHub Markdown (``compare --format md``; the Runs page's download)."""
        return comparison.markdown(self.data)

    def regressions(self, threshold: float | str = 0.0) -> pd.DataFrame:
        """The variants clearly slower than A by more than ``threshold`` (``0.02`` or ``"2%"``):
        the comparison calls them slower and their B/A CI lies above 1 + ``threshold``
        (``compare A B --fail-above 2%`` exits 1 on any; :func:`workbench.reading.comparison.regressions`).
        Columns ``variant, ratio, ci_lo, ci_hi, verdict``; empty when there is none."""
        try:
            t = comparison.parse_threshold(threshold)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        rows = comparison.regressions(self.data, t)
        return pd.DataFrame([{"variant": r["variant"], "ratio": r["ratio"], "ci_lo": r["ci"][0], "ci_hi": r["ci"][1],
                              "verdict": r["verdict"]} for r in rows],
                            columns=["variant", "ratio", "ci_lo", "ci_hi", "verdict"])

    def __repr__(self) -> str:
        return f"<Comparison {self.b.id} (B) against {self.a.id} (A)>"

    def __str__(self) -> str:
        """The terminal table ``python -m workbench compare`` prints."""
        return comparison.terminal(self.data)

    def _repr_markdown_(self) -> str:
        return self.markdown()


# --- traces ----------------------------------------------------------------------------------


def trace(path: str | os.PathLike, *more: str | os.PathLike, align: str = "auto", marker: str | None = None) -> Trace:
    """A trace file in any supported format (``python -m workbench trace``), read into one span
    table; several files are the ranks of one run, their clocks aligned (``align``: auto,
    collective, base, none; ``marker``: a regex of the span to align on)."""
    paths = [os.fspath(p) for p in (path, *more)]
    try:
        if not more:
            spans, meta = load_trace(paths[0])
        else:
            spans, meta = load_ranks(paths, align=align, marker=marker)
    except TraceError as exc:
        raise BadInput(str(exc)) from None
    except RankError as exc:
        raise BadInput(f"ranks: {exc}") from None
    return Trace(spans, meta, ", ".join(Path(p).name for p in paths))


#: the analyses of :meth:`Trace.breakdown`, in order: (name, span table -> table); one that does
#: not apply to a trace raises ValueError (phases.PhaseError) and is left out with its reason
BREAKDOWNS: tuple[tuple[str, Callable[[pd.DataFrame], pd.DataFrame]], ...] = (
    ("by name", trace_analysis.name_stats),
    ("phases", phases.per_rank),
)


def _gpu(fn: Callable) -> Callable:
    """A GPU-time analysis of :class:`Trace`: a bad ``comm`` pattern is one line (BadInput)."""
    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except overlap.OverlapError as exc:
            raise BadInput(str(exc)) from None
    return call


class Breakdown(dict):
    """Analysis name -> table (:data:`BREAKDOWNS`); ``skipped`` says why the others do not apply."""

    def __init__(self, tables: dict[str, pd.DataFrame], skipped: dict[str, str]):
        super().__init__(tables)
        self.skipped = skipped

    def _repr_html_(self) -> str:
        parts = [f"<h4>{html.escape(name)}</h4>{df.head(jupyter.HEAD_ROWS).to_html(index=False)}"
                 for name, df in self.items()]
        parts += [f"<p><em>{html.escape(name)}: {html.escape(why)}</em></p>"
                  for name, why in self.skipped.items()]
        return "".join(parts)


class Trace:
    """A trace read into one span table (``spans``, with ``meta``): summary, lanes, per-name
    statistics, the GPU-time analyses per rank and the timeline; a notebook shows its summary
    and timeline.

    Every method is one call of a function of :mod:`workbench.traces` (the CLI and the Traces
    page call the same ones). The GPU-time analyses take ``comm``: a regular expression of
    kernel names that are communication, before the built-in rules (NCCL/RCCL, DeepEP,
    symmetric memory, peer copies); :meth:`suggest_comm` offers one when no rule finds any.
    Times are in us; where a table has times of day they are offsets from the trace's start.
    """

    def __init__(self, spans: pd.DataFrame, meta: dict[str, Any], name: str):
        self.spans, self.meta, self.name = spans, meta, name

    def summary(self) -> dict[str, Any]:
        """The ``trace --json`` document: format, counts by category, lanes, start, end,
        clock, dropped events."""
        return trace_analysis.summary(self.spans, self.meta)

    def lanes(self) -> pd.DataFrame:
        """Per lane: spans, first start and last end (us from the trace's start), busy and
        idle time, utilisation, largest gap."""
        return trace_analysis.track_summary(self.spans)

    def breakdown(self) -> Breakdown:
        """Where the time goes: every analysis of :data:`BREAKDOWNS` that applies to this trace."""
        return Breakdown(*trace_analysis.apply(self.spans, BREAKDOWNS))

    @_gpu
    def overlap(self, comm: str | None = None) -> pd.DataFrame:
        """Communication against computation per rank and GPU: hidden, exposed, ``overlap_pct``
        (HTA's ``get_comm_comp_overlap``)."""
        return overlap.comm_overlap(self.spans, comm)

    @_gpu
    def temporal(self, comm: str | None = None) -> pd.DataFrame:
        """GPU time per rank and GPU in parts that tile it: computation, fused, communication,
        memory, idle (HTA's ``get_temporal_breakdown``)."""
        return overlap.temporal(self.spans, comm)

    @_gpu
    def idle(self, comm: str | None = None, kernel_wait_us: float = trace_idle.KERNEL_WAIT_US) -> pd.DataFrame:
        """Idle time per stream by cause: host wait, kernel wait, other (HTA's
        ``get_idle_time_breakdown``)."""
        return trace_idle.breakdown(self.spans, comm, kernel_wait_us=kernel_wait_us)

    @_gpu
    def kernels(self, comm: str | None = None) -> pd.DataFrame:
        """Every kernel, copy and memset name per rank, GPU and type: count, total, mean, std,
        min, max, share of its type (HTA's ``get_gpu_kernel_breakdown``)."""
        return overlap.kernels(self.spans, comm)

    @_gpu
    def kernel_types(self, comm: str | None = None) -> pd.DataFrame:
        """Exclusive GPU time per rank and GPU by the combination of types running
        ("computation + communication", ..., "idle"): HTA's kernel-type breakdown."""
        return overlap.states(self.spans, comm)

    @_gpu
    def steps(self, comm: str | None = None) -> pd.DataFrame:
        """The GPU-time figures of each profiler step per rank and GPU."""
        return overlap.steps(self.spans, comm)

    @_gpu
    def suggest_comm(self, comm: str | None = None) -> dict | None:
        """When no communication is found but kernels are named like it (dispatch, combine,
        all_gather...): the pattern to pass as ``comm``, with how many kernels it counts."""
        return overlap.suggest_comm(self.spans, comm)

    def timeline(self, start_ns: int | None = None, end_ns: int | None = None,
                 width: int = jupyter.STATIC_WIDTH_PX) -> jupyter.ChartView:
        """The timeline of the spans in ``[start_ns, end_ns)`` (the trace's clock), as the Traces
        page draws it: one row per lane and nesting level, zoom and pan where the spec is drawn."""
        return jupyter.ChartView("timeline", trace_charts.timeline(self.spans, start_ns, end_ns, width=width,
                                                                   title=f"timeline: {self.name}"))

    @cached_property
    def _timeline(self) -> jupyter.ChartView:
        return self.timeline()

    def __repr__(self) -> str:
        return f"<Trace {self.name} ({self.meta.get('format')}, {len(self.spans):,} rows)>"

    def _repr_html_(self) -> str:
        png = self._timeline.png()
        return jupyter.trace_html(self.spans, self.meta, self.name) + (jupyter.png_tag(png, "timeline") if png else "")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def _ipython_display_(self) -> None:
        from IPython.display import display  # start-up: only in a notebook

        display(jupyter.HtmlOutput(jupyter.trace_html(self.spans, self.meta, self.name), repr(self)))
        if len(self.spans):
            display(self._timeline)
