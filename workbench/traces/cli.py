"""``python -m workbench trace``: summarise, export and compare traces.

    python -m workbench trace FILE [FILE ...] [--json] [--phases] [--chrome OUT.json] [--align auto]
    python -m workbench trace diff A B [--json] [--correction holm|bh] [--alpha 0.05]

Without options it prints a summary, the lanes and the top spans by total time. Several
files are one trace of several ranks (:mod:`.ranks`: a rank column, clocks aligned, per-rank
statistics with the slowest rank and the skew). ``--json`` prints ``{"format", "span_count",
"by_category", "tracks", "start_ns", "end_ns", "dropped", ...}`` (GPU kernels are in category
``kernel``). ``--phases`` adds the phase breakdown where the source has rules (IREE, Kineto
steps), ``--chrome`` writes the span table as Chrome trace JSON. ``diff A B`` compares two
traces span name by span name (:mod:`.diff`); a file named ``diff`` is given as ``./diff``.

Every path ends with exit 0, or exit 2 and one line on stderr naming what is wrong (an
unreadable, truncated or unsupported file names the detected format; a trace without phase
rules, traces without names in common, an unwritable output). Events the importer dropped
are counted in every output.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..tables import render
from . import TraceError, analysis, diff, load, phases, ranks
from .export import write_chrome_json
from .ranks import RankError, load_ranks

EXIT_OK, EXIT_BAD_INPUT = 0, 2


class _Bad(Exception):
    """Bad input found while producing an output: exit 2 with this one line."""


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``trace`` command's arguments (shared by ``python -m workbench trace`` and this module)."""
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="trace file(s), format detected from content; several files are the ranks of one run; "
                        "'diff A B' compares two traces")
    p.add_argument("--json", action="store_true", help="print a JSON summary (or the diff table)")
    p.add_argument("--phases", action="store_true", help="phase breakdown per iteration (IREE, Kineto steps)")
    p.add_argument("--chrome", metavar="OUT.json", help="write the spans as Chrome trace JSON (ui.perfetto.dev)")
    p.add_argument("--top", type=int, default=15, help="rows of per-name statistics (default 15)")
    p.add_argument("--lanes", type=int, default=40, help="lanes listed in the text summary (0: all; default 40)")
    p.add_argument("--align", choices=["auto", "collective", "base", "none"], default="auto",
                   help="several files: how to align the ranks' clocks (default auto: first collective, else base "
                        "times)")
    p.add_argument("--marker", metavar="REGEX", help="several files: align on the first span matching REGEX "
                                                      "instead of the first collective")
    p.add_argument("--correction", choices=["holm", "bh"], default="holm",
                   help="diff: multiple-comparison correction of the per-name p-values (default holm)")
    p.add_argument("--alpha", type=float, default=0.05, help="diff: significance level (default 0.05)")
    return p


def _parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog="python -m workbench trace",
                                                 description="Import traces and summarise or compare them."))


