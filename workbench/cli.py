"""The workbench CLI, a contract other tools rely on.

    python -m workbench list
    python -m workbench run STUDY [--set name=value ...] [--quick | --preset NAME] [--precision 2%] [--store PATH] [--json]
                            [--nnodes N --rdzv-endpoint HOST:PORT [--node-rank R] [--rdzv-id ID]]
    python -m workbench runs [--study ID] [--all] [--json]
    python -m workbench tag RUN [TAG ...] [--remove TAG] [--note TEXT]
    python -m workbench delete RUN [RUN ...] [--yes]
    python -m workbench compare RUN_A RUN_B [--json]
    python -m workbench ab STUDY [--set name=value ...] --a name=value ... --b name=value ... [--rounds R] [--json]
    python -m workbench report RUN --format md|issue|html|ipynb -o PATH
    python -m workbench export RUN -o FILE [--format bundle|gbench]
    python -m workbench export RUN -o FOLDER --format attachments   # its traces, one file each
    python -m workbench import FILE [FILE ...]
    python -m workbench notebooks [-o DIR]
    python -m workbench trace FILE [FILE ...] [--json] [--phases] [--chrome OUT.json]
    python -m workbench trace diff A B [--json]

RUN is a run id, a unique prefix of one or ``latest`` (the store's newest run), of the results
store or of a result bundle committed under ``traces/<study>/`` (the ids ``runs --all`` lists),
or the path of a bundle file.

Exit codes: 0 success, 1 the run failed or a check failed, 2 bad input (parameter, file,
store or output path, unknown study or run), 3 the study cannot run on this machine, 130
interrupted (Ctrl-C or SIGTERM). Progress goes to stderr; ``--json`` prints only the record
on stdout, with the analysis's ``verdict``, ``claims`` and ``disturbance`` added. ``list`` imports no study dependencies beyond the study modules (no scipy).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable

# Only what every command needs is imported here: an error line (a typo, an unknown run) comes
# before pandas, the studies and the statistics are imported (half a second or more on a loaded
# 2-core machine; benchmarks/cli.py times it). The rest is imported by the commands that use it.
from .seam import events
from .base import interrupt, outfile, procs
from .presentation import manual
from .results.catalog import Catalog, find_run
from .base.env import REPO_ROOT, STATE_DIR
from .running.launcher import LaunchError, Topology
from .base.names import did_you_mean, seed_title
from .base.outfile import OutputError
from .seam.registry import get, registry
from .results.store import Store, StoreError, read_bundle, to_gbench, write_bundle
from .seam.study import Cancelled, ParamError, StudyUnavailable, validate
from .base.untrusted import UntrustedError, check_attachment_name, guarded, has_surrogates, plain, safe_stem
from .presentation.progress import ProgressBar

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
REPORTS_DIR = STATE_DIR / "reports"


def _err(msg: str) -> None:
    print(f"error: {plain(msg)}", file=sys.stderr)  # one line, no terminal escapes from a bundle


def _open_store(path: str | None, create: bool = True) -> Store:
    """The store; commands that only read pass ``create=False`` (a mistyped path is an error)."""
    return Store(path, create=create) if path else Store(create=create)


def _catalog(args) -> tuple[Catalog, str]:
    """The runs this command can address (:meth:`Catalog.open` of ``--store``)."""
    return Catalog.open(args.store)


def _load_runs(args, *refs: str, catalog: tuple[Catalog, str] | None = None):
    """Runs by id (unique prefix or ``latest``) from the store or the committed bundles under
    ``traces/`` (``catalog``: :func:`_catalog`'s answer, when the caller has it), or by path to
    a result bundle (:func:`find_run`). Prints the reason and returns None when one cannot be
    loaded."""
    opened = [catalog]

    def open_once() -> tuple[Catalog, str]:
        if opened[0] is None:
            opened[0] = _catalog(args)
        return opened[0]

    try:
        return [find_run(ref, open_once) for ref in refs]
    except (StoreError, KeyError) as exc:
        _err(str(exc.args[0] if isinstance(exc, KeyError) else exc))
        return None


def _load_one(args):
    """The run ``args.run`` names (:func:`_load_runs`), or None when it cannot be loaded."""
    runs = _load_runs(args, args.run)
    return runs[0] if runs else None


def _fmt_table(rows: list[list[str]], header: list[str]) -> str:
    """Aligned text for the terminal (cells may come from bundles: no terminal escapes)."""
    import pandas as pd

    from .evidence.tables import render

    return render(pd.DataFrame(rows, columns=header), "plain", max_rows=None)


def summary_text(a) -> str:
    """The ``run`` summary of an analysis: disturbance warnings, verdict, claims, results."""
    from .evidence.tables import render, results_display

    lines = [f"warning: {line}" for line in a.disturbance]
    lines.append(f"verdict: {a.verdict}")
    lines.append(f"levels: {a.levels}")
    if len(a.claims):
        claims = a.claims[["id", "status", "live", "why"]].rename(
            columns={"id": "claim", "status": "here", "live": "live figure (95% CI)"})
        lines += ["", "the seed's claims on this machine:", render(claims, "plain", max_rows=None)]
    lines += ["", render(results_display(a.results), "plain", max_rows=None)]
    lines += [f"error: {e}" for e in a.errors]
    return "\n".join(lines)


# --- commands -------------------------------------------------------------------------------

def cmd_list(args) -> int:
    """The index of the studies (built here, at run time: no page of the repository lists them),
    each with its seed and its page."""
    reg = registry()
    pages = {m.ID: manual.page_name(m) for m in reg.values()}
    if args.json:  # the seed's file name stays in the JSON; people read its title
        print(json.dumps([{"id": m.ID, "title": m.TITLE, "seed": m.SEED, "seed_title": seed_title(m),
                           "summary": m.SEED_SUMMARY, "page": pages[m.ID]} for m in reg.values()], indent=1))
    else:
        rows = [[m.ID, manual.short_title(m), seed_title(m), pages[m.ID]] for m in reg.values()]
        print(_fmt_table(rows, ["study", "name", "seed", "page"]))
    return EXIT_OK


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(_value_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _allowed_text(p) -> str:
    """What a knob takes: its choices, its range, true/false or text."""
    if p.choices:
        return ("any of " if p.multi else "one of ") + ", ".join(map(_value_text, p.choices))
    if p.kind == "bool":
        return "true or false"
    if p.kind in ("int", "float"):
        lo = "" if p.min is None else _value_text(p.min)
        hi = "" if p.max is None else _value_text(p.max)
        span = f"{lo}..{hi}" if lo or hi else "any number"
        return span + (" (a list)" if p.multi else "")
    return "text" + (" (a list)" if p.multi else "")


def knobs_table(study) -> list[dict[str, str]]:
    """A study's knobs as rows: name, default, allowed values, unit, where the page shows it
    (headline, advanced, GPU only) and what it does."""
    space = study.SPACE
    rows = []
    for p in space.params:
        where = "GPU only" if p.name in space.gpu_only else "headline" if p.name in space.headline or not space.headline \
            else "advanced"
        rows.append({"knob": p.name, "default": _value_text(p.default), "allowed": _allowed_text(p), "unit": p.unit,
                     "shown": where, "what it does": p.help})
    return rows


def knobs_text(study) -> str:
    """``knobs STUDY`` (and ``run STUDY --help``): the knobs table, then each preset with its
    purpose and the knobs it sets."""
    from .evidence.tables import render
    import pandas as pd

    table = pd.DataFrame(knobs_table(study))
    table["what it does"] = table["what it does"].map(lambda t: textwrap.fill(t, 70))
    table["allowed"] = table["allowed"].map(lambda t: textwrap.fill(t, 36))
    table["default"] = table["default"].map(lambda t: textwrap.fill(t.replace(",", ", "), 30).replace(", ", ","))
    lines = [render(table, "plain", max_rows=None), "", "presets (--preset NAME):"]
    for name, values in study.SPACE.presets.items():
        purpose = study.SPACE.purposes.get(name, "")
        sets = " ".join(f"{k}={_value_text(v)}" for k, v in values.items())
        lines.append(f"  {name}: {purpose}{' ' if purpose else ''}({sets or 'the defaults'})")
    return "\n".join(lines)


def cmd_knobs(args) -> int:
    """``knobs STUDY``: what ``--set`` takes."""
    study = _study(args.study)
    if study is None:
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps({"study": study.ID, "knobs": knobs_table(study),
                          "presets": {k: {"purpose": study.SPACE.purposes.get(k, ""), "sets": v}
                                      for k, v in study.SPACE.presets.items()}}, default=str, indent=1))
    else:
        print(f"{study.ID}: {study.TITLE}\n")
        print(knobs_text(study))
        print(f"\nrun it: python -m workbench run {study.ID} --preset smoke --set NAME=VALUE")
    return EXIT_OK


def _help_study(argv: list[str]):
    """The study of ``run STUDY --help`` (None where argv is not that, or names no study)."""
    if "-h" not in argv and "--help" not in argv:
        return None
    words = [w for w in argv if not w.startswith("-")]
    if len(words) < 2 or words[0] != "run":
        return None
    try:
        return get(words[1])
    except KeyError:
        return None


@contextlib.contextmanager
def _topology_flags(args):
    """The node flags of ``run`` as the ``WORKBENCH_*`` variables the launcher reads, for this
    run only; a topology that cannot work raises :class:`ParamError`."""
    flags = {"WORKBENCH_NNODES": args.nnodes, "WORKBENCH_RDZV_ENDPOINT": args.rdzv_endpoint,
             "WORKBENCH_NODE_RANK": args.node_rank, "WORKBENCH_RDZV_ID": args.rdzv_id}
    given = {k: str(v) for k, v in flags.items() if v is not None}
    saved = {k: os.environ.get(k) for k in given}
    os.environ.update(given)
    try:
        if given:
            try:
                Topology.from_env()
            except LaunchError as exc:
                raise ParamError("nnodes", str(exc)) from None
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _study(study_id: str):
    """The study module, or None with the reason (unknown study, the known ones) on stderr."""
    try:
        return get(study_id)
    except KeyError as exc:
        _err(exc.args[0])
        return None


def _measuring(study, close: Callable[[], None], kept: str, interrupted: Callable[[BaseException], str],
               measure: Callable[[], Any]) -> tuple[Any, int]:
    """``(measure(), EXIT_OK)``, or ``(None, exit code)`` with the reason on stderr (after
    ``close()`` ends the progress bar). ``kept`` names what a failed run keeps (its finished
    points, or rounds); ``interrupted(exc)`` says what an interrupted one kept."""
    from .running import runner

    try:
        result = measure()
    except (ParamError, runner.LockError) as exc:
        code, msg = EXIT_BAD_INPUT, str(exc)
    except StudyUnavailable as exc:
        code, msg = EXIT_UNAVAILABLE, runner.failure_text(study, exc, kept)
    except (KeyboardInterrupt, Cancelled) as exc:
        code, msg = EXIT_INTERRUPTED, "; ".join(filter(None, [interrupted(exc), runner.unfinished_text(exc, kept)]))
    except StoreError as exc:  # the store cannot take the run (a full disk): before it started, or mid-way
        code, msg = EXIT_BAD_INPUT, runner.failure_text(study, exc, kept)
    except Exception as exc:  # the study failed: stored as failed with its error, once a run was stored
        code, msg = EXIT_FAILED, runner.failure_text(study, exc, kept)
    else:
        close()
        return result, EXIT_OK
    close()
    _err(msg)
    return None, code


def _deprecations(study, values: dict) -> None:
    """One line on stderr per parameter named the old way (``--set seed=`` of an old reproduce
    command still runs)."""
    for line in study.SPACE.deprecated(values):
        print(f"deprecated: {line}", file=sys.stderr)


def cmd_run(args) -> int:
    try:
        with _topology_flags(args):
            return _repeat_runs(args) if args.repeat_runs != 1 else _run(args)
    except ParamError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT


#: the most runs one --repeat-runs group may have
MAX_REPEAT_RUNS = 50


def _repeat_runs(args) -> int:
    """``run --repeat-runs N``: the same command N times, each in a fresh process (its own
    interpreter, thread pools, allocator state and placement: pyperf's worker processes), as
    one run group; then each derived number's figure per run, the interval across runs and the
    claims judged across runs (:mod:`workbench.reading.across`)."""
    if not 2 <= args.repeat_runs <= MAX_REPEAT_RUNS:
        _err(f"--repeat-runs: {args.repeat_runs} is outside 2..{MAX_REPEAT_RUNS} (1 is a plain run)")
        return EXIT_BAD_INPUT
    if args.json or args.progress_file:
        _err("--repeat-runs prints the across-run view; it does not take --json or --progress-file")
        return EXIT_BAD_INPUT
    if _prepared(args) is None:  # the children's checks, once, before any of them starts
        return EXIT_BAD_INPUT
    from .reading import across
    from .reading.analysis import analyse

    group = secrets.token_hex(4)
    base = [a for i, a in enumerate(args.argv) if not a.startswith("--repeat-runs")
            and not (i and args.argv[i - 1] == "--repeat-runs")]
    ids = []
    for i in range(args.repeat_runs):
        print(f"run {i + 1} of {args.repeat_runs} (group {group}), in a fresh process", flush=True)
        code, out = _child_run([sys.executable, "-m", "workbench", *base, "--json", "--run-group",
                                f"{group}:{i + 1}/{args.repeat_runs}"])
        if code not in (EXIT_OK, EXIT_FAILED):  # the child said why on stderr
            kept = f"; the {len(ids)} run(s) before it are kept ({', '.join(ids)})" if ids else ""
            _err(f"the group stopped at run {i + 1} of {args.repeat_runs} (exit status {code}){kept}")
            return code
        ids.append(json.loads(out)["run_id"])
    store = _open_store(args.store, create=False)
    analyses = [analyse(store.load(run_id)) for run_id in ids]
    print(plain_block(across.markdown(across.summary(analyses))))
    return EXIT_OK


def _prepared(args) -> tuple | None:
    """``(study, values, preset, precision, store)`` of ``run``, every argument checked before
    anything is made or measured (bad input stores nothing); None with the reason on stderr."""
    study = _study(args.study)
    if study is None:
        return None
    try:
        values = study.SPACE.parse_sets(args.set or [])
        if not args.run_group:  # said once, by the command the user typed
            _deprecations(study, values)
        preset = "quick" if args.quick else args.preset
        validate(study, values, preset=preset)
        from .running import runner

        precision = runner.parse_precision(args.precision, args.precision_cap)
        runner.stall_limit_s()  # a bad $WORKBENCH_STALL_S, before the store is made
        store = _open_store(args.store)
        store.check_writable()  # before the machine is taken and anything is measured
    except (ParamError, StoreError) as exc:
        _err(str(exc))
        return None
    return study, values, preset, precision, store


def _run(args) -> int:
    prepared = _prepared(args)
    if prepared is None:
        return EXIT_BAD_INPUT
    study, values, preset, precision, store = prepared
    from .running import runner

    # The app reads the event stream (--progress-file); a terminal gets the bar. stderr then
    # carries only what went wrong.
    emitter = events.Emitter(args.progress_file) if args.progress_file else None
    bar = ProgressBar() if emitter is None else None
    rec, code = _measuring(study, bar.close if bar else (lambda: None), "points",
                           lambda exc: runner.interrupted_text(store, getattr(exc, "run_id", None)),
                           lambda: runner.execute(study, values, store, preset=preset, progress=bar, events=emitter,
                                                  precision=precision, precision_cap_s=args.precision_cap,
                                                  run_group=_run_group(args.run_group)))
    if rec is None:
        return code
    from .reading.analysis import analyse, json_fields

    a = analyse(rec, study)
    if args.json:
        print(json.dumps(rec.to_json() | json_fields(a), default=str))
    else:
        print(f"run {rec.run_id} ({rec.status}) stored in {store.path}")
        print(summary_text(a))
        for warning in rec.outputs.get("warnings", []) if isinstance(rec.outputs, dict) else []:
            print(f"warning: {plain(warning)}")
        print(f"reproduce: {rec.reproduce}")
    return EXIT_OK if all(v.correct for v in rec.variants) else EXIT_FAILED


#: seconds an interrupted child run may take to store what it kept (a few; more under load)
CHILD_STOP_S = 30.0


def _child_run(cmd: list[str]) -> tuple[int, str]:
    """(exit status, stdout) of a CLI run in a child process. The child has a session of its
    own, so an interrupt reaches it once, from here: a Ctrl-C or SIGTERM recorded while it runs
    is passed on as one SIGINT (the child stores its run as interrupted), the child waited for,
    and the interrupt raised. It gets SIGTERM should this process die first."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(procs.bound(cmd, signal.SIGTERM), stdout=out, text=True, start_new_session=True)
        try:
            code = procs.wait(proc)
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(CHILD_STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
        out.seek(0)
        return code, out.read()


def _run_group(text: str | None) -> dict | None:
    """``--run-group ID:i/N`` as the record's ``outputs["run_group"]``."""
    if not text:
        return None
    gid, _, pos = text.partition(":")
    index, _, runs = pos.partition("/")
    return {"id": gid, "index": int(index), "runs": int(runs)}


def cmd_readme(args) -> int:
    """``readme``: every committed result README's generated blocks against what the tool prints
    today (exit 1 and the blocks that differ), or ``--refresh`` them (:mod:`workbench.reading.readme`)."""
    from .reading import readme

    paths = readme.readmes(REPO_ROOT)
    if args.study:
        paths = [p for p in paths if p.parent.name == safe_stem(args.study)]
        if not paths:
            _err(f"no generated blocks in traces/{safe_stem(args.study)}/README.md")
            return EXIT_BAD_INPUT
    stale = 0
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            bundles = readme.Bundles(path.parent)
            if args.refresh:
                new = readme.refresh(text, bundles)
                if new != text:
                    path.write_text(new, encoding="utf-8")
                    print(f"{path.relative_to(REPO_ROOT)}: refreshed")
                continue
            for marker in readme.differences(text, bundles):
                stale += 1
                print(f"{path.relative_to(REPO_ROOT)}: differs from the tool: {marker}")
        except readme.BlockError as exc:
            _err(f"{path.relative_to(REPO_ROOT)}: {exc}")
            return EXIT_BAD_INPUT
    if not args.refresh and not stale:
        print(f"{len(paths)} README(s): every generated block is what the tool prints today")
    return EXIT_FAILED if stale else EXIT_OK


def cmd_runs(args) -> int:
    try:
        if args.all:
            catalog, _ = _catalog(args)
        else:
            catalog = Catalog(_open_store(args.store, create=False))
        headers = catalog.headers(study=args.study, committed=args.all)
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps([h.to_json() for h in headers], default=str))
        return EXIT_OK
    rows = [[h.run_id, h.study, h.label or "-", h.origin, h.machine, h.when(), h.status, str(h.variants),
             str(h.failed_checks), " ".join(h.tags), h.note] for h in headers]
    print(_fmt_table(rows, ["run", "study", "label", "origin", "machine", "created", "status", "variants",
                            "failed checks", "tags", "note"]))
    return EXIT_OK


def cmd_delete(args) -> int:
    """Delete stored runs after a confirmation (``--yes`` skips it; without a terminal it is required)."""
    try:
        catalog = Catalog(_open_store(args.store, create=False))
        headers = [catalog.header(ref) for ref in args.runs]
    except (StoreError, KeyError) as exc:
        _err(str(exc.args[0] if isinstance(exc, KeyError) else exc))
        return EXIT_BAD_INPUT
    committed = [h.run_id for h in headers if h.origin == "committed"]
    if committed:
        _err(f"{', '.join(committed)}: a committed bundle under traces/ is part of the checkout; remove its file "
             "with git instead")
        return EXIT_BAD_INPUT
    for h in headers:
        print(f"{h.run_id}: {plain(h.study)}, {plain(h.title())}, {h.variants} points")
    if not args.yes:
        if not sys.stdin.isatty():
            _err("deleting needs a confirmation: run it in a terminal, or add --yes")
            return EXIT_BAD_INPUT
        if input(f"Delete {len(headers)} run(s) from {catalog.store.path}? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return EXIT_OK
    try:
        for h in headers:
            catalog.store.delete(h.run_id)
            print(f"deleted {h.run_id}")
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    return EXIT_OK


def cmd_tag(args) -> int:
    """Add or remove tags and set the note of a run (stored or committed; kept in the store)."""
    try:
        catalog, _ = _catalog(args)
        if catalog.store is None:
            catalog = Catalog(_open_store(args.store))  # tags live in the store: make it
        catalog.store.check_writable()
        run_id, _ = catalog.resolve(args.run)
        got = catalog.store.annotate(run_id, add=args.tags, remove=args.remove or [], note=args.note)
    except (StoreError, KeyError) as exc:
        _err(str(exc.args[0] if isinstance(exc, KeyError) else exc))
        return EXIT_BAD_INPUT
    print(f"{run_id}: tags {' '.join(got['tags']) or '(none)'}; note: {plain(got['note']) or '(none)'}")
    return EXIT_OK


def _print_comparison(cmp: dict, fmt: str, extra: dict | None = None, threshold: float | None = None) -> None:
    """A comparison on stdout: ``table`` (one aligned table, then a line each for what
    differs, the warnings and the gate), ``md`` (GitHub Markdown) or ``json``."""
    from .reading import comparison as compare

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


def plain_block(text: str) -> str:
    """Multi-line text for the terminal: each line through :func:`plain` (no escape sequences)."""
    return "\n".join(plain(line) for line in text.splitlines())


def _compare_format(args) -> str:
    return "json" if args.json else args.format


def cmd_compare(args) -> int:
    """``compare A B``: B against A as one terminal table (``--format md``: Markdown; ``--json``);
    ``--fail-above 2%``: exit 1 when a variant is clearly slower by more than 2%
    (:func:`workbench.reading.comparison.regressions`)."""
    threshold = None
    if args.fail_above is not None:
        from .reading.comparison import parse_threshold

        try:
            threshold = parse_threshold(args.fail_above)
        except ValueError as exc:
            _err(f"--fail-above: {exc}")
            return EXIT_BAD_INPUT
    try:
        catalog, missing = _catalog(args)
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    runs = _load_runs(args, args.run_a, args.run_b, catalog=(catalog, missing))
    if runs is None:
        return EXIT_BAD_INPUT
    a, b = runs
    if a.run_id == b.run_id:  # said before the statistics are imported (the comparison refuses it too)
        _err(f"A and B are the same run ({a.run_id}): a run compared with itself shows no change by construction; "
             "give two runs (python -m workbench runs --all lists them)")
        return EXIT_BAD_INPUT
    from .reading import comparison as compare

    try:
        # A/A candidates: the store's runs and the committed bundles with A's or B's configuration
        cmp = compare.compare_runs(a, b, compare.history_in(a, b, catalog))
    except compare.CompareError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    _print_comparison(cmp, _compare_format(args), threshold=threshold)
    if threshold is not None and compare.regressions(cmp, threshold):
        return EXIT_FAILED
    return EXIT_OK


def cmd_ab(args) -> int:
    from .reading import comparison as compare
    from .running import runner
    from .running.ab_session import execute_ab
    from .running.ab_session import interrupted_text as ab_interrupted_text

    study = _study(args.study)
    if study is None:
        return EXIT_BAD_INPUT
    preset = "quick" if args.quick else args.preset
    try:
        common = study.SPACE.parse_sets(args.set or [])
        values = {side: {**common, **study.SPACE.parse_sets(sets or [])} for side, sets in (("A", args.a), ("B", args.b))}
        _deprecations(study, {k: v for side in values.values() for k, v in side.items()})
        for side_values in values.values():
            validate(study, side_values, preset=preset)  # before the store is touched
        precision = runner.parse_precision(args.precision, args.precision_cap)
        runner.stall_limit_s()  # a bad $WORKBENCH_STALL_S, before the store is made
        store = _open_store(args.store)
        store.check_writable()
    except (ParamError, StoreError) as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    bar = ProgressBar()
    pair, code = _measuring(study, bar.close, "rounds", ab_interrupted_text, lambda: execute_ab(
        study, values["A"], values["B"], store, rounds=args.rounds, preset=preset, progress=bar, precision=precision,
        precision_cap_s=args.precision_cap))
    if pair is None:
        return code
    a, b = pair
    if not args.json:
        print(f"runs {a.run_id} (A) and {b.run_id} (B) stored in {store.path}")
    _print_comparison(compare.compare_runs(a, b, compare.history(a, b, store)), "json" if args.json else "table",
                      {"runs": [a.run_id, b.run_id]})
    return EXIT_OK if all(v.correct for v in a.variants + b.variants) else EXIT_FAILED


def cmd_report(args) -> int:
    rec = _load_one(args)
    if rec is None:
        return EXIT_BAD_INPUT
    from .presentation import report

    # Without -o, reports go under .workbench/reports/, not into whatever folder the shell is in;
    # the run id (from a bundle, perhaps) only names the files through a sanitised stem.
    stem = safe_stem(rec.run_id)
    suffix = {"issue": "issue.md"}.get(args.format, args.format)
    out = Path(args.output) if args.output else REPORTS_DIR / stem / f"{stem}.{suffix}"
    try:
        path = report.write_report(rec, args.format, out, full=args.full)
    except OutputError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    if args.format != "issue" and report.png_blocked():  # the report says it too, where its charts would be
        print(f"note: {report.png_blocked()}", file=sys.stderr)
    print(path)
    return EXIT_OK


def cmd_export(args) -> int:
    rec = _load_one(args)
    if rec is None:
        return EXIT_BAD_INPUT
    try:
        if args.format == "attachments":
            return _export_attachments(rec, Path(args.output))
        if args.format == "gbench":
            out = outfile.write(args.output, json.dumps(to_gbench(rec), indent=1))
        else:
            out = write_bundle(rec, args.output)
    except OutputError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    print(out)
    return EXIT_OK


def _export_attachments(rec, folder: Path) -> int:
    """Each attachment of the run (captures, traces) as a file in ``folder``, named as attached;
    a name that is not a plain file name (a bundle is untrusted) is refused, the others kept."""
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"cannot write {folder}: it is a file (give a folder for --format attachments)")
    status = EXIT_OK
    if not rec.attachments:
        print(f"run {rec.run_id} has no attachments")
    for name, _kind, blob in rec.attachments:
        try:
            print(outfile.write(folder / check_attachment_name(name), blob))
        except UntrustedError as exc:
            _err(str(exc))
            status = EXIT_BAD_INPUT
    return status


def cmd_import(args) -> int:
    try:
        store = _open_store(args.store)
        store.check_writable()
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    status = EXIT_OK
    for f in args.files:
        try:
            rec = read_bundle(f)
            if store.import_run(rec):  # one transaction: all of the run, or nothing
                print(f"{f}: imported run {rec.run_id} ({rec.study}, {plain(rec.env.get('fingerprint', '?'))})")
            else:
                print(f"{f}: run {rec.run_id} is already in the store; skipped")
        except StoreError as exc:
            _err(f"{f}: {exc}")
            status = EXIT_BAD_INPUT
    return status


def cmd_notebooks(args) -> int:
    from .presentation import report

    try:
        paths = report.write_study_notebooks(args.output)
    except OSError as exc:
        _err(f"cannot write notebooks into {args.output}: {exc.strerror or exc}")
        return EXIT_BAD_INPUT
    for path in paths:
        print(path)
    return EXIT_OK


def cmd_trace(args) -> int:
    from .traces import cli as trace_cli

    return trace_cli.run(args)


def _precision_arguments(s: argparse.ArgumentParser) -> None:
    from .running.runner import DEFAULT_PRECISION_CAP_S

    s.add_argument("--precision", metavar="PCT", help="repeat each variant until its median's 95%% CI half-width is "
                                                      "within PCT of the median (e.g. 2%%), or until --precision-cap")
    s.add_argument("--precision-cap", type=float, default=DEFAULT_PRECISION_CAP_S, metavar="S",
                   help="seconds the whole run may spend on --precision (default %(default)g)")


def _list_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--json", action="store_true")


def _run_arguments(s: argparse.ArgumentParser, argv: list[str] | None = None) -> None:
    s.add_argument("study", help="a study id (python -m workbench list); 'run STUDY --help' lists its knobs")
    s.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="parameter value; comma-separated values sweep a list parameter "
                        "(python -m workbench knobs STUDY lists them)")
    presets = s.add_mutually_exclusive_group()
    presets.add_argument("--quick", action="store_true", help="the study's quick preset (same as --preset quick)")
    presets.add_argument("--preset", help="start from one of the study's presets (smoke, quick, or its own, e.g. "
                                          "mc2-split's cpu); --set values override it")
    s.add_argument("--json", action="store_true", help="print only the run record (JSON) on stdout")
    s.add_argument("--progress-file", help=argparse.SUPPRESS)  # JSON-lines progress for the app
    s.add_argument("--repeat-runs", type=int, default=1, metavar="N",
                   help="run it N times, each in a fresh process (one run group), then judge its derived numbers and "
                        "claims across the runs (the run-to-run level: docs/reading-a-run.md)")
    s.add_argument("--run-group", help=argparse.SUPPRESS)  # set by --repeat-runs on each of its runs
    nodes = s.add_argument_group("several nodes (studies that start torchrun; docs/cli.md: runs that span nodes)",
                                 "default: the WORKBENCH_NNODES, WORKBENCH_NODE_RANK, WORKBENCH_RDZV_ENDPOINT and "
                                 "WORKBENCH_RDZV_ID variables; every other node runs `python -m workbench.running.launcher "
                                 "agent`")
    nodes.add_argument("--nnodes", type=int, help="nodes the run spans (world_size counts the ranks of all of them)")
    nodes.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="where the nodes meet (torchrun's rendezvous)")
    nodes.add_argument("--node-rank", type=int, help="this node's rank for a static rendezvous (0 hosts the store); "
                                                     "leave out for elastic c10d")
    nodes.add_argument("--rdzv-id", help="names an elastic rendezvous (default: workbench)")
    _precision_arguments(s)
    # `run STUDY --help`: the study's knobs under the options
    named = _help_study(argv or [])
    if named is not None:
        s.epilog = f"{named.ID}'s knobs (--set NAME=VALUE):\n\n{knobs_text(named)}"
        s.formatter_class = argparse.RawDescriptionHelpFormatter


