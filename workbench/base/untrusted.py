"""Untrusted text into names, paths and markup: the one place where that happens.

Result bundles, uploads and traces come from other machines and other people. Their strings
(run ids, attachment and variant names, parameters, environment values, check and error
text, the reproduce command) are data: they never become a path, and they never reach
Markdown, HTML or a notebook cell without being escaped for the place they land in.

- :func:`check_run_id` and :func:`check_attachment_name` accept only plain names (the
  bundle importer and ``RunContext.attach`` call them; a bad name is refused, never fixed);
- :func:`safe_stem` turns any text into a file-name stem for output paths;
- :func:`attachment_file` puts an attachment's bytes in a private temporary folder under a
  name the importers can use for format detection, for readers that need a file;
- :func:`escape` escapes a string by its context: ``text`` (a paragraph, list item or
  heading), ``cell`` (a Markdown table cell), ``code`` (inline code), ``block`` (a fenced
  code block, returned whole), ``html`` (inside an HTML element, e.g. ``<summary>``),
  ``mermaid`` (a label or task name inside a Mermaid diagram);
  :func:`plain` makes one line for a terminal. Both show control characters as U+FFFD:
  C0 and C1 controls (a terminal acts on escape sequences), the bidirectional controls and
  other invisible format characters (a reproduce command could display otherwise than it
  copies: "Trojan Source", CVE-2021-42574), line and paragraph separators, and lone
  surrogates (which no UTF-8 file or terminal can hold). Text that reaches Markdown or HTML
  also has its GitHub @mentions and ``#123`` references made inert (:func:`quiet_mentions`);
- :func:`user_regex` compiles a regular expression typed by a user (``trace --comm``/``--marker``,
  the Traces page's fields, the API's ``comm=``/``marker=``) for a linear-time engine
  (:func:`workbench.traces.analysis.search_mask` matches it against a column of names).

:func:`guarded` runs a command line program with its output through :class:`TerminalStream`.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from . import interrupt  # the standard library only

#: run ids: the workbench's own ``YYYYMMDD-HHMMSS-<study>-<hex>`` or any such plain slug
RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
#: attachment names: one plain file name (no separators, no leading dot, no '..' alone)
ATTACHMENT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
#: variant names as studies make them ("pool4/default", "(0,0,1) 4096B", "iree c8 w2")
VARIANT_RE = re.compile(r"[A-Za-z0-9 _()+,./:=@%-]{1,200}")
#: run ids the CLI reads as something else
RESERVED_RUN_IDS = ("latest",)


class UntrustedError(ValueError):
    """A name from outside that is not allowed; the message says which and why."""


def check_run_id(run_id: Any) -> str:
    if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
        raise UntrustedError(f"run id {_show(run_id)} is not a plain id (letters, digits, '.', '_', '+', '-'; "
                             "starting with a letter or digit; at most 128 characters)")
    if run_id in RESERVED_RUN_IDS:
        raise UntrustedError(f"run id {run_id!r} is reserved (the CLI reads it as the newest run)")
    return run_id


def check_attachment_name(name: Any) -> str:
    if not isinstance(name, str) or not ATTACHMENT_NAME_RE.fullmatch(name):
        raise UntrustedError(f"attachment name {_show(name)} is not a plain file name (letters, digits, '.', '_', "
                             "'+', '-'; no path separators; starting with a letter or digit; at most 128 characters)")
    return name


def check_variant_name(name: Any) -> str:
    if not isinstance(name, str) or not VARIANT_RE.fullmatch(name):
        raise UntrustedError(f"variant name {_show(name)} has characters outside letters, digits, space and "
                             "_()+,./:=@%- (or is empty or over 200 characters)")
    return name


def _show(value: Any) -> str:
    """A bad value for an error message: repr, cut short (it may be megabytes)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def safe_stem(text: Any, default: str = "run") -> str:
    """A file-name stem from any text: runs of other characters become '-', no leading dot
    or dash, at most 100 characters; ``default`` when nothing is left."""
    stem = re.sub(r"[^A-Za-z0-9._+-]+", "-", str(text)).strip(".-")[:100].strip(".-")
    return stem or default


