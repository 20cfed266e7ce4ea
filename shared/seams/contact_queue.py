"""The contact queue: buyers a purchase has promised to make Brevo contacts, waiting for the
drainer (`shared.purchase.contacts`).

Azure Storage queues `{prefix}-0` to `{prefix}-{N-1}`, each message put on one at random, and
`{prefix}-poison` for the messages that keep failing. A message is the buyer's address and name
sealed (`shared.config.sealing`), never expires, and comes back unless deleted, so nothing queued
is lost. Outages raise `StorageOutage`; a missing queue is created and the call made once more.
docs/configuration.md#the-contact-queues has the rest.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.core.pipeline.transport import HttpTransport
from azure.storage.queue import QueueClient, QueueMessage

from shared.config.errors import StorageOutage
from shared.config.sealing import Sealer, Unreadable
from shared.seams.storage import Account, is_gone_message, is_missing_queue, outage, queue_client

WHAT = "contact queue"
PURPOSE = "contact-queue"  # what the sealer binds a message to
T = TypeVar("T")


@dataclass(frozen=True)
class Contact:
    email: str
    name: str


@dataclass(frozen=True)
class Waiting:
    """A received message, invisible to other drainers until its visibility timeout ends.
    `contact` is None when the message cannot be read; `problem` then says why."""

    shard: int
    message_id: str
    pop_receipt: str
    dequeue_count: int
    text: str
    contact: Contact | None
    problem: str = ""


@dataclass(frozen=True)
class Backlog:
    """How far behind the drainer is: messages waiting (Azure's approximate count), the age in
    seconds of the oldest one visible (None when none is), and messages in the poison queue."""

    waiting: int
    oldest_seconds: float | None
    poisoned: int

    def as_dict(self) -> dict:
        oldest = None if self.oldest_seconds is None else round(self.oldest_seconds, 1)
        return {"waiting": self.waiting, "oldest_seconds": oldest, "poisoned": self.poisoned}


def queue_names(prefix: str, shards: int) -> tuple[list[str], str]:
    """The shards' names and the poison queue's, as the settings and the Bicep name them."""
    return [f"{prefix}-{shard}" for shard in range(shards)], f"{prefix}-poison"


def open_queue(
    account: str | Account,
    prefix: str,
    shards: int,
    secret: str,
    timeout: float,
    transport: HttpTransport | None = None,
) -> ContactQueue:
    """The contact queue in this storage account, its messages sealed under `secret`."""
    names, poison = queue_names(prefix, shards)
    return ContactQueue(
        [queue_client(account, name, timeout, transport) for name in names],
        queue_client(account, poison, timeout, transport),
        Sealer(secret, PURPOSE),
    )


class ContactQueue:
    def __init__(
        self,
        shards: Sequence[QueueClient],
        poison: QueueClient,
        sealer: Sealer,
        clock: Callable[[], float] = time.time,
    ):
        if not shards:
            raise ValueError("the contact queue needs at least one shard")
        self._shards = list(shards)
        self._poison = poison
        self._sealer = sealer
        self._clock = clock

    @property
    def shard_count(self) -> int:
        return len(self._shards)

    @property
    def poison_name(self) -> str:
        return self._poison.queue_name

    def check_readable(self) -> None:
        """Raise NotConfigured when no message could be opened (the hash secret is not set)."""
        self._sealer.check()

    def enqueue(self, email: str, name: str) -> None:
        """Put the buyer on a random shard, sealed, never to expire. Raises StorageOutage."""
        text = self._sealer.seal({"email": email, "name": name})
        queue = random.choice(self._shards)
        self._call(queue, lambda: queue.send_message(text, time_to_live=-1))

    def receive(self, shard: int, count: int, visibility_seconds: int) -> list[Waiting]:
        """Up to `count` (at most 32) messages of one shard, each invisible for `visibility_seconds`."""
        queue = self._shards[shard]

        def one_page() -> list:  # one call: the pager would ask again after a short page
            pages = queue.receive_messages(messages_per_page=count, visibility_timeout=visibility_seconds)
            return list(next(pages.by_page(), []))

        return [self._read(shard, m) for m in self._call(queue, one_page)]

    def done(self, waiting: Waiting) -> None:
        """Delete a handled message. One already gone (its receipt outlived by a redelivery) is
        fine: whoever holds it now hands the contact over again, which changes nothing."""
        queue = self._shards[waiting.shard]
        try:
            queue.delete_message(waiting.message_id, waiting.pop_receipt)
        except AzureError as exc:
            if not is_gone_message(exc):
                raise outage(exc, WHAT) from exc

    def poison(self, waiting: Waiting) -> None:
        """Move a message that keeps failing to the poison queue, still sealed."""
        self._call(self._poison, lambda: self._poison.send_message(waiting.text, time_to_live=-1))
        self.done(waiting)

    def backlog(self) -> Backlog:
        """The backlog across the shards: two calls per shard and one for the poison queue."""
        waiting, oldest = 0, None
        now = self._clock()
        for queue in self._shards:
            waiting += self._count(queue)
            peeked = self._call(queue, functools.partial(_peek_one, queue))
            if peeked and isinstance(peeked[0].inserted_on, datetime):
                age = max(0.0, now - peeked[0].inserted_on.timestamp())
                oldest = age if oldest is None else max(oldest, age)
        return Backlog(waiting, oldest, self._count(self._poison))

    def _count(self, queue: QueueClient) -> int:
        properties = self._call(queue, queue.get_queue_properties)
        return int(properties.approximate_message_count or 0)

    def _read(self, shard: int, message) -> Waiting:
        text = message.content if isinstance(message.content, str) else ""
        contact, problem = None, ""
        try:
            record = self._sealer.open(text)
            email, name = record.get("email"), record.get("name", "")
            if isinstance(email, str) and email and isinstance(name, str):
                contact = Contact(email, name)
            else:
                problem = "a sealed message without an address"
        except Unreadable as exc:
            problem = str(exc)
        return Waiting(
            shard, message.id, message.pop_receipt, int(message.dequeue_count or 0), text, contact, problem
        )

    def _call(self, queue: QueueClient, operation: Callable[[], T]) -> T:
        """One queue operation; a missing queue is created and the operation run once more.
        A message that is gone reaches the caller as ResourceNotFoundError; anything else that
        goes wrong is an outage."""
        for _ in range(2):
            try:
                return operation()
            except ResourceNotFoundError as exc:
                if not is_missing_queue(exc):
                    raise
                _create(queue)
            except AzureError as exc:
                raise outage(exc, WHAT) from exc
        raise StorageOutage(f"{WHAT} could not be created")


def _create(queue: QueueClient) -> None:
    try:
        queue.create_queue()
    except ResourceExistsError:
        pass
    except AzureError as exc:
        raise outage(exc, WHAT) from exc


def _peek_one(queue: QueueClient) -> list[QueueMessage]:
    return list(queue.peek_messages(max_messages=1))
