"""The study seam: parameter spaces, the run context and the hooks a study defines.

A study is one package ``studies/<id>/`` (``studies/README.md`` is where a new one starts)
whose ``__init__.py`` defines:

- ``ID``, ``TITLE``, ``SEED`` (file name of the seed report it reproduces), ``SEED_TITLE`` (the
  seed by what it is: "IREE issue #24011, ..."), ``SEED_SUMMARY`` (one line), a module docstring
  stating its question, what it measures and with which clock;
- ``SPACE``: a :class:`ParamSpace` with at least a ``smoke`` preset (used by the tests) and
  a ``quick`` preset (``--quick`` on the CLI, the preset a page's form starts from);
- ``requires(params) -> str | None``: why the study cannot run here (no GPU, no OpenCL
  platform), with how to get it, or None;
- ``run(params, ctx: RunContext) -> dict``: measures, checks every kernel's output against a
  reference *before* its time counts, hands each finished variant to ``ctx.record`` (so an
  interrupted sweep keeps its points; ``ctx.update`` again each time a variant gains a repeat),
  reports progress through ``ctx.steps(total)`` (the app shows "k of N points") and returns
  study-specific outputs that are not
  timings (JSON-serialisable). It never aggregates, plots or prints;
- what it compares, declared (:mod:`workbench.evidence.engine`): ``METRICS`` (what the samples
  measure beyond time, with units), ``BASELINES`` (which variant each is compared with),
  ``NULLS`` (its A/A twins and other null controls) and ``TARGETS``; the claims in
  ``SEED_CLAIMS`` (below);
- ``analyze(record) -> dict[str, pandas.DataFrame]``: the ONLY place that reads a record; every
  derived quantity (difference, ratio, share, gain) comes from the comparison engine
  (:class:`workbench.evidence.engine.Evidence`), with its CI, levels and status, in a ``derived`` table.
  It runs once per record (:func:`workbench.reading.analysis.analyse`); tables whose name starts with
  ``_`` are chart data, not for reading;
- ``charts(tables) -> dict[str, altair.Chart]``.

Optionally:

- ``validate(params)`` for cross-parameter checks (raise :class:`ParamError`);
- ``answers_seed(params) -> bool``: whether a run with these parameters can answer the seed's
  questions (default: it is not a smoke run); a page never opens on one that cannot while
  another exists (:func:`workbench.results.catalog.default_run`); ``HEADLINE_RUN``: the committed
  bundle (by name, ``bench-ws2``) a page without a run of this machine opens on;
- ``sweep_size(params) -> int``: how many points the run would measure, when that is not the
  product of the study's list parameters (:func:`sweep_size`; a run over
  :data:`MAX_SWEEP_POINTS` is refused);
- ``findings(tables) -> list[workbench.evidence.verdict.Finding]``: what the verdict may state (the
  derived rows that answer the study's question, the first its lead; facts of its own model,
  labelled as such), Markdown-safe (untrusted strings through :func:`workbench.base.untrusted.escape`).
  The engine writes the verdict from them (:func:`workbench.evidence.verdict.write`: one sentence, at
  most five bullets). Without it, every row of the ``derived`` table;
- ``report_sections(tables) -> list[str]``: extra Markdown built from tables only, every
  untrusted string escaped;
- ``SEED_CLAIMS``: a list of :class:`workbench.evidence.claims.Claim`, the seed's findings, each with a
  title, the seed's figure as ``magnitude`` where it gives one, and a test on the tables that
  picks the quantity and states the direction (the claims table leads the page, the reports
  and the notebook);
- ``KEY_TABLE``, ``KEY_CHART``: names of the seed-shaped table and the chart a page leads with;
- ``SEED_FIGURES``: the seed's published numbers as data, shown as the seed's;
- ``README_BLOCKS``: ``{name: fn(analyses, args) -> Markdown}``, blocks the study writes in its
  committed result README from the analyses of every bundle beside it (:mod:`workbench.reading.readme`);
- ``HONOURS_PRECISION = True``: every timed sample comes from the harness's repeat loop
  (:func:`workbench.running.harness.measure`, or a series the study extends with
  :func:`workbench.running.harness.more_samples`), so ``--precision`` holds; other studies refuse it.

:mod:`workbench.seam.registry` finds the studies and checks these hooks; the record types are in
:mod:`workbench.data.record`.
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterable, Sequence

from ..base import interrupt
from ..base.names import did_you_mean
from ..data.record import VariantResult
from ..base.untrusted import check_attachment_name, check_variant_name


class ParamError(ValueError):
    """An invalid parameter value; the message names the parameter and what is allowed."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(f"parameter '{param}': {message}")


