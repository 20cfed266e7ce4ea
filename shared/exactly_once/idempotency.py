"""Exactly-once operations per idempotency key: a claim in a shared store, with a lease and
recovery points, that every function instance respects.

`begin` says what a request with a key may do (replay, wait, refuse, resume, or take the
`Vacant` key with `take`); every change after the first is conditional on the claim's ETag, and a
completed claim carries its result's bytes up to `CARRY_LIMIT`. It knows nothing of the operation
and meets no vendor error: the store answers a claim or `None`, `ClaimLost` or `StorageOutage`.
docs/idempotency.md#the-executor has the state machine.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from shared.config.errors import ReceiptUnavailable, StorageOutage
from shared.seams.claims import Claim, ClaimLost

PROCESSING = "processing"
COMPLETED = "completed"
MAX_RETRY_AFTER = 5
# Azure Table holds a string property of up to 32,768 UTF-16 units (64 KiB), and the claim's
# progress stores the receipt as an escaped JSON string next to the checks, where one character
# can take up to six. A receipt is about 3 KB, 4 at most from inputs; one larger (a catalog title
# of many KB, say) stays off the claim, and its replay reads it from Blob, one call more.
CARRY_LIMIT = 24_000  # characters of the receipt as the claim stores it
RESULT = "receipt"  # the progress entry that carries the final result's bytes


def carried(body: bytes) -> bool:
    """Whether a receipt rides on its claim (see `CARRY_LIMIT`)."""
    return len(json.dumps(body.decode())) <= CARRY_LIMIT


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ResultArchive(Protocol):
    """Where an operation's final result is kept for good (the receipts' Blob store, for the
    purchase): a replay of a claim that does not carry its result reads it there."""

    def read(self, result_id: str) -> bytes | None: ...


class IdempotencyStore(Protocol):
    def get(self, key_hash: str) -> Claim | None: ...

    def create(self, claim: Claim) -> Claim | None:
        """Insert a new claim; None when the key already has one."""
        ...

    def update(self, claim: Claim) -> Claim:
        """Replace the claim if its ETag still matches; raises ClaimLost otherwise."""
        ...

    def delete(self, claim: Claim) -> None:
        """Delete the claim if its ETag still matches; raises ClaimLost otherwise."""
        ...

    def reap(self, now: float) -> int:
        """Delete every claim whose `expires_at` has passed (ETag-conditionally); returns the count."""
        ...

    def scoping_horizon(self, now: float, window: float) -> float:
        """Until when a claim written before keys were scoped to the buyer may still matter.
        Written once, by the first call: `now + window` when the store holds claims then, 0
        when it holds none (a new store has no such claim to look for)."""
        ...


@dataclass(frozen=True)
class Replay:
    body: bytes


@dataclass(frozen=True)
class InProgress:
    retry_after: int


@dataclass(frozen=True)
class Mismatch:
    """The key was used with a different request."""


@dataclass(frozen=True)
class Claimed:
    claim: Claim
    resumed: bool


@dataclass(frozen=True)
class Vacant:
    """No live claim: the caller may `take` the key. `etag` is that of an expired claim to replace."""

    key_hash: str
    etag: str = ""


Begin = Replay | InProgress | Mismatch | Claimed | Vacant


class IdempotencyHandler:
    def __init__(
        self,
        store: IdempotencyStore,
        receipts: ResultArchive,
        *,
        lease_seconds: int,
        ttl_seconds: int,
        clock: Callable[[], float] = time.time,
    ):
        self._store = store
        self._receipts = receipts
        self._lease = lease_seconds
        self._ttl = ttl_seconds
        self._clock = clock
        self._legacy_until: float | None = None  # written once in the store, so safe to keep

    def begin(self, key_hash: str, fingerprint: str, *, legacy_hash: str | None = None) -> Begin:
        """Say what a request with this key may do. `legacy_hash` names the key as claims written
        before keys were scoped to the buyer stored it: such a claim, while it lives, still
        replays or resumes. Raises StorageOutage when the store is down."""
        for _ in range(5):
            now = self._clock()
            claim = self._store.get(key_hash)
            if (claim is None or claim.expires_at <= now) and legacy_hash and self._legacy_alive(now):
                legacy = self._store.get(legacy_hash)
                if legacy is not None and legacy.expires_at > now and legacy.fingerprint == fingerprint:
                    claim = legacy  # only the same buyer's same request: nothing to learn for others
            if claim is None:
                return Vacant(key_hash)
            if claim.expires_at <= now:
                return Vacant(key_hash, claim.etag)
            if claim.fingerprint != fingerprint:
                return Mismatch()
            if claim.state == COMPLETED:
                return Replay(self._replay(claim))
            if claim.locked_until > now:
                return InProgress(min(MAX_RETRY_AFTER, max(1, math.ceil(claim.locked_until - now))))
            outcome = self._take(claim, self._leased(claim, now), True)
            if outcome is not None:
                return outcome
        return InProgress(1)

    def _legacy_alive(self, now: float) -> bool:
        """Whether a claim from before scoping may still live: a store's first look writes the
        horizon (twice a claim's lifetime, so a claim resumed once near its end is covered), and
        after it no fresh key pays the extra read. Each instance reads it once."""
        if self._legacy_until is None:
            self._legacy_until = self._store.scoping_horizon(now, 2 * (self._ttl + self._lease))
        return now < self._legacy_until

    def take(self, vacant: Vacant, fingerprint: str, result_id: str, progress: dict) -> Claimed | None:
        """Claim a vacant key with the progress made before it (the guards taken); None when
        another request took it first. Raises StorageOutage when the store is down."""
        fresh = self._fresh(vacant.key_hash, fingerprint, result_id, self._clock(), progress)
        if vacant.etag:
            taken = self._take(replace(fresh, etag=vacant.etag), fresh, False)
        else:
            created = self._store.create(fresh)
            taken = Claimed(created, resumed=False) if created is not None else None
        return taken or self._own(vacant.key_hash, result_id)

    def _own(self, key_hash: str, result_id: str) -> Claimed | None:
        """After a write that seemed to lose: our own write may have landed with its answer lost
        (the SDK retried it and met itself). A claim with our receipt id is ours."""
        claim = self._store.get(key_hash)
        if claim is not None and claim.result_id == result_id:
            return Claimed(claim, resumed=False)
        return None

    def checkpoint(self, claim: Claim, progress: dict) -> Claim:
        """Record a recovery point and renew the lease. Raises ClaimLost or StorageOutage."""
        return self._store.update(replace(self._leased(claim, self._clock()), progress=progress))

    def complete(self, claim: Claim, body: bytes, *, not_after: float | None = None) -> Claim:
        """Mark the key completed; it replays for the TTL, but never past `not_after` (the
        download token's expiry: a replay must not hand out a receipt for a dead link)."""
        now = self._clock()
        expires = now + self._ttl if not_after is None else min(now + self._ttl, not_after)
        progress = {k: v for k, v in claim.progress.items() if k != RESULT}
        if carried(body):
            progress[RESULT] = body.decode()
        done = replace(
            claim,
            state=COMPLETED,
            progress=progress,
            result_sha256=sha256(body),
            locked_until=now,
            expires_at=expires,
        )
        return self._store.update(done)

    def release(self, claim: Claim, *, keep_progress: bool) -> bool:
        """Let the next request run: delete the claim, or, when an effect may already have left
        (an email whose answer never came), keep its recovery points and end the lease now.
        False when that did not happen (the store did not answer, or another request holds
        the claim): the claim then lives on until its lease ends."""
        try:
            if keep_progress:
                now = self._clock()
                self._store.update(replace(claim, locked_until=now, expires_at=now + self._ttl))
            else:
                self._store.delete(claim)
        except (ClaimLost, StorageOutage):
            return False
        return True

    def reap(self) -> int:
        return self._store.reap(self._clock())

    def _fresh(self, key_hash: str, fingerprint: str, result_id: str, now: float, progress: dict) -> Claim:
        return Claim(
            key_hash=key_hash,
            state=PROCESSING,
            fingerprint=fingerprint,
            result_id=result_id,
            locked_until=now + self._lease,
            expires_at=now + self._lease + self._ttl,
            created_at=now,
            progress=progress,
        )

    def _leased(self, claim: Claim, now: float) -> Claim:
        return replace(claim, locked_until=now + self._lease, expires_at=now + self._lease + self._ttl)

    def _take(self, old: Claim, new: Claim, resumed: bool) -> Claimed | None:
        try:
            return Claimed(self._store.update(replace(new, etag=old.etag)), resumed=resumed)
        except ClaimLost:
            return None

    def _replay(self, claim: Claim) -> bytes:
        """The completed key's receipt, verified; never a reason to run the purchase again. It
        rides on the claim; claims completed before it did are answered from Blob."""
        riding = claim.progress.get(RESULT)
        if isinstance(riding, str) and sha256(riding.encode()) == claim.result_sha256:
            return riding.encode()
        try:
            body = self._receipts.read(claim.result_id)
        except StorageOutage as exc:
            raise ReceiptUnavailable("receipt storage is unreachable; retry shortly", retry_after=5) from exc
        if body is None or sha256(body) != claim.result_sha256:
            raise ReceiptUnavailable("the stored receipt for this key is missing or altered")
        return body
