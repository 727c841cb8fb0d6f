"""A/B false-call benchmark: how often `compare` calls a difference that is not there, and
how often it finds one that is.

    python benchmarks/ab_false_calls.py                 # 10 pairs per configuration and mode
    python benchmarks/ab_false_calls.py --pairs 4 --rounds 6 --configs calibration

For each configuration (calibration quick; cpu-reduction quick restricted to its in-process
providers torch, torch-out and numpy on the grid experiment) it measures N A/A pairs
(identical configurations) and N A/B pairs in which every timed call of B carries an
injected spin of known length (``--spin-us``, a busy wait on ``perf_counter_ns`` appended
to the callable the harness times; IREE's child processes would not see it, hence the
in-process providers). Three ways of judging a pair:

- ``runs, no A/A history``: two separate runs, compared with no A/A history: `compare` then
  calls nothing and marks a within-run difference "unconfirmed" (the rate of those on A/A
  pairs is what within-run tests alone would have called);
- ``runs + A/A history``: the same pairs, judged with the other A/A runs of the benchmark as
  the A/A history (as `compare` finds them in a store);
- ``interleaved ab``: `python -m workbench ab` sessions of ``--rounds`` rounds per side.

A false call is a "faster" or "slower" verdict on an A/A variant comparison (target: at most
5% of them); detection is a "slower" verdict on an A/B variant comparison, reported by the
size of the injected change relative to A's median (spin / median). "Unconfirmed" verdicts
are counted apart. Exit status 1 when a mode misses the 5% target.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench import harness, runner  # noqa: E402
from workbench.ab_session import execute_ab  # noqa: E402
from workbench.comparison import UNCONFIRMED, compare_runs  # noqa: E402
from workbench.env import capture, summary_line  # noqa: E402
from workbench.store import Store  # noqa: E402
from workbench.registry import get  # noqa: E402

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
    """Variant comparisons of one (configuration, mode): A/A false calls, A/B detections, and
    the unconfirmed differences of each."""

    def __init__(self):
        self.aa = self.false = self.aa_unconfirmed = 0
        self.ab = self.detected = self.wrong = self.ab_unconfirmed = 0
        self.by_bucket: dict[str, list[int]] = {label: [0, 0] for _, label in BUCKETS}

    def add_aa(self, cmp: dict) -> None:
        rows = [r for r in cmp["rows"] if r["verdict"] in JUDGED]
        self.aa += len(rows)
        self.false += sum(r["verdict"] in ("faster", "slower") for r in rows)
        self.aa_unconfirmed += sum(r["verdict"] in UNCONFIRMED for r in rows)

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


def measure_config(name: str, pairs: int, rounds: int, spin_ns: int, store: Store, say) -> dict[str, Tally]:
    study_id, values = CONFIGS[name]
    study = get(study_id)
    reason = study.requires(study.SPACE.resolve(values, preset="quick"))
    if reason:
        raise SystemExit(f"{name} cannot run here: {reason}")
    tallies = {mode: Tally() for mode in ("runs, no A/A history", "runs + A/A history", "interleaved ab")}
    aa_pairs, ab_pairs = [], []
    for i in range(pairs):
        say(f"{name}: separate runs, pair {i + 1}/{pairs}")
        aa_pairs.append((_execute(study, values, store), _execute(study, values, store)))
        a = _execute(study, values, store)
        with _injected(spin_ns):
            ab_pairs.append((a, _execute(study, values, store)))
    aa_runs = [r for pair in aa_pairs for r in pair]
    for a, b in aa_pairs:
        tallies["runs, no A/A history"].add_aa(compare_runs(a, b))
        tallies["runs + A/A history"].add_aa(compare_runs(a, b, aa_runs))
    for a, b in ab_pairs:
        tallies["runs, no A/A history"].add_ab(compare_runs(a, b), spin_ns)
        tallies["runs + A/A history"].add_ab(compare_runs(a, b, aa_runs), spin_ns)
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


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.1%})" if n else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10, help="A/A pairs and A/B pairs per configuration and mode")
    ap.add_argument("--rounds", type=int, default=8, help="rounds per side of an interleaved session")
    ap.add_argument("--spin-us", type=float, default=5.0, help="injected spin per timed call of B (us)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated: {', '.join(CONFIGS)}")
    args = ap.parse_args()
    spin_ns = int(args.spin_us * 1000)
    configs = [c for c in args.configs.split(",") if c]
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        print(f"error: unknown configuration(s) {sorted(unknown)}; have {sorted(CONFIGS)}", file=sys.stderr)
        return 2
    harness.floor_ns()  # measured (and cached) before any spin is injected
    t0 = time.perf_counter()
    load_start = Path("/proc/loadavg").read_text().split()[:3]
    say = lambda m: print(f"[{time.perf_counter() - t0:6.0f} s] {m}", file=sys.stderr, flush=True)  # noqa: E731
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "ab.sqlite")
        for name in configs:
            results[name] = measure_config(name, args.pairs, args.rounds, spin_ns, store, say)
    load_end = Path("/proc/loadavg").read_text().split()[:3]
    print(f"A/B false calls and detection: {args.pairs} A/A and {args.pairs} A/B pairs per configuration and mode, "
          f"B spinning {args.spin_us:g} us more per timed call; interleaved sessions of {args.rounds} rounds per side.\n")
    print(f"Machine: {summary_line(capture())}; load average {' '.join(load_start)} at the start, "
          f"{' '.join(load_end)} at the end; {time.perf_counter() - t0:.0f} s.\n")
    labels = [label for _, label in BUCKETS]
    print("| configuration | mode | A/A false calls | A/A unconfirmed | A/B detected (slower) | A/B unconfirmed slower "
          "| A/B called faster | " + " | ".join(f"detected, effect {b}" for b in labels) + " |")
    print("|" + "---|" * (7 + len(labels)))
    totals: dict[str, list[int]] = {}
    for name, tallies in results.items():
        for mode, t in tallies.items():
            tot = totals.setdefault(mode, [0, 0, 0, 0, 0])
            for i, n in enumerate((t.false, t.aa, t.detected, t.ab, t.aa_unconfirmed)):
                tot[i] += n
            print(f"| {name} | {mode} | {_rate(t.false, t.aa)} | {_rate(t.aa_unconfirmed, t.aa)} | "
                  f"{_rate(t.detected, t.ab)} | {_rate(t.ab_unconfirmed, t.ab)} | {t.wrong} | "
                  + " | ".join(_rate(*t.by_bucket[b]) for b in labels) + " |")
    print()
    ok = True
    for mode, (false, aa, det, ab, unconfirmed) in totals.items():
        rate = false / aa if aa else float("nan")
        met = rate <= TARGET_FALSE_CALL_RATE
        ok &= met
        print(f"- {mode}: false-call rate {_rate(false, aa)} (target <= {TARGET_FALSE_CALL_RATE:.0%}: "
              f"{'met' if met else 'MISSED'}); detection {_rate(det, ab)} of all A/B variant comparisons"
              + (f"; A/A differences left unconfirmed {_rate(unconfirmed, aa)}" if unconfirmed else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
