"""Helpers of the mc2-split study: cost fits and the seed's split rule (plan), the two-engine
pipeline simulator (simulate), the exact best-split search (search) and the distributed
worker launched by torchrun (worker). plan/simulate/search are pure Python so the GPU
machines, which lack the app's packages, can import them."""
