"""``python -m devstack.brevo_sandbox``: serve the sandbox until SIGTERM or SIGINT."""

from __future__ import annotations

import sys

from devstack.brevo_sandbox.app import main

if __name__ == "__main__":
    sys.exit(main())
