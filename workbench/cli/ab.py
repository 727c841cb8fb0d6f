"""``ab STUDY --a ... --b ...``: an interleaved A/B session, stored as two linked runs, then
compared."""

from __future__ import annotations

from ..results.store import StoreError
from ..seam.study import ParamError, validate
from .base import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Command, err, find_study, open_store
from ..presentation.progress import ProgressBar
from .compare import print_comparison
from .run import deprecations, measuring, precision_arguments


class AB(Command):
    name = "ab"
    help = ("interleaved A/B session: rounds of two parameter sets alternate in one session, stored as two "
            "linked runs, then compared")

    @classmethod
    def arguments(cls, s, argv):
        from ..running.ab_session import DEFAULT_ROUNDS

        s.add_argument("study")
        s.add_argument("--set", action="append", metavar="NAME=VALUE", help="a parameter of both sides")
        s.add_argument("--a", action="append", metavar="NAME=VALUE", help="a parameter of side A (the baseline)")
        s.add_argument("--b", action="append", metavar="NAME=VALUE", help="a parameter of side B")
        presets = s.add_mutually_exclusive_group()
        presets.add_argument("--quick", action="store_true", help="the study's quick preset for both sides")
        presets.add_argument("--preset", help="one of the study's presets for both sides")
        s.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                       help="rounds per side (default %(default)s; a verdict needs 5 paired rounds)")
        s.add_argument("--json", action="store_true", help="print only the comparison (JSON) on stdout")
        precision_arguments(s)

    @classmethod
    def run(cls, args) -> int:
        from ..reading import comparison as compare
        from ..running import runner
        from ..running.ab_session import execute_ab
        from ..running.ab_session import interrupted_text as ab_interrupted_text

        study = find_study(args.study)
        if study is None:
            return EXIT_BAD_INPUT
        preset = "quick" if args.quick else args.preset
        try:
            common = study.SPACE.parse_sets(args.set or [])
            values = {side: {**common, **study.SPACE.parse_sets(sets or [])}
                      for side, sets in (("A", args.a), ("B", args.b))}
            deprecations(study, {k: v for side in values.values() for k, v in side.items()})
            for side_values in values.values():
                validate(study, side_values, preset=preset)  # before the store is touched
            precision = runner.parse_precision(args.precision, args.precision_cap)
            runner.stall_limit_s()  # a bad $WORKBENCH_STALL_S, before the store is made
            store = open_store(args.store)
            store.check_writable()
        except (ParamError, StoreError) as exc:
            err(str(exc))
            return EXIT_BAD_INPUT
        bar = ProgressBar()
        pair, code = measuring(study, bar.close, "rounds", ab_interrupted_text, lambda: execute_ab(
            study, values["A"], values["B"], store, rounds=args.rounds, preset=preset, progress=bar,
            precision=precision, precision_cap_s=args.precision_cap))
        if pair is None:
            return code
        a, b = pair
        if not args.json:
            print(f"runs {a.run_id} (A) and {b.run_id} (B) stored in {store.path}")
        print_comparison(compare.compare_runs(a, b, compare.history(a, b, store)), "json" if args.json else "table",
                         {"runs": [a.run_id, b.run_id]})
        return EXIT_OK if all(v.correct for v in a.variants + b.variants) else EXIT_FAILED
