"""A/B false-call benchmark: how often `compare` calls a difference that is not there, and
how often it finds one that is.

    python benchmarks/ab_false_calls.py --synthetic               # synthetic runs, 1000 pairs a mode (minutes)
    python benchmarks/ab_false_calls.py                           # measured: 80 pairs per configuration and mode
    python benchmarks/ab_false_calls.py --pairs 4 --rounds 6 --configs calibration

Measured (the default): for each configuration (calibration quick; cpu-reduction quick
restricted to its in-process providers torch, torch-out and numpy on the grid experiment) it
measures N A/A pairs (identical configurations) and N A/B pairs in which every timed call of
B carries an injected spin of known length (``--spin-us``, a busy wait on ``perf_counter_ns``
appended to the callable the harness times; IREE's child processes would not see it, hence
the in-process providers). Ways of judging a pair:

- ``runs, no A/A history``: two separate runs, compared with no A/A history: `compare` then
  calls nothing and marks a within-run difference "unconfirmed" (the rate of those on A/A
  pairs is what within-run tests alone would have called);
- ``runs + old history``: the same pairs, judged with separate A/A runs of the configuration
  as the A/A history (as `compare` finds them in a store);
- ``runs + session history``: the same pairs, judged with ``--sessions`` interleaved A/A
  sessions (``python -m workbench ab`` with the same parameters on both sides) as the
  history: each session one unit of run-to-run variation (issue 30);
- ``interleaved ab``: `python -m workbench ab` sessions of ``--rounds`` rounds per side.

``--synthetic`` feeds `compare` runs drawn from a model instead (a run-level spread of
``--run-sd`` between separate runs and sessions, rounds within a session spread by
``--round-sd``, 0.5% noise between samples; issue 30's 5% and 1.5-3%), many pairs in minutes.

A false call is a "faster" or "slower" verdict on an A/A variant comparison. The target: at
most 5% of them, shown by the Clopper-Pearson 95% upper bound of the rate (two-sided; at
least 73 comparisons without a false call are needed for it to reach 5%), not merely not
contradicted. Beside it, per pair: the share of A/A pairs with any false call among their
variants (what a reader of one comparison table risks), with its bound. Holm's step-down
holds that family-wise rate at about 5% by design (alpha 0.05 over the table), so its upper
bound stays near or above 5% however many pairs run: it is printed, the target is judged per
comparison. (In measured runs a pair's variants share the run, so its comparisons are not
independent trials and the per-comparison bound is optimistic; the per-pair one is not.)
Detection is a "slower" verdict on an A/B variant comparison, reported by the size of the
injected change relative to A's median (spin / median). "Unconfirmed" verdicts are counted
apart. Exit status 1 when a mode with A/A history does not show the target.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from workbench.running import harness, runner  # noqa: E402
from workbench.running.ab_session import execute_ab  # noqa: E402
from workbench.reading.comparison import UNCONFIRMED, compare_runs  # noqa: E402
from workbench.data.record import RunRecord, VariantResult  # noqa: E402
from workbench.seam.registry import get  # noqa: E402
from workbench.evidence.stats import clopper_pearson  # noqa: E402
from workbench.results.store import Store  # noqa: E402
from benchmarks._run import session  # noqa: E402

TARGET_FALSE_CALL_RATE = 0.05
CONFIGS = {
    "calibration": ("calibration", {}),
    "cpu-reduction": ("cpu-reduction", {"providers": ["torch", "torch-out", "numpy"], "experiments": ["grid"]}),
}
#: injected effect (spin / A's median) buckets for the detection rate
BUCKETS = ((0.20, ">= 20%"), (0.05, "5-20%"), (0.01, "1-5%"), (0.0, "< 1%"))
_PLAIN_TIMER = harness.perf_counter_timer


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def _spinning_timer(spin_ns: int):
    def timer_factory(fn):
        return _PLAIN_TIMER(lambda: (fn(), _spin(spin_ns)))
    return timer_factory


def _inject(spin_ns: int | None) -> None:
    """Every host-timed callable (``harness.perf_counter_timer``, which ``time_callable`` and
    cpu-reduction's interleaved rounds use) spins ``spin_ns`` more per call, or not."""
    harness.perf_counter_timer = _spinning_timer(spin_ns) if spin_ns else _PLAIN_TIMER


@contextlib.contextmanager
def _injected(spin_ns: int | None):
    _inject(spin_ns)
    try:
        yield
    finally:
        _inject(None)


def _bucket(effect: float) -> str:
    return next(label for lo, label in BUCKETS if effect >= lo)


#: the verdicts of a variant that was compared (not failed, skipped or short of samples)
JUDGED = ("faster", "slower", *UNCONFIRMED, "within run-to-run noise", "cannot tell apart")


class Tally:
    """Comparisons of one (configuration, mode): A/A false calls per variant and per pair, A/B
    detections, and the unconfirmed differences of each."""

    def __init__(self):
        self.aa = self.false = self.aa_unconfirmed = self.pairs = self.false_pairs = 0
        self.ab = self.detected = self.wrong = self.ab_unconfirmed = 0
        self.by_bucket: dict[str, list[int]] = {label: [0, 0] for _, label in BUCKETS}

    def add_aa(self, cmp: dict) -> None:
        rows = [r for r in cmp["rows"] if r["verdict"] in JUDGED]
        calls = sum(r["verdict"] in ("faster", "slower") for r in rows)
        self.aa += len(rows)
        self.false += calls
        self.aa_unconfirmed += sum(r["verdict"] in UNCONFIRMED for r in rows)
        self.pairs += bool(rows)
        self.false_pairs += calls > 0

    def add_ab(self, cmp: dict, spin_ns: int) -> None:
        for r in cmp["rows"]:
            if r["verdict"] not in JUDGED:
                continue
            hit = r["verdict"] == "slower"
            self.ab += 1
            self.detected += hit
            self.wrong += r["verdict"] == "faster"
            self.ab_unconfirmed += r["verdict"] == "unconfirmed slower"
            cell = self.by_bucket[_bucket(spin_ns / r["median_a"])]
            cell[0] += hit
            cell[1] += 1


def _execute(study, values, store) -> object:
    return runner.execute(study, values, store, preset="quick")


MODES = ("runs, no A/A history", "runs + old history", "runs + session history", "interleaved ab")
#: the modes whose false-call rate the target is about (no history calls nothing by design)
JUDGED_MODES = MODES[1:]


def measure_config(name: str, pairs: int, rounds: int, sessions: int, spin_ns: int, store: Store,
                   say) -> dict[str, Tally]:
    study_id, values = CONFIGS[name]
    study = get(study_id)
    reason = study.requires(study.SPACE.resolve(values, preset="quick"))
    if reason:
        raise SystemExit(f"{name} cannot run here: {reason}")
    tallies = {mode: Tally() for mode in MODES}
    aa_pairs, ab_pairs = [], []
    for i in range(pairs):
        say(f"{name}: separate runs, pair {i + 1}/{pairs}")
        aa_pairs.append((_execute(study, values, store), _execute(study, values, store)))
        a = _execute(study, values, store)
        with _injected(spin_ns):
            ab_pairs.append((a, _execute(study, values, store)))
    session_history = []
    for i in range(sessions):
        say(f"{name}: A/A session {i + 1}/{sessions} for the history")
        session_history += execute_ab(study, values, values, store, rounds=rounds, preset="quick")
    aa_runs = [r for pair in aa_pairs for r in pair]
    histories = {MODES[0]: [], MODES[1]: aa_runs, MODES[2]: session_history}
    for mode, hist in histories.items():
        for a, b in aa_pairs:
            tallies[mode].add_aa(compare_runs(a, b, hist))
        for a, b in ab_pairs:
            tallies[mode].add_ab(compare_runs(a, b, hist), spin_ns)
    for i in range(pairs):
        say(f"{name}: interleaved sessions, pair {i + 1}/{pairs}")
        a, b = execute_ab(study, values, values, store, rounds=rounds, preset="quick")
        tallies["interleaved ab"].add_aa(compare_runs(a, b))
        try:
            a, b = execute_ab(study, values, values, store, rounds=rounds, preset="quick",
                              before_round=lambda side, r: _inject(spin_ns if side == "B" else None))
        finally:
            _inject(None)
        tallies["interleaved ab"].add_ab(compare_runs(a, b), spin_ns)
    return tallies


# --- synthetic runs -----------------------------------------------------------------------------

SYNTHETIC_ENV = {"fingerprint": "synthetic", "cpu_logical": 64, "workbench_commit": "synthetic"}
SYNTHETIC_VARIANTS = ("v1", "v2", "v3")


def _synthetic_run(run_id: str, levels: dict[str, float], rng, n: int = 20, rounds: int = 0,
                   round_sd: float = 0.0, pair: str = "", side: str = "A", sample_sd: float = 0.005) -> RunRecord:
    """A run whose variants sit at ``levels`` (ns) with 0.5% noise between samples; with
    ``rounds``, one side of an interleaved session: each round's samples around its own level
    (the run's level times a round effect of ``round_sd``), linked to ``pair``."""
    variants = []
    for name, level in levels.items():
        if rounds:
            per = [level * np.exp(rng.normal(0, round_sd)) * (1 + rng.normal(0, sample_sd, n)) for _ in range(rounds)]
            xs, extra = np.concatenate(per), {"ab_round_sizes": [n] * rounds, "side": side}
        else:
            xs, extra = level * (1 + rng.normal(0, sample_sd, n)), {}
        variants.append(VariantResult(name, {"kind": name}, [float(x) for x in xs], True, "ok", extra))
    outputs = {"ab": {"pair": pair, "side": side, "rounds": rounds}} if rounds else {}
    return RunRecord(run_id, "calibration", {"synthetic": True}, dict(SYNTHETIC_ENV), status="complete",
                     outputs=outputs, variants=variants)


def synthetic_levels(rng, run_sd: float, base: float = 1e5) -> dict[str, float]:
    """One run's (or session's) level of each variant: the configuration's, times a run effect."""
    return {name: base * (i + 1) * float(np.exp(rng.normal(0, run_sd))) for i, name in enumerate(SYNTHETIC_VARIANTS)}


def synthetic_session(idx: int, rng, run_sd: float, round_sd: float, rounds: int) -> list[RunRecord]:
    """An interleaved A/A session: one session-level effect, both sides' rounds around it."""
    levels = synthetic_levels(rng, run_sd)
    ids = (f"20270101-{idx:06d}-calibration-aaaaaa", f"20270101-{idx:06d}-calibration-bbbbbb")
    return [_synthetic_run(ids[0], levels, rng, rounds=rounds, round_sd=round_sd, pair=ids[1], side="A"),
            _synthetic_run(ids[1], levels, rng, rounds=rounds, round_sd=round_sd, pair=ids[0], side="B")]


def synthetic(pairs: int, run_sd: float, round_sd: float, rounds: int, sessions: int, old_runs: int,
              seed: int = 0) -> dict[str, Tally]:
    """A/A pairs of separate synthetic runs judged with no history, with ``old_runs`` separate
    A/A runs, and with ``sessions`` interleaved A/A sessions as the history (fresh histories
    for every pair, so the pairs are independent trials)."""
    rng = np.random.default_rng(seed)
    tallies = {mode: Tally() for mode in MODES[:3]}
    for i in range(pairs):
        a = _synthetic_run(f"20270102-{i:06d}-calibration-aaaaaa", synthetic_levels(rng, run_sd), rng)
        b = _synthetic_run(f"20270102-{i:06d}-calibration-bbbbbb", synthetic_levels(rng, run_sd), rng)
        old = [_synthetic_run(f"20270103-{i:06d}-calibration-{j:06x}", synthetic_levels(rng, run_sd), rng)
               for j in range(old_runs)]
        hist = [r for k in range(sessions) for r in synthetic_session(i * 100 + k, rng, run_sd, round_sd, rounds)]
        tallies[MODES[0]].add_aa(compare_runs(a, b))
        tallies[MODES[1]].add_aa(compare_runs(a, b, old))
        tallies[MODES[2]].add_aa(compare_runs(a, b, hist))
    return tallies


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.1%})" if n else "-"


