"""Where one storage account runs out: a capacity model computed from the calls the bench counts.

Every storage request a purchase makes, and the timers' share after it, is seen at the transport
(`bench.stack.QueueTrips`) and attributed to the partition or queue it touches. Partitions private
to one buyer never concentrate load; for the account and each class shared by every purchase, its
documented scalability target divided by what a purchase puts on it (on its busiest partition)
gives a rate, and the lowest is the path's ceiling. The model, its targets and how to read it:
docs/performance.md#how-to-read-it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from urllib.parse import unquote, urlsplit

from devstack.counting import RoundTrips, Sent

ACCOUNT_REQUESTS_PER_SECOND = 20_000
PARTITION_ENTITIES_PER_SECOND = 2_000
QUEUE_MESSAGES_PER_SECOND = 2_000
SOURCES = (
    "https://learn.microsoft.com/azure/storage/tables/scalability-targets",
    "https://learn.microsoft.com/azure/storage/queues/scalability-targets",
    "https://learn.microsoft.com/azure/storage/common/scalability-targets-standard-account",
)
A_MILLION_A_DAY = 1_000_000 / 86_400
# Shared classes, with the setting that moves their ceiling.
SHARED = {
    "cost shard": "STOREFRONT_COST_COUNTER_SHARDS",
    "ledger shard": "shared.seams.ledger.SHARDS, a constant",
    "ledger day": "none: rows from before the ledger's shards",
    "contact queue": "STOREFRONT_CONTACT_QUEUE_SHARDS",
    "scoping horizon": "none: read once per instance",
    "drainer lease": "none: a few calls per drainer run, not per purchase",
    "repair queue": "none: written only while Blob is down",
}
QUEUES = {"contact queue"}  # shared classes that are storage queues: their target is per queue
ACCOUNT = "account requests"
OVERRIDDEN = (
    "contact_queue",
    "cost_counter_shards",
    "idempotency_table",
    "idempotency_ttl_seconds",
    "idempotency_lease_seconds",
)
_POINT = re.compile(r"\(PartitionKey='((?:[^']|'')*)',RowKey='((?:[^']|'')*)'\)$")
_FILTER_PK = re.compile(r"PartitionKey (?:eq|ge) '((?:[^']|'')*)'")
_LEDGER_SHARD = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]+")
_QUEUE_SERVICE = re.compile(r"(?:^|&)(?:comp=list|restype=service)(?:&|$)")


def touches(sent: Sent, tables: dict[str, str]) -> list[tuple[str, str, int]]:
    """(class, partition, entities) for one request. `tables` maps table name → its role
    ("idempotency", "governance", "ledger")."""
    path = unquote(urlsplit(sent.url).path)
    if sent.kind == "queue":
        return [_queue_touch(sent)]
    if sent.kind == "blob":
        parts = path.strip("/").split("/")
        return [("receipt blob" if len(parts) > 2 else "blob container", "/".join(parts[1:]), 1)]
    name = path.rstrip("/").rsplit("/", 1)[-1]
    table = name.split("(", 1)[0]
    role = tables.get(table, "other")
    point = _POINT.search(name)
    if point:
        return [(_class(role, _unquote(point[1]), _unquote(point[2])), point[1], 1)]
    if sent.method == "POST" and table != "Tables":
        entity = json.loads(sent.body or b"{}")
        return [
            (
                _class(role, entity.get("PartitionKey", ""), entity.get("RowKey", "")),
                entity["PartitionKey"],
                1,
            )
        ]
    filtered = _FILTER_PK.search(unquote(urlsplit(sent.url).query))
    queried = _unquote(filtered[1]) if filtered else "?"
    if sent.returned:  # each entity on its own partition (a query may select without its keys)
        found = [(e.get("PartitionKey", queried), e.get("RowKey", "")) for e in sent.returned]
        return [(_class(role, partition, row), partition, 1) for partition, row in found]
    return [(_class(role, queried, ""), queried, 1)]  # an empty answer still reads the partition


def _queue_touch(sent: Sent) -> tuple[str, str, int]:
    """A Storage Queue request: `/{queue}/messages[/{id}]` on Azure, `/{account}/{queue}/...` on
    Azurite, or an operation on the queue itself (`/{queue}`, create, metadata). Each message a
    read returns counts, as the transport records them; an empty read still touches the queue.
    Requests on the service (list queues, its properties) belong to no queue."""
    url = urlsplit(sent.url)
    parts = unquote(url.path).strip("/").split("/")
    if parts[-1] == "messages" and len(parts) >= 2:
        queue = parts[-2]
    elif len(parts) >= 3 and parts[-2] == "messages":
        queue = parts[-3]
    elif _QUEUE_SERVICE.search(url.query):
        return ("queue admin", "", 1)
    else:
        queue = parts[-1]
    return ("contact queue", queue, max(1, len(sent.returned)))


def _unquote(value: str) -> str:
    return value.replace("''", "'")


def _class(role: str, partition: str, row: str) -> str:
    if role == "idempotency":
        return "scoping horizon" if partition.startswith("~") else "claim"
    if role == "governance":
        if partition == "lease":
            return "drainer lease"
        if partition.startswith("store-cost"):
            return "cost shard"
        return "recipient counter" if row.startswith("recipient-") else "rate counter"
    if role == "ledger":
        if partition == "repair-blob":
            return "repair queue"
        return "ledger shard" if _LEDGER_SHARD.fullmatch(partition) else "ledger day"
    return "table admin"


def measure(
    trips: RoundTrips,
    purchase: Callable[[], object],
    later: Callable[[], object] | None,
    n: int,
    tables: dict[str, str],
) -> dict[str, object]:
    """Run `purchase` n times (each a new buyer), then `later` (the timers' share of the work
    those purchases leave behind), and total the calls and entity touches of both by class."""
    trips.take()
    for _ in range(n):
        purchase()
    now = list(trips.sent)
    trips.take()
    if later is not None:
        later()
    deferred = list(trips.sent)
    trips.take()
    entities: Counter[str] = Counter()
    partitions: dict[str, set[str]] = defaultdict(set)
    for request in now + deferred:
        for cls, partition, count in touches(request, tables):
            entities[cls] += count
            partitions[cls].add(partition)
    return {
        "purchases": n,
        "calls_per_purchase": round(len(now) / n, 2),
        "later_calls_per_purchase": round(len(deferred) / n, 2),
        "classes": {
            cls: {
                "entities_per_purchase": round(entities[cls] / n, 3),
                "partitions_seen": len(partitions[cls]),
            }
            for cls in sorted(entities)
        },
    }


def model(measured: dict, fan_out: dict[str, int]) -> dict:
    """The ceiling of one path: purchases per second before each target, the first one hit and
    the next, and the setting that moves each. `fan_out` is how many partitions (or queues) the
    code spreads each shared class over (classes not named there spread with the buyers)."""
    calls = measured["calls_per_purchase"] + measured.get("later_calls_per_purchase", 0)
    limits = {ACCOUNT: ACCOUNT_REQUESTS_PER_SECOND / calls}
    for cls, figures in measured["classes"].items():
        if cls in SHARED:
            figures["partitions"] = fan_out.get(cls, 1)
            figures["busiest_partition_per_purchase"] = round(
                figures["entities_per_purchase"] / figures["partitions"], 4
            )
            if cls in fan_out:
                target = QUEUE_MESSAGES_PER_SECOND if cls in QUEUES else PARTITION_ENTITIES_PER_SECOND
                limits[_limit(cls)] = target / figures["busiest_partition_per_purchase"]
    ordered = sorted(limits.items(), key=lambda item: item[1])
    (first, ceiling), following = ordered[0], ordered[1:2]
    return {
        **measured,
        "limits_per_second": {name: round(value) for name, value in ordered},
        "ceiling_per_second": round(ceiling),
        "first_limit": first,
        "moved_by": _moved_by(first),
        "next_limit": following[0][0] if following else None,
        "next_ceiling_per_second": round(following[0][1]) if following else None,
        "next_moved_by": _moved_by(following[0][0]) if following else None,
        "bundles_per_day_at_ceiling": round(ceiling * 86_400),
    }


def _limit(cls: str) -> str:
    return cls if cls in QUEUES else f"{cls} partition"


def _moved_by(limit: str) -> str:
    return "none: one account" if limit == ACCOUNT else SHARED[limit.removesuffix(" partition")]


def drain(drainer, attempts: int = 50) -> None:
    """Run the contact drainer as its timer does, until a run holds the lease (one that finds
    another instance draining does nothing) and ends with the queue empty."""
    for _ in range(attempts):
        done = drainer.run()
        if not done.stopped:
            return
        if done.failed:
            raise RuntimeError(f"the contact drainer failed: {done.stopped}")
        time.sleep(0.2)
    raise RuntimeError(f"the contact drainer did not drain: {done.stopped}")


def open_the_day(settings, shards: int) -> None:
    """Create today's cost shards, as a day under way has them: the first purchase to meet a
    shard each day pays a call more (it looks for a count kept before shards had partitions of
    their own), which a short run would otherwise count on nearly every purchase at 800 shards."""
    from azure.core.exceptions import ResourceExistsError

    from shared.seams.storage import table_client

    day = datetime.now(timezone.utc).strftime("cost-%Y-%m-%d")
    table = table_client(settings.storage_connection_string, settings.governance_table, 30)
    with contextlib.suppress(ResourceExistsError):
        table.create_table()
    for shard in range(shards):
        with contextlib.suppress(ResourceExistsError):
            table.create_entity({"PartitionKey": f"store-cost-{shard}", "RowKey": day, "Count": 0})
    table.close()


def open_the_queues(settings) -> None:
    """Create the contact queues, as a store under way has them: a put on a missing queue creates
    it and puts again, two calls more, which a short run would count on a purchase or two."""
    from azure.core.exceptions import ResourceExistsError

    from shared.seams.contact_queue import queue_names
    from shared.seams.storage import queue_client

    shards, _ = queue_names(settings.contact_queue, settings.contact_queue_shards)
    for name in shards:
        queue = queue_client(settings.storage_connection_string, name, 30)
        with contextlib.suppress(ResourceExistsError):
            queue.create_queue()
        queue.close()


def run(handlers, n: int = 40) -> dict:
    """The model for a fresh keyed purchase at today's shard count, 10x and 100x, and for the
    unkeyed and replay paths at today's. `handlers` is the bench's in-process app, every storage
    client counted at the transport."""
    from shared.protocols import api
    from shared.protocols.http import Request
    from shared.purchase.governance import Limits
    from shared.seams.ledger import SHARDS

    today = handlers.settings
    tables = {
        today.idempotency_table: "idempotency",
        today.governance_table: "governance",
        today.ledger_table: "ledger",
    }
    numbers = itertools.count(1)

    def fan_out(settings) -> dict[str, int]:
        """The partitions the code spreads each shared class over: the cost counter's shards
        that hold a budget, the ledger's shards of a day (and its one partition per day from
        before them, should a row there be read), the contact queue's shards."""
        limits = Limits(
            settings.rate_limit_per_hour,
            settings.daily_cost_ceiling_usd,
            settings.cost_per_purchase_usd,
            settings.cost_counter_shards,
        )
        return {
            "cost shard": limits.cost_partitions,
            "ledger shard": SHARDS,
            "ledger day": 1,
            "contact queue": settings.contact_queue_shards,
        }

    def path(settings, arguments: Callable[[], dict]) -> tuple[Callable[[], object], Callable[[], object]]:
        """One purchase on a store with these settings (the instance's one read of the scoping
        horizon done, earlier receipts' tags and contacts drained, every contact queue created),
        and the timers' run after a batch: claims live a second here, so the reaper's share is
        counted too."""
        open_the_day(settings, settings.cost_counter_shards)
        tables[settings.idempotency_table] = "idempotency"
        services = handlers.store_with(**{f: getattr(settings, f) for f in OVERRIDDEN})
        store = services.storefront

        def call() -> object:
            n = next(numbers)
            headers = {"x-forwarded-for": f"198.18.{n // 250 % 250}.{n % 250 + 1}:1"}
            request = Request("POST", headers, json.dumps(arguments()).encode())
            return api.purchase(request, store, settings)

        def later() -> None:
            time.sleep(settings.idempotency_ttl_seconds + 0.5)
            store.reap_expired_keys()
            store.repair_receipts()
            drain(services.drainer)

        call()
        store.repair_receipts()
        drain(services.drainer)
        return call, later

    def buyer() -> dict:
        return {"email": f"capacity.{uuid.uuid4().hex[:12]}@example.org"}

    def keyed() -> dict:
        return {**buyer(), "idempotency_key": f"capacity-{uuid.uuid4().hex}"}

    def short_lived(**changes):
        """Today's settings, with claims that live a second and a claim table and contact queue
        of their own (the drainer then drains only the batch's buyers)."""
        name = f"capacity{uuid.uuid4().hex[:10]}"
        return replace(
            today,
            idempotency_table=name,
            idempotency_ttl_seconds=1,
            idempotency_lease_seconds=1,
            contact_queue=name,
            **changes,
        )

    rows = []
    shard_counts = (
        today.cost_counter_shards,
        today.cost_counter_shards * 10,
        today.cost_counter_shards * 100,
    )
    for shards in shard_counts:
        settings = short_lived(cost_counter_shards=shards)
        measured = measure(handlers.counter, *path(settings, keyed), n, tables)
        rows.append({"path": "fresh, key", "cost_shards": shards, **model(measured, fan_out(settings))})
    settings = short_lived()
    measured = measure(handlers.counter, *path(settings, buyer), n, tables)
    rows.append(
        {
            "path": "fresh, no key",
            "cost_shards": settings.cost_counter_shards,
            **model(measured, fan_out(settings)),
        }
    )
    again = keyed()
    call, _ = path(today, lambda: again)
    measured = measure(handlers.counter, call, None, n, tables)
    rows.append(
        {"path": "replay", "cost_shards": today.cost_counter_shards, **model(measured, fan_out(today))}
    )
    return {
        "targets": {
            "account_requests_per_second": ACCOUNT_REQUESTS_PER_SECOND,
            "partition_entities_per_second": PARTITION_ENTITIES_PER_SECOND,
            "queue_messages_per_second": QUEUE_MESSAGES_PER_SECOND,
            "sources": list(SOURCES),
        },
        "a_million_a_day_per_second": round(A_MILLION_A_DAY, 1),
        "rows": rows,
    }
