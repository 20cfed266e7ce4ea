"""Key Vault references that Azure did not resolve reach the app as the literal
`@Microsoft.KeyVault(...)`: the app never hashes with, signs with or sends that literal. It refuses
purchases with 503 not_configured, reports the setting by name in health and logs it once at
start-up. In process (runtime.build on Azurite and the Brevo sandbox) and through a dev host.
"""

from __future__ import annotations

import json
import uuid

import pytest
import requests
from azure.data.tables import TableClient

from devstack.services import dev_settings
from shared import runtime
from shared.config.hashing import Hasher
from shared.config.settings import SECRET_SETTINGS, Settings
from shared.protocols.api import Services
from shared.purchase.call import Caller, PurchaseCall
from tests.support import Buyer, unique_address, unique_email, unique_key

VAULT = "shop-kv-7d2e"
REFERENCES = {
    "BREVO_API_KEY": f"@Microsoft.KeyVault(SecretUri=https://{VAULT}.vault.azure.net/secrets/brevo/)",
    "STOREFRONT_SIGNING_KEY": f"@Microsoft.KeyVault(VaultName={VAULT};SecretName=signing-key)",
    "STOREFRONT_HASH_SECRET": f"@Microsoft.KeyVault(VaultName={VAULT};SecretName=hash-secret)",
}


def brevo_requests(sandbox) -> dict:
    """The sandbox's request counts by path, but for the contact paths: a purchase never calls
    those itself (buyers are queued), while the session's dev hosts drain their own queues into
    the same sandbox at any moment."""
    counts = requests.get(f"{sandbox.url}/_sandbox/stats", timeout=10).json()["requests"]
    return {path: n for path, n in counts.items() if not path.startswith("/v3/contacts")}


def governance_text(azurite: str, table: str) -> str:
    client = TableClient.from_connection_string(azurite, table)
    try:
        return json.dumps([dict(entity) for entity in client.list_entities()], default=str)
    except Exception:  # the table was never created: nothing was written
        return ""


def build(azurite: str, sandbox, governance: str, **settings: str) -> Services:
    """The app's services on the session's Azurite and sandbox, in tables of their own."""
    suffix = uuid.uuid4().hex[:10]
    env = {
        **dev_settings(),
        "AzureWebJobsStorage": azurite,
        "BREVO_BASE_URL": f"{sandbox.url}/v3",
        "STOREFRONT_IDEMPOTENCY_TABLE": f"idem{suffix}",
        "STOREFRONT_GOVERNANCE_TABLE": governance,
        "STOREFRONT_LEDGER_TABLE": f"ledger{suffix}",
        "STOREFRONT_RECEIPTS_CONTAINER": f"rcpt{suffix}",
    }
    return runtime.build(Settings.from_env({**env, **settings}))


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("name", SECRET_SETTINGS)
def test_an_unresolved_secret_refuses_the_purchase_and_the_literal_is_never_used(
    name, keyed, azurite, sandbox, mail
):
    governance = f"gov{uuid.uuid4().hex[:10]}"
    services = build(azurite, sandbox, governance, **{name: REFERENCES[name]})
    email, address = unique_email(), unique_address()
    arguments = {"email": email, **({"idempotency_key": unique_key()} if keyed else {})}
    before = brevo_requests(sandbox)

    outcome = services.storefront.purchase(PurchaseCall(arguments, None, address, Caller("http", "test")))
    receipt = json.loads(outcome.body)

    assert outcome.status == 503
    assert receipt["error"]["code"] == "not_configured"
    assert name in receipt["error"]["message"]
    assert "KeyVault" not in outcome.body.decode()
    assert brevo_requests(sandbox) == before  # no call reached Brevo, with or without the literal
    assert mail.emails_to(email) == [] and mail.contact(email) is None
    literal = Hasher(REFERENCES[name])
    stored = governance_text(azurite, governance)
    assert literal.email(email) not in stored and literal.client_ip(address) not in stored
    if name == "STOREFRONT_SIGNING_KEY":
        assert receipt["signature"] is None


def test_an_unresolved_reference_in_a_setting_that_is_no_secret_refuses_purchases(azurite, sandbox, mail):
    sender = f"@Microsoft.KeyVault(VaultName={VAULT};SecretName=sender)"
    services = build(azurite, sandbox, f"gov{uuid.uuid4().hex[:10]}", STOREFRONT_SENDER_EMAIL=sender)
    email = unique_email()
    before = brevo_requests(sandbox)

    outcome = services.storefront.purchase(
        PurchaseCall({"email": email}, None, unique_address(), Caller("http"))
    )

    assert outcome.status == 503
    assert json.loads(outcome.body)["error"]["code"] == "not_configured"
    assert "STOREFRONT_SENDER_EMAIL" in json.loads(outcome.body)["error"]["message"]
    assert brevo_requests(sandbox) == before
    assert mail.emails_to(email) == []


def test_a_dev_host_with_unresolved_references_is_unconfigured_refuses_and_logs_each_once(host_factory, mail):
    host = host_factory(**REFERENCES)
    buyer = Buyer(host.url)

    health = buyer.http.get(f"{host.url}/api/health", timeout=10)
    keyed = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})
    unkeyed = buyer.purchase({"email": buyer.email})
    again = buyer.http.get(f"{host.url}/api/health", timeout=10)
    log = host.log()

    assert health.status_code == again.status_code == 503
    assert health.json()["status"] == "unconfigured"
    assert health.json()["missing_settings"] == list(SECRET_SETTINGS)
    assert health.json()["problems"] == [
        f"{name} is an unresolved Key Vault reference" for name in SECRET_SETTINGS
    ]
    for refused in (keyed, unkeyed):
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "not_configured"
    assert mail.emails_to(buyer.email) == [] and mail.contact(buyer.email) is None
    for name in SECRET_SETTINGS:
        assert log.count(f"{name} is an unresolved Key Vault reference") == 1, log
    assert VAULT not in log + health.text + keyed.text + unkeyed.text
