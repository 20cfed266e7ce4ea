"""The exactly-once executor: runs one operation under an idempotency key, and knows nothing of
what the operation does.

    key → replay / in progress / another request / resume / vacant → guards (reservations) →
    claim taken with them → the operation's effects, saving its progress at each recovery point →
    the result on record → claim completed, carrying the result's bytes

Fail-closed: a keyed run is refused when the claim store is down, unless `fail_open`.
docs/idempotency.md#the-executor has the state machine, and links what an operation provides.
"""

from __future__ import annotations

import abc
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from shared.config.errors import (
    KeyInUse,
    KeyReused,
    LimitExceeded,
    StorageOutage,
    StorefrontError,
    StoreUnavailable,
)
from shared.exactly_once.idempotency import (
    RESULT,
    Claimed,
    IdempotencyHandler,
    InProgress,
    Mismatch,
    Replay,
    Vacant,
    carried,
)
from shared.seams.claims import Claim, ClaimLost

R = TypeVar("R")  # an operation's reservation


class Turn(enum.Enum):
    """What the executor tells an operation's caller at each turn (`Operation.say` words it): as
    the key is read, claimed or refused, or, for the last three, once a run has failed, naming
    what a retry with the key will do."""

    UNKEYED = "unkeyed"  # no key: a retry runs again
    VACANT = "vacant"  # the key is free; it is claimed once the guards pass
    CLAIMED = "claimed"  # the key is held; a retry replays this result
    RESUMED = "resumed"  # a dead holder's claim taken over; the run resumes from its progress
    IN_PROGRESS = "in_progress"  # another request holds the key (409)
    REUSED = "reused"  # the key was used with another request (422)
    STORE_DOWN = "store_down"  # the claim store is unreachable as the run starts (503, fail-closed)
    UNPROTECTED = "unprotected"  # the same, with fail_open: the run goes on without the claim
    CLAIM_UNCERTAIN = "claim_uncertain"  # the claim's write went unanswered (503)
    RACED = "raced"  # another request claimed the key first (409)
    TAKEN_OVER = "taken_over"  # the claim was taken over during the run (409)
    UNRECORDED = "unrecorded"  # the result could not be put on record (503)
    KEPT = "kept"  # failed after an effect may have left: the claim keeps its progress
    RELEASED = "released"  # failed before any effect: the key is free again
    HELD = "held"  # failed, and the release went unconfirmed: the claim lives until its lease ends


@dataclass(frozen=True)
class Key:
    """The claim's key as the store names it (a keyed hash, never the raw key), and the name a
    claim written before a change of naming carries (replayed or resumed while it lives)."""

    hash: str
    legacy_hash: str | None = None


@dataclass(frozen=True)
class Done:
    """The run's result bytes. `replayed`: answered from a completed claim; `recorded`: False only
    for an unkeyed run whose result no store would take (a keyed one is refused instead)."""

    body: bytes
    replayed: bool = False
    recorded: bool = True


class Run(Protocol):
    @property
    def keyed(self) -> bool:
        """Whether the run is under a key (False without one, or run unprotected)."""

    def reached(self, point: str) -> None:
        """Save the operation's progress on the claim: a recovery point it declared."""


