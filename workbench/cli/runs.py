"""The store's runs: ``runs`` lists them, ``delete`` removes them, ``tag`` tags and notes one."""

from __future__ import annotations

import json
import sys

from ..results.catalog import Catalog
from ..results.store import StoreError
from ..base.untrusted import plain
from .base import EXIT_BAD_INPUT, EXIT_OK, Command, catalog, err, fmt_table, open_store


class Runs(Command):
    name, help = "runs", "list stored runs (--all: and the bundles committed under traces/)"

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("--study")
        s.add_argument("--all", action="store_true", help="also the result bundles committed under traces/<study>/")
        s.add_argument("--json", action="store_true")

    @classmethod
    def run(cls, args) -> int:
        try:
            runs = catalog(args)[0] if args.all else Catalog(open_store(args.store, create=False))
            headers = runs.headers(study=args.study, committed=args.all)
        except StoreError as exc:
            err(str(exc))
            return EXIT_BAD_INPUT
        if args.json:
            print(json.dumps([h.to_json() for h in headers], default=str))
            return EXIT_OK
        rows = [[h.run_id, h.study, h.label or "-", h.origin, h.machine, h.when(), h.status, str(h.variants),
                 str(h.failed_checks), " ".join(h.tags), h.note] for h in headers]
        print(fmt_table(rows, ["run", "study", "label", "origin", "machine", "created", "status", "variants",
                               "failed checks", "tags", "note"]))
        return EXIT_OK


class Delete(Command):
    """Delete stored runs after a confirmation (``--yes`` skips it; without a terminal it is required)."""

    name, help = "delete", "delete stored runs (asks first)"

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("runs", nargs="+", metavar="RUN")
        s.add_argument("--yes", action="store_true", help="do not ask")

    @classmethod
    def run(cls, args) -> int:
        try:
            runs = Catalog(open_store(args.store, create=False))
            headers = [runs.header(ref) for ref in args.runs]
        except (StoreError, KeyError) as exc:
            err(str(exc.args[0] if isinstance(exc, KeyError) else exc))
            return EXIT_BAD_INPUT
        committed = [h.run_id for h in headers if h.origin == "committed"]
        if committed:
            err(f"{', '.join(committed)}: a committed bundle under traces/ is part of the checkout; remove its file "
                "with git instead")
            return EXIT_BAD_INPUT
        for h in headers:
            print(f"{h.run_id}: {plain(h.study)}, {plain(h.title())}, {h.variants} points")
        if not args.yes:
            if not sys.stdin.isatty():
                err("deleting needs a confirmation: run it in a terminal, or add --yes")
                return EXIT_BAD_INPUT
            if input(f"Delete {len(headers)} run(s) from {runs.store.path}? [y/N] ").strip().lower() not in ("y", "yes"):
                print("nothing deleted")
                return EXIT_OK
        try:
            for h in headers:
                runs.store.delete(h.run_id)
                print(f"deleted {h.run_id}")
        except StoreError as exc:
            err(str(exc))
            return EXIT_BAD_INPUT
        return EXIT_OK


class Tag(Command):
    """Add or remove tags and set the note of a run (stored or committed; kept in the store)."""

    name, help = "tag", "tag a run and set its note (stored or committed run; kept in the store)"

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("run")
        s.add_argument("tags", nargs="*", metavar="TAG", help="tags to add (plain words)")
        s.add_argument("--remove", action="append", metavar="TAG", help="a tag to remove")
        s.add_argument("--note", help="the run's note ('' clears it)")

    @classmethod
    def run(cls, args) -> int:
        try:
            runs, _ = catalog(args)
            if runs.store is None:
                runs = Catalog(open_store(args.store))  # tags live in the store: make it
            runs.store.check_writable()
            run_id, _ = runs.resolve(args.run)
            got = runs.store.annotate(run_id, add=args.tags, remove=args.remove or [], note=args.note)
        except (StoreError, KeyError) as exc:
            err(str(exc.args[0] if isinstance(exc, KeyError) else exc))
            return EXIT_BAD_INPUT
        print(f"{run_id}: tags {' '.join(got['tags']) or '(none)'}; note: {plain(got['note']) or '(none)'}")
        return EXIT_OK
