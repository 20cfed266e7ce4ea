"""The official MCP Python SDK client (package `mcp`) against the running dev host, in its auto
mode (probes the newest revision first, then falls back) and its legacy mode."""

from __future__ import annotations

import asyncio

import pytest
from mcp import Client

from shared.purchase.catalog import listing
from tests.support import unique_email, unique_key


async def _session(url: str, mode: str, email: str, key: str):
    async with Client(url, mode=mode) as client:
        tools = await client.list_tools()
        first = await client.call_tool("purchase_free_bundle", {"email": email, "idempotency_key": key})
        second = await client.call_tool("purchase_free_bundle", {"email": email, "idempotency_key": key})
        refused = await client.call_tool("purchase_free_bundle", {"email": "nope"})
        listed = await client.call_tool("list_bundles", {})  # checked against its outputSchema
        return client, tools, first, second, refused, listed


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_official_python_client_initializes_lists_and_calls(host, mail, mode):
    email = unique_email(f"sdk-{mode}")
    client, tools, first, second, refused, listed = asyncio.run(
        _session(f"{host.url}/api/a2a/mcp", mode, email, unique_key())
    )

    assert [tool.name for tool in tools.tools] == ["purchase_free_bundle", "list_bundles"]
    assert tools.tools[0].input_schema["required"] == ["email"]
    assert first.is_error is False, first.content[0].text
    assert first.structured_content["status"] == "fulfilled"
    assert first.structured_content["caller"]["channel"] == "mcp"
    assert second.structured_content == first.structured_content
    assert second.content[0].text == first.content[0].text
    assert refused.is_error is True
    assert refused.structured_content["error"]["code"] == "invalid_email"
    assert len(mail.emails_to(email)) == 1
    assert listed.is_error is False
    assert listed.structured_content == listing()
