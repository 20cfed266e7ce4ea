"""The contact drainer (shared/purchase/contacts.py) against Azurite's queues and the Brevo
sandbox, which enforces Brevo's rate limits: every queued buyer becomes exactly one contact,
an existing contact is never changed, and 429s, 5xx, timeouts and unreadable messages lose or
double nothing."""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
import requests
from azure.storage.queue import QueueClient

from devstack.ports import free_port
from devstack.services import Service, start_process
from shared.config.sealing import Sealer
from shared.purchase.contacts import FIRST_PAUSE_SECONDS, ContactDrainer
from shared.seams.brevo import BrevoClient
from shared.seams.contact_queue import PURPOSE, ContactQueue
from shared.seams.lease import TableLease
from shared.seams.storage import table_client
from tests.support import own_queue, unique_email

LIST_ID = 7
BREVO_TIMEOUT = 2


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture(scope="module")
def sandbox(logs) -> Iterator[Service]:
    """A Brevo sandbox of this module's own: its tests tighten the sandbox's limits and count its
    imports and refusals, which the session's dev hosts, draining their own queues into the
    session's sandbox meanwhile, would otherwise share."""
    port = free_port()
    log = logs / "sandbox-contacts.log"
    proc = start_process([sys.executable, "-m", "devstack.brevo_sandbox", "--port", str(port)], port, log)
    service = Service(proc, f"http://127.0.0.1:{port}", log)
    yield service
    service.stop()


@pytest.fixture
def brevo(sandbox):
    yield BrevoClient(requests.Session(), f"{sandbox.url}/v3", "unit-test-key", BREVO_TIMEOUT)
    requests.delete(f"{sandbox.url}/_sandbox/faults", timeout=10)
    requests.put(f"{sandbox.url}/_sandbox/limits", json={"tier": "general"}, timeout=10).raise_for_status()


@pytest.fixture
def parts(azurite, brevo):
    queue = own_queue(azurite)
    table = table_client(azurite, f"lease{uuid.uuid4().hex[:10]}", 5)
    clock = Clock()

    def drainer(list_id: int = LIST_ID, **options) -> ContactDrainer:
        lease = TableLease(table, "contact-drainer", 60)
        return ContactDrainer(queue, brevo, lease, list_id, visibility_seconds=1, clock=clock, **options)

    return queue, drainer, table, clock


def contacts(sandbox, email: str) -> list[dict]:
    return requests.get(f"{sandbox.url}/_sandbox/contacts", params={"email": email}, timeout=10).json()


def imports(sandbox) -> int:
    return len(requests.get(f"{sandbox.url}/_sandbox/imports", timeout=10).json())


def fault(sandbox, **fault) -> None:
    """A sandbox fault; `match` keeps it to this test's buyers, since a dev host of the same
    session may drain its own queue into the same sandbox meanwhile."""
    requests.post(f"{sandbox.url}/_sandbox/faults", json=fault, timeout=10).raise_for_status()


def refused(sandbox, family: str) -> int:
    limits = requests.get(f"{sandbox.url}/_sandbox/limits", timeout=10).json()
    return limits["families"][family]["refused"]


def buyers(queue: ContactQueue, count: int, tag: str) -> list[str]:
    emails = [unique_email(f"{tag}{n}") for n in range(count)]
    for n, email in enumerate(emails):
        queue.enqueue(email, f"Buyer {n}")
    return emails


def settled(queue: ContactQueue) -> bool:
    backlog = queue.backlog()
    return backlog.waiting == 0


def test_queued_buyers_become_contacts_in_the_list_with_one_import_call(sandbox, parts):
    queue, drainer, _, _ = parts
    emails = buyers(queue, 40, "batch")
    before = imports(sandbox)

    done = drainer().run()

    assert (done.handed, done.poisoned, done.stopped) == (40, 0, "")
    assert imports(sandbox) == before + 1
    for n, email in enumerate(emails):
        [contact] = contacts(sandbox, email)
        assert contact["listIds"] == [LIST_ID]
        assert contact["attributes"] == {"FIRSTNAME": f"Buyer {n}"}
    assert settled(queue)


def test_a_purchase_never_changes_a_contact_that_exists(sandbox, parts, brevo):
    queue, drainer, _, _ = parts
    owner = unique_email("owner")
    brevo.create_contact(owner, "The Owner")
    queue.enqueue(owner, "A Stranger")

    drainer().run()

    [contact] = contacts(sandbox, owner)
    assert contact["attributes"] == {"FIRSTNAME": "The Owner"}
    assert contact["listIds"] == [] and contact["modifications"] == 0


@pytest.mark.parametrize("list_id", [LIST_ID, 0], ids=["import", "one at a time"])
def test_buyers_queued_twice_become_one_contact(sandbox, parts, list_id):
    queue, drainer, _, _ = parts
    email = unique_email("twice")
    queue.enqueue(email, "First")
    queue.enqueue(email.upper(), "Second")  # a retry whose first answer was lost, in other case

    drainer(list_id).run()

    [contact] = contacts(sandbox, email)  # whichever was drained first: the queue keeps no order
    assert contact["attributes"] in ({"FIRSTNAME": "First"}, {"FIRSTNAME": "Second"})
    assert contact["modifications"] == 0
    assert settled(queue)


