"""What a purchase refused by a limit tells its caller about `make reset`: off Azure (a dev host,
`make run`) with the counters in Azurite's development account, as `make run` keeps them, the
refusal's message says it clears the counters, over HTTP, MCP and A2A alike; on Azure (the
platform's own variables set) it never does, nor off Azure with the counters in a storage account
of their own (a developer's against a real account), which `make reset` does not touch. Dev
hosts on the session's Azurite, and on its HTTPS twin over an identity."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from devstack.run import storage_connection
from devstack.services import Service
from shared.config.settings import Settings
from shared.runtime import counters_in_make_run
from tests.identity import IdentityEndpoint
from tests.shared.config.test_secret_strength import ON_AZURE, strong_secrets
from tests.shared.protocols.test_a2a import receipt_of, send, task_of
from tests.support import Buyer, unique_key

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


@pytest.fixture(scope="module")
def own_account(host_factory, azurite_tls) -> Iterator[Service]:
    """Off Azure, its stores in an account reached over an identity, not Azurite's development
    account through a connection string."""
    endpoint = IdentityEndpoint()
    try:
        yield host_factory(
            **endpoint.env(),
            AzureWebJobsStorage="",
            AzureWebJobsStorage__blobServiceUri=azurite_tls.blob_uri,
            AzureWebJobsStorage__tableServiceUri=azurite_tls.table_uri,
            AzureWebJobsStorage__queueServiceUri=azurite_tls.queue_uri,
            AzureWebJobsStorage__credential="managedidentity",
            REQUESTS_CA_BUNDLE=str(azurite_tls.ca_bundle),
            STOREFRONT_RATE_LIMIT_PER_HOUR="1",
            STOREFRONT_GOVERNANCE_TABLE="governanceownaccount",
        )
    finally:
        endpoint.close()


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


def test_off_azure_with_the_counters_in_an_account_of_their_own_a_refusal_never_mentions_make_reset(
    own_account,
):
    message = refused_over("http", own_account)

    assert message.startswith("rate limit reached: 1 purchase per hour")
    assert message.endswith("STOREFRONT_RATE_LIMIT_PER_HOUR")


@pytest.mark.parametrize(
    ("connection", "on_azure", "shown"),
    [
        ("UseDevelopmentStorage=true", False, True),
        (storage_connection(10000, 10002, 10001), False, True),
        (storage_connection(10000, 10002, 10001), True, False),
        (
            "DefaultEndpointsProtocol=https;AccountName=mystore;AccountKey=a2V5;EndpointSuffix=core.windows.net",
            False,
            False,
        ),
        ("", False, False),
    ],
    ids=["development-storage", "make-run-azurite", "on-azure", "own-account-key", "identity"],
)
def test_the_hint_is_given_only_where_make_reset_clears_the_counters(connection, on_azure, shown):
    settings = Settings(storage_connection_string=connection, hosted_on_azure=on_azure)

    assert counters_in_make_run(settings) is shown
