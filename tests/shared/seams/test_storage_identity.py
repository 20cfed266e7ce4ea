"""Storage over an identity-based connection, for real: the app's own `ManagedIdentityCredential`
asks a local App Service identity endpoint (tests.identity) for tokens and takes them to Azurite
over HTTPS in OAuth mode, which accepts only tokens for https://storage.azure.com. No account key
is in the app's environment.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pytest
import requests
from azure.data.tables import TableClient

from devstack.ports import free_port
from devstack.run import DEV_ACCOUNT_KEY
from devstack.seed_bundles import sample_bundle
from devstack.services import dev_settings
from shared import runtime
from shared.config.errors import StorageOutage
from shared.config.hashing import Hasher
from shared.config.settings import Settings
from shared.protocols.api import Services
from shared.purchase.call import scoped_key_hash
from shared.purchase.catalog import find_bundle
from shared.seams.storage import container_client, table_client
from shared.seams.storage_probe import StorageProbe
from tests.identity import STORAGE_AUDIENCE, IdentityEndpoint
from tests.support import Buyer, fresh_python

CLIENT_ID = "3c1e9a52-7b4d-4e0f-9a61-2f8d5c7b1e04"
WRONG_AUDIENCE = "https://management.azure.com"
REFUSED_BY_EVERY_STORE = [
    "table storage refused the app's identity (403)",
    "blob storage refused the app's identity (403)",
    "queue storage refused the app's identity (403)",
]


def identity_settings(storage, **extra: str) -> dict[str, str]:
    """A user-assigned identity's settings, as on Azure, towards the HTTPS Azurite."""
    return {
        "AzureWebJobsStorage__credential": "managedidentity",
        "AzureWebJobsStorage__clientId": CLIENT_ID,
        "AzureWebJobsStorage__blobServiceUri": storage.blob_uri,
        "AzureWebJobsStorage__tableServiceUri": storage.table_uri,
        "AzureWebJobsStorage__queueServiceUri": storage.queue_uri,
        **extra,
    }


@pytest.fixture
def endpoint():
    served = IdentityEndpoint()
    yield served
    served.close()


@pytest.fixture
def on_azure(monkeypatch, azurite_tls):
    """This process as an app on App Service: a managed identity endpoint, and the test
    certificate trusted the way the dev host trusts it (REQUESTS_CA_BUNDLE)."""

    def configure(endpoint: IdentityEndpoint) -> None:
        for name, value in endpoint.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(azurite_tls.ca_bundle))

    return configure


def build(env: dict[str, str]) -> Services:
    suffix = uuid.uuid4().hex[:10]
    names = {
        "STOREFRONT_IDEMPOTENCY_TABLE": f"idem{suffix}",
        "STOREFRONT_LEDGER_TABLE": f"ledger{suffix}",
        "STOREFRONT_RECEIPTS_CONTAINER": f"rcpt{suffix}",
        "STOREFRONT_GOVERNANCE_TABLE": f"gov{suffix}",
        "STOREFRONT_CONTACT_QUEUE": f"contacts-{suffix}",
    }
    return runtime.build(Settings.from_env({**dev_settings(), "AzureWebJobsStorage": "", **names, **env}))


# --- in process: the credential, the clients and the probe -----------------------------------------


def test_every_storage_client_signs_in_with_the_user_assigned_identity(azurite_tls, endpoint, on_azure):
    on_azure(endpoint)
    services = build({**identity_settings(azurite_tls), **endpoint.env()})

    problems = services.storage.problems()
    backlog = services.storage.backlog()
    listing = services.ledger.day("2030-01-01", page_size=10, cursor=None)
    found = services.storefront.stored_receipt("rcpt_" + "a" * 26)
    drained = services.drainer.run()  # takes its lease (table), reads every shard (queue)

    assert problems == []
    assert backlog is not None and backlog.as_dict() == {"waiting": 0, "oldest_seconds": None, "poisoned": 0}
    assert listing.count == 0 and found is None
    assert (drained.handed, drained.stopped) == (0, "")
    assert {(r.resource, r.client_id, r.api_version, r.header_ok) for r in endpoint.requests} == {
        (STORAGE_AUDIENCE, CLIENT_ID, "2019-08-01", True)
    }
    assert len(endpoint.requests) == 1  # one credential, one cached token, for every client