@contextlib.contextmanager
def attachment_file(name: str, data: bytes) -> Iterator[Path]:
    """``data`` as a file in a fresh private folder (mode 0700), for readers that take a path.

    The file's name is ``name`` when it is a plain attachment name (format detection may
    look at its extension), else ``attachment``; the folder is removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="wb-attachment-"))
    try:
        try:
            file_name = check_attachment_name(name)
        except UntrustedError:
            file_name = "attachment"
        path = folder / file_name
        path.write_bytes(data)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- markup ------------------------------------------------------------------------------

# CommonMark lets a backslash escape any ASCII punctuation. Escaped anywhere: what starts
# code, emphasis (an underscore only at a word's edge), tables, strike-through and GitHub's
# math; brackets when they could make a
# link or image ("](" or "]["); '<' (HTML) and '&' before an entity. At the start of the
# text also what starts a heading, list, quote or rule there. Plain text ("[512, 896]",
# "16.5 us", "a-b") stays as it is.
_MD_INLINE = re.compile(r"([\\`*|~$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_MD_LINK = re.compile(r"\][(\[]")
_MD_LINE_START = re.compile(r"^(\d*)([#+-](?=\s|$|[#+-])|>|=+$|(?<=\d)[.)](?=\s|$))")
_CONTEXTS = ("text", "cell", "code", "block", "html", "mermaid")


def escape(value: Any, where: str = "text", lang: str = "") -> str:
    """``value`` as a string that shows literally in ``where`` (see the module docstring).

    Every context but ``block`` folds the text onto one line (a newline would end a table
    row or a paragraph); ``lang`` is the info string of a ``block``."""
    if where not in _CONTEXTS:
        raise ValueError(f"unknown context {where!r}; one of {_CONTEXTS}")
    text = _CONTROL.sub("\ufffd", "" if value is None else str(value))
    if where == "block":
        text = clip(text, MAX_BLOCK_CHARS)
        # A fence longer than any backtick run inside cannot be closed by the content.
        fence = "`" * max(3, _longest_run(text, "`") + 1)
        return f"{fence}{lang}\n{text}\n{fence}"
    one_line = clip(" ".join(text.split()), MAX_FIELD_CHARS)
    if where == "html":
        return quiet_mentions(html.escape(one_line, quote=True))
    if where == "mermaid":
        # Mermaid ends a label at a quote or bracket, a statement at ';' or a newline, starts a
        # comment at '#' and separates a Gantt task from its data at ':'; a backtick run could
        # close the fence, and labels may be drawn as HTML: each folds to a look-alike.
        return one_line.translate(_MERMAID_FOLD).strip()
    if where == "code":
        # HTML and Markdown are not parsed inside a code span; only a longer backtick run ends it.
        if not one_line:
            return "` `"
        fence = "`" * (_longest_run(one_line, "`") + 1)
        pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
        return f"{fence}{pad}{one_line}{pad}{fence}"
    # text and cell ('|' is escaped in both: a table cell needs it, a paragraph does not mind)
    out = re.sub(r"&(?=#?\w+;)", "&amp;", one_line).replace("<", "&lt;")
    out = _MD_INLINE.sub(r"\\\1", out)
    if _MD_LINK.search(out):
        out = re.sub(r"([\[\]])", r"\\\1", out)
    return quiet_mentions(_MD_LINE_START.sub(r"\1\\\2", out))


# GitHub turns "@name" and "@org/team" into mentions that notify (a backslash does not stop
# it: the mention is found in the rendered text), and "#123", "GH-123" and "owner/repo#123"
# into cross-references that leave a link on that issue. A zero-width space written as an
# entity after the '@' or '#' (Renovate's way) keeps the text as it reads and copies, and
# matches neither. An '@' inside a word (an e-mail address, "f@2x") mentions no one.
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")
_REFERENCE = re.compile(r"((?<!&)#|\bGH-)(?=\d)", re.I)
ZWSP_ENTITY = "&#8203;"


def quiet_mentions(markup: str) -> str:
    """``markup`` (Markdown or HTML text, escaped already) with every @mention and issue
    reference made inert for GitHub; it renders and reads the same."""
    return _REFERENCE.sub(lambda m: m.group(1) + ZWSP_ENTITY, _MENTION.sub("@" + ZWSP_ENTITY, markup))


#: the most characters of one string from a run that reach a report, inline and as a code block:
#: a bundle's field may hold 300,000, and an issue report holds 65,536 at most (GitHub's limit)
MAX_FIELD_CHARS = 2_000
MAX_BLOCK_CHARS = 20_000


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … ({len(text) - limit:,} more characters cut)"


_MERMAID_FOLD = str.maketrans({'"': "'", "`": "'", "[": "(", "]": ")", "{": "(", "}": ")", ";": ",",
                               ":": "∶", "#": "♯", "<": "‹", ">": "›", "&": "＆"})

# C0 controls but tab and newline, DEL and C1 controls: a terminal acts on them (ESC starts
# sequences that retitle, recolour or worse), and no report needs them. Then what reorders
# or hides text: the Arabic letter mark, zero-width space/joiners and LRM/RLM, the line and
# paragraph separators, the bidi embeddings, overrides and isolates, word joiner and
# invisible operators, the BOM; and lone surrogates.
_INVISIBLE = "\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")


def plain(value: Any) -> str:
    """``value`` as one line of text for a terminal: control characters shown as U+FFFD."""
    return _CONTROL.sub("\ufffd", " ".join(str(value).split()))


def visible(doc: Any) -> Any:
    """``doc`` (parsed JSON from outside) with every string's control, bidirectional and other
    invisible characters (those :func:`plain` replaces) shown as U+FFFD, newlines and tabs
    kept, keys too: what a bundle brings in then shows as it reads wherever a page, a table
    or a notebook displays it, escaped or not."""
    if isinstance(doc, str):
        return _CONTROL.sub("\ufffd", doc)
    if isinstance(doc, list):
        return [visible(x) for x in doc]
    if isinstance(doc, dict):
        return {visible(k): visible(v) for k, v in doc.items()}
    return doc


# --- regular expressions typed by a user ------------------------------------------------------

#: the longest pattern compiled (a list of kernel names joined by '|' fits many times over)
MAX_PATTERN_CHARS = 10_000
#: RE2's limit of one repetition count; a larger one it would read as literal text
MAX_REPEAT = 1000
_REPEAT_COUNT = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")


class PatternError(ValueError):
    """A regular expression from a user that is refused; the message names it and says why."""


def user_regex(pattern: str, what: str = "the pattern"):
    """``pattern`` compiled for RE2, a matching engine whose time grows linearly with the text
    (never with backtracking: ``(a+)+$`` is as fast as ``a+$``); ``what`` names where it was
    typed (``--comm``) for the message of :class:`PatternError`, which says why a pattern is
    refused: not valid, a feature RE2 leaves out (backreferences, lookaround), a repetition
    count over :data:`MAX_REPEAT`, or more than :data:`MAX_PATTERN_CHARS` characters or RE2's
    memory budget. The result has ``search``, like a compiled ``re`` pattern."""
    import re2  # google-re2: on use, so a machine without it (a GPU node's image) still runs studies

    shown = _show(pattern)
    if not isinstance(pattern, str):
        raise PatternError(f"{what} {shown} is not text")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"{what} is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,} are matched")
    if has_surrogates(pattern):
        raise PatternError(f"{what} {shown} is not valid Unicode text (it holds a lone surrogate)")
    for m in _REPEAT_COUNT.finditer(pattern):
        if any(g and int(g) > MAX_REPEAT for g in m.groups()):
            raise PatternError(f"{what} {shown}: the repetition {_show(m.group(0))} counts past {MAX_REPEAT}, the most "
                               "a pattern may repeat")
    options = re2.Options()
    options.log_errors = False  # RE2 would print its own line on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        hint = ("; backreferences and lookaround are left out, as no linear-time engine can match them"
                if re.search(r"escape sequence: \\\d|perl operator: \(\?<?[=!]", why) else "")
        raise PatternError(f"{what} {shown} is not a regular expression of RE2's syntax (matched in time linear in "
                           f"the text): {plain(why)}{hint}") from None


def _longest_run(text: str, ch: str) -> int:
    runs = re.findall(f"{re.escape(ch)}+", text)
    return max((len(r) for r in runs), default=0)


def details(summary: str, body: str) -> str:
    """An HTML ``<details>`` block; ``summary`` is plain text (escaped here), ``body`` is
    Markdown whose untrusted parts the caller escaped (so it cannot close the block)."""
    return f"<details><summary>{escape(summary, 'html')}</summary>\n\n{body}\n\n</details>"


# --- the terminal --------------------------------------------------------------------------

# What a terminal stream never passes on: _CONTROL but the carriage return, with which the
# progress bar redraws its line (untrusted text has its own through plain() before it).
_TERMINAL_UNSAFE = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_INVISIBLE}]")


class OutputStreamError(OSError):
    """Standard output or error cannot be written (a full disk, a closed pipe)."""


class TerminalStream:
    """A text stream (``sys.stdout``, ``sys.stderr``) through which nothing reaches the
    terminal that :func:`plain` would not let through, whichever code wrote it, and whose
    write errors are :class:`OutputStreamError` (so the CLI can tell them from a failing file
    of the command's own). Other attributes are the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(_TERMINAL_UNSAFE.sub("\ufffd", text))
        except OSError as exc:
            raise OutputStreamError(exc.errno, exc.strerror) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputStreamError(exc.errno, exc.strerror) from exc

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds lone surrogates: undecodable bytes of a command-line argument or
    a file name (Python keeps them as U+DC80..U+DCFF), or a JSON ``\\ud800`` escape."""
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def guarded(command: Callable[[], int]) -> int:
    """Run ``command`` (a CLI's body: returns its exit code) with standard output and error
    through :class:`TerminalStream` (no control or bidi character reaches the terminal) and
    SIGINT, SIGTERM and SIGHUP acting as Ctrl-C (:func:`workbench.base.interrupt.handled`); a failure
    to write the output is one line on stderr and exit 2 (``| head`` closing the pipe early:
    exit 0, quietly)."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalStream(sys.stdout), TerminalStream(sys.stderr)
    try:
        with interrupt.handled():
            code = command()
        sys.stdout.flush()
        return code
    except OutputStreamError as exc:
        # the buffered rest would fail again when Python flushes at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), streams[0].fileno())
        if isinstance(exc.__cause__, BrokenPipeError):
            return 0
        try:
            print(f"error: cannot write the output: {exc.strerror or exc}", file=streams[1])
        except OSError:
            pass
        return 2
    finally:
        sys.stdout, sys.stderr = streams
