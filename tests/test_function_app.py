"""The Functions entry point as the host loads it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import requests

from tests.support import ROOT


@pytest.fixture(scope="module")
def functions() -> list:
    """The app's functions; `get_functions()` may be called only once per process."""
    import function_app

    return function_app.app.get_functions()


def test_every_route_is_registered_with_its_methods(functions):
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
        "mcp_endpoint": ("a2a/mcp", ["DELETE", "GET", "POST"]),
        "purchase": ("a2a/purchase", ["POST"]),
        "receipt": ("receipts/{receipt_id}", ["GET"]),
        "receipts_of_day": ("receipts", ["GET"]),
        "jwks": (".well-known/jwks.json", ["GET"]),
        "download": ("download/{token}", ["GET"]),
        "health": ("health", ["GET"]),
    }
    assert timers == {"reap_idempotency_keys": "0 */15 * * * *"}


def test_only_the_finance_day_listing_needs_a_function_key(functions):
    levels = {
        f.get_function_name(): str(f.get_trigger().auth_level).split(".")[-1]
        for f in functions
        if f.is_http_function()
    }
    assert levels.pop("receipts_of_day") == "FUNCTION"
    assert set(levels) == {"mcp_endpoint", "purchase", "receipt", "jwks", "download", "health"}
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
    from shared.keys import KeySet
    from shared.settings import Settings

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
    for path in (ROOT / "shared").glob("*.py"):
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

    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
