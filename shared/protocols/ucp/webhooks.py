"""Order events to the platforms that ask for them (UCP 2026-08-25, shopping/order/index.md
"Events"): the full order entity, POSTed to the webhook URL of the platform's profile, signed by
the store (RFC 9421 with Content-Digest, `UCP-Agent` naming the store's profile) with Standard
Webhooks' `Webhook-Id` and `Webhook-Timestamp`, and retried until the platform answers 2xx.

An event is queued (a row of the checkout table, in one of its `~webhooks-N` partitions) before the purchase
runs, so no completed order can miss its event; it is sent when its checkout is `completed`, at
once and then by the `deliver_order_webhooks` timer, backing off up to an hour for a day. A row
is taken by a conditional write before each attempt, so two instances never send it together.
The URL is a stranger's: it is posted to through the public-only fetcher (shared/seams)."""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from urllib.parse import urlsplit

from shared.config.errors import NotConfigured, StorageOutage
from shared.config.keys import KeySet
from shared.protocols.ucp import orders
from shared.protocols.ucp.session_rows import SessionRows
from shared.protocols.ucp.signatures import sign_request
from shared.seams.checkout_store import CheckoutStore, Row, RowChanged
from shared.seams.public_fetch import FetchFailed, PublicFetcher

log = logging.getLogger(__name__)

# Events spread over shards, so that no one Table partition takes every order's writes (a
# partition's target is 2,000 entities a second; each event costs three or four writes).
SHARDS = 16
BACKOFF_SECONDS = (30, 60, 120, 300, 600, 1800, 3600)
GIVE_UP_SECONDS = 24 * 3600
KEEP_SECONDS = GIVE_UP_SECONDS + 2 * 86400  # the reaper's backstop for a row nothing finished
LEASE_SECONDS = 30  # an attempt's hold on its row: longer than the fetcher's deadline
BATCH = 50
# A run stops taking events well inside the Functions timeout (host.json, 5 minutes): the next
# run, a minute later, goes on.
RUN_SECONDS = 240


class Webhooks:
    def __init__(
        self,
        store: CheckoutStore,
        fetcher: PublicFetcher,
        keys: Callable[[], KeySet],
        business_profile: str,
        clock: Callable[[], float] = time.time,
    ):
        """`business_profile`: the store's profile URL, which the events' UCP-Agent names."""
        self._store = store
        self._rows = SessionRows(store, clock)
        self._fetcher = fetcher
        self._keys = keys
        self._profile = business_profile
        self._clock = clock

    def queue(self, platform: str, checkout_id: str, url: str) -> None:
        """Queue the order event of a checkout about to complete (once; again is a no-op). A URL
        that is not an absolute http(s) URL is not queued: no attempt could succeed. Raises
        StorageOutage: the complete must not run without its event."""
        if not _sendable(url):
            log.warning("a platform's webhook URL is not a URL; its order events are not sent")
            return
        now = self._clock()
        record: dict[str, object] = {"url": url, "platform": platform, "checkout": checkout_id}
        record |= {"event": str(uuid.uuid4()), "attempts": 0, "first_at": now}
        order = orders.order_id(checkout_id)
        self._store.create(Row(shard_of(order), order, record, now + KEEP_SECONDS, due=now))

    def send(self, checkout_id: str) -> bool:
        """Try the event of a checkout that just completed now; False when it waits for a retry.
        Never raises: the checkout is complete whatever becomes of its event."""
        try:
            order = orders.order_id(checkout_id)
            row = self._store.get(shard_of(order), order)
            return row is not None and self._attempt(row)
        except Exception as exc:  # noqa: BLE001 - the timer tries again; the complete stands
            log.warning("an order event waits for the timer (%s)", type(exc).__name__)
            return False

    def deliver_due(self) -> int:
        """The queued events whose time has come, BATCH at most a shard (the timer's job); the
        number delivered. Only due rows are read, so events backing off never crowd out due ones.
        Each run starts at another shard and stops after RUN_SECONDS, so slow platforms never
        starve the same shards; a shard or an event that cannot be read is logged and passed by,
        never stopping the others."""
        start = self._clock()
        delivered = 0
        for step in range(SHARDS):
            shard = (int(start // 60) + step) % SHARDS
            try:
                due = self._store.rows(f"~webhooks-{shard}", BATCH, due_by=self._clock())
            except StorageOutage as exc:
                log.warning("a shard of order events could not be read (%s)", type(exc).__name__)
                continue
            for row in due:
                if self._clock() - start > RUN_SECONDS:
                    return delivered
                try:
                    delivered += self._attempt(row)
                except Exception as exc:  # noqa: BLE001 - one event's trouble never stops the others
                    log.warning("an order event could not be attempted (%s)", type(exc).__name__)
        return delivered

    def _attempt(self, row: Row) -> bool:
        now = self._clock()
        if row.due > now:
            return False  # leased by an instance sending it now, or backing off: not yet
        record = row.record
        try:
            taken = self._store.replace(replace(row, due=now + LEASE_SECONDS))
        except RowChanged:
            return False  # another instance has it
        loaded = self._rows.load(record["platform"], record["checkout"])
        session = loaded[0] if loaded else None
        if session is None or session.status == "canceled":
            self._store.delete(taken)  # no order can come of it
            return False
        if session.status != "completed":  # its complete failed or is running; another may
            return self._back_off(taken, now)  # succeed (and send it at once): keep it, waiting
        if self._post(record, orders.entity(session), now):
            self._store.delete(taken)
            return True
        if now - float(record.get("first_at", now)) > GIVE_UP_SECONDS:
            tries = int(record.get("attempts", 0)) + 1
            log.warning("an order event was given up after %d attempts over a day", tries)
            self._store.delete(taken)
            return False
        return self._back_off(taken, now)

    def _back_off(self, taken: Row, now: float) -> bool:
        """Wait longer after each try, whether the post failed or the checkout had not completed."""
        attempts = int(taken.record.get("attempts", 0)) + 1
        wait = BACKOFF_SECONDS[min(attempts, len(BACKOFF_SECONDS)) - 1]
        self._store.replace(replace(taken, record={**taken.record, "attempts": attempts}, due=now + wait))
        return False

    def _post(self, record: dict, order: dict, now: float) -> bool:
        body = json.dumps(order, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "UCP-Agent": f'profile="{self._profile}"',
            "Webhook-Id": record["event"],
            "Webhook-Timestamp": str(int(now)),  # this attempt's: receivers refuse stale ones
        }
        try:
            signed = sign_request("POST", record["url"], headers, body, self._keys(), now)
            answer = self._fetcher.post(record["url"], body, signed)
        except (FetchFailed, NotConfigured) as exc:
            log.info("an order event was not delivered: %s", exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a URL the signer or the client cannot take
            log.info("an order event could not be sent (%s)", type(exc).__name__)
            return False
        return 200 <= answer.status < 300


def _sendable(url: str) -> bool:
    """An absolute http(s) URL with a host, in printable ASCII (what a request line and a
    signature base can carry); the fetcher then holds it to HTTPS and public addresses on Azure."""
    if not (url.isascii() and url.isprintable()) or " " in url or len(url) > 2048:
        return False
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises ValueError
    except ValueError:
        return False
    return parts.scheme in ("https", "http") and bool(parts.hostname)


def shard_of(order: str) -> str:
    """The partition an order's event is kept in: one of SHARDS, by the order id's hash."""
    return f"~webhooks-{int(hashlib.sha256(order.encode()).hexdigest(), 16) % SHARDS}"
