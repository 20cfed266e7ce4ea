"""The contact drainer: turns the buyers waiting in the contact queue into Brevo contacts, off the
purchase's path (the timer `drain_contacts` runs it).

Brevo's contacts limit is the account's, and a hundred times lower than its email limit, so one
drainer runs at a time across every instance (a `TableLease`) and spends few calls: one import per
`IMPORT_BATCH` buyers into `BREVO_CONTACT_LIST_ID`, else one paced create per buyer. Nothing is
lost or doubled, a failing Brevo gets a pause that doubles, and what cannot succeed goes to the
poison queue: docs/configuration.md#the-contact-queues, docs/deploying.md#brevos-limits-and-your-plan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from shared.config.errors import (
    NotConfigured,
    StorageOutage,
    StorefrontError,
    UpstreamError,
    UpstreamUnavailable,
)
from shared.seams.brevo import BrevoClient, Pace
from shared.seams.contact_queue import Contact, ContactQueue, Waiting
from shared.seams.lease import TableLease

log = logging.getLogger("storefront.contacts")

IMPORT_BATCH = 1000  # buyers per import call: about 100 KB of JSON, far under Brevo's 8 MB
SINGLE_BATCH = 32  # buyers received at a time when each is its own call
RECEIVE_MAX = 32  # Azure's most messages per receive
GATHER_SECONDS = 5.0  # a batch is handed over this soon after its first message, full or not
VISIBILITY_SECONDS = 60  # a received message is hidden this long, then comes back unless deleted
LEASE_SECONDS = 60
BUDGET_SECONDS = 240.0  # one run's work, inside the host's function timeout
MAX_DELIVERIES = 20
FIRST_PAUSE_SECONDS = 30
LONGEST_PAUSE_SECONDS = 900
DELETERS = 8
MIN_WAIT_SECONDS = 0.5  # after a 429, even when Brevo says its window resets at once


@dataclass
class Drained:
    """What one run did: contacts Brevo took, messages poisoned, and why it stopped early
    (`failed` when Brevo failed or refused; `resume_in` seconds when it asked to wait)."""

    handed: int = 0
    poisoned: int = 0
    stopped: str = ""
    failed: bool = False
    resume_in: float = 0.0


class ContactDrainer:
    def __init__(
        self,
        queue: ContactQueue,
        brevo: BrevoClient,
        lease: TableLease,
        list_id: int = 0,
        *,
        budget_seconds: float = BUDGET_SECONDS,
        visibility_seconds: int = VISIBILITY_SECONDS,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._queue, self._brevo, self._lease, self._list_id = queue, brevo, lease, list_id
        self._budget, self._visibility, self._clock, self._sleep = (
            budget_seconds,
            visibility_seconds,
            clock,
            sleep,
        )

    def run(self) -> Drained:
        """Drain until the queue is empty or the budget is spent; nothing when another instance
        holds the lease or Brevo asked for a pause. A storage outage ends the run early, saying so:
        the buyers wait in the queue for the next one."""
        done = Drained()
        try:  # before any message is received: a message received unread counts a delivery
            self._queue.check_readable()
        except NotConfigured as exc:
            done.stopped = exc.message
            log.error("contacts wait in the queue: %s", exc.message)
            return done
        try:
            state = self._lease.take()
        except StorageOutage as exc:
            done.stopped = f"the lease table is unreachable ({exc})"
            return done
        if state is None:
            done.stopped = "another instance is draining"
            return done
        failures = int(state.get("Failures", 0) or 0)
        if float(state.get("PausedUntil", 0) or 0) > self._clock():
            self._lease.release(state)
            done.stopped = "paused after a failure or a rate limit"
            return done
        deadline = self._clock() + self._budget
        with ThreadPoolExecutor(DELETERS, thread_name_prefix="contact-drain") as pool:
            try:
                self._drain(done, deadline, pool)
            except StorageOutage as exc:
                done.stopped = f"the contact queue is unreachable ({exc})"
        failures = failures + 1 if done.failed else (0 if done.handed else failures)
        paused_until = _pause_until(done, failures, self._clock())
        self._lease.release({"PausedUntil": paused_until, "Failures": failures})
        return done

    def _drain(self, done: Drained, deadline: float, pool: ThreadPoolExecutor) -> None:
        size = IMPORT_BATCH if self._list_id else SINGLE_BATCH
        while self._clock() < deadline:
            received = self._gather(size)
            if not received:
                return
            batch = self._usable(received, done)
            if batch:
                done.handed += self._hand_over(batch, done, deadline, pool)
            if done.stopped:
                return
            if not self._lease.renew({"PausedUntil": 0, "Failures": 0}):
                done.stopped = "lost the lease"
                return
        done.stopped = "out of time"

    def _gather(self, size: int) -> list[Waiting]:
        """Up to `size` messages, taken round the shards until they fill it, all are empty, or
        `GATHER_SECONDS` have passed: buyers arriving steadily never keep a batch open past its
        messages' visibility or the lease."""
        batch: list[Waiting] = []
        until = self._clock() + GATHER_SECONDS
        while len(batch) < size and self._clock() < until:
            before = len(batch)
            for shard in range(self._queue.shard_count):
                want = min(RECEIVE_MAX, size - len(batch))
                if want <= 0:
                    break
                batch += self._queue.receive(shard, want, self._visibility)
            if len(batch) == before:
                break
        return batch

    def _usable(self, batch: list[Waiting], done: Drained) -> list[Waiting]:
        """The batch without the messages that go to the poison queue now."""
        keep = []
        for waiting in batch:
            if waiting.contact is None:
                self._poison(waiting, f"unreadable ({waiting.problem})", done)
            elif waiting.dequeue_count > MAX_DELIVERIES:
                self._poison(waiting, f"delivered {waiting.dequeue_count} times without success", done)
            else:
                keep.append(waiting)
        return keep

    def _hand_over(
        self, batch: list[Waiting], done: Drained, deadline: float, pool: ThreadPoolExecutor
    ) -> int:
        if self._list_id:
            return self._import(batch, done, deadline, pool)
        handed = 0
        for waiting in batch:
            if self._clock() >= deadline:
                done.stopped = "out of time"
                break
            if not self._create(waiting, done, deadline):
                break
            self._queue.done(waiting)
            handed += 1
        return handed

    def _import(self, batch: list[Waiting], done: Drained, deadline: float, pool: ThreadPoolExecutor) -> int:
        """The batch in one import call; its messages deleted once Brevo took it."""
        contacts: dict[str, tuple[str, str]] = {}
        for waiting in batch:  # one entry per address: the first buyer's name, as a create would keep
            contact = _readable(waiting)
            contacts.setdefault(contact.email.lower(), (contact.email, contact.name))
        while True:
            try:
                pace = self._brevo.import_contacts(list(contacts.values()), self._list_id)
            except StorefrontError as exc:
                if self._wait_out(exc, deadline):
                    continue
                _stop(exc, done, "import")
                return 0
            list(pool.map(self._queue.done, batch))
            self._keep_pace(pace, deadline)
            return len(batch)

    def _create(self, waiting: Waiting, done: Drained, deadline: float) -> bool:
        """One buyer as a contact: True once the message is settled (Brevo has the contact, or
        refused this address and the message went to the poison queue)."""
        while True:
            try:
                contact = _readable(waiting)
                _, pace = self._brevo.create_contact(contact.email, contact.name)
            except StorefrontError as exc:
                if self._wait_out(exc, deadline):
                    continue
                if (
                    isinstance(exc, UpstreamError) and exc.upstream_status == 400
                ):  # this address, not the account
                    self._poison(waiting, f"refused by Brevo (400 {exc.upstream_code})", done)
                    return True
                _stop(exc, done, "create")
                return False
            self._keep_pace(pace, deadline)
            return True

    def _wait_out(self, exc: StorefrontError, deadline: float) -> bool:
        """After a 429: wait for Brevo's window to reset and say to try again, when it resets
        before the deadline."""
        pace = getattr(exc, "pace", None)
        if getattr(exc, "upstream_status", 0) != 429 or not isinstance(pace, Pace):
            return False
        wait = max(pace.reset if pace.reset is not None else 1.0, MIN_WAIT_SECONDS)
        if self._clock() + wait >= deadline:
            return False
        self._sleep(wait)
        return True

    def _keep_pace(self, pace: Pace, deadline: float) -> None:
        """Wait out a window Brevo says is spent, rather than earn a 429."""
        if pace.remaining == 0 and pace.reset:
            self._sleep(max(0.0, min(pace.reset, deadline - self._clock())))

    def _poison(self, waiting: Waiting, reason: str, done: Drained) -> None:
        self._queue.poison(waiting)
        done.poisoned += 1
        log.error(
            "a contact message moved to the poison queue %s: %s (message %s)",
            self._queue.poison_name,
            reason,
            waiting.message_id,
        )


