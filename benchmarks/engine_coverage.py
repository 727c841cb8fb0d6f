"""Coverage benchmark of the comparison engine: synthetic runs of known truth, through the engine.

    python benchmarks/engine_coverage.py                      # every case, 2,000 replicates each
    python benchmarks/engine_coverage.py --replicates 200 --cases paired,hosts

Each case draws runs whose true figure is known (an A/A pair of blocks, a known ratio, a known
mean over hosts) with the disturbances the engine claims to handle: drift between blocks, no
null control, a null that is not null, few rounds, host effects between runs, a best-of-N
selection. Every replicate goes through the engine as a run would (:class:`workbench.evidence.engine.Evidence`,
:func:`workbench.reading.across.by_host`), and the benchmark prints, per case, how often a true null is
called clear (target: at most 5%, its Clopper-Pearson 95% upper bound at most 7.5%) and how often
the CI covers the truth (target: at least 93% wherever the CI claims the level; a row the engine
shows as inconclusive by rule, e.g. 5 rounds or drift not measured, claims nothing). Rows marked
"refused" are what the engine no longer computes (pooled runs of several hosts, the best of
each run's configurations): their coverage is printed to show why.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.evidence import derived, engine, stats  # noqa: E402
from workbench.reading.across import by_host  # noqa: E402
from workbench.data.record import RunRecord, VariantResult  # noqa: E402

FALSE_CLEAR_MAX, FALSE_CLEAR_BOUND, COVERAGE_MIN = 0.05, 0.075, 0.93
TWINS = engine.Nulls(twins="again / first")


@dataclass
class Tally:
    """Counts of one row: replicates, false clears (a true null called clear), covered truths."""

    n: int = 0
    clear: int = 0
    covered: int = 0

    def add(self, d: derived.Derived, truth: float, null_true: bool) -> None:
        self.n += 1
        self.clear += bool(null_true and d.status == "clear")
        self.covered += bool(d.lo <= truth <= d.hi)


def _rec(variants) -> RunRecord:
    return RunRecord("20261128-000000-calibration-abcdef", "synthetic", {}, {"cpu_logical": 16}, variants=variants)


def _v(name, x, blocks, **params) -> VariantResult:
    return VariantResult(name, {"provider": name, **params}, x.tolist(), True, blocks=list(blocks))


def _blocks(rng, tau: float, nulls: int, n: int, ratio: float, noise: float = 0.02, bad: float = 1.0):
    """A run of ``nulls`` A/A twins and a compared pair, each variant a block of its own: a block
    is its true time x exp(block effect, sd tau/sqrt 2) x lognormal noise; ``bad`` scales the
    first twin (a real effect declared as a null)."""
    vs, b = [], 0

    def block(name, true, **params):
        nonlocal b
        b += 1
        x = true * np.exp(rng.normal(0, tau / np.sqrt(2))) * np.exp(rng.normal(0, noise, n))
        return _v(name, x, [b] * n, **params)

    for i in range(nulls):
        vs += [block(f"p{i}", 1e5), block(f"aa:p{i}", 1e5 * (bad if i == 0 else 1.0), twin_of=f"p{i}")]
    vs += [block("a", 1e5), block("b", 1e5 * ratio)]
    return _rec(vs)


def case_blocks(reps: int, tau: float, nulls: int, n: int, bad: float = 1.0) -> dict[str, Tally]:
    """Two blocks compared with the drift the run's nulls measure: an A/A pair and a 1.10x one."""
    out = {"A/A": Tally(), "1.10x": Tally()}
    rng = np.random.default_rng(1000 * nulls + n + int(tau * 1e4) + int(bad * 100))
    for _ in range(reps):
        for label, ratio in (("A/A", 1.0), ("1.10x", 1.10)):
            ev = engine.Evidence(_blocks(rng, tau, nulls, n, ratio, bad=bad), TWINS if nulls else None)
            out[label].add(ev.ratio("a", "b", "b / a"), ratio, ratio == 1.0)
    return out


def _kinds(rng, ratio: float, n: int = 10, quiet: float = 0.005, loud: float = 0.25):
    """Calibration's shape: two clock reads and two fork/joins, each with its A/A twin, and a
    compared pair of fork/joins, every variant a block of its own; fork/joins drift between
    blocks by ``loud``, clock reads by ``quiet``."""
    vs, b = [], 0

    def block(name, true, tau, kind, **params):
        nonlocal b
        b += 1
        x = true * np.exp(rng.normal(0, tau / np.sqrt(2))) * np.exp(rng.normal(0, 0.02, n))
        return _v(name, x, [b] * n, kind=kind, **params)

    for name, kind, tau in (("c1", "clock", quiet), ("c2", "clock", quiet), ("w1", "forkjoin", loud),
                            ("w2", "forkjoin", loud)):
        vs += [block(name, 1e4, tau, kind), block(f"aa:{name}", 1e4, tau, kind, twin_of=name)]
    vs += [block("a", 1e4, loud, "forkjoin"), block("b", 1e4 * ratio, loud, "forkjoin")]
    return _rec(vs)


