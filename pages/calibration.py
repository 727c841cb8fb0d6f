"""Calibration page: the machine's and the harness's floor."""
import studies.calibration as study
from pages._ui import study_page

study_page(study)
