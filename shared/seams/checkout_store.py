"""UCP checkout sessions and the answers kept for their Idempotency-Keys, as sealed rows of one
Azure table (`STOREFRONT_UCP_TABLE`).

A row is its PartitionKey (a checkout id, or a key's keyed hash), its RowKey (the kind of row),
the record sealed under the hash secret (a session holds the buyer's address, an answer may echo
it), and `KeepUntil`, the time the reaper may delete it, in the clear. Azure's conditional answers
become the interface's: an existing row on create → None, an ETag mismatch or a vanished row on
replace or delete → `RowChanged`. Anything else, a row this store cannot open included, is an
outage → `StorageOutage`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import TableClient, UpdateMode

from shared.config.errors import StorageOutage
from shared.config.sealing import Sealer, Unreadable
from shared.seams.storage import delete_past, on_table, outage

WHAT = "UCP checkout table"
PURPOSE = "ucp-checkout"


class RowChanged(Exception):
    """The row changed under us (ETag mismatch) or vanished: someone else wrote it first."""


@dataclass(frozen=True)
class Row:
    key: str
    kind: str  # "checkout" or "answer"
    record: dict
    keep_until: float
    etag: str = ""
    due: float = 0.0  # when a queued row is next due (kept in the clear, so it can be queried)


class CheckoutStore:
    def __init__(self, table: TableClient, sealer: Sealer):
        self._table = table
        self._sealer = sealer

    def get(self, key: str, kind: str) -> Row | None:
        try:
            entity = self._table.get_entity(key, kind)
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        return self._row(entity)

    def rows(self, key: str, limit: int = 100, due_by: float | None = None) -> list[Row]:
        """Up to `limit` rows of one partition (one query); with `due_by`, only those due by then."""
        query, parameters = "PartitionKey eq @key", dict[str, object](key=key)
        if due_by is not None:
            query, parameters = query + " and Due le @now", {**parameters, "now": float(due_by)}
        try:
            found = self._table.query_entities(query, parameters=parameters, results_per_page=limit)
            entities = list(next(found.by_page(), []))
        except ResourceNotFoundError:
            return []
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        return [self._row(entity) for entity in entities[:limit]]

    def create(self, row: Row) -> Row | None:
        """The row as written, or None when a row with its keys exists."""
        try:
            meta = on_table(self._table, WHAT, lambda: self._table.create_entity(self._entity(row)))
        except ResourceExistsError:
            return None
        except ResourceNotFoundError as exc:
            raise outage(exc, WHAT) from exc
        return replace(row, etag=meta["etag"])

    def replace(self, row: Row) -> Row:
        """Write `row` over the one read with its ETag; RowChanged if that one is not there now."""
        try:
            meta = self._table.update_entity(
                self._entity(row),
                mode=UpdateMode.REPLACE,
                etag=row.etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except (ResourceModifiedError, ResourceNotFoundError):
            raise RowChanged(row.kind) from None
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        return replace(row, etag=meta["etag"])

    def delete(self, row: Row) -> None:
        """Delete the row read with its ETag; one already gone is fine, one rewritten is RowChanged."""
        try:
            self._table.delete_entity(
                row.key, row.kind, etag=row.etag, match_condition=MatchConditions.IfNotModified
            )
        except ResourceModifiedError:
            raise RowChanged(row.kind) from None
        except AzureError as exc:
            raise outage(exc, WHAT) from exc

    def reap(self, now: float) -> int:
        """Delete every row whose KeepUntil has passed; the number deleted."""
        return delete_past(self._table, WHAT, "KeepUntil", now)

    def _entity(self, row: Row) -> dict:
        return {
            "PartitionKey": row.key,
            "RowKey": row.kind,
            "Sealed": self._sealer.seal(row.record),
            "KeepUntil": float(row.keep_until),
            "Due": float(row.due),
        }

    def _row(self, entity) -> Row:
        try:
            record = self._sealer.open(entity["Sealed"])
            return Row(
                entity["PartitionKey"],
                entity["RowKey"],
                record,
                float(entity["KeepUntil"]),
                entity.metadata["etag"],
                float(entity.get("Due", 0.0)),
            )
        except (Unreadable, KeyError, TypeError, ValueError) as exc:
            # Sealed under another secret, or by another version: an outage (503), never a crash.
            raise StorageOutage(f"{WHAT} holds a row this store cannot read ({type(exc).__name__})") from None
