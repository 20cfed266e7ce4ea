"""shared.purchase.governance: the client address behind Azure's front end, and the rate limit and cost
ceiling counters, run against the session's Azurite."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import EdmType, EntityProperty

from devstack.counting import RoundTrips
from devstack.run import DEV_ACCOUNT_KEY
from shared.config.errors import LimitExceeded, StorageOutage
from shared.config.hashing import Hasher
from shared.protocols.client_address import client_address, client_ip
from shared.purchase.governance import Governance, Limits
from shared.seams.counters import Reservation, TableCounters
from shared.seams.storage import table_client

HOUR = 3600
# 2030-01-01T10:15:00Z: a quarter past the hour, so retry_after is 45 minutes.
T0 = 1893492900.0
DEAD_TABLES = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={DEV_ACCOUNT_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)


# --- client_ip -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("forwarded_for", "expected"),
    [
        pytest.param("203.0.113.7", "203.0.113.7", id="ipv4"),
        pytest.param("203.0.113.7:51234", "203.0.113.7", id="ipv4-port"),
        pytest.param("2001:db8::7", "2001:db8::7", id="ipv6-bare"),
        pytest.param("[2001:db8::7]:51234", "2001:db8::7", id="ipv6-bracket-port"),
        pytest.param("[2001:db8::7]", "2001:db8::7", id="ipv6-bracket"),
        pytest.param("2001:DB8:0:0:0:0:0:7", "2001:db8::7", id="ipv6-normalised"),
        pytest.param("  203.0.113.7  ", "203.0.113.7", id="whitespace"),
        pytest.param("198.51.100.1, 203.0.113.7", "203.0.113.7", id="rightmost"),
        pytest.param("198.51.100.1,203.0.113.7:443", "203.0.113.7", id="rightmost-with-port"),
        pytest.param("10.0.0.1, [2001:db8::1]:80, 203.0.113.7", "203.0.113.7", id="three-entries"),
        pytest.param("203.0.113.7, [2001:db8::7]:443", "2001:db8::7", id="rightmost-ipv6"),
    ],
)
def test_client_ip_is_the_rightmost_forwarded_address_without_port(forwarded_for, expected):
    assert client_ip(forwarded_for) == expected


@pytest.mark.parametrize(
    "forwarded_for",
    ["1.1.1.1, 1.1.1.2, 203.0.113.9", "unknown, 203.0.113.9", "evil; drop table, 203.0.113.9"],
)
def test_forged_earlier_forwarded_entries_are_ignored(forwarded_for):
    assert client_ip(forwarded_for) == "203.0.113.9"


@pytest.mark.parametrize(
    "forwarded_for",
    [
        pytest.param("not-an-ip", id="word"),
        pytest.param("203.0.113.7, garbage", id="garbage-rightmost"),
        pytest.param("999.1.1.1", id="octet-out-of-range"),
        pytest.param("203.0.113", id="three-octets"),
        pytest.param("203.0.113.7.8", id="five-octets"),
        pytest.param("example.com:80", id="hostname-with-port"),
        pytest.param("2001:db8::7::1", id="double-compression"),
        pytest.param("[]:80", id="empty-brackets"),
        pytest.param("203.0.113.7, ", id="empty-rightmost"),
        pytest.param(",", id="only-comma"),
        pytest.param("   ", id="blank"),
    ],
)
def test_unparseable_forwarded_for_is_unknown(forwarded_for):
    assert client_ip(forwarded_for) == "unknown"


@pytest.mark.parametrize("forwarded_for", [None, ""])
def test_absent_forwarded_for_is_unknown(forwarded_for):
    assert client_ip(forwarded_for) == "unknown"


# --- behind the operator's proxies: trusted hops and Front Door -------------------------------------

FRONT_DOOR = "7c1e5a2b-0f4d-4e8a-9b6c-3d2f1a0e9b8c"


@pytest.mark.parametrize(
    ("forwarded_for", "hops", "expected"),
    [
        pytest.param("203.0.113.7, 198.51.100.1:443", 1, "203.0.113.7", id="one-proxy"),
        pytest.param("192.0.2.66, 203.0.113.7, 198.51.100.1", 1, "203.0.113.7", id="one-proxy-forged-left"),
        pytest.param("203.0.113.7, 10.0.0.4, 198.51.100.1:80", 2, "203.0.113.7", id="two-proxies"),
        pytest.param("1.1.1.1, 2.2.2.2, [2001:db8::7]:9, 10.0.0.4, 198.51.100.1", 2, "2001:db8::7", id="v6"),
        pytest.param("203.0.113.7, 198.51.100.1", 0, "198.51.100.1", id="no-hops-is-rightmost"),
    ],
)
def test_with_trusted_hops_the_client_is_that_many_entries_left_of_the_rightmost(
    forwarded_for, hops, expected
):
    assert client_ip(forwarded_for, hops) == expected


@pytest.mark.parametrize(
    ("forwarded_for", "hops"),
    [
        pytest.param("198.51.100.1:443", 1, id="bypassed-the-proxy"),
        pytest.param("203.0.113.7, 198.51.100.1", 2, id="one-short"),
        pytest.param(None, 1, id="absent"),
        pytest.param("garbage, 198.51.100.1", 1, id="unparseable-client"),
        pytest.param(", 198.51.100.1", 1, id="empty-client"),
        pytest.param("203.0.113.7, 198.51.100.1", 99, id="far-too-many-hops"),
    ],
)
def test_too_few_entries_for_the_trusted_hops_is_unknown_never_a_forged_leftmost(forwarded_for, hops):
    assert client_ip(forwarded_for, hops) == "unknown"


def test_a_client_behind_a_trusted_proxy_cannot_pick_its_bucket_by_sending_forwarded_for():
    """Whatever the client writes is left of what the proxy and Azure append."""
    for forged in ("203.0.113.99", "203.0.113.99, 203.0.113.98", "unknown", "198.51.100.1"):
        appended = f"{forged}, 192.0.2.10:5000, 198.51.100.1:443"  # the client as the proxy saw it, the proxy

        assert client_ip(appended, 1) == "192.0.2.10"


def headers(**values: str):
    """A request's header lookup, as `Request.header` (names lower-case, with dashes)."""
    found = {name.replace("_", "-"): value for name, value in values.items()}
    return lambda name: found.get(name)


