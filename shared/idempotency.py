"""The idempotency store: idempotency key (as a keyed hash) → the receipt first returned for it.

`IdempotencyStore` is the interface the purchase flow talks to; `TableIdempotencyStore` is the
Azure Table adapter. Vendor errors stop here: a conditional answer becomes a return value, an
outage becomes `StoreUnavailable` so the flow can fail open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient

from shared.errors import StoreUnavailable
from shared.storage import create_table, is_missing_table, outage


@dataclass(frozen=True)
class IdempotencyRecord:
    key_hash: str
    receipt_id: str
    receipt_sha256: str
    created_at: str


class IdempotencyStore(Protocol):
    def get(self, key_hash: str) -> IdempotencyRecord | None: ...

    def put(self, record: IdempotencyRecord) -> bool:
        """Record a completed purchase; False when the key already had a record (first wins)."""
        ...


class TableIdempotencyStore:
    """One entity per key: PartitionKey and RowKey are both the key's keyed hash."""

    def __init__(self, table: TableClient):
        self._table = table

    def get(self, key_hash: str) -> IdempotencyRecord | None:
        try:
            entity = self._table.get_entity(key_hash, key_hash)
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise outage(exc, "idempotency table") from exc
        return IdempotencyRecord(
            key_hash=key_hash,
            receipt_id=entity["ReceiptId"],
            receipt_sha256=entity["ReceiptSha256"],
            created_at=entity["CreatedAt"],
        )

    def put(self, record: IdempotencyRecord) -> bool:
        entity = {
            "PartitionKey": record.key_hash,
            "RowKey": record.key_hash,
            "ReceiptId": record.receipt_id,
            "ReceiptSha256": record.receipt_sha256,
            "CreatedAt": record.created_at,
        }
        for _ in range(2):
            try:
                self._table.create_entity(entity)
                return True
            except ResourceExistsError:
                return False
            except ResourceNotFoundError as exc:
                if not is_missing_table(exc):
                    raise outage(exc, "idempotency table") from exc
                create_table(self._table)
            except AzureError as exc:
                raise outage(exc, "idempotency table") from exc
        raise StoreUnavailable("idempotency table could not be created")