def test_without_a_list_each_buyer_is_created_alone_and_paced_inside_brevos_limit(sandbox, parts):
    queue, drainer, _, _ = parts
    requests.put(
        f"{sandbox.url}/_sandbox/limits", json={"limits": {"contacts": "2/s"}}, timeout=10
    ).raise_for_status()
    emails = buyers(queue, 7, "paced")
    refused_before = refused(sandbox, "contacts")

    done = drainer(0).run()

    assert done.handed == 7
    assert all(len(contacts(sandbox, email)) == 1 for email in emails)
    assert refused(sandbox, "contacts") == refused_before  # it read the headers: no 429 earned


def test_a_429_storm_is_waited_out_and_every_buyer_becomes_one_contact(sandbox, parts):
    queue, drainer, _, _ = parts
    emails = buyers(queue, 5, "storm")
    fault(sandbox, family="contacts", times=3)

    done = drainer().run()

    assert done.handed == 5 and done.stopped == ""
    assert all(len(contacts(sandbox, email)) == 1 for email in emails)


def test_a_5xx_stops_the_run_and_a_later_run_after_the_pause_delivers_each_buyer_once(sandbox, parts):
    queue, drainer, _, clock = parts
    emails = buyers(queue, 4, "outage")
    fault(sandbox, path="/v3/contacts/import", status=500, times=1, match=emails[0])

    first = drainer().run()
    paused = drainer().run()
    clock.offset += FIRST_PAUSE_SECONDS + 1
    time.sleep(1.2)  # the failed batch's messages come back after their visibility timeout
    later = drainer().run()

    assert (first.handed, first.failed) == (0, True) and "500" in first.stopped
    assert paused.handed == 0 and paused.stopped.startswith("paused")
    assert later.handed == 4
    assert all(len(contacts(sandbox, email)) == 1 for email in emails)


def test_an_import_brevo_took_after_the_drainer_gave_up_waiting_is_not_doubled(sandbox, parts):
    queue, drainer, _, clock = parts
    emails = buyers(queue, 3, "late")
    fault(sandbox, path="/v3/contacts/import", delay_seconds=BREVO_TIMEOUT + 1, times=1, match=emails[0])

    first = drainer().run()  # Brevo takes the import, but answers too late
    time.sleep(BREVO_TIMEOUT + 1.5)
    clock.offset += FIRST_PAUSE_SECONDS + 1
    again = drainer().run()

    assert first.handed == 0 and first.failed
    assert again.handed == 3
    for email in emails:
        [contact] = contacts(sandbox, email)
        assert contact["modifications"] == 0


def test_unreadable_and_overdelivered_messages_go_to_the_poison_queue_naming_no_address(
    azurite, sandbox, parts, caplog
):
    queue, drainer, _, _ = parts
    email = unique_email("readable")
    queue.enqueue(email, "")
    stranger = "not.sealed@example.org"
    queue.backlog()  # every shard exists
    QueueClient.from_connection_string(azurite, queue._shards[0].queue_name).send_message(stranger)

    with caplog.at_level(logging.ERROR, logger="storefront.contacts"):
        done = drainer().run()

    assert (done.handed, done.poisoned) == (1, 1)
    assert len(contacts(sandbox, email)) == 1 and contacts(sandbox, stranger) == []
    [line] = [r.getMessage() for r in caplog.records if r.name == "storefront.contacts"]
    assert "poison" in line and "@" not in line
    assert queue.backlog().poisoned == 1


def test_only_one_instance_drains_at_a_time(sandbox, parts):
    queue, drainer, table, _ = parts
    buyers(queue, 2, "lease")
    other = TableLease(table, "contact-drainer", 60)
    assert other.take() is not None

    while_held = drainer().run()
    other.release()
    after = drainer().run()

    assert while_held.handed == 0 and while_held.stopped == "another instance is draining"
    assert after.handed == 2


def test_a_refusal_of_the_whole_import_is_logged_once_and_the_buyers_wait(sandbox, parts, caplog):
    queue, drainer, _, _ = parts
    emails = buyers(queue, 2, "refused")
    fault(sandbox, path="/v3/contacts/import", status=400, times=1, match=emails[0])

    with caplog.at_level(logging.ERROR, logger="storefront.contacts"):
        done = drainer().run()

    assert done.handed == 0 and done.failed
    [line] = [r.getMessage() for r in caplog.records if r.name == "storefront.contacts"]
    assert line.startswith("Brevo refused the contact import (400") and "@" not in line
    assert all(contacts(sandbox, email) == [] for email in emails)
    assert queue.backlog().waiting == 2


def test_without_the_hash_secret_the_drainer_receives_nothing_so_no_buyer_is_poisoned(
    azurite, sandbox, parts, brevo, caplog
):
    queue, _, table, _ = parts
    email = unique_email("nosecret")
    queue.enqueue(email, "")
    blind = ContactQueue(queue._shards, queue._poison, Sealer("", PURPOSE))
    drainer = ContactDrainer(
        blind, brevo, TableLease(table, "contact-drainer", 60), LIST_ID, visibility_seconds=1
    )

    with caplog.at_level(logging.ERROR, logger="storefront.contacts"):
        for _ in range(3):
            assert drainer.run().stopped.startswith("STOREFRONT_HASH_SECRET is not set")

    [waiting] = [w for shard in range(queue.shard_count) for w in queue.receive(shard, 32, 30)]
    assert waiting.dequeue_count == 1 and waiting.contact.email == email  # never received before
    assert any("contacts wait in the queue" in r.getMessage() for r in caplog.records)
