"""Study modules: one module per study (see ``workbench.study`` for the seam)."""
