"""Telemetry as Application Insights receives it: a dev host with the connection string pointed at a
local capture server, which answers as the ingestion API does and keeps every envelope the real
exporter posts. Buying over HTTP and MCP, a replay, a refusal, a purchase with Table down and a
download; then the envelopes are read: requests, dependencies, counters, and nothing private.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import ssl
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from devstack.ports import free_port
from devstack.run import DEV_ACCOUNT_KEY
from devstack.services import dev_settings
from tests.identity import IdentityEndpoint, self_signed_certificate
from tests.support import ROOT, UNKNOWN_BUNDLE_ID, Buyer, fresh_python, unique_email

PURCHASE = "storefront.purchase"
DEPENDENCY = "storefront.dependency"


class Ingestion(ThreadingHTTPServer):
    """The ingestion endpoint on loopback: every POST is kept (gzip undone) and answered 200 with
    the Breeze API's JSON, so the exporter counts its items accepted and never retries."""

    daemon_threads = True

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _IngestionHandler)
        self.scheme = "http"
        if tls is not None:  # Entra ID tokens are only ever sent over TLS
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.socket = context.wrap_socket(self.socket, server_side=True)
            self.scheme = "https"
        self.posts: list[tuple[str, bytes]] = []
        self.authorizations: list[tuple[str, str]] = []  # (path, Authorization header) of each POST
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}/"

    def connection_string(self) -> str:
        return f"InstrumentationKey={uuid.uuid4()};IngestionEndpoint={self.url};LiveEndpoint={self.url}"

    def envelopes(self) -> Envelopes:
        with self.lock:
            return Envelopes(list(self.posts))


class _IngestionHandler(BaseHTTPRequestHandler):
    server: Ingestion

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        with self.server.lock:
            self.server.posts.append((self.path, body))
            self.server.authorizations.append((self.path, self.headers.get("Authorization", "")))
        items = _items(body) if self.path.startswith("/v2.1/track") else []
        answer = json.dumps({"itemsReceived": len(items), "itemsAccepted": len(items), "errors": []})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


def _items(body: bytes) -> list[dict]:
    text = body.decode()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass
class Envelopes:
    """What the exporter posted: `raw` (path and body of every POST, live metrics pings included)
    and the track envelopes' data by kind."""

    raw: list[tuple[str, bytes]]
    items: list[dict] = field(init=False)

    def __post_init__(self) -> None:
        self.items = [
            item for path, body in self.raw if path.startswith("/v2.1/track") for item in _items(body)
        ]

    def of(self, base_type: str) -> list[dict]:
        """Each envelope of this kind as its base data, with its tags under "tags"."""
        return [
            {**item["data"]["baseData"], "tags": item.get("tags", {})}
            for item in self.items
            if item["data"]["baseType"] == base_type
        ]

    def purchases(self) -> list[dict]:
        return [r for r in self.of("RequestData") if r["name"] == PURCHASE]

    def purchase(self, receipt_id: str, replayed: bool = False) -> dict:
        found = [
            r
            for r in self.purchases()
            if r["properties"].get("storefront.receipt_id") == receipt_id
            and r["properties"].get("storefront.replayed") == str(replayed)
        ]
        assert len(found) == 1, (receipt_id, replayed, found)
        return found[0]

    def counted(self, name: str) -> Counter:
        """The counter's total per set of dimensions, over every export."""
        totals: Counter = Counter()
        for data in self.of("MetricData"):
            for metric in data["metrics"]:
                if metric["name"] == name:
                    totals[frozenset(data.get("properties", {}).items())] += metric["value"]
        return totals

    def text(self) -> str:
        return "\n".join(f"{path}\n{body.decode(errors='replace')}" for path, body in self.raw)


def counted(**dimensions: str) -> frozenset:
    return frozenset(dimensions.items())


