"""The receipt document (shared/purchase/receipt/document.py): receipt ids, the masked email hint,
the six checks, the output schema; and the write-once Blob store (shared/seams/receipt_store.py),
against the session's Azurite."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import uuid
from decimal import Decimal

import jsonschema
import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from devstack.run import DEV_ACCOUNT_KEY
from shared.config.errors import InvalidRequest, LimitExceeded, NotConfigured, StorageOutage
from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.exactly_once.idempotency import IdempotencyHandler
from shared.purchase.call import Caller, PurchaseCall, StoreConfig
from shared.purchase.governance import Governance, Limits
from shared.purchase.receipt import signatures
from shared.purchase.receipt.document import (
    CHECK_NAMES,
    OUTPUT_SCHEMA,
    RECEIPT_ID_PATTERN,
    RESULTS,
    Checks,
    encode,
    is_receipt_id,
    mask_email,
    new_receipt_id,
    sha256,
)
from shared.purchase.storefront import Storefront
from shared.seams.brevo import BrevoClient
from shared.seams.claims import TableClaimStore
from shared.seams.counters import TableCounters
from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue
from shared.seams.storage import container_client, table_client
from tests.support import own_queue

DEAD_BLOBS = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={DEV_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)

# --- receipt ids -----------------------------------------------------------------------------------


def test_new_receipt_id_has_the_documented_format():
    receipt_id = new_receipt_id()

    assert receipt_id.startswith("rcpt_")
    assert len(receipt_id) == 31
    assert set(receipt_id[5:]) <= set("abcdefghijklmnopqrstuvwxyz234567")
    assert is_receipt_id(receipt_id)


def test_new_receipt_ids_are_unique():
    ids = {new_receipt_id() for _ in range(10_000)}

    assert len(ids) == 10_000


def test_receipt_id_pattern_is_anchored():
    assert RECEIPT_ID_PATTERN.startswith("^") and RECEIPT_ID_PATTERN.endswith("$")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("rcpt_", id="prefix-only"),
        pytest.param("rcpt_" + "a" * 25, id="too-short"),
        pytest.param("rcpt_" + "a" * 27, id="too-long"),
        pytest.param("rcpt_" + "A" * 26, id="upper-case"),
        pytest.param("RCPT_" + "a" * 26, id="upper-prefix"),
        pytest.param("rcpt_" + "a" * 25 + "1", id="digit-1"),
        pytest.param("rcpt_" + "a" * 25 + "8", id="digit-8"),
        pytest.param("rcpt_" + "a" * 26 + "\n", id="trailing-newline"),
        pytest.param("rcpt_" + "a" * 25 + "/", id="slash"),
        pytest.param("../rcpt_" + "a" * 26, id="path-traversal"),
        pytest.param("rcpt-" + "a" * 26, id="hyphen"),
        pytest.param("a" * 31, id="no-prefix"),
    ],
)
def test_is_receipt_id_rejects_anything_else(value):
    assert not is_receipt_id(value)


# --- mask_email ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("email", "hint"),
    [
        ("john@example.com", "j***@e***.com"),
        ("a@b.co", "a***@b***.co"),
        ("first.last@mail.example.co.uk", "f***@m***.uk"),
        ("x+tag@example.org", "x***@e***.org"),
    ],
)
def test_mask_email_keeps_only_first_letters_and_the_tld(email, hint):
    assert mask_email(email) == hint


def test_mask_email_does_not_reveal_the_local_part_or_the_domain():
    hint = mask_email("alexandra@privatedomain.net")

    assert "lexandra" not in hint
    assert "privatedomain" not in hint
    assert "rivatedomain" not in hint


def test_mask_email_hides_the_length_of_the_address():
    assert mask_email("a@e.com") == mask_email("abcdefghijk@example.com")


# --- Checks ----------------------------------------------------------------------------------------


def test_checks_start_as_skipped_in_the_documented_order():
    assert Checks().as_list() == [
        {"name": n, "result": "skipped", "detail": "not reached"} for n in CHECK_NAMES
    ]
    assert CHECK_NAMES == (
        "idempotency",
        "input_schema",
        "rate_limit",
        "cost_ceiling",
        "contact_upsert",
        "fulfillment_email",
    )


def test_recording_a_check_keeps_the_order_and_replaces_only_that_check():
    checks = Checks()

    checks.set("fulfillment_email", "pass", "sent")
    checks.set("idempotency", "degraded", "store down")
    checks.set("idempotency", "fail", "bad key")

    listed = checks.as_list()
    assert [c["name"] for c in listed] == list(CHECK_NAMES)
    assert listed[0] == {"name": "idempotency", "result": "fail", "detail": "bad key"}
    assert listed[-1] == {"name": "fulfillment_email", "result": "pass", "detail": "sent"}
    assert [c["result"] for c in listed[1:-1]] == ["skipped"] * 4


@pytest.mark.parametrize(("name", "result"), [("refund", "pass"), ("idempotency", "ok")])
def test_recording_an_unknown_check_or_result_is_refused(name, result):
    checks = Checks()

    with pytest.raises(ValueError):
        checks.set(name, result, "detail")

    assert len(checks.as_list()) == 6


def test_as_list_returns_a_copy():
    checks = Checks()

    checks.as_list()[0]["result"] = "pass"

    assert checks.as_list()[0]["result"] == "skipped"


def test_nothing_is_recorded_or_had_before_a_check_is_recorded():
    checks = Checks()

    assert checks.recorded() == {}
    assert not any(checks.has(name) for name in CHECK_NAMES)


def test_recorded_lists_only_the_recorded_checks_in_the_documented_order():
    checks = Checks()

    checks.set("fulfillment_email", "pass", "sent")
    checks.set("idempotency", "pass", "claimed")
    checks.set("rate_limit", "degraded", "store down")

    recorded = checks.recorded()
    assert recorded == {
        "idempotency": ["pass", "claimed"],
        "rate_limit": ["degraded", "store down"],
        "fulfillment_email": ["pass", "sent"],
    }
    assert list(recorded) == ["idempotency", "rate_limit", "fulfillment_email"]


def test_recorded_keeps_the_latest_result_of_a_check():
    checks = Checks()

    checks.set("idempotency", "degraded", "store down")
    checks.set("idempotency", "pass", "claimed")

    assert checks.recorded() == {"idempotency": ["pass", "claimed"]}


def test_has_is_true_only_for_recorded_checks_even_when_recorded_as_skipped():
    checks = Checks()

    checks.set("idempotency", "skipped", "no key supplied")
    checks.set("contact_upsert", "pass", "contact created in Brevo")

    assert [name for name in CHECK_NAMES if checks.has(name)] == ["idempotency", "contact_upsert"]
    assert not checks.has("refund")


def test_recorded_is_a_copy():
    checks = Checks()
    checks.set("idempotency", "pass", "claimed")

    checks.recorded()["idempotency"][0] = "fail"
    checks.recorded()["rate_limit"] = ["pass", "forged"]

    assert checks.recorded() == {"idempotency": ["pass", "claimed"]}
    assert not checks.has("rate_limit")


def test_restore_from_recorded_checks_round_trips_through_json():
    original = Checks()
    original.set("idempotency", "pass", "claimed")
    original.set("rate_limit", "pass", "within 5 per hour")
    original.set("contact_upsert", "pass", "contact created in Brevo")
    recovery_point = json.loads(json.dumps(original.recorded()))

    restored = Checks()
    restored.restore(recovery_point)

    assert restored.as_list() == original.as_list()
    assert restored.recorded() == original.recorded()
    assert [n for n in CHECK_NAMES if restored.has(n)] == ["idempotency", "rate_limit", "contact_upsert"]
    assert not restored.has("fulfillment_email")


def test_restore_of_nothing_leaves_every_check_unrecorded():
    checks = Checks()

    checks.restore({})

    assert checks.recorded() == {}
    assert checks.as_list() == Checks().as_list()


def test_a_check_recorded_after_restore_replaces_the_restored_result():
    checks = Checks()
    checks.restore({"idempotency": ["pass", "claimed"], "fulfillment_email": ["fail", "timed out"]})

    checks.set("fulfillment_email", "pass", "sent")

    assert checks.recorded() == {
        "idempotency": ["pass", "claimed"],
        "fulfillment_email": ["pass", "sent"],
    }


@pytest.mark.parametrize(
    "recorded",
    [{"refund": ["pass", "ok"]}, {"idempotency": ["ok", "claimed"]}],
    ids=["unknown-check", "unknown-result"],
)
def test_restore_refuses_an_unknown_check_or_result(recorded):
    with pytest.raises(ValueError):
        Checks().restore(recorded)


# --- encoding --------------------------------------------------------------------------------------


def test_encode_is_utf8_json_and_sha256_is_its_hex_digest():
    body = encode({"name": "Zoë", "n": 1})

    assert json.loads(body) == {"name": "Zoë", "n": 1}
    assert "Zoë".encode() in body
    assert sha256(body) == hashlib.sha256(body).hexdigest()
    assert len(sha256(b"")) == 64


# --- OUTPUT_SCHEMA ---------------------------------------------------------------------------------


def test_output_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(OUTPUT_SCHEMA)
    assert OUTPUT_SCHEMA["type"] == "object"


def _signing_key() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture(scope="module")
def keys() -> KeySet:
    return KeySet.load(_signing_key())


@pytest.fixture
def make_storefront(azurite, sandbox):
    def make(keys) -> Storefront:
        suffix = uuid.uuid4().hex[:12]
        hasher = Hasher("unit-test-secret")
        limits = Limits(5, Decimal("5.00"), Decimal("0.01"))
        receipts = BlobReceiptStore(container_client(azurite, "rcpt" + suffix, 5))
        return Storefront(
            StoreConfig("http://localhost:7071", "store@example.com", "Storefront"),
            hasher=hasher,
            idempotency=IdempotencyHandler(
                TableClaimStore(table_client(azurite, "idem" + suffix, 5)),
                receipts,
                lease_seconds=60,
                ttl_seconds=3600,
            ),
            governance=Governance(TableCounters(table_client(azurite, "gov" + suffix, 5)), hasher, limits),
            receipts=receipts,
            brevo=BrevoClient(requests.Session(), f"{sandbox.url}/v3", "unit-test-key", 5),
            keys=keys,
            ledger=TableLedger(table_client(azurite, "ledger" + suffix, 5)),
            repairs=RepairQueue(table_client(azurite, "ledger" + suffix, 5)),
            contacts=own_queue(azurite),
        )

    return make


@pytest.fixture
def storefront(make_storefront, keys):
    return make_storefront(lambda: keys)


def _validate(receipt: dict) -> None:
    jsonschema.Draft202012Validator(OUTPUT_SCHEMA).validate(receipt)


def test_output_schema_validates_a_real_fulfilled_receipt(storefront, keys):
    email = f"receipt.{uuid.uuid4().hex[:12]}@example.org"
    call = PurchaseCall(
        {"email": email, "name": "Ada"}, "key-" + uuid.uuid4().hex, "203.0.113.1", Caller("http")
    )

    outcome = storefront.purchase(call)

    receipt = json.loads(outcome.body)
    assert outcome.status == 200, receipt
    assert receipt["status"] == "fulfilled"
    assert receipt["download"] and receipt["bundle"] and receipt["buyer"]
    _validate(receipt)
    assert storefront.stored_receipt(receipt["receipt_id"]) == outcome.body
    assert receipt["signature"]["alg"] == "ES256"
    assert receipt["signature"]["kid"] == keys.kid
    assert signatures.verify(outcome.body, keys.jwks()).valid


@pytest.mark.parametrize(
    "error",
    [InvalidRequest("bad body", code="invalid_json"), LimitExceeded("slow down", retry_after=60)],
    ids=["invalid-json", "limit"],
)
def test_output_schema_validates_a_real_refusal_receipt(storefront, keys, error):
    outcome = storefront.refuse(PurchaseCall(None, None, "unknown", Caller("mcp", "agent/1.0")), error)

    receipt = json.loads(outcome.body)
    assert receipt["status"] == "refused"
    assert receipt["bundle"] is None and receipt["receipt_url"] is None
    _validate(receipt)
    assert signatures.verify(outcome.body, keys.jwks()).valid


def test_output_schema_declares_the_signature_member_as_nullable_and_optional():
    signature = OUTPUT_SCHEMA["properties"]["signature"]

    assert {"type": "null"} in signature["anyOf"]
    (declared,) = [s for s in signature["anyOf"] if s.get("type") == "object"]
    assert set(declared["properties"]) == {"alg", "kid", "jws"}
    assert "signature" not in OUTPUT_SCHEMA["required"]


def test_a_store_without_a_usable_signing_key_issues_receipts_with_a_null_signature(make_storefront):
    def unconfigured() -> KeySet:
        raise NotConfigured("STOREFRONT_SIGNING_KEY is not set")

    store = make_storefront(unconfigured)

    outcome = store.refuse(PurchaseCall(None, None, "unknown", Caller("http")), InvalidRequest("bad"))

    receipt = json.loads(outcome.body)
    assert "signature" in receipt and receipt["signature"] is None
    _validate(receipt)
    assert not signatures.verify(outcome.body, {"keys": []}).valid


@pytest.mark.parametrize(
    "mutation",
    [
        pytest.param(lambda r: r.pop("checks"), id="missing-checks"),
        pytest.param(lambda r: r["checks"].pop(), id="five-checks"),
        pytest.param(lambda r: r.update(status="done"), id="unknown-status"),
        pytest.param(lambda r: r["checks"][0].update(result="ok"), id="unknown-result"),
        pytest.param(lambda r: r.update(version="1"), id="version-string"),
        pytest.param(lambda r: r.update(signature="eyJhbGciOiJFUzI1NiJ9..c2ln"), id="signature-string"),
        pytest.param(lambda r: r["signature"].update(kid=7), id="signature-kid-number"),
        pytest.param(lambda r: r["signature"].update(jws=None), id="signature-jws-null"),
    ],
)
def test_output_schema_rejects_a_broken_receipt(storefront, mutation):
    outcome = storefront.refuse(PurchaseCall(None, None, "unknown", Caller("http")), InvalidRequest("bad"))
    receipt = json.loads(outcome.body)

    mutation(receipt)

    with pytest.raises(jsonschema.ValidationError):
        _validate(receipt)


# --- BlobReceiptStore on Azurite -------------------------------------------------------------------


@pytest.fixture
def container(azurite):
    client = container_client(azurite, "rcpt" + uuid.uuid4().hex[:12], timeout=5)
    yield client
    with contextlib.suppress(ResourceNotFoundError):
        client.delete_container()
    client.close()


def test_first_write_creates_the_container_and_stores_the_bytes(container):
    store = BlobReceiptStore(container)
    receipt_id = new_receipt_id()
    assert not container.exists()

    store.write(receipt_id, b'{"receipt": 1}')

    assert container.exists()
    assert store.read(receipt_id) == b'{"receipt": 1}'
    blob = container.get_blob_client(f"{receipt_id}.json").get_blob_properties()
    assert blob.content_settings.content_type == "application/json"


def test_receipts_are_write_once(container):
    store = BlobReceiptStore(container)
    receipt_id = new_receipt_id()
    assert store.write(receipt_id, b"first") is True

    assert store.write(receipt_id, b"second") is False

    assert store.read(receipt_id) == b"first"


def test_a_write_under_another_id_is_stored_even_after_a_refused_overwrite(container):
    store = BlobReceiptStore(container)
    first, second = new_receipt_id(), new_receipt_id()
    store.write(first, b"first")
    store.write(first, b"again")

    assert store.write(second, b"second") is True

    assert store.read(first) == b"first"
    assert store.read(second) == b"second"


def test_reading_a_missing_receipt_is_none(container):
    store = BlobReceiptStore(container)
    store.write(new_receipt_id(), b"other")

    assert store.read(new_receipt_id()) is None


def test_reading_from_a_container_that_does_not_exist_yet_is_none(container):
    assert BlobReceiptStore(container).read(new_receipt_id()) is None


def test_receipts_round_trip_byte_for_byte(container):
    store = BlobReceiptStore(container)
    receipt_id = new_receipt_id()
    body = encode({"receipt_id": receipt_id, "name": "Zoë", "nested": {"a": [1, 2]}})

    store.write(receipt_id, body)

    assert store.read(receipt_id) == body
    assert sha256(store.read(receipt_id)) == sha256(body)


@pytest.fixture
def dead_store():
    # Built without retries: shared.seams.storage.container_client's one retry waits 12-18 s (see
    # test_blob_outage_is_reported_within_the_storage_timeout); this fixture tests the error mapping.
    client = ContainerClient.from_connection_string(
        DEAD_BLOBS, container_name="rcpt" + uuid.uuid4().hex[:12], retry_total=0, connection_timeout=1
    )
    yield BlobReceiptStore(client)
    client.close()


def test_write_during_a_storage_outage_raises_store_unavailable(dead_store):
    with pytest.raises(StorageOutage, match="blob storage"):
        dead_store.write(new_receipt_id(), b"{}")


def test_read_during_a_storage_outage_raises_store_unavailable(dead_store):
    with pytest.raises(StorageOutage, match="blob storage"):
        dead_store.read(new_receipt_id())


def test_blob_outage_is_reported_within_the_storage_timeout():
    store = BlobReceiptStore(container_client(DEAD_BLOBS, "rcpt" + uuid.uuid4().hex[:12], timeout=1))
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            store.read(new_receipt_id())
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome.append(exc)

    # A daemon thread, so a hanging read cannot hold the suite for the SDK's backoff.
    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(3)

    assert not worker.is_alive(), "a read from unreachable blob storage was still retrying after 3 s"
    assert isinstance(outcome[0], StorageOutage)


def test_results_are_the_four_documented_values():
    assert RESULTS == ("pass", "fail", "skipped", "degraded")
