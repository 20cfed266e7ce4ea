"""`make soak`: the storefront under faults, bounded (2 minutes of load by default).

Two dev hosts share one Azurite, each store behind a fault proxy, and one Brevo sandbox at
Brevo's general tier. Agents buy over MCP and HTTP while a seeded schedule cuts and stalls the
stores, makes Brevo fail and kills hosts; once the faults stop and the contact queue is drained,
the invariants are checked. Prints a summary and exits 1 on any violation. SOAK_SECONDS sets the
load's length, SOAK_SEED the schedule (printed, so a failure reproduces). What it does and checks:
docs/development.md#soak.
"""

from __future__ import annotations

import os
import sys

from soak.run import Config, run


def main() -> int:
    outcome = run(Config.from_env(dict(os.environ)))
    print(outcome.text())
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
