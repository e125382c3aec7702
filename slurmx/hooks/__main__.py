"""`python3 -m slurmx.hooks progress STEP [TOTAL]`: write the progress file now (see `slurmx.hooks.progress.main`)."""

import sys

from .progress import main

sys.exit(main())
