"""Runtime governance: a per-client hourly rate limit, a per-recipient daily limit and a daily cost
ceiling for the store.

All are counters in Azure Table storage, changed with ETag-conditional writes, so they hold across
any number of function instances. A reservation is taken before the effects run and released if the
purchase fails for a reason that is not the caller's (so an outage does not burn an agent's quota).
Outages raise `StoreUnavailable`; the purchase flow then proceeds and marks the check `degraded`.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from decimal import Decimal

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import EntityProperty, TableClient, UpdateMode

from shared.config.errors import LimitExceeded, StoreUnavailable
from shared.config.hashing import Hasher
from shared.purchase.mailbox import mailbox
from shared.seams.storage import is_missing_table, on_table

UNKNOWN_IP = "unknown"
MICROS = Decimal(1_000_000)
IPV6_PREFIX = 64  # one IPv6 subscriber's network: what ISPs assign to one home or one host
_MAX_ATTEMPTS = 60
# Off Azure (make run, a dev host, func start) a developer who ran into a limit can start afresh.
LOCAL_RESET_HINT = "; locally, `make reset` clears the counters"


def client_address(header: Callable[[str], str | None], *, hops: int = 0, front_door_id: str = "") -> str:
    """The address the rate limit counts, from a request's headers (`header(name)`).

    A request that carries the operator's Front Door id (`X-Azure-FDID`, compared in constant
    time) counts by `X-Azure-SocketIP`, the address that opened the connection to Front Door.
    Front Door's `X-Azure-ClientIP` is never read: it takes a client's own X-Forwarded-For.
    Any other request counts by `client_ip(X-Forwarded-For, hops)`."""
    if front_door_id and _same_id(header("x-azure-fdid"), front_door_id):
        return _address(header("x-azure-socketip") or "")
    return client_ip(header("x-forwarded-for"), hops)


def _same_id(sent: str | None, configured: str) -> bool:
    if sent is None:
        return False
    given, expected = (value.strip().lower().encode("utf-8", "surrogatepass") for value in (sent, configured))
    return hmac.compare_digest(given, expected)


def client_ip(forwarded_for: str | None, hops: int = 0) -> str:
    """The X-Forwarded-For entry `hops` places left of the rightmost, port stripped.

    Azure's front end appends the address it saw, so with no proxy of the operator's own in
    front of it (`hops` 0) the rightmost entry is the client. Each trusted proxy appended the
    address it saw before that, so with `hops` of them the client is `hops` entries further
    left. Entries further left are whatever the client sent and are never trusted; a header
    with too few entries, or an unparseable one, is "unknown" (one bucket), never a guess.
    """
    if not forwarded_for:
        return UNKNOWN_IP
    entries = forwarded_for.split(",")
    if hops < 0 or hops >= len(entries):
        return UNKNOWN_IP
    return _address(entries[-1 - hops])


def _address(entry: str) -> str:
    """An address as a proxy writes it (`a.b.c.d`, `a.b.c.d:port`, `[v6]:port`, bare v6), in its
    one canonical text; anything else is "unknown"."""
    entry = entry.strip()
    if entry.startswith("["):
        entry = entry[1:].split("]", 1)[0]
    elif entry.count(":") == 1:
        entry = entry.split(":", 1)[0]
    try:
        return ipaddress.ip_address(entry).compressed
    except ValueError:
        return UNKNOWN_IP


def rate_bucket(ip: str) -> str:
    """The client the rate limit counts: an IPv4 address as it is (an IPv4-mapped IPv6 address as
    its IPv4 address), an IPv6 address as its /64, since one subscriber gets a whole /64 and can
    pick a new address in it for every request. Anything else ("unknown") is one bucket."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False))
    return str(address)


@dataclass(frozen=True)
class Reservation:
    partition: str
    row: str
    amount: int
    count: int = 0  # the counter right after this reservation
    etag: str = ""  # and its ETag: giving the reservation back then costs one conditional write


@dataclass(frozen=True)
class Limits:
    rate_limit_per_hour: int
    daily_cost_ceiling_usd: Decimal
    cost_per_purchase_usd: Decimal
    cost_shards: int = 8
    recipient_limit_per_day: int = 3

    @property
    def cost_partitions(self) -> int:
        """The partitions the daily cost counter spreads over: its shards that hold a budget."""
        return len(_split(*self.cost_micros, self.cost_shards))

    @property
    def cost_micros(self) -> tuple[int, int]:
        """(daily ceiling, cost of one purchase) in whole millionths of a dollar."""
        return int(self.daily_cost_ceiling_usd * MICROS), int(self.cost_per_purchase_usd * MICROS)


