"""``python -m microg4m.annotate --results results``: the annotation page without Snakemake."""

import sys

from .app import main

sys.exit(main())
