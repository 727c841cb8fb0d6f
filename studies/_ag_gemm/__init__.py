"""Helpers of the ag-gemm study: methods (GPU side), auto-config, trace spans, torchrun worker."""