def trace_main(argv: list[str]) -> int:
    """Parse ``argv`` and run; returns the exit code (2 for any bad input)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed its one-line usage error
        return EXIT_BAD_INPUT if exc.code else EXIT_OK
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run the trace command on parsed arguments; returns the exit code."""
    for stream in (sys.stdout, sys.stderr):  # names from traces may not fit a narrow terminal encoding
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        if args.files[0] == "diff":
            return _diff(args)
        return _summary(args)
    except (TraceError, _Bad) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of the trace
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the contract: one line, never a traceback
        print(f"error: internal error while writing the output (a bug; please report it with the file): "
              f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _load(args) -> tuple[Any, dict]:
    if len(args.files) == 1:
        return load(args.files[0])
    try:
        return load_ranks(args.files, align=args.align, marker=args.marker)
    except RankError as exc:
        raise _Bad(f"ranks: {exc}") from None


def _summary(args) -> int:
    df, meta = _load(args)
    doc = analysis.summary(df, meta)
    phase_tables, phase_error = _phases(df, meta) if args.phases else ({}, None)
    if args.chrome:
        try:
            write_chrome_json(df, args.chrome)
        except OSError as exc:
            raise _Bad(f"cannot write {args.chrome}: {exc.strerror or exc}") from None
    multi = ranks.is_multi_rank(df)
    if args.json:
        if multi:
            doc["rank_summary"] = ranks.rank_summary(df).to_dict(orient="records")
            doc["slowest"] = ranks.slowest(df)
        if args.phases and phase_error is not None:
            doc["phases"] = {"error": phase_error}
        elif args.phases and multi:  # per rank: {"0": [...], "1": [...]}
            doc["phases"] = {str(k): t.to_dict(orient="records") for k, t in phase_tables.items()}
            doc["phase_iterations"] = {str(k): int(t.attrs["iterations"]) for k, t in phase_tables.items()}
        elif args.phases:
            doc["phases"] = phase_tables[None].to_dict(orient="records")
            doc["phase_iterations"] = int(phase_tables[None].attrs["iterations"])
        print(json.dumps(doc, indent=2, default=str))
    else:
        _print_text(df, doc, args.top, args.lanes)
        if multi:
            _print_ranks(df)
        for key, table in phase_tables.items():
            n = table.attrs["iterations"]
            warm = ", first skipped as warm-up" if table.attrs.get("skipped") else ""
            print(f"\nPhases{'' if key is None else f' of rank {key}'} (median over {n} iterations{warm}):")
            print(render(table, "plain", max_rows=None))
    if args.chrome:
        print(f"wrote {args.chrome}", file=sys.stderr)
    if phase_error is not None:
        raise _Bad(f"phases: {phase_error}")
    return EXIT_OK


def _phases(df, meta) -> tuple[dict, str | None]:
    """Phase summaries (one per rank for a multi-rank trace, keyed by rank; else key None)."""
    groups = ({int(r): g for r, g in df.groupby("rank", observed=True)} if ranks.is_multi_rank(df) else {None: df})
    out = {}
    try:
        for key, g in groups.items():
            per_iter = phases.iterations(g)
            table = phases.summarize(per_iter, skip_first=1)  # keeps a lone iteration
            table.attrs["skipped"] = len(per_iter) - table.attrs["iterations"]
            out[key] = table
    except phases.PhaseError as exc:
        return {}, str(exc)
    return out, None


def _print_text(df, doc: dict, top: int, lanes: int) -> None:
    wall_ms = (doc["end_ns"] - doc["start_ns"]) / 1e6 if doc["start_ns"] is not None else 0.0
    print(f"format: {doc['format']}   spans: {doc['span_count']:,}   instants: {doc['instant_count']:,}   "
          f"wall: {wall_ms:.3f} ms   clock: {doc['clock']}")
    print(f"dropped or adjusted events: {analysis.dropped_text(doc['dropped']) or 'none'}")
    print("categories: " + ", ".join(f"{k}={v}" for k, v in doc["by_category"].items()))
    ts = analysis.track_summary(df)
    if ts.empty:
        print("\nNo spans (only instants): no lanes or per-name statistics to show.")
        return
    shown = ts if lanes <= 0 else ts.head(lanes)
    print(f"\nLanes ({len(ts):,}):" if len(shown) == len(ts) else f"\nLanes (first {len(shown):,} of {len(ts):,}; "
                                                               "--lanes 0 lists all):")
    print(render(shown.drop(columns=["first_ns", "last_ns"]), "plain", max_rows=None))
    print(f"\nTop {top} by total time:")
    stats = analysis.name_stats(df).head(top)
    stats["name"] = stats["name"].str.slice(0, 60)
    print(render(stats, "plain", max_rows=None))


def _print_ranks(df) -> None:
    print("\nRanks:")
    print(render(ranks.rank_summary(df), "plain", max_rows=None))
    print(ranks.slowest(df)["text"])
    per_name = ranks.rank_name_stats(df, top=10)
    per_name["name"] = per_name["name"].str.slice(0, 50)
    print("\nPer name, median per rank (us), top 10 by total time:")
    print(render(per_name, "plain", max_rows=None))


def _diff(args) -> int:
    if len(args.files) != 3:
        raise _Bad(f"trace diff takes two files (A B), got {len(args.files) - 1}; a file named 'diff' is './diff'")
    (a, meta_a), (b, meta_b) = load(args.files[1]), load(args.files[2])
    try:
        table = diff.diff(a, b, alpha=args.alpha, correction=args.correction)
    except diff.DiffError as exc:
        raise _Bad(f"diff: {meta_a['format']} vs {meta_b['format']}: {exc}") from None
    dropped = {"a": analysis.dropped_events(meta_a), "b": analysis.dropped_events(meta_b)}
    if args.json:
        print(json.dumps({"a": args.files[1], "b": args.files[2], "formats": [meta_a["format"], meta_b["format"]],
                          "dropped": dropped, **table.attrs,
                          "names": json.loads(table.to_json(orient="records"))}, indent=1))
        return EXIT_OK
    for side, path, meta in (("a", args.files[1], meta_a), ("b", args.files[2], meta_b)):
        print(f"{side}: {path} ({meta['format']}; dropped or adjusted events: "
              f"{analysis.dropped_text(dropped[side]) or 'none'})")
    print(diff.headline(table))
    shown = diff.display(table).head(args.top)
    print(f"\nTop {len(shown)} names by |Δ total| (times in us; Δ = b - a):")
    print(render(shown, "plain", max_rows=None))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(trace_main(sys.argv[1:]))