def test_by_default_the_front_doors_headers_are_ignored_and_the_rightmost_entry_counts():
    sent = headers(
        x_forwarded_for="192.0.2.1, 198.51.100.1:443",
        x_azure_fdid=FRONT_DOOR,
        x_azure_socketip="203.0.113.5",
        x_azure_clientip="203.0.113.6",
    )

    assert client_address(sent) == "198.51.100.1"
    assert client_address(sent, hops=0, front_door_id="") == "198.51.100.1"


@pytest.mark.parametrize("sent_id", [FRONT_DOOR, FRONT_DOOR.upper(), f" {FRONT_DOOR} "])
def test_a_request_from_the_operators_front_door_counts_by_the_address_that_connected_to_it(sent_id):
    sent = headers(
        x_forwarded_for="192.0.2.1, 203.0.113.5, 198.51.100.1:443",
        x_azure_fdid=sent_id,
        x_azure_socketip="203.0.113.5",
        x_azure_clientip="192.0.2.1",  # Front Door's copy of what the client claimed
    )

    assert client_address(sent, front_door_id=FRONT_DOOR) == "203.0.113.5"


@pytest.mark.parametrize(
    "sent_id",
    [
        pytest.param(None, id="missing"),
        pytest.param("", id="empty"),
        pytest.param("00000000-0000-0000-0000-000000000000", id="another-front-door"),
        pytest.param(FRONT_DOOR[:-1], id="one-character-short"),
        pytest.param(FRONT_DOOR + "0", id="one-character-long"),
        pytest.param("\u00e9" + FRONT_DOOR[1:], id="non-ascii"),
    ],
)
def test_front_door_headers_without_the_operators_id_are_ignored(sent_id):
    """A client that reaches the app another way and writes the Front Door headers itself."""
    values = {"x_forwarded_for": "192.0.2.1, 198.51.100.1:443", "x_azure_socketip": "203.0.113.5"}
    values["x_azure_clientip"] = "203.0.113.6"
    if sent_id is not None:
        values["x_azure_fdid"] = sent_id

    assert client_address(headers(**values), front_door_id=FRONT_DOOR) == "198.51.100.1"
    assert client_address(headers(**values), hops=1, front_door_id=FRONT_DOOR) == "192.0.2.1"


@pytest.mark.parametrize("socket_ip", [None, "", "not-an-address", "203.0.113.5, 192.0.2.1"])
def test_the_operators_front_door_without_a_usable_socket_address_is_unknown(socket_ip):
    values = {"x_forwarded_for": "192.0.2.1, 198.51.100.1", "x_azure_fdid": FRONT_DOOR}
    if socket_ip is not None:
        values["x_azure_socketip"] = socket_ip

    assert client_address(headers(**values), front_door_id=FRONT_DOOR) == "unknown"


def test_the_front_door_socket_address_is_read_like_a_forwarded_entry():
    sent = headers(x_azure_fdid=FRONT_DOOR, x_azure_socketip="[2001:DB8::5]:5123")

    assert client_address(sent, front_door_id=FRONT_DOOR) == "2001:db8::5"


# --- Governance on Azurite -------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def governance(table, rate: int = 3, ceiling: str = "5.00", cost: str = "0.01", clock=None) -> Governance:
    limits = Limits(rate, Decimal(ceiling), Decimal(cost))
    return Governance(TableCounters(table), Hasher("unit-test-secret"), limits, clock=clock or Clock())


def cost_governance(table, ceiling: str, cost: str, shards: int) -> Governance:
    limits = Limits(1000, Decimal(ceiling), Decimal(cost), cost_shards=shards)
    return Governance(TableCounters(table), Hasher("unit-test-secret"), limits, clock=Clock())


def cost_shards(table, day: str = "cost-2030-01-01") -> dict[str, int]:
    """The cost counter's shards for one day, as stored: partition → count."""
    return {
        e["PartitionKey"]: int(e["Count"])
        for e in table.list_entities()
        if e["PartitionKey"].startswith("store-cost-") and e["RowKey"] == day
    }


@pytest.fixture
def table(azurite):
    client = table_client(azurite, "gov" + uuid.uuid4().hex[:12], timeout=5)
    yield client
    client.delete_table()
    client.close()


