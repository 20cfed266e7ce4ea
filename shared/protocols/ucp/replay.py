"""UCP's Idempotency-Key on the checkout operations that change state (shopping/checkout/rest.md
"Specific Header Requirements"; signatures.md "Replay Protection"): the first answer to a key is
kept for 48 hours and a retry with the same body gets its bytes again, without running anything;
the same key with another body is a 409; a key still being answered is a 409 with Retry-After;
when the keys cannot be read or written, nothing runs and the answer is 503 (fail closed).

A key belongs to its platform, its operation and the checkout it names, so two platforms, or two
checkouts cancelled with the same key, never share an answer. The body is matched by the SHA-256
of its raw bytes, as `Content-Digest` carries it. An answer of 5xx is not kept: the key is free
again. This is UCP's rule on UCP's routes; the store's own routes keep theirs (docs/errors.md).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace

from shared.config.errors import StorageOutage
from shared.config.hashing import Hasher
from shared.protocols.http import Answer
from shared.protocols.ucp.wire import protocol_error
from shared.seams.checkout_store import CheckoutStore, Row, RowChanged

log = logging.getLogger(__name__)

KEEP_SECONDS = 48 * 3600  # signatures.md: at least 24 hours, 48 recommended
MAX_KEY = 255
KIND = "answer"
TRANSIENT = (409, 429)  # answers that change once their Retry-After has passed: never kept
REPLAYED = "Idempotent-Replayed"


class _Refused(Exception):
    def __init__(self, answer: Answer):
        self.answer = answer


class Replays:
    def __init__(
        self,
        store: CheckoutStore,
        hasher: Hasher,
        *,
        lease_seconds: float,
        clock: Callable[[], float] = time.time,
    ):
        """`lease_seconds`: how long a key being answered is held before a retry may take it over
        (longer than an answer can take)."""
        self._store = store
        self._hasher = hasher
        self._lease = lease_seconds
        self._clock = clock

    def run(self, scope: str, key: str | None, body: bytes, execute: Callable[[], Answer]) -> Answer:
        """`execute`'s answer under `key` (the Idempotency-Key header, None when absent) within
        `scope` (platform, operation, checkout): run once, replayed after."""
        if key is None:
            return execute()
        if not key or len(key) > MAX_KEY or not key.isascii() or not key.isprintable():
            return protocol_error(
                400, "invalid_request", f"Idempotency-Key must be 1-{MAX_KEY} printable ASCII characters"
            )
        fingerprint = hashlib.sha256(body).hexdigest()
        try:
            held = self._begin(self._hasher.ucp_key(f"{scope}\x00{key}"), fingerprint)
        except _Refused as refused:
            return refused.answer
        except StorageOutage:
            return protocol_error(
                503,
                "idempotency_unavailable",
                "the store cannot read or keep Idempotency-Keys right now, so nothing was done; retry",
                retry_after=5,
            )
        try:
            answer = execute()
        except BaseException:
            self._release(held)  # the caller answers 500: a retry runs again, not a 409 for the lease
            raise
        self._finish(held, answer)
        return answer

    def _release(self, held: Row) -> None:
        try:
            self._store.delete(held)
        except (StorageOutage, RowChanged) as exc:
            log.warning("an Idempotency-Key could not be freed (%s)", type(exc).__name__)

    def _begin(self, row_key: str, fingerprint: str) -> Row:
        """The key's row, held for this request; raises _Refused with a replay or a 409."""
        now = self._clock()
        held = Row(
            row_key,
            KIND,
            {"state": "pending", "fingerprint": fingerprint, "locked_until": now + self._lease},
            keep_until=now + KEEP_SECONDS,
        )
        for _ in range(3):
            made = self._store.create(held)
            if made is not None:
                return made
            found = self._store.get(row_key, KIND)
            if found is None:
                continue  # reaped in between
            if found.keep_until > now:
                self._check(found, fingerprint, now)
            try:  # expired, or abandoned by a request that did not finish: this one takes it over
                return self._store.replace(replace(held, etag=found.etag))
            except RowChanged:
                continue
        raise StorageOutage("the Idempotency-Key row kept changing")

    def _check(self, found: Row, fingerprint: str, now: float) -> None:
        record = found.record
        if record.get("fingerprint") != fingerprint:
            raise _Refused(
                protocol_error(
                    409,
                    "idempotency_conflict",
                    "this Idempotency-Key was used with another request body; a new request needs a new key",
                )
            )
        if record.get("state") == "done":
            kept = base64.b64decode(record["body"])
            raise _Refused(Answer(int(record["status"]), kept, {**record["headers"], REPLAYED: "true"}))
        wait = float(record.get("locked_until", 0)) - now
        if wait > 0:
            raise _Refused(
                protocol_error(
                    409,
                    "request_in_progress",
                    "a request with this Idempotency-Key is still being answered; retry after a moment",
                    retry_after=max(1, math.ceil(wait)),
                )
            )

    def _finish(self, held: Row, answer: Answer) -> None:
        """Keep the answer, but one that says "not now" (a 409, a 429, a 5xx), which frees the
        key so that a retry after its Retry-After runs again. When that write fails, the key stays
        held until its lease ends; a retry then runs again, which the operations allow."""
        try:
            if answer.status >= 500 or answer.status in TRANSIENT:
                self._store.delete(held)
                return
            record = {
                **held.record,
                "state": "done",
                "status": answer.status,
                "body": base64.b64encode(answer.body).decode(),
                "headers": dict(answer.headers),
            }
            self._store.replace(replace(held, record=record))
        except (StorageOutage, RowChanged) as exc:
            log.warning("a UCP answer could not be kept for its Idempotency-Key (%s)", type(exc).__name__)
