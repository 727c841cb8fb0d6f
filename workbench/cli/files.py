"""A run out to files and back: ``report``, ``export``, ``import``; and ``notebooks``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..base import outfile
from ..base.env import STATE_DIR
from ..base.outfile import OutputError
from ..results.store import StoreError, read_bundle, to_gbench, write_bundle
from ..base.untrusted import UntrustedError, check_attachment_name, plain, safe_stem
from .base import EXIT_BAD_INPUT, EXIT_OK, Command, err, load_one, open_store

REPORTS_DIR = STATE_DIR / "reports"


class Report(Command):
    name = "report"
    help = ("a run's report: md (full, PNG charts beside it), issue (one GitHub issue body, nothing "
            "attached), html (one self-contained file), ipynb (notebook and its bundle, executed)")

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("run")
        s.add_argument("--format", choices=["md", "issue", "html", "ipynb"], default="md")
        s.add_argument("--full", action="store_true",
                       help="issue format: every table, chart and note that fits in one issue (default: about two "
                            "screens)")
        s.add_argument("-o", "--output")

    @classmethod
    def run(cls, args) -> int:
        rec = load_one(args)
        if rec is None:
            return EXIT_BAD_INPUT
        from ..presentation import report

        # Without -o, reports go under .workbench/reports/, not into whatever folder the shell is in;
        # the run id (from a bundle, perhaps) only names the files through a sanitised stem.
        stem = safe_stem(rec.run_id)
        suffix = {"issue": "issue.md"}.get(args.format, args.format)
        out = Path(args.output) if args.output else REPORTS_DIR / stem / f"{stem}.{suffix}"
        try:
            path = report.write_report(rec, args.format, out, full=args.full)
        except OutputError as exc:
            err(str(exc))
            return EXIT_BAD_INPUT
        if args.format != "issue" and report.png_blocked():  # the report says it too, where its charts would be
            print(f"note: {report.png_blocked()}", file=sys.stderr)
        print(path)
        return EXIT_OK


class Export(Command):
    name = "export"
    help = "export a run as a result bundle (JSON) or google-benchmark JSON, or its attached traces as files"

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("run")
        s.add_argument("-o", "--output", required=True)
        s.add_argument("--format", choices=["bundle", "gbench", "attachments"], default="bundle",
                       help="attachments: the run's attached traces and captures, one file each, into the folder -o")

    @classmethod
    def run(cls, args) -> int:
        rec = load_one(args)
        if rec is None:
            return EXIT_BAD_INPUT
        try:
            if args.format == "attachments":
                return cls._attachments(rec, Path(args.output))
            if args.format == "gbench":
                out = outfile.write(args.output, json.dumps(to_gbench(rec), indent=1))
            else:
                out = write_bundle(rec, args.output)
        except OutputError as exc:
            err(str(exc))
            return EXIT_BAD_INPUT
        print(out)
        return EXIT_OK

    @staticmethod
    def _attachments(rec, folder: Path) -> int:
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
                err(str(exc))
                status = EXIT_BAD_INPUT
        return status


class Import(Command):
    name, help = "import", "import result bundles into the store"

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("files", nargs="+")

    @classmethod
    def run(cls, args) -> int:
        try:
            store = open_store(args.store)
            store.check_writable()
        except StoreError as exc:
            err(str(exc))
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
                err(f"{f}: {exc}")
                status = EXIT_BAD_INPUT
        return status


class Notebooks(Command):
    name, help, takes_store = "notebooks", "generate one study notebook per study", False

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("-o", "--output", default="notebooks")

    @classmethod
    def run(cls, args) -> int:
        from ..presentation import report

        try:
            paths = report.write_study_notebooks(args.output)
        except OSError as exc:
            err(f"cannot write notebooks into {args.output}: {exc.strerror or exc}")
            return EXIT_BAD_INPUT
        for path in paths:
            print(path)
        return EXIT_OK
