"""Session services for the suite: one Azurite (the npm package), one Brevo sandbox and one dev
host serving function_app.py, all real processes on free ports. Tests that need other settings
start their own dev host against the same Azurite and sandbox with `start_host`.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator

import pytest
import requests

from tests.support import ROOT, Buyer, Service, connection_string, free_port, start_host, start_process
from tools.seed_bundles import seed as seed_bundles

AZURITE = ROOT / "node_modules" / ".bin" / "azurite"


@pytest.fixture(scope="session")
def logs(tmp_path_factory) -> Iterator:
    path = tmp_path_factory.mktemp("logs")
    yield path


@pytest.fixture(scope="session")
def azurite(logs) -> Iterator[str]:
    """Azurite's blob and table services in memory; yields the storage connection string."""
    if not AZURITE.exists() or not shutil.which("node"):
        pytest.exit("Azurite is not installed: run `make test` (it runs `npm install` first)", returncode=2)
    blob, queue, table = free_port(), free_port(), free_port()
    proc = start_process(
        [
            str(AZURITE),
            "--silent",
            "--skipApiVersionCheck",
            "--loose",
            "--disableTelemetry",
            "--inMemoryPersistence",
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(blob),
            "--queueHost",
            "127.0.0.1",
            "--queuePort",
            str(queue),
            "--tableHost",
            "127.0.0.1",
            "--tablePort",
            str(table),
        ],
        table,
        logs / "azurite.log",
    )
    service = Service(proc, f"http://127.0.0.1:{blob}", logs / "azurite.log")
    seed_bundles(connection_string(blob, table))
    yield connection_string(blob, table)
    service.stop()


@pytest.fixture(scope="session")
def sandbox(logs) -> Iterator[Service]:
    port = free_port()
    proc = start_process(
        [sys.executable, "-m", "tools.brevo_sandbox", "--port", str(port)], port, logs / "sandbox.log"
    )
    service = Service(proc, f"http://127.0.0.1:{port}", logs / "sandbox.log")
    yield service
    service.stop()


@pytest.fixture(scope="session")
def host_factory(logs, azurite, sandbox) -> Iterator[Callable[..., Service]]:
    """Start a dev host on the session's Azurite and sandbox, with extra settings."""
    started: list[Service] = []

    def start(**env: str) -> Service:
        base = {
            "AzureWebJobsStorage": azurite,
            "BREVO_BASE_URL": f"{sandbox.url}/v3",
        }
        service = start_host(logs, {**base, **env})
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture(scope="session")
def host(host_factory) -> Service:
    """The default dev host: the development settings, limits as shipped."""
    return host_factory()


@pytest.fixture
def buyer(host) -> Buyer:
    return Buyer(host.url)


class Sandbox:
    def __init__(self, url: str):
        self.url = url

    def emails_to(self, address: str) -> list[dict]:
        return requests.get(f"{self.url}/_sandbox/emails", params={"to": address}, timeout=10).json()

    def contact(self, address: str) -> dict | None:
        found = requests.get(f"{self.url}/_sandbox/contacts", params={"email": address}, timeout=10).json()
        return found[0] if found else None

    def fail_next(
        self,
        path: str,
        status: int,
        match: str,
        times: int = 1,
        delay: float = 0,
        headers: dict[str, str] | None = None,
    ) -> None:
        fault = {"path": path, "status": status, "match": match, "times": times, "delay_seconds": delay}
        if headers:
            fault["headers"] = headers
        requests.post(f"{self.url}/_sandbox/faults", json=fault, timeout=10).raise_for_status()


@pytest.fixture(scope="session")
def mail(sandbox) -> Sandbox:
    return Sandbox(sandbox.url)
