"""The core's presentation room: what a reader sees: reports, charts, diagrams, the notebook display,
the manual pages and the progress bar (``report``, ``charts``, ``mermaid``, ``jupyter``,
``manual``). It imports only from itself and the rooms below it (docs/README.md, "The core's rooms";
tests/workbench/test_rooms.py)."""