class StudyUnavailable(RuntimeError):
    """The study cannot run on this machine (missing GPU, OpenCL platform, package)."""


class Cancelled(RuntimeError):
    """The run was cancelled by the user; finished points are kept."""


_KINDS = {"int": int, "float": float, "str": str, "bool": bool}
#: most knobs a form shows before "Advanced" (:attr:`ParamSpace.headline`)
MAX_HEADLINE = 8
#: most values one list parameter takes (``--set sizes=...``)
MAX_LIST_VALUES = 1_000
#: most points one run measures: a larger sweep is refused before anything starts (split it
#: into several runs); the largest preset measures a few hundred
MAX_SWEEP_POINTS = 10_000


@dataclass(frozen=True)
class Param:
    """One typed parameter. ``multi=True`` makes it a list that the study sweeps."""

    name: str
    kind: str  # "int" | "float" | "str" | "bool"
    default: Any
    help: str = ""
    unit: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    multi: bool = False

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"Param {self.name}: unknown kind {self.kind!r}")

    def _one(self, raw: Any) -> Any:
        typ = _KINDS[self.kind]
        if isinstance(raw, str):
            text = raw.strip()
            if self.kind == "bool":
                low = text.lower()
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off"):
                    return False
                raise ParamError(self.name, f"expected true/false, got {raw!r}")
            try:
                if self.kind == "int":
                    # Accept 1e6, 1_000_000 and 64M-style suffixes: engineers type sizes that way.
                    value = _parse_int(text)
                else:
                    value = typ(text)
            except ValueError:
                raise ParamError(self.name, f"expected {self.kind}, got {raw!r}") from None
            except OverflowError:  # 'infk', '1e400k'
                raise ParamError(self.name, f"expected {self.kind}, got {raw!r}, which is not finite") from None
        else:
            if self.kind == "int" and isinstance(raw, float) and raw.is_integer():
                raw = int(raw)
            if self.kind == "float" and isinstance(raw, int) and not isinstance(raw, bool):
                raw = float(raw)
            if not isinstance(raw, typ) or (self.kind == "int" and isinstance(raw, bool)):
                raise ParamError(self.name, f"expected {self.kind}, got {raw!r}")
            value = raw
        # NaN passes every comparison with min and max, and inf makes loops unbounded.
        if self.kind == "float" and not math.isfinite(value):
            raise ParamError(self.name, f"{value} is not a finite number {self.range_text()}")
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(map(str, self.choices))
            raise ParamError(self.name, f"{value!r} is not one of: {allowed}")
        if self.min is not None and value < self.min:
            raise ParamError(self.name, f"{value} is below the minimum {self.range_text()}")
        if self.max is not None and value > self.max:
            raise ParamError(self.name, f"{value} is above the maximum {self.range_text()}")
        return value

    def range_text(self) -> str:
        lo = "-inf" if self.min is None else _fmt(self.min)
        hi = "inf" if self.max is None else _fmt(self.max)
        unit = f" {self.unit}" if self.unit else ""
        return f"(allowed {lo}..{hi}{unit})"

    def coerce(self, raw: Any) -> Any:
        """Parse and validate a raw value (CLI text, widget value or stored JSON)."""
        if self.multi:
            if isinstance(raw, str):
                items = [x for x in raw.split(",") if x.strip() != ""]
            elif isinstance(raw, (list, tuple)):
                items = list(raw)
            else:
                items = [raw]
            if not items:
                raise ParamError(self.name, "needs at least one value")
            if len(items) > MAX_LIST_VALUES:
                raise ParamError(self.name, f"{len(items):,} values; a list parameter takes at most "
                                            f"{MAX_LIST_VALUES:,}")
            return [self._one(x) for x in items]
        if isinstance(raw, (list, tuple)):
            raise ParamError(self.name, "takes a single value, not a list")
        return self._one(raw)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "ki": 2**10, "mi": 2**20, "gi": 2**30}


def _parse_int(text: str) -> int:
    """Raises ValueError, or OverflowError for ``infk`` and ``1e400k``."""
    t = text.replace("_", "").lower()
    for suf in ("ki", "mi", "gi", "k", "m", "g"):
        if t.endswith(suf) and t[: -len(suf)]:
            return int(float(t[: -len(suf)]) * _SUFFIX[suf])
    if "e" in t:
        f = float(t)
        if not f.is_integer():
            raise ValueError(text)
        return int(f)
    return int(t)


