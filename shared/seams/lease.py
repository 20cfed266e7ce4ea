"""A lease in Table storage: one holder at a time across every instance, for work that must not
run twice at once (the contact drainer paces Brevo's contacts limit, which is the account's, not
an instance's).

One entity per lease: who holds it, until when, and the small state the holder leaves for the
next (`fields`, e.g. when to try again after an upstream failure). Taken and renewed with
ETag-conditional writes, so two instances racing for a free lease never both win; a holder that
dies loses it when its time runs out.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.config.errors import StorageOutage
from shared.seams.storage import on_table

PARTITION = "lease"
WHAT = "lease table"


class TableLease:
    def __init__(
        self,
        table: TableClient,
        name: str,
        seconds: float,
        clock: Callable[[], float] = time.time,
    ):
        self._table, self._name, self._seconds, self._clock = table, name, seconds, clock
        self._holder = uuid.uuid4().hex
        self._etag: str | None = None

    def take(self) -> dict | None:
        """The lease's state fields when this instance now holds it; None when another does.
        Raises StorageOutage."""
        now = self._clock()
        try:
            entity = on_table(self._table, WHAT, lambda: self._table.get_entity(PARTITION, self._name))
        except ResourceNotFoundError:
            return self._write(now, {}, etag=None)
        if entity.get("Holder") not in ("", self._holder) and float(entity.get("Until", 0)) > now:
            return None
        fields = {k: v for k, v in entity.items() if k not in ("PartitionKey", "RowKey", "Holder", "Until")}
        return self._write(now, fields, etag=entity.metadata["etag"])

    def renew(self, fields: dict | None = None) -> bool:
        """Extend the hold; False when it was lost (another instance took it after it ran out)."""
        if self._etag is None:
            return False
        return self._write(self._clock(), fields or {}, etag=self._etag) is not None

    def release(self, fields: dict | None = None) -> None:
        """Give the lease up, leaving `fields` for the next holder; best effort (an outage or a
        lost lease leaves it to run out)."""
        if self._etag is None:
            return
        with contextlib.suppress(StorageOutage, ResourceModifiedError, ResourceNotFoundError):
            self._put({"Holder": "", "Until": 0.0, **(fields or {})}, self._etag)
        self._etag = None

    def _write(self, now: float, fields: dict, etag: str | None) -> dict | None:
        try:
            self._etag = self._put({**fields, "Holder": self._holder, "Until": now + self._seconds}, etag)
        except (ResourceExistsError, ResourceModifiedError, ResourceNotFoundError):
            self._etag = None
            return None
        return fields

    def _put(self, values: dict, etag: str | None) -> str:
        entity = {"PartitionKey": PARTITION, "RowKey": self._name, **values}
        if etag is None:
            meta = on_table(self._table, WHAT, lambda: self._table.create_entity(entity))
        else:
            meta = on_table(
                self._table,
                WHAT,
                lambda: self._table.update_entity(
                    entity, mode=UpdateMode.REPLACE, etag=etag, match_condition=MatchConditions.IfNotModified
                ),
            )
        return meta["etag"]
