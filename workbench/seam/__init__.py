"""The core's seam room: what a study declares (its space, parameters, events) and how studies are
found (the registry: the one door to the studies) (``study``, ``events``, ``registry``). It imports
only from itself and the rooms below it (docs/README.md, "The core's rooms";
tests/workbench/test_rooms.py)."""
