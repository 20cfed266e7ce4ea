"""Session services for the suite: one Azurite (the npm package), one Brevo sandbox and one dev
host serving function_app.py, all real processes on free ports. Tests that need other settings
start their own dev host against the same Azurite and sandbox with `start_host`.

Nothing the suite starts outlives it: SIGTERM, and SIGINT even where a background job inherited
it ignored, end the session as Ctrl-C does (fixtures torn down), then every process it started
and still running is ended; a session killed outright takes its services with it
(`devstack.processes`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import ContainerClient, ContentSettings

from devstack import processes
from devstack.node import with_node22
from devstack.ports import free_port
from devstack.run import DEV_ACCOUNT_KEY, storage_connection
from devstack.seed_bundles import sample_bundle
from devstack.seed_bundles import seed as seed_bundles
from devstack.services import Service, start_host, start_process
from shared.purchase.catalog import BUNDLES
from tests.identity import self_signed_certificate
from tests.support import ROOT, Buyer

AZURITE = ROOT / "node_modules" / ".bin" / "azurite"
_handlers: dict[int, object] = {}


# The session's services; a test that takes one (or a fixture built on one) needs them.
SERVICE_FIXTURES = frozenset({"azurite", "azurite_tls", "sandbox", "host_factory", "host", "buyer", "mail"})


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "services: needs Azurite, the sandbox, a dev host or another process of its own; "
        "`make test-fast` runs the tests without it",
    )
    os.environ["PATH"] = with_node22(os.environ)["PATH"]  # every Node tool a test starts runs on Node 22
    _handlers.update((signum, signal.getsignal(signum)) for signum in (signal.SIGINT, signal.SIGTERM))
    processes.interrupt_on_signals()


def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test that takes a session service `services`, as the files that start processes
    of their own mark themselves, so `-m "not services"` selects the tests that need none."""
    for item in items:
        if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


def pytest_unconfigure(config) -> None:
    processes.stop_all()
    for signum, handler in _handlers.items():  # as they were, for a process that runs pytest.main
        signal.signal(signum, handler)


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
    seed_bundles(storage_connection(blob, table, queue))
    yield storage_connection(blob, table, queue)
    service.stop()


@dataclass(frozen=True)
class TlsStorage:
    """Azurite over HTTPS in OAuth mode: it takes bearer tokens for https://storage.azure.com.
    `connection_string` (with the well-known development key) is for test set-up only."""

    blob_uri: str
    table_uri: str
    queue_uri: str
    ca_bundle: Path
    connection_string: str


@pytest.fixture(scope="session")
def azurite_tls(logs, tmp_path_factory) -> Iterator[TlsStorage]:
    """A second Azurite, over HTTPS with a self-signed certificate for 127.0.0.1 and OAuth on,
    its bundles container seeded."""
    if not AZURITE.exists() or not shutil.which("node"):
        pytest.exit("Azurite is not installed: run `make test` (it runs `npm install` first)", returncode=2)
    cert, key = self_signed_certificate(tmp_path_factory.mktemp("tls"))
    blob, queue, table = free_port(), free_port(), free_port()
    args = [str(AZURITE), "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"]
    args += ["--inMemoryPersistence", "--oauth", "basic", "--cert", str(cert), "--key", str(key)]
    for service, port in (("blob", blob), ("queue", queue), ("table", table)):
        args += [f"--{service}Host", "127.0.0.1", f"--{service}Port", str(port)]
    proc = start_process(args, table, logs / "azurite-tls.log")
    storage = TlsStorage(
        blob_uri=f"https://127.0.0.1:{blob}/devstoreaccount1",
        table_uri=f"https://127.0.0.1:{table}/devstoreaccount1",
        queue_uri=f"https://127.0.0.1:{queue}/devstoreaccount1",
        ca_bundle=cert,
        connection_string=(
            f"DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;AccountKey={DEV_ACCOUNT_KEY};"
            f"BlobEndpoint=https://127.0.0.1:{blob}/devstoreaccount1;"
            f"QueueEndpoint=https://127.0.0.1:{queue}/devstoreaccount1;"
            f"TableEndpoint=https://127.0.0.1:{table}/devstoreaccount1;"
        ),
    )
    bundles = ContainerClient.from_connection_string(
        storage.connection_string, "bundles", connection_verify=str(cert)
    )
    with contextlib.suppress(ResourceExistsError):
        bundles.create_container()
    for bundle in BUNDLES.values():
        zipped = ContentSettings(content_type="application/zip")
        bundles.upload_blob(
            f"{bundle.id}.zip", sample_bundle(bundle), overwrite=True, content_settings=zipped
        )
    yield storage
    Service(proc, storage.blob_uri, logs / "azurite-tls.log").stop()


@pytest.fixture(scope="session")
def sandbox(logs) -> Iterator[Service]:
    port = free_port()
    proc = start_process(
        [sys.executable, "-m", "devstack.brevo_sandbox", "--port", str(port)], port, logs / "sandbox.log"
    )
    service = Service(proc, f"http://127.0.0.1:{port}", logs / "sandbox.log")
    yield service
    service.stop()


@pytest.fixture(scope="session")
def host_factory(logs, azurite, sandbox) -> Iterator[Callable[..., Service]]:
    """Start a dev host on the session's Azurite and sandbox, with extra settings; with
    `own_address`, its public base URL is its own address, so the URLs its answers hold (a UCP
    profile's endpoints) reach it."""
    started: list[Service] = []

    def start(*, own_address: bool = False, **env: str) -> Service:
        base = {
            "AzureWebJobsStorage": azurite,
            "BREVO_BASE_URL": f"{sandbox.url}/v3",
        }
        port = free_port() if own_address else 0
        if own_address:
            base["STOREFRONT_PUBLIC_BASE_URL"] = f"http://127.0.0.1:{port}"
        service = start_host(logs, {**base, **env}, port=port)
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
