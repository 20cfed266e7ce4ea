"""Integer counters in Azure Table storage, changed with ETag-conditional writes, so they hold across
any number of function instances: the seam under the store's rate, recipient and cost limits
(`shared.purchase.governance`). Lost races are retried after a jittered back-off; Azure's errors
stop here (an outage is `StorageOutage`)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import EntityProperty, TableClient, UpdateMode

from shared.config.errors import StorageOutage
from shared.seams.storage import is_missing_table, on_table

_MAX_ATTEMPTS = 60


@dataclass(frozen=True)
class Reservation:
    partition: str
    row: str
    amount: int
    count: int = 0  # the counter right after this reservation
    etag: str = ""  # and its ETag: giving the reservation back then costs one conditional write


def split_budget(limit: int, amount: int, shards: int) -> list[int]:
    """Per-shard budgets: as many shards as hold at least one `amount`, each a multiple of it."""
    if amount <= 0:
        return [limit // shards + (1 if i < limit % shards else 0) for i in range(shards)]
    units = limit // amount
    count = max(1, min(shards, units))
    return [(units // count + (1 if i < units % count else 0)) * amount for i in range(count)]


def _entity(r: Reservation, count: int) -> dict:
    """A counter as stored: `Count` in decimal digits, a string, so that no count the settings
    allow overflows it (a number property is an Int32 unless typed; a day's cost in millionths of
    a dollar passes 2**31 at $2,147.48)."""
    return {"PartitionKey": r.partition, "RowKey": r.row, "Count": str(count)}


def _number(stored: object) -> int:
    """A stored `Count`: the digits this version writes, or the Int32 (int) or Int64
    (EntityProperty) an earlier version wrote. Anything else is a counter the store cannot read."""
    value = stored.value if isinstance(stored, EntityProperty) else stored
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise StorageOutage("a governance counter holds something other than a count")
    try:
        return int(value)
    except ValueError:
        raise StorageOutage("a governance counter holds something other than a count") from None


def _etag(metadata: Mapping[str, object]) -> str:
    """An entity's ETag, which Table storage returns with every entity it reads."""
    etag = metadata.get("etag")
    if not isinstance(etag, str):
        raise StorageOutage("the governance table returned an entity without an ETag")
    return etag


def _back_off(attempt: int) -> None:
    """Jittered exponential back-off after losing an ETag race, capped at 50 ms."""
    time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))


