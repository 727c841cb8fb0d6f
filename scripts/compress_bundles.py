"""Re-encode committed result bundles' attachments as zstd frames (bundle version 2), in place.

The same bytes come back out (checked before a file is replaced); only attachments of 4 KiB or
more that shrink by a fifth or more are re-encoded (workbench.results.store.attachment_entry). Run it on
bundles written before 2026-12-06, or copied in from a node without zstandard:

    .venv/bin/python scripts/compress_bundles.py traces/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workbench.base import outfile
from workbench.results import store


def compress(path: Path) -> int:
    """Rewrite one bundle; the bytes saved (0 when nothing changed)."""
    raw = path.read_bytes()
    before = store.parse_bundle(raw, what=str(path))
    doc = json.loads(raw)
    if not store.compress_attachments(doc):
        return 0
    text = json.dumps(doc, indent=1, default=str)
    after = store.parse_bundle(text.encode(), what=str(path))
    if after.attachments != before.attachments or after.to_json() != before.to_json():
        raise SystemExit(f"{path}: re-encoding changed what the bundle holds; left as it was")
    outfile.write(path, text)
    return len(raw) - len(text.encode())


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("traces")]
    saved = files = 0
    for root in roots:
        for path in sorted(root.rglob("*.bundle.json")) if root.is_dir() else [root]:
            n = compress(path)
            if n:
                files += 1
                saved += n
                print(f"{path}: {n / 2**20:.1f} MiB smaller")
    print(f"{files} bundle(s) re-encoded, {saved / 2**20:.1f} MiB saved")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
