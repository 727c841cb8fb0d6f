"""A run's downloads: its report in each format, its result bundle, and a preview of the
issue report as GitHub renders it."""

from __future__ import annotations

import html as htmlmod
import io
import json
import re
import tempfile
import zipfile
from pathlib import Path

import streamlit as st

from workbench.presentation import report
from workbench.reading.analysis import Analysis
from workbench.data.record import RunRecord
from workbench.results.store import to_bundle
from workbench.base.untrusted import escape, safe_stem


#: report formats offered on a page: label, file suffix, MIME type
EXPORTS = {
    "issue": ("GitHub issue (one Markdown file, nothing attached)", "issue.md", "text/markdown"),
    "issue-full": ("GitHub issue, full (every table, chart and note that fits)", "issue.md", "text/markdown"),
    "md": ("Markdown with PNG charts (.zip)", "zip", "application/zip"),
    "html": ("HTML (one self-contained file)", "html", "text/html"),
    "ipynb": ("Notebook with its bundle, executed (.zip)", "zip", "application/zip"),
}


def _zip_dir(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(folder))
    return buf.getvalue()


def _export(rec: RunRecord, fmt: str, a: Analysis | None) -> bytes:
    """The report of ``rec`` in ``fmt`` as the bytes of one download."""
    stem = safe_stem(rec.run_id)
    with tempfile.TemporaryDirectory() as tmp:
        kind = fmt.removesuffix("-full")
        path = report.write_report(rec, kind, Path(tmp) / f"{stem}.{EXPORTS[fmt][1] if kind == 'issue' else fmt}",
                                   analysis=a, full=fmt.endswith("-full"))
        return _zip_dir(Path(tmp)) if EXPORTS[fmt][1] == "zip" else path.read_bytes()


def downloads(rec: RunRecord, key: str, a: Analysis | None = None) -> None:
    """Pick a report format, prepare it, download it; the result bundle; a preview of the
    issue report as GitHub renders it (:func:`preview_markdown`). File names from the run id's
    sanitised stem."""
    stem = safe_stem(rec.run_id)
    fmt = st.selectbox("Report format", list(EXPORTS), format_func=lambda f: EXPORTS[f][0], key=f"{key}:fmt")
    label, suffix, mime = EXPORTS[fmt]
    if st.button("Prepare report", key=f"{key}:prepare"):
        with st.spinner("writing the report..."):
            st.session_state[f"{key}:{fmt}"] = _export(rec, fmt, a)
    data = st.session_state.get(f"{key}:{fmt}")
    if data is not None:
        st.download_button(f"Download {label}", data, file_name=f"{stem}.{suffix}", mime=mime, key=f"{key}:{fmt}:dl")
        if fmt.startswith("issue"):
            st.caption(f"{len(data.decode()):,} characters (an issue takes up to {report.ISSUE_LIMIT:,})")
            if st.toggle("Preview (as the issue renders it)", key=f"{key}:preview"):
                with st.container(border=True):
                    preview_markdown(data.decode())
    # A callable: built on click, not on every rerun (it summarises every variant, up to MBs).
    st.download_button("Download result bundle (JSON: raw samples, environment, attachments)",
                       lambda: json.dumps(to_bundle(rec), default=str), file_name=f"{stem}.bundle.json",
                       mime="application/json", key=f"{key}:bundle")


#: a <details> block as workbench.base.untrusted.details writes it (the summary escaped there)
_DETAILS = re.compile(r"<details><summary>(.*?)</summary>\n\n(.*?)\n\n</details>", re.S)


def preview_markdown(text: str) -> None:
    """A report as GitHub renders it: Markdown (Mermaid blocks drawn by Streamlit), each
    ``<details>`` block a closed expander. No HTML is let through: the only HTML a report
    holds is its own <details> blocks, and they become expanders here."""
    at = 0
    for m in _DETAILS.finditer(text):
        if text[at:m.start()].strip():
            st.markdown(text[at:m.start()])
        with st.expander(escape(htmlmod.unescape(m.group(1)))):
            st.markdown(m.group(2))
        at = m.end()
    if text[at:].strip():
        st.markdown(text[at:])
