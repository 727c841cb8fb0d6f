"""A/B comparison of two runs: :func:`compare_runs` returns plain data, :func:`markdown`
prints it (as google-benchmark's ``tools/gbench/report.py`` separates the two).

What a comparison refuses, flags and concludes:

- **Refused**: runs of different studies (:class:`CompareError`; the CLI exits 2). Their
  variants share names at best by accident.
- **Flagged loudly, then compared**: differing run parameters and differing machines. The
  parameter diff and the environment diff come first, as tables; a variant whose *own*
  parameters differ between A and B is listed and not compared (its ratio would mix the
  change with the parameter).
- **Per variant**: the ratio of medians B/A with a 95% percentile-bootstrap CI and a
  p-value, adjusted with Holm's step-down method over the variants compared. Holm bounds
  the chance of *any* false "faster"/"slower" in the table (family-wise), which is what a
  reader scanning 16-42 rows needs, and it assumes nothing about how the variants of one run
  depend on each other (they share the machine's state); Benjamini-Hochberg would keep
  more power when many variants truly change, but it bounds only the expected share of
  false calls among the reported ones.
- **Run-to-run noise**. Two runs differ by more than their samples' spread: thread
  placement, frequency and other tenants change between runs. Within-run samples alone
  called an A/A pair (identical calibration runs minutes apart) "faster" at p = 7e-5.
  So a within-run difference is also tested against what **A/A pairs** on that machine
  show: the other stored runs (and committed bundles) with A's or B's configuration
  (same study, parameters, machine fingerprint and software: :func:`config_key`), A and B
  themselves excluded, each run
  one unit and each interleaved session one unit (its rounds share the machine's state, so
  they are not separate runs: :func:`run_to_run`). Their spread of
  log medians, pooled per variant, is sigma with its degrees of freedom; under "no change"
  log(B/A) ~ sigma * sqrt(2) * t(df). A variant is "faster"/"slower" only when both the
  within-run test (Mann-Whitney U) and this run-to-run t test reject (the larger of the two
  p-values is the one adjusted: an intersection-union test), and "within run-to-run noise"
  when only the within-run test does. With fewer than :data:`MIN_AA_DF` degrees of freedom
  the run-to-run noise is unknown: a within-run difference is then **unconfirmed**
  ("unconfirmed faster"/"unconfirmed slower"), never stated as faster or slower, since
  within-run tests alone call a large share of A/A comparisons (the false-call benchmark,
  ``benchmarks/ab_false_calls.py``), and the summary states no overall direction.
- **Interleaved sessions** (``python -m workbench ab``, :mod:`workbench.running.ab_session`): A and B are two
  linked runs whose variants keep their per-round sample counts. Each round is a whole run
  of the study, so the rounds carry run-to-run variation and are the units: the ratio is the
  geometric mean over rounds of each round's ratio of medians, with the t interval and the
  paired t test of the per-round log ratios (a percentile bootstrap over 5-10 rounds is too
  narrow, and would disagree with the test).
- **Summary**: the geometric mean of the ratios over the compared variants with a 95% CI:
  for separate runs a bootstrap over variants and over each variant's own bootstrap
  replicates (plus a run-to-run draw from N(0, 2 sigma^2) for variants with A/A data); for an
  interleaved session the t interval over rounds of each round's geometric mean.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from ..base import machine_load as load
from ..evidence import stats
from ..base import units
from ..base.env import summary_line
from ..results.catalog import Catalog, Header, upgraded
from ..data.record import RunRecord
from ..results.store import Store, StoreError
from ..evidence.tables import md_table, render
from ..base.untrusted import details, escape, plain

ALPHA = stats.ALPHA
CORRECTION = "holm"
RESAMPLES = 2000
#: paired rounds an interleaved pair needs for a verdict (a t test on fewer has little power)
MIN_ROUNDS = 5
#: degrees of freedom of the A/A spread below which run-to-run noise counts as unknown
MIN_AA_DF = 2
#: stored runs read as A/A candidates, newest first
HISTORY_LIMIT = 200
#: verdicts of a within-run difference that no run-to-run figure backs (separate runs, no A/A runs)
UNCONFIRMED = ("unconfirmed faster", "unconfirmed slower")
#: environment keys that change every run and say nothing about the machine or software
_ENV_VOLATILE = ("capture_errors",)
_NAN = float("nan")


class CompareError(ValueError):
    """Two runs the workbench refuses to compare; the message says why."""


# --- what differs -------------------------------------------------------------------------------

def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def param_diff(a: dict, b: dict) -> list[dict[str, Any]]:
    """``[{"param", "a", "b"}]`` for every parameter whose value differs (absent: None)."""
    a, b = a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}
    return [{"param": k, "a": a.get(k), "b": b.get(k)} for k in sorted(set(a) | set(b))
            if _canon(a.get(k)) != _canon(b.get(k))]


def _flat_env(env: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (env if isinstance(env, dict) else {}).items():
        if k in _ENV_VOLATILE or k.startswith("load"):  # load figures: the run's, not the machine's
            continue
        if isinstance(v, dict):  # packages, env_vars: one row per entry
            out.update({f"{k}.{k2}": v2 for k2, v2 in v.items()})
        else:
            out[k] = v
    return out


def env_diff(a_env: dict, b_env: dict) -> list[dict[str, Any]]:
    """``[{"key", "a", "b"}]`` for every environment entry that differs (packages and
    environment variables one row each)."""
    fa, fb = _flat_env(a_env), _flat_env(b_env)
    return [{"key": k, "a": fa.get(k), "b": fb.get(k)} for k in sorted(set(fa) | set(fb))
            if _canon(fa.get(k)) != _canon(fb.get(k))]


def _short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else _canon(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def config_key(rec: RunRecord) -> tuple:
    """What makes two runs an A/A pair: study, parameters, machine fingerprint and software
    (the workbench commit and package versions; a dirty checkout counts as its commit)."""
    env = rec.env if isinstance(rec.env, dict) else {}
    return config_key_of(rec.study, rec.params, env.get("fingerprint"), env.get("workbench_commit"), env.get("packages"))


def config_key_of(study: str, params: Any, fingerprint: Any, commit: Any, packages: Any) -> tuple:
    """:func:`config_key` from its fields (a committed bundle's, known without reading it:
    :meth:`workbench.results.catalog.Catalog.committed_like`)."""
    return (study, _canon(upgraded(study, params)), fingerprint, _canon(commit), _canon(packages))


# --- interleaved sessions -------------------------------------------------------------------------

def linked(a: RunRecord, b: RunRecord) -> bool:
    """A and B are the two sides of one interleaved session (``python -m workbench ab``)."""
    la = a.outputs.get("ab") if isinstance(a.outputs, dict) else None
    lb = b.outputs.get("ab") if isinstance(b.outputs, dict) else None
    return (isinstance(la, dict) and isinstance(lb, dict) and la.get("pair") == b.run_id
            and lb.get("pair") == a.run_id and {la.get("side"), lb.get("side")} == {"A", "B"})


def round_samples(v) -> list[np.ndarray] | None:
    """A variant of an interleaved session split into its rounds (``extra["ab_round_sizes"]``),
    or None when it has no valid round sizes (a bundle's field is checked, never trusted)."""
    sizes = v.extra.get("ab_round_sizes") if isinstance(v.extra, dict) else None
    if (not isinstance(sizes, list) or not sizes
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes)
            or sum(sizes) != len(v.samples_ns)):
        return None
    return np.split(np.asarray(v.samples_ns, dtype=float), np.cumsum(sizes)[:-1])