class Governance:
    def __init__(
        self,
        table: TableClient,
        hasher: Hasher,
        limits: Limits,
        clock: Callable[[], float] = time.time,
        *,
        local: bool = False,
    ):
        """`local`: not hosted on Azure, so a refusal ends with `LOCAL_RESET_HINT`."""
        self._counters = _Counters(table)
        self._hasher = hasher
        self._limits = limits
        self._clock = clock
        self._hint = LOCAL_RESET_HINT if local else ""

    @property
    def limits(self) -> Limits:
        return self._limits

    def reserve_rate(self, ip: str) -> Reservation:
        """Count one attempt for this client in the current UTC hour, or refuse with 429.

        The client is `rate_bucket(ip)` (an IPv6 client's /64), stored only as its keyed hash."""
        now = self._clock()
        hour = datetime.fromtimestamp(now, timezone.utc).strftime("rate-%Y%m%d%H")
        wanted = Reservation(self._hasher.client_ip(rate_bucket(ip)), hour, 1)
        reservation = self._counters.add(wanted, limit=self._limits.rate_limit_per_hour, likely_new=True)
        if reservation is None:
            raise LimitExceeded(
                f"rate limit reached: {_count(self._limits.rate_limit_per_hour, 'purchase')} per hour "
                "from one client address (an IPv6 client's whole /64); the store sets this limit with "
                f"STOREFRONT_RATE_LIMIT_PER_HOUR{self._hint}",
                code="rate_limited",
                retry_after=3600 - int(now) % 3600,
            )
        return reservation

    def reserve_recipient(self, address: str) -> Reservation:
        """Count one email to this recipient's mailbox in the current UTC day, or refuse with 429
        `rate_limited`, whoever asks for it.

        The counter is keyed by `Hasher.email(mailbox(address))`, so every address that reaches
        one inbox (`ada+1@`, `a.d.a@gmail.com`, `ada@googlemail.com`) shares one count, and the
        table holds the keyed hash only. The window is the UTC day, a fixed window like the rate
        limit's hour: `retry_after` is the time to midnight UTC, when the count starts again.
        Across midnight one mailbox can get up to twice the limit within minutes, and never more
        than the limit within one UTC day. `release` gives a reservation back."""
        if not isinstance(address, str) or "@" not in address:
            raise ValueError("reserve_recipient takes the buyer's email address")
        now = self._clock()
        day = datetime.fromtimestamp(now, timezone.utc).strftime("recipient-%Y%m%d")
        limit = self._limits.recipient_limit_per_day
        key = self._hasher.email(mailbox(address))
        reservation = self._counters.add(Reservation(key, day, 1), limit=limit, likely_new=True)
        if reservation is None:
            raise LimitExceeded(
                f"recipient limit reached: {_count(limit, 'email')} per UTC day to one mailbox, "
                "whoever asks; the store sets this limit with "
                f"STOREFRONT_RECIPIENT_LIMIT_PER_DAY{self._hint}",
                code="rate_limited",
                retry_after=86400 - int(now) % 86400,
            )
        return reservation

    def reserve_cost(self) -> Reservation:
        """Add one purchase's cost estimate to today's total, or refuse with 429 at the ceiling."""
        now = self._clock()
        day = datetime.fromtimestamp(now, timezone.utc).strftime("cost-%Y-%m-%d")
        ceiling, amount = self._limits.cost_micros
        reservation = self._counters.add_sharded("store-cost", day, amount, ceiling, self._limits.cost_shards)
        if reservation is None:
            raise LimitExceeded(
                f"daily cost ceiling of ${self._limits.daily_cost_ceiling_usd} reached for the store; "
                f"the store sets it with STOREFRONT_DAILY_COST_CEILING_USD{self._hint}",
                code="cost_ceiling_reached",
                retry_after=86400 - int(now) % 86400,
            )
        return reservation

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back; best effort, an outage here only leaves the counter high."""
        with contextlib.suppress(StoreUnavailable):
            self._counters.add(replace(reservation, amount=-reservation.amount), limit=None)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _split(limit: int, amount: int, shards: int) -> list[int]:
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
        raise StoreUnavailable("a governance counter holds something other than a count")
    try:
        return int(value)
    except ValueError:
        raise StoreUnavailable("a governance counter holds something other than a count") from None


def _back_off(attempt: int) -> None:
    """Jittered exponential back-off after losing an ETag race, capped at 50 ms."""
    time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))


class _Counters:
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
        budgets = _split(limit, amount, shards)
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
        raise StoreUnavailable("governance counter too contended")

    def _read_shards(self, partition: str, name: str) -> dict[int, tuple[int, str]]:
        """Every shard of one counter, one query over their partitions: shard → (count, ETag).
        Keys sort as text (`-10` before `-2`), so the shard number is read from each key."""
        found = self._table.query_entities(
            "PartitionKey ge @low and PartitionKey lt @high and RowKey eq @name",
            parameters={"low": f"{partition}-", "high": f"{partition}.", "name": name},
            select=["PartitionKey", "RowKey", "Count"],
        )
        return {
            int(e["PartitionKey"][len(partition) + 1 :]): (_number(e["Count"]), e.metadata["etag"])
            for e in found
        }

    def _read(self, r: Reservation) -> tuple[int, str] | None:
        try:
            entity = self._table.get_entity(r.partition, r.row)
        except ResourceNotFoundError as exc:
            if is_missing_table(exc):
                raise
            return None
        return _number(entity["Count"]), entity.metadata["etag"]

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
