"""bench.capacity: the storage calls of a real purchase attributed to the partitions they touch,
and the model's arithmetic against the documented targets."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

from bench.capacity import model, touches
from tests.support import RoundTrips, unique_email, unique_key
from tests.test_purchase import build_shop, buy


def roles(trips: RoundTrips) -> dict[str, str]:
    names = {urlsplit(s.url).path.split("/")[2].split("(")[0] for s in trips.sent if s.kind == "table"}
    prefixes = {"idem": "idempotency", "gov": "governance", "ledger": "ledger"}
    return {name: role for name in names for prefix, role in prefixes.items() if name.startswith(prefix)}


def test_every_call_of_a_keyed_purchase_lands_on_the_partition_class_it_belongs_to(azurite, sandbox):
    trips = RoundTrips()
    storefront, _, _ = build_shop(azurite, sandbox, trips)
    buy(storefront, unique_email("warm"), unique_key())  # tables, the scoping horizon, a shard
    trips.take()

    assert buy(storefront, unique_email("capacity"), unique_key()).status == 200

    found = [t for sent in trips.sent for t in touches(sent, roles(trips))]
    classes = Counter(cls for cls, _, _ in found)
    assert set(classes) == {
        "claim",
        "rate counter",
        "recipient counter",
        "cost shard",
        "ledger day",
        "receipt blob",
    }
    assert classes["claim"] == 5  # read, insert, two recovery points, completion
    assert classes["cost shard"] in (2, 3)  # read + write; a shard new today also reads its old row
    shards = {p for cls, p, _ in found if cls == "cost shard"}
    assert shards <= {"store-cost"} | {f"store-cost-{i}" for i in range(8)}
    assert len({p for cls, p, _ in found if cls == "ledger day"}) == 1


def modelled(cost_entities: float, cost_partitions: int) -> dict:
    """A fresh keyed purchase: 11 calls, one ledger row, `cost_entities` on the cost shards."""
    classes = {
        "cost shard": {"entities_per_purchase": cost_entities},
        "ledger day": {"entities_per_purchase": 1.0},
    }
    return model(
        {"calls_per_purchase": 11, "classes": classes}, {"cost shard": cost_partitions, "ledger day": 1}
    )


def test_the_ceiling_is_the_first_target_a_path_reaches_and_names_what_moves_it():
    spread = modelled(2.0, 8)  # a read and a write on one of 8 partitions
    one_partition = modelled(9.0, 1)  # every shard read, one written, all in one partition

    assert (spread["ceiling_per_second"], spread["first_limit"]) == (1818, "account requests")
    assert spread["limits_per_second"] == {
        "account requests": 1818,
        "ledger day partition": 2000,
        "cost shard partition": 8000,
    }
    assert (one_partition["ceiling_per_second"], one_partition["first_limit"]) == (
        222,
        "cost shard partition",
    )
    assert one_partition["moved_by"] == "STOREFRONT_COST_COUNTER_SHARDS"
    assert one_partition["bundles_per_day_at_ceiling"] == 19_200_000  # 2,000 / 9 a second
