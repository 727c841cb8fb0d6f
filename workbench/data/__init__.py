"""The core's data room: a run's record and the schema it is checked against (``schema``, ``record``).
It imports only from itself and the rooms below it (docs/README.md, "The core's rooms";
tests/workbench/test_rooms.py)."""
