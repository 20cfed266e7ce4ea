"""Round trips per request, counted on every storage client's transport (and by the sandbox for
Brevo), next to the floor the design allows for each path."""

from __future__ import annotations

import json
import time

from bench import capacity
from bench.stack import Counted, Handlers, address, buyer, keyed

FLOORS = {
    # path: (storage floor, brevo floor, what the floor is made of)
    "replay": (1, 0, "claim point read (the receipt rides on the completed claim)"),
    "fresh, key": (
        12,
        1,
        "claim read, rate 1, recipient 1, cost read + write, claim insert, 2 recovery points, "
        "contact queued, receipt blob, ledger, claim completed; email",
    ),
    "fresh, no key": (
        7,
        1,
        "rate 1, recipient 1, cost read + write, contact queued, receipt blob, ledger; email",
    ),
    "refused: invalid key": (0, 0, "format checked before any I/O"),
    "refused: key in progress": (1, 0, "claim point read"),
    "refused: key reused": (1, 0, "claim point read"),
    "refused: invalid input": (1, 0, "rate 1 (bad input counts against the limit)"),
    "refused: rate limit": (1, 0, "rate counter read (create-first makes it 2, the first purchase 1)"),
    "refused: cost ceiling": (
        6,
        0,
        "rate 1, recipient 1, cost: the shard read and one query over every shard, rate and recipient "
        "given back",
    ),
}


def run(handlers: Handlers) -> dict[str, dict]:
    from shared.protocols import api
    from shared.protocols.http import Request

    post = handlers.post
    capacity.open_the_day(handlers.settings, handlers.settings.cost_counter_shards)
    capacity.open_the_queues(handlers.settings)
    first = keyed()
    post(first)
    results: dict[str, Counted] = {
        "replay": handlers.counted(lambda: post(first)),
        "fresh, key": handlers.counted(lambda: post(keyed(), ip=address())),
        "fresh, no key": handlers.counted(lambda: post(buyer(), ip=address())),
        "refused: invalid key": handlers.counted(lambda: post({**buyer(), "idempotency_key": "bad key"})),
        "refused: key reused": handlers.counted(lambda: post({**first, "bundle_id": "mcp-field-guide"})),
        "refused: key in progress": _in_progress(handlers),
        "refused: invalid input": handlers.counted(lambda: post({"email": "nope"}, ip=address())),
    }
    for path, overrides in (
        ("refused: rate limit", {"rate_limit_per_hour": 1}),
        ("refused: cost ceiling", {"daily_cost_ceiling_usd": handlers.settings.cost_per_purchase_usd}),
    ):
        store = handlers.store_with(**overrides).storefront
        same = address()

        def call(store=store, ip=same if path == "refused: rate limit" else None):
            client = ip or address()  # the cost ceiling meets a new client, the rate limit the same one
            request = Request("POST", {"x-forwarded-for": f"{client}:1"}, json.dumps(buyer()).encode())
            return api.purchase(request, store, handlers.settings)

        call()  # the hour's one purchase, or the day's
        results[path] = handlers.counted(call)
    rows: dict[str, dict] = {}
    for path, counts in results.items():
        floor, brevo_floor, why = FLOORS[path]
        storage = counts["table"] + counts["blob"] + counts["queue"]
        rows[path] = {**counts, "storage": storage, "floor": floor, "brevo_floor": brevo_floor, "why": why}
    return rows


def _in_progress(handlers: Handlers) -> Counted:
    """A key whose first request still holds its claim (inserted here through the store)."""
    from shared.config.hashing import Hasher
    from shared.purchase.call import scoped_key_hash
    from shared.purchase.schema import canonical_request
    from shared.seams.claims import Claim, TableClaimStore
    from shared.seams.storage import table_client

    s = handlers.settings
    hasher = Hasher(s.hash_secret)
    args = keyed()
    store = TableClaimStore(table_client(s.storage_connection_string, s.idempotency_table, 5))
    now = time.time()
    fingerprint = hasher.request(canonical_request(args))
    store.create(
        Claim(
            scoped_key_hash(hasher, args["idempotency_key"], args["email"]),
            "processing",
            fingerprint,
            "rcpt_x",
            now + 600,
            now + 9e5,
        )
    )
    return handlers.counted(lambda: handlers.post(args))