def _bound(k: int, n: int) -> float:
    return clopper_pearson(k, n)[1] if n else float("nan")


def report(results: dict[str, dict[str, Tally]]) -> bool:
    """Print the false-call table (per comparison and per pair, each with its Clopper-Pearson
    95% upper bound) and the detection where there was any; True when every judged mode shows
    the target (its per-comparison upper bound at most 5%)."""
    labels = [label for _, label in BUCKETS]
    print("| configuration | mode | A/A comparisons called | 95% upper bound | A/A pairs with a false call | 95% upper "
          "bound | A/A unconfirmed | A/B detected (slower) | A/B called faster | "
          + " | ".join(f"detected, effect {b}" for b in labels) + " |")
    print("|" + "---|" * (9 + len(labels)))
    totals: dict[str, list[int]] = {}
    for name, tallies in results.items():
        for mode, t in tallies.items():
            tot = totals.setdefault(mode, [0, 0, 0, 0, 0, 0])
            for i, n in enumerate((t.false, t.aa, t.false_pairs, t.pairs, t.detected, t.ab)):
                tot[i] += n
            print(f"| {name} | {mode} | {_rate(t.false, t.aa)} | {_bound(t.false, t.aa):.1%} | "
                  f"{_rate(t.false_pairs, t.pairs)} | {_bound(t.false_pairs, t.pairs):.1%} | "
                  f"{_rate(t.aa_unconfirmed, t.aa)} | {_rate(t.detected, t.ab)} | {t.wrong} | "
                  + " | ".join(_rate(*t.by_bucket[b]) for b in labels) + " |")
    print()
    ok = True
    for mode, (false, aa, false_pairs, pairs, det, ab) in totals.items():
        bound = _bound(false, aa)
        shown = bound <= TARGET_FALSE_CALL_RATE
        if mode in JUDGED_MODES:
            ok &= shown
        verdict = "shown (upper bound <= 5%)" if shown else "NOT shown (upper bound above 5%)"
        print(f"- {mode}: {_rate(false, aa)} of A/A comparisons called, 95% upper bound {bound:.1%} (target <= "
              f"{TARGET_FALSE_CALL_RATE:.0%}: {verdict if mode in JUDGED_MODES else 'calls nothing by design'}); "
              f"per pair {_rate(false_pairs, pairs)}, upper bound {_bound(false_pairs, pairs):.1%}"
              + (f"; detection {_rate(det, ab)} of A/B variant comparisons" if ab else ""))
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", action="store_true", help="synthetic runs instead of measured ones")
    ap.add_argument("--pairs", type=int, help="A/A (and A/B) pairs per configuration and mode (default 80 measured, "
                                              "1000 synthetic)")
    ap.add_argument("--rounds", type=int, default=8, help="rounds per side of an interleaved session")
    ap.add_argument("--sessions", type=int, default=3, help="interleaved A/A sessions in the session history")
    ap.add_argument("--old-runs", type=int, default=6, help="separate A/A runs in a synthetic old history")
    ap.add_argument("--run-sd", type=float, default=0.05, help="synthetic: spread of separate runs (log scale)")
    ap.add_argument("--round-sd", type=float, default=0.02, help="synthetic: spread of rounds within a session")
    ap.add_argument("--spin-us", type=float, default=5.0, help="injected spin per timed call of B (us)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated: {', '.join(CONFIGS)}")
    args = ap.parse_args()
    if args.synthetic:
        pairs = args.pairs or 1000
        t0 = time.perf_counter()
        results = {f"synthetic (run sd {args.run_sd:.1%}, round sd {args.round_sd:.1%})":
                   synthetic(pairs, args.run_sd, args.round_sd, args.rounds, args.sessions, args.old_runs)}
        print(f"A/A false calls on synthetic runs: {pairs} pairs of separate runs; history: {args.old_runs} separate "
              f"runs (old), or {args.sessions} interleaved A/A sessions of {args.rounds} rounds per side; "
              f"{time.perf_counter() - t0:.0f} s.\n")
        return 0 if report(results) else 1
    pairs = args.pairs or 80
    spin_ns = int(args.spin_us * 1000)
    configs = [c for c in args.configs.split(",") if c]
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        print(f"error: unknown configuration(s) {sorted(unknown)}; have {sorted(CONFIGS)}", file=sys.stderr)
        return 2
    harness.floor_ns()  # measured (and cached) before any spin is injected
    results = {}
    with session("ab") as bench:
        for name in configs:
            results[name] = measure_config(name, pairs, args.rounds, args.sessions, spin_ns, bench.store, bench.say)
    print(f"A/B false calls and detection: {pairs} A/A and {pairs} A/B pairs per configuration and mode, B spinning "
          f"{args.spin_us:g} us more per timed call; interleaved sessions of {args.rounds} rounds per side; session "
          f"history of {args.sessions} A/A sessions.\n")
    print(f"Machine: {bench.machine()}.\n")
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