class Operation(abc.ABC, Generic[R]):
    """One run of an operation under the executor, which calls these in the order the module's
    docstring draws (a replay calls only `fingerprint`). Six members are required; the hooks
    below them default to an operation with no quota, no progress and nothing to derive."""

    @property
    @abc.abstractmethod
    def result_id(self) -> str:
        """The id its result is issued under; a claim taken over brings its own (`hold`)."""

    @abc.abstractmethod
    def say(self, turn: Turn, result: str | None = None) -> str:
        """This turn in words for the caller (the message of a refusal at this turn), and, given
        a `result` (pass, fail, skipped or degraded), noted as how the key stands."""

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """The request's fingerprint: the same key with another request is refused."""

    @abc.abstractmethod
    def perform(self, run: Run) -> None:
        """The effects, each once: `run.reached(point)` saves the progress before the next."""

    @abc.abstractmethod
    def result(self) -> bytes | None:
        """The result bytes once issued."""

    @abc.abstractmethod
    def record(self) -> bytes | None:
        """Put the result on record: the bytes as on record (an earlier holder's may win), or
        None when no store would take it."""

    recovery_points: Sequence[str] = ()  # the names `Run.reached` accepts, in the order they come

    def guard(self) -> None:  # noqa: B027 - a hook: an operation with no checks or quota
        """Check the request and take the reservations (quota) it needs, before the claim; a
        taker holds those its predecessor took (they came back with the progress)."""

    def reservations(self) -> Sequence[R]:
        """The reservations taken so far (this run's, or a predecessor's once resumed)."""
        return ()

    def give_back(self, reservation: R) -> None:  # noqa: B027 - a hook
        """Return one reservation: the executor judged that the operation did not happen."""

    def reused(self) -> None:  # noqa: B027 - a hook
        """The key was used with another request: raise a more telling refusal, if any."""

    def hold(self, claim: Claim) -> None:  # noqa: B027 - a hook
        """The key is held under this claim: derive from it what a taker must derive alike."""

    def resume(self, progress: dict, result: bytes | None) -> None:  # noqa: B027 - a hook
        """Take over a dead holder's claim: the progress it saved, and its result if issued."""

    def progress(self) -> dict:
        """What a taker needs to resume (JSON; the executor adds the result)."""
        return {}

    def effects_may_have_left(self) -> bool:
        """Whether an effect that cannot be undone may have happened (an answer lost, say)."""
        return False

    def replay_until(self, claim: Claim) -> float | None:
        """The latest time a replay of the result still makes sense (None: the claim's TTL)."""
        return None


class ExactlyOnce:
    """Runs operations under claims held in one store; `fail_open` is the operator's choice to run
    a keyed operation without its claim when the store cannot be reached."""

    def __init__(
        self, claims: IdempotencyHandler, *, fail_open: bool = False, log: logging.Logger | None = None
    ):
        self._claims = claims
        self._fail_open = fail_open
        self._log = log or logging.getLogger("storefront.exactly_once")

    def run(self, operation: Operation[Any], key: Key | None) -> Done:
        """The operation's result, at most one run's effects per key. Raises the StorefrontError
        the run ended with, once the claim is released and the reservations settled."""
        held = _Held(self, operation)
        try:
            return held.run(key)
        except StorefrontError as exc:
            held.release(exc)
            raise


