"""Launch cache: per-launch scratch allocation vs a locked cache vs a pool page."""
import studies.launch_cache as study
from pages._ui import study_page

study_page(study)