def case_kinds(reps: int) -> dict[str, Tally]:
    """Nulls of two kinds that drift apart by different amounts (a fork/join 25%, a clock read
    0.5%): fork/joins compared with their kind's drift (declared), and, refused, with the drift
    pooled over every null."""
    kinds = engine.Nulls(twins="again / first", kind=lambda p: p["kind"])
    out = {"A/A": Tally(), "1.50x": Tally(), "refused: pooled drift, A/A": Tally()}
    rng = np.random.default_rng(7)
    for _ in range(reps):
        for label, ratio in (("A/A", 1.0), ("1.50x", 1.5)):
            rec = _kinds(rng, ratio)
            out[label].add(engine.Evidence(rec, kinds).ratio("a", "b", "b / a"), ratio, ratio == 1.0)
            if ratio == 1.0:
                out["refused: pooled drift, A/A"].add(engine.Evidence(rec, TWINS).ratio("a", "b", "b / a"), 1.0, True)
    return out


def case_paired(reps: int, n: int, round_sd: float = 0.10, noise: float = 0.02) -> dict[str, Tally]:
    """Two variants timed in the same n rounds, a drift of ``round_sd`` shared by both in each
    round: an A/A pair and a 1.20x one (the order-statistic interval of per-round ratios)."""
    out = {"A/A": Tally(), "1.20x": Tally()}
    rng = np.random.default_rng(n)
    for _ in range(reps):
        drift = np.exp(rng.normal(0, round_sd, n))
        for label, ratio in (("A/A", 1.0), ("1.20x", 1.2)):
            a = 1e5 * drift * np.exp(rng.normal(0, noise, n))
            b = 1e5 * ratio * drift * np.exp(rng.normal(0, noise, n))
            d = engine.Evidence(_rec([_v("a", a, range(n)), _v("b", b, range(n))])).ratio("a", "b", "r")
            out[label].add(d, ratio, ratio == 1.0)
    return out


def _run_figure(truth: float, within_sd: float, rng, name: str) -> derived.Derived:
    """One run's figure (a gain in %) with its within-run 95% CI, as a run states it."""
    point = truth + rng.normal(0, within_sd)
    half = 1.96 * within_sd
    return engine.judge(name, point, point - half, point + half, unit="%", null=0.0, n_a=20, n_b=20,
                        paired=True, covers=derived.ROUNDS)


def case_hosts(reps: int, hosts: int, runs: int, host_sd: float = 4.0, run_sd: float = 2.0) -> dict[str, Tally]:
    """A configuration's gain measured in ``runs`` runs on each of ``hosts`` hosts, with a host
    effect: the across-hosts figure (hosts the units) and, refused, runs pooled as if one host."""
    out = {"across hosts": Tally(), "refused: runs pooled over hosts": Tally()}
    rng = np.random.default_rng(hosts * 100 + runs)
    for _ in range(reps):
        items, names = [], []
        for h in range(hosts):
            effect = rng.normal(0, host_sd)
            for _r in range(runs):
                items.append(_run_figure(10.0 + effect + rng.normal(0, run_sd), 1.0, rng, "gain"))
                names.append(f"host {h}")
        rows = dict(by_host(items, names))
        out["across hosts"].add(rows[f"all {hosts} hosts"], 10.0, False)
        pooled = by_host(items, ["one host"] * len(items))[0][1]
        out["refused: runs pooled over hosts"].add(pooled, 10.0, False)
    return out


def case_selection(reps: int, configs: int = 7, runs: int = 8, run_sd: float = 4.0) -> dict[str, Tally]:
    """Seven configurations of equal true gain (10%), each run picks its best: each
    configuration's row across runs, and, refused, the row of each run's best (a best-of-N)."""
    out = {"each configuration": Tally(), "refused: best of each run's configurations": Tally()}
    rng = np.random.default_rng(configs * 10 + runs)
    for _ in range(reps):
        per = [[_run_figure(10.0 + rng.normal(0, run_sd), 1.0, rng, f"c{c}") for c in range(configs)]
               for _r in range(runs)]
        out["each configuration"].add(by_host([p[0] for p in per], ["h"] * runs)[0][1], 10.0, False)
        best = [max(p, key=lambda d: d.point) for p in per]
        out["refused: best of each run's configurations"].add(by_host(best, ["h"] * runs)[0][1], 10.0, False)
    return out


