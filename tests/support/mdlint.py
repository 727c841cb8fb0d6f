"""Checks on exported Markdown (a test helper, not the product): what would break a report on
GitHub. :func:`lint_markdown` for every report, :func:`lint_issue` for the issue format,
:func:`broken_links` for the project's own documents."""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from pathlib import Path

#: the issue format's size limit (workbench.presentation.report.ISSUE_LIMIT; GitHub refuses bodies over 65,536)
ISSUE_LIMIT = 60_000


_MERMAID_KINDS = ("gantt", "flowchart", "graph", "sequenceDiagram", "timeline", "xychart-beta")


def _cells(line: str) -> int:
    """Cells in a table row, not counting escaped pipes."""
    body = line.strip().replace("\\|", "")
    return body.strip("|").count("|") + 1


def lint_markdown(text: str, base_dir: Path | None = None) -> list[str]:
    """Problems that would break the report on GitHub: misaligned tables, absolute or missing
    image links, unbalanced ``<details>``, Mermaid blocks that do not parse. Empty when fine."""
    problems: list[str] = []
    lines = text.splitlines()
    in_code = False
    fence_lang = ""
    block: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not in_code:
                in_code, fence_lang, block = True, line[3:].strip(), []
            else:
                if fence_lang == "mermaid":
                    problems += [f"mermaid block ending line {i + 1}: {p}" for p in _lint_mermaid(block)]
                in_code = False
            continue
        if in_code:
            block.append(line)
            continue
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1]):
            n = _cells(line)
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                if _cells(lines[j]) != n:
                    problems.append(f"table row on line {j + 1} has {_cells(lines[j])} cells, header has {n}")
                j += 1
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", line):
            if target.startswith(("/", "file:")) or re.match(r"^[A-Za-z]:\\", target):
                problems.append(f"image link on line {i + 1} is absolute: {target}")
            elif base_dir is not None and not target.startswith("http") and not (base_dir / target).exists():
                problems.append(f"image on line {i + 1} does not exist beside the report: {target}")
    if in_code:
        problems.append("a code fence is not closed")
    depth = 0
    # inside a fenced block GitHub shows tags as text: only the prose outside the fences counts
    for m in re.finditer(r"</?details>", re.sub(r"`[^`\n]*`", "", outside_fences(text))):  # nor in a code span
        depth += 1 if m.group() == "<details>" else -1
        if depth < 0:
            problems.append("</details> without <details>")
            depth = 0
    if depth:
        problems.append(f"{depth} <details> block(s) not closed")
    return problems


def outside_fences(text: str) -> str:
    """``text`` with the lines of fenced code blocks blanked (line numbers kept)."""
    out, in_code = [], False
    for line in text.splitlines():
        fence = line.startswith("```")
        out.append("" if in_code or fence else line)
        in_code ^= fence
    return "\n".join(out)


def _lint_mermaid(block: list[str]) -> list[str]:
    body = [l.strip() for l in block if l.strip() and not l.strip().startswith("%%")]
    if not body:
        return ["empty diagram"]
    kind = body[0].split()[0]
    if kind not in _MERMAID_KINDS:
        return [f"unknown diagram type {kind!r}"]
    if kind == "xychart-beta":
        return _lint_xychart(body)
    if kind != "gantt":
        return []
    problems = []
    for line in body[1:]:
        if re.match(r"^(title|dateFormat|axisFormat|tickInterval|todayMarker|excludes|section)\b", line):
            continue
        if ":" not in line:
            problems.append(f"gantt line is neither a keyword nor a task: {line!r}")
            continue
        name, spec = line.split(":", 1)
        parts = [p.strip() for p in spec.split(",")]
        if not name.strip() or not parts or any(p == "" for p in parts):
            problems.append(f"malformed gantt task: {line!r}")
    return problems