def _stop(exc: StorefrontError, done: Drained, what: str) -> None:
    """Say why Brevo ended the run: a 429 past the run's time (resume after its reset), or a
    failure (logged: a refusal is the operator's to fix, an outage passes)."""
    status = getattr(exc, "upstream_status", 0)
    code = getattr(exc, "upstream_code", "") or exc.code
    if status == 429:
        pace = getattr(exc, "pace", None)
        done.stopped = "rate limited past the run's time"
        done.resume_in = pace.reset if isinstance(pace, Pace) and pace.reset else 1.0
        return
    done.failed = True
    if isinstance(exc, UpstreamUnavailable):
        done.stopped = f"Brevo unavailable for the contact {what} ({status or 'no answer'} {code})"
        log.warning("%s; contacts wait in the queue", done.stopped)
    else:
        done.stopped = f"Brevo refused the contact {what} ({status} {code})"
        log.error("%s; contacts wait in the queue until it is fixed", done.stopped)


def _pause_until(done: Drained, failures: int, now: float) -> float:
    """When the next run may call Brevo: at once, after a 429's reset, or after a pause that
    doubles with each failure in a row."""
    if done.resume_in:
        return now + done.resume_in
    if not done.failed:
        return 0.0
    return now + min(LONGEST_PAUSE_SECONDS, FIRST_PAUSE_SECONDS * 2 ** (failures - 1))


def _readable(waiting: Waiting) -> Contact:
    """The buyer a message holds: `_usable` sent every unreadable message to the poison queue."""
    if waiting.contact is None:
        raise ValueError(f"message {waiting.message_id} is unreadable and cannot be handed over")
    return waiting.contact
