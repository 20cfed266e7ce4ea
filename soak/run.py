"""One soak run: the store owner's contacts, the stack, the load under the fault schedule, the
settling once the faults stop (every key answered, the contact queue drained), the evidence, the
invariants and the report."""

from __future__ import annotations

import json
import random
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import requests
from azure.storage.blob import ContainerClient

from devstack.services import dev_settings
from shared.config.hashing import Hasher
from shared.purchase.receipt.document import RECEIPT_ID_PATTERN
from shared.purchase.schema import normalise_email
from soak.agent import BUNDLES, Agent, Answer, Caller, Journal, Order, Pacer, pursue
from soak.checks import Evidence, Invariant, Listing, check
from soak.contacts import Contacts, drain, gather_contacts, make_owner_contacts
from soak.faults import CREATE, REFUSABLE, SEND, Fault, Injector, schedule
from soak.report import Outcome, coverage, summary
from soak.stack import Stack, run_function

RECEIPT_BLOB = re.compile(RECEIPT_ID_PATTERN.strip("^$") + r"\.json")
OFF_RECORD = re.compile(r"receipt (" + RECEIPT_ID_PATTERN.strip("^$") + r") answered but not on record")
HOT_SHARE = 0.2  # of orders come from one address, the one that meets the rate limit
REFUSABLE_SHARE = 0.25  # of keyed orders, whose Brevo calls the sandbox may refuse
ADDRESSES = 32
OWNER_EVERY = 6  # the first order of every sixth agent is for a contact the store owner made
LIST_IDS = ("2", "")  # host 0 imports the queued contacts into list 2, host 1 creates them one by one


@dataclass(frozen=True)
class Config:
    seconds: float = 120.0  # of load under faults
    seed: int = 0
    agents: int = 48
    hosts: int = 2
    orders_per_second: float = 4.0  # new orders across all agents
    keyed_share: float = 0.75
    lease_seconds: int = 5
    storage_timeout_seconds: float = 2.0
    brevo_timeout_seconds: float = 1.5
    settle_seconds: float = 40.0  # after the faults stop, for every key to be answered for good
    # Then for the contact queue to drain: a killed drainer's lease and messages come back after
    # 60 s, and a failed run pauses 30 s (twice as long after each failure in a row).
    drain_seconds: float = 150.0
    logs: Path | None = None

    @classmethod
    def from_env(cls, env: dict[str, str], seconds: float = 120.0, seed: int | None = None) -> Config:
        """SOAK_SECONDS and SOAK_SEED, else these defaults (a fresh random seed when none)."""
        seed_text = env.get("SOAK_SEED", "").strip()
        chosen = int(seed_text) if seed_text else seed if seed is not None else random.randrange(10**6)
        return cls(seconds=float(env.get("SOAK_SECONDS", "").strip() or seconds), seed=chosen)

    @property
    def ceiling_purchases(self) -> int:
        """The daily cost ceiling in purchases: less than the orders buy even under heavy faults,
        so it is reached in the second half of the run."""
        return max(5, int(self.orders_per_second * self.seconds * 0.35))

    @property
    def rate_limit(self) -> int:
        """Per address and hour: high, but a quarter of what the one hot address asks for (the
        limit counts only attempts that were not given back)."""
        return max(3, int(self.orders_per_second * self.seconds * HOT_SHARE / 4))

    def host_settings(self, run: str) -> dict[str, str]:
        return {
            "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": str(self.lease_seconds),
            "STOREFRONT_STORAGE_TIMEOUT_SECONDS": str(self.storage_timeout_seconds),
            "STOREFRONT_BREVO_TIMEOUT_SECONDS": str(self.brevo_timeout_seconds),
            "STOREFRONT_RATE_LIMIT_PER_HOUR": str(self.rate_limit),
            "STOREFRONT_COST_PER_PURCHASE_USD": "0.01",
            "STOREFRONT_DAILY_COST_CEILING_USD": f"{self.ceiling_purchases / 100:.2f}",
            "STOREFRONT_IDEMPOTENCY_TABLE": f"soakidem{run}",
            "STOREFRONT_GOVERNANCE_TABLE": f"soakgov{run}",
            "STOREFRONT_LEDGER_TABLE": f"soakledger{run}",
            "STOREFRONT_RECEIPTS_CONTAINER": f"soak-receipts-{run}",
            "STOREFRONT_CONTACT_QUEUE": f"soak-contacts-{run}",
        }

    def per_host(self) -> list[dict[str, str]]:
        """The drainer's two ways, on alternate hosts: they share the queue and the lease, so a
        run drains as whichever host holds the lease does."""
        return [{"BREVO_CONTACT_LIST_ID": LIST_IDS[i % len(LIST_IDS)]} for i in range(self.hosts)]


