"""docs/safety.md states the limits the code enforces (issue 28: the numbers in the message and
the documentation): each constant's value appears there as the code has it."""

from __future__ import annotations

from tests.safety.hostile import ROOT
from workbench.data.schema import MAX_VARIANTS
from workbench.results.store import MAX_BUNDLE_BYTES
from workbench.seam.study import MAX_LIST_VALUES, MAX_SWEEP_POINTS
from workbench.traces.inflate import DEFAULT_MAX_MB


def test_the_safety_page_states_the_limits_the_code_enforces():
    text = (ROOT / "docs" / "safety.md").read_text()
    for name, shown in [("MAX_SWEEP_POINTS", f"{MAX_SWEEP_POINTS:,}"), ("MAX_LIST_VALUES", f"{MAX_LIST_VALUES:,}"),
                        ("MAX_VARIANTS", f"{MAX_VARIANTS:,}"), ("MAX_BUNDLE_BYTES", f"{MAX_BUNDLE_BYTES >> 20} MiB"),
                        ("WORKBENCH_TRACE_INFLATE_MAX_MB", f"{DEFAULT_MAX_MB:,} MiB")]:
        row = next((line for line in text.splitlines() if name in line), "")
        assert shown in row, (name, shown, row)