def _log_median(samples: np.ndarray) -> float | None:
    m = float(np.median(samples)) if samples.size else 0.0
    return math.log(m) if m > 0 else None


def session_of(rec: RunRecord) -> str:
    """The run-to-run unit a run belongs to: the interleaved session of a linked side (both
    sides of one ``ab`` session share it), else the run itself."""
    link = rec.outputs.get("ab") if isinstance(rec.outputs, dict) else None
    if isinstance(link, dict) and isinstance(link.get("pair"), str):
        return "session:" + "+".join(sorted((rec.run_id, link["pair"])))
    return rec.run_id


def run_to_run(history: Iterable[RunRecord], a: RunRecord, b: RunRecord) -> dict[str, dict[str, Any]]:
    """Per variant, the run-to-run spread that A/A runs show: ``{"sigma", "df", "runs"}`` with
    sigma the pooled standard deviation of log medians within each configuration (A's and
    B's), from the runs in ``history`` other than A and B.

    One unit of run-to-run variation is one separate run, or one whole interleaved session:
    the rounds of a session share the machine's state (the process, its placement, the
    minute), so their spread is far below what separates runs, and counted as units they
    outweighed separate runs and made the history anti-conservative (issue 30: 16-50% false
    calls on synthetic runs with a 5% run-level spread). Both sides of an A/A session (one
    configuration) pool into that one unit."""
    keys = {config_key(a), config_key(b)}
    units: dict[tuple, dict[str, list[np.ndarray]]] = {}
    runs: dict[str, set] = {}
    seen = {a.run_id, b.run_id}
    compared = {session_of(a), session_of(b)}  # A and B, and the sessions they belong to, are not history
    for rec in history:
        if rec.run_id in seen or session_of(rec) in compared or config_key(rec) not in keys:
            continue
        seen.add(rec.run_id)
        for v in rec.valid_variants():
            units.setdefault((config_key(rec), v.variant), {}).setdefault(session_of(rec), []).append(
                np.asarray(v.samples_ns, dtype=float))
            runs.setdefault(v.variant, set()).add(session_of(rec))
    ss: dict[str, float] = {}
    df: dict[str, int] = {}
    for (_, name), by_unit in units.items():
        logs = [x for x in (_log_median(np.concatenate(parts)) for parts in by_unit.values()) if x is not None]
        if len(logs) >= 2:
            x = np.asarray(logs)
            ss[name] = ss.get(name, 0.0) + float(((x - x.mean()) ** 2).sum())
            df[name] = df.get(name, 0) + x.size - 1
    return {name: {"sigma": math.sqrt(ss[name] / df[name]), "df": df[name], "runs": len(runs[name])}
            for name in ss if df[name] >= MIN_AA_DF}


# --- the comparison -------------------------------------------------------------------------------

def _row(name: str, verdict: str, **kw) -> dict[str, Any]:
    row = {"variant": name, "n_a": 0, "n_b": 0, "median_a": _NAN, "median_b": _NAN, "median_a_ci": [_NAN, _NAN],
           "median_b_ci": [_NAN, _NAN], "ratio": _NAN,
           "ci": [_NAN, _NAN], "p_value": _NAN, "p_run_to_run": _NAN, "p_adjusted": _NAN, "verdict": verdict,
           "noise": "", "run_to_run_known": None}
    row.update(kw)
    return row


