"""An idempotency key's claim (`Claim`) and the Azure Table adapter that stores claims.

One entity per key; PartitionKey and RowKey are both the key's keyed hash, so no raw key is stored.
One more entity, `~scoping`, holds the time until which claims written before keys were scoped to
the buyer may still matter. Azure's conditional answers become the interface's: an existing entity
on insert → None, an ETag mismatch (412) on update or delete, or a vanished entity on update →
`ClaimLost` (deleting a vanished entity succeeds quietly, as the SDK ignores 404 there). Anything
else, including an entity this version cannot read, is an outage → `StorageOutage`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass, field, replace

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import TableClient, UpdateMode

from shared.config.errors import StorageOutage
from shared.seams.storage import delete_past, on_table, outage

WHAT = "idempotency table"
# The entity holding the scoping horizon (`scoping_horizon`): no key hash starts with "~".
SCOPING = "~scoping"


class ClaimLost(Exception):
    """The claim changed under us (ETag mismatch) or vanished: another request holds the key now."""


@dataclass(frozen=True)
class Claim:
    key_hash: str
    state: str
    fingerprint: str
    result_id: str  # stored as ReceiptId, as claims have always been
    locked_until: float
    expires_at: float
    progress: dict = field(default_factory=dict)
    result_sha256: str = ""  # stored as ReceiptSha256
    etag: str = ""
    created_at: float = 0.0

    def derived_uuid(self, namespace: uuid.UUID) -> str:
        """A UUID derived from the claim: an effect that carries it (an upstream's idempotency
        key) is recognised as a repeat when a taker of this claim does it again."""
        return str(uuid.uuid5(namespace, f"{self.key_hash}:{self.result_id}"))

    def derived_id(self, purpose: str) -> str:
        """A short id derived from the claim: whoever runs an effect for it, even a taker that
        never saw a recovery point, names the effect the same."""
        digest = hashlib.sha256(f"{purpose}\x00{self.key_hash}\x00{self.result_id}".encode()).digest()
        return base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()


class TableClaimStore:
    def __init__(self, table: TableClient):
        self._table = table

    def get(self, key_hash: str) -> Claim | None:
        try:
            entity = self._table.get_entity(key_hash, key_hash)
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        return _claim(entity)

    def create(self, claim: Claim) -> Claim | None:
        try:
            meta = on_table(self._table, WHAT, lambda: self._table.create_entity(_entity(claim)))
        except ResourceExistsError:
            return None
        except ResourceNotFoundError as exc:
            raise outage(exc, WHAT) from exc
        return _with_etag(claim, meta)

    def update(self, claim: Claim) -> Claim:
        try:
            meta = self._table.update_entity(
                _entity(claim),
                mode=UpdateMode.REPLACE,
                etag=claim.etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except (ResourceModifiedError, ResourceNotFoundError):
            raise ClaimLost(claim.key_hash) from None
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        return _with_etag(claim, meta)

    def delete(self, claim: Claim) -> None:
        try:
            self._table.delete_entity(
                claim.key_hash,
                claim.key_hash,
                etag=claim.etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except ResourceModifiedError:
            raise ClaimLost(claim.key_hash) from None
        except AzureError as exc:
            raise outage(exc, WHAT) from exc

    def reap(self, now: float) -> int:
        return delete_past(self._table, WHAT, "ExpiresAt", now)

    def scoping_horizon(self, now: float, window: float) -> float:
        for _ in range(2):
            try:
                return _until(self._table.get_entity(SCOPING, SCOPING))
            except ResourceNotFoundError:
                pass
            except AzureError as exc:
                raise outage(exc, WHAT) from exc
            until = now + window if self._holds_claims() else 0.0
            try:
                entity = {"PartitionKey": SCOPING, "RowKey": SCOPING, "Until": float(until)}
                on_table(self._table, WHAT, lambda: self._table.create_entity(entity))  # noqa: B023
            except ResourceExistsError:
                continue  # another instance wrote it first: theirs holds
            except ResourceNotFoundError as exc:
                raise outage(exc, WHAT) from exc
            return until
        raise StorageOutage(f"{WHAT}: scoping horizon unreadable")

    def _holds_claims(self) -> bool:
        try:
            found = self._table.query_entities(
                "PartitionKey ne @marker",
                parameters={"marker": SCOPING},
                select=["PartitionKey"],
                results_per_page=1,
            )
            return next(iter(found), None) is not None
        except ResourceNotFoundError:
            return False
        except AzureError as exc:
            raise outage(exc, WHAT) from exc


def _until(entity) -> float:
    try:
        return float(entity["Until"])
    except (KeyError, TypeError, ValueError) as exc:
        # Not written by this version: an outage (503, retried), never a crash.
        raise StorageOutage(f"{WHAT} holds an unreadable scoping horizon ({type(exc).__name__})") from None


def _entity(claim: Claim) -> dict:
    return {
        "PartitionKey": claim.key_hash,
        "RowKey": claim.key_hash,
        "State": claim.state,
        "Fingerprint": claim.fingerprint,
        "ReceiptId": claim.result_id,
        "LockedUntil": float(claim.locked_until),
        "ExpiresAt": float(claim.expires_at),
        "Progress": json.dumps(claim.progress, separators=(",", ":")),
        "ReceiptSha256": claim.result_sha256,
        "CreatedAt": float(claim.created_at),
    }


def _claim(entity) -> Claim:
    try:
        return _parse(entity)
    except (KeyError, TypeError, ValueError) as exc:
        # Not written by this version: treat like an outage (fail open, logged), never a crash.
        raise StorageOutage(f"{WHAT} holds an unreadable claim ({type(exc).__name__})") from None


def _parse(entity) -> Claim:
    return Claim(
        key_hash=entity["PartitionKey"],
        state=entity["State"],
        fingerprint=entity["Fingerprint"],
        result_id=entity["ReceiptId"],
        locked_until=float(entity["LockedUntil"]),
        expires_at=float(entity["ExpiresAt"]),
        progress=json.loads(entity.get("Progress") or "{}"),
        result_sha256=entity.get("ReceiptSha256", ""),
        created_at=float(entity.get("CreatedAt", 0.0)),
        etag=entity.metadata["etag"],
    )


def _with_etag(claim: Claim, meta: dict) -> Claim:
    return replace(claim, etag=meta["etag"])