class TableCounters:
    """Integer counters updated with optimistic concurrency: read, then an ETag-conditional write.

    A counter that is probably new (the first purchase of a client in an hour) is created
    directly, one call instead of a read that misses and a create; a reservation that knows the
    ETag it left behind is given back with one conditional write.
    """

    def __init__(self, table: TableClient):
        self._table = table

    def add(self, r: Reservation, *, limit: int | None, likely_new: bool = False) -> Reservation | None:
        """Add `r.amount`: the reservation as written, or None when it would pass `limit`."""
        known = (r.count, r.etag) if r.etag else None

        def once(attempt: int) -> Reservation | None:
            nonlocal known
            if known is None and likely_new and attempt == 0:
                return self._create(r, limit)
            state, known = known or self._read(r), None
            return self._create(r, limit) if state is None else self._update(r, *state, limit)

        return self._until_won(once)

    def add_sharded(
        self, partition: str, name: str, amount: int, limit: int, shards: int
    ) -> Reservation | None:
        """Add `amount` to one of up to `shards` counters that split `limit` between them, each in
        its own partition (`{partition}-{shard}`, row `name`): writers rarely contend, and no one
        partition carries every purchase. Budgets are whole multiples of `amount`, so exactly
        `limit // amount` additions fit, as with one counter; the total never passes `limit`.

        A random shard is read and written, two calls; only when it is full does one query read
        every shard to find one with room, so a refusal at the ceiling costs two reads."""
        budgets = split_budget(limit, amount, shards)
        if amount > limit:
            return None

        def once(attempt: int) -> Reservation | None:
            shard = random.randrange(len(budgets))
            r = Reservation(f"{partition}-{shard}", name, amount)
            state = self._read(r)
            if state is None:
                added = self._create_shard(partition, shard, r, budgets[shard])
            else:
                added = self._update(r, *state, budgets[shard])
            return added or self._add_to_any(partition, name, amount, limit, budgets)

        return self._until_won(once)

    def _add_to_any(
        self, partition: str, name: str, amount: int, limit: int, budgets: list[int]
    ) -> Reservation | None:
        """Add to a random shard with room, found with one query; None when none has room."""
        counts = self._read_shards(partition, name)
        if sum(count for count, _ in counts.values()) + amount > limit:
            return None
        room = [i for i, budget in enumerate(budgets) if i not in counts or counts[i][0] + amount <= budget]
        random.shuffle(room)
        for shard in room:
            r = Reservation(f"{partition}-{shard}", name, amount)
            if shard in counts:
                return self._update(r, *counts[shard], budgets[shard])
            added = self._create_shard(partition, shard, r, budgets[shard])
            if added is not None:
                return added
        return None

    def _create_shard(self, partition: str, shard: int, r: Reservation, budget: int) -> Reservation | None:
        """Create a shard not yet written today with `r.amount` added, or None when it has no room.

        Upgrade from the layout that kept every shard in `partition` as row `{name}-{shard}`: a
        shard created today starts from the count there, so the ceiling holds on the upgrade
        day; one already full is created at that count, so it is read only once. Only the day of
        the upgrade needs this read."""
        before = self._read(Reservation(partition, f"{r.row}-{shard}", 0))
        start = before[0] if before else 0
        fits = start + r.amount <= budget
        count = start + r.amount if fits else start
        meta = self._table.create_entity(_entity(r, count))
        return replace(r, count=count, etag=meta["etag"]) if fits else None

    def _until_won(self, once: Callable[[int], Reservation | None]) -> Reservation | None:
        """Run `once(attempt)` again, after a jittered back-off, each time it loses an ETag race."""
        for attempt in range(_MAX_ATTEMPTS):
            try:
                return on_table(self._table, "governance table", lambda: once(attempt))  # noqa: B023
            except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
                # Lost an ETag race, or the counter vanished under an update: read again.
                _back_off(attempt)
        raise StorageOutage("governance counter too contended")

    def _read_shards(self, partition: str, name: str) -> dict[int, tuple[int, str]]:
        """Every shard of one counter, one query over their partitions: shard → (count, ETag).
        Keys sort as text (`-10` before `-2`), so the shard number is read from each key."""
        found = self._table.query_entities(
            "PartitionKey ge @low and PartitionKey lt @high and RowKey eq @name",
            parameters={"low": f"{partition}-", "high": f"{partition}.", "name": name},
            select=["PartitionKey", "RowKey", "Count"],
        )
        return {
            int(e["PartitionKey"][len(partition) + 1 :]): (_number(e["Count"]), _etag(e.metadata))
            for e in found
        }

    def _read(self, r: Reservation) -> tuple[int, str] | None:
        try:
            entity = self._table.get_entity(r.partition, r.row)
        except ResourceNotFoundError as exc:
            if is_missing_table(exc):
                raise
            return None
        return _number(entity["Count"]), _etag(entity.metadata)

    def _create(self, r: Reservation, limit: int | None) -> Reservation | None:
        if limit is not None and r.amount > limit:
            return None
        count = max(r.amount, 0)
        meta = self._table.create_entity(_entity(r, count))
        return replace(r, count=count, etag=meta["etag"])

    def _update(self, r: Reservation, count: int, etag: str, limit: int | None) -> Reservation | None:
        new = count + r.amount
        if limit is not None and r.amount > 0 and new > limit:
            return None
        meta = self._table.update_entity(
            _entity(r, max(new, 0)),
            mode=UpdateMode.REPLACE,
            etag=etag,
            match_condition=MatchConditions.IfNotModified,
        )
        return replace(r, count=max(new, 0), etag=meta["etag"])
