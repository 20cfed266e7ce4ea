"""What a purchase refused by a limit tells its caller about `make reset`: off Azure (a dev host,
`make run`) the refusal's message says it clears the counters, over HTTP, MCP and A2A alike; on
Azure (the platform's own variables set) it never does. Dev hosts on the session's Azurite."""

from __future__ import annotations

import json

import pytest

from tests.support import Buyer, Service, unique_key
from tests.test_a2a import receipt_of, send, task_of
from tests.test_secret_strength import ON_AZURE, strong_secrets

HINT = "; locally, `make reset` clears the counters"


@pytest.fixture(scope="module")
def local(host_factory) -> Service:
    return host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1", STOREFRONT_GOVERNANCE_TABLE="governancelocal")


@pytest.fixture(scope="module")
def on_azure(host_factory) -> Service:
    return host_factory(
        **ON_AZURE,
        **strong_secrets(),
        STOREFRONT_RATE_LIMIT_PER_HOUR="1",
        STOREFRONT_GOVERNANCE_TABLE="governanceazure429",
    )


def refused_over(protocol: str, host: Service) -> str:
    """The message of a purchase refused by the rate limit, as `protocol` carries it."""
    buyer = Buyer(host.url)
    assert buyer.purchase({"email": buyer.email}).status_code == 200
    if protocol == "http":
        answer = buyer.purchase({"email": buyer.email})
        assert answer.status_code == 429, answer.text
        return answer.json()["error"]["message"]
    if protocol == "mcp":
        answer = buyer.call_tool({"email": buyer.email, "idempotency_key": unique_key()})
        result = answer.json()["result"]
        assert result["isError"] is True, answer.text
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        return result["structuredContent"]["error"]["message"]
    task = task_of(send(buyer, {"email": buyer.email}))
    assert task["status"]["state"] == "TASK_STATE_REJECTED", task
    status_text = task["status"]["message"]["parts"][0]["text"]
    message = receipt_of(task)["error"]["message"]
    assert status_text.startswith(message)
    return message


@pytest.mark.parametrize("protocol", ["http", "mcp", "a2a"])
def test_off_azure_a_rate_limited_purchase_says_make_reset_clears_the_counters(local, protocol):
    message = refused_over(protocol, local)

    assert message.startswith("rate limit reached: 1 purchase per hour")
    assert message.endswith("STOREFRONT_RATE_LIMIT_PER_HOUR" + HINT)


@pytest.mark.parametrize("protocol", ["http", "mcp", "a2a"])
def test_on_azure_a_rate_limited_purchase_never_mentions_make_reset(on_azure, protocol):
    message = refused_over(protocol, on_azure)

    assert message.startswith("rate limit reached: 1 purchase per hour")
    assert message.endswith("STOREFRONT_RATE_LIMIT_PER_HOUR")
    assert "make" not in message
