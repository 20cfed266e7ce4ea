"""The Functions entry point as the host loads it."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import requests

from shared.protocols import api
from tests.support import HANG_SECONDS, ROOT, fresh_python


@pytest.fixture(scope="module")
def functions() -> list:
    """The app's functions; `get_functions()` may be called only once per process."""
    import function_app

    return function_app.app.get_functions()


EVERY_METHOD = ["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"]


def test_every_route_lists_every_method_so_azure_never_answers_an_empty_404(functions):
    routes = {
        f.get_function_name(): (
            f.get_trigger().route,
            sorted(str(m).split(".")[-1] for m in f.get_trigger().methods),
        )
        for f in functions
        if f.is_http_function()
    }
    timers = {f.get_function_name(): f.get_trigger().schedule for f in functions if not f.is_http_function()}
    assert routes == {
        "mcp_endpoint": ("api/a2a/mcp", EVERY_METHOD),
        "purchase": ("api/a2a/purchase", EVERY_METHOD),
        "receipt": ("api/receipts/{receipt_id}", EVERY_METHOD),
        "receipts_of_day": ("api/receipts", EVERY_METHOD),
        "jwks": ("api/.well-known/jwks.json", EVERY_METHOD),
        "jwks_at_root": (".well-known/jwks.json", EVERY_METHOD),
        "bundles": ("api/bundles", EVERY_METHOD),
        "download": ("api/download/{token}", EVERY_METHOD),
        "openapi_document": ("api/openapi.json", EVERY_METHOD),
        "health": ("api/health", EVERY_METHOD),
        "agent_card": (".well-known/agent-card.json", EVERY_METHOD),
        "a2a_endpoint": ("api/a2a", EVERY_METHOD),
        "ucp_profile": (".well-known/ucp", EVERY_METHOD),
        "ucp_catalog": ("ucp/catalog/{operation}", EVERY_METHOD),
        "ucp_checkouts": ("ucp/checkout-sessions", EVERY_METHOD),
        "ucp_checkout": ("ucp/checkout-sessions/{id}", EVERY_METHOD),
        "ucp_checkout_action": ("ucp/checkout-sessions/{id}/{action}", EVERY_METHOD),
        "ucp_order": ("ucp/orders/{id}", EVERY_METHOD),
        "ucp_mcp": ("ucp/mcp", EVERY_METHOD),
        "zz_unknown_route": ("{*path}", EVERY_METHOD),
    }
    assert timers == {
        "reap_idempotency_keys": "0 */15 * * * *",
        "repair_receipts": "0 */5 * * * *",
        "drain_contacts": "*/10 * * * * *",  # six fields: every 10 seconds
        "deliver_order_webhooks": "0 * * * * *",
    }


