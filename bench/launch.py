"""Launch: a spike of new buyers at ten times Brevo's contacts limit or more, on two dev hosts that
run the contact drainer on its schedule, as a launch day would bring them.

Each of BENCH_LAUNCH_CLIENTS clients (default 40) calls from an address of its own and buys as fast
as it can for BENCH_LAUNCH_SECONDS (default 10), every buyer a new email and idempotency key. A
buyer answered anything but 200 retries as an agent would, after the Retry-After it was given, up
to five times. The run reports the share answered 200 at the first try, the emails each buyer
received, how long after the spike every served buyer is a Brevo contact (against `model`), the
purchase rate against the email limit and the 429s the sandbox answered per family.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import requests

from bench.load import peak_rss_mb
from bench.stack import address, keyed
from devstack.loopback import client_from
from devstack.services import Stack
from shared.purchase.contacts import DELETERS, IMPORT_BATCH, RECEIVE_MAX

LAUNCH_SECONDS = float(os.environ.get("BENCH_LAUNCH_SECONDS", "10"))
LAUNCH_CLIENTS = int(os.environ.get("BENCH_LAUNCH_CLIENTS", "40"))
RETRIES = 5
FIRST_TRY_TARGET = 0.98
DRAIN_EVERY_SECONDS = 10  # function_app.drain_contacts: "*/10 * * * * *"
CONTACTS_PATIENCE_SECONDS = 120  # how long to wait for the last contact before reporting it missing

# Brevo's general tier allows 10 contact calls and 1,000 emails a second. A launch at the email
# limit would be 100 times the contacts limit, but one machine serves tens of purchases a second,
# so it can approach neither limit. Both are scaled down to where this machine's spike is ten times
# the contacts limit or more and stays under the email limit. The ratio is 1:30, not Brevo's 1:100:
# the drainer needs one import call per 1,000 buyers, so at either ratio it uses a small part of
# its limit, and the spike still outruns what contacts created one per call could keep up with.
GENERAL_TIER = {"contacts": 10, "email": 1000}
SCALED = {"contacts": 2, "email": 60}


@dataclass
class Buyer:
    email: str
    first: str  # the first answer's status
    final: str
    attempts: int


def run(stack: Stack) -> dict:
    from shared.config.settings import Settings

    # A queue and a governance table (where the drainer's lease is) of their own: no drainer of an
    # earlier phase holds the lease or leaves a backlog in the queue the model counts.
    tag = uuid.uuid4().hex[:8]
    extra = {"STOREFRONT_CONTACT_QUEUE": f"launch-{tag}", "STOREFRONT_GOVERNANCE_TABLE": f"launch{tag}"}
    settings = Settings.from_env(stack.env(**extra))
    if not settings.brevo_contact_list_id:
        raise RuntimeError("the launch needs BREVO_CONTACT_LIST_ID (local.settings.json.example sets 2)")
    queue_call = queue_timings(stack.connection, settings)
    hosts = [stack.start_host(**extra), stack.start_host(**extra)]
    sandbox = stack.sandbox
    set_limits(sandbox, {family: f"{n}/s" for family, n in SCALED.items()})
    try:
        families_before = families(sandbox)
        imported_before = requests.get(f"{sandbox}/_sandbox/stats", timeout=10).json()["contacts_imported"]
        load_before = os.getloadavg()[0]
        buyers, seconds, ended = spike([host.url for host in hosts], LAUNCH_SECONDS, LAUNCH_CLIENTS)
        served = [b.email for b in buyers if b.final == "200"]
        contacts = became_contacts(sandbox, served, imported_before, ended)
        families_after = families(sandbox)
    finally:
        set_limits(sandbox, None)
    emails = emails_per_buyer(sandbox, buyers)
    rate = len(served) / seconds
    first = sum(b.first == "200" for b in buyers)
    return {
        "hosts": len(hosts),
        "clients": LAUNCH_CLIENTS,
        "seconds": LAUNCH_SECONDS,
        "limits_per_second": SCALED,
        "general_tier_per_second": GENERAL_TIER,
        "load_average_before": round(load_before, 2),
        "buyers": len(buyers),
        "served": len(served),
        "first_try_200": first,
        "first_try_share": round(first / max(1, len(buyers)), 4),
        "first_try_target": FIRST_TRY_TARGET,
        "first_answers": dict(Counter(b.first for b in buyers)),
        "retries": sum(b.attempts - 1 for b in buyers),
        "spike_seconds": round(seconds, 2),
        "purchases_per_second": round(rate, 1),
        "contacts_limit_multiple": round(rate / SCALED["contacts"], 1),
        "email_limit_share": round(rate / SCALED["email"], 2),
        "emails": emails,
        "contacts": {
            **contacts,
            "model": model(len(served), settings.contact_queue_shards, queue_call, SCALED["contacts"]),
        },
        "sandbox_answers": {
            family: {
                side: families_after[family][side] - families_before[family][side]
                for side in ("accepted", "refused")
            }
            for family in families_after
        },
        "peak_rss_mb": [peak_rss_mb(host.proc.pid) for host in hosts],
    }


def set_limits(sandbox: str, limits: dict[str, str] | None) -> None:
    """The general tier with these families' limits overridden; None restores the tier as it is."""
    payload: dict = {"tier": "general", **({"limits": limits} if limits else {})}
    requests.put(f"{sandbox}/_sandbox/limits", json=payload, timeout=10).raise_for_status()


