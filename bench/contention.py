"""The daily cost counter under contention: the one entity every purchase writes, hammered by
concurrent writers on one shard and on eight."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from devstack.counting import RoundTrips
from devstack.services import Stack


def run(stack: Stack, seconds: float = 3.0, threads: int = 16) -> dict:
    """Reservations per second and storage calls per reservation with 16 concurrent writers, on
    one shard and on eight."""
    from decimal import Decimal

    from shared.config.hashing import Hasher
    from shared.purchase.governance import Governance, Limits
    from shared.seams.counters import TableCounters
    from shared.seams.storage import table_client

    results = {}
    for shards in (1, 8):
        trips = RoundTrips()
        table = table_client(
            stack.connection, f"contend{shards}{uuid.uuid4().hex[:6]}", 5, trips.transport("table")
        )
        limits = Limits(10**9, Decimal("1000000"), Decimal("0.01"), cost_shards=shards)
        governance = Governance(TableCounters(table), Hasher("bench"), limits)
        governance.reserve_cost()
        trips.take()
        done = _hammer(governance.reserve_cost, threads, seconds)
        calls = trips.take().get("table", 0)
        results[f"{shards} shard{'s' if shards > 1 else ''}"] = {
            "reservations_per_second": round(done / seconds, 1),
            "storage_calls_per_reservation": round(calls / max(done, 1), 2),
        }
    return {"writers": threads, "seconds": seconds, **results}


def _hammer(call: Callable[[], object], threads: int, seconds: float) -> int:
    """Call from `threads` threads for `seconds`; how many calls completed."""
    done, lock, deadline = [0], threading.Lock(), time.monotonic() + seconds

    def writer(_: int) -> None:
        while time.monotonic() < deadline:
            call()
            with lock:
                done[0] += 1

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(writer, range(threads)))
    return done[0]
