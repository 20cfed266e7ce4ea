"""`python -m speclint`: the command line (speclint.cli.main)."""

import sys

from speclint.cli import main

sys.exit(main())
