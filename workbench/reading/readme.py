"""Generated blocks in committed documents: tables come from the bundles through the tool.

A committed result README (``traces/<study>/README.md``) never copies a figure by hand: each
of its tables sits between markers that name what the tool prints there::

    <!-- generated:claims bundles=many-core-16cpu.bundle.json,many-core-phases-16cpu.bundle.json -->
    ...the table, as the tool prints it today...
    <!-- /generated -->

``python -m workbench readme --refresh`` rewrites every block from the bundles beside the
README; plain ``python -m workbench readme`` (and ``tests/workbench/test_readme.py``) fails when a committed
block differs from what the tool prints today. Kinds of block (:data:`KINDS`):

- ``claims bundles=A,B``: each claim of the study, its status and live figure (95% CI) in
  every bundle that tests it (else why none can);
- ``claims-by-run bundles=A,B|* [params=a|b]``: one row per run (oldest first; ``*`` is every
  bundle beside the README), the named parameters, then each claim's status (the figures are
  each run's report's); then per claim how many runs gave each status (``direction holds``,
  the seed's figure outside the live CI, counted apart from ``holds``);
- ``drift bundle=A``: the run's drift between blocks and its null controls;
- ``table bundle=A table=NAME [columns=a|b|c] [where=col:value]``: one of the run's analysis
  tables (a derived-form table shows each figure with its CI, status and what its CI covers);
- ``derived bundle=A match=TEXT [table=NAME]``: the run's derived numbers whose name contains
  TEXT (of one table of its derived table: its ``table`` column);
- ``section bundle=A heading="TEXT"``: the study's report section whose heading contains TEXT,
  without its heading (the README keeps its own);
- ``printout file=NAME``: a script's printout committed beside the README (a plain file name,
  a text file of at most 64 KiB) as a fenced block: figures a script prints rather than a
  bundle holds, shown as printed, never copied by hand;
- ``study id=ID name=NAME [...]``: a block the study writes itself from the analyses of every
  bundle beside the README (its ``README_BLOCKS[NAME](analyses, args)``, e.g. mc2-split's
  spread over runs).

Bundle names are plain file names in the README's folder (never a path); the markers are
trusted text (committed), the bundles are not (they are read as every bundle is).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Callable

import pandas as pd

from ..evidence import claims as claimsmod
from ..evidence import derived
from .analysis import Analysis, analyse, sections_of
from ..seam.registry import get
from ..results.store import read_bundle
from ..evidence.tables import md_table
from ..base.untrusted import escape

MAX_PRINTOUT_BYTES = 64 * 1024

BLOCK_RE = re.compile(r"(<!-- generated:(?P<kind>[a-z-]+)(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /generated -->)",
                      re.S)
KINDS = ("claims", "claims-by-run", "drift", "table", "derived", "section", "printout", "study")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class BlockError(ValueError):
    """A marker that names a missing bundle, table or kind; the message says which."""


def _args(text: str) -> dict[str, str]:
    """``key=value`` pairs; a value with spaces is quoted (``heading="Thread scaling"``)."""
    return dict(part.split("=", 1) for part in shlex.split(text) if "=" in part)


class Bundles:
    """The bundles of one README folder, each analysed once (``analyse`` may be a shared cache)."""

    def __init__(self, folder: Path, analyse: Callable[[Path], Analysis] | None = None):
        self.folder = folder
        self._analyse = analyse or _analyse_file
        self._done: dict[str, Analysis] = {}

    def names(self) -> list[str]:
        """Every bundle's file name in the folder, sorted (``bundles=*``, a study's own blocks)."""
        return sorted(p.name for p in self.folder.glob("*.bundle.json"))

    def get(self, name: str) -> Analysis:
        if not _NAME_RE.match(name) or not (self.folder / name).is_file():
            raise BlockError(f"{self.folder}/{name}: no such bundle beside the README")
        if name not in self._done:
            self._done[name] = self._analyse(self.folder / name)
        return self._done[name]


def _analyse_file(path: Path) -> Analysis:
    return analyse(read_bundle(path))


def block_claims(bundles: Bundles, args: dict[str, str]) -> str:
    """Per claim: its status and live figure in each bundle that tests it; else why not."""
    names = args["bundles"].split(",")
    per = [(n, bundles.get(n).claims) for n in names]
    if not per or not len(per[0][1]):
        return "(no claims)"
    rows = []
    for cid, seed_value in zip(per[0][1]["id"], per[0][1]["seed_value"]):
        found = []
        for name, c in per:
            r = c.set_index("id").loc[cid]
            if r["status"] != "not testable here":
                found.append((name, r))
        if not found:
            name, c = per[0]
            r = c.set_index("id").loc[cid]
            found = [(name, r)]
        for name, r in found:
            rows.append({"claim": cid, "seed's figure": seed_value, "here": r["status"],
                         "live figure (95% CI)": r["live"], "why": r["why"],
                         "bundle": name.removesuffix(".bundle.json")})
    return md_table(pd.DataFrame(rows))


def block_claims_by_run(bundles: Bundles, args: dict[str, str]) -> str:
    """Per run: the named parameters and each claim's status, for many runs in one table."""
    names = bundles.names() if args["bundles"] == "*" else args["bundles"].split(",")
    runs = sorted((bundles.get(n) for n in names), key=lambda a: (str(a.rec.created_utc), a.rec.run_id))
    params = [p for p in args.get("params", "").split("|") if p]
    rows = []
    for a in runs:
        row = {"run": a.rec.run_id.rsplit("-", 1)[-1], "date": str(a.rec.created_utc)[:10]}
        row.update({p: a.rec.params.get(p, "") for p in params})
        row.update(dict(zip(a.claims["id"], a.claims["status"])) if len(a.claims) else {})
        rows.append(row)
    if not rows:
        return "(no runs)"
    return md_table(pd.DataFrame(rows).fillna("")) + "\n\n" + md_table(claims_tally(runs))


