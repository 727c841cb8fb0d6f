"""``readme``: the committed result READMEs' generated blocks against what the tool prints today."""

from __future__ import annotations

from ..base.env import REPO_ROOT
from ..base.untrusted import safe_stem
from .base import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Command, err


class Readme(Command):
    """Every committed result README's generated blocks against what the tool prints today (exit 1
    and the blocks that differ), or ``--refresh`` them (:mod:`workbench.reading.readme`)."""

    name, takes_store = "readme", False
    help = ("check (or --refresh) the generated tables of the committed result READMEs "
            "(traces/<study>/README.md) against the bundles")

    @classmethod
    def arguments(cls, s, argv):
        s.add_argument("--refresh", action="store_true", help="rewrite every generated block from the bundles")
        s.add_argument("--study", help="only traces/<study>/README.md")

    @classmethod
    def run(cls, args) -> int:
        from ..reading import readme

        paths = readme.readmes(REPO_ROOT)
        if args.study:
            paths = [p for p in paths if p.parent.name == safe_stem(args.study)]
            if not paths:
                err(f"no generated blocks in traces/{safe_stem(args.study)}/README.md")
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
                err(f"{path.relative_to(REPO_ROOT)}: {exc}")
                return EXIT_BAD_INPUT
        if not args.refresh and not stale:
            print(f"{len(paths)} README(s): every generated block is what the tool prints today")
        return EXIT_FAILED if stale else EXIT_OK
