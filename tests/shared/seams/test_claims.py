"""shared.seams.claims: the Azure Table adapter of the idempotency store, against the
session's Azurite, one table per test. Azure's answers must arrive as the interface's: None, ClaimLost
or StorageOutage, never an Azure exception."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import UpdateMode

from devstack.run import DEV_ACCOUNT_KEY
from shared.config.errors import StorageOutage
from shared.config.hashing import Hasher
from shared.exactly_once.idempotency import COMPLETED, PROCESSING
from shared.purchase.receipt.document import new_receipt_id
from shared.purchase.schema import canonical_request
from shared.seams.claims import SCOPING, Claim, ClaimLost, TableClaimStore
from shared.seams.storage import table_client

DEAD_TABLES = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={DEV_ACCOUNT_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)
NOW = 1_900_000_000.25
HASHER = Hasher("unit-test-secret")


def new_claim(key_hash: str | None = None, **changes) -> Claim:
    claim = Claim(
        key_hash=key_hash or HASHER.idempotency_key(f"key-{uuid.uuid4().hex}"),
        state=PROCESSING,
        fingerprint=HASHER.request(canonical_request({"email": "ada@example.org"})),
        result_id=new_receipt_id(),
        locked_until=NOW + 60,
        expires_at=NOW + 60 + 3600,
    )
    return replace(claim, **changes)


def without_etag(claim: Claim | None) -> Claim | None:
    return None if claim is None else replace(claim, etag="")


@pytest.fixture
def table(azurite):
    client = table_client(azurite, "idem" + uuid.uuid4().hex[:12], timeout=5)
    yield client
    client.delete_table()
    client.close()


@pytest.fixture
def store(table) -> TableClaimStore:
    return TableClaimStore(table)


def table_exists(table) -> bool:
    try:
        list(table.query_entities("PartitionKey eq 'none'"))
    except ResourceNotFoundError:
        return False
    return True


# --- get and create --------------------------------------------------------------------------------


def test_get_on_a_table_that_does_not_exist_is_none_and_does_not_create_it(table, store):
    assert store.get(new_claim().key_hash) is None
    assert not table_exists(table)


def test_get_of_a_missing_key_is_none(store):
    store.create(new_claim())

    assert store.get(new_claim().key_hash) is None


def test_create_makes_the_table_on_first_use_and_returns_the_claim_with_an_etag(table, store):
    claim = new_claim()
    assert not table_exists(table)

    created = store.create(claim)

    assert table_exists(table)
    assert created is not None and created.etag
    assert created == replace(claim, etag=created.etag)
    assert store.get(claim.key_hash) == created


def test_create_on_an_existing_key_returns_none_and_keeps_the_first_claim(store):
    first = store.create(new_claim())
    second = new_claim(first.key_hash, fingerprint="other", result_id=new_receipt_id())

    assert store.create(second) is None

    assert store.get(first.key_hash) == first


def test_different_keys_are_separate_claims(store):
    one, two = store.create(new_claim()), store.create(new_claim())

    assert one is not None and two is not None
    assert store.get(one.key_hash) == one
    assert store.get(two.key_hash) == two


# --- update ----------------------------------------------------------------------------------------


def test_update_with_the_current_etag_replaces_the_claim_and_returns_a_new_etag(store):
    created = store.create(new_claim())
    changed = replace(created, locked_until=NOW + 120, expires_at=NOW + 120 + 3600, progress={"step": 1})

    updated = store.update(changed)

    assert updated.etag and updated.etag != created.etag
    assert updated == replace(changed, etag=updated.etag)
    assert store.get(created.key_hash) == updated


def test_successive_updates_each_need_the_etag_of_the_one_before(store):
    created = store.create(new_claim())
    first = store.update(replace(created, progress={"step": 1}))

    second = store.update(replace(first, progress={"step": 2}))

    assert len({created.etag, first.etag, second.etag}) == 3
    assert store.get(created.key_hash).progress == {"step": 2}


def test_update_with_a_stale_etag_raises_claim_lost_and_keeps_the_newer_claim(store):
    created = store.create(new_claim())
    winner = store.update(replace(created, progress={"holder": "winner"}))

    with pytest.raises(ClaimLost):
        store.update(replace(created, progress={"holder": "loser"}))

    assert store.get(created.key_hash) == winner


def test_update_of_a_deleted_claim_raises_claim_lost_and_does_not_recreate_it(store):
    created = store.create(new_claim())
    store.delete(created)

    with pytest.raises(ClaimLost):
        store.update(replace(created, progress={"step": 1}))

    assert store.get(created.key_hash) is None


def test_update_on_a_table_that_does_not_exist_raises_claim_lost(table, store):
    with pytest.raises(ClaimLost):
        store.update(replace(new_claim(), etag="W/\"datetime'2030-01-01T00%3A00%3A00.0000000Z'\""))

    assert not table_exists(table)


# --- delete ----------------------------------------------------------------------------------------


def test_delete_with_the_current_etag_removes_the_claim(store):
    created = store.create(new_claim())

    store.delete(created)

    assert store.get(created.key_hash) is None


def test_delete_with_a_stale_etag_raises_claim_lost_and_keeps_the_claim(store):
    created = store.create(new_claim())
    newer = store.update(replace(created, progress={"step": 1}))

    with pytest.raises(ClaimLost):
        store.delete(created)

    assert store.get(created.key_hash) == newer


def test_delete_of_a_missing_claim_is_fine(store):
    created = store.create(new_claim())
    store.delete(created)

    store.delete(created)
    store.delete(replace(new_claim(), etag=created.etag))

    assert store.get(created.key_hash) is None


def test_a_key_can_be_created_again_after_its_claim_was_deleted(store):
    first = store.create(new_claim())
    store.delete(first)

    again = store.create(new_claim(first.key_hash))

    assert again is not None and again.result_id != first.result_id
    assert store.get(first.key_hash) == again


# --- what is stored --------------------------------------------------------------------------------


def test_progress_round_trips_as_json(table, store):
    progress = {
        "checks": {
            "idempotency": ["pass", "key claimed"],
            "contact_upsert": ["pass", "contact created in Brevo — Zoë"],
        },
        "token": {"jti": "abc_DEF-123", "iat": 1_900_000_000},
        "nothing": None,
        "flags": [True, False, 1.5],
    }
    created = store.create(new_claim(progress=progress))

    read = store.get(created.key_hash)

    assert read.progress == progress
    assert read.progress["token"]["iat"] == 1_900_000_000 and isinstance(read.progress["token"]["iat"], int)
    entity = table.get_entity(created.key_hash, created.key_hash)
    assert json.loads(entity["Progress"]) == progress


def test_updated_progress_round_trips_as_json(store):
    created = store.create(new_claim())
    progress = {"checks": {"fulfillment_email": ["pass", "accepted by Brevo as <m@x>"]}, "token": None}

    store.update(replace(created, progress=progress))

    assert store.get(created.key_hash).progress == progress


def test_a_completed_claim_round_trips_every_field(store):
    created = store.create(new_claim())
    done = replace(
        created, state=COMPLETED, result_sha256="ab" * 32, locked_until=NOW + 5.5, expires_at=NOW + 3605.5
    )

    updated = store.update(done)

    assert store.get(created.key_hash) == updated == replace(done, etag=updated.etag)


def test_the_stored_entity_holds_only_hashes_and_never_the_raw_key(table, store):
    raw_key = f"key-raw-{uuid.uuid4().hex}"
    email = f"private.{uuid.uuid4().hex[:8]}@example.org"
    key_hash = HASHER.idempotency_key(raw_key)
    fingerprint = HASHER.request(canonical_request({"email": email, "idempotency_key": raw_key}))
    created = store.create(new_claim(key_hash, fingerprint=fingerprint))

    entity = table.get_entity(key_hash, key_hash)

    assert entity["PartitionKey"] == entity["RowKey"] == key_hash
    assert entity["Fingerprint"] == fingerprint
    assert set(entity) == {
        "PartitionKey",
        "RowKey",
        "State",
        "Fingerprint",
        "ReceiptId",
        "LockedUntil",
        "ExpiresAt",
        "Progress",
        "ReceiptSha256",
        "CreatedAt",
    }
    stored = json.dumps(dict(entity), default=str) + json.dumps(entity.metadata, default=str)
    for secret in (raw_key, raw_key.removeprefix("key-"), email, email.split("@")[0]):
        assert secret not in stored
    assert created.key_hash != raw_key


# --- reap ------------------------------------------------------------------------------------------


def test_reap_deletes_only_claims_whose_expiry_has_passed_and_returns_the_count(store):
    offsets = {"long-gone": -3600, "just-gone": -0.5, "due-now": 0, "just-alive": 0.5, "alive": 3600}
    claims = {name: store.create(new_claim(expires_at=NOW + offset)) for name, offset in offsets.items()}

    removed = store.reap(NOW)

    assert removed == 2
    left = {name for name, claim in claims.items() if store.get(claim.key_hash) is not None}
    assert left == {"due-now", "just-alive", "alive"}


def test_reap_with_nothing_expired_removes_nothing(store):
    created = store.create(new_claim(expires_at=NOW + 10))

    assert store.reap(NOW) == 0

    assert store.get(created.key_hash) == created


def test_reap_on_a_table_that_does_not_exist_is_zero(table, store):
    assert store.reap(NOW) == 0
    assert not table_exists(table)


def test_a_second_reap_finds_nothing_left(store):
    for offset in (-30, -20, -10):
        store.create(new_claim(expires_at=NOW + offset))

    assert store.reap(NOW) == 3
    assert store.reap(NOW) == 0


class _ChangesAfterQuery:
    """A TableClient that lets another writer renew one claim between reap's query and its deletes."""

    def __init__(self, table, renew: Claim):
        self._table = table
        self._renew = renew

    def __getattr__(self, name):
        return getattr(self._table, name)

    def query_entities(self, *args, **kwargs):
        found = list(self._table.query_entities(*args, **kwargs))
        renewed = replace(self._renew, expires_at=NOW + 3600)
        self._table.update_entity(
            {
                "PartitionKey": renewed.key_hash,
                "RowKey": renewed.key_hash,
                "State": renewed.state,
                "Fingerprint": renewed.fingerprint,
                "ReceiptId": renewed.result_id,
                "LockedUntil": float(renewed.locked_until),
                "ExpiresAt": float(renewed.expires_at),
                "Progress": "{}",
                "ReceiptSha256": "",
            },
            mode=UpdateMode.REPLACE,
        )
        return found


