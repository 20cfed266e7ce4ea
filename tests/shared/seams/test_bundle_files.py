"""shared.seams.bundle_files, as `GET /api/health` uses it: a bundle whose file is not in the bundles
container is named with the command that uploads it, the others are not, an upload clears it, and a
Blob outage reads as the outage, never as missing files. Against Azurite, with the health endpoint
called as a plain function."""

from __future__ import annotations

import json
import threading
import uuid
from types import SimpleNamespace

import pytest

from devstack.seed_bundles import sample_bundle
from shared.config.keys import KeySet
from shared.config.settings import Settings
from shared.protocols.api import health
from shared.protocols.readiness import bundle_problem, upload_command
from shared.purchase.catalog import BUNDLES, find_bundle
from shared.seams.bundle_files import BlobBundleFiles
from shared.seams.storage import container_client, table_client
from shared.seams.storage_probe import REUSE_SECONDS, StorageProbe
from tests.support import StoppedClock, new_ec_key, private_pem

KEYS = KeySet.load(private_pem(new_ec_key()))
READY = Settings()
UPLOADED, MISSING = "agent-starter-kit", "mcp-field-guide"


def _suffix() -> str:
    return uuid.uuid4().hex[:10]


def _probe(storage: str, files: BlobBundleFiles, clock=None, *, timeout=5.0, missing=None) -> StorageProbe:
    return StorageProbe(
        table_client(storage, f"idem{_suffix()}", 5),
        container_client(storage, f"rcpt{_suffix()}", 5),
        timeout=timeout,
        missing_bundles=missing or (lambda **options: files.missing(BUNDLES, **options)),
        **({"clock": clock} if clock else {}),
    )


def _health(probe: StorageProbe, settings: Settings = READY) -> tuple[int, dict]:
    answer = health(SimpleNamespace(settings=settings, keys=lambda: KEYS, storage=probe))
    return answer.status, json.loads(answer.body)


@pytest.fixture
def bundles(azurite):
    """A bundles container of this test's own holding one catalog bundle's file, not the other's."""
    container = container_client(azurite, f"bund{_suffix()}", 5)
    container.create_container()
    container.upload_blob(f"{UPLOADED}.zip", sample_bundle(find_bundle(UPLOADED)))
    return container


def test_health_names_the_bundle_without_a_file_and_how_to_upload_it(azurite, bundles):
    files = BlobBundleFiles(bundles)

    status, body = _health(_probe(azurite, files))

    assert status == 200, body  # the store still sells: the other bundle downloads
    assert body["status"] == "degraded"
    assert body["missing_bundles"] == [MISSING]
    (problem,) = body["problems"]
    assert f"bundle {MISSING} has no file {MISSING}.zip" in problem
    assert f"python -m devstack.seed_bundles --file {MISSING}=<path to the zip>" in problem
    assert UPLOADED not in problem
    assert files.read(UPLOADED) == sample_bundle(find_bundle(UPLOADED))


def test_uploading_the_file_clears_the_report(azurite, bundles):
    now = [100.0]
    probe = _probe(azurite, BlobBundleFiles(bundles), clock=lambda: now[0])
    assert _health(probe)[1]["missing_bundles"] == [MISSING]

    bundles.upload_blob(f"{MISSING}.zip", sample_bundle(find_bundle(MISSING)))
    now[0] += REUSE_SECONDS
    status, body = _health(probe)

    assert (status, body["status"], body["missing_bundles"], body["problems"]) == (200, "ok", [], [])


def test_a_missing_container_reports_every_bundle_missing(azurite):
    files = BlobBundleFiles(container_client(azurite, f"none{_suffix()}", 5))

    status, body = _health(_probe(azurite, files))

    assert (status, body["status"]) == (200, "degraded")
    assert body["missing_bundles"] == list(BUNDLES)


def test_a_blob_outage_reads_as_the_outage_not_as_missing_files(azurite):
    blob_port = azurite.split("BlobEndpoint=http://127.0.0.1:")[1].split("/")[0]
    blob_down = azurite.replace(f"127.0.0.1:{blob_port}", "127.0.0.1:9")  # nothing listens there
    files = BlobBundleFiles(container_client(blob_down, f"bund{_suffix()}", 5))
    probe = StorageProbe(
        table_client(azurite, f"idem{_suffix()}", 5),
        container_client(blob_down, f"rcpt{_suffix()}", 5),
        timeout=5.0,
        missing_bundles=lambda **options: files.missing(BUNDLES, **options),
    )

    status, body = _health(probe)

    assert (status, body["status"]) == (503, "unavailable")
    assert body["missing_bundles"] == []
    assert len(body["problems"]) == 1 and body["problems"][0].startswith("blob storage unreachable")


def test_a_flood_of_health_checks_looks_for_each_file_once(azurite, bundles):
    files, looked = BlobBundleFiles(bundles), []

    def missing(**options):
        looked.append(1)
        return files.missing(BUNDLES, **options)

    probe = StorageProbe(
        table_client(azurite, f"idem{_suffix()}", 5),
        container_client(azurite, f"rcpt{_suffix()}", 5),
        timeout=5.0,
        missing_bundles=missing,
        clock=lambda: 100.0,
    )
    answers = [_health(probe)[1]["missing_bundles"] for _ in range(20)]

    assert answers == [[MISSING]] * 20
    assert looked == [1]  # one existence check a bundle, for all twenty


def test_on_azure_the_upload_command_names_no_setting_value():
    """Health answers anyone: the command names the account by its azd value and the container by
    its role, never the storage account or container a setting holds."""
    settings = Settings(
        hosted_on_azure=True,
        storage_blob_uri="https://stabc123.blob.core.windows.net",
        bundles_container="secretbundles",
    )

    command = upload_command(settings, MISSING)
    problem = bundle_problem(settings, MISSING)

    account = '--account-name "$(azd env get-value AZURE_STORAGE_ACCOUNT_NAME)"'
    assert command.startswith(f"az storage blob upload --auth-mode login {account} ")
    assert f"--name {MISSING}.zip" in command
    for secret in ("stabc123", "secretbundles"):
        assert secret not in problem


def test_a_bundle_check_that_answers_late_never_changes_an_answer_already_given(azurite, bundles):
    """The check alone stalls past the probe's deadline: health says it did not answer and lists
    nothing missing; when the stalled call finishes later, the answer given stays as it was."""
    files, released, finished = BlobBundleFiles(bundles), threading.Event(), threading.Event()

    def stalled(**options):
        released.wait(10)
        try:
            return files.missing(BUNDLES, **options)
        finally:
            finished.set()

    clock = StoppedClock(100.0)
    probe = _probe(azurite, files, clock, timeout=0.5, missing=stalled)
    first = probe.problems(), probe.missing_bundles()
    released.set()
    assert finished.wait(10)
    still = probe.problems(), probe.missing_bundles()  # within REUSE_SECONDS: the same answer
    clock.now += REUSE_SECONDS
    later = probe.problems(), probe.missing_bundles()

    assert first == (["bundle files did not answer within 0.5 s"], [])
    assert still == first
    assert later == ([], [MISSING])