def families(sandbox: str) -> dict[str, dict[str, int]]:
    """Per family, the requests the sandbox accepted and refused (429) so far."""
    snapshot = requests.get(f"{sandbox}/_sandbox/limits", timeout=10).json()["families"]
    return {f: {"accepted": v["accepted"], "refused": v["refused"]} for f, v in snapshot.items()}


def spike(hosts: list[str], seconds: float, clients: int) -> tuple[list[Buyer], float, float]:
    """`clients` buying from the hosts in turn for `seconds`, each purchase retried until served
    (or out of retries); the buyers, the seconds until the last one was settled, and that moment
    (epoch seconds)."""
    start = time.monotonic()
    deadline = start + seconds
    lock = threading.Lock()
    buyers: list[Buyer] = []

    def client(n: int) -> None:
        http = client_from(address())
        url = f"{hosts[n % len(hosts)]}/api/a2a/purchase"
        while time.monotonic() < deadline:
            bought = buy(http, url, keyed())
            with lock:
                buyers.append(bought)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    return buyers, time.monotonic() - start, time.time()


def buy(http: requests.Session, url: str, payload: dict) -> Buyer:
    status, wait = post(http, url, payload)
    first, attempts = status, 1
    while status != "200" and attempts <= RETRIES:
        time.sleep(wait)
        status, wait = post(http, url, payload)
        attempts += 1
    return Buyer(payload["email"], first, status, attempts)


def post(http: requests.Session, url: str, payload: dict) -> tuple[str, float]:
    """The answer's status and the seconds it asks to wait before a retry (1 when it names none)."""
    try:
        response = http.post(url, json=payload, timeout=30)
    except requests.RequestException as exc:
        return type(exc).__name__, 1.0
    try:
        wait = float(response.headers.get("Retry-After", "1"))
    except ValueError:
        wait = 1.0
    return str(response.status_code), wait


def became_contacts(sandbox: str, served: list[str], imported_before: int, ended: float) -> dict:
    """When the last served buyer became a contact, in seconds after the spike's end (the sandbox
    stamps each contact's creation), and how many were contacts by that end. Polls the sandbox's
    import count, then checks the contacts themselves."""
    wanted = {email.lower() for email in served}
    created: dict[str, float] = {}
    give_up = time.monotonic() + CONTACTS_PATIENCE_SECONDS
    while time.monotonic() < give_up:
        stats = requests.get(f"{sandbox}/_sandbox/stats", timeout=10).json()
        if stats["contacts_imported"] - imported_before >= len(wanted):
            contacts = requests.get(f"{sandbox}/_sandbox/contacts", timeout=30).json()
            created = {c["email"]: _epoch(c["created_at"]) for c in contacts if c["email"] in wanted}
            if len(created) == len(wanted):
                break
        time.sleep(0.25)
    missing = sorted(wanted - set(created))
    last = max(created.values(), default=ended)
    return {
        "seconds_after_spike": round(last - ended, 2) if not missing else None,
        "at_spike_end": sum(moment <= ended for moment in created.values()),
        "missing": missing,
    }


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def model(buyers: int, shards: int, call: dict[str, float], contacts_per_second: float) -> dict:
    """The most seconds, after the spike's end, until its last buyer is a contact.

    As if no run were draining as the spike ends, the next starts up to DRAIN_EVERY_SECONDS
    later; as if none had drained during the spike, it finds every buyer waiting. It takes the
    lease (two table calls, each timed as a queue read) and reads the queue in passes over every
    shard, each read taking up to RECEIVE_MAX; a batch ends with an empty pass, and each shard's
    last short read is read again (the SDK reads once more after a page shorter than it asked).
    It makes ceil(buyers / IMPORT_BATCH) import calls at the contacts rate, and between batches
    deletes the batch's messages (DELETERS at a time, at the rate `call` measured) and renews the
    lease. The last batch's deletes come after its import, so they make no buyer wait."""
    imports = math.ceil(buyers / IMPORT_BATCH)
    reads = shards * (math.ceil(buyers / (shards * RECEIVE_MAX)) + 2 * imports)
    deleted_before_last = max(0, buyers - IMPORT_BATCH)
    queue_s = (reads + 2 + imports - 1) * call["receive_s"] + deleted_before_last * call["delete_each_s"]
    figures = {
        "schedule_s": DRAIN_EVERY_SECONDS,
        "imports": imports,
        "imports_s": round(imports / contacts_per_second, 2),
        "reads": reads,
        "queue_s": round(queue_s, 2),
    }
    return {**figures, "total_s": round(figures["schedule_s"] + figures["imports_s"] + figures["queue_s"], 2)}


