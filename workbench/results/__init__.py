"""The core's results room: where runs are kept and found: the store and the catalog of stored and
committed runs (``store``, ``catalog``). It imports only from itself and the rooms below it
(docs/README.md, "The core's rooms"; tests/workbench/test_rooms.py)."""