@dataclass
class Orders:
    """Makes the agents' orders: their own email each, a key for most, a client address. The first
    order of every `OWNER_EVERY`th agent is for an address the store owner made a contact for: keyed
    (so it is served), named (so a contact changed by it would show), never from the hot address."""

    run: str
    keyed_share: float
    agents: int
    addresses: list[str] = field(default_factory=lambda: [f"127.77.0.{i + 1}" for i in range(ADDRESSES + 1)])

    @property
    def domain(self) -> str:
        return f"@soak-{self.run}.example.org"

    def owner_emails(self) -> list[str]:
        return [self._owner_email(agent) for agent in range(0, self.agents, OWNER_EVERY)]

    def _owner_email(self, agent: int) -> str:
        return f"a{agent}.o1.owner{self.domain}"

    def make(self, agent: int) -> Callable[[random.Random, int], Order]:
        def order(rng: random.Random, n: int) -> Order:
            keyed = rng.random() < self.keyed_share
            refusable = keyed and rng.random() < REFUSABLE_SHARE
            local = f"a{agent}.o{n}" + (f"{REFUSABLE}r" if refusable else "" if keyed else ".nokey")
            hot = rng.random() < HOT_SHARE
            email, name = f"{local}{self.domain}", rng.choice(("", "Ada", "Grace Hopper"))
            if n == 1 and agent % OWNER_EVERY == 0:
                email, keyed, hot, name = self._owner_email(agent), True, False, name or "Ada"
            return Order(
                email=email,
                address=self.addresses[0] if hot else rng.choice(self.addresses[1:]),
                key=f"soak-{self.run}-a{agent}-o{n}" if keyed else None,
                name=name,
                bundle=rng.choice(BUNDLES),
            )

        return order


def say(text: str) -> None:
    print(f"soak: {text}", file=sys.stderr, flush=True)


def run(config: Config) -> Outcome:
    logs = config.logs or Path(tempfile.mkdtemp(prefix="storefront-soak-"))
    run_id = uuid.uuid4().hex[:8]
    faults = schedule(
        config.seed, config.seconds, config.hosts, f"@soak-{run_id}.", config.brevo_timeout_seconds
    )
    say(f"seed {config.seed}, {config.seconds:g} s, {len(faults)} faults scheduled; logs in {logs}")
    settings = config.host_settings(run_id)
    orders = Orders(run_id, config.keyed_share, config.agents)
    stack = Stack(logs, settings, config.hosts, config.per_host())
    try:
        owner = make_owner_contacts(stack.sandbox, dev_settings()["BREVO_API_KEY"], orders.owner_emails())
        began = datetime.now(timezone.utc)
        journal, injector = load(stack, config, faults, orders)
        say("faults stopped; settling every key")
        repairs = [repair(stack)]
        settled = settle(stack, config, journal)
        repairs.append(repair(stack))
        say("draining the contact queue")
        drained = drain(stack, config.drain_seconds)
        ended = datetime.now(timezone.utc)
        contacts = gather_contacts(
            stack,
            orders.domain,
            owner,
            drained,
            dev_settings()["STOREFRONT_HASH_SECRET"],
            settings["STOREFRONT_CONTACT_QUEUE"],
        )
        container, hours = settings["STOREFRONT_RECEIPTS_CONTAINER"], _hours(began, ended)
        evidence = gather(stack, config, journal, settled, injector, contacts, container, hours)
        evidence.declared_off_record = declared_off_record(logs)  # the hosts' logs are complete now
    finally:
        stack.stop()
    record(logs, faults, evidence)
    invariants = check(evidence)
    if repairs[-1] not in ("ran", "absent (404)"):
        invariants.append(Invariant("repair timer runs", len(repairs), [f"repair_receipts {repairs}"]))
    outcome = Outcome(
        config,
        invariants,
        coverage(evidence, injector),
        [*summary(config, evidence, injector, repairs, faults), f"logs, schedule and every answer: {logs}"],
    )
    (logs / "report.txt").write_text(outcome.text(shown=10**6) + "\n")
    return outcome


