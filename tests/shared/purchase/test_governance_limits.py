"""shared.purchase.governance: the limits as a caller meets them at their edges, on the session's Azurite.
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

from devstack.counting import RoundTrips
from shared.config.errors import LimitExceeded, StorageOutage
from shared.config.hashing import Hasher
from shared.protocols.client_address import client_address
from shared.purchase.governance import Governance, Limits
from shared.seams.counters import Reservation, TableCounters
from shared.seams.storage import table_client

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
    return Governance(TableCounters(table), Hasher("limits-test-secret"), given, clock=lambda: T0)


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


def test_off_azure_every_refusal_ends_saying_make_reset_clears_the_counters(table):
    local = Governance(
        TableCounters(table),
        Hasher("limits-test-secret"),
        limits(1, "0.01", "0.01", 1, 1),
        lambda: T0,
        local=True,
    )
    local.reserve_rate("203.0.113.10")
    local.reserve_recipient("ada@example.org")
    local.reserve_cost()

    refusals = [
        refusal(lambda: local.reserve_rate("203.0.113.10")),
        refusal(lambda: local.reserve_recipient("ada@example.org")),
        refusal(local.reserve_cost),
    ]

    assert [r.message for r in refusals] == [
        "rate limit reached: 1 purchase per hour from one client address (an IPv6 client's whole /64); "
        "the store sets this limit with STOREFRONT_RATE_LIMIT_PER_HOUR; locally, `make reset` clears the "
        "counters",
        "recipient limit reached: 1 email per UTC day to one mailbox, whoever asks; the store sets this "
        "limit with STOREFRONT_RECIPIENT_LIMIT_PER_DAY; locally, `make reset` clears the counters",
        "daily cost ceiling of $0.01 reached for the store; the store sets it with "
        "STOREFRONT_DAILY_COST_CEILING_USD; locally, `make reset` clears the counters",
    ]


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
    with pytest.raises(StorageOutage, match="^governance counter too contended$"):
        gov.reserve_rate("203.0.113.20")

    assert time.monotonic() - started < 15
    assert governed(table, limits()).reserve_rate("203.0.113.20").count == 2  # nothing was added


# --- the client's address -------------------------------------------------------------------------

FRONT_DOOR = "2f0f3a5e-9c1b-4ffa-8d2e-77a1b0c4d9e1"


def headers(**values: str):
    named = {name.replace("_", "-"): value for name, value in values.items()}
    return lambda name: named.get(name)


@pytest.mark.parametrize("sent_id", [FRONT_DOOR, "", "XXXX", "*"])
def test_with_no_front_door_configured_no_fdid_a_request_names_is_trusted(sent_id):
    sent = headers(x_azure_fdid=sent_id, x_azure_socketip="192.0.2.44", x_forwarded_for="203.0.113.44")

    assert client_address(sent) == "203.0.113.44"


@pytest.mark.parametrize(
    "sent_id",
    ["\udcff" + FRONT_DOOR[1:], FRONT_DOOR + "\ud800", FRONT_DOOR.replace("ff", "\ufb00")],
    ids=["lone-surrogate", "trailing-surrogate", "ligature-ff"],
)
def test_an_fdid_that_only_resembles_the_operators_is_not_the_front_door_and_never_an_error(sent_id):
    sent = headers(x_azure_fdid=sent_id, x_azure_socketip="192.0.2.45", x_forwarded_for="203.0.113.45")

    assert client_address(sent, front_door_id=FRONT_DOOR) == "203.0.113.45"


# --- windows are UTC, whatever the host's time zone ------------------------------------------------


@pytest.fixture
def far_time_zone(monkeypatch):
    """The host's local time 14 hours ahead of UTC (POSIX TZ), so a local window would differ."""
    monkeypatch.setenv("TZ", "LINT-14")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_recipient_and_cost_windows_are_the_utc_day_on_a_host_in_another_time_zone(table, far_time_zone):
    clock = [T0 + 13 * 3600 + 30 * 60]  # 23:45 UTC, already the next day at UTC+14
    gov = Governance(
        TableCounters(table),
        Hasher("limits-test-secret"),
        limits(ceiling="0.01", recipients=1),
        lambda: clock[0],
    )
    gov.reserve_recipient("tz@example.org")
    gov.reserve_cost()

    clock[0] += 30 * 60  # 00:15 UTC: a new UTC day, the same local one

    assert gov.reserve_recipient("tz@example.org").count == 1
    assert gov.reserve_cost().count == 10_000