def _runs_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--study")
    s.add_argument("--all", action="store_true", help="also the result bundles committed under traces/<study>/")
    s.add_argument("--json", action="store_true")


def _delete_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("runs", nargs="+", metavar="RUN")
    s.add_argument("--yes", action="store_true", help="do not ask")


def _tag_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("run")
    s.add_argument("tags", nargs="*", metavar="TAG", help="tags to add (plain words)")
    s.add_argument("--remove", action="append", metavar="TAG", help="a tag to remove")
    s.add_argument("--note", help="the run's note ('' clears it)")


def _compare_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("run_a", help="baseline: run id, unique prefix, latest, a bundle file or a committed bundle's id")
    s.add_argument("run_b", help="the run judged against A (not A itself)")
    s.add_argument("--format", choices=["table", "md", "json"], default="table",
                   help="table: one aligned table for the terminal (default); md: GitHub Markdown with the "
                        "parameter and environment diffs; json: the comparison as data")
    s.add_argument("--json", action="store_true", help="same as --format json")
    s.add_argument("--fail-above", metavar="PCT",
                   help="regression gate: exit 1 when a variant is clearly slower than A by more than PCT (2%% or "
                        "0.02): the comparison calls it slower and its B/A CI lies above 1 + PCT")


def _readme_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--refresh", action="store_true", help="rewrite every generated block from the bundles")
    s.add_argument("--study", help="only traces/<study>/README.md")


