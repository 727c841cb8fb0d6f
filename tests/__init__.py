"""The tests, laid out as the code is: ``workbench/``, ``traces/``, ``studies/<id>/``, ``pages/``,
``safety/``, ``e2e/``; shared helpers in ``support/``, fixtures in ``data/<scenario>/``."""
