"""CPU reduction (IREE vs PyTorch sum) page."""
import studies.cpu_reduction as study
from pages._ui import study_page

study_page(study)
