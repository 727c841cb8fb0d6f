"""``compare A B``: B against A as one table, with a regression gate; the comparison printer
``ab`` shares."""

from __future__ import annotations

from ..results.store import StoreError
from .base import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Command, catalog, err, load_runs, plain_block


def print_comparison(cmp: dict, fmt: str, extra: dict | None = None, threshold: float | None = None) -> None:
    """A comparison on stdout: ``table`` (one aligned table, then a line each for what
    differs, the warnings and the gate), ``md`` (GitHub Markdown) or ``json``."""
    from ..reading import comparison as compare

    if fmt == "json":
        doc = {**cmp, **(extra or {})}
        if threshold is not None:
            doc["gate"] = {"threshold": threshold, "regressions": compare.regressions(cmp, threshold),
                           "unconfirmed": compare.unconfirmed_regressions(cmp, threshold)}
        print(compare.to_json(doc))
    elif fmt == "md":
        print(plain_block(compare.markdown(cmp) + ("\n" + compare.gate_text(cmp, threshold) if threshold is not None
                                                   else "")))
    else:
        print(compare.terminal(cmp, threshold))  # plain text already, cell by cell


class Compare(Command):
    """``compare A B``: B against A as one terminal table (``--format md``: Markdown; ``--json``);
    ``--fail-above 2%``: exit 1 when a variant is clearly slower by more than 2%
    (:func:`workbench.reading.comparison.regressions`)."""

    name = "compare"
    help = ("B against A as one table: per variant the medians, B/A with its 95% CI and a verdict "
            "(--fail-above PCT: a regression gate)")

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("run_a", help="baseline: run id, unique prefix, latest, a bundle file or a committed bundle's id")
        s.add_argument("run_b", help="the run judged against A (not A itself)")
        s.add_argument("--format", choices=["table", "md", "json"], default="table",
                       help="table: one aligned table for the terminal (default); md: GitHub Markdown with the "
                            "parameter and environment diffs; json: the comparison as data")
        s.add_argument("--json", action="store_true", help="same as --format json")
        s.add_argument("--fail-above", metavar="PCT",
                       help="regression gate: exit 1 when a variant is clearly slower than A by more than PCT (2%% or "
                            "0.02): the comparison calls it slower and its B/A CI lies above 1 + PCT")

    @classmethod
    def run(cls, args) -> int:
        threshold = None
        if args.fail_above is not None:
            from ..reading.comparison import parse_threshold

            try:
                threshold = parse_threshold(args.fail_above)
            except ValueError as exc:
                err(f"--fail-above: {exc}")
                return EXIT_BAD_INPUT
        try:
            opened = catalog(args)
        except StoreError as exc:
            err(str(exc))
            return EXIT_BAD_INPUT
        runs = load_runs(args, args.run_a, args.run_b, opened=opened)
        if runs is None:
            return EXIT_BAD_INPUT
        a, b = runs
        if a.run_id == b.run_id:  # said before the statistics are imported (the comparison refuses it too)
            err(f"A and B are the same run ({a.run_id}): a run compared with itself shows no change by construction; "
                "give two runs (python -m workbench runs --all lists them)")
            return EXIT_BAD_INPUT
        from ..reading import comparison as compare

        try:
            # A/A candidates: the store's runs and the committed bundles with A's or B's configuration
            cmp = compare.compare_runs(a, b, compare.history_in(a, b, opened[0]))
        except compare.CompareError as exc:
            err(str(exc))
            return EXIT_BAD_INPUT
        print_comparison(cmp, "json" if args.json else args.format, threshold=threshold)
        if threshold is not None and compare.regressions(cmp, threshold):
            return EXIT_FAILED
        return EXIT_OK