def test_an_account_on_azure_without_credential_setting_uses_the_system_assigned_identity(
    azurite_tls, endpoint, on_azure
):
    on_azure(endpoint)
    env = identity_settings(azurite_tls, AzureWebJobsStorage__credential="", AzureWebJobsStorage__clientId="")
    services = build({**env, **endpoint.env()})

    assert services.storage.problems() == []
    assert [(r.resource, r.client_id) for r in endpoint.requests] == [(STORAGE_AUDIENCE, None)]


def test_a_token_for_another_audience_is_reported_as_refused_by_every_store(azurite_tls, on_azure):
    wrong = IdentityEndpoint(audience=WRONG_AUDIENCE)
    try:
        on_azure(wrong)
        services = build({**identity_settings(azurite_tls), **wrong.env()})

        problems = services.storage.problems()
        backlog = services.storage.backlog()
    finally:
        wrong.close()

    assert problems == REFUSED_BY_EVERY_STORE
    assert backlog is None


def test_an_identity_endpoint_that_does_not_answer_is_a_token_problem_within_the_timeout(
    azurite_tls, monkeypatch, on_azure
):
    silent = IdentityEndpoint()
    silent.close()
    on_azure(silent)
    services = build(
        {**identity_settings(azurite_tls), **silent.env(), "STOREFRONT_STORAGE_TIMEOUT_SECONDS": "2"}
    )

    started = time.monotonic()
    problems = services.storage.problems()
    took = time.monotonic() - started

    assert len(problems) == 1
    assert problems[0].startswith("the app's identity ")
    assert "storage token" in problems[0]
    assert took < 10  # a liveness bound, loose for a busy machine: unbounded, the SDK retries for a minute


def test_a_store_that_stalls_is_reported_within_the_storage_timeout(azurite):
    with _silent_listener() as port:
        table_port = azurite.split("TableEndpoint=http://127.0.0.1:")[1].split("/")[0]
        stalled = azurite.replace(f"127.0.0.1:{table_port}", f"127.0.0.1:{port}")
        # The clients would wait 10 s (and retry); the probe stops waiting at its own timeout.
        probe = StorageProbe(
            table_client(stalled, "idem" + uuid.uuid4().hex[:8], 10),
            container_client(azurite, "rcpt" + uuid.uuid4().hex[:8], 10),
            timeout=1.0,
        )
        started = time.monotonic()
        problems = probe.problems()
        took = time.monotonic() - started

    assert problems == ["table storage did not answer within 1 s"]
    assert took < 8  # a liveness bound, loose for a busy machine: the client alone waits 10 s, then retries


def test_health_probes_are_reused_for_a_moment_so_a_flood_costs_no_storage_calls(azurite):
    calls = []

    class Counting:
        def __init__(self, client):
            self._client = client

        def get_entity(self, *args, **kwargs):
            calls.append("table")
            return self._client.get_entity(*args, **kwargs)

        def get_container_properties(self, **kwargs):
            calls.append("blob")
            return self._client.get_container_properties(**kwargs)

    now = [100.0]
    probe = StorageProbe(
        Counting(table_client(azurite, "idem" + uuid.uuid4().hex[:8], 5)),
        Counting(container_client(azurite, "rcpt" + uuid.uuid4().hex[:8], 5)),
        timeout=5.0,
        clock=lambda: now[0],
    )

    for _ in range(20):
        assert probe.problems() == []
    now[0] += 2.0
    assert probe.problems() == []

    assert sorted(calls) == ["blob", "blob", "table", "table"]