def load(stack: Stack, config: Config, faults: list[Fault], orders: Orders) -> tuple[Journal, Injector]:
    started = time.monotonic()
    journal = Journal(started)
    urls = [host.url for host in stack.hosts]
    agents = [
        Agent(i, config.seed, lambda rng: Caller(urls, journal, rng), journal, orders.make(i))
        for i in range(config.agents)
    ]
    injector = Injector(stack, faults)
    pacer = Pacer(config.orders_per_second)
    deadline = started + config.seconds
    injector.start(started)
    threads = [threading.Thread(target=agent.run, args=(pacer, deadline), daemon=True) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    injector.stop()
    return journal, injector


def settle(stack: Stack, config: Config, journal: Journal) -> dict[Order, Answer | None]:
    """Ask every key again, with the faults gone, until it is answered for good or time is up."""
    urls = [host.url for host in stack.hosts]
    deadline = time.monotonic() + config.settle_seconds
    keyed = [order for order in journal.orders if order.key]

    def one(indexed: tuple[int, Order]):
        rng = random.Random(f"{config.seed}/settle/{indexed[0]}")
        return indexed[1], pursue(Caller(urls, journal, rng), indexed[1], deadline, "settle", rng)

    with ThreadPoolExecutor(8) as pool:
        return dict(pool.map(one, enumerate(keyed)))


def record(logs: Path, faults: list[Fault], evidence: Evidence) -> None:
    """The schedule, every answer, the contacts, and both sides of every receipt answered 200 whose
    receipt_url serves other bytes, beside the hosts' logs, for reading a failure."""
    journal = evidence.journal
    (logs / "faults.txt").write_text("".join(f"{fault.describe()}\n" for fault in faults))
    (logs / "contacts.json").write_text(json.dumps(asdict(evidence.contacts), indent=1, sort_keys=True))
    for receipt_id, (_, answered) in evidence.seen.items():
        status, served = evidence.served.get(receipt_id, (0, b""))
        if status == 200 and served != answered:
            (logs / f"{receipt_id}.answered.json").write_bytes(answered)
            (logs / f"{receipt_id}.served.json").write_bytes(served)
    with (logs / "answers.txt").open("w") as out:
        for a in journal.answers:
            out.write(
                f"{a.at:7.2f}s {a.took:5.2f}s {a.phase:<6} {a.channel:<4} host{a.host} {a.status!s:>4} "
                f"{a.code or '-':<28} "
                f"{a.order.key or a.order.email} {a.failure or ''}{' replay' if a.replayed else ''}\n"
            )


def repair(stack: Stack) -> str:
    """Run the repair timer now, if the app has one."""
    return run_function(stack.live_url(), "repair_receipts")


def gather(
    stack: Stack,
    config: Config,
    journal: Journal,
    settled: dict[Order, Answer | None],
    injector: Injector,
    contacts: Contacts,
    container: str,
    hours: int,
) -> Evidence:
    say("gathering evidence: emails, receipt blobs, receipt URLs, the finance listing")
    emails = requests.get(f"{stack.sandbox}/_sandbox/emails", timeout=30).json()
    stored = _stored(stack, container)
    hasher = Hasher(dev_settings()["STOREFRONT_HASH_SECRET"])
    evidence = Evidence(
        journal=journal,
        settled=settled,
        emails=emails,
        stored=stored,
        served={},
        ledger={},
        buyer_of={hasher.email(normalise_email(o.email)): o for o in journal.orders},
        ceiling_purchases=config.ceiling_purchases,
        rate_limit=config.rate_limit,
        hours=hours,
        refusals_injected=injector.refusals_used[SEND],
        contacts=contacts,
        contact_refusals=injector.refusals_used[CREATE],
    )
    evidence.double_outage = {
        _receipt_id(a)
        for a in journal.answers
        if a.status == 200 and a.order.key is None and injector.both_down(a.at - a.took, a.at)
    }
    live = stack.live_url()
    for receipt_id, receipt in evidence.fulfilled.items():
        if receipt_id in evidence.seen:
            path = "/" + receipt["receipt_url"].split("://", 1)[1].split("/", 1)[1]
            response = requests.get(live + path, headers={"Accept": "application/json"}, timeout=30)
            evidence.served[receipt_id] = (response.status_code, response.content)
    days = {r["issued_at"][:10] for r in evidence.fulfilled.values()}
    days.add(datetime.now(timezone.utc).strftime("%Y-%m-%d"))
    evidence.ledger = {day: _listing(live, day) for day in sorted(days)}
    return evidence


def declared_off_record(logs: Path) -> set[str]:
    """Receipts a host logged as answered but on no store (both were unreachable)."""
    found = set()
    for log in logs.glob("host*.log"):
        found.update(OFF_RECORD.findall(log.read_text(errors="replace")))
    return found


def _receipt_id(answer: Answer) -> str:
    """The id of the receipt a 200 answered with; a 200 always carries its receipt."""
    assert answer.receipt is not None, answer
    return json.loads(answer.receipt)["receipt_id"]


def _stored(stack: Stack, container_name: str) -> dict[str, bytes]:
    container = ContainerClient.from_connection_string(stack.connection, container_name)
    if not container.exists():
        return {}
    return {
        blob.name.removesuffix(".json"): container.download_blob(blob.name).readall()
        for blob in container.list_blobs()
        if RECEIPT_BLOB.fullmatch(blob.name)
    }


def _listing(live: str, day: str) -> Listing:
    ids, cursor, count = [], None, 0
    while True:
        params = {"date": day, "page_size": "200", **({"cursor": cursor} if cursor else {})}
        page = requests.get(f"{live}/api/receipts", params=params, timeout=30)
        page.raise_for_status()
        body = page.json()
        count = body["count"]
        ids += [entry["receipt_id"] for entry in body["receipts"]]
        cursor = body.get("next_cursor")
        if not cursor:
            return Listing(count, ids)


def _hours(began: datetime, ended: datetime) -> int:
    start = began.replace(minute=0, second=0, microsecond=0)
    return int((ended - start) / timedelta(hours=1)) + 1
