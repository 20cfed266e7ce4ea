"""The Functions entry point as the host loads it."""

from __future__ import annotations

import re

import pytest

from tests.support import ROOT


def test_every_route_is_registered_with_its_methods():
    import function_app

    functions = function_app.app.get_functions()
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
        "health": ("health", ["GET"]),
    }
    assert timers == {"reap_idempotency_keys": "0 */15 * * * *"}


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
