"""bench.launch: an agent's retries, the model of when the last buyer is a contact, and the
sandbox's counts the launch reads (emails per buyer, contacts' creation)."""

from __future__ import annotations

import time

import pytest
import requests

from bench import launch
from bench.launch import Buyer, became_contacts, buy, emails_per_buyer, model, table
from shared.seams.brevo import BrevoClient
from tests.support import unique_email

CALL = {"receive_s": 0.01, "delete_each_s": 0.002}


class Answers:
    """A session that answers each POST with the next (status, Retry-After) or raises it."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.posts = 0

    def post(self, url, json, timeout):
        self.posts += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, retry_after = answer
        response = requests.Response()
        response.status_code = status
        if retry_after is not None:
            response.headers["Retry-After"] = retry_after
        return response


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(launch.time, "sleep", waits.append)
    return waits


def test_a_buyer_refused_retries_after_the_retry_after_it_was_given_and_keeps_its_first_answer(slept):
    http = Answers((503, "3"), (429, None), (200, None))

    bought = buy(http, "http://host/api/a2a/purchase", {"email": "a@example.org"})

    assert bought == Buyer("a@example.org", first="503", final="200", attempts=3)
    assert slept == [3.0, 1.0]  # no Retry-After: a second


def test_a_buyer_gives_up_after_five_retries_and_a_dropped_connection_counts_as_an_answer(slept):
    http = Answers(requests.ConnectionError("reset"), *[(503, "1")] * 10)

    bought = buy(http, "http://host/api/a2a/purchase", {"email": "b@example.org"})

    assert (bought.first, bought.final, bought.attempts, http.posts) == ("ConnectionError", "503", 6, 6)


def test_the_model_waits_a_schedule_then_imports_at_the_contacts_rate_and_reads_every_shard():
    one_batch = model(354, 4, CALL, 2)
    three_batches = model(2500, 4, CALL, 2)

    # 354 over 4 shards: 3 passes that bring messages, each shard's short read read again, an
    # empty pass; no delete comes before the import.
    assert one_batch == {
        "schedule_s": 10,
        "imports": 1,
        "imports_s": 0.5,
        "reads": 20,
        "queue_s": 0.22,  # (20 reads + the lease's read and take) x 10 ms
        "total_s": 10.72,
    }
    # Three imports; the first two batches' deletes and a lease renewal each come before the last.
    assert (three_batches["imports"], three_batches["imports_s"], three_batches["reads"]) == (3, 1.5, 104)
    assert three_batches["queue_s"] == pytest.approx((104 + 2 + 2) * 0.01 + 1500 * 0.002, abs=0.01)


def test_emails_per_buyer_lists_a_served_buyer_without_exactly_one_and_an_unserved_one_with_any(sandbox):
    once, twice, unserved_mailed, unserved = (
        unique_email(tag) for tag in ("once", "twice", "mailed", "none")
    )
    for to in (once, twice, twice, unserved_mailed):
        send(sandbox.url, to)
    buyers = [
        Buyer(once, "200", "200", 1),
        Buyer(twice, "200", "200", 1),
        Buyer(unserved_mailed, "503", "503", 6),
        Buyer(unserved, "503", "503", 6),
    ]

    counted = emails_per_buyer(sandbox.url, buyers)

    assert counted["exactly_one"] == 1
    assert counted["per_served_buyer"] == {1: 1, 2: 1}
    assert [(b["email"], b["emails"]) for b in counted["off"]] == [(twice, 2), (unserved_mailed, 1)]


def test_contacts_are_timed_from_the_spikes_end_by_their_creation_and_a_missing_one_is_named(
    sandbox, monkeypatch
):
    stats = requests.get(f"{sandbox.url}/_sandbox/stats", timeout=10).json()
    ended = time.time() - 5
    first, second = unique_email("contact"), unique_email("contact")
    BrevoClient(requests.Session(), f"{sandbox.url}/v3", "unit-test-key", 5).import_contacts(
        [(first, ""), (second, "")], 2
    )

    both = became_contacts(sandbox.url, [first, second], stats["contacts_imported"], ended)
    monkeypatch.setattr(launch, "CONTACTS_PATIENCE_SECONDS", 0.5)
    never = unique_email("never")
    one_missing = became_contacts(sandbox.url, [first, never], stats["contacts_imported"], ended)

    assert 5 <= both["seconds_after_spike"] < 60
    assert (both["at_spike_end"], both["missing"]) == (0, [])
    assert (one_missing["seconds_after_spike"], one_missing["missing"]) == (None, [never])


def test_the_launch_table_names_the_rate_the_first_try_share_the_contacts_and_the_429s():
    results = {
        "hosts": 2,
        "clients": 40,
        "seconds": 10.0,
        "limits_per_second": {"contacts": 2, "email": 60},
        "general_tier_per_second": {"contacts": 10, "email": 1000},
        "buyers": 300,
        "served": 300,
        "first_try_share": 0.99,
        "first_try_target": 0.98,
        "first_answers": {"200": 297, "503": 3},
        "retries": 3,
        "purchases_per_second": 30.0,
        "contacts_limit_multiple": 15.0,
        "email_limit_share": 0.5,
        "emails": {"exactly_one": 300, "per_served_buyer": {1: 300}, "off": []},
        "contacts": {
            "seconds_after_spike": 1.25,
            "at_spike_end": 120,
            "missing": [],
            "model": model(300, 4, CALL, 2),
        },
        "sandbox_answers": {
            "email": {"accepted": 303, "refused": 3},
            "contacts": {"accepted": 4, "refused": 0},
        },
    }

    lines = table(results)

    assert "contacts 2/s, email 60/s (Brevo's general tier: 10/s, 1,000/s)" in lines[0]
    assert (
        "200 at the first try 99.0% (target ≥ 98%); retries 3 (first answers not 200: {'503': 3})" in lines[1]
    )
    assert "30.0/s: 15.0x the contacts limit, 0.5 of the email limit" in lines[2]
    assert lines[3].endswith("exactly one for 300 of 300")
    assert "120 of 300 by the spike's end, the last a contact 1.25 s after the spike" in lines[4]
    assert "at most 10.72 s = next drainer run 10 s + 1 import(s)" in lines[5]
    assert lines[6].endswith("email 303/3, contacts 4/0")


def send(sandbox: str, to: str) -> None:
    email = {
        "sender": {"email": "store@example.com"},
        "to": [{"email": to}],
        "subject": "Your bundle",
        "textContent": "here",
    }
    answer = requests.post(f"{sandbox}/v3/smtp/email", json=email, headers={"api-key": "k"}, timeout=10)
    answer.raise_for_status()