def _ab_arguments(s: argparse.ArgumentParser) -> None:
    from .running.ab_session import DEFAULT_ROUNDS

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
    _precision_arguments(s)


def _report_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("run")
    s.add_argument("--format", choices=["md", "issue", "html", "ipynb"], default="md")
    s.add_argument("--full", action="store_true",
                   help="issue format: every table, chart and note that fits in one issue (default: about two screens)")
    s.add_argument("-o", "--output")


def _export_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("run")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--format", choices=["bundle", "gbench", "attachments"], default="bundle",
                   help="attachments: the run's attached traces and captures, one file each, into the folder -o")


def _import_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("files", nargs="+")


def _notebooks_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("-o", "--output", default="notebooks")


def _knobs_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("study", help="a study id (python -m workbench list)")
    s.add_argument("--json", action="store_true", help="the knobs and presets as JSON")


def _trace_arguments(s: argparse.ArgumentParser) -> None:
    from .traces import cli as trace_cli

    trace_cli.add_arguments(s)


#: the commands: name -> (function, help, takes --store, its arguments)
COMMANDS: dict[str, tuple[Callable, str, bool, Callable]] = {
    "list": (cmd_list, "list the studies with their seed", True, _list_arguments),
    "knobs": (cmd_knobs, "a study's knobs: ranges, defaults, units, presets", False, _knobs_arguments),
    "run": (cmd_run, "run a study and store the result", True, _run_arguments),
    "runs": (cmd_runs, "list stored runs (--all: and the bundles committed under traces/)", True, _runs_arguments),
    "delete": (cmd_delete, "delete stored runs (asks first)", True, _delete_arguments),
    "tag": (cmd_tag, "tag a run and set its note (stored or committed run; kept in the store)", True, _tag_arguments),
    "compare": (cmd_compare, "B against A as one table: per variant the medians, B/A with its 95% CI and a verdict "
                             "(--fail-above PCT: a regression gate)", True, _compare_arguments),
    "readme": (cmd_readme, "check (or --refresh) the generated tables of the committed result READMEs "
                           "(traces/<study>/README.md) against the bundles", False, _readme_arguments),
    "ab": (cmd_ab, "interleaved A/B session: rounds of two parameter sets alternate in one session, stored as two "
                   "linked runs, then compared", True, _ab_arguments),
    "report": (cmd_report, "a run's report: md (full, PNG charts beside it), issue (one GitHub issue body, nothing "
                           "attached), html (one self-contained file), ipynb (notebook and its bundle, executed)", True,
               _report_arguments),
    "export": (cmd_export, "export a run as a result bundle (JSON) or google-benchmark JSON, or its attached traces as "
                           "files", True, _export_arguments),
    "import": (cmd_import, "import result bundles into the store", True, _import_arguments),
    "notebooks": (cmd_notebooks, "generate one study notebook per study", False, _notebooks_arguments),
    "trace": (cmd_trace, "summarise traces (several files: ranks of one run) or 'trace diff A B'", False,
              _trace_arguments),
}


