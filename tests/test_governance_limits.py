"""shared.governance: the limits as a caller meets them at their edges, on the session's Azurite.
What each refusal says and when it says to retry, a zero cost per purchase (which the settings
accept), the cost counter's fallback when the shard it drew is full, and a counter contended on
every attempt."""

from __future__ import annotations

import contextlib
import time
import uuid
from decimal import Decimal

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableClient

from shared.errors import LimitExceeded, StoreUnavailable
from shared.governance import Governance, Limits, Reservation
from shared.hashing import Hasher
from shared.storage import table_client

# 2030-01-01T10:15:00Z: 45 minutes to the next hour, 13 h 45 min to midnight UTC.
T0 = 1893492900.0
DAY = "cost-2030-01-01"


def limits(
    rate: int = 100, ceiling: str = "5", cost: str = "0.01", shards: int = 8, recipients: int = 3
) -> Limits:
    return Limits(
        rate, Decimal(ceiling), Decimal(cost), cost_shards=shards, recipient_limit_per_day=recipients
    )


def governed(table: TableClient, given: Limits) -> Governance:
    return Governance(table, Hasher("limits-test-secret"), given, clock=lambda: T0)


@pytest.fixture
def table(azurite):
    client = table_client(azurite, "lim" + uuid.uuid4().hex[:12], timeout=5)
    with contextlib.suppress(ResourceExistsError):
        client.create_table()
    yield client
    client.delete_table()
    client.close()


def refusal(reserve) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as refused:
        reserve()
    return refused.value


def shard_counts(table: TableClient) -> dict[int, int]:
    return {
        int(e["PartitionKey"].rsplit("-", 1)[1]): int(e["Count"])
        for e in table.list_entities()
        if e["PartitionKey"].startswith("store-cost-") and e["RowKey"] == DAY
    }


def fill(table: TableClient, counts: dict[int, int]) -> None:
    """Today's cost shards as other instances left them."""
    for shard, count in counts.items():
        table.create_entity({"PartitionKey": f"store-cost-{shard}", "RowKey": DAY, "Count": str(count)})


# --- what a refusal says --------------------------------------------------------------------------


@pytest.mark.parametrize(("per_hour", "said"), [(1, "1 purchase"), (2, "2 purchases")])
def test_the_rate_limit_refusal_says_the_limit_whose_address_counts_and_the_setting(table, per_hour, said):
    gov = governed(table, limits(rate=per_hour))
    for _ in range(per_hour):
        gov.reserve_rate("203.0.113.10")

    refused = refusal(lambda: gov.reserve_rate("203.0.113.10"))

    assert (refused.code, refused.status, refused.retry_after) == ("rate_limited", 429, 45 * 60)
    assert refused.message == (
        f"rate limit reached: {said} per hour from one client address (an IPv6 client's whole /64); "
        "the store sets this limit with STOREFRONT_RATE_LIMIT_PER_HOUR"
    )


@pytest.mark.parametrize(("per_day", "said"), [(1, "1 email"), (3, "3 emails")])
def test_the_recipient_refusal_says_the_limit_and_the_setting_until_midnight(table, per_day, said):
    gov = governed(table, limits(recipients=per_day))
    for _ in range(per_day):
        gov.reserve_recipient("ada@example.org")

    refused = refusal(lambda: gov.reserve_recipient("ada@example.org"))

    assert (refused.code, refused.status, refused.retry_after) == ("rate_limited", 429, 13 * 3600 + 45 * 60)
    assert refused.message.startswith(f"recipient limit reached: {said} per UTC day to one ")
    assert refused.message.endswith(
        ", whoever asks; the store sets this limit with STOREFRONT_RECIPIENT_LIMIT_PER_DAY"
    )


def test_the_cost_ceiling_refusal_names_the_ceiling_and_the_setting_until_midnight(table):
    gov = governed(table, limits(ceiling="0.02", cost="0.01"))
    gov.reserve_cost()
    gov.reserve_cost()

    refused = refusal(gov.reserve_cost)

    assert (refused.code, refused.status, refused.retry_after) == (
        "cost_ceiling_reached",
        429,
        13 * 3600 + 45 * 60,
    )
    assert refused.message == (
        "daily cost ceiling of $0.02 reached for the store; the store sets it with "
        "STOREFRONT_DAILY_COST_CEILING_USD"
    )


# --- a zero cost per purchase ---------------------------------------------------------------------