def test_rate_limit_allows_exactly_the_limit_then_refuses(table):
    gov = governance(table, rate=3)

    reservations = [gov.reserve_rate("203.0.113.1") for _ in range(3)]
    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_rate("203.0.113.1")

    assert len(reservations) == 3
    assert caught.value.code == "rate_limited"
    assert caught.value.status == 429
    assert 0 < caught.value.retry_after <= HOUR
    assert caught.value.retry_after == 45 * 60


def test_refused_attempts_do_not_count_against_the_limit(table):
    gov = governance(table, rate=2)
    first = gov.reserve_rate("203.0.113.1")
    gov.reserve_rate("203.0.113.1")
    for _ in range(3):
        with pytest.raises(LimitExceeded):
            gov.reserve_rate("203.0.113.1")

    gov.release(first)

    gov.reserve_rate("203.0.113.1")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.1")


def test_rate_limit_retry_after_is_a_full_hour_on_the_hour(table):
    gov = governance(table, rate=1, clock=Clock(T0 - 15 * 60))
    gov.reserve_rate("203.0.113.1")

    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_rate("203.0.113.1")

    assert caught.value.retry_after == HOUR


def test_rate_limit_retry_after_is_one_second_at_the_end_of_the_hour(table):
    gov = governance(table, rate=1, clock=Clock(T0 + 45 * 60 - 0.5))
    gov.reserve_rate("203.0.113.1")

    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_rate("203.0.113.1")

    assert caught.value.retry_after == 1


def test_each_client_address_has_its_own_bucket(table):
    gov = governance(table, rate=1)
    gov.reserve_rate("203.0.113.1")

    gov.reserve_rate("203.0.113.2")
    gov.reserve_rate("2001:db8::1")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.1")


def test_client_address_is_stored_only_as_a_keyed_hash(table):
    gov = governance(table, rate=1)

    reservation = gov.reserve_rate("203.0.113.1")

    assert "203.0.113.1" not in reservation.partition
    assert reservation.partition == Hasher("unit-test-secret").client_ip("203.0.113.1")
    entities = list(table.list_entities())
    assert [(e["PartitionKey"], e["RowKey"], e["Count"]) for e in entities] == [
        (reservation.partition, "rate-2030010110", "1")
    ]


def test_a_new_hour_resets_the_rate_limit(table):
    clock = Clock()
    gov = governance(table, rate=2, clock=clock)
    gov.reserve_rate("203.0.113.1")
    gov.reserve_rate("203.0.113.1")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.1")

    clock.now = T0 + 45 * 60  # 11:00:00Z, the next hour

    gov.reserve_rate("203.0.113.1")
    gov.reserve_rate("203.0.113.1")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.1")


def test_release_gives_one_slot_back(table):
    gov = governance(table, rate=2)
    first = gov.reserve_rate("203.0.113.1")
    gov.reserve_rate("203.0.113.1")

    gov.release(first)

    gov.reserve_rate("203.0.113.1")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.1")


def test_release_after_the_hour_changed_returns_the_slot_to_its_own_hour(table):
    clock = Clock()
    gov = governance(table, rate=1, clock=clock)
    old = gov.reserve_rate("203.0.113.1")
    clock.now = T0 + HOUR
    gov.reserve_rate("203.0.113.1")

    gov.release(old)

    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.1")
    clock.now = T0
    gov.reserve_rate("203.0.113.1")


def test_release_never_drives_a_counter_below_zero(table):
    gov = governance(table, rate=1)
    reservation = gov.reserve_rate("203.0.113.1")

    gov.release(reservation)
    gov.release(reservation)

    gov.reserve_rate("203.0.113.1")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.1")


def test_cost_ceiling_counts_decimal_costs_exactly_and_refuses_at_the_ceiling(table):
    # 0.10 three times is exactly 0.30 in Decimal (and 0.30000000000000004 in float).
    gov = governance(table, ceiling="0.30", cost="0.10")

    reservations = [gov.reserve_cost() for _ in range(3)]
    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_cost()

    assert [r.amount for r in reservations] == [100_000] * 3
    assert caught.value.code == "cost_ceiling_reached"
    assert caught.value.status == 429
    assert "0.30" in caught.value.message
    assert caught.value.retry_after == 86400 - 10 * HOUR - 15 * 60


def test_cost_ceiling_refuses_a_purchase_that_would_cross_it(table):
    gov = governance(table, ceiling="0.05", cost="0.02")
    gov.reserve_cost()
    gov.reserve_cost()

    with pytest.raises(LimitExceeded):
        gov.reserve_cost()


def test_zero_cost_ceiling_refuses_the_first_purchase(table):
    gov = governance(table, ceiling="0", cost="0.01")

    with pytest.raises(LimitExceeded):
        gov.reserve_cost()


def test_cost_ceiling_is_per_utc_day_and_released_cost_is_given_back(table):
    clock = Clock()
    gov = governance(table, ceiling="0.02", cost="0.01", clock=clock)
    first = gov.reserve_cost()
    gov.reserve_cost()
    with pytest.raises(LimitExceeded):
        gov.reserve_cost()

    gov.release(first)
    gov.reserve_cost()
    clock.now = T0 + 86400
    gov.reserve_cost()

    assert first.partition in {"store-cost-0", "store-cost-1"}
    assert (first.row, first.amount) == ("cost-2030-01-01", 10_000)