def _chosen(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option or --store's value)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--store":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. With ``argv`` only the command it names gets its arguments (and the
    imports they need: the trace command's parser imports pandas), so a mistyped run id or
    study is answered before the heavy imports; without, every command's."""
    p = argparse.ArgumentParser(prog="python -m workbench", description="Perf Study Workbench")
    p.add_argument("--store", help="results store (SQLite file); default $WORKBENCH_STORE or .workbench/results.sqlite")
    sub = p.add_subparsers(dest="command", required=True)
    chosen = _chosen(argv) if argv is not None else None
    for name, (fn, help_text, store, arguments) in COMMANDS.items():
        s = sub.add_parser(name, help=help_text, description=help_text)
        if store:  # also after the command; SUPPRESS keeps the top-level value when absent
            s.add_argument("--store", default=argparse.SUPPRESS, help="results store (SQLite file)")
        s.set_defaults(fn=fn)
        if argv is None or name == chosen:
            arguments(s, argv) if arguments is _run_arguments else arguments(s)
    return p


#: arguments that are paths: a file name need not be UTF-8 (Linux names are bytes)
_PATH_ARGUMENTS = ("store", "output", "files", "progress_file", "chrome")


def _undecodable(args: argparse.Namespace) -> str | None:
    """The first argument (as its option reads) holding bytes that are not UTF-8, paths aside."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if name not in _PATH_ARGUMENTS and any(isinstance(v, str) and has_surrogates(v) for v in values):
            return name.replace("_", "-")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code. Standard output and error pass through
    :class:`~workbench.base.untrusted.TerminalStream` (no control or bidi character reaches the
    terminal), and a failure to write them is one line on stderr and exit 2 (``| head``
    closing the pipe early: exit 0, quietly): :func:`workbench.base.untrusted.guarded`.

    SIGTERM and SIGHUP (a closed terminal, ``kill PID``) act as Ctrl-C: a run stores its
    finished points as interrupted and its child processes are killed, instead of the CLI
    dying with the run left running. SIGINT is set too: a process started in the background
    inherits it ignored, and the app cancels with it. The signal is recorded and acted on at
    the next checkpoint (workbench.base.interrupt); a second one at once. Set before parsing, so one
    that comes meanwhile is not lost either (python -m workbench sets them before the CLI's
    imports: workbench.__main__)."""
    return guarded(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            return EXIT_BAD_INPUT if exc.code else EXIT_OK
        bad = _undecodable(args)
        if bad:
            _err(f"argument {bad}: not valid UTF-8 text (undecodable bytes); nothing was done")
            return EXIT_BAD_INPUT
        args.argv = argv  # --repeat-runs starts the same command again in fresh processes
        interrupt.check()  # one that came while the CLI started
        code = args.fn(args)
        interrupt.check()  # one that came after the command's last checkpoint
        return code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
