"""The core's evidence room: the comparison engine: statistics, derived metrics, comparisons, claims,
verdicts and the tables they are read from (``stats``, ``derived``, ``engine``, ``claims``,
``verdict``, ``tables``). It imports only from itself and the rooms below it (docs/README.md, "The
core's rooms"; tests/workbench/test_rooms.py)."""
