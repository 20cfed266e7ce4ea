"""The contact queue on Azurite: sealed messages spread over shards, received invisible, back
unless deleted, the poison queue, the backlog, and outages as StorageOutage."""

from __future__ import annotations

import time

import pytest
from azure.storage.queue import QueueClient

from devstack.ports import free_port
from devstack.run import storage_connection
from shared.config.errors import StorageOutage
from shared.seams.contact_queue import ContactQueue
from tests.support import own_queue, unique_email


@pytest.fixture
def queue(azurite) -> ContactQueue:
    return own_queue(azurite)


def raw(azurite: str, name: str) -> QueueClient:
    return QueueClient.from_connection_string(azurite, name)


def names(queue: ContactQueue) -> list[str]:
    return [q.queue_name for q in queue._shards]


def everything(queue: ContactQueue, visibility: int = 30) -> list:
    got = []
    for shard in range(queue.shard_count):
        while batch := queue.receive(shard, 32, visibility):
            got += batch
    return got


def test_a_queued_buyer_comes_back_as_the_same_contact_and_the_queue_holds_no_address(azurite, queue):
    email = unique_email("queued")

    queue.enqueue(email, "Ada")  # the shards did not exist: the first call creates them

    [waiting] = everything(queue)
    assert (waiting.contact.email, waiting.contact.name) == (email, "Ada")
    assert waiting.dequeue_count == 1
    stored = [m.content for name in names(queue) for m in raw(azurite, name).peek_messages(max_messages=32)]
    assert stored == [] or all(email.split("@")[0] not in text for text in stored)
    assert email.split("@")[0] not in waiting.text


def test_buyers_spread_over_the_shards(azurite, queue):
    for n in range(24):
        queue.enqueue(unique_email(f"spread{n}"), "")

    counts = [raw(azurite, name).get_queue_properties().approximate_message_count for name in names(queue)]

    assert sum(counts) == 24 and all(count > 0 for count in counts)


def test_a_message_not_deleted_comes_back_and_a_deleted_one_does_not(queue):
    kept, handled = unique_email("kept"), unique_email("handled")
    queue.enqueue(kept, "")
    queue.enqueue(handled, "")
    first = everything(queue, visibility=1)
    for waiting in first:
        if waiting.contact.email == handled:
            queue.done(waiting)

    time.sleep(1.5)
    again = everything(queue, visibility=30)

    assert [w.contact.email for w in again] == [kept]
    assert again[0].dequeue_count == 2
    queue.done(first[0] if first[0].contact.email == kept else first[1])  # a stale receipt: no error


def test_a_poisoned_message_moves_sealed_to_the_poison_queue(azurite, queue):
    queue.enqueue(unique_email("poison"), "")
    [waiting] = everything(queue)

    queue.poison(waiting)

    assert everything(queue) == []
    [moved] = raw(azurite, queue.poison_name).peek_messages()
    assert moved.content == waiting.text


def test_a_message_the_store_did_not_seal_is_received_as_unreadable(azurite, queue):
    queue.backlog()  # creates the shards
    raw(azurite, names(queue)[0]).send_message("ada@example.org")
    raw(azurite, names(queue)[1]).send_message("s1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")

    unreadable = [w for w in everything(queue) if w.contact is None]

    assert len(unreadable) == 2 and all(w.problem for w in unreadable)


def test_the_backlog_counts_waiting_and_poisoned_buyers_and_the_oldest_age(queue):
    assert queue.backlog().as_dict() == {"waiting": 0, "oldest_seconds": None, "poisoned": 0}
    for n in range(3):
        queue.enqueue(unique_email(f"backlog{n}"), "")
    time.sleep(1.1)
    [first, *_] = everything(queue)
    queue.poison(first)

    backlog = queue.backlog()

    assert backlog.poisoned == 1
    assert backlog.waiting == 2  # the two received ones are invisible yet still waiting
    assert backlog.oldest_seconds is None  # none visible now


@pytest.mark.services  # waits out a queue endpoint that never answers
def test_a_queue_that_does_not_answer_is_an_outage():
    nowhere = storage_connection(free_port(), free_port(), free_port())
    queue = own_queue(nowhere)

    with pytest.raises(StorageOutage):
        queue.enqueue(unique_email("down"), "")
    with pytest.raises(StorageOutage):
        queue.receive(0, 1, 30)
    with pytest.raises(StorageOutage):
        queue.backlog()
