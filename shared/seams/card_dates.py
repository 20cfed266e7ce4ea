"""When the agent card the store serves became its current card (its Last-Modified), on record in
Table storage so that every instance gives the same card the same date.

One row per public address names the current card (its ETag) and the second it became current. A
card the row does not name replaces it, conditionally on the row's ETag, so racing instances agree
on one date, always at least a second past the date it replaces: after A, B, then A again, A is
dated after B. Each instance keeps the answer for a minute, so while two cards are live (a
deployment's overlap) an instance may date its card by that minute-old read, and a client sending
only If-Modified-Since may get one stale 304 (If-None-Match, which wins, never does). A storage
failure is no date (the card goes without Last-Modified), never an error.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, UpdateMode

from shared.config.errors import StorageOutage
from shared.seams.storage import on_table

PARTITION = "agent-card"
WHAT = "agent card's date"
CACHE_SECONDS = 60.0
# The date is optional, so a card never waits the full storage timeout (and its retry) for it.
TIMEOUT_SECONDS = 1.0
LOST_RACE = (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError)

log = logging.getLogger(__name__)


class TableCardDates:
    def __init__(
        self,
        table: TableClient,
        address: str,
        cache_seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._table, self._cache_seconds, self._clock = table, cache_seconds, clock
        self._row = row_key(address)
        self._asking = threading.Lock()  # one request asks storage; the others do not queue behind it
        self._last: tuple[str, datetime | None, float] | None = None  # card, date, good until

    def since(self, card: str, now: datetime) -> datetime | None:
        """When `card` (its ETag) became the current card, in whole seconds, UTC; `now` (the
        time it is) when it becomes current by this call. None when storage did not answer, or
        while another request is asking it and this instance knows no date for the card."""
        last = self._last
        if last is not None and last[0] == card and self._clock() < last[2]:
            return last[1]
        if not self._asking.acquire(blocking=False):
            return last[1] if last is not None and last[0] == card else None
        try:
            date = self._since(card, _whole(now))
        except StorageOutage as exc:
            log.warning("the agent card is served without Last-Modified: %s", exc)
            date = None
        finally:
            self._asking.release()
        self._last = (card, date, self._clock() + self._cache_seconds)
        return date

    def _since(self, card: str, now: datetime) -> datetime | None:
        row = self._read()
        recorded = _date(row)
        if recorded is not None and row is not None and row.get("Card") == card:
            return recorded
        date = now if recorded is None else max(now, recorded + timedelta(seconds=1))
        try:
            self._write(card, date, None if row is None else row.metadata["etag"])
            return date
        except LOST_RACE:
            won = self._read()
        # Another instance recorded a card first: its date if it is this card; else no date, as
        # one made up here could be no later than the winner's: a wrong 304 for its holders.
        return _date(won) if won is not None and won.get("Card") == card else None

    def _read(self) -> TableEntity | None:
        try:
            return on_table(self._table, WHAT, lambda: self._table.get_entity(PARTITION, self._row))
        except ResourceNotFoundError:
            return None

    def _write(self, card: str, date: datetime, etag: str | None) -> None:
        entity = {"PartitionKey": PARTITION, "RowKey": self._row, "Card": card, "Since": date}
        if etag is None:
            on_table(self._table, WHAT, lambda: self._table.create_entity(entity))
            return
        on_table(
            self._table,
            WHAT,
            lambda: self._table.update_entity(
                entity, mode=UpdateMode.REPLACE, etag=etag, match_condition=MatchConditions.IfNotModified
            ),
        )


def row_key(address: str) -> str:
    """The row of the card served at `address` (its public base URL), as a key Table storage
    takes (an address holds characters a key may not)."""
    return hashlib.sha256(address.encode()).hexdigest()[:32]


def _whole(moment: datetime) -> datetime:
    """A moment as HTTP dates have it: whole seconds, UTC."""
    return moment.astimezone(timezone.utc).replace(microsecond=0)


def _date(row: TableEntity | None) -> datetime | None:
    """The row's date; None for no row, or one this module cannot read (it is replaced)."""
    stored = None if row is None else row.get("Since")
    if not isinstance(stored, datetime):
        return None
    return _whole(stored if stored.tzinfo else stored.replace(tzinfo=timezone.utc))
