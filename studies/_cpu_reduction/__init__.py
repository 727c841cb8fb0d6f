"""Helpers of the cpu-reduction study (programs are in kernels/iree/)."""