def _lint_xychart(body: list[str]) -> list[str]:
    """xychart-beta: a title, an x axis of categories, a y axis range, series as long as the axis."""
    problems, n_x = [], None
    for line in body[1:]:
        if line.startswith("title "):
            continue
        m = re.match(r'^x-axis\s+"[^"]*"\s+\[(.*)\]$', line)
        if m:
            n_x = len(re.findall(r'"[^"]*"|[^,\s][^,]*', m.group(1)))
            continue
        if re.match(r'^y-axis\s+"[^"]*"\s+-?[\d.e+-]+\s+-->\s+-?[\d.e+-]+$', line):
            continue
        m = re.match(r"^(line|bar)\s+\[(.*)\]$", line)
        if not m:
            problems.append(f"xychart line not understood: {line!r}")
            continue
        values = [v.strip() for v in m.group(2).split(",")]
        if any(not re.fullmatch(r"-?[\d.]+(e[+-]?\d+)?", v) for v in values):
            problems.append(f"xychart series with a non-number: {line[:80]!r}")
        if n_x is not None and len(values) != n_x:
            problems.append(f"xychart series has {len(values)} values for {n_x} categories")
    if n_x is None:
        problems.append("xychart without an x axis of categories")
    return problems


def lint_issue(text: str) -> list[str]:
    """The issue format: :func:`lint_markdown`, at most :data:`ISSUE_LIMIT` characters, and no
    image at all (an issue has no files beside it)."""
    problems = lint_markdown(text)
    if len(text) > ISSUE_LIMIT:
        problems.append(f"{len(text):,} characters, over the {ISSUE_LIMIT:,} an issue report may have")
    for i, line in enumerate(outside_fences(text).splitlines()):
        if re.search(r"!\[[^\]]*\]\(", line) or re.search(r"<img\b", line, re.I):
            problems.append(f"an image on line {i + 1}: nothing is attached to an issue")
    return problems


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text (code spans' text, no emphasis,
    links' text, no tags) lower-cased, everything but letters, marks, numbers, ``_``, spaces and
    hyphens dropped, spaces to hyphens (runs of them not merged)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    parts = text.split("`")  # odd parts are code spans: their text is literal
    text = "".join(p if i % 2 else re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", p) for i, p in enumerate(parts))
    kept = "".join(c for c in text.strip().lower()
                   if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every ``#anchor`` a Markdown file has on GitHub: its headings' slugs (repeats get -1,
    -2, ...) and explicit ``<a id=...>``/``name=`` anchors."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    prose = outside_fences(text)
    for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", prose, re.M):
        slug = github_slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    out |= set(re.findall(r"""<a\s[^>]*\b(?:id|name)=["']([^"']+)["']""", prose))
    return out


#: a target GitHub leaves the repository for
_EXTERNAL = re.compile(r"^([a-z][a-z0-9+.-]*:|//)", re.I)


def link_targets(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link and image outside code: Markdown ``[..](..)`` and
    ``![..](..)``, HTML ``href``/``src``."""
    out = []
    for i, line in enumerate(outside_fences(text).splitlines()):
        line = re.sub(r"`[^`]*`", "", line)  # a code span shows its text, links included
        out += [(i + 1, m) for m in re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", line)]
        out += [(i + 1, m) for m in re.findall(r"""\b(?:href|src)=["']([^"']+)["']""", line)]
    return out


def broken_links(path: Path, root: Path) -> list[str]:
    """Relative links and ``#anchors`` of the Markdown file ``path`` that do not resolve inside
    the repository at ``root``, as GitHub would follow them. Empty when all do."""
    problems = []
    text = path.read_text(encoding="utf-8")
    for line, target in link_targets(text):
        if _EXTERNAL.match(target):
            continue
        where, _, fragment = urllib.parse.unquote(target).partition("#")
        if where.startswith("/"):
            problems.append(f"{path.name}:{line}: {target} is absolute; GitHub needs a relative link")
            continue
        dest = (path.parent / where).resolve() if where else path
        if dest != root and root not in dest.parents:
            problems.append(f"{path.name}:{line}: {target} leaves the repository")
        elif not dest.exists():
            problems.append(f"{path.name}:{line}: {target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest.read_text(encoding="utf-8")):
            problems.append(f"{path.name}:{line}: {target}: {dest.name} has no heading with that anchor")
    return problems
