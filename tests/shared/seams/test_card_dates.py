"""shared.seams.card_dates: when the agent card became current, on Azurite: every instance agrees on
the date, a new card (or one served again) moves it forward, instances racing agree on one date,
stores at other addresses keep their own, and storage that refuses or never answers is no date,
soon, never an error. Faults come from a real TCP proxy in front of Azurite (`devstack.faultproxy`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from threading import Barrier

import pytest

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.seams.card_dates import PARTITION, TableCardDates, row_key
from shared.seams.storage import table_client

A, B = 'W/"card-a"', 'W/"card-b"'
ADDRESS = "https://store.example"
NOON = datetime(2030, 1, 2, 12, 0, 0, 250000, tzinfo=timezone.utc)
TIMEOUT = 0.5


class Ticks:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def table_name() -> str:
    return f"governance{uuid.uuid4().hex[:10]}"


@pytest.fixture
def proxy(azurite) -> Iterator[FaultProxy]:
    with FaultProxy(endpoint_port(azurite, "Table")) as running:
        yield running


def instance(connection: str, table: str, address: str = ADDRESS, **options) -> TableCardDates:
    """What one function instance holds: its own client and its own minute of memory."""
    return TableCardDates(table_client(connection, table, TIMEOUT), address, **options)


def test_two_instances_on_one_table_give_a_card_the_same_date(azurite, table_name):
    first, second = instance(azurite, table_name), instance(azurite, table_name)

    dated = first.since(A, NOON)
    later = second.since(A, NOON + timedelta(hours=3))

    assert dated == later == NOON.replace(microsecond=0)


def test_a_new_card_is_dated_when_it_is_first_served(azurite, table_name):
    first, second = instance(azurite, table_name), instance(azurite, table_name)
    first.since(A, NOON)

    dated = second.since(B, NOON + timedelta(minutes=5))

    assert dated == NOON.replace(microsecond=0) + timedelta(minutes=5)
    assert first.since(B, NOON + timedelta(hours=1)) == dated  # another instance reads it, unchanged


def test_a_card_served_again_after_another_is_dated_after_it(azurite, table_name):
    """A, then B, then A again: a client holding B must not be told A is not modified since."""
    dates = [
        instance(azurite, table_name).since(card, NOON + timedelta(minutes=n))
        for n, card in enumerate((A, B, A))
    ]

    assert dates[0] < dates[1] < dates[2]


def test_a_new_card_within_the_same_second_or_behind_a_slow_clock_is_still_a_second_later(
    azurite, table_name
):
    """HTTP dates are whole seconds; an instance whose clock is behind must not date B before A."""
    dated_a = instance(azurite, table_name).since(A, NOON)

    dated_b = instance(azurite, table_name).since(B, NOON - timedelta(minutes=2))

    assert dated_b == dated_a + timedelta(seconds=1)


def test_instances_racing_for_a_new_card_agree_on_one_date(azurite, table_name):
    instance(azurite, table_name).since(A, NOON)
    racers = [instance(azurite, table_name) for _ in range(8)]
    start = Barrier(len(racers))

    def race(n: int) -> datetime | None:
        start.wait()
        return racers[n].since(B, NOON + timedelta(minutes=1, seconds=n))

    with ThreadPoolExecutor(len(racers)) as pool:
        dates = list(pool.map(race, range(len(racers))))

    assert len(set(dates)) == 1 and dates[0] is not None
    assert instance(azurite, table_name).since(B, NOON + timedelta(days=1)) == dates[0]


def test_stores_at_other_addresses_sharing_the_table_keep_their_own_dates(azurite, table_name):
    here = instance(azurite, table_name)
    dated = here.since(A, NOON)

    elsewhere = instance(azurite, table_name, "https://staging.example").since(B, NOON + timedelta(hours=1))

    assert elsewhere == dated + timedelta(hours=1)
    assert instance(azurite, table_name).since(A, NOON + timedelta(hours=2)) == dated


def test_a_row_without_a_date_is_replaced_not_trusted(azurite, table_name):
    table = table_client(azurite, table_name, TIMEOUT)
    table.create_table()
    table.create_entity({"PartitionKey": PARTITION, "RowKey": row_key(ADDRESS), "Card": A, "Since": "soon"})

    assert instance(azurite, table_name).since(A, NOON) == NOON.replace(microsecond=0)


def test_an_instance_reads_the_table_at_most_once_a_minute(azurite, table_name, proxy):
    ticks = Ticks()
    dates = instance(proxied(azurite, table=proxy), table_name, clock=ticks)
    dated = dates.since(A, NOON)
    proxy.set("cut")

    ticks.now = 59.0
    remembered = dates.since(A, NOON + timedelta(seconds=59))
    ticks.now = 61.0
    asked_again = dates.since(A, NOON + timedelta(seconds=61))

    assert remembered == dated is not None
    assert asked_again is None  # the minute was over, so it asked, and storage was down


def test_another_card_is_never_answered_from_memory(azurite, table_name):
    """The memory holds one card: a card served again after another is read, so dated after it."""
    ticks = Ticks()
    dates = instance(azurite, table_name, clock=ticks)

    dated_a, dated_b, again = (dates.since(card, NOON) for card in (A, B, A))

    assert dated_a < dated_b < again


@pytest.mark.parametrize("mode", ["refuse", "cut", "stall"])
def test_storage_that_refuses_or_never_answers_is_no_date_soon(azurite, table_name, proxy, mode):
    dates = instance(proxied(azurite, table=proxy), table_name)
    proxy.set(mode)

    started = time.monotonic()
    dated = dates.since(A, NOON)
    waited = time.monotonic() - started

    assert dated is None
    assert waited < 4 * TIMEOUT + 1, waited  # the client's timeout and its one retry, not the SDK's minute


def test_requests_do_not_queue_behind_one_that_waits_on_storage(azurite, table_name, proxy):
    ticks = Ticks()
    dates = instance(proxied(azurite, table=proxy), table_name, clock=ticks)
    dated = dates.since(A, NOON)
    ticks.now = 61.0  # the minute is over: the next request asks storage, which hangs
    proxy.set("stall")

    with ThreadPoolExecutor(1) as pool:
        asking = pool.submit(dates.since, A, NOON)
        time.sleep(TIMEOUT / 2)
        started = time.monotonic()
        meanwhile = dates.since(A, NOON)
        waited = time.monotonic() - started
        unknown = dates.since(B, NOON)

        assert meanwhile == dated and unknown is None  # what it knew of A; nothing of B
        assert waited < 0.1, waited
        assert asking.result() is None