def _medians(xa: np.ndarray, xb: np.ndarray, rng) -> dict[str, Any]:
    """Each side's sample count, median and the median's 95% CI: the run's own
    (:func:`workbench.evidence.stats.median_ci`, seeded), so a run's median reads with the same CI in a
    comparison as on its page, in its report and in ``run``'s table."""
    def one(x: np.ndarray) -> tuple[float, list[float]]:
        if x.size < 2:
            return (float(np.median(x)) if x.size else _NAN), [_NAN, _NAN]
        return float(np.median(x)), [float(q) for q in stats.median_ci(x, 1 - ALPHA)]

    (ma, ca), (mb, cb) = one(xa), one(xb)
    return dict(n_a=int(xa.size), n_b=int(xb.size), median_a=ma, median_b=mb, median_a_ci=ca, median_b_ci=cb)


def _runs_row(va, vb, noise: dict | None, rng) -> tuple[dict, np.ndarray | None]:
    """Two separate runs: within-run bootstrap CI and Mann-Whitney U, run-to-run t test."""
    xa, xb = np.asarray(va.samples_ns, dtype=float), np.asarray(vb.samples_ns, dtype=float)
    base = _medians(xa, xb, rng)
    ma, mb = base["median_a"], base["median_b"]
    base["ratio"] = mb / ma if ma > 0 else _NAN
    if min(xa.size, xb.size) < stats.MIN_SAMPLES_FOR_VERDICT or not (ma > 0 and mb > 0):
        return _row(va.variant, "too few samples", **base), None
    boot = np.log(stats.ratio_bootstrap(xa, xb, RESAMPLES, seed=int(rng.integers(2**31))))
    lo, hi = (float(math.exp(q)) for q in np.quantile(boot, [ALPHA / 2, 1 - ALPHA / 2]))
    p = float(stats._scipy_stats().mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    row = _row(va.variant, "", **base, ci=[lo, hi], p_value=p, noise="within run only (no A/A runs)",
               run_to_run_known=False)
    if noise:
        scale = math.sqrt(2) * noise["sigma"]
        t = abs(math.log(mb / ma)) / scale if scale > 0 else math.inf
        row["p_run_to_run"] = float(2 * stats._scipy_stats().t.sf(t, noise["df"]))
        row["aa"] = {"sigma": noise["sigma"], "df": noise["df"], "runs": noise["runs"]}  # _decide draws its range
        row["run_to_run_known"] = True
    return row, boot


def _t_interval(d: np.ndarray) -> tuple[float, float, float, float]:
    """Mean of ``d`` (log ratios, one per round), its 95% t interval and the t test's p-value."""
    mean = float(d.mean())
    if np.ptp(d) == 0:  # every round agrees exactly: no spread to test against
        return mean, mean, mean, 0.0 if mean != 0 else 1.0
    sem = float(d.std(ddof=1)) / math.sqrt(d.size)
    half = float(stats._scipy_stats().t.ppf(1 - ALPHA / 2, d.size - 1)) * sem
    p = float(2 * stats._scipy_stats().t.sf(abs(mean) / sem, d.size - 1))
    return mean, mean - half, mean + half, p


def _linked_row(va, vb, rng) -> tuple[dict, dict[int, float] | None]:
    """Two sides of an interleaved session, round by round: the rounds are the units, so
    the ratio is the geometric mean over rounds of each round's ratio of medians, with the
    t interval and t test of the per-round log ratios (a percentile bootstrap over 5-10
    rounds would be too narrow). Returns the row and the log ratio of each round."""
    ra, rb = round_samples(va), round_samples(vb)
    if ra is None or rb is None:
        return _row(va.variant, "too few rounds", noise="rounds unreadable"), None
    pairs = [(i, x, y) for i, (x, y) in enumerate(zip(ra, rb)) if x.size and y.size]
    pooled_a = np.concatenate([x for _, x, _ in pairs]) if pairs else np.empty(0)
    pooled_b = np.concatenate([y for _, _, y in pairs]) if pairs else np.empty(0)
    logs = {i: math.log(np.median(y) / np.median(x)) for i, x, y in pairs if np.median(x) > 0 and np.median(y) > 0}
    base = _medians(pooled_a, pooled_b, rng) | {"noise": f"{len(logs)} paired rounds"}
    if len(logs) < MIN_ROUNDS:
        return _row(va.variant, "too few rounds", **base), None
    mean, lo, hi, p = _t_interval(np.array(list(logs.values())))
    return _row(va.variant, "", **base, ratio=math.exp(mean), ci=[math.exp(lo), math.exp(hi)], p_value=p,
                run_to_run_known=True), logs  # each round is a whole run: the rounds carry it


def _aa_ranges(tested: list[dict]) -> None:
    """Each row's A/A range: the B/A values A/A pairs reach at the level Holm's step-down
    tests that row at (alpha / (m - k + 1) for the k-th smallest p of m), so a B/A outside
    the printed range is exactly one the run-to-run test rejects there. Symmetric on the log
    scale, hence a factor range (a "±150%" would hide that its lower end is 0.4, not -0.5)."""
    p_both = [max(r["p_value"], r["p_run_to_run"]) if r["p_run_to_run"] == r["p_run_to_run"] else r["p_value"]
              for r in tested]
    m = len(tested)
    for k, i in enumerate(sorted(range(m), key=lambda i: p_both[i])):
        r, aa = tested[i], tested[i].get("aa")
        if not aa:
            continue
        level = ALPHA / (m - k)
        factor = math.exp(stats._scipy_stats().t.ppf(1 - level / 2, aa["df"]) * math.sqrt(2) * aa["sigma"])
        r["aa_band"] = [1 / factor, factor]
        r["noise"] = (f"A/A range {1 / factor:.3g} .. {factor:.3g} ({1 - level:.2%} level; {aa['runs']} runs, "
                      f"{aa['df']} df)")


def _decide(rows: list[dict]) -> None:
    """Holm-adjust the tested rows' p-values and give each its verdict."""
    tested = [r for r in rows if r["verdict"] == ""]
    if not tested:
        return
    within = stats.adjust_pvalues([r["p_value"] for r in tested], CORRECTION)
    both = stats.adjust_pvalues([max(r["p_value"], r["p_run_to_run"]) if r["p_run_to_run"] == r["p_run_to_run"]
                                 else r["p_value"] for r in tested], CORRECTION)
    _aa_ranges(tested)
    for r, p_within, p_both in zip(tested, within, both):
        lo, hi = r["ci"]
        r["p_adjusted"] = float(p_both)
        within_run = p_within < ALPHA and (hi < 1 or lo > 1)
        band = r.get("aa_band")
        if within_run and p_both < ALPHA:
            direction = "faster" if hi < 1 else "slower"
            r["verdict"] = f"unconfirmed {direction}" if r["run_to_run_known"] is False else direction
        elif within_run and band and band[0] <= r["ratio"] <= band[1]:
            r["verdict"] = "within run-to-run noise"  # the A/A pairs reach this B/A
        else:  # neither test rejects, or the within-run one does only before the combined step-down
            r["verdict"] = "cannot tell apart"


def _summary(rows: list[dict], boots: dict[str, np.ndarray], noise: dict[str, dict],
             round_logs: dict[str, dict[int, float]], rng) -> dict[str, Any]:
    """Verdict counts and the geometric mean of B/A over the compared variants with its CI:
    separate runs bootstrap over variants and each variant's replicates (plus a run-to-run
    draw where A/A runs measured sigma); an interleaved session takes each round's geometric
    mean over the variants and the t interval over rounds (rounds share the machine's state)."""
    counts = {k: sum(r["verdict"] == k for r in rows)
              for k in ("faster", "slower", *UNCONFIRMED, "within run-to-run noise", "cannot tell apart")}
    out: dict[str, Any] = {"compared": sum(counts.values()), **{k.replace(" ", "_").replace("-", "_"): n
                                                                 for k, n in counts.items()},
                           "correction": CORRECTION, "alpha": ALPHA, "geomean_ratio": _NAN, "ci": [_NAN, _NAN],
                           "variants_in_geomean": len(boots) or len(round_logs),
                           # an overall direction needs the run-to-run noise of every variant in it
                           "run_to_run_known": bool(round_logs) or (bool(boots) and all(n in noise for n in boots))}
    if boots:
        names = list(boots)
        logs = np.stack([boots[n] for n in names])
        for i, n in enumerate(names):  # the run-to-run part, where A/A runs measured it
            if n in noise:
                logs[i] = logs[i] + rng.normal(0.0, math.sqrt(2) * noise[n]["sigma"], logs.shape[1])
        point = float(np.mean([math.log(r["ratio"]) for r in rows if r["variant"] in boots]))
        pick = rng.integers(0, len(names), (logs.shape[1], len(names)))
        reps = logs[pick, np.arange(logs.shape[1])[:, None]].mean(axis=1)
        out["geomean_ratio"] = math.exp(point)
        out["ci"] = [float(math.exp(q)) for q in np.quantile(reps, [ALPHA / 2, 1 - ALPHA / 2])]
    elif round_logs:
        common = sorted(set.intersection(*(set(d) for d in round_logs.values())))
        if len(common) >= MIN_ROUNDS:
            per_round = np.array([np.mean([d[i] for d in round_logs.values()]) for i in common])
            mean, lo, hi, _ = _t_interval(per_round)
            out["geomean_ratio"], out["ci"] = math.exp(mean), [math.exp(lo), math.exp(hi)]
    return out


def compare_runs(a: RunRecord, b: RunRecord, history: Iterable[RunRecord] = (), seed: int = 0) -> dict[str, Any]:
    """B against A as plain data: ``param_diff``, ``env_diff``, ``rows`` (``variant``, ``ratio``,
    ``ci``, ``p_adjusted``, ``verdict``, ...), ``summary``, ``warnings``. ``history``: other
    runs to find A/A pairs among (see the module docstring). Raises :class:`CompareError`
    for runs of different studies."""
    if a.run_id == b.run_id:
        raise CompareError(f"A and B are the same run ({a.run_id}): a run compared with itself shows no change by "
                           "construction; give two runs (python -m workbench runs lists them)")
    if a.study != b.study:
        raise CompareError(f"runs of different studies are not compared: A ({a.run_id}) is {a.study}, "
                           f"B ({b.run_id}) is {b.study}")
    rng = np.random.default_rng(seed)
    is_linked = linked(a, b)
    noise = {} if is_linked else run_to_run(history, a, b)
    by_a = {v.variant: v for v in a.variants}
    rows, boots, round_logs = [], {}, {}
    for vb in b.variants:
        va = by_a.get(vb.variant)
        if va is None:
            continue
        differs = param_diff(va.params, vb.params)
        if not (va.correct and vb.correct):
            row, boot = _row(vb.variant, "check failed"), None
        elif differs:
            row, boot = _row(vb.variant, "not compared: parameters differ",
                             noise=", ".join(f"{d['param']}: {_short(d['a'])} vs {_short(d['b'])}" for d in differs)), None
        elif is_linked:
            row, logs = _linked_row(va, vb, rng)
            boot = None
            if logs is not None:
                round_logs[vb.variant] = logs
        else:
            row, boot = _runs_row(va, vb, noise.get(vb.variant), rng)
        rows.append(row)
        if boot is not None:
            boots[vb.variant] = boot
    _decide(rows)
    pdiff, ediff = param_diff(upgraded(a.study, a.params), upgraded(b.study, b.params)), env_diff(a.env, b.env)
    same_machine = a.env.get("fingerprint") == b.env.get("fingerprint")
    warnings = []
    if pdiff and not is_linked:
        warnings.append(f"parameters differ ({', '.join(d['param'] for d in pdiff)}): the differences mix "
                        "your change with these parameters")
    if not same_machine:
        warnings.append("different machines: the differences mix the change with the machine")
    skipped = [r["variant"] for r in rows if r["verdict"].startswith("not compared")]
    if skipped:
        warnings.append(f"{len(skipped)} variant(s) ran with different parameters in A and B and are not compared")
    tested = [r for r in rows if r["variant"] in boots]
    if tested and not any(r["variant"] in noise for r in tested):
        warnings.append("run-to-run noise unknown: no A/A runs of this configuration on this machine, so a "
                        "within-run difference is only 'unconfirmed' (repeat each run 3 or more times, or compare in "
                        "an interleaved session: python -m workbench ab)")
    for side, rec in (("A", a), ("B", b)):
        if rec.status != "complete":
            warnings.append(f"{side} is {rec.status}")
    disturbed = {side: [line.rstrip(".") for line in load.disturbance(rec)] for side, rec in (("A", a), ("B", b))}
    if disturbed["A"] == disturbed["B"]:  # one session's two sides share its load figures: said once
        warnings += [f"A and B: {line}" for line in disturbed["A"]]
    else:
        warnings += [f"{side}: {line}" for side, lines in disturbed.items() for line in lines]
    return {"run_a": a.run_id, "run_b": b.run_id, "study": a.study,
            "mode": "interleaved" if is_linked else "runs",
            "rounds": (a.outputs.get("ab") or {}).get("rounds") if is_linked else None,
            "param_diff": pdiff, "env_diff": ediff, "same_machine": same_machine,
            "machine_a": summary_line(a.env), "machine_b": summary_line(b.env), "warnings": warnings,
            "only_in_a": sorted(set(by_a) - {v.variant for v in b.variants}),
            "only_in_b": sorted({v.variant for v in b.variants} - set(by_a)),
            "rows": rows, "summary": _summary(rows, boots, noise, round_logs, rng),
            "reproduce_a": a.reproduce, "reproduce_b": b.reproduce}


def forest_table(cmp: dict[str, Any]) -> pd.DataFrame:
    """The comparison's rows as :func:`workbench.presentation.charts.forest` draws them: variant, B/A with its
    95% CI, verdict (rows without a ratio, e.g. a failed check, are kept with NaN)."""
    return pd.DataFrame([{"variant": r["variant"], "ratio": r["ratio"], "lo": r["ci"][0], "hi": r["ci"][1],
                          "verdict": r["verdict"]} for r in cmp["rows"]],
                        columns=["variant", "ratio", "lo", "hi", "verdict"])


def to_json(cmp: dict[str, Any]) -> str:
    """The comparison as strict JSON: a figure that does not exist (NaN) is ``null``."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(cmp), default=str, allow_nan=False)


# --- the printer ----------------------------------------------------------------------------------

def _num(x: Any, fmt: str = ".3g") -> str:
    return "n/a" if not isinstance(x, (int, float)) or x != x else format(x, fmt)


def _median_text(median: float, ci: list[float]) -> str:
    if median != median:
        return "n/a"
    lo, hi = ci
    return stats.fmt_ns(median) + (f" [{stats.fmt_ns(lo)}, {stats.fmt_ns(hi)}]" if lo == lo and hi == hi else "")


def summary_text(cmp: dict[str, Any]) -> str:
    s = cmp["summary"]
    if not s["compared"]:
        return "Nothing compared: no variant of B has a counterpart in A with valid samples and the same parameters."
    parts = [f"B is faster in {s['faster']}, slower in {s['slower']}"]
    unconfirmed = s["unconfirmed_faster"] + s["unconfirmed_slower"]
    if unconfirmed:
        parts.append(f"unconfirmed in {unconfirmed} (a within-run difference, {s['unconfirmed_faster']} faster and "
                     f"{s['unconfirmed_slower']} slower, that run-to-run variation may explain: no A/A runs)")
    if s["within_run_to_run_noise"]:
        parts.append(f"within run-to-run noise in {s['within_run_to_run_noise']}")
    text = (", ".join(parts) + f", and cannot be told apart in {s['cannot_tell_apart']} of {s['compared']} "
            f"compared variant(s) (p-values {s['correction'].title()}-adjusted over the variants; alpha {s['alpha']:g}).")
    g, (lo, hi) = s["geomean_ratio"], s["ci"]
    if g == g:
        if not s["run_to_run_known"]:
            overall = "within-run CI only: no overall direction stated while run-to-run noise is unknown"
        else:
            overall = ("B is slower overall" if lo > 1 else "B is faster overall" if hi < 1
                       else "no overall change shown")
        basis = "t interval over rounds" if cmp["mode"] == "interleaved" else "bootstrap over variants and samples"
        text += (f" Geometric mean of B/A over {s['variants_in_geomean']} variant(s): {_num(g)} "
                 f"[{_num(lo)}, {_num(hi)}] ({overall}; 95% CI, {basis}).")
    return text


def markdown(cmp: dict[str, Any], level: int = 1, reproduce: bool = True) -> str:
    """The comparison as GitHub Markdown: parameter and environment diffs first, then the
    verdict and the per-variant table. Every string from the runs is escaped. ``level``: the
    title's heading level (a page that has its own title passes 3); sections one below.
    ``reproduce=False`` leaves out the ``<details>`` block of reproduce commands (a page that
    renders no HTML shows them its own way)."""
    a, b = escape(cmp["run_a"], "code"), escape(cmp["run_b"], "code")
    mode = (f"interleaved session of {cmp['rounds']} rounds per side" if cmp["mode"] == "interleaved"
            else "two separate runs")
    h, sub = "#" * level, "#" * (level + 1)
    parts = [f"{h} A/B: {b} (B) against {a} (A)", f"Study {escape(cmp['study'], 'code')}; {escape(mode)}."]
    parts += [f"> **Warning: {escape(w)}.**" for w in cmp["warnings"]]
    title = "The change under test (parameters of A and B)" if cmp["mode"] == "interleaved" else "Parameters that differ"
    diff = pd.DataFrame(cmp["param_diff"], columns=["param", "a", "b"])
    parts.append(f"{sub} {title}\n\n" + (md_table(diff) if len(diff) else "_None: A and B ran with the same parameters._"))
    machines = (f"Both on: {escape(cmp['machine_a'])}." if cmp["same_machine"] else
                f"A: {escape(cmp['machine_a'])}; B: {escape(cmp['machine_b'])}.")
    env = pd.DataFrame(cmp["env_diff"], columns=["key", "a", "b"])
    parts.append(f"{sub} Environment that differs\n\n" + machines + "\n\n"
                 + (md_table(env) if len(env) else "_None: same machine and software._"))
    parts.append(f"**Verdict:** {escape(summary_text(cmp))}")
    table = pd.DataFrame([{
        "variant": r["variant"], "A median [95% CI]": _median_text(r["median_a"], r["median_a_ci"]),
        "B median [95% CI]": _median_text(r["median_b"], r["median_b_ci"]),
        "B/A": _num(r["ratio"]),
        "95% CI of B/A": f"{_num(r['ci'][0])} .. {_num(r['ci'][1])}" if r["ci"][0] == r["ci"][0] else "n/a",
        "p (adjusted)": "< 1e-300" if r["p_adjusted"] == 0 else _num(r["p_adjusted"], ".2g"), "noise basis / note": r["noise"], "verdict": r["verdict"]}
        for r in cmp["rows"]])
    basis = ("B/A: geometric mean over rounds of each round's ratio of medians, with the t interval and t test over "
             "the rounds (each round a whole run, so they carry the run-to-run variation)"
             if cmp["mode"] == "interleaved" else
             "B/A: ratio of medians with its bootstrap CI; a verdict also needs the run-to-run test against the A/A "
             "runs named in the noise column")
    parts.append(f"{sub} Per variant\n\n" + md_table(table) + f"\n\n_Medians of all samples with their bootstrap CI. "
                 f"{basis}._")
    if cmp["only_in_a"] or cmp["only_in_b"]:
        parts.append(f"Only in A: {escape(', '.join(cmp['only_in_a']) or '-')}; "
                     f"only in B: {escape(', '.join(cmp['only_in_b']) or '-')}.")
    if reproduce:
        parts.append(details("Reproduce", f"A:\n\n{escape(cmp['reproduce_a'], 'block', 'sh')}\n\nB:\n\n"
                                          f"{escape(cmp['reproduce_b'], 'block', 'sh')}"))
    return "\n\n".join(parts) + "\n"


# --- the terminal table and the regression gate ---------------------------------------------------

def parse_threshold(text: str | float) -> float:
    """A regression threshold: ``2%`` or ``0.02`` (a fraction of A's time) -> 0.02. Raises
    ValueError with one line for anything else, or a threshold outside 0-1000%."""
    raw = text.strip() if isinstance(text, str) else text
    try:
        value = float(raw[:-1]) / 100 if isinstance(raw, str) and raw.endswith("%") else float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"threshold {text!r}: give a percentage (2%) or a fraction (0.02) of A's time") from None
    if not (math.isfinite(value) and 0 <= value <= 10):
        raise ValueError(f"threshold {text!r}: outside 0% to 1000%")
    return value


def regressions(cmp: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """The rows of a comparison that are **clear regressions beyond** ``threshold`` (0.02: 2%):
    the comparison calls them ``slower`` (its within-run and run-to-run tests both reject, Holm
    adjusted: :func:`_decide`) and the lower end of their B/A CI lies above 1 + ``threshold``, so
    the CI excludes the threshold. The geometric mean over the variants counts as a row of its
    own (``variant``: ``geometric mean``) when its CI lies above it and the run-to-run noise of
    every variant in it is known."""
    out = [r for r in cmp["rows"] if r["verdict"] == "slower" and r["ci"][0] == r["ci"][0]
           and r["ci"][0] > 1 + threshold]
    s = cmp["summary"]
    if s.get("run_to_run_known") and s["ci"][0] == s["ci"][0] and s["ci"][0] > 1 + threshold:
        out.append({"variant": GEOMEAN, "ratio": s["geomean_ratio"], "ci": list(s["ci"]), "verdict": "slower"})
    return out


def unconfirmed_regressions(cmp: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """Rows slower beyond ``threshold`` within the run only (``unconfirmed slower``: no A/A runs
    measured the run-to-run noise), which a gate reports but does not fail on."""
    return [r for r in cmp["rows"] if r["verdict"] == "unconfirmed slower" and r["ci"][0] > 1 + threshold]


#: the summary row of the terminal table and of :func:`regressions`
GEOMEAN = "geometric mean"


def _ratio_text(ratio: float, ci: list[float]) -> str:
    if ratio != ratio:
        return "n/a"
    dec = max(3, min(6, 1 - math.floor(math.log10(max(abs(ci[1] - ci[0]), 1e-9))))) if ci[0] == ci[0] else 3
    text = f"{ratio:.{dec}f}"
    return text + (f" [{ci[0]:.{dec}f}, {ci[1]:.{dec}f}]" if ci[0] == ci[0] and ci[1] == ci[1] else "")


def _change_text(ratio: float, verdict: str) -> str:
    """pyperf's words: ``1.05x slower``, ``1.20x faster``; nothing where no change is shown (an
    unconfirmed one included: it is never stated as faster or slower)."""
    if ratio != ratio or ratio <= 0 or verdict not in ("faster", "slower"):
        return ""
    return f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"


def _row_medians(r: dict[str, Any]) -> tuple[str, str]:
    """A's and B's medians with their CIs, both in one unit (the row's, from A's median)."""
    values = [v for v in (r["median_a"], r["median_b"], *r["median_a_ci"], *r["median_b_ci"]) if v == v]
    if not values:
        return "n/a", "n/a"
    shown = units.pick(values, "ns", typical=r["median_a"] if r["median_a"] == r["median_a"] else None)

    # three significant digits of A's median, and as many decimals for every figure of the row
    lead = abs(units.convert(values[0], "ns", shown)) or 1.0
    decimals = max(0, 2 - math.floor(math.log10(lead)))

    def one(m: float, ci: list[float]) -> str:
        if m != m:
            return "n/a"
        if ci[0] != ci[0]:
            return f"{units.convert(m, 'ns', shown):,.{decimals}f} {shown}"
        return units.fmt_ci(m, ci[0], ci[1], "ns", decimals=decimals, shown=shown)
    return one(r["median_a"], r["median_a_ci"]), one(r["median_b"], r["median_b_ci"])


def table(cmp: dict[str, Any]) -> pd.DataFrame:
    """The comparison as one table, a row per variant and the geometric mean last (what the
    CLI prints, in the manner of ``pyperf compare_to --table``)."""
    rows = []
    for r in cmp["rows"]:
        a_text, b_text = _row_medians(r)
        rows.append({"variant": r["variant"], "A: median [95% CI]": a_text, "B: median [95% CI]": b_text,
                     "B/A [95% CI]": _ratio_text(r["ratio"], r["ci"]), "change": _change_text(r["ratio"], r["verdict"]),
                     "verdict": r["verdict"]})
    s = cmp["summary"]
    if s["compared"]:
        overall = ("no overall direction (run-to-run noise unknown)" if not s["run_to_run_known"] else
                   "slower overall" if s["ci"][0] > 1 else "faster overall" if s["ci"][1] < 1 else "no overall change")
        rows.append({"variant": GEOMEAN, "A: median [95% CI]": "", "B: median [95% CI]": "",
                     "B/A [95% CI]": _ratio_text(s["geomean_ratio"], s["ci"]),
                     "change": _change_text(s["geomean_ratio"], overall if s["run_to_run_known"] else ""),
                     "verdict": overall})
    return pd.DataFrame(rows, columns=["variant", "A: median [95% CI]", "B: median [95% CI]", "B/A [95% CI]",
                                       "change", "verdict"])


def _diff_line(what: str, diffs: list[dict[str, Any]], key: str, limit: int = 4) -> str:
    if not diffs:
        return ""
    shown = "; ".join(f"{d[key]}: {_short(d['a'], 24)} (A) -> {_short(d['b'], 24)} (B)" for d in diffs[:limit])
    more = f"; and {len(diffs) - limit} more (--format md lists them)" if len(diffs) > limit else ""
    return f"{what}: {shown}{more}"


def terminal(cmp: dict[str, Any], threshold: float | None = None) -> str:
    """The comparison for a terminal: one line saying what is compared, one aligned table
    (:func:`table`), then one line each: how B/A is judged, what differs, the warnings and,
    with ``threshold``, the regression gate's outcome. No Markdown (``--format md``:
    :func:`markdown`). Every string from the runs is made plain (no terminal escapes)."""
    mode = (f"an interleaved session of {cmp['rounds']} rounds a side" if cmp["mode"] == "interleaved"
            else "two separate runs")
    head = [f"{cmp['study']}: B {cmp['run_b']} against A {cmp['run_a']} ({mode})"]
    s = cmp["summary"]
    if cmp["mode"] == "interleaved":
        tail = ["B/A: geometric mean over rounds of each round's ratio of medians, t interval over the rounds."]
    else:
        known = "confirmed against the run-to-run noise of A/A runs" if s["run_to_run_known"] else \
            "run-to-run noise unknown (no A/A runs): a within-run difference is only 'unconfirmed'"
        tail = [f"B/A: ratio of medians with its 95% bootstrap CI; verdicts Holm-adjusted over {s['compared']} "
                f"variant(s), {known}."]
    tail += [x for x in (_diff_line("parameters that differ", cmp["param_diff"], "param"),
                         _diff_line("environment that differs", cmp["env_diff"], "key")) if x]
    if cmp["only_in_a"] or cmp["only_in_b"]:
        tail.append(f"only in A: {', '.join(cmp['only_in_a']) or '-'}; only in B: {', '.join(cmp['only_in_b']) or '-'}")
    tail += [f"warning: {w}" for w in cmp["warnings"]]
    if threshold is not None:
        tail.append(gate_text(cmp, threshold))
    body = render(table(cmp), "plain", max_rows=None) if cmp["rows"] else "(no variant in common)"
    return "\n".join([*map(plain, head), "", body, "", *map(plain, tail)])


def gate_text(cmp: dict[str, Any], threshold: float) -> str:
    """One line: what the regression gate at ``threshold`` found (:func:`regressions`)."""
    pct = f"{100 * threshold:.4g}%"
    found = regressions(cmp, threshold)
    maybe = unconfirmed_regressions(cmp, threshold)
    if found:
        return (f"regression: {len(found)} clearly slower by more than {pct}: "
                + "; ".join(f"{r['variant']} {_ratio_text(r['ratio'], r['ci'])}" for r in found[:6])
                + (f" and {len(found) - 6} more" if len(found) > 6 else ""))
    text = f"no clear regression beyond {pct}"
    if maybe:
        text += (f" ({len(maybe)} slower by more than {pct} within the runs only, unconfirmed: "
                 + ", ".join(r["variant"] for r in maybe[:4]) + (" ..." if len(maybe) > 4 else "")
                 + "; confirm with A/A runs or an interleaved session: python -m workbench ab)")
    return text


# --- finding runs ---------------------------------------------------------------------------------

def history(a: RunRecord, b: RunRecord, store: Store | None = None,
            records: Iterable[RunRecord] = ()) -> list[RunRecord]:
    """A/A candidates for A and B: runs with A's or B's configuration (:func:`config_key`)
    among ``records`` (e.g. committed bundles) and the newest :data:`HISTORY_LIMIT` runs of
    the study in ``store``; A and B themselves are left out by :func:`run_to_run`."""
    keys = {config_key(a), config_key(b)}
    out = [r for r in records if config_key(r) in keys]
    have = {r.run_id for r in out} | {a.run_id, b.run_id}
    if store is not None:
        for head in store.runs(study=a.study, limit=HISTORY_LIMIT):
            if head["run_id"] in have or (head["study"], _canon(upgraded(a.study, head["params"])), head["fingerprint"]) not in \
                    {k[:3] for k in keys}:  # the headers lack the software: checked once loaded
                continue
            try:
                rec = store.load(head["run_id"], attachments=False)
            except (StoreError, KeyError):
                continue
            if config_key(rec) in keys:
                out.append(rec)
    return out


def history_in(a: RunRecord, b: RunRecord, catalog: Catalog) -> list[RunRecord]:
    """:func:`history` among a catalog's runs: its store's, and only those committed bundles
    whose configuration is A's or B's (the others are not read)."""
    keys = {config_key(a), config_key(b)}
    return history(a, b, catalog.store, catalog.committed_like(a.study, lambda f: config_key_of(*f) in keys))


def most_similar_pair(runs: Sequence[Header], per_study: int = 100) -> tuple[str, str] | None:
    """(A, B): two runs of one study with the fewest differing parameters, the same machine
    (fingerprint) preferred, then complete runs, then the newest; B is the newer. ``runs``
    are catalog headers, newest first. None when no study has two runs (the Runs page then
    proposes nothing)."""
    by_study: dict[str, list[tuple[int, Header]]] = {}
    for i, r in enumerate(runs):
        group = by_study.setdefault(r.study, [])
        if len(group) < per_study:
            group.append((i, r))
    best = None
    for group in by_study.values():
        for x, (i, rb) in enumerate(group):
            for j, ra in group[x + 1:]:
                key = (len(param_diff(ra.params, rb.params)), ra.fingerprint != rb.fingerprint,
                       (ra.status, rb.status) != ("complete", "complete"), i, j)
                if best is None or key < best[0]:
                    best = (key, ra.run_id, rb.run_id)
    return None if best is None else (best[1], best[2])