def test_cost_ceiling_is_shared_by_all_client_addresses(table):
    gov = governance(table, rate=100, ceiling="0.01", cost="0.01")
    gov.reserve_rate("203.0.113.1")
    gov.reserve_cost()

    gov.reserve_rate("203.0.113.2")
    with pytest.raises(LimitExceeded):
        gov.reserve_cost()


def test_concurrent_reservations_never_exceed_the_limit(table):
    gov = governance(table, rate=7)
    gov.reserve_rate("198.51.100.1")  # the table exists; contention is on one counter
    start = threading.Barrier(20)
    results: list[str] = []
    lock = threading.Lock()

    def attempt() -> None:
        start.wait()
        try:
            gov.reserve_rate("203.0.113.1")
            outcome = "ok"
        except LimitExceeded:
            outcome = "limited"
        except StorageOutage as exc:
            outcome = f"unavailable: {exc}"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(results) == ["limited"] * 13 + ["ok"] * 7
    counter = table.get_entity(Hasher("unit-test-secret").client_ip("203.0.113.1"), "rate-2030010110")
    assert counter["Count"] == "7"


def test_concurrent_first_reservations_create_the_table_and_lose_no_update(table):
    gov = governance(table, rate=50)
    start = threading.Barrier(20)
    errors: list[BaseException] = []

    def attempt() -> None:
        start.wait()
        try:
            gov.reserve_rate("203.0.113.1")
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    counter = table.get_entity(Hasher("unit-test-secret").client_ip("203.0.113.1"), "rate-2030010110")
    assert counter["Count"] == "20"


@pytest.fixture
def dead_table():
    client = table_client(DEAD_TABLES, "gov" + uuid.uuid4().hex[:12], timeout=1)
    yield client
    client.close()


def test_unreachable_table_storage_raises_store_unavailable_for_the_rate_limit(dead_table):
    gov = governance(dead_table)

    with pytest.raises(StorageOutage, match="governance table"):
        gov.reserve_rate("203.0.113.1")


def test_unreachable_table_storage_raises_store_unavailable_for_the_cost_ceiling(dead_table):
    with pytest.raises(StorageOutage):
        governance(dead_table).reserve_cost()


def test_release_swallows_a_storage_outage(dead_table):
    started = time.monotonic()

    governance(dead_table).release(Reservation("p", "rate-2030010110", 1))

    assert time.monotonic() - started < 10


def test_limits_are_exposed_as_configured(table):
    gov = governance(table, rate=4, ceiling="1.50", cost="0.05")

    assert gov.limits == Limits(4, Decimal("1.50"), Decimal("0.05"))


def test_a_reservation_given_back_at_once_costs_one_conditional_write(table):
    g = governance(table)
    calls = []
    real_update = table.update_entity
    table.update_entity = lambda *a, **k: calls.append("update") or real_update(*a, **k)
    real_get = table.get_entity
    table.get_entity = lambda *a, **k: calls.append("get") or real_get(*a, **k)

    reservation = g.reserve_rate("198.51.100.7")
    calls.clear()
    g.release(reservation)

    assert calls == ["update"]
    assert table.get_entity(reservation.partition, reservation.row)["Count"] == "0"


def test_the_first_purchase_of_an_hour_creates_its_counter_in_one_call(table):
    g = governance(table)
    g.reserve_rate("198.51.100.8")  # the table exists from here on
    calls = []
    for name in ("get_entity", "create_entity", "update_entity"):
        real = getattr(table, name)
        setattr(table, name, lambda *a, _n=name, _r=real, **k: calls.append(_n) or _r(*a, **k))

    g.reserve_rate("198.51.100.9")

    assert calls == ["create_entity"]


@pytest.mark.parametrize(
    ("ceiling", "cost", "shards", "fits"),
    [
        ("0.03", "0.01", 8, 3),
        ("1.00", "0.01", 8, 100),
        ("0.10", "0.03", 8, 3),
        ("1.00", "0.01", 12, 100),
        ("0.25", "0.01", 80, 25),
    ],
)
def test_a_sharded_ceiling_admits_exactly_as_many_purchases_as_one_counter(
    table, ceiling, cost, shards, fits
):
    limits = Limits(1000, Decimal(ceiling), Decimal(cost), cost_shards=shards)
    gov = Governance(TableCounters(table), Hasher("unit-test-secret"), limits, clock=Clock())
    admitted = 0
    while True:
        try:
            gov.reserve_cost()
        except LimitExceeded:
            break
        admitted += 1

    assert admitted == fits
    assert 1 < len(cost_shards(table)) <= min(shards, fits) or fits == 1
    assert sum(cost_shards(table).values()) == fits * int(Decimal(cost) * 1_000_000)


@pytest.mark.parametrize("shards", [8, 12])
def test_concurrent_reservations_spread_over_shards_never_pass_the_ceiling(azurite, shards):
    name = "govshard" + uuid.uuid4().hex[:8]
    limits = Limits(1000, Decimal("0.50"), Decimal("0.01"), cost_shards=shards)
    admitted, lock = [], threading.Lock()

    def worker() -> None:
        gov = Governance(
            TableCounters(table_client(azurite, name, timeout=5)), Hasher("unit-test-secret"), limits, Clock()
        )
        for _ in range(10):
            try:
                gov.reserve_cost()
            except LimitExceeded:
                continue
            with lock:
                admitted.append(1)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(admitted) == 50
    assert sum(cost_shards(table_client(azurite, name, timeout=5)).values()) == 500_000