def test_importing_the_app_with_identity_settings_does_not_import_azure_identity(azurite_tls):
    env = {
        **os.environ,
        "AzureWebJobsStorage": "",
        **identity_settings(azurite_tls),
        "IDENTITY_ENDPOINT": "http://127.0.0.1:9/msi/token",
    }
    code = "import sys, function_app; print('azure.identity' in sys.modules)"

    result = fresh_python(code, env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# --- end to end: a dev host with identity settings only --------------------------------------------


def _no_account_key(host) -> None:
    seen = {**os.environ, **host.env}
    assert not any(DEV_ACCOUNT_KEY in value or "AccountKey" in value for value in seen.values())
    assert seen["AzureWebJobsStorage"] == ""


def test_the_whole_purchase_flow_runs_on_the_managed_identity_without_an_account_key(
    host_factory, azurite_tls, endpoint, mail
):
    host = host_factory(
        AzureWebJobsStorage="",
        REQUESTS_CA_BUNDLE=str(azurite_tls.ca_bundle),
        STOREFRONT_IDEMPOTENCY_TTL_SECONDS="3",
        **identity_settings(azurite_tls),
        **endpoint.env(),
    )
    _no_account_key(host)
    buyer = Buyer(host.url)
    payload = {"email": buyer.email, "bundle_id": "mcp-field-guide", "idempotency_key": buyer.key}

    health = buyer.http.get(f"{host.url}/api/health", timeout=10)
    first = buyer.purchase(payload)
    replay = buyer.purchase(payload)
    receipt = first.json()
    page = buyer.http.get(f"{host.url}/api/receipts/{receipt['receipt_id']}", timeout=10)
    link = next(link for link in mail.emails_to(buyer.email)[0]["links"] if "/api/download/" in link)
    download = buyer.http.get(link.replace("http://localhost:7071", host.url), timeout=10)
    listing = buyer.http.get(
        f"{host.url}/api/receipts", params={"date": receipt["issued_at"][:10]}, timeout=10
    )
    contact = _drained_contact(host, mail, buyer.email)
    time.sleep(3.5)  # the key's 3 s retention passes
    claim_before = _has_claim(azurite_tls, buyer)
    reaped = requests.post(f"{host.url}/admin/functions/reap_idempotency_keys", json={}, timeout=30)
    claim_after = _has_claim(azurite_tls, buyer)

    assert (health.status_code, health.json()["status"]) == (200, "ok")
    assert set(health.json()["contacts"]) == {"waiting", "oldest_seconds", "poisoned"}
    assert first.status_code == 200, first.text
    assert receipt["status"] == "fulfilled"
    assert (replay.content, replay.headers.get("Idempotent-Replayed")) == (first.content, "true")
    assert page.status_code == 200 and page.content == first.content
    assert download.status_code == 200
    assert download.content == sample_bundle(find_bundle("mcp-field-guide"))
    assert receipt["receipt_id"] in [entry["receipt_id"] for entry in listing.json()["receipts"]]
    assert reaped.status_code == 202
    assert (claim_before, claim_after) == (True, False)
    assert len(mail.emails_to(buyer.email)) == 1
    assert contact is not None  # queued over the identity, drained from the queue over it too
    assert {(r.resource, r.client_id, r.header_ok) for r in endpoint.requests} == {
        (STORAGE_AUDIENCE, CLIENT_ID, True)
    }


def test_a_token_for_the_wrong_audience_is_a_503_health_and_purchases_fail_cleanly(
    host_factory, azurite_tls, mail
):
    wrong = IdentityEndpoint(audience=WRONG_AUDIENCE)
    host = host_factory(
        AzureWebJobsStorage="",
        REQUESTS_CA_BUNDLE=str(azurite_tls.ca_bundle),
        STOREFRONT_STORAGE_TIMEOUT_SECONDS="2",
        **identity_settings(azurite_tls),
        **wrong.env(),
    )
    buyer = Buyer(host.url)

    health = buyer.http.get(f"{host.url}/api/health", timeout=10)
    keyed = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})
    unkeyed = buyer.purchase({"email": buyer.email})
    wrong.close()

    assert health.status_code == 503
    assert health.headers["Cache-Control"] == "no-store"
    assert health.json()["status"] == "unavailable"
    assert health.json()["problems"] == REFUSED_BY_EVERY_STORE
    assert health.json()["contacts"] is None
    for refused in (keyed, unkeyed):
        assert refused.status_code == 503, refused.text
        assert refused.headers["Content-Type"].startswith("application/json")
        assert refused.json()["error"]["code"] == "store_unavailable"
    assert mail.emails_to(buyer.email) == []
    assert "Traceback" not in host.log()


