"""OpenCL event overhead page."""
import studies.opencl_events as study
from pages._ui import study_page

study_page(study)
