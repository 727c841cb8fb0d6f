"""The core's reading room: runs read back: a run's analysis, runs across machines, run-to-run
comparison, a study's README rows (``analysis``, ``across``, ``comparison``, ``readme``). It imports
only from itself and the rooms below it (docs/README.md, "The core's rooms";
tests/workbench/test_rooms.py)."""
