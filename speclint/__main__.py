"""`python -m speclint`: the command line (speclint.core.main)."""

import sys

from speclint.core import main

sys.exit(main())
