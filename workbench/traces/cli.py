"""``python -m workbench trace``: summarise, export and compare traces.

    python -m workbench trace FILE [FILE ...] [--json | --markdown] [--comm REGEX] [--phases] [--chrome OUT.json]
    python -m workbench trace diff A B [--json] [--comm REGEX] [--correction holm|bh] [--alpha 0.05]
    python -m workbench trace diff A0 A1 ... vs B0 B1 ...      (several ranks a side)

Without options it prints a summary, the lanes, the top spans by total time and, for a trace
with GPU work, the GPU-time breakdown per rank (:mod:`.overlap`: computation, communication,
memory and idle time, the share of communication hidden under computation, per step with
CIs). Several files are one trace of several ranks (:mod:`.ranks`: a rank column, clocks
aligned, per-rank statistics with the slowest rank and the skew). ``--json`` prints
``{"format", "span_count", "by_category", "tracks", "start_ns", "end_ns", "dropped",
"gpu_time", ...}`` (GPU kernels are in category ``kernel``; ``gpu_time`` is null without GPU
work). ``--markdown`` prints the breakdown as GitHub Markdown (an issue or a report).
``--comm REGEX`` makes the kernels whose names match it communication (DeepEP's
``dispatch``/``combine``, a custom all-to-all), before the built-in rules. ``--phases`` adds
the phase breakdown where the source has rules (IREE, Kineto steps), ``--chrome`` writes the
span table as Chrome trace JSON. ``diff A B`` compares two traces span name by span name
(:mod:`.diff`) and their GPU-time breakdown per rank, with CIs over steps; a file named
``diff`` is given as ``./diff``, one named ``vs`` as ``./vs``.

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

from ..evidence.tables import render
from ..base.untrusted import OutputStreamError, guarded, plain
from . import TraceError, analysis, diff, load, overlap, phases, ranks
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
    p.add_argument("--markdown", action="store_true",
                   help="print the GPU-time breakdown as GitHub Markdown (for an issue or a report)")
    p.add_argument("--comm", metavar="REGEX",
                   help="kernels (or copies) whose names match REGEX are communication, before the built-in rules "
                        "(NCCL/RCCL/MSCCL, DeepEP, symmetric memory, NVSHMEM, custom all-reduce, peer copies); "
                        "e.g. '(?i)dispatch|combine'; when none is found the output suggests one")
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
        print(f"error: {plain(exc)}", file=sys.stderr)
    except OutputStreamError:  # through workbench.cli.main, which says it in one line
        raise
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of the trace
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the contract: one line, never a traceback
        print(f"error: internal error while writing the output (a bug; please report it with the file): "
              f"{type(exc).__name__}: {plain(exc)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _load(paths: list[str], args, keep_args: bool = True) -> tuple[Any, dict]:
    """One file, or several as the ranks of one run; ``keep_args=False`` when no output shows
    the events' args (faster, smaller: :func:`workbench.traces.load`)."""
    if len(paths) == 1:
        return load(paths[0], args=keep_args)
    try:
        return load_ranks(paths, align=args.align, marker=args.marker, args=keep_args)
    except RankError as exc:
        raise _Bad(f"ranks: {exc}") from None


def _gpu_time(df, args) -> tuple[dict | None, dict | None]:
    """The GPU-time tables (None without GPU work) and the communication suggestion
    (:func:`.overlap.suggest_comm`); a bad --comm is bad input."""
    if not overlap.has_gpu_work(df):
        return None, None
    try:
        return overlap.summary(df, comm=args.comm), overlap.suggest_comm(df, comm=args.comm)
    except overlap.OverlapError as exc:
        raise _Bad(str(exc)) from None


def _summary(args) -> int:
    df, meta = _load(args.files, args, keep_args=bool(args.chrome))  # only the Chrome export writes args
    doc = analysis.summary(df, meta)
    gpu, suggestion = _gpu_time(df, args)
    if args.markdown:
        if gpu is None:
            raise _Bad(f"{meta['format']}: no GPU kernels, copies or memsets in the trace: no GPU-time breakdown")
        print(overlap.markdown(gpu, suggestion=suggestion))
        return EXIT_OK
    phase_tables, phase_error = _phases(df, meta) if args.phases else ({}, None)
    if args.chrome:
        try:
            write_chrome_json(df, args.chrome)
        except OSError as exc:
            raise _Bad(f"cannot write {args.chrome}: {exc.strerror or exc}") from None
    multi = ranks.is_multi_rank(df)
    if args.json:
        if multi:
            doc["rank_summary"] = ranks.rank_summary(df, comm=args.comm).to_dict(orient="records")
            doc["slowest"] = ranks.slowest(df)
        doc["gpu_time"] = None if gpu is None else {"comm": args.comm, "comm_suggestion": suggestion,
                                                    **overlap.to_json(gpu)}
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
            _print_ranks(df, args.comm)
        if gpu is not None:
            _print_gpu_time(gpu, suggestion)
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
    print("categories: " + plain(", ".join(f"{k}={v}" for k, v in doc["by_category"].items())))  # names from the trace
    ts = analysis.track_summary(df)
    if ts.empty:
        print("\nNo spans (only instants): no lanes or per-name statistics to show.")
        return
    shown = ts if lanes <= 0 else ts.head(lanes)
    print(f"\nLanes ({len(ts):,}):" if len(shown) == len(ts) else f"\nLanes (first {len(shown):,} of {len(ts):,}; "
                                                               "--lanes 0 lists all):")
    print(render(shown.drop(columns=["first_us", "last_us"]), "plain", max_rows=None))
    print(f"\nTop {top} by self time (time no child span covers; envelopes such as the profiler's own span left "
          "out):")
    stats = analysis.name_stats(df).head(top)
    stats["name"] = stats["name"].str.slice(0, 60)
    print(render(stats, "plain", max_rows=None))