class _Held:
    """One run's hold on its key: the claim, or the vacancy it will take."""

    def __init__(self, executor: ExactlyOnce, operation: Operation[Any]):
        self._claims = executor._claims
        self._fail_open = executor._fail_open
        self._log = executor._log
        self._op = operation
        self._claim: Claim | None = None
        self._vacant: Vacant | None = None
        self._fingerprint = ""
        self._resumed = False
        self._passed = False  # the key was found free or held: a failure later says what a retry does
        self._uncertain = False  # a claim write whose answer was lost: the claim may exist
        self._given_back = False

    @property
    def keyed(self) -> bool:
        return self._claim is not None or self._vacant is not None

    def run(self, key: Key | None) -> Done:
        if key is None:
            self._say("skipped", Turn.UNKEYED)
        else:
            replay = self._begin(key)
            if replay is not None:
                return replay
        if self._op.result() is None:  # a taker whose predecessor issued the result records it
            self._op.guard()
            self._take()
            self._op.perform(self)
        return self._finish()

    def reached(self, point: str) -> None:
        """A recovery point: the progress saved on the claim, and the lease renewed. Losing the
        claim stops the run (409); a store outage does not: the lease is still ours."""
        if point not in self._op.recovery_points:
            raise ValueError(f"{point!r} is not one of the operation's recovery points")
        if self._claim is None:
            return
        try:
            self._claim = self._claims.checkpoint(self._claim, self._progress())
        except ClaimLost:
            self._claim = None
            raise KeyInUse(self._op.say(Turn.TAKEN_OVER), retry_after=1) from None
        except StorageOutage as exc:
            self._log.warning("recovery point not recorded (%s); the lease still holds the key", exc)

    def _begin(self, key: Key) -> Done | None:
        self._fingerprint = self._op.fingerprint()
        try:
            begun = self._claims.begin(key.hash, self._fingerprint, legacy_hash=key.legacy_hash)
        except StorageOutage as exc:
            self._store_down(exc)
            return None
        if isinstance(begun, Replay):
            return Done(begun.body, replayed=True)
        if isinstance(begun, InProgress):
            raise KeyInUse(self._say("fail", Turn.IN_PROGRESS), retry_after=begun.retry_after)
        if isinstance(begun, Mismatch):
            message = self._say("fail", Turn.REUSED)
            self._op.reused()
            raise KeyReused(message)
        if isinstance(begun, Vacant):
            self._vacant, self._passed = begun, True
            self._say("pass", Turn.VACANT)
            return None
        self._hold(begun)
        return None

    def _store_down(self, exc: StorageOutage) -> None:
        """The claim store is unreachable as a keyed run starts: refuse (503), unless the operator
        chose to run keys unprotected."""
        if self._fail_open:
            self._log.warning("idempotency store unreachable, proceeding without it: %s", exc)
            self._passed = False
            self._say("degraded", Turn.UNPROTECTED)
            return
        message = self._say("fail", Turn.STORE_DOWN)
        raise StoreUnavailable(message + "; retry shortly", retry_after=5) from None

    def _hold(self, claimed: Claimed) -> None:
        self._claim, self._vacant, self._passed = claimed.claim, None, True
        self._resumed = claimed.resumed
        self._op.hold(claimed.claim)
        if claimed.resumed:
            progress = dict(claimed.claim.progress)
            result = progress.pop(RESULT, None)
            self._op.resume(progress, result.encode() if isinstance(result, str) else None)
        self._say("pass", Turn.RESUMED if claimed.resumed else Turn.CLAIMED)

    def _take(self) -> None:
        """Claim the vacant key with the reservations just taken. Another request that took it
        meanwhile makes this one a 409 (the reservations are given back)."""
        if self._vacant is None:
            return
        try:
            claimed = self._claims.take(self._vacant, self._fingerprint, self._op.result_id, self._progress())
        except StorageOutage as exc:
            if self._fail_open:
                self._store_down(exc)
                self._vacant = None
                return
            # The claim, with these reservations on it, may have landed: keep them counted.
            self._uncertain, self._passed = True, False
            raise StoreUnavailable(self._say("fail", Turn.CLAIM_UNCERTAIN), retry_after=5) from None
        if claimed is None:
            self._give_back()
            self._passed = False
            raise KeyInUse(self._say("fail", Turn.RACED), retry_after=1)
        self._hold(claimed)

    def _progress(self) -> dict:
        progress = self._op.progress()
        result = self._op.result()
        if result is not None and carried(result):
            progress[RESULT] = result.decode()
        return progress

    def _finish(self) -> Done:
        """Put the result on record, then complete the claim. A keyed result that cannot be put
        on record is never answered (503: the retry gets the one result)."""
        body = self._op.record()
        if body is None:
            if self.keyed:
                raise StoreUnavailable(self._op.say(Turn.UNRECORDED), retry_after=5)
            return Done(self._op.result() or b"", recorded=False)
        if self._claim is not None:
            try:
                self._claims.complete(self._claim, body, not_after=self._op.replay_until(self._claim))
            except (ClaimLost, StorageOutage) as exc:
                self._log.warning("claim not completed (%s); a retry after the lease will finish it", exc)
        return Done(body)

    def release(self, exc: StorefrontError) -> None:
        """Let a retry run again: free the claim, and give the reservations back unless the caller
        caused the failure (bad input counts against the rate limit) or an effect may have left
        (a retry resumes without taking them again, so they stay, as they do while a claim that
        records them may live on). A taker's predecessor may have had an effect it never saved:
        such a claim is kept for the next taker, never deleted."""
        sent = self._op.effects_may_have_left() or self._resumed
        released = not self._uncertain
        if self._claim is not None:
            released = self._claims.release(self._claim, keep_progress=sent)
        if self.keyed and self._passed:
            self._say("pass", Turn.KEPT if sent else Turn.RELEASED if released else Turn.HELD)
        if not sent and released and (exc.status >= 500 or isinstance(exc, LimitExceeded)):
            self._give_back()

    def _give_back(self) -> None:
        if not self._given_back:
            self._given_back = True
            for reservation in self._op.reservations():
                self._op.give_back(reservation)

    def _say(self, result: str, turn: Turn) -> str:
        return self._op.say(turn, result)