#: name -> (what it shows, function, keyword arguments)
CASES = {
    "blocks tau=0": ("two blocks, drift 0, 4 twins, 10 samples", case_blocks, dict(tau=0.0, nulls=4, n=10)),
    "blocks tau=3%": ("two blocks, drift 3%, 4 twins, 10 samples", case_blocks, dict(tau=0.03, nulls=4, n=10)),
    "blocks tau=8%": ("two blocks, drift 8%, 4 twins, 10 samples", case_blocks, dict(tau=0.08, nulls=4, n=10)),
    "blocks 2 nulls": ("two blocks, drift 3%, 2 twins", case_blocks, dict(tau=0.03, nulls=2, n=10)),
    "blocks 8 nulls": ("two blocks, drift 3%, 8 twins", case_blocks, dict(tau=0.03, nulls=8, n=10)),
    "blocks n=5": ("two blocks of 5 samples, drift 3%", case_blocks, dict(tau=0.03, nulls=4, n=5)),
    "blocks n=30": ("two blocks of 30 samples, drift 3%", case_blocks, dict(tau=0.03, nulls=4, n=30)),
    "no nulls": ("two blocks, drift 3%, no null control (drift not measured)", case_blocks,
                 dict(tau=0.03, nulls=0, n=10)),
    "a null that is not": ("drift 3%, 5 twins, one a real 0.61x effect", case_blocks,
                           dict(tau=0.03, nulls=5, n=10, bad=0.61)),
    "kinds": ("nulls of two kinds (fork/join drift 25%, clock 0.5%), 2 of each; two fork/joins compared",
              case_kinds, dict()),
    "paired 5 rounds": ("paired by round, 5 rounds (t interval: no 95% interval of a median exists)", case_paired,
                        dict(n=5)),
    "paired 6 rounds": ("paired by round, 6 rounds, round drift 10%", case_paired, dict(n=6)),
    "paired 10 rounds": ("paired by round, 10 rounds", case_paired, dict(n=10)),
    "paired 20 rounds": ("paired by round, 20 rounds", case_paired, dict(n=20)),
    "hosts 3x4": ("3 hosts x 4 runs, host effect 4 points", case_hosts, dict(hosts=3, runs=4)),
    "hosts 5x3": ("5 hosts x 3 runs, host effect 4 points", case_hosts, dict(hosts=5, runs=3)),
    "hosts 8x2": ("8 hosts x 2 runs, host effect 4 points", case_hosts, dict(hosts=8, runs=2)),
    "selection": ("7 configurations of equal gain, 8 runs", case_selection, dict()),
}


def _one(args: tuple[str, int]) -> tuple[str, dict[str, Tally], float]:
    name, reps = args
    _what, fn, kw = CASES[name]
    t0 = time.process_time()
    return name, fn(reps, **kw), time.process_time() - t0


def _cells(t: Tally, null_row: bool) -> tuple[str, str, bool]:
    clear = cover = "-"
    ok = True
    if null_row:
        hi = stats.clopper_pearson(t.clear, t.n)[1]
        clear = f"{t.clear} ({t.clear / t.n:.1%}), <= {hi:.1%}"
        ok &= t.clear / t.n <= FALSE_CLEAR_MAX and hi <= FALSE_CLEAR_BOUND
    lo, hi = stats.clopper_pearson(t.covered, t.n)
    cover = f"{t.covered / t.n:.1%} [{lo:.1%}, {hi:.1%}]"
    return clear, cover, ok


CLAIMS_NOTHING = {"no nulls"}  # the engine shows these inconclusive by rule


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=2000, help="replicates per case (default %(default)s)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated: {', '.join(CASES)}")
    ap.add_argument("--jobs", type=int, default=multiprocessing.cpu_count(), help="processes (default: the CPUs)")
    args = ap.parse_args()
    names = [c for c in args.cases.split(",") if c]
    if set(names) - set(CASES):
        print(f"error: unknown cases {sorted(set(names) - set(CASES))}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        done = {name: (res, cpu) for name, res, cpu in pool.imap_unordered(_one, [(n, args.replicates) for n in names])}
    print(f"Engine coverage: {args.replicates:,} replicates a case; {time.strftime('%Y-%m-%d')}; "
          f"{time.perf_counter() - t0:.0f} s on {args.jobs} process(es). Targets: a true null called clear in at most "
          f"{FALSE_CLEAR_MAX:.0%} (Clopper-Pearson 95% upper bound at most {FALSE_CLEAR_BOUND:.1%}); coverage at "
          f"least {COVERAGE_MIN:.0%} wherever the CI claims its level.\n")
    print("| case | what | row | replicates | true null called clear (95% upper bound) | CI covers the truth "
          "(95% CI) | target |")
    print("|---|---|---|---|---|---|---|")
    failed = []
    for name in names:
        res, _cpu = done[name]
        for row, t in res.items():
            null_row = row == "A/A"
            clear, cover, ok = _cells(t, null_row)
            claimed = name not in CLAIMS_NOTHING and not row.startswith("refused")
            ok &= (t.covered / t.n >= COVERAGE_MIN) if claimed else True
            verdict = ("met" if ok else "MISSED") if claimed else ("refused" if row.startswith("refused") else
                                                                   "claims nothing (inconclusive by rule)")
            if claimed and not ok:
                failed.append(f"{name}: {row}")
            print(f"| {name} | {CASES[name][0]} | {row} | {t.n:,} | {clear} | {cover} | {verdict} |")
    print("\n" + ("Every target met." if not failed else f"MISSED: {'; '.join(failed)}."))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