def queue_timings(connection: str, settings, messages: int = 64) -> dict[str, float]:
    """A queue read's time and a deleted message's share of a pooled delete, on a queue of their
    own in the run's Azurite, as the drainer reads and deletes (DELETERS at a time)."""
    from shared.seams.contact_queue import open_queue

    queue = open_queue(
        connection,
        f"launchprobe-{uuid.uuid4().hex[:8]}",
        1,
        settings.hash_secret,
        settings.storage_timeout_seconds,
    )
    for n in range(messages):
        queue.enqueue(f"probe{n}@example.org", "")
    reads: list[float] = []
    received: list[Any] = []  # the queue's messages, each handed to queue.done
    while len(received) < messages:
        start = time.perf_counter()
        got = queue.receive(0, RECEIVE_MAX, 60)
        reads.append(time.perf_counter() - start)
        received.extend(got)
        if not got:
            break
    start = time.perf_counter()
    with ThreadPoolExecutor(DELETERS) as pool:
        list(pool.map(queue.done, received))
    deleted = (time.perf_counter() - start) / max(1, len(received))
    return {"receive_s": round(statistics.median(reads), 4), "delete_each_s": round(deleted, 4)}


def emails_per_buyer(sandbox: str, buyers: list[Buyer]) -> dict:
    """How many emails each buyer received, by the sandbox's own capture: one for each served
    buyer, none for one never served. Lists every buyer off that."""

    def count(buyer: Buyer) -> int:
        answer = requests.get(f"{sandbox}/_sandbox/emails", params={"to": buyer.email}, timeout=30)
        return len(answer.json())

    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(count, buyers))
    off = [
        {**asdict(b), "emails": n}
        for b, n in zip(buyers, counts, strict=True)
        if n != (1 if b.final == "200" else 0)
    ]
    served = [n for b, n in zip(buyers, counts, strict=True) if b.final == "200"]
    return {"exactly_one": served.count(1), "per_served_buyer": dict(Counter(served)), "off": off}


def table(launch: dict) -> list[str]:
    scaled, tier = launch["limits_per_second"], launch["general_tier_per_second"]
    emails, contacts, m = launch["emails"], launch["contacts"], launch["contacts"]["model"]
    if contacts["seconds_after_spike"] is None:
        became = (
            f"{len(contacts['missing'])} still not contacts {CONTACTS_PATIENCE_SECONDS} s after the spike"
        )
    else:
        became = f"the last a contact {contacts['seconds_after_spike']} s after the spike"
    off = emails["off"]
    answers = ", ".join(f"{f} {a['accepted']}/{a['refused']}" for f, a in launch["sandbox_answers"].items())
    return [
        f"Launch: {launch['hosts']} dev hosts, {launch['clients']} clients, {launch['seconds']} s spike; "
        f"sandbox limits contacts {scaled['contacts']}/s, email {scaled['email']}/s "
        f"(Brevo's general tier: {tier['contacts']}/s, {tier['email']:,}/s)",
        f"  buyers {launch['buyers']}, served {launch['served']}; 200 at the first try "
        f"{launch['first_try_share']:.1%} (target ≥ {launch['first_try_target']:.0%}); "
        f"retries {launch['retries']}{_others(launch['first_answers'])}",
        f"  purchases {launch['purchases_per_second']}/s: {launch['contacts_limit_multiple']}x the contacts "
        f"limit, {launch['email_limit_share']} of the email limit",
        f"  emails per served buyer: exactly one for {emails['exactly_one']} of {launch['served']}"
        + (f"; off ({len(off)}): {off[:3]}" if off else ""),
        f"  contacts: {contacts['at_spike_end']} of {launch['served']} by the spike's end, {became}",
        f"  model: at most {m['total_s']} s = next drainer run {m['schedule_s']} s + {m['imports']} "
        f"import(s) at the contacts rate {m['imports_s']} s + queue and lease {m['queue_s']} s",
        f"  sandbox answers, accepted/refused (429): {answers}",
    ]


def _others(first_answers: dict[str, int]) -> str:
    others = {status: n for status, n in first_answers.items() if status != "200"}
    return f" (first answers not 200: {others})" if others else ""