# --- the rate limit's client buckets: IPv4 by address, IPv6 by /64 ---------------------------------


@pytest.mark.parametrize(
    ("one", "other", "shared"),
    [
        pytest.param("2001:db8:0:1::7", "2001:db8:0:1:ffff:ffff:ffff:fffe", True, id="ipv6-same-64"),
        pytest.param("2001:db8:0:1::7", "2001:db8:0:1:4b1d:2c3:99:1", True, id="ipv6-privacy-address"),
        pytest.param("203.0.113.7", "::ffff:203.0.113.7", True, id="ipv4-mapped"),
        pytest.param("203.0.113.7", "::ffff:cb00:7107", True, id="ipv4-mapped-hex"),
        pytest.param("2001:db8:0:1::7", "2001:db8:0:2::7", False, id="neighbouring-64s"),
        pytest.param("203.0.113.7", "203.0.113.8", False, id="ipv4-neighbours"),
        pytest.param("203.0.113.7", "::203.0.113.7", False, id="ipv4-compatible-is-ipv6"),
    ],
)
def test_the_rate_limit_counts_an_ipv4_address_or_an_ipv6_64_as_one_client(table, one, other, shared):
    gov = governance(table, rate=1)
    gov.reserve_rate(one)

    if shared:
        with pytest.raises(LimitExceeded):
            gov.reserve_rate(other)
    else:
        gov.reserve_rate(other)
        with pytest.raises(LimitExceeded):
            gov.reserve_rate(one)


def test_a_whole_64_of_rotating_ipv6_addresses_gets_only_the_limit(table):
    gov = governance(table, rate=3)
    outcomes = []
    for n in range(1, 11):
        try:
            gov.reserve_rate(client_ip(f"[2001:db8:0:1::{n:x}]:443"))
            outcomes.append("ok")
        except LimitExceeded:
            outcomes.append("limited")

    assert outcomes == ["ok"] * 3 + ["limited"] * 7


def test_an_ipv6_client_is_counted_under_the_keyed_hash_of_its_64_only(table):
    gov = governance(table, rate=5)
    hasher = Hasher("unit-test-secret")

    reservation = gov.reserve_rate("2001:db8:0:1:aaaa:bbbb:cccc:dddd")

    assert reservation.partition == hasher.client_ip("2001:db8:0:1::/64")
    [entity] = table.list_entities()
    assert entity["PartitionKey"] == hasher.client_ip("2001:db8:0:1::/64")
    assert "2001" not in entity["PartitionKey"] + entity["RowKey"]


def test_a_released_ipv6_reservation_gives_the_slot_back_to_its_64(table):
    gov = governance(table, rate=1)
    first = gov.reserve_rate("2001:db8:0:1::7")

    gov.release(first)

    gov.reserve_rate("2001:db8:0:1::8")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("2001:db8:0:1::9")


def test_the_rate_limit_refusal_names_the_setting_that_changes_it(table):
    gov = governance(table, rate=1)
    gov.reserve_rate("203.0.113.1")

    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_rate("203.0.113.1")

    assert "STOREFRONT_RATE_LIMIT_PER_HOUR" in caught.value.message
    assert "1 purchase per hour" in caught.value.message


# --- the per-recipient daily limit -----------------------------------------------------------------

DAY = 86400
VICTIM = "victim@example.org"


def victim_hash(address: str = VICTIM) -> str:
    return Hasher("unit-test-secret").email(address)


def recipient_governance(table, per_day: int = 3, clock=None, rate: int = 100) -> Governance:
    limits = Limits(rate, Decimal("5.00"), Decimal("0.01"), recipient_limit_per_day=per_day)
    return Governance(TableCounters(table), Hasher("unit-test-secret"), limits, clock=clock or Clock())


def test_limits_default_to_three_emails_per_recipient_per_day_and_stay_positional():
    limits = Limits(5, Decimal("5.00"), Decimal("0.01"), 8)

    assert limits.recipient_limit_per_day == 3
    assert limits.cost_shards == 8


def test_one_recipient_gets_at_most_the_daily_limit_whatever_the_client_address(table):
    gov = recipient_governance(table, per_day=3)
    outcomes = []
    for n in range(15):  # three client addresses, five purchases each, all to one address
        gov.reserve_rate(f"203.0.113.{n % 3 + 1}")
        try:
            gov.reserve_recipient(VICTIM)
            outcomes.append("sent")
        except LimitExceeded as exc:
            outcomes.append(exc.code)

    assert outcomes == ["sent"] * 3 + ["rate_limited"] * 12


def test_the_recipient_refusal_is_a_429_until_midnight_utc_naming_the_setting(table):
    gov = recipient_governance(table, per_day=2)
    gov.reserve_recipient(VICTIM)
    gov.reserve_recipient(VICTIM)

    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_recipient(VICTIM)

    assert caught.value.status == 429
    assert caught.value.code == "rate_limited"
    assert caught.value.retry_after == DAY - 10 * HOUR - 15 * 60  # T0 is 10:15 UTC
    assert "STOREFRONT_RECIPIENT_LIMIT_PER_DAY" in caught.value.message
    assert "2 emails" in caught.value.message
    assert VICTIM not in caught.value.message


