"""Triton kernels of the workbench's studies (one module per operation)."""
