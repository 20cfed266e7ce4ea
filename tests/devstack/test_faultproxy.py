"""The fault proxy in front of the session's real Azurite, driven with the store's own Table and
Blob clients (shared/seams/storage.py): what each mode looks like to the Azure SDK, and recovery."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from azure.core.exceptions import AzureError, ServiceRequestError, ServiceResponseTimeoutError
from azure.data.tables import TableClient

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.config.errors import StorageOutage
from shared.seams.storage import container_client, on_table, table_client

QUICK = 5.0  # the clients' timeout, which a refusal must fail well inside: it is not a timeout


class Store:
    """One table and one container reached through the proxies (Table first, then Blob)."""

    def __init__(self, azurite: str, proxies: list[FaultProxy]):
        self.proxies = proxies
        self.connection = proxied(azurite, table=proxies[0], blob=proxies[1])
        suffix = uuid.uuid4().hex[:10]
        self.table_name, self.container_name = f"proxy{suffix}", f"proxy-{suffix}"
        self.direct = TableClient.from_connection_string(azurite, self.table_name)
        self.direct.create_table()
        container_client(azurite, self.container_name, QUICK).create_container()

    def clients(self, timeout: float = QUICK) -> tuple:
        """New clients: their first call opens a new connection through the proxy."""
        return (
            table_client(self.connection, self.table_name, timeout),
            container_client(self.connection, self.container_name, timeout),
        )

    def switch(self, mode: str) -> None:
        for proxy in self.proxies:
            proxy.set(mode)

    def write(self, clients: tuple, value: int) -> dict[str, tuple[AzureError | None, float]]:
        """An upsert and an upload: each one's error (None when it worked) and how long it took."""
        table, container = clients
        return {
            "table": timed(lambda: table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "Value": value})),
            "blob": timed(lambda: container.upload_blob("b.json", b"{}", overwrite=True)),
        }

    def recovers(self, clients: tuple, value: int) -> None:
        self.switch("pass")
        assert all(error is None for error, _ in self.write(clients, value).values())
        assert self.stored_value() == value

    def stored_value(self) -> int:
        return self.direct.get_entity("p", "r")["Value"]


@pytest.fixture
def store(azurite) -> Iterator[Store]:
    with (
        FaultProxy(endpoint_port(azurite, "Table")) as table,
        FaultProxy(endpoint_port(azurite, "Blob")) as blob,
    ):
        yield Store(azurite, [table, blob])


def timed(call: Callable[[], object]) -> tuple[AzureError | None, float]:
    started = time.monotonic()
    try:
        call()
    except AzureError as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def refused_quickly(outcomes: dict[str, tuple[AzureError | None, float]]) -> bool:
    return all(isinstance(error, ServiceRequestError) and took < QUICK for error, took in outcomes.values())


def test_pass_forwards_table_and_blob_calls_and_counts_them(store):
    clients = store.clients()

    store.recovers(clients, 7)

    assert clients[1].download_blob("b.json").readall() == b"{}"
    for proxy in store.proxies:
        stats = proxy.stats()
        assert stats.connections >= 1 and stats.bytes_up > 0 and stats.bytes_down > 0


def test_refuse_fails_new_connections_at_once_and_leaves_open_ones_working(store):
    pooled = store.clients()
    store.recovers(pooled, 1)

    store.switch("refuse")
    fresh = store.write(store.clients(), 2)
    still_open = store.write(pooled, 3)

    assert refused_quickly(fresh), fresh
    assert all(error is None for error, _ in still_open.values()), still_open
    store.recovers(store.clients(), 4)


def test_cut_resets_open_connections_and_refuses_new_ones_until_pass(store):
    clients = store.clients()
    store.recovers(clients, 1)

    store.switch("cut")
    outcomes = store.write(clients, 2)
    with pytest.raises(StorageOutage):
        on_table(clients[0], "table storage", lambda: clients[0].get_entity("p", "r"))

    assert refused_quickly(outcomes), outcomes
    assert all(proxy.stats().reset >= 1 for proxy in store.proxies)
    store.recovers(clients, 3)


def test_cut_during_a_request_fails_it_at_once_instead_of_timing_out(store):
    table_proxy = store.proxies[0]
    clients = store.clients(timeout=30)
    table_proxy.set("stall")
    outcome: list[dict] = []
    in_flight = threading.Thread(target=lambda: outcome.append(store.write(clients, 1)))
    in_flight.start()
    _wait_until(lambda: table_proxy.stats().open >= 1)

    table_proxy.set("cut")
    in_flight.join(QUICK)

    assert outcome, "the request was still waiting after the cut"
    error, took = outcome[0]["table"]
    assert error is not None and not isinstance(error, ServiceResponseTimeoutError), error
    assert took < QUICK


@pytest.mark.parametrize(("mode", "lands"), [("stall", "when the stall ends"), ("mute", "at once")])
def test_stall_and_mute_time_the_caller_out_and_the_write_lands(store, mode, lands):
    clients = store.clients(timeout=1)
    store.recovers(clients, 1)

    store.switch(mode)
    outcomes = store.write(clients, 4)
    while_faulted = store.stored_value()
    store.switch("pass")

    assert all(isinstance(error, ServiceResponseTimeoutError) for error, _ in outcomes.values()), outcomes
    assert while_faulted == (4 if lands == "at once" else 1)
    _wait_until(lambda: store.stored_value() == 4)  # a stalled write is delivered late, as after a partition
    store.recovers(store.clients(), 5)


def test_a_mode_for_some_seconds_goes_back_to_pass_unless_changed_meanwhile(store):
    table_proxy, blob_proxy = store.proxies

    table_proxy.set("refuse", seconds=0.5)
    refused = store.write(store.clients(), 1)["table"]
    _wait_until(lambda: table_proxy.mode == "pass")
    blob_proxy.set("stall", seconds=0.3)
    blob_proxy.set("cut")
    time.sleep(0.6)

    assert isinstance(refused[0], ServiceRequestError)
    assert blob_proxy.mode == "cut"
    store.recovers(store.clients(), 6)


def test_unknown_mode_is_refused(store):
    with pytest.raises(ValueError):
        store.proxies[0].set("flaky")


def _wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)