def test_reap_keeps_a_claim_renewed_after_its_query_and_does_not_count_it(table, store):
    gone = store.create(new_claim(expires_at=NOW - 10))
    renewed = store.create(new_claim(expires_at=NOW - 10))

    removed = TableClaimStore(_ChangesAfterQuery(table, renewed)).reap(NOW)

    assert removed == 1
    assert store.get(gone.key_hash) is None
    assert store.get(renewed.key_hash).expires_at == NOW + 3600


# --- outages ---------------------------------------------------------------------------------------


@pytest.fixture
def dead_store():
    client = table_client(DEAD_TABLES, "idem" + uuid.uuid4().hex[:12], timeout=1)
    yield TableClaimStore(client)
    client.close()


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s: s.get(new_claim().key_hash), id="get"),
        pytest.param(lambda s: s.create(new_claim()), id="create"),
        pytest.param(lambda s: s.update(replace(new_claim(), etag='W/"x"')), id="update"),
        pytest.param(lambda s: s.delete(replace(new_claim(), etag='W/"x"')), id="delete"),
        pytest.param(lambda s: s.reap(NOW), id="reap"),
    ],
)
def test_a_storage_outage_raises_store_unavailable_naming_the_table(dead_store, call):
    started = time.monotonic()

    with pytest.raises(StorageOutage, match="idempotency table"):
        call(dead_store)

    assert time.monotonic() - started < 10


