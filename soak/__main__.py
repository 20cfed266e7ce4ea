"""`make soak`: the storefront under faults, bounded (2 minutes of load by default).

Two dev hosts share one Azurite, each store (Table, Blob, the contact queue) behind a fault proxy
(devstack/faultproxy.py), and one Brevo sandbox at Brevo's general tier, which already holds some of
the store owner's contacts. Agents buy over MCP and HTTP, with and without idempotency keys,
retrying as agents do, while a seeded schedule cuts and stalls the stores, makes Brevo fail,
answer late, refuse or storm on the contacts family, and kills a host now and then (once while
its contact drainer hands a batch to Brevo). Once the faults stop, every key is asked again until
it is answered for good, and the contact queue is drained; then the invariants are checked
against the sandbox's emails and contacts, the receipt blobs, the receipt URLs, the finance
listing and the contact queue. Prints a summary and exits 1 on any violation.

SOAK_SECONDS sets the load's length, SOAK_SEED the schedule (printed, so a failure reproduces).
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