def claims_tally(analyses: list[Analysis]) -> pd.DataFrame:
    """Per claim, how many runs gave each status: direction and size held ("holds") counted
    apart from the direction alone ("direction holds": the seed's figure outside the live CI)."""
    statuses = claimsmod.STATUSES
    rows = {}
    for a in analyses:
        for cid, title, status in zip(a.claims["id"], a.claims["title"], a.claims["status"]):
            row = rows.setdefault(cid, {"claim": title, "id (the column above)": cid, **{s: 0 for s in statuses}})
            row[status] += 1
    return pd.DataFrame(list(rows.values()), columns=["claim", "id (the column above)", *statuses])


def block_drift(bundles: Bundles, args: dict[str, str]) -> str:
    a = bundles.get(args["bundle"])
    line = a.drift.text()
    parts = [f"{escape(line[:1].upper() + line[1:])}."]
    nulls = a.tables.get("nulls")
    if nulls is not None and len(nulls):
        parts.append(md_table(derived.cells(nulls)[["quantity", "figure (95% CI)", "status", "CI covers"]]))
    return "\n\n".join(parts)


def block_table(bundles: Bundles, args: dict[str, str]) -> str:
    a = bundles.get(args["bundle"])
    df = a.tables.get(args["table"])
    if df is None:
        raise BlockError(f"{args['bundle']}: no table {args['table']!r}")
    if "where" in args:
        col, _, value = args["where"].partition(":")
        df = df[df[col].astype(str) == value]
    if set(derived.COLUMNS[:5]) <= set(df.columns):
        df = derived.cells(df)
    if "columns" in args:
        missing = [c for c in args["columns"].split("|") if c not in df.columns]
        if missing:
            raise BlockError(f"{args['bundle']}: table {args['table']!r} has no column(s) {missing}")
        df = df[args["columns"].split("|")]
    return md_table(df.reset_index(drop=True))


def block_derived(bundles: Bundles, args: dict[str, str]) -> str:
    a = bundles.get(args["bundle"])
    d = a.tables.get("derived", pd.DataFrame())
    if "table" in args and len(d):
        d = d[d["table"] == args["table"]] if "table" in d.columns else d.iloc[0:0]
    match = args["match"]
    hit = d[d["name"].str.contains(match, regex=False)] if len(d) else d
    if not len(hit):
        raise BlockError(f"{args['bundle']}: no derived number whose name contains {match!r}")
    return md_table(derived.cells(hit)[["quantity", "figure (95% CI)", "status", "CI covers"]])


def block_section(bundles: Bundles, args: dict[str, str]) -> str:
    a = bundles.get(args["bundle"])
    want = args["heading"]
    for sec in sections_of(a):
        head, _, body = sec.partition("\n")
        if want in head:
            return body.strip("\n")
    raise BlockError(f"{args['bundle']}: no report section whose heading contains {want!r}")


def block_printout(bundles: Bundles, args: dict[str, str]) -> str:
    name = args["file"]
    path = bundles.folder / name
    if not _NAME_RE.match(name) or name.endswith(".bundle.json") or not path.is_file():
        raise BlockError(f"{bundles.folder}/{name}: no such printout beside the README")
    if path.stat().st_size > MAX_PRINTOUT_BYTES:
        raise BlockError(f"{path}: a printout of {path.stat().st_size:,} bytes (at most {MAX_PRINTOUT_BYTES:,})")
    return escape(path.read_text(encoding="utf-8", errors="replace").rstrip("\n"), "block", "text")


def block_study(bundles: Bundles, args: dict[str, str]) -> str:
    study = get(args["id"])
    fn = getattr(study, "README_BLOCKS", {}).get(args["name"])
    if fn is None:
        raise BlockError(f"study {args['id']} has no README block {args['name']!r}")
    return fn([bundles.get(n) for n in bundles.names()], args)


BLOCKS = {"claims": block_claims, "claims-by-run": block_claims_by_run, "drift": block_drift, "table": block_table,
          "derived": block_derived, "section": block_section, "printout": block_printout, "study": block_study}


def refresh(text: str, bundles: Bundles) -> str:
    """The document with every generated block printed again from the bundles."""
    def one(m: re.Match) -> str:
        kind = m["kind"]
        if kind not in BLOCKS:
            raise BlockError(f"unknown generated block kind {kind!r} (known: {', '.join(BLOCKS)})")
        body = BLOCKS[kind](bundles, _args(m["args"])).rstrip("\n")
        return f"{m.group(1)}{body}\n{m.group(5)}"

    return BLOCK_RE.sub(one, text)


def differences(text: str, bundles: Bundles) -> list[str]:
    """The generated blocks of a document that differ from what the tool prints today (their
    markers), empty when it is up to date."""
    new = refresh(text, bundles)
    old_blocks = {m.group(1): m["body"] for m in BLOCK_RE.finditer(text)}
    return [marker.strip() for marker, body in ((m.group(1), m["body"]) for m in BLOCK_RE.finditer(new))
            if old_blocks.get(marker) != body]


def readmes(root: Path) -> list[Path]:
    """The committed result READMEs that hold generated blocks."""
    return sorted(p for p in (root / "traces").glob("*/README.md") if "<!-- generated:" in p.read_text())
