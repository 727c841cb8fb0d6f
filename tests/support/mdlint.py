"""Checks on exported Markdown (a test helper, not the product): what would break a report on
GitHub. :func:`lint_markdown` for every report, :func:`lint_issue` for the issue format."""

from __future__ import annotations

import re
from pathlib import Path

#: the issue format's size limit (workbench.report.ISSUE_LIMIT; GitHub refuses bodies over 65,536)
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
