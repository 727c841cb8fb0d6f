"""``python -m workbench trace FILE [--json] [--phases] [--chrome OUT.json]``.

Without options it prints a summary, the lanes and the top spans by total time. ``--json``
prints ``{"format", "span_count", "by_category", "tracks", "start_ns", "end_ns", ...}``
(GPU kernels are in category ``kernel``). ``--phases`` adds the phase breakdown where the
source has rules (IREE), ``--chrome`` writes the span table as Chrome trace JSON. An
unreadable, truncated or unsupported file exits with code 2 and one line on stderr naming
the detected format and what is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import TraceError, load


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench trace", description="Import a trace and summarise it.")
    p.add_argument("file", help="trace file (format detected from content)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--phases", action="store_true", help="phase breakdown per iteration (IREE sources)")
    p.add_argument("--chrome", metavar="OUT.json", help="write the spans as Chrome trace JSON")
    p.add_argument("--top", type=int, default=15, help="rows of per-name statistics in the text summary")
    return p


def trace_main(argv: list[str]) -> int:
    """Run the trace command; returns the exit code (2 for any unreadable input)."""
    args = _parser().parse_args(argv)
    from . import analysis, phases
    from .export import write_chrome_json

    try:
        df, meta = load(args.file)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    doc = analysis.summary(df, meta)
    phase_table = None
    phase_error = None
    if args.phases:
        try:
            per_iter = phases.iterations(df)
            phase_table = phases.summarize(per_iter, skip_first=1)  # keeps a lone iteration
        except phases.PhaseError as exc:
            phase_error = str(exc)
    if args.chrome:
        try:
            write_chrome_json(df, args.chrome)
        except OSError as exc:
            print(f"error: cannot write {args.chrome}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    if args.json:
        if args.phases:
            doc["phases"] = (phase_table.to_dict(orient="records") if phase_table is not None
                             else {"error": phase_error})
            if phase_table is not None:
                doc["phase_iterations"] = int(phase_table.attrs.get("iterations", 0))
        print(json.dumps(doc, indent=2, default=str))
    else:
        _print_text(df, doc, args.top)
        if args.phases:
            print()
            if phase_table is not None:
                n = phase_table.attrs["iterations"]
                warm = ", first skipped as warm-up" if n < len(per_iter) else ""
                print(f"Phases (median over {n} iterations{warm}):")
                print(phase_table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
            else:
                print(f"Phases: {phase_error}")
    if args.chrome:
        print(f"wrote {args.chrome}", file=sys.stderr)
    if args.phases and phase_table is None:
        return 1
    return 0


def _print_text(df, doc: dict, top: int) -> None:
    from . import analysis

    wall_ms = (doc["end_ns"] - doc["start_ns"]) / 1e6 if doc["start_ns"] is not None else 0.0
    print(f"format: {doc['format']}   spans: {doc['span_count']}   instants: {doc['instant_count']}   "
          f"wall: {wall_ms:.3f} ms   clock: {doc['clock']}")
    print("categories: " + ", ".join(f"{k}={v}" for k, v in doc["by_category"].items()))
    print("\nTracks:")
    print(analysis.track_summary(df).drop(columns=["first_ns", "last_ns"]).to_string(
        index=False, float_format=lambda v: f"{v:.1f}"))
    print(f"\nTop {top} by total time:")
    stats = analysis.name_stats(df).head(top)
    stats["name"] = stats["name"].str.slice(0, 60)
    print(stats.to_string(index=False, float_format=lambda v: f"{v:.2f}"))


if __name__ == "__main__":
    sys.exit(trace_main(sys.argv[1:]))