@pytest.mark.parametrize("ceiling", ["0", "0.01", "5"])
def test_a_zero_cost_per_purchase_never_reaches_the_ceiling_and_adds_nothing(table, ceiling):
    gov = governed(table, limits(ceiling=ceiling, cost="0", shards=4))

    taken = [gov.reserve_cost() for _ in range(12)]
    for reservation in taken[:3]:
        gov.release(reservation)

    assert all(r.amount == 0 and r.count == 0 for r in taken)
    assert set(shard_counts(table).values()) == {0}
    assert gov.reserve_cost().count == 0


@pytest.mark.parametrize(
    ("ceiling", "cost", "shards", "partitions"),
    [
        ("5", "0", 8, 8),
        ("0.03", "0.01", 8, 3),
        ("0.005", "0.01", 8, 1),
        ("1", "0.01", 8, 8),
        ("0", "0", 3, 3),
    ],
)
def test_the_cost_counter_spreads_over_as_many_shards_as_hold_a_purchase(ceiling, cost, shards, partitions):
    assert limits(ceiling=ceiling, cost=cost, shards=shards).cost_partitions == partitions


# --- the cost counter's shards --------------------------------------------------------------------


@pytest.mark.parametrize("last", [None, 0], ids=["last-shard-unwritten", "last-shard-at-zero"])
def test_when_every_shard_but_one_is_full_a_purchase_still_finds_the_one_with_room(table, last):
    gov = governed(table, limits(ceiling="0.08", cost="0.01"))  # 8 shards of one purchase each
    fill(table, {shard: 10_000 for shard in range(7)} | ({7: last} if last is not None else {}))

    taken = gov.reserve_cost()  # whichever shard it draws first
    refused = refusal(gov.reserve_cost)

    assert (taken.partition, taken.count) == ("store-cost-7", 10_000)
    assert refused.code == "cost_ceiling_reached"
    assert shard_counts(table) == {shard: 10_000 for shard in range(8)}


def test_a_shard_with_room_left_takes_the_purchase_up_to_its_budget(table):
    gov = governed(table, limits(ceiling="0.06", cost="0.01", shards=3))  # 3 shards of two purchases
    fill(table, {0: 20_000, 1: 20_000, 2: 10_000})

    taken = gov.reserve_cost()
    refused = refusal(gov.reserve_cost)

    assert (taken.partition, taken.count) == ("store-cost-2", 20_000)
    assert refused.code == "cost_ceiling_reached"


def test_a_day_whose_total_is_at_the_ceiling_is_refused_even_if_a_shard_shows_room(table):
    gov = governed(table, limits(ceiling="0.04", cost="0.01", shards=2))  # 2 shards of two
    fill(table, {0: 40_000, 1: 0})  # written under a larger budget earlier in the day

    refused = refusal(gov.reserve_cost)

    assert refused.code == "cost_ceiling_reached"
    assert shard_counts(table) == {0: 40_000, 1: 0}


def test_a_cost_given_back_goes_to_the_shard_it_was_taken_from(table):
    gov = governed(table, limits(ceiling="0.03", cost="0.01", shards=3))
    fill(table, {0: 10_000, 1: 10_000})

    taken = gov.reserve_cost()
    gov.release(taken)
    gov.release(Reservation(taken.partition, taken.row, taken.amount))  # no ETag: read, then written

    assert taken.partition == "store-cost-2"
    assert shard_counts(table) == {0: 10_000, 1: 10_000, 2: 0}


# --- a counter contended on every attempt ---------------------------------------------------------


class ContendedTable(TableClient):
    """The real client, but another instance rewrites each counter right after this one reads it,
    so every conditional write this one makes loses the race."""

    rival: TableClient

    def get_entity(self, partition_key, row_key, **kwargs):
        entity = super().get_entity(partition_key, row_key, **kwargs)
        self.rival.upsert_entity({"PartitionKey": partition_key, "RowKey": row_key, "Count": entity["Count"]})
        return entity


def test_a_counter_that_loses_every_race_is_an_outage_not_an_endless_loop(azurite, table):
    contended = ContendedTable.from_connection_string(azurite, table_name=table.table_name)
    contended.rival = table
    gov = governed(contended, limits())
    gov.reserve_rate("203.0.113.20")  # the counter exists: each later attempt reads, then loses

    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="^governance counter too contended$"):
        gov.reserve_rate("203.0.113.20")

    assert time.monotonic() - started < 30
    assert governed(table, limits()).reserve_rate("203.0.113.20").count == 2  # nothing was added
