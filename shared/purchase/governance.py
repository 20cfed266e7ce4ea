"""Runtime governance: a per-client hourly rate limit, a per-recipient daily limit and a daily cost
ceiling for the store.

All are counters in Azure Table storage (`shared.seams.counters`), so they hold across any number
of function instances. A reservation is taken before the effects run and released if the
purchase fails for a reason that is not the caller's (so an outage does not burn an agent's quota).
Outages raise `StorageOutage`; the purchase flow then proceeds and marks the check `degraded`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from decimal import Decimal

from shared.config.errors import LimitExceeded, StorageOutage
from shared.config.hashing import Hasher
from shared.purchase.agent import Agent
from shared.purchase.mailbox import mailbox
from shared.seams.counters import Reservation, TableCounters, split_budget

MICROS = Decimal(1_000_000)
AGENTS_PER_SITE = 10  # the default site limit: ten agents' limits
IPV6_PREFIX = 64  # one IPv6 subscriber's network: what ISPs assign to one home or one host
# Off Azure (make run, a dev host, func start) a developer who ran into a limit can start afresh.
LOCAL_RESET_HINT = "; locally, `make reset` clears the counters"


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
class Limits:
    rate_limit_per_hour: int
    daily_cost_ceiling_usd: Decimal
    cost_per_purchase_usd: Decimal
    cost_shards: int = 8
    recipient_limit_per_day: int = 3
    agent_rate_limit_per_hour: int | None = None  # a verified agent's; None: rate_limit_per_hour
    agent_site_rate_limit_per_hour: int | None = None  # all agents of one site; None: 10 agents' worth

    @property
    def agent_rate(self) -> int:
        own = self.agent_rate_limit_per_hour
        return self.rate_limit_per_hour if own is None else own

    @property
    def agent_site_rate(self) -> int:
        site = self.agent_site_rate_limit_per_hour
        return AGENTS_PER_SITE * self.agent_rate if site is None else site

    @property
    def cost_partitions(self) -> int:
        """The partitions the daily cost counter spreads over: its shards that hold a budget."""
        return len(split_budget(*self.cost_micros, self.cost_shards))

    @property
    def cost_micros(self) -> tuple[int, int]:
        """(daily ceiling, cost of one purchase) in whole millionths of a dollar."""
        return int(self.daily_cost_ceiling_usd * MICROS), int(self.cost_per_purchase_usd * MICROS)


class Governance:
    def __init__(
        self,
        counters: TableCounters,
        hasher: Hasher,
        limits: Limits,
        clock: Callable[[], float] = time.time,
        *,
        local: bool = False,
    ):
        """`local`: not hosted on Azure, so a refusal ends with `LOCAL_RESET_HINT`."""
        self._counters = counters
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
        return self._reserve_hour(
            self._hasher.client_ip(rate_bucket(ip)),
            self._limits.rate_limit_per_hour,
            "from one client address (an IPv6 client's whole /64)",
            "STOREFRONT_RATE_LIMIT_PER_HOUR",
        )

    def reserve_agent_rate(self, agent: Agent) -> list[Reservation]:
        """Count one attempt for a verified agent in the current UTC hour, in place of its
        address, or refuse with 429: in its own bucket (its origin and key, under
        `Limits.agent_rate`) and its site's (every agent of one registrable domain, under
        `Limits.agent_site_rate`), so that minting keys or subdomains buys no more than the
        site's limit. Each is stored only as its keyed hash; a refusal gives the first back."""
        own = self._reserve_hour(
            self._hasher.agent(f"{agent.origin} {agent.key}"),
            self._limits.agent_rate,
            "from one verified agent (origin and key)",
            "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR",
        )
        try:
            site = self._reserve_hour(
                self._hasher.agent(f"site {agent.site}"),
                self._limits.agent_site_rate,
                f"from the verified agents of one site ({agent.site})",
                "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR",
            )
        except (LimitExceeded, StorageOutage):
            self.release(own)
            raise
        return [own, site]

    def _reserve_hour(self, bucket: str, limit: int, who: str, setting: str) -> Reservation:
        now = self._clock()
        hour = datetime.fromtimestamp(now, timezone.utc).strftime("rate-%Y%m%d%H")
        reservation = self._counters.add(Reservation(bucket, hour, 1), limit=limit, likely_new=True)
        if reservation is None:
            raise LimitExceeded(
                f"rate limit reached: {_count(limit, 'purchase')} per hour {who}; the store sets this "
                f"limit with {setting}{self._hint}",
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
        with contextlib.suppress(StorageOutage):
            self._counters.add(replace(reservation, amount=-reservation.amount), limit=None)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