def _print_gpu_time(gpu: dict, suggestion: dict | None = None) -> None:
    shown = overlap.display(gpu)
    print("\nGPU time per rank and device:")
    for line in overlap.headlines(gpu, suggestion=suggestion):
        print(f"  {line}")
    print(render(shown["breakdown"], "plain", max_rows=None))
    print(overlap.DEFINITIONS)
    if len(shown["step_summary"]):
        print("\nPer step (median over steps; 95% bootstrap CI over steps of this run):")
        print(render(shown["step_summary"], "plain", max_rows=None))
    print("\nExclusive states:")
    print(render(shown["states"], "plain", max_rows=None))
    print("\nTop kernels per type:")
    print(render(shown["top_kernels"], "plain", max_rows=None))


def _print_ranks(df, comm: str | None = None) -> None:
    print("\nRanks:")
    print(render(ranks.rank_summary(df, comm), "plain", max_rows=None))
    print(plain(ranks.slowest(df)["text"]))
    per_name = ranks.rank_name_stats(df, top=10)
    per_name["name"] = per_name["name"].str.slice(0, 50)
    print("\nPer name, median per rank (us), top 10 by total time:")
    print(render(per_name, "plain", max_rows=None))


def _sides(files: list[str]) -> tuple[list[str], list[str]]:
    """``A B`` or ``A0 A1 ... vs B0 B1 ...`` (several ranks a side)."""
    if "vs" in files:
        i = files.index("vs")
        a, b = files[:i], files[i + 1:]
        if not a or not b or "vs" in b:
            raise _Bad("trace diff takes 'A B' or 'A0 A1 ... vs B0 B1 ...' (a file named 'vs' is './vs')")
        return a, b
    if len(files) != 2:
        raise _Bad(f"trace diff takes two files (A B), got {len(files)}; several ranks a side: 'A0 A1 vs B0 B1'; "
                   "a file named 'diff' is './diff'")
    return files[:1], files[1:]


def _diff(args) -> int:
    pa, pb = _sides(args.files[1:])
    (a, meta_a), (b, meta_b) = _load(pa, args, keep_args=False), _load(pb, args, keep_args=False)
    name_a, name_b = " ".join(pa), " ".join(pb)
    try:
        table = diff.diff(a, b, alpha=args.alpha, correction=args.correction)
    except diff.DiffError as exc:
        raise _Bad(f"diff: {meta_a['format']} vs {meta_b['format']}: {exc}") from None
    gpu, gpu_note = None, None
    if overlap.has_gpu_work(a) or overlap.has_gpu_work(b):
        try:
            gpu = diff.gpu_time_diff(a, b, comm=args.comm)
        except diff.DiffError as exc:
            gpu_note = str(exc)
        except overlap.OverlapError as exc:
            raise _Bad(str(exc)) from None
    dropped = {"a": analysis.dropped_events(meta_a), "b": analysis.dropped_events(meta_b)}
    if args.json:
        gpu_doc = ({"error": gpu_note} if gpu_note else None if gpu is None else
                   {"comm": args.comm, **gpu.attrs, "figures": json.loads(gpu.to_json(orient="records"))})
        print(json.dumps({"a": name_a, "b": name_b, "formats": [meta_a["format"], meta_b["format"]],
                          "dropped": dropped, **table.attrs, "gpu_time": gpu_doc,
                          "names": json.loads(table.to_json(orient="records"))}, indent=1))
        return EXIT_OK
    for side, path, meta in (("a", name_a, meta_a), ("b", name_b, meta_b)):
        print(f"{side}: {path} ({meta['format']}; dropped or adjusted events: "
              f"{analysis.dropped_text(dropped[side]) or 'none'})")
    if gpu is not None:
        paired = " (the one GPU of each trace, compared although their rank or device differ)" \
            if gpu.attrs["paired"] else ""
        print(f"\nGPU time, b against a, per rank{paired} (Δ = b - a; medians over steps with 95% bootstrap CIs "
              "over steps where both traces have steps):")
        print(render(diff.gpu_time_display(gpu), "plain", max_rows=None))
    elif gpu_note:
        print(f"\nGPU time: not compared ({plain(gpu_note)})")
    print()
    print(plain(diff.headline(table)))
    shown = diff.display(table).head(args.top)
    print(f"\nTop {len(shown)} names by |Δ total| (times in us; Δ = b - a):")
    print(render(shown, "plain", max_rows=None))
    return EXIT_OK


def console(argv: list[str]) -> int:
    """``python -m workbench trace ...`` without the rest of the CLI's imports (a third of the
    command's time on a small trace): the same guards as :func:`workbench.cli.main` (no control
    or bidi character from a trace reaches the terminal, signals as Ctrl-C, one line when the
    output cannot be written)."""
    def command() -> int:
        try:
            return trace_main(argv)
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return 130
    return guarded(command)


if __name__ == "__main__":
    sys.exit(console(sys.argv[1:]))
