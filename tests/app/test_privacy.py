"""No raw email, idempotency key or client address is stored or logged, anywhere."""

from __future__ import annotations

from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient

from tests.support import UNKNOWN_BUNDLE_ID, Buyer


def stored_text(connection_string: str) -> str:
    """Every table entity and every blob in the storage account, as one string."""
    parts: list[str] = []
    tables = TableServiceClient.from_connection_string(connection_string)
    for table in tables.list_tables():
        client = tables.get_table_client(table.name)
        parts.extend(repr(dict(entity)) for entity in client.list_entities())
    blobs = BlobServiceClient.from_connection_string(connection_string)
    for container in blobs.list_containers():
        client = blobs.get_container_client(container.name)
        for blob in client.list_blobs():
            parts.append(blob.name)
            parts.append(client.download_blob(blob.name).readall().decode(errors="replace"))
    return "\n".join(parts)


def test_no_raw_email_key_or_address_in_storage_or_logs(host_factory, azurite, mail):
    host = host_factory(STOREFRONT_IDEMPOTENCY_TABLE="privacyidem", STOREFRONT_GOVERNANCE_TABLE="privacygov")
    buyer = Buyer(host.url)
    keyed = {"email": buyer.email, "name": "Grace", "idempotency_key": buyer.key}

    assert buyer.purchase(keyed).status_code == 200
    assert buyer.purchase(keyed).status_code == 200
    assert buyer.call_tool({"email": buyer.email.upper(), "idempotency_key": buyer.key + "-mcp"}).ok
    mail.fail_next("/v3/smtp/email", 500, match=buyer.email)
    assert buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key + "-fail"}).status_code == 503
    assert buyer.purchase({"email": buyer.email, "bundle_id": UNKNOWN_BUNDLE_ID}).status_code == 422

    stored = stored_text(azurite)
    assert "privacyidem" in {t.name for t in TableServiceClient.from_connection_string(azurite).list_tables()}
    log = host.log()
    for secret in (buyer.email, buyer.email.upper(), buyer.email.split("@")[0], buyer.key, buyer.address):
        assert secret not in stored, f"{secret!r} found in storage"
        assert secret not in log, f"{secret!r} found in the host log"
    assert len(mail.emails_to(buyer.email)) == 2