def test_the_rate_window_is_the_utc_hour_on_a_host_half_an_hour_off(table, monkeypatch):
    monkeypatch.setenv("TZ", "HALF-5:30")
    time.tzset()
    try:
        clock = [T0 + 40 * 60]  # 10:55 UTC, 16:25 at UTC+5:30
        gov = Governance(TableCounters(table), Hasher("limits-test-secret"), limits(rate=1), lambda: clock[0])
        gov.reserve_rate("203.0.113.46")
        clock[0] += 10 * 60  # 11:05 UTC: a new UTC hour, the same local one (16:35)

        assert gov.reserve_rate("203.0.113.46").count == 1
    finally:
        monkeypatch.undo()
        time.tzset()


# --- counters: what a reservation and a release cost, and their edges -----------------------------


@pytest.fixture
def counted_table(azurite, table):
    trips = RoundTrips()
    client = table_client(azurite, table.table_name, 5, trips.transport("table"))
    yield client, trips
    client.close()


def test_the_first_email_of_a_day_to_a_recipient_creates_its_counter_in_one_call(counted_table):
    client, trips = counted_table
    gov = governed(client, limits())

    first = gov.reserve_recipient("fresh@example.org")

    assert first.count == 1
    assert trips.take() == {"table": 1}


def test_giving_back_costs_one_write_with_the_etag_it_left_and_two_without(counted_table):
    client, trips = counted_table
    gov = governed(client, limits(ceiling="0.03", cost="0.01", shards=3))
    fill(client, {0: 10_000, 1: 10_000})
    created = gov.reserve_cost()  # shard 2, created now
    updated = gov.reserve_rate("203.0.113.47")
    updated = gov.reserve_rate("203.0.113.47")  # the second of the hour: an update
    trips.take()

    gov.release(created)
    gov.release(updated)
    with_etag = trips.take()
    gov.release(Reservation(updated.partition, updated.row, 1))

    assert with_etag == {"table": 2}
    assert trips.take() == {"table": 2}
    assert shard_counts(client)[2] == 0


def test_a_reservation_given_back_at_once_frees_its_slot_for_the_next(table):
    gov = governed(table, limits(rate=1))

    gov.release(gov.reserve_rate("203.0.113.48"))

    assert gov.reserve_rate("203.0.113.48").count == 1
    assert refusal(lambda: gov.reserve_rate("203.0.113.48")).code == "rate_limited"


def test_giving_back_to_a_counter_that_is_gone_leaves_it_at_zero(table):
    gov = governed(table, limits(rate=2))
    hour = "rate-2030010110"

    gov.release(Reservation(Hasher("limits-test-secret").client_ip("203.0.113.49"), hour, 1))

    assert [gov.reserve_rate("203.0.113.49").count for _ in range(2)] == [1, 2]
    assert refusal(lambda: gov.reserve_rate("203.0.113.49")).code == "rate_limited"


def test_a_zero_cost_is_never_refused_even_when_the_days_spend_already_passed_the_ceiling(table):
    gov = governed(table, limits(ceiling="0.02", cost="0", shards=2))
    fill(table, {0: 30_000, 1: 30_000})  # spent before the operator set the cost to zero

    assert gov.reserve_cost().count == 30_000


@pytest.mark.parametrize("stored", ["three", True, 2.5], ids=["word", "bool", "double"])
def test_a_counter_holding_no_count_is_reported_as_what_it_is(table, stored):
    table.create_entity({"PartitionKey": "store-cost-0", "RowKey": DAY, "Count": stored})
    gov = governed(table, limits(ceiling="0.01", cost="0.01", shards=1))

    with pytest.raises(StorageOutage, match="^a governance counter holds something other than a count$"):
        gov.reserve_cost()


def test_an_unreachable_counter_table_is_named_in_the_outage(azurite):
    dead = azurite.replace(
        azurite.split("TableEndpoint=")[1].split(";")[0], "http://127.0.0.1:9/devstoreaccount1"
    )
    gov = governed(table_client(dead, "nowhere", timeout=1), limits())

    with pytest.raises(StorageOutage, match="^governance table unavailable: "):
        gov.reserve_rate("203.0.113.50")


def test_reserve_recipient_says_what_it_takes(table):
    with pytest.raises(ValueError, match="^reserve_recipient takes the buyer's email address$"):
        governed(table, limits()).reserve_recipient("not an address")


def test_a_micro_dollar_cost_spreads_over_the_shards_its_ceiling_fills():
    assert limits(ceiling="0.000003", cost="0.000001").cost_partitions == 3
