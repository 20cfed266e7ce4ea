"""shared.idempotency: the Azure Table adapter of the idempotency store, against the session's
Azurite."""

from __future__ import annotations

import uuid

import pytest

from shared.errors import StoreUnavailable
from shared.idempotency import IdempotencyRecord, TableIdempotencyStore
from shared.storage import table_client
from tests.support import AZURITE_KEY

DEAD_TABLES = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={AZURITE_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)


def record(
    key_hash: str | None = None, receipt_id: str = "rcpt_aaaaaaaaaaaaaaaaaaaaaaaaaa"
) -> IdempotencyRecord:
    return IdempotencyRecord(
        key_hash=key_hash or uuid.uuid4().hex * 2,
        receipt_id=receipt_id,
        receipt_sha256="ab" * 32,
        created_at="2030-01-01T10:15:00Z",
    )


@pytest.fixture
def table(azurite):
    client = table_client(azurite, "idem" + uuid.uuid4().hex[:12], timeout=5)
    yield client
    client.delete_table()
    client.close()


def table_exists(table) -> bool:
    from azure.core.exceptions import ResourceNotFoundError

    try:
        list(table.query_entities("PartitionKey eq 'none'"))
    except ResourceNotFoundError:
        return False
    return True


def test_get_on_a_table_that_does_not_exist_yet_is_none(table):
    assert TableIdempotencyStore(table).get("0" * 64) is None
    assert not table_exists(table)


def test_get_of_an_unknown_key_is_none(table):
    store = TableIdempotencyStore(table)
    store.put(record())

    assert store.get("f" * 64) is None


def test_first_put_creates_the_table(table):
    store = TableIdempotencyStore(table)

    assert store.put(record()) is True
    assert table_exists(table)


def test_put_then_get_round_trips_the_record(table):
    store = TableIdempotencyStore(table)
    stored = record()

    store.put(stored)

    assert store.get(stored.key_hash) == stored


def test_the_entity_is_keyed_by_the_key_hash_and_holds_only_the_record(table):
    stored = record()

    TableIdempotencyStore(table).put(stored)

    entity = table.get_entity(stored.key_hash, stored.key_hash)
    assert dict(entity) == {
        "PartitionKey": stored.key_hash,
        "RowKey": stored.key_hash,
        "ReceiptId": stored.receipt_id,
        "ReceiptSha256": stored.receipt_sha256,
        "CreatedAt": stored.created_at,
    }


def test_second_put_with_the_same_key_returns_false_and_keeps_the_first_record(table):
    store = TableIdempotencyStore(table)
    first = record()
    second = IdempotencyRecord(
        first.key_hash, "rcpt_bbbbbbbbbbbbbbbbbbbbbbbbbb", "cd" * 32, "2030-01-02T00:00:00Z"
    )
    store.put(first)

    assert store.put(second) is False
    assert store.get(first.key_hash) == first


def test_different_keys_are_separate_records(table):
    store = TableIdempotencyStore(table)
    one, two = record(receipt_id="rcpt_" + "a" * 26), record(receipt_id="rcpt_" + "b" * 26)

    assert store.put(one) is True
    assert store.put(two) is True
    assert store.get(one.key_hash) == one
    assert store.get(two.key_hash) == two


@pytest.fixture
def dead_store():
    client = table_client(DEAD_TABLES, "idem" + uuid.uuid4().hex[:12], timeout=1)
    yield TableIdempotencyStore(client)
    client.close()


def test_get_during_a_storage_outage_raises_store_unavailable(dead_store):
    with pytest.raises(StoreUnavailable, match="idempotency table"):
        dead_store.get("0" * 64)


def test_put_during_a_storage_outage_raises_store_unavailable(dead_store):
    with pytest.raises(StoreUnavailable, match="idempotency table"):
        dead_store.put(record())
