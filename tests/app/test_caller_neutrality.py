"""One purchase flow, three protocols: MCP (2025 and 2026-07-28), plain HTTP and A2A answer the same
receipt. Only `caller.channel` says which protocol was used; the other differences are what every purchase has
of its own (its id, time, buyer, download token, signature and the email's Brevo message id)."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.support import UNKNOWN_BUNDLE_ID, Buyer

# Fields unique to each purchase, whatever the channel: compared for presence, not value.
PER_PURCHASE = ("receipt_id", "issued_at", "buyer", "receipt_url", "download", "signature")
BREVO_MESSAGE_ID = re.compile(r"(accepted by Brevo as ).+")


def by_mcp(buyer: Buyer, arguments: dict) -> dict:
    return buyer.call_tool(arguments).json()["result"]["structuredContent"]


def by_mcp_2026(buyer: Buyer, arguments: dict) -> dict:
    """tools/call as a 2026-07-28 client sends it: no initialize, _meta and mirrored headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "purchase_free_bundle", "arguments": arguments, "_meta": meta}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": params["name"]}
    return buyer.mcp("tools/call", params, headers).json()["result"]["structuredContent"]


def by_http(buyer: Buyer, arguments: dict) -> dict:
    return buyer.purchase(arguments).json()


def by_a2a(buyer: Buyer, arguments: dict) -> dict:
    """SendMessage with the arguments as the data part; the key, if any, moved to the messageId."""
    data = {k: v for k, v in arguments.items() if k != "idempotency_key"}
    message = {
        "messageId": arguments.get("idempotency_key", str(uuid.uuid4())),
        "role": "ROLE_USER",
        "parts": [{"data": data, "mediaType": "application/json"}],
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = buyer.http.post(
        f"{buyer.host}/api/a2a", json=request, headers={"A2A-Version": "1.0"}, timeout=30
    )
    return answer.json()["result"]["task"]["artifacts"][0]["parts"][0]["data"]


CHANNELS = {"mcp": by_mcp, "mcp-2026": by_mcp_2026, "http": by_http, "a2a": by_a2a}
# What each receipt's caller.channel says: the protocol, not its revision.
CHANNEL_OF = {"mcp": "mcp", "mcp-2026": "mcp", "http": "http", "a2a": "a2a"}


def neutral(receipt: dict) -> dict:
    """The receipt minus what is per purchase and the caller, with Brevo's message id masked."""
    kept = {k: v for k, v in receipt.items() if k not in (*PER_PURCHASE, "caller")}
    kept["checks"] = [
        {**check, "detail": BREVO_MESSAGE_ID.sub(r"\1<message id>", check["detail"])}
        for check in receipt["checks"]
    ]
    return kept


def buy_everywhere(host, arguments: dict) -> dict[str, dict]:
    """The same purchase once per channel, each by its own buyer (own email, key and address)."""
    receipts = {}
    for channel, buy in CHANNELS.items():
        buyer = Buyer(host.url)
        receipts[channel] = buy(buyer, {**arguments, "email": buyer.email, "idempotency_key": buyer.key})
    return receipts


@pytest.mark.parametrize(
    ("arguments", "status"),
    [
        ({"name": "Ada", "bundle_id": "mcp-field-guide"}, "fulfilled"),
        ({"bundle_id": "agent-starter-kit"}, "fulfilled"),
        ({"name": "Ada", "bundle_id": UNKNOWN_BUNDLE_ID}, "refused"),
    ],
    ids=["named", "default-name", "refused"],
)
def test_every_channel_answers_the_same_receipt_but_for_the_caller(host, arguments, status):
    receipts = buy_everywhere(host, arguments)

    mcp, mcp_2026, http, a2a = (neutral(receipts[c]) for c in CHANNELS)
    assert mcp["status"] == status
    assert mcp == mcp_2026 == http == a2a  # checks (names, results, details), bundle, billing, error...
    assert len({json_keys(r) for r in receipts.values()}) == 1  # the same fields in the same order
    assert len({receipts[c]["receipt_id"] for c in CHANNELS}) == len(CHANNELS)
    callers = {c: receipts[c]["caller"] for c in CHANNELS}
    assert {c: caller["channel"] for c, caller in callers.items()} == CHANNEL_OF
    assert len({caller["user_agent"] for caller in callers.values()}) == 1


def test_a_replay_answers_the_original_receipt_on_every_channel(host):
    for channel, buy in CHANNELS.items():
        buyer = Buyer(host.url)
        arguments = {"email": buyer.email, "idempotency_key": buyer.key}

        assert buy(buyer, arguments) == buy(buyer, arguments), channel


def json_keys(receipt: dict) -> tuple[str, ...]:
    return tuple(receipt)
