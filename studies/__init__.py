"""The studies: one package per study, laid out alike (``studies/README.md``); the workbench
finds them through :mod:`workbench.seam.registry`."""
