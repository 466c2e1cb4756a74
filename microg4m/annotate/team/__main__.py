"""``python -m microg4m.annotate.team COMMAND``: team mode without the console script."""

import sys

from .cli import main

sys.exit(main())
