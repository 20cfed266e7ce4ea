"""Web Bot Auth end to end, through a dev host: a verified agent behind a shared address keeps its
own limit, its receipt, page and finance listing name it, and a signature that cannot be accepted
is a 401 on every door that costs no limit. Agents serve their key directories on loopback."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timezone

import pytest
import requests

from devstack.node import with_node22
from shared.purchase.receipt import signatures
from tests.agents import CLOUDFLARE_SIGNER, AgentKey, KeyDirectory, Signed
from tests.app.test_caller_neutrality import CHANNELS
from tests.support import HANG_SECONDS, Buyer, unique_address, unique_email


@pytest.fixture(scope="module")
def store(host_factory):
    """One purchase an hour per address, three per verified agent."""
    return host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1", STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR="3")


def agent_buyer(store, directory: KeyDirectory, key: AgentKey, address: str) -> Buyer:
    buyer = Buyer(store.url, address=address)
    buyer.http.auth = Signed(key, directory.origin)
    return buyer


def test_verified_agents_behind_one_address_keep_their_own_limits_and_are_named(store, mail):
    shared_address = unique_address()
    first, second = AgentKey(), AgentKey()
    directories = [KeyDirectory(first), KeyDirectory(second)]
    try:
        a = agent_buyer(store, directories[0], first, shared_address)
        b = agent_buyer(store, directories[1], second, shared_address)
        plain = Buyer(store.url, address=shared_address)

        assert plain.purchase().status_code == 200
        assert plain.purchase({"email": unique_email()}).status_code == 429, "the address's one an hour"
        answers = [a.purchase({"email": unique_email()}) for _ in range(4)]
        assert [r.status_code for r in answers] == [200, 200, 200, 429]
        assert "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR" in answers[-1].json()["error"]["message"]
        assert b.purchase({"email": unique_email()}).status_code == 200, "another agent, its own bucket"

        receipt = answers[0].json()
        assert receipt["caller"]["agent"] == {
            "verified": True,
            "origin": directories[0].origin,
            "key_thumbprint": first.thumbprint,
        }
        check = next(c for c in receipt["checks"] if c["name"] == "rate_limit")
        assert check["detail"].startswith("within 3 per hour from this verified agent")
        assert signatures.verify(answers[0].content, _jwks(store)).valid, "the receipt naming it verifies"
    finally:
        for directory in directories:
            directory.close()


def test_the_receipt_page_and_the_finance_listing_say_who_asked(store):
    key = AgentKey()
    directory = KeyDirectory(key)
    try:
        signed = agent_buyer(store, directory, key, unique_address()).purchase().json()
        plain = Buyer(store.url).purchase().json()
    finally:
        directory.close()
    assert plain["caller"]["agent"] == {"verified": False}

    page = requests.get(
        signed["receipt_url"].replace("http://localhost:7071", store.url), headers=HTML, timeout=10
    )
    other = requests.get(
        plain["receipt_url"].replace("http://localhost:7071", store.url), headers=HTML, timeout=10
    )
    assert f"Verified: {directory.origin}" in page.text and key.thumbprint in page.text
    assert "Unverified: no Web Bot Auth signature" in other.text

    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    listing = requests.get(f"{store.url}/api/receipts", params={"date": today, "page_size": 200}, timeout=10)
    rows = {row["receipt_id"]: row for row in listing.json()["receipts"]}
    assert (rows[signed["receipt_id"]]["agent_origin"], rows[signed["receipt_id"]]["agent_key"]) == (
        directory.origin,
        key.thumbprint,
    )
    assert rows[plain["receipt_id"]]["agent_origin"] == ""


HTML = {"Accept": "text/html"}


MCP_2026 = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
# Each door's purchase as its protocol sends it: (path, body, headers).
DOORS = {
    "http": lambda email: ("/api/a2a/purchase", {"email": email}, {}),
    "mcp": lambda email: (
        "/api/a2a/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "purchase_free_bundle", "arguments": {"email": email}},
        },
        {"Accept": "application/json, text/event-stream"},
    ),
    "mcp-2026": lambda email: (
        "/api/a2a/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "purchase_free_bundle", "arguments": {"email": email}, "_meta": MCP_2026},
        },
        {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "purchase_free_bundle",
        },
    ),
    "a2a": lambda email: (
        "/api/a2a",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": "m-" + email,
                    "role": "ROLE_USER",
                    "parts": [{"data": {"email": email}, "mediaType": "application/json"}],
                }
            },
        },
        {"A2A-Version": "1.0"},
    ),
}


@pytest.mark.parametrize("door", DOORS)
def test_a_bad_signature_is_a_401_on_every_door_and_costs_no_limit(store, mail, door):
    directory = KeyDirectory(AgentKey())  # holds a key, but not the one that signs
    address = unique_address()
    try:
        buyer = agent_buyer(store, directory, AgentKey(), address)
        path, body, headers = DOORS[door](buyer.email)
        answer = buyer.http.post(f"{store.url}{path}", json=body, headers=headers, timeout=30)
    finally:
        directory.close()

    assert answer.status_code == 401
    error = answer.json()["error"]
    assert error.get("data", error)["code"] == "invalid_signature"
    assert "holds no key with this keyid" in error["message"]
    assert mail.emails_to(buyer.email) == []
    assert Buyer(store.url, address=address).purchase().status_code == 200, "no limit was counted"


@pytest.mark.parametrize("door", DOORS)
def test_a_verified_agent_is_named_whichever_door_it_uses(store, door):
    key = AgentKey()
    directory = KeyDirectory(key)
    try:
        buyer = agent_buyer(store, directory, key, unique_address())
        receipt = CHANNELS[door](buyer, {"email": buyer.email})
    finally:
        directory.close()

    assert receipt["caller"]["agent"] == {
        "verified": True,
        "origin": directory.origin,
        "key_thumbprint": key.thumbprint,
    }


def test_the_401_over_json_rpc_is_a_json_rpc_error(store):
    directory = KeyDirectory(AgentKey())
    try:
        buyer = agent_buyer(store, directory, AgentKey(), unique_address())
        answer = buyer.mcp("tools/list")
    finally:
        directory.close()

    assert answer.status_code == 401
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "invalid_signature"


def test_cloudflares_signer_is_verified(store):
    key = AgentKey()
    directory = KeyDirectory(key)
    email = unique_email("cloudflare")
    try:
        result = subprocess.run(
            [
                "node",
                str(CLOUDFLARE_SIGNER),
                f"{store.url}/api/a2a/purchase",
                directory.origin,
                json.dumps(key.private_jwk),
                json.dumps({"email": email}),
            ],
            capture_output=True,
            text=True,
            timeout=HANG_SECONDS,
            env=with_node22(os.environ),
            check=False,
        )
    finally:
        directory.close()

    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert 'tag="web-bot-auth"' in out["signatureInput"]
    assert out["status"] == 200, out["body"]
    assert json.loads(out["body"])["caller"]["agent"] == {
        "verified": True,
        "origin": directory.origin,
        "key_thumbprint": key.thumbprint,
    }


def _jwks(store) -> dict:
    return requests.get(f"{store.url}/.well-known/jwks.json", timeout=10).json()
