"""Where the tests find the repository and their fixtures (``tests/data/<scenario>/``)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
