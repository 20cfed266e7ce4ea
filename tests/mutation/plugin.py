"""The pytest plugin every mutation worker loads (`-p tests.mutation.plugin`).

mutmut forks each worker from one process, and a worker runs the tests as a new pytest session,
so each would start its own Azurite and sandbox, seconds per mutant. The driver starts one of
each for the whole run and names them in MUTATION_AZURITE and MUTATION_SANDBOX; the session
fixtures of those names take them instead of starting their own. Tests keep apart as they always
do (their own tables, containers, emails and client addresses).

Forked workers would also inherit one state of `devstack.ports`' port picker, and two workers
running at once would draw the same ports for the dev hosts they start: it is reseeded per
session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devstack import ports
from devstack.ports import free_port
from devstack.run import storage_connection
from devstack.seed_bundles import seed as seed_bundles
from devstack.services import Service, start_process
from tests import support

AZURITE = support.ROOT / "node_modules" / ".bin" / "azurite"


def pytest_sessionstart(session) -> None:
    ports._random.seed()


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    """The run's own Azurite and sandbox for the `azurite` and `sandbox` session fixtures."""
    shared = None
    if fixturedef.argname == "azurite":
        shared = os.environ.get("MUTATION_AZURITE")
    elif fixturedef.argname == "sandbox" and os.environ.get("MUTATION_SANDBOX"):
        shared = Service(None, os.environ["MUTATION_SANDBOX"], Path(os.devnull))
    if shared is None:
        return None
    fixturedef.cached_result = (shared, fixturedef.cache_key(request), None)
    return shared


def start_services(logs: Path) -> tuple[dict[str, str], list[subprocess.Popen]]:
    """Azurite (in memory, its bundles seeded) and the sandbox, for a whole mutation run: the
    environment that hands them to the workers, and the processes to stop afterwards."""
    blob, queue, table = free_port(), free_port(), free_port()
    args = [str(AZURITE), "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"]
    args.append("--inMemoryPersistence")
    for service, port in (("blob", blob), ("queue", queue), ("table", table)):
        args += [f"--{service}Host", "127.0.0.1", f"--{service}Port", str(port)]
    azurite = start_process(args, table, logs / "azurite.log")
    storage = storage_connection(blob, table, queue)
    seed_bundles(storage)
    port = free_port()
    sandbox_args = [sys.executable, "-m", "devstack.brevo_sandbox", "--port", str(port)]
    sandbox = start_process(sandbox_args, port, logs / "sandbox.log")
    env = {"MUTATION_AZURITE": storage, "MUTATION_SANDBOX": f"http://127.0.0.1:{port}"}
    return env, [azurite, sandbox]
