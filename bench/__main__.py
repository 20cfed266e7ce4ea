"""`make bench` (python -m bench): the run itself lives in bench.stack while the split follows."""

from __future__ import annotations

import sys

from bench.stack import Stack, main

__all__ = ["Stack", "main"]

if __name__ == "__main__":
    sys.exit(main())
