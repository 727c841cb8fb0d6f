"""The core's running room: running and timing: the harness, the runner, launching ranks, jobs, A/B
sessions, captures and the Tracy, C build and collectives helpers (``harness``, ``runner``,
``launcher``, ``jobs``, ``ab_session``, ``capture``, ``tracy``, ``cbuild``, ``collectives``,
``rank``). It imports only from itself and the rooms below it (docs/README.md, "The core's rooms";
tests/workbench/test_rooms.py)."""
