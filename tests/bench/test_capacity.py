"""bench.capacity: the storage calls of a real purchase attributed to the partitions they touch,
and the model's arithmetic against the documented targets."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from urllib.parse import urlsplit

import pytest
import requests

from bench.capacity import model, touches
from bench.capacity_table import table
from bench.stack import QueueTrips
from devstack.counting import RoundTrips, Sent
from shared.purchase.contacts import ContactDrainer
from shared.seams.brevo import BrevoClient
from shared.seams.lease import TableLease
from shared.seams.ledger import SHARDS, shard_of
from shared.seams.storage import table_client
from tests.shared.purchase.test_purchase import build_shop, buy
from tests.support import own_queue, unique_email, unique_key

LEDGER = {"ledger1234": "ledger"}


def roles(trips: RoundTrips) -> dict[str, str]:
    names = {urlsplit(s.url).path.split("/")[2].split("(")[0] for s in trips.sent if s.kind == "table"}
    prefixes = {"idem": "idempotency", "gov": "governance", "ledger": "ledger"}
    return {name: role for name in names for prefix, role in prefixes.items() if name.startswith(prefix)}


def test_every_call_of_a_keyed_purchase_lands_on_the_partition_class_it_belongs_to(azurite, sandbox):
    trips = RoundTrips()
    storefront, _, _ = build_shop(azurite, sandbox, trips)
    buy(storefront, unique_email("warm"), unique_key())  # tables, the scoping horizon, a shard
    trips.take()

    bought = buy(storefront, unique_email("capacity"), unique_key())
    assert bought.status == 200
    receipt = json.loads(bought.body)

    found = [t for sent in trips.sent for t in touches(sent, roles(trips))]
    classes = Counter(cls for cls, _, _ in found)
    assert set(classes) == {
        "claim",
        "rate counter",
        "recipient counter",
        "cost shard",
        "ledger shard",
        "receipt blob",
        "contact queue",
    }
    assert classes["claim"] == 5  # read, insert, two recovery points, completion
    assert classes["cost shard"] in (2, 3)  # read + write; a shard new today also reads its old row
    shards = {p for cls, p, _ in found if cls == "cost shard"}
    assert shards <= {"store-cost"} | {f"store-cost-{i}" for i in range(8)}
    ledger_row = shard_of(receipt["issued_at"][:10], receipt["receipt_id"])
    assert [p for cls, p, _ in found if cls == "ledger shard"] == [ledger_row]
    queues = {re.sub("-[0-9a-f]{12}-", "-*-", p) for cls, p, _ in found if cls == "contact queue"}
    assert queues in ({"contacts-*-0"}, {"contacts-*-1"})  # one message, on one of the store's two queues


def sent(url: str, method: str = "GET", kind: str = "table", returned: tuple[dict, ...] = ()) -> Sent:
    return Sent(kind, method, url, b"", returned)


def test_ledger_rows_are_classed_by_partition_shards_the_day_before_them_and_the_repair_queue():
    base = "http://127.0.0.1:10002/devstoreaccount1/ledger1234"
    shard = sent(f"{base}(PartitionKey='2026-11-30_07',RowKey='rcpt_a')")
    bare_day = sent(f"{base}(PartitionKey='2026-11-30',RowKey='rcpt_a')")
    repair = sent(f"{base}(PartitionKey='repair-blob',RowKey='rcpt_a')")
    listing = sent(
        f"{base}()?$filter=PartitionKey%20ge%20'2026-11-30'%20and%20PartitionKey%20lt%20'2026-11-30~'",
        returned=(
            {"PartitionKey": "2026-11-30", "RowKey": "a"},
            {"PartitionKey": "2026-11-30_15", "RowKey": "b"},
        ),
    )

    assert touches(shard, LEDGER) == [("ledger shard", "2026-11-30_07", 1)]
    assert touches(bare_day, LEDGER) == [("ledger day", "2026-11-30", 1)]
    assert touches(repair, LEDGER) == [("repair queue", "repair-blob", 1)]
    assert touches(listing, LEDGER) == [("ledger day", "2026-11-30", 1), ("ledger shard", "2026-11-30_15", 1)]


@pytest.mark.parametrize(
    "method, url",
    [
        ("POST", "http://127.0.0.1:10001/devstoreaccount1/contacts-03/messages?messagettl=-1"),
        ("GET", "https://store.queue.core.windows.net/contacts-03/messages?numofmessages=32"),
        (
            "DELETE",
            "https://store.queue.core.windows.net/contacts-03/messages/6f1e2c?popreceipt=AgAAAA%3D%3D",
        ),
        (
            "PUT",
            "http://127.0.0.1:10001/devstoreaccount1/contacts-03/messages/6f1e2c?popreceipt=x&visibilitytimeout=30",
        ),
        ("PUT", "http://127.0.0.1:10001/devstoreaccount1/contacts-03"),
        ("GET", "https://store.queue.core.windows.net/contacts-03?comp=metadata"),
    ],
    ids=["put-azurite", "get-azure", "delete-azure", "update-azurite", "create-azurite", "metadata-azure"],
)
def test_a_queue_request_touches_the_contact_queue_it_names(method, url):
    assert touches(sent(url, method, "queue"), LEDGER) == [("contact queue", "contacts-03", 1)]


def test_each_message_a_queue_read_returns_counts_and_a_service_request_names_no_queue():
    url = "http://127.0.0.1:10001/devstoreaccount1/contacts-03/messages?numofmessages=32"
    five = tuple({"MessageId": str(n)} for n in range(5))

    assert touches(sent(url, kind="queue", returned=five), LEDGER) == [("contact queue", "contacts-03", 5)]
    assert touches(sent(url, kind="queue"), LEDGER) == [("contact queue", "contacts-03", 1)]
    listed = sent("http://127.0.0.1:10001/devstoreaccount1?comp=list", kind="queue")
    assert touches(listed, LEDGER) == [("queue admin", "", 1)]


def test_a_queue_read_counts_each_message_it_returns_at_the_bench_transport(azurite):
    trips = QueueTrips()
    queue = own_queue(azurite, transport=trips.transport("queue"))
    for _ in range(3):
        queue.enqueue(unique_email("counted"), "")
    trips.take()

    received = [w for shard in range(queue.shard_count) for w in queue.receive(shard, 32, 30)]

    reads = [s for s in trips.sent if s.method == "GET"]  # a short page is followed by another read
    assert len(received) == 3
    assert sum(len(s.returned) for s in reads) == 3
    touched = [t for s in reads for t in touches(s, {})]
    assert {cls for cls, _, _ in touched} == {"contact queue"}
    assert sum(count for _, _, count in touched) == 3 + sum(not s.returned for s in reads)


def test_a_drainer_run_lands_on_the_contact_queue_and_the_drainer_lease(azurite, sandbox):
    trips = QueueTrips()
    governance = f"gov{uuid.uuid4().hex[:10]}"
    queue = own_queue(azurite, transport=trips.transport("queue"))
    lease = TableLease(table_client(azurite, governance, 5, trips.transport("table")), "contact-drainer", 60)
    brevo = BrevoClient(requests.Session(), f"{sandbox.url}/v3", "unit-test-key", 5)
    for _ in range(3):
        queue.enqueue(unique_email("drained"), "")
    ContactDrainer(queue, brevo, lease, 2).run()  # the lease's table exists, the queues are read once
    for _ in range(3):
        queue.enqueue(unique_email("drained"), "")
    trips.take()

    assert ContactDrainer(queue, brevo, lease, 2).run().handed == 3

    found = [t for s in trips.sent for t in touches(s, {governance: "governance"})]
    assert {cls for cls, _, _ in found} == {"contact queue", "drainer lease"}
    assert sum(cls == "drainer lease" for cls, _, _ in found) == 4  # read + take, renewal, release
    deletes = [s for s in trips.sent if s.kind == "queue" and s.method == "DELETE"]
    assert len(deletes) == 3
    assert sum(len(s.returned) for s in trips.sent if s.kind == "queue") == 3


def modelled(
    cost_entities: float, cost_partitions: int, ledger_partitions: int = SHARDS, **extra: tuple[float, int]
) -> dict:
    """A fresh keyed purchase: 11 calls now and 3 later, two ledger entities (the row, the repair
    timer's read), `cost_entities` on the cost shards; `extra` adds classes as (entities, fan-out)."""
    classes = {
        "cost shard": {"entities_per_purchase": cost_entities},
        "ledger shard": {"entities_per_purchase": 2.0},
        "claim": {"entities_per_purchase": 7.0},
        **{cls.replace("_", " "): {"entities_per_purchase": e} for cls, (e, _) in extra.items()},
    }
    fan_out = {
        "cost shard": cost_partitions,
        "ledger shard": ledger_partitions,
        **{cls.replace("_", " "): n for cls, (_, n) in extra.items()},
    }
    return model({"calls_per_purchase": 11, "later_calls_per_purchase": 3, "classes": classes}, fan_out)


def test_the_ceiling_is_the_first_target_a_path_reaches_and_names_what_moves_it():
    spread = modelled(2.0, 8)  # a read and a write on one of 8 partitions
    one_partition = modelled(9.0, 1)  # every shard read, one written, all in one partition

    assert (spread["ceiling_per_second"], spread["first_limit"]) == (1429, "account requests")
    assert spread["moved_by"] == "none: one account"
    assert spread["limits_per_second"] == {
        "account requests": 1429,
        "cost shard partition": 8000,
        "ledger shard partition": 16000,
    }
    assert "claim" not in str(spread["limits_per_second"])  # a buyer's own partitions spread with buyers
    assert (one_partition["ceiling_per_second"], one_partition["first_limit"]) == (
        222,
        "cost shard partition",
    )
    assert one_partition["moved_by"] == "STOREFRONT_COST_COUNTER_SHARDS"
    assert one_partition["bundles_per_day_at_ceiling"] == 19_200_000  # 2,000 / 9 a second


def test_the_model_names_the_next_ceiling_and_what_moves_it():
    spread = modelled(2.0, 8)
    many_cost_shards = modelled(2.0, 800)
    one_ledger_partition = modelled(2.0, 8, ledger_partitions=1)  # the ledger before its shards

    assert (spread["next_limit"], spread["next_ceiling_per_second"]) == ("cost shard partition", 8000)
    assert spread["next_moved_by"] == "STOREFRONT_COST_COUNTER_SHARDS"
    assert (many_cost_shards["next_limit"], many_cost_shards["next_ceiling_per_second"]) == (
        "ledger shard partition",
        16000,
    )
    assert many_cost_shards["next_moved_by"] == "shared.seams.ledger.SHARDS, a constant"
    assert (one_ledger_partition["first_limit"], one_ledger_partition["ceiling_per_second"]) == (
        "ledger shard partition",
        1000,
    )
    assert (one_ledger_partition["next_limit"], one_ledger_partition["next_ceiling_per_second"]) == (
        "account requests",
        1429,
    )


def test_the_drainer_lease_is_a_class_of_its_own_not_a_buyers_rate_counter():
    base = "http://127.0.0.1:10002/devstoreaccount1/gov1234"
    lease = sent(f"{base}(PartitionKey='lease',RowKey='contact-drainer')")
    rate = sent(f"{base}(PartitionKey='client-3f2a',RowKey='2026-11-30T10')")

    assert touches(lease, {"gov1234": "governance"}) == [("drainer lease", "lease", 1)]
    assert touches(rate, {"gov1234": "governance"}) == [("rate counter", "client-3f2a", 1)]


def test_a_path_with_one_target_has_no_next_ceiling():
    replay = model({"calls_per_purchase": 1, "classes": {"claim": {"entities_per_purchase": 1.0}}}, {})

    assert (replay["first_limit"], replay["ceiling_per_second"]) == ("account requests", 20000)
    assert (replay["next_limit"], replay["next_ceiling_per_second"], replay["next_moved_by"]) == (
        None,
        None,
        None,
    )


def test_the_contact_queue_meets_the_per_queue_target_over_the_queues_the_caller_names():
    one_queue = modelled(2.0, 8, contact_queue=(3.0, 1))  # put, get, delete: all on one queue
    four_queues = modelled(2.0, 8, contact_queue=(3.0, 4))

    assert (one_queue["first_limit"], one_queue["ceiling_per_second"]) == ("contact queue", 667)
    assert one_queue["moved_by"] == "STOREFRONT_CONTACT_QUEUE_SHARDS"
    assert one_queue["next_limit"] == "account requests"
    assert one_queue["classes"]["contact queue"]["busiest_partition_per_purchase"] == 3.0
    assert four_queues["limits_per_second"]["contact queue"] == 2667
    assert (four_queues["first_limit"], four_queues["next_limit"]) == ("account requests", "contact queue")


def test_the_capacity_table_shows_both_ceilings_and_what_moves_them():
    rows = [
        {"path": "fresh, key", "cost_shards": 8, **modelled(2.0, 8, contact_queue=(3.0, 4))},
        {"path": "fresh, key", "cost_shards": 800, **modelled(2.0, 800)},
    ]
    capacity = {
        "targets": {"account_requests_per_second": 20000, "partition_entities_per_second": 2000},
        "a_million_a_day_per_second": 11.6,
        "rows": rows,
    }

    header, columns, first, second, *legend = table(capacity)

    assert "2,000 messages/s per queue" in header
    assert "cost shard  ledger shard  contact queue  ceiling/s  first target hit" in columns
    assert first.split()[5:8] == ["0.25", "0.125", "0.75"]
    assert "1,429  account requests" in first and first.endswith("2,667  contact queue")
    assert second.split()[5:8] == ["0.0025", "0.125", "0"]
    assert second.endswith("16,000  ledger shard partition")
    assert legend[-4:] == [
        "  what moves each target hit:",
        "    account requests         none: one account",
        "    contact queue            STOREFRONT_CONTACT_QUEUE_SHARDS",
        "    ledger shard partition   shared.seams.ledger.SHARDS, a constant",
    ]