def test_the_recipient_limit_starts_again_at_midnight_utc_as_retry_after_promised(table):
    clock = Clock(T0)
    gov = recipient_governance(table, per_day=1, clock=clock)
    gov.reserve_recipient(VICTIM)
    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_recipient(VICTIM)

    clock.now = T0 + caught.value.retry_after - 1
    with pytest.raises(LimitExceeded) as again:
        gov.reserve_recipient(VICTIM)
    assert again.value.retry_after == 1
    clock.now = T0 + caught.value.retry_after
    gov.reserve_recipient(VICTIM)


def test_each_recipient_has_its_own_daily_count(table):
    gov = recipient_governance(table, per_day=1)
    gov.reserve_recipient(VICTIM)

    gov.reserve_recipient("someone.else@example.org")
    with pytest.raises(LimitExceeded):
        gov.reserve_recipient(VICTIM)


@pytest.mark.parametrize(
    ("variants", "fourth"),
    [
        pytest.param(
            ["ada+1@example.org", "ada+2@example.org", "ADA+news@Example.org"],
            "ada@example.org",
            id="plus-tags",
        ),
        pytest.param(
            ["a.d.a@gmail.com", "ada+x@googlemail.com", "A.da@GoogleMail.com"], "ad.a@gmail.com", id="gmail"
        ),
        pytest.param(["ada@me.com", "ada+x@mac.com", "ada@icloud.com"], "ada+y@icloud.com", id="icloud"),
        pytest.param(
            ["ada-shop@yahoo.com", "ada-news@yahoo.com", "ada@yahoo.com"], "ada+z@yahoo.com", id="yahoo"
        ),
    ],
)
def test_addresses_that_reach_one_mailbox_share_its_daily_count(table, variants, fourth):
    gov = recipient_governance(table, per_day=3)
    for address in variants:
        gov.reserve_recipient(address)

    with pytest.raises(LimitExceeded) as caught:
        gov.reserve_recipient(fourth)

    assert "to one mailbox" in caught.value.message
    [counter] = table.query_entities("RowKey eq 'recipient-20300101'")
    assert counter["Count"] == "3"


def test_other_mailboxes_on_the_same_domain_keep_their_own_count(table):
    gov = recipient_governance(table, per_day=1)
    gov.reserve_recipient("ada+1@example.org")

    for other in ("ada-1@example.org", "ada.1@example.org", "adab@example.org", "ada@example.net"):
        gov.reserve_recipient(other)  # on example.org neither "-" nor "." is a tag
    with pytest.raises(LimitExceeded):
        gov.reserve_recipient("ada+2@example.org")


def test_a_count_kept_under_an_address_by_the_previous_version_goes_on_counting(table):
    """An address that is its own mailbox keeps its key: the upgrade day does not start it again."""
    gov = recipient_governance(table, per_day=3)
    gov.reserve_rate("203.0.113.1")  # the table exists
    table.create_entity({"PartitionKey": victim_hash(), "RowKey": "recipient-20300101", "Count": 2})

    gov.reserve_recipient(VICTIM)
    with pytest.raises(LimitExceeded):
        gov.reserve_recipient(VICTIM)


def test_a_count_kept_under_a_tagged_address_by_the_previous_version_is_no_longer_used(table):
    gov = recipient_governance(table, per_day=1)
    gov.reserve_rate("203.0.113.1")
    tagged = "victim+1@example.org"
    table.create_entity({"PartitionKey": victim_hash(tagged), "RowKey": "recipient-20300101", "Count": 1})

    reservation = gov.reserve_recipient(tagged)

    assert reservation.partition == victim_hash(VICTIM)
    assert table.get_entity(victim_hash(tagged), "recipient-20300101")["Count"] == 1


def test_a_released_recipient_reservation_gives_the_email_back(table):
    gov = recipient_governance(table, per_day=2)
    first = gov.reserve_recipient(VICTIM)
    gov.reserve_recipient(VICTIM)

    gov.release(first)

    gov.reserve_recipient(VICTIM)
    with pytest.raises(LimitExceeded):
        gov.reserve_recipient(VICTIM)


def test_the_recipient_count_is_stored_under_the_email_hash_only(table):
    gov = recipient_governance(table)

    reservation = gov.reserve_recipient(VICTIM)

    entities = list(table.list_entities())
    assert [(e["PartitionKey"], e["RowKey"], e["Count"]) for e in entities] == [
        (victim_hash(), "recipient-20300101", "1")
    ]
    assert (reservation.partition, reservation.row, reservation.amount) == (
        victim_hash(),
        "recipient-20300101",
        1,
    )
    assert "victim" not in repr(entities)


@pytest.mark.parametrize("value", [victim_hash(), "", "victim", None], ids=["hash", "empty", "word", "none"])
def test_reserve_recipient_refuses_anything_but_an_address_and_stores_nothing(table, value):
    gov = recipient_governance(table)
    gov.reserve_rate("203.0.113.1")  # the table exists

    with pytest.raises(ValueError, match="email address"):
        gov.reserve_recipient(value)

    assert [e["RowKey"] for e in table.list_entities()] == ["rate-2030010110"]