@contextmanager
def receiving(tls: tuple[Path, Path] | None = None) -> Iterator[Ingestion]:
    server = Ingestion(tls)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def exporting(ingestion: Ingestion) -> dict[str, str]:
    """Settings that make the real exporter post to `ingestion` within a second."""
    return {
        "APPLICATIONINSIGHTS_CONNECTION_STRING": ingestion.connection_string(),
        "APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_BLRP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
        # As an operator might set it: every header of every outgoing call (Brevo's api-key among them).
        "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST": ".*",
        "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE": ".*",
    }


@dataclass
class Shopping:
    """The receipts the buyers got, what must never be exported, and every envelope the host sent."""

    keyed: dict
    refused: dict
    over_mcp: dict
    over_a2a: dict
    degraded: dict
    private: list[str]
    envelopes: Envelopes


def checks_of(receipt: dict) -> dict[str, str]:
    return {f"storefront.check.{c['name']}": c["result"] for c in receipt["checks"]}


@pytest.fixture(scope="module")
def table_proxy(azurite) -> Iterator[FaultProxy]:
    proxy = FaultProxy(endpoint_port(azurite, "Table")).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def shopping(host_factory, azurite, table_proxy, mail) -> Iterator[Shopping]:
    """A keyed purchase, its replay, a refusal, an MCP purchase, a purchase with Table down, and a
    download, on a host exporting to a local ingestion endpoint; stopped once all is in."""
    with receiving() as ingestion:
        host = host_factory(AzureWebJobsStorage=proxied(azurite, table=table_proxy), **exporting(ingestion))
        keyed, refused, mcp, degraded, agent = buyers = [Buyer(host.url) for _ in range(5)]

        first = keyed.purchase(headers={"Idempotency-Key": keyed.key})
        again = keyed.purchase(headers={"Idempotency-Key": keyed.key})
        no = refused.purchase({"email": refused.email, "bundle_id": UNKNOWN_BUNDLE_ID})
        tool = mcp.call_tool({"email": mcp.email, "idempotency_key": mcp.key})
        a2a = _send_a2a(agent)
        read_back = _get_a2a_task(agent, a2a.json()["result"]["task"]["id"])  # reading buys nothing
        table_proxy.set("cut")
        try:
            open_governance = degraded.purchase()
        finally:
            table_proxy.set("pass")
        link = next(u for u in mail.emails_to(keyed.email)[0]["links"] if "/api/download/" in u)
        token = link.rsplit("/", 1)[1]
        download = keyed.http.get(f"{host.url}/api/download/{token}", timeout=30)

        assert (first.status_code, again.headers.get("Idempotent-Replayed")) == (200, "true"), first.text
        assert (no.status_code, tool.status_code, open_governance.status_code) == (422, 200, 200)
        assert a2a.status_code == read_back.status_code == 200, a2a.text
        assert download.status_code == 200
        assert "degraded" in checks_of(open_governance.json()).values()
        _wait_for(ingestion, purchases=6, counter="storefront.degraded_checks")
        host.stop()  # a graceful stop flushes whatever is left, so the search sees it all
        yield Shopping(
            keyed=first.json(),
            refused=no.json(),
            over_mcp=tool.json()["result"]["structuredContent"],
            over_a2a=a2a.json()["result"]["task"]["artifacts"][0]["parts"][0]["data"],
            degraded=open_governance.json(),
            private=_private(buyers, token),
            envelopes=ingestion.envelopes(),
        )


