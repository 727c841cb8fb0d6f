"""MC² split page."""
import studies.mc2_split as study
from pages._ui import study_page

study_page(study)