@dataclass(frozen=True)
class ParamSpace:
    """A study's declared parameters plus named presets (``smoke`` and ``quick`` at least).

    ``headline`` names the knobs a form shows first, in order (about five, at most
    :data:`MAX_HEADLINE`); the others are "Advanced" (:attr:`advanced`). ``gpu_only`` names the
    knobs that apply only on a GPU (a form on a machine without one hides them, with one line
    saying why, and keeps their values). ``purposes`` gives each preset its one line (the form's
    preset picker and the manual show it). ``renamed`` maps a parameter's old name to its new
    one: a stored run's parameters and ``--set old=`` still read (:meth:`upgrade`), with a
    deprecation line (:meth:`deprecated`)."""

    params: tuple[Param, ...]
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    headline: tuple[str, ...] = ()
    gpu_only: tuple[str, ...] = ()
    purposes: dict[str, str] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names}")
        for preset, values in self.presets.items():
            unknown = set(values) - set(names)
            if unknown:
                raise ValueError(f"preset {preset!r} sets unknown parameters {sorted(unknown)}")
        unknown = (set(self.headline) | set(self.gpu_only) | set(self.renamed.values())) - set(names)
        if unknown:
            raise ValueError(f"headline, gpu_only or renamed name unknown parameters {sorted(unknown)}")
        if len(self.headline) > MAX_HEADLINE:
            raise ValueError(f"{len(self.headline)} headline knobs; a form shows at most {MAX_HEADLINE} first")
        if set(self.purposes) - set(self.presets):
            raise ValueError(f"purposes of unknown presets {sorted(set(self.purposes) - set(self.presets))}")

    @property
    def advanced(self) -> list[str]:
        """The knobs a form keeps under "Advanced": every one not in :attr:`headline`."""
        return [p.name for p in self.params if p.name not in self.headline]

    def upgrade(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` with renamed parameters under their new names (an old run's, ``--set``'s);
        a value given under both names keeps the new name's."""
        out = dict(values)
        for old, new in self.renamed.items():
            if old in out:
                value = out.pop(old)
                out.setdefault(new, value)
        return out

    def deprecated(self, values: dict[str, Any]) -> list[str]:
        """One line per renamed parameter that ``values`` still names the old way."""
        return [f"parameter '{old}' is now '{new}' (--set {new}=...); the old name still works for now"
                for old, new in self.renamed.items() if old in values]

    def points(self, values: dict[str, Any]) -> int:
        """The size of the sweep ``values`` declare: the product of the lengths of the
        multi-valued parameters (a measure of a run's work for
        :func:`workbench.results.catalog.estimate_s`, not a count of its variants)."""
        return math.prod(len(values[p.name]) for p in self.params if p.multi and isinstance(values.get(p.name), list))

    def __getitem__(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def defaults(self, preset: str | None = None) -> dict[str, Any]:
        """The declared defaults, or a preset over them, coerced and checked."""
        return self.resolve({}, preset=preset)

    def resolve(self, values: dict[str, Any], preset: str | None = None) -> dict[str, Any]:
        """Defaults (or a preset), overridden by ``values``; every value coerced and checked."""
        base = {p.name: p.default for p in self.params}
        if preset:
            if preset not in self.presets:
                raise ParamError("preset", f"unknown preset {preset!r}{did_you_mean(preset, self.presets)}; this study's "
                                           f"presets: {', '.join(self.presets)}")
            base.update(self.presets[preset])
        values = self.upgrade(values)
        for name in values:
            if name not in base:
                raise ParamError(name, f"unknown parameter{did_you_mean(name, self.names)}; this study takes: "
                                       f"{', '.join(self.names)} (python -m workbench knobs STUDY lists them)")
        base.update(values)
        return {p.name: p.coerce(base[p.name]) for p in self.params}

    @staticmethod
    def parse_sets(sets: Iterable[str]) -> dict[str, str]:
        """``["n=1000", "workers=1,2"]`` -> ``{"n": "1000", "workers": "1,2"}``."""
        out: dict[str, str] = {}
        for item in sets:
            if "=" not in item:
                raise ParamError(item, "expected name=value")
            name, value = item.split("=", 1)
            out[name.strip()] = value
        return out


ProgressFn = Callable[[float, str], None]


class Steps:
    """Progress over a known number of steps, by default the points of a sweep: call
    :meth:`tick` when a step finished (:meth:`say` reports what is happening without
    finishing one). The app shows "3 of 12 points" and the elapsed time; the fraction is
    mapped onto ``start..end`` of the run's progress. Replaces hand-made tickers in studies::

        steps = ctx.steps(len(grid))
        for point in grid:
            steps.say(f"checking {point}")
            ...
            ctx.record(result)
            steps.tick(f"{point} done")
    """

    def __init__(self, report: Callable[[float, str, tuple[int, int, str]], None], total: int,
                 start: float = 0.0, end: float = 1.0, unit: str = "points"):
        self._report = report
        self.total, self.start, self.end, self.unit = max(1, int(total)), start, end, unit
        self.done = 0

    def tick(self, message: str = "") -> None:
        self.done += 1
        self.say(message)

    def say(self, message: str) -> None:
        done = min(self.done, self.total)
        self._report(self.start + (self.end - self.start) * done / self.total, message, (done, self.total, self.unit))


class RunContext:
    """What a study's ``run`` talks to: progress, per-point recording, attachments, cancel.

    ``on_record`` is called for each variant as soon as it finishes, which is how the store
    keeps the points of an interrupted sweep; ``on_update`` when a recorded variant gained
    repeats (:meth:`update`). Variant and attachment names are checked here, so a study
    cannot store a name that a bundle importer would refuse. Every call is a checkpoint of
    :mod:`workbench.base.interrupt` (after the point is stored): a recorded Ctrl-C stops the run
    there.
    """

    def __init__(
        self,
        progress: ProgressFn | None = None,
        on_record: Callable[[VariantResult], None] | None = None,
        on_attach: Callable[[str, str, bytes], None] | None = None,
        cancel: threading.Event | None = None,
        on_update: Callable[[VariantResult], None] | None = None,
    ):
        self._progress = progress
        self._on_record = on_record
        self._on_update = on_update
        self._on_attach = on_attach
        self.cancel_event = cancel or threading.Event()
        self.variants: list[VariantResult] = []
        self.attachments: list[tuple[str, str, bytes]] = []
        #: (steps done, total, unit) of the run's :class:`Steps`, None when it counts none
        self.step: tuple[int, int, str] | None = None
        self._next_block = 0

    def block(self) -> int:
        """A new block number of this run (:attr:`VariantResult.blocks`): take one per stretch
        of timing, i.e. per variant timed alone or per round of interleaved variants."""
        self._next_block += 1
        return self._next_block - 1

    def progress(self, fraction: float, message: str = "") -> None:
        interrupt.check()
        if self.cancel_event.is_set():
            raise Cancelled("run cancelled")
        if self._progress:
            self._progress(max(0.0, min(1.0, fraction)), message)

    def steps(self, total: int, start: float = 0.0, end: float = 1.0, unit: str = "points") -> Steps:
        """A :class:`Steps` ticker over ``total`` steps for this run's progress."""
        return Steps(self._step_progress, total, start, end, unit)

    def _step_progress(self, fraction: float, message: str, step: tuple[int, int, str]) -> None:
        self.step = step
        self.progress(fraction, message)

    def record(self, result: VariantResult) -> None:
        check_variant_name(result.variant)
        self.variants.append(result)
        if self._on_record:
            self._on_record(result)
        interrupt.check()

    def update(self, result: VariantResult) -> None:
        """Replace the variant of the same name recorded earlier in this run (a variant
        that gained a repeat), or record it: an interrupt keeps every finished repeat."""
        check_variant_name(result.variant)
        for i, v in enumerate(self.variants):
            if v.variant == result.variant:
                self.variants[i] = result
                break
        else:
            self.variants.append(result)
        if self._on_update:
            self._on_update(result)
        elif self._on_record:
            self._on_record(result)
        interrupt.check()

    def attach(self, name: str, kind: str, data: bytes) -> None:
        """Attach a file (trace, log) to the run; ``kind`` e.g. ``trace/chrome-json``; ``name``
        must be a plain file name (:func:`workbench.base.untrusted.check_attachment_name`)."""
        check_attachment_name(name)
        self.attachments.append((name, kind, data))
        if self._on_attach:
            self._on_attach(name, kind, data)
        interrupt.check()


def validate(study: ModuleType, values: dict[str, Any], preset: str | None = None) -> dict[str, Any]:
    """Resolve and validate parameters, including the study's cross-parameter checks and the
    size of the sweep (:data:`MAX_SWEEP_POINTS`)."""
    params = study.SPACE.resolve(values, preset=preset)
    check = getattr(study, "validate", None)
    if check is not None:
        check(params)
    points = sweep_size(study, params)
    if points > MAX_SWEEP_POINTS:
        raise ParamError("sweep", f"{points:,} points, more than the {MAX_SWEEP_POINTS:,} one run may measure; "
                                  "split the sweep over several runs")
    return params


def sweep_size(study: ModuleType, params: dict[str, Any]) -> int:
    """How many points a run of ``study`` with ``params`` measures: the study's own
    ``sweep_size``, else the product of the lengths of its list parameters."""
    own = getattr(study, "sweep_size", None)
    if own is not None:
        return int(own(params))
    return study.SPACE.points(params)


def expand(params: dict[str, Any], names: Sequence[str]) -> list[dict[str, Any]]:
    """Cartesian product over the listed multi-valued parameters (the sweep grid)."""
    lists = [params[n] for n in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*lists)]
