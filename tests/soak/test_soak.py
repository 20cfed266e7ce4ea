"""`make soak` inside the suite: 30 s of keyed and unkeyed purchases over two dev hosts while Table,
Blob, the contact queue, Brevo (contacts storms included) and the hosts themselves fail on a seeded
schedule (soak/), one host killed while its drainer hands a batch to Brevo; then the contact queue
drained and every invariant checked. The seed is fixed, so a failure reproduces
(`SOAK_SEED=<seed> SOAK_SECONDS=30 make soak`); SOAK_SEED and SOAK_SECONDS choose another run.

The contact invariants are also held to made-up evidence here, so each is seen to fail where it
must: a soak that passes proves something only if its checks can fail."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from soak.agent import Answer, Journal, Order
from soak.checks import Evidence, check
from soak.contacts import OWNER_ATTRIBUTES, OWNER_LIST, Contacts, Drain
from soak.run import Config, run

pytestmark = pytest.mark.services  # starts processes or servers of its own

SEED = 1
CONTACT_INVARIANTS = (
    "every served buyer a contact",
    "the owner's contacts unchanged",
    "one contact per buyer, written once",
    "poison only from injected refusals",
)


def test_thirty_seconds_of_faults_over_two_hosts_break_no_invariant(tmp_path):
    config = replace(Config.from_env(dict(os.environ), seconds=30, seed=SEED), logs=tmp_path)

    outcome = run(config)

    assert outcome.ok, outcome.text()
    checked = {invariant.name: invariant.checked for invariant in outcome.invariants}
    assert all(checked[name] for name in CONTACT_INVARIANTS), outcome.text()


BUYER = Order("a1.o1@soak.example.org", "127.77.0.2", "k1", "Ada")
UNNAMED = Order("a2.o1.nokey@soak.example.org", "127.77.0.3", None)
OWNERS = Order("a0.o1.owner@soak.example.org", "127.77.0.4", "k0", "Grace Hopper")
REFUSABLE = Order("a3.o1.refusable.r@soak.example.org", "127.77.0.5", "k3")
OWNER_CONTACT = {"attributes": dict(OWNER_ATTRIBUTES), "listIds": [OWNER_LIST]}


def contact(email: str, attributes: dict, **extra) -> dict:
    return {
        "email": email,
        "attributes": attributes,
        "listIds": [2],
        "upserts": 1,
        "modifications": 0,
        **extra,
    }


def sound_contacts() -> dict[str, dict]:
    return {
        BUYER.email: contact(BUYER.email, {"FIRSTNAME": "Ada"}),
        UNNAMED.email: contact(UNNAMED.email, {}),
        OWNERS.email: contact(OWNERS.email, **OWNER_CONTACT),
    }


def contact_violations(
    found: dict, *, waiting: int = 0, poison: tuple[str, ...] = (), refusals: int = 0, health: bool = True
) -> dict[str, list[str]]:
    """The contact invariants' violations for these buyers, all answered 200, once the drain ended
    with `waiting` messages left (`health` False: health could not say)."""
    journal = Journal(started=0.0)
    for n, order in enumerate((BUYER, UNNAMED, OWNERS, REFUSABLE)):
        journal.order(order)
        receipt = {"receipt_id": f"rcpt_{n}", "issued_at": "2026-01-02T03:04:05Z", "buyer": {"id": f"h{n}"}}
        journal.record(Answer(order, "load", "http", 0, 1.0, 0.1, 200, receipt=json.dumps(receipt).encode()))
    backlog = {"waiting": waiting, "poisoned": len(poison)} if health else None
    contacts = Contacts(
        owner={OWNERS.email: OWNER_CONTACT},
        found=found,
        drain=Drain(1.0, 1, health and waiting == 0, backlog),
        poison=list(poison),
        imports=[],
        stats={},
        family={},
    )
    evidence = Evidence(
        journal=journal,
        settled={},
        emails=[],
        stored={},
        served={},
        ledger={},
        buyer_of={},
        ceiling_purchases=10,
        rate_limit=10,
        hours=1,
        refusals_injected=0,
        contacts=contacts,
        contact_refusals=refusals,
    )
    return {inv.name: inv.violations for inv in check(evidence) if inv.name in CONTACT_INVARIANTS}


def test_the_contact_checks_pass_when_every_served_buyer_is_a_contact_written_once():
    found = {**sound_contacts(), REFUSABLE.email: contact(REFUSABLE.email, {})}

    assert contact_violations(found) == dict.fromkeys(CONTACT_INVARIANTS, [])


def test_a_served_buyer_without_a_contact_is_a_violation_only_once_nothing_waits():
    drained = contact_violations(sound_contacts())
    still_queued = contact_violations(sound_contacts(), waiting=3)

    assert len(drained["every served buyer a contact"]) == 1
    assert REFUSABLE.email in drained["every served buyer a contact"][0]
    assert still_queued["every served buyer a contact"] == []


def test_a_contact_with_another_name_than_the_buyer_gave_is_a_violation():
    found = {**sound_contacts(), REFUSABLE.email: contact(REFUSABLE.email, {})}
    found[BUYER.email] = contact(BUYER.email, {"FIRSTNAME": "Grace Hopper"})

    assert len(contact_violations(found)["every served buyer a contact"]) == 1


def test_an_owners_contact_written_again_or_changed_is_a_violation():
    rewritten = sound_contacts()
    rewritten[OWNERS.email] = {**rewritten[OWNERS.email], "upserts": 2, "modifications": 1}
    relisted = sound_contacts()
    relisted[OWNERS.email] = {**relisted[OWNERS.email], "listIds": [OWNER_LIST, 2]}

    for found in (rewritten, relisted):
        violations = contact_violations(found, poison=(REFUSABLE.email,), refusals=1)
        assert len(violations["the owner's contacts unchanged"]) == 1


def test_a_buyers_contact_written_twice_or_nobody_asked_for_is_a_violation():
    found = sound_contacts()
    found[BUYER.email] = {**found[BUYER.email], "upserts": 2, "modifications": 1}
    found["stranger@soak.example.org"] = contact("stranger@soak.example.org", {})

    violations = contact_violations(found, poison=(REFUSABLE.email,), refusals=1)

    assert len(violations["one contact per buyer, written once"]) == 2


def test_only_buyers_whose_create_was_refused_may_be_in_the_poison_queue():
    refused = contact_violations(sound_contacts(), poison=(REFUSABLE.email,), refusals=1)
    unrefused = contact_violations(sound_contacts(), poison=(REFUSABLE.email,), refusals=0)
    without_buyer = {email: c for email, c in sound_contacts().items() if email != BUYER.email}
    wrong_buyer = contact_violations(without_buyer, poison=(BUYER.email,), refusals=1)
    unread = contact_violations(sound_contacts(), refusals=1, health=False)

    assert refused == dict.fromkeys(CONTACT_INVARIANTS, [])
    assert len(unrefused["poison only from injected refusals"]) == 1
    assert len(wrong_buyer["poison only from injected refusals"]) == 1
    assert not any(BUYER.email in line for line in wrong_buyer["every served buyer a contact"])
    assert len(unread["poison only from injected refusals"]) == 1
