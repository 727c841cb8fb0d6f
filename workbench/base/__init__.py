"""The core's base room: the standard pieces every room stands on: signals and interrupts, untrusted
text, units, names, subprocesses, output files, the machine's environment and load (``interrupt``,
``untrusted``, ``units``, ``names``, ``procs``, ``outfile``, ``env``, ``machine_load``). It imports
only from itself and the rooms below it (docs/README.md, "The core's rooms";
tests/workbench/test_rooms.py)."""