def test_an_outage_is_store_unavailable_caused_by_the_azure_error(dead_store):
    with pytest.raises(StorageOutage) as caught:
        dead_store.get(new_claim().key_hash)

    assert type(caught.value) is StorageOutage
    assert caught.value.__cause__ is not None
    assert type(caught.value.__cause__).__module__.startswith("azure.")


# --- entities of the previous release --------------------------------------------------------------


def test_an_entity_this_version_cannot_read_is_an_outage_not_a_crash(table, store):
    key_hash = new_claim().key_hash
    table.create_table()
    table.create_entity(
        {
            "PartitionKey": key_hash,
            "RowKey": key_hash,
            "ReceiptId": new_receipt_id(),
            "ReceiptSha256": "ab" * 32,
            "CreatedAt": "2030-01-01T10:15:00Z",
        }
    )

    with pytest.raises(StorageOutage, match="unreadable claim"):
        store.get(key_hash)


@pytest.mark.parametrize("until", [None, "next week", "2030-01-01T10:15:00Z"])
def test_a_scoping_horizon_this_version_cannot_read_is_an_outage_not_a_crash(table, store, until):
    table.create_table()
    table.create_entity({"PartitionKey": SCOPING, "RowKey": SCOPING, **({"Until": until} if until else {})})

    with pytest.raises(StorageOutage, match="unreadable scoping horizon"):
        store.scoping_horizon(1_900_000_000.0, 60.0)


def test_the_scoping_horizon_is_written_once_and_every_later_look_reads_it(table, store):
    first = store.scoping_horizon(1_900_000_000.0, 60.0)  # no claims yet: nothing to look for
    store.create(new_claim())

    assert first == 0.0
    assert store.scoping_horizon(1_900_000_500.0, 60.0) == 0.0
    assert TableClaimStore(table).scoping_horizon(1_900_000_900.0, 60.0) == 0.0
