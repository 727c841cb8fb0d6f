"""Fused all-gather + GEMM page."""
import studies.ag_gemm as study
from pages._ui import study_page

study_page(study)