WRONG_METHODS = [
    ("a2a/purchase", "POST", ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    ("receipts/rcpt_3356oymxvrlcnfepn66by6fqyy", "GET, HEAD", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    ("receipts?date=2026-11-30", "GET, HEAD", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    (".well-known/jwks.json", "GET, HEAD", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    ("bundles", "GET, HEAD", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    ("download/a.b.c", "GET, HEAD", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    ("openapi.json", "GET, HEAD", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    ("health", "GET, HEAD", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
    ("a2a", "POST", ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"]),
]


@pytest.mark.parametrize(
    ("path", "allow", "methods"), WRONG_METHODS, ids=[w[0].split("?")[0] for w in WRONG_METHODS]
)
def test_a_wrong_method_is_405_with_allow_and_how_to_call_the_route(host, path, allow, methods):
    for method in methods:
        answer = requests.request(method, f"{host.url}/api/{path}", timeout=10)

        assert answer.status_code == 405, (method, answer.status_code)
        assert answer.headers["Allow"] == allow
        assert answer.headers["Content-Type"] == "application/json"
        if method != "HEAD":
            error = answer.json()["error"]
            assert error["code"] == "method_not_allowed"
            assert error["allow"] == allow.split(", ")
            assert error["message"].startswith(f"this endpoint answers {allow} only; ")
            assert error["docs"] == "README.md#endpoints"


def test_a_get_on_the_purchase_url_make_run_prints_says_to_post_json(host):
    answer = requests.get(f"{host.url}/api/a2a/purchase", timeout=10)

    assert answer.status_code == 405
    assert answer.json()["error"]["message"] == (
        "this endpoint answers POST only; POST a JSON body such as "
        '{"email": "ada@example.org"} with Content-Type: application/json'
    )


@pytest.mark.parametrize("path", [".well-known/jwks.json", "health", "receipts?date=2026-11-30"])
def test_head_on_a_get_route_answers_as_get_without_a_body(host, path):
    get = requests.get(f"{host.url}/api/{path}", timeout=10)
    head = requests.head(f"{host.url}/api/{path}", timeout=10)

    assert head.status_code == get.status_code == 200
    assert head.headers["Content-Type"] == get.headers["Content-Type"]
    assert head.headers["Content-Length"] == str(len(get.content))
    assert head.content == b""


def test_mcp_answers_every_method_but_post_with_a_jsonrpc_405(host):
    for method in ("GET", "PUT", "PATCH", "DELETE", "OPTIONS"):
        answer = requests.request(method, f"{host.url}/api/a2a/mcp", timeout=10)

        assert (answer.status_code, answer.headers["Allow"]) == (405, "POST")
        assert answer.json()["error"]["code"] == -32600


def test_a_method_no_trigger_can_list_is_still_404_as_on_azure(host):
    assert requests.request("TRACE", f"{host.url}/api/a2a/purchase", timeout=10).status_code == 404


def test_the_catch_all_route_is_tried_last_as_the_functions_host_orders_routes(functions):
    # The host sorts functions by name, ignoring case, and serves the first route that matches
    # (azure-functions-host FunctionMetadataManager and WebJobsRouter): a catch-all whose name
    # sorted earlier would answer 404 for every route after it.
    http = [f for f in functions if f.is_http_function()]
    order = sorted(http, key=lambda f: f.get_function_name().upper())

    assert order[-1].get_trigger().route == "{*path}"
    assert [f.get_trigger().route for f in http].count("{*path}") == 1


def test_an_unknown_path_is_told_every_route_but_the_catch_all(functions):
    routes = {"/" + f.get_trigger().route for f in functions if f.is_http_function()} - {"/{*path}"}

    assert {endpoint.split(" ")[1].split("?")[0] for endpoint in api.ENDPOINTS} == routes
    assert len(api.ENDPOINTS) == len(routes)


def test_only_the_finance_day_listing_needs_a_function_key(functions):
    levels = {
        f.get_function_name(): str(f.get_trigger().auth_level).split(".")[-1]
        for f in functions
        if f.is_http_function()
    }
    assert levels.pop("receipts_of_day") == "FUNCTION"
    assert set(levels) == {"mcp_endpoint", "purchase", "receipt", "jwks", "download", "health"} | {
        "jwks_at_root",
        "bundles",
        "openapi_document",
        "agent_card",
        "a2a_endpoint",
        "ucp_profile",
        "ucp_catalog",
        "ucp_checkouts",
        "ucp_checkout",
        "ucp_checkout_action",
        "ucp_order",
        "ucp_mcp",
        "zz_unknown_route",
    }
    assert set(levels.values()) == {"ANONYMOUS"}


def test_query_parameters_and_route_parameters_reach_the_domain_request():
    import azure.functions as func

    import function_app

    req = func.HttpRequest(
        "GET",
        "http://localhost/api/receipts?date=2026-11-30&page_size=2",
        headers={"Accept": "text/html"},
        params={"date": "2026-11-30", "page_size": "2"},
        route_params={"token": "a.b.c"},
        body=b"",
    )

    request = function_app._request(req)

    assert dict(request.params) == {"date": "2026-11-30", "page_size": "2"}
    assert dict(request.route_params) == {"token": "a.b.c"}
    assert request.header("accept") == "text/html"


def test_the_host_publishes_the_configured_signing_key_as_a_jwks(host):
    from shared.config.keys import KeySet
    from shared.config.settings import Settings

    settings = Settings.from_env(host.env)
    expected = KeySet.load(settings.signing_key_pem, settings.retired_public_keys).jwks()

    answer = requests.get(f"{host.url}/api/.well-known/jwks.json", timeout=10)

    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json() == expected
    assert all("d" not in key for key in answer.json()["keys"])


def test_the_host_refuses_a_garbage_download_token_with_401(host):
    answer = requests.get(f"{host.url}/api/download/not-a-token", timeout=10)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_token"
    assert answer.headers["WWW-Authenticate"].startswith("Bearer ")


def test_the_host_routes_the_day_listing_with_its_query_parameters(host):
    answer = requests.get(f"{host.url}/api/receipts", params={"date": "30-11-2026"}, timeout=10)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_date"


def test_the_domain_never_imports_azure_functions():
    pattern = re.compile(
        r"^\s*(import azure\.functions|from azure\.functions|from azure import functions)", re.M
    )
    for path in (ROOT / "shared").rglob("*.py"):
        assert not pattern.search(path.read_text()), path.name


def test_malformed_setting_stops_the_host_at_start_naming_the_setting(host_factory):
    with pytest.raises(RuntimeError) as failure:
        host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="five")
    assert "STOREFRONT_RATE_LIMIT_PER_HOUR must be an integer" in str(failure.value)


def test_importing_the_app_opens_no_network_connection():
    probe = (
        "import socket\n"
        "opened = []\n"
        "real = socket.socket.connect\n"
        "socket.socket.connect = lambda self, address: opened.append(address) or real(self, address)\n"
        "socket.getaddrinfo = lambda *a, **k: opened.append(a[:2]) or []\n"
        "import function_app\n"
        "print(len(opened))\n"
    )
    env = {**os.environ, "AzureWebJobsStorage": "UseDevelopmentStorage=true"}

    result = fresh_python(probe, env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


# --- the last line of defence: nothing escapes a route as an empty 500 -----------------------------

# A storage connection string the SDK cannot parse: building the app's clients raises a ValueError
# that no domain code expects. (The Functions host refuses such a string before the app starts on
# Azure and under `func start`; the dev host and a direct call do not, so routes meet it.)
UNPARSEABLE_STORAGE = "storefront-leaky:c2VjcmV0LWFjY291bnQta2V5"  # a key pasted without its names
TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhZ2VudC1zdGFydGVyLWtpdCJ9.c2lnbmF0dXJl"


@pytest.fixture
def broken_storage(monkeypatch):
    """The app's process-wide services as they are built from a storage setting that raises."""
    from shared import runtime
    from shared.config.settings import Settings

    monkeypatch.setattr(runtime, "_settings", Settings.from_env({"AzureWebJobsStorage": UNPARSEABLE_STORAGE}))
    monkeypatch.setattr(runtime, "_services", None)


def _call(route, method: str, url: str, body: bytes = b"", route_params: dict | None = None):
    import azure.functions as func

    query = dict(pair.split("=", 1) for pair in url.split("?", 1)[1].split("&")) if "?" in url else {}
    request = func.HttpRequest(
        method,
        url,
        headers={"Content-Type": "application/json"},
        params=query,
        route_params=route_params or {},
        body=body,
    )
    return route(request)


ROUTES = [
    ("purchase", "POST", "/api/a2a/purchase", b'{"email": "ada@example.org"}', {}),
    (
        "receipt",
        "GET",
        "/api/receipts/rcpt_3356oymxvrlcnfepn66by6fqyy",
        b"",
        {"receipt_id": "rcpt_3356oymxvrlcnfepn66by6fqyy"},
    ),
    ("receipts_of_day", "GET", "/api/receipts?date=2026-11-30&code=ZnVuY3Rpb24ta2V5", b"", {}),
    ("jwks", "GET", "/api/.well-known/jwks.json", b"", {}),
    ("jwks_at_root", "GET", "/.well-known/jwks.json", b"", {}),
    ("download", "GET", f"/api/download/{TOKEN}", b"", {"token": TOKEN}),
    ("health", "GET", "/api/health", b"", {}),
]


@pytest.mark.parametrize(("name", "method", "path", "body", "params"), ROUTES, ids=[r[0] for r in ROUTES])
def test_an_exception_escaping_a_route_is_a_json_500_whose_correlation_id_is_logged(
    broken_storage, caplog, name, method, path, body, params
):
    import function_app

    with caplog.at_level("ERROR"):
        response = _call(getattr(function_app, name), method, f"http://localhost{path}", body, params)
    answer = json.loads(response.get_body())
    correlation_id = answer["error"]["correlation_id"]
    logged = [r.getMessage() for r in caplog.records if correlation_id in r.getMessage()]

    assert response.status_code == 500
    assert response.headers["Content-Type"] == "application/json"
    assert answer["error"]["code"] == "internal_error"
    assert response.headers["X-Correlation-Id"] == correlation_id
    assert re.fullmatch(r"[0-9a-f]{32}", correlation_id)
    assert len(logged) == 1
    assert logged[0].startswith(f"unexpected ValueError in {method} /")
    assert "shared/runtime.py" in logged[0]  # where it was raised
    text = "\n".join(r.getMessage() for r in caplog.records) + response.get_body().decode()
    for secret in (
        "c2VjcmV0LWFjY291bnQta2V5",
        "storefront-leaky",
        TOKEN,
        "ZnVuY3Rpb24ta2V5",
        "ada@example.org",
    ):
        assert secret not in text


@pytest.mark.parametrize("name", ["mcp_endpoint", "a2a_endpoint"])
def test_the_jsonrpc_endpoints_answer_an_escaped_exception_with_a_jsonrpc_internal_error(
    broken_storage, name
):
    import function_app

    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}
    response = _call(
        getattr(function_app, name), "POST", "http://localhost/api/x", json.dumps(message).encode()
    )
    answer = json.loads(response.get_body())

    assert response.status_code == 500
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["code"] == -32603
    assert answer["error"]["data"]["correlation_id"] == response.headers["X-Correlation-Id"]


@pytest.mark.parametrize("name", ["reap_idempotency_keys", "repair_receipts", "drain_contacts"])
def test_a_failing_timer_is_logged_with_a_correlation_id_and_fails_without_the_message(
    broken_storage, caplog, name
):
    from azure.functions.timer import TimerRequest

    import function_app

    with caplog.at_level("ERROR"), pytest.raises(RuntimeError) as failure:
        getattr(function_app, name)(TimerRequest(past_due=False))
    correlation_id = re.search(r"correlation id ([0-9a-f]{32})", str(failure.value))[1]

    assert str(failure.value) == f"{name} failed unexpectedly, correlation id {correlation_id}"
    assert failure.value.__suppress_context__
    assert any(
        r.getMessage().startswith(f"unexpected ValueError in {name}, correlation id {correlation_id}")
        for r in caplog.records
    )


def test_a_dev_host_answers_an_escaped_exception_with_json_and_logs_its_id(logs, azurite, sandbox):
    from devstack.ports import free_port
    from devstack.services import dev_settings, start_process

    port = free_port()
    log_path = logs / f"devhost-broken-{port}.log"
    env = {
        **dev_settings(),
        "AzureWebJobsStorage": UNPARSEABLE_STORAGE,
        "BREVO_BASE_URL": f"{sandbox.url}/v3",
    }
    command = [sys.executable, "-m", "devstack.devhost", "--port", str(port), "--app-dir", str(ROOT)]
    proc = start_process(command, port, log_path, env)
    try:
        base = f"http://127.0.0.1:{port}"
        get = requests.get(f"{base}/api/health", timeout=10)
        head = requests.head(f"{base}/api/health", timeout=10)
        buy = requests.post(f"{base}/api/a2a/purchase", json={"email": "ada@example.org"}, timeout=10)
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_SECONDS)
    log = log_path.read_text()

    for answer in (get, buy):
        assert answer.status_code == 500
        assert answer.json()["error"]["correlation_id"] == answer.headers["X-Correlation-Id"]
        assert log.count(answer.headers["X-Correlation-Id"]) == 1
    assert head.status_code == 500 and head.content == b""
    assert head.headers["X-Correlation-Id"] in log
    assert "c2VjcmV0LWFjY291bnQta2V5" not in log and "ada@example.org" not in log