def test_recipient_limits_hold_across_instances_sharing_the_table(azurite):
    name = "govrcpt" + uuid.uuid4().hex[:8]
    table_client(azurite, name, timeout=5).create_table()
    limits = Limits(100, Decimal("5.00"), Decimal("0.01"), recipient_limit_per_day=5)
    instances = [
        Governance(
            TableCounters(table_client(azurite, name, timeout=5)), Hasher("unit-test-secret"), limits, Clock()
        )
        for _ in range(16)
    ]
    start = threading.Barrier(len(instances))

    def send(gov: Governance) -> str:
        start.wait()
        try:
            gov.reserve_recipient(VICTIM)
        except LimitExceeded:
            return "refused"
        return "sent"

    with ThreadPoolExecutor(len(instances)) as pool:
        outcomes = sorted(pool.map(send, instances))

    assert outcomes == ["refused"] * 11 + ["sent"] * 5
    counter = table_client(azurite, name, timeout=5).get_entity(victim_hash(), "recipient-20300101")
    assert counter["Count"] == "5"


def test_unreachable_table_storage_raises_store_unavailable_for_the_recipient_limit(dead_table):
    with pytest.raises(StorageOutage, match="governance table"):
        recipient_governance(dead_table).reserve_recipient(VICTIM)


# --- the cost ceiling's shards: a partition each, two calls a purchase ------------------------------


class Calls:
    """What a client on a counting transport sent: a point read, a query, a create or an update."""

    def __init__(self) -> None:
        self.trips = RoundTrips()

    @property
    def calls(self) -> list[str]:
        return [_call(sent.method, sent.url) for sent in self.trips.sent]

    def clear(self) -> None:
        self.trips.take()


def _call(method: str, url: str) -> str:
    if method == "GET":
        return "query" if "filter" in url else "read"
    return {"POST": "create", "PUT": "update"}.get(method, method)


@pytest.fixture
def counted(azurite, table):
    """A second client on `table`, counting what it sends; the table exists."""
    transport = Calls()
    client = table_client(azurite, table.table_name, 5, transport.trips.transport("table"))
    table.create_table()
    yield client, transport
    client.close()


def write_old_layout(table, counts: dict[str, int]) -> None:
    """Counts as the release before per-shard partitions kept them: row `cost-<day>-<shard>`
    in the one partition `store-cost`."""
    with contextlib.suppress(ResourceExistsError):
        table.create_table()
    for row, count in counts.items():
        table.create_entity({"PartitionKey": "store-cost", "RowKey": row, "Count": count})


def test_an_uncontended_cost_reservation_is_one_point_read_and_one_write(table, counted):
    client, transport = counted
    gov = cost_governance(client, "5.00", "0.01", shards=8)
    while len(cost_shards(table)) < 8:
        gov.reserve_cost()

    costs = []
    for _ in range(10):
        transport.clear()
        gov.reserve_cost()
        costs.append(transport.calls.copy())

    assert costs == [["read", "update"]] * 10


def test_the_first_reservation_of_the_day_on_a_shard_also_reads_its_old_layout_row_once(table, counted):
    client, transport = counted
    gov = cost_governance(client, "5.00", "0.01", shards=8)

    costs = []
    for _ in range(40):
        transport.clear()
        gov.reserve_cost()
        costs.append(tuple(transport.calls))

    assert set(costs) <= {("read", "update"), ("read", "read", "create")}
    assert costs[0] == ("read", "read", "create")
    assert costs.count(("read", "read", "create")) == len(cost_shards(table))


@pytest.mark.parametrize(("ceiling", "shards"), [("0.03", 8), ("0.40", 40)])
def test_a_refusal_at_the_ceiling_costs_a_point_read_and_one_query_and_writes_nothing(
    table, counted, ceiling, shards
):
    client, transport = counted
    gov = cost_governance(client, ceiling, "0.01", shards=shards)
    fits = int(Decimal(ceiling) * 100)
    for _ in range(fits):
        gov.reserve_cost()

    costs = []
    for _ in range(5):
        transport.clear()
        with pytest.raises(LimitExceeded):
            gov.reserve_cost()
        costs.append(transport.calls.copy())

    assert costs == [["read", "query"]] * 5
    assert cost_shards(table) == {f"store-cost-{i}": 10_000 for i in range(fits)}


def test_each_cost_shard_is_a_partition_of_its_own_filled_to_its_budget(table):
    gov = cost_governance(table, "1.00", "0.01", shards=8)
    for _ in range(100):
        gov.reserve_cost()
    with pytest.raises(LimitExceeded):
        gov.reserve_cost()

    keys = sorted((e["PartitionKey"], e["RowKey"]) for e in table.list_entities())
    assert keys == [(f"store-cost-{i}", "cost-2030-01-01") for i in range(8)]
    assert cost_shards(table) == {f"store-cost-{i}": 130_000 if i < 4 else 120_000 for i in range(8)}


def test_release_gives_a_cost_reservation_back_to_the_shard_it_came_from(table):
    gov = cost_governance(table, "0.02", "0.01", shards=8)
    first = gov.reserve_cost()
    second = gov.reserve_cost()
    assert {first.partition, second.partition} == {"store-cost-0", "store-cost-1"}

    gov.release(first)

    assert cost_shards(table) == {first.partition: 0, second.partition: 10_000}
    assert gov.reserve_cost().partition == first.partition
    with pytest.raises(LimitExceeded):
        gov.reserve_cost()