def _send_a2a(buyer: Buyer):
    """An A2A 1.0 SendMessage whose data part is the purchase (its messageId is the key)."""
    message = {
        "messageId": buyer.key,
        "role": "ROLE_USER",
        "parts": [{"data": {"email": buyer.email}, "mediaType": "application/json"}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return buyer.http.post(f"{buyer.host}/api/a2a", json=body, headers={"A2A-Version": "1.0"}, timeout=30)


def _get_a2a_task(buyer: Buyer, task_id: str):
    body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    return buyer.http.post(f"{buyer.host}/api/a2a", json=body, headers={"A2A-Version": "1.0"}, timeout=30)


def _private(buyers: list[Buyer], token: str) -> list[str]:
    """Each buyer's email (raw and percent-encoded), key and address, the token, every secret."""
    settings = dev_settings()
    pem_line = settings["STOREFRONT_SIGNING_KEY"].split("\\n")[2]
    values = [token, DEV_ACCOUNT_KEY, pem_line, settings["BREVO_API_KEY"], settings["STOREFRONT_HASH_SECRET"]]
    for buyer in buyers:
        values += [buyer.email, quote(buyer.email), buyer.key, buyer.address]
    return values


def _wait_for(ingestion: Ingestion, purchases: int, counter: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        envelopes = ingestion.envelopes()
        if len(envelopes.purchases()) >= purchases and envelopes.counted(counter):
            return
        time.sleep(0.1)


def test_each_purchase_is_one_request_carrying_its_receipt(shopping):
    envelopes, keyed = shopping.envelopes, shopping.keyed

    request = envelopes.purchase(keyed["receipt_id"])
    replay = envelopes.purchase(keyed["receipt_id"], replayed=True)
    refused = envelopes.purchase(shopping.refused["receipt_id"])
    over_mcp = envelopes.purchase(shopping.over_mcp["receipt_id"])
    over_a2a = envelopes.purchase(shopping.over_a2a["receipt_id"])
    degraded = envelopes.purchase(shopping.degraded["receipt_id"])

    assert len(envelopes.purchases()) == 6
    assert (request["responseCode"], request["success"]) == ("200", True)
    assert request["properties"] == {
        "storefront.channel": "http",
        "storefront.receipt_id": keyed["receipt_id"],
        "storefront.status": "fulfilled",
        "storefront.replayed": "False",
        **checks_of(keyed),
    }
    assert len(checks_of(keyed)) == 6
    assert (replay["responseCode"], replay["properties"]["storefront.status"]) == ("200", "fulfilled")
    assert (refused["responseCode"], refused["success"]) == ("422", False)
    assert refused["properties"]["storefront.status"] == "refused"
    assert (
        refused["properties"]["storefront.error_code"]
        == shopping.refused["error"]["code"]
        == "unknown_bundle"
    )
    assert refused["properties"].items() >= checks_of(shopping.refused).items()
    assert over_mcp["properties"]["storefront.channel"] == "mcp"
    assert over_mcp["responseCode"] == "200"
    assert (
        over_a2a["properties"].items()
        >= {"storefront.channel": "a2a", **checks_of(shopping.over_a2a)}.items()
    )
    assert degraded["properties"].items() >= checks_of(shopping.degraded).items()


def test_brevo_table_blob_and_queue_calls_are_dependencies_inside_their_purchase(shopping):
    envelopes = shopping.envelopes
    request = envelopes.purchase(shopping.keyed["receipt_id"])
    operation = request["tags"]["ai.operation.id"]
    inside = [d for d in envelopes.of("RemoteDependencyData") if d["tags"]["ai.operation.id"] == operation]
    parents = {d["id"]: d["tags"].get("ai.operation.parentId") for d in inside}

    def under_request(span_id: str) -> bool:
        while span_id in parents:
            span_id = parents[span_id]
        return span_id == request["id"]

    calls = [d for d in inside if d["type"] == "HTTP"]
    brevo = sorted(d["name"] for d in calls if d["properties"].get(DEPENDENCY) == "brevo")
    queue = [d["name"] for d in calls if d["properties"].get(DEPENDENCY) == "queue"]
    assert brevo == ["POST /v3/smtp/email"]  # the contact is queued (one call), made later by the drainer
    assert len(queue) == 1 and queue[0].startswith("POST ") and queue[0].endswith("/messages"), queue
    assert {d["properties"].get(DEPENDENCY) for d in calls} == {"brevo", "table", "blob", "queue"}
    assert all(under_request(d["id"]) for d in inside)
    assert all(
        d["tags"]["ai.operation.parentId"] == request["id"]
        for d in calls
        if "brevo" in d["properties"].values()
    )
    assert request["tags"].get("ai.operation.parentId") is None


def test_counters_count_purchases_refusals_degraded_checks_and_replays(shopping):
    envelopes = shopping.envelopes
    degraded = [c["name"] for c in shopping.degraded["checks"] if c["result"] == "degraded"]

    assert envelopes.counted("storefront.purchases") == {
        counted(status="fulfilled", channel="http"): 2,
        counted(status="refused", channel="http"): 1,
        counted(status="fulfilled", channel="mcp"): 1,
        counted(status="fulfilled", channel="a2a"): 1,
    }
    assert envelopes.counted("storefront.refusals") == {
        counted(error_code="unknown_bundle", channel="http"): 1
    }
    assert envelopes.counted("storefront.replays") == {counted(status="fulfilled", channel="http"): 1}
    assert envelopes.counted("storefront.degraded_checks") == {
        counted(check=name, channel="http"): 1 for name in degraded
    }


def test_no_envelope_carries_an_email_key_address_token_or_secret(shopping):
    text = shopping.envelopes.text()

    assert len(shopping.envelopes.of("MessageData")) > 0  # log records were exported and searched too
    assert [value for value in shopping.private if value in text] == []


BREVO_LOOKUP = """
import logging, os, requests
from shared.seams import telemetry
from shared.seams.brevo import BrevoClient
from shared.config.errors import StorefrontError

assert telemetry.configure()
email, token = os.environ["LOOKUP_EMAIL"], os.environ["LOOKUP_TOKEN"]
BrevoClient(requests.Session(), os.environ["BREVO_BASE_URL"], "key", 5).find_sent(email, "tag")
try:
    BrevoClient(requests.Session(), os.environ["DEAD_BREVO_URL"], "key", 5).find_sent(email, "tag")
except StorefrontError:
    pass
logging.getLogger("storefront.purchase").warning("no email to %s, link /api/download/%s", email, token)
"""


def test_a_brevo_log_lookup_is_traced_without_the_email_in_its_url_error_or_log(sandbox):
    """The lookup puts the address in its query string, and a refused connection quotes that URL
    in the exception it records; the app's own log lines pass the same scrub."""
    email, token = unique_email("lookup"), "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
    dead = f"http://127.0.0.1:{free_port()}/v3"
    env = {
        "BREVO_BASE_URL": f"{sandbox.url}/v3",
        "DEAD_BREVO_URL": dead,
        "LOOKUP_EMAIL": email,
        "LOOKUP_TOKEN": token,
    }

    with receiving() as ingestion:
        done = fresh_python(BREVO_LOOKUP, {**os.environ, **exporting(ingestion), **env})
        envelopes = ingestion.envelopes()

    assert done.returncode == 0, done.stderr
    lookups = [d for d in envelopes.of("RemoteDependencyData") if d["name"] == "GET /v3/smtp/emails"]
    failures = [e["exceptions"][0]["message"] for e in envelopes.of("ExceptionData")]
    logged = [m["message"] for m in envelopes.of("MessageData") if m["message"].startswith("no email to")]
    query = "email=<redacted>&sort=<redacted>&limit=<redacted>&offset=<redacted>"
    assert {(d["data"], d["properties"].get(DEPENDENCY)) for d in lookups} == {
        (f"{sandbox.url}/v3/smtp/emails?{query}", "brevo"),
        (f"{dead}/smtp/emails?{query}", None),
    }
    assert any(f"url: /v3/smtp/emails?{query}" in message for message in failures), failures
    assert logged == ["no email to <email>, link /api/download/<token>"]
    assert [v for v in (email, quote(email), token) if v in envelopes.text()] == []


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        (
            "GET /v3/smtp/emails?email=ada%40example.org&sort=desc",
            "GET /v3/smtp/emails?email=<redacted>&sort=<redacted>",
        ),
        ("no email to ada.l+1@example.co.uk today", "no email to <email> today"),
        ("ada%40example.org", "<email>"),
        (
            "https://shop.example/api/download/abc.def.ghi?x=1",
            "https://shop.example/api/download/<token>?x=<redacted>",
        ),
        ("token eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln here", "token <token> here"),
        ("PUT /devstoreaccount1/receipts/rcpt_abc.json", "PUT /devstoreaccount1/receipts/rcpt_abc.json"),
    ],
)
def test_scrub_replaces_addresses_query_values_and_tokens_and_keeps_the_rest(text, scrubbed):
    from shared.seams.telemetry import scrub

    assert scrub(text) == scrubbed


def test_scrubbed_attributes_never_keep_headers_or_the_client_address():
    from shared.seams.telemetry import scrub_attributes

    attributes = {
        "http.request.header.api-key": ("dev-sandbox-key",),
        "http.response.header.set-cookie": ("session",),
        "client.address": "203.0.113.9",
        "http.client_ip": "203.0.113.9",
        "url.full": "http://brevo/v3/smtp/emails?email=ada%40example.org",
        "http.response.status_code": 200,
    }

    assert scrub_attributes(attributes) == {
        "url.full": "http://brevo/v3/smtp/emails?email=<redacted>",
        "http.response.status_code": 200,
    }


def test_without_a_connection_string_the_app_imports_no_telemetry_package():
    probe = (
        "import sys, function_app\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'azure.monitor'))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "APPLICATIONINSIGHTS_CONNECTION_STRING"}

    result = fresh_python(probe, env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_functions_host_sends_its_own_telemetry_as_opentelemetry():
    config = json.loads((ROOT / "host.json").read_text())

    assert config["telemetryMode"] == "OpenTelemetry"
    assert config["logging"]["logLevel"]["default"] == "Warning"
    assert config["extensions"]["http"]["routePrefix"] == ""  # every route spells api/ itself


def test_with_entra_id_authentication_the_exporter_signs_in_as_the_managed_identity(host_factory, tmp_path):
    """infra/ turns local auth off and sets APPLICATIONINSIGHTS_AUTHENTICATION_STRING, which the
    exporter reads itself: every export then carries the user-assigned identity's token."""
    identity = IdentityEndpoint()
    client_id = str(uuid.uuid4())
    certificate, key = self_signed_certificate(tmp_path)
    try:
        with receiving(tls=(certificate, key)) as ingestion:
            host = host_factory(
                **exporting(ingestion),
                **identity.env(),
                APPLICATIONINSIGHTS_AUTHENTICATION_STRING=f"Authorization=AAD;ClientId={client_id}",
                REQUESTS_CA_BUNDLE=str(certificate),
            )
            assert Buyer(host.url).purchase().status_code == 200
            _wait_for(ingestion, purchases=1, counter="storefront.purchases")
            host.stop()
            signed = [auth for path, auth in ingestion.authorizations if path.startswith("/v2.1/track")]
    finally:
        identity.close()

    assert signed and all(auth.startswith("Bearer ") for auth in signed)
    audience = json.loads(base64.urlsafe_b64decode(signed[0].split()[1].split(".")[1] + "=="))["aud"]
    assert audience.startswith("https://monitor.azure.com")
    assert {(r.client_id, r.resource.startswith("https://monitor.azure.com")) for r in identity.requests} == {
        (client_id, True)
    }


@pytest.mark.parametrize(
    "connection_string",
    [
        "garbage",
        "InstrumentationKey=;IngestionEndpoint=",
        "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/ai)",
    ],
)
def test_an_unusable_connection_string_leaves_the_app_serving_without_telemetry(connection_string):
    probe = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.ERROR, stream=sys.stdout, format='%(message)s')\n"
        "import function_app\n"
        "from shared.seams import telemetry\n"
        "print('configured' if telemetry._telemetry else 'off', len(function_app.app.get_functions()))\n"
    )
    env = {**os.environ, "APPLICATIONINSIGHTS_CONNECTION_STRING": connection_string}

    result = fresh_python(probe, env)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("off ") and int(lines[-1].split()[1]) > 0
    assert any(line.startswith("APPLICATIONINSIGHTS_CONNECTION_STRING is ") for line in lines)
    assert connection_string not in result.stdout + result.stderr
