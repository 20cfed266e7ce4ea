"""The contact queue's side of the soak: the store owner's contacts, made in the sandbox before the
load for addresses the agents will buy for; the queue drained once the faults stop; and what the
sandbox, the queue and its poison queue hold then.

Draining: the drainer runs every 10 s on each host, and the soak runs it now and then through the
admin API until `/api/health` says no message waits (Azure's count, which health reports, includes
the messages a run holds invisible, so 0 also means none is in flight). A drainer killed mid-run
holds the lease and its messages for a minute, and one that failed waits out a pause, so this can
take a minute or two.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.queue import QueueClient

from shared.config.sealing import Sealer, Unreadable
from shared.seams.contact_queue import PURPOSE, queue_names
from soak.stack import Stack, run_function

OWNER_ATTRIBUTES = {"FIRSTNAME": "Kept", "LASTNAME": "As The Owner Made It", "SOURCE": "store owner"}
OWNER_LIST = 7  # not the list the drainer imports into
HEALTH_REUSE_SECONDS = 2.0  # health's probe result is reused this long
PEEK_MAX = 32  # Azure's most messages per peek


@dataclass
class Drain:
    """How the queue's draining went once the faults stopped."""

    seconds: float  # from the first run asked until the queue was empty, or until given up
    runs: int  # drainer runs the soak asked for
    done: bool  # health said 0 waiting
    backlog: dict | None  # health's last `contacts`
    outcomes: list[str] = field(default_factory=list)  # what each admin call answered, when not "ran"


@dataclass
class Contacts:
    """What the contact side holds at the end of the run."""

    owner: dict[str, dict]  # address → the owner's contact as made before the load
    found: dict[str, dict]  # address → the sandbox's contact, for every address of the run
    drain: Drain
    poison: list[str]  # addresses in the poison queue ("unreadable: ..." for one that cannot be opened)
    imports: list[dict]  # the sandbox's import reports
    stats: dict  # the sandbox's counters
    family: dict  # the contacts family's rate-limit totals

    @property
    def waiting(self) -> int | None:
        return None if self.drain.backlog is None else self.drain.backlog.get("waiting")

    @property
    def poisoned(self) -> int | None:
        return None if self.drain.backlog is None else self.drain.backlog.get("poisoned")


def make_owner_contacts(sandbox: str, api_key: str, emails: list[str]) -> dict[str, dict]:
    """The store owner's contacts, through Brevo's own API as the owner's tools would make them
    (waiting out the contacts limit, which the sandbox holds at Brevo's general tier)."""
    made = {}
    for email in emails:
        body = {"email": email, "attributes": dict(OWNER_ATTRIBUTES), "listIds": [OWNER_LIST]}
        while True:
            response = requests.post(
                f"{sandbox}/v3/contacts", json=body, headers={"api-key": api_key}, timeout=10
            )
            if response.status_code != 429:
                break
            time.sleep(float(response.headers.get("x-sib-ratelimit-reset", "1")))
        response.raise_for_status()
        made[email] = {"attributes": dict(OWNER_ATTRIBUTES), "listIds": [OWNER_LIST]}
    return made


def drain(stack: Stack, seconds: float) -> Drain:
    """Run the drainer until health says nothing waits, or `seconds` have passed."""
    started = time.monotonic()
    runs, outcomes, backlog = 0, [], None
    while True:
        url = stack.live_url()
        outcome = run_function(url, "drain_contacts")
        runs += 1
        if outcome != "ran":
            outcomes.append(outcome)
        time.sleep(HEALTH_REUSE_SECONDS + 0.2)  # a probe made after the run
        backlog = _backlog(url)
        elapsed = time.monotonic() - started
        if backlog is not None and backlog.get("waiting") == 0:
            return Drain(elapsed, runs, True, backlog, outcomes)
        if elapsed >= seconds:
            return Drain(elapsed, runs, False, backlog, outcomes)
        time.sleep(1.0)


def gather_contacts(
    stack: Stack, domain: str, owner: dict[str, dict], drained: Drain, secret: str, prefix: str
) -> Contacts:
    sandbox = stack.sandbox
    found = {
        c["email"]: c
        for c in requests.get(f"{sandbox}/_sandbox/contacts", timeout=30).json()
        if c["email"].endswith(domain)
    }
    limits = requests.get(f"{sandbox}/_sandbox/limits", timeout=30).json()
    return Contacts(
        owner=owner,
        found=found,
        drain=drained,
        poison=poisoned_addresses(stack.connection, prefix, secret),
        imports=requests.get(f"{sandbox}/_sandbox/imports", timeout=30).json(),
        stats=requests.get(f"{sandbox}/_sandbox/stats", timeout=30).json(),
        family=limits["families"]["contacts"],
    )


def poisoned_addresses(connection: str, prefix: str, secret: str) -> list[str]:
    """The addresses in the poison queue (the first 32), opened as the store sealed them."""
    _, poison = queue_names(prefix, 1)
    sealer = Sealer(secret, PURPOSE)
    try:
        messages = QueueClient.from_connection_string(connection, poison).peek_messages(max_messages=PEEK_MAX)
    except ResourceNotFoundError:
        return []
    addresses = []
    for message in messages:
        try:
            addresses.append(str(sealer.open(message.content).get("email", "")).strip().lower())
        except Unreadable as exc:
            addresses.append(f"unreadable: {exc}")
    return addresses


def _backlog(url: str) -> dict | None:
    try:
        return requests.get(f"{url}/api/health", timeout=30).json().get("contacts")
    except (requests.RequestException, ValueError, AttributeError):
        return None