def test_counts_from_before_the_upgrade_are_honoured_so_the_upgrade_day_keeps_its_ceiling(table):
    # Ceiling 0.16 at 0.01 over 8 shards: 2 purchases a shard. 8 were taken before the upgrade;
    # yesterday's full shard 3 does not count today.
    taken = {"cost-2030-01-01-0": 20_000, "cost-2030-01-01-1": 20_000, "cost-2030-01-01-2": 10_000}
    taken |= {"cost-2030-01-01-4": 20_000, "cost-2030-01-01-5": 10_000, "cost-2029-12-31-3": 20_000}
    write_old_layout(table, taken)
    gov = cost_governance(table, "0.16", "0.01", shards=8)

    for _ in range(8):
        gov.reserve_cost()
    with pytest.raises(LimitExceeded):
        gov.reserve_cost()

    assert cost_shards(table) == {f"store-cost-{i}": 20_000 for i in range(8)}


def test_a_day_full_before_the_upgrade_is_refused_and_then_refused_at_two_reads(table, counted):
    client, transport = counted
    write_old_layout(table, {f"cost-2030-01-01-{i}": 10_000 for i in range(3)})
    gov = cost_governance(client, "0.03", "0.01", shards=8)

    with pytest.raises(LimitExceeded):
        gov.reserve_cost()
    transport.clear()
    with pytest.raises(LimitExceeded):
        gov.reserve_cost()

    assert transport.calls == ["read", "query"]
    assert cost_shards(table) == {f"store-cost-{i}": 10_000 for i in range(3)}


def test_concurrent_first_reservations_on_the_upgrade_day_never_pass_the_ceiling(azurite):
    name = "govupgrade" + uuid.uuid4().hex[:8]
    write_old_layout(
        table_client(azurite, name, timeout=5), {f"cost-2030-01-01-{i}": i * 10_000 for i in range(8)}
    )  # 28 of 80 purchases taken, 10 a shard
    limits = Limits(1000, Decimal("0.80"), Decimal("0.01"), cost_shards=8)
    start = threading.Barrier(16)

    def buy() -> int:
        gov = Governance(
            TableCounters(table_client(azurite, name, timeout=5)), Hasher("unit-test-secret"), limits, Clock()
        )
        start.wait()
        admitted = 0
        for _ in range(10):
            with contextlib.suppress(LimitExceeded):
                gov.reserve_cost()
                admitted += 1
        return admitted

    with ThreadPoolExecutor(16) as pool:
        admitted = sum(pool.map(lambda _: buy(), range(16)))

    assert admitted == 52
    assert cost_shards(table_client(azurite, name, timeout=5)) == {
        f"store-cost-{i}": 100_000 for i in range(8)
    }


# --- counters hold any count the settings allow ------------------------------------------------------

INT32_MAX = 2**31 - 1
NEAR_INT32 = 2_147_480_000  # $2,147.48 in millionths: one cent short of passing an Int32


def test_a_cost_shard_keeps_counting_past_what_an_int32_holds_and_gives_back(table):
    # $20,000 over 8 shards: $2,500 a shard. Each shard holds $2,147.48 as the previous version
    # wrote it (an Int32), so whichever is drawn passes 2**31 millionths with this purchase.
    write_old_layout(table, {})
    for shard in range(8):
        table.create_entity(
            {"PartitionKey": f"store-cost-{shard}", "RowKey": "cost-2030-01-01", "Count": NEAR_INT32}
        )
    gov = cost_governance(table, "20000", "0.01", shards=8)

    reservation = gov.reserve_cost()

    assert reservation.count == NEAR_INT32 + 10_000 > INT32_MAX
    assert table.get_entity(reservation.partition, reservation.row)["Count"] == str(NEAR_INT32 + 10_000)
    gov.release(reservation)
    assert cost_shards(table)[reservation.partition] == NEAR_INT32


def test_the_largest_ceiling_fills_to_exactly_its_budget_without_overflow(table):
    # One shard, a ceiling in the trillions of dollars: every count is far past an Int64.
    gov = cost_governance(table, "100000000000000", "40000000000000", shards=1)

    first, second = gov.reserve_cost(), gov.reserve_cost()
    with pytest.raises(LimitExceeded):
        gov.reserve_cost()

    assert second.count == 2 * first.count == 80_000_000_000_000_000_000 > 2**63
    gov.release(second)
    assert cost_shards(table) == {"store-cost-0": 40_000_000_000_000_000_000}


def test_a_counter_written_as_an_int64_is_read(table):
    gov = governance(table, rate=3)
    gov.reserve_rate("203.0.113.1")
    key = Hasher("unit-test-secret").client_ip("203.0.113.2")
    table.create_entity(
        {"PartitionKey": key, "RowKey": "rate-2030010110", "Count": EntityProperty(2, EdmType.INT64)}
    )

    gov.reserve_rate("203.0.113.2")
    with pytest.raises(LimitExceeded):
        gov.reserve_rate("203.0.113.2")


@pytest.mark.parametrize("stored", ["three", "", True, 2.5], ids=["word", "empty", "bool", "double"])
def test_a_counter_holding_something_else_than_a_count_is_an_outage_not_a_crash(table, stored):
    gov = governance(table, rate=3)
    gov.reserve_rate("203.0.113.1")
    key = Hasher("unit-test-secret").client_ip("203.0.113.2")
    table.create_entity({"PartitionKey": key, "RowKey": "rate-2030010110", "Count": stored})

    with pytest.raises(StorageOutage, match="count"):
        gov.reserve_rate("203.0.113.2")