def _drained_contact(host, mail, email: str, within: float = 30) -> dict | None:
    """The buyer's Brevo contact once the host's drainer has taken it off the queue. A run can
    find the lease held by the timer's own run and do nothing, so ask again until it shows."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        requests.post(f"{host.url}/admin/functions/drain_contacts", json={}, timeout=30)
        contact = mail.contact(email)
        if contact is not None:
            return contact
        time.sleep(0.5)
    return None


def _has_claim(storage, buyer: Buyer) -> bool:
    """Whether the HTTPS Azurite holds the buyer's idempotency claim (read with the test's key)."""
    table = TableClient.from_connection_string(
        storage.connection_string, "idempotency", connection_verify=str(storage.ca_bundle)
    )
    key_hash = scoped_key_hash(Hasher(dev_settings()["STOREFRONT_HASH_SECRET"]), buyer.key, buyer.email)
    return any(True for _ in table.query_entities("PartitionKey eq @k", parameters={"k": key_hash}))


class _silent_listener:
    """A port that accepts connections and never answers."""

    def __enter__(self) -> int:
        import socket

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", free_port()))
        self._socket.listen(16)
        return self._socket.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self._socket.close()


class _Garbage:
    """An identity endpoint that answers 503 with a body that is not JSON, as a broken proxy in
    front of it might."""

    def __init__(self) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def env(self) -> dict[str, str]:
        return {
            "IDENTITY_ENDPOINT": f"http://127.0.0.1:{self._server.server_address[1]}/msi/token",
            "IDENTITY_HEADER": "header",
        }

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _buy(services: Services) -> tuple[int, dict]:
    from shared.protocols import api
    from shared.protocols.http import Request

    body = json.dumps({"email": "ada@example.org", "idempotency_key": f"k-{uuid.uuid4().hex}"}).encode()
    answer = api.purchase(
        Request("POST", {"x-forwarded-for": "203.0.113.9:1"}, body),
        services.storefront,
        services.settings,
    )
    return answer.status, json.loads(answer.body)


def test_an_identity_endpoint_answering_garbage_makes_purchases_503_not_500(azurite_tls, monkeypatch):
    garbage = _Garbage()
    try:
        for name, value in garbage.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(azurite_tls.ca_bundle))
        services = build({**identity_settings(azurite_tls), "STOREFRONT_STORAGE_TIMEOUT_SECONDS": "2"})
        status, receipt = _buy(services)
        with pytest.raises(StorageOutage):
            services.storefront.stored_receipt("rcpt_" + uuid.uuid4().hex)
    finally:
        garbage.close()

    assert status == 503
    assert receipt["error"]["code"] == "store_unavailable"


def test_an_identity_endpoint_that_accepts_and_never_answers_fails_a_purchase_instead_of_hanging_it(
    azurite_tls, monkeypatch
):
    with _silent_listener() as port:
        monkeypatch.setenv("IDENTITY_ENDPOINT", f"http://127.0.0.1:{port}/msi/token")
        monkeypatch.setenv("IDENTITY_HEADER", "header")
        services = build({**identity_settings(azurite_tls), "STOREFRONT_STORAGE_TIMEOUT_SECONDS": "1"})
        answered: list[tuple[int, dict]] = []
        buying = threading.Thread(target=lambda: answered.append(_buy(services)), daemon=True)
        buying.start()
        buying.join(timeout=30)  # the identity client's own defaults would wait minutes

    assert answered and answered[0][0] == 503


class _Gated:
    """A table client whose probe call waits until the test opens the gate."""

    def __init__(self, client):
        self._client, self.gate, self.entered, self.calls = client, threading.Event(), threading.Event(), 0

    def get_entity(self, *args, **kwargs):
        self.calls += 1
        self.entered.set()
        self.gate.wait(30)
        return self._client.get_entity(*args, **kwargs)


def test_callers_during_a_probe_get_the_last_result_instead_of_queueing_behind_it(azurite):
    table = _Gated(table_client(azurite, "idem" + uuid.uuid4().hex[:8], 5))
    now = [100.0]
    probe = StorageProbe(
        table, container_client(azurite, "rcpt" + uuid.uuid4().hex[:8], 5), timeout=5.0, clock=lambda: now[0]
    )
    table.gate.set()
    assert probe.problems() == []
    table.gate.clear()
    table.entered.clear()
    now[0] += 3
    running = threading.Thread(target=probe.problems)
    running.start()
    table.entered.wait(10)

    during = probe.problems()  # queued behind the probe, it would get "did not answer within 5 s"
    table.gate.set()
    running.join()

    assert during == []


def test_a_store_that_hangs_has_one_probe_call_in_flight_however_often_health_is_asked(azurite):
    table = _Gated(table_client(azurite, "idem" + uuid.uuid4().hex[:8], 5))
    now = [100.0]
    probe = StorageProbe(
        table, container_client(azurite, "rcpt" + uuid.uuid4().hex[:8], 5), timeout=0.2, clock=lambda: now[0]
    )
    answers = []
    for _ in range(4):
        answers.append(probe.problems())
        now[0] += 3
    table.gate.set()

    assert answers == [["table storage did not answer within 0.2 s"]] * 4
    assert table.calls == 1
