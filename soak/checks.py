"""What must hold after the soak, checked against what the agents were told and what the services
hold: the sandbox's captured emails and contacts, the receipt blobs, the receipt URLs, the finance
listing and the contact queue. Each invariant gives the number of things it checked and its
violations, one line each. A fulfilled receipt is any the store issued: one an agent got with a
200, or one in Blob storage (an answer lost to a killed host still counts). The one documented
exception let through, and only where it is proven: docs/development.md#soak.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from soak.agent import Answer, Journal, Order
from soak.contacts import Contacts
from soak.faults import REFUSABLE

DOCUMENTED_REFUSALS = (409, 429)  # the only 4xx a well-formed purchase may get
LIMIT_CODES = ("rate_limited", "cost_ceiling_reached")


@dataclass(frozen=True)
class Listing:
    """One day of `GET /api/receipts`, every page."""

    count: int
    ids: list[str]


@dataclass
class Evidence:
    journal: Journal
    settled: dict[Order, Answer | None]  # each keyed order's last answer once the faults stopped
    emails: list[dict]  # the sandbox's captured emails
    stored: dict[str, bytes]  # receipt blobs, read straight from Azurite: receipt id → bytes
    served: dict[str, tuple[int, bytes]]  # receipt id → what its receipt_url answered
    ledger: dict[str, Listing]  # day → the finance listing
    buyer_of: dict[str, Order]  # buyer.id (the HMAC of the email) → order
    ceiling_purchases: int
    rate_limit: int  # per client address per UTC hour
    hours: int  # UTC hours the run touched
    refusals_injected: int  # Brevo refusals of sends the sandbox actually answered
    contacts: Contacts  # the owner's contacts, the sandbox's, the queue once drained
    contact_refusals: int = 0  # Brevo refusals of contact creates the sandbox answered
    double_outage: set[str] = field(default_factory=set)  # unkeyed 200s sent while both stores were down
    declared_off_record: set[str] = field(default_factory=set)  # "answered but not on record" in a host log
    fulfilled: dict[str, dict] = field(default_factory=dict)  # receipt id → receipt
    seen: dict[str, tuple[Order, bytes]] = field(default_factory=dict)  # 200s: id → (order, bytes)

    def __post_init__(self) -> None:
        for answer in self.journal.answers:
            if answer.status == 200 and answer.receipt is not None:
                receipt = json.loads(answer.receipt)
                self.seen.setdefault(receipt["receipt_id"], (answer.order, answer.receipt))
                self.fulfilled.setdefault(receipt["receipt_id"], receipt)
        for receipt_id, body in self.stored.items():
            self.fulfilled.setdefault(receipt_id, json.loads(body))

    def listed(self) -> set[str]:
        return {receipt_id for listing in self.ledger.values() for receipt_id in listing.ids}

    def off_record(self) -> set[str]:
        """The documented exception: unkeyed, both stores down, and the host said so."""
        return self.double_outage & self.declared_off_record

    def order_of(self, receipt: dict) -> Order | None:
        return self.buyer_of.get((receipt.get("buyer") or {}).get("id", ""))

    def emails_to(self) -> Counter[str]:
        return Counter(e["to"][0]["email"].strip().lower() for e in self.emails)

    def served_buyers(self) -> list[Order]:
        """The buyers served: answered 200, or emailed (an answer lost to a killed host)."""
        emailed = self.emails_to()
        answered = {order for order, _ in self.seen.values()}
        return [o for o in self.journal.orders if o in answered or emailed[o.email]]


@dataclass(frozen=True)
class Invariant:
    name: str
    checked: int
    violations: list[str]


def check(evidence: Evidence) -> list[Invariant]:
    return [
        one_email_per_key(evidence),
        one_receipt_per_key(evidence),
        identical_answers_per_key(evidence),
        every_purchase_emailed(evidence),
        every_200_stored(evidence),
        every_200_listed(evidence),
        ledger_matches_receipts(evidence),
        cost_ceiling_held(evidence),
        rate_limit_held(evidence),
        only_documented_5xx(evidence),
        only_expected_refusals(evidence),
        nothing_stuck(evidence),
        every_served_buyer_a_contact(evidence),
        owner_contacts_unchanged(evidence),
        contacts_written_once(evidence),
        poison_only_from_refusals(evidence),
    ]


def _keyed(evidence: Evidence) -> list[Order]:
    return [order for order in evidence.journal.orders if order.key]


def one_email_per_key(ev: Evidence) -> Invariant:
    """Each key uses its own address, so emails per address are emails per key; and no claim's
    tag (`purchase-<uuid>`) is on two emails."""
    per_address = ev.emails_to()
    violations = [
        f"{order.key}: {per_address[order.email]} emails to {order.email}"
        for order in _keyed(ev)
        if per_address[order.email] > 1
    ]
    tags = Counter(tag for e in ev.emails for tag in e.get("tags") or () if tag.startswith("purchase-"))
    violations += [f"tag {tag} on {n} emails" for tag, n in tags.items() if n > 1]
    return Invariant("one email per key", len(_keyed(ev)), violations)


def one_receipt_per_key(ev: Evidence) -> Invariant:
    per_order: dict[Order, set[str]] = defaultdict(set)
    for receipt_id, receipt in ev.fulfilled.items():
        order = ev.order_of(receipt)
        if order is not None and order.key:
            per_order[order].add(receipt_id)
    violations = [
        f"{order.key}: {len(ids)} fulfilled receipts {sorted(ids)}"
        for order, ids in per_order.items()
        if len(ids) > 1
    ]
    return Invariant("one receipt per key", len(_keyed(ev)), violations)


def identical_answers_per_key(ev: Evidence) -> Invariant:
    bodies: dict[Order, set[bytes | None]] = defaultdict(set)
    for answer in ev.journal.answers:
        if answer.order.key and answer.status == 200:
            bodies[answer.order].add(answer.receipt)
    violations = [
        f"{order.key}: {len(found)} different 200 bodies" for order, found in bodies.items() if len(found) > 1
    ]
    return Invariant("a key's 200s are byte-identical", len(bodies), violations)


def every_purchase_emailed(ev: Evidence) -> Invariant:
    per_address = ev.emails_to()
    violations = []
    for receipt_id, receipt in ev.fulfilled.items():
        order = ev.order_of(receipt)
        if order is None:
            violations.append(f"{receipt_id}: fulfilled for a buyer no agent ordered for")
        elif per_address[order.email] == 0:
            violations.append(f"{receipt_id} ({order.key or 'no key'}): fulfilled, but no email went out")
    return Invariant("every fulfilled purchase emailed", len(ev.fulfilled), violations)


def every_200_stored(ev: Evidence) -> Invariant:
    """Every receipt answered 200 is at its receipt_url, byte for byte."""
    violations, exempt = [], ev.off_record()
    for receipt_id, (order, body) in ev.seen.items():
        status, served = ev.served.get(receipt_id, (0, b""))
        if status != 200 and receipt_id in exempt:
            continue
        if status != 200:
            violations.append(f"{receipt_id} ({order.key or 'no key'}): receipt_url answers {status}")
        elif served != body:
            violations.append(f"{receipt_id} ({order.key or 'no key'}): receipt_url serves other bytes")
    return Invariant("every 200 retrievable at its receipt_url", len(ev.seen), violations)


def every_200_listed(ev: Evidence) -> Invariant:
    listed, exempt = ev.listed(), ev.off_record()
    violations = [
        f"{receipt_id} ({order.key or 'no key'}): not in GET /api/receipts?date={_day(ev, receipt_id)}"
        for receipt_id, (order, _) in ev.seen.items()
        if receipt_id not in listed and receipt_id not in exempt
    ]
    return Invariant("every 200 in the day's listing", len(ev.seen), violations)


def ledger_matches_receipts(ev: Evidence) -> Invariant:
    """Per day: the listing's count is the number of fulfilled receipts, and the same ids (a
    receipt under the documented exception is not expected there, but may be)."""
    violations, excused = [], ev.off_record() - ev.listed()
    for day, listing in sorted(ev.ledger.items()):
        listed = set(listing.ids)
        fulfilled = {rid for rid in ev.fulfilled if _day(ev, rid) == day}
        expected = fulfilled - excused
        if listing.count != len(expected):
            violations.append(f"{day}: listing counts {listing.count}, {len(expected)} were fulfilled")
        if listing.count != len(listing.ids):
            violations.append(f"{day}: listing counts {listing.count} but pages hold {len(listing.ids)}")
        for receipt_id in sorted(expected - listed):
            violations.append(f"{day}: {receipt_id} ({_story(ev, receipt_id)}) missing from the ledger")
        for receipt_id in sorted(listed - fulfilled):
            violations.append(f"{day}: {receipt_id} in the ledger, but no such fulfilled receipt")
    return Invariant("ledger = fulfilled receipts", len(ev.fulfilled), violations)


def cost_ceiling_held(ev: Evidence) -> Invariant:
    """Receipts whose cost check passed never outnumber ceiling ÷ cost. Receipts marked `degraded`
    (the counter store was down: documented fail-open) are counted in the report, not here."""
    passed = sum(1 for r in ev.fulfilled.values() if _check(r, "cost_ceiling") == "pass")
    violations = []
    if passed > ev.ceiling_purchases:
        violations.append(f"{passed} purchases passed a ceiling of {ev.ceiling_purchases}")
    return Invariant("cost ceiling held", len(ev.fulfilled), violations)


def rate_limit_held(ev: Evidence) -> Invariant:
    """Per client address, purchases whose rate check passed fit the limit for the hours run."""
    per_address: Counter[str] = Counter()
    for receipt_id, (order, _) in ev.seen.items():
        if _check(ev.fulfilled[receipt_id], "rate_limit") == "pass":
            per_address[order.address] += 1
    allowed = ev.rate_limit * ev.hours
    violations = [
        f"{address}: {n} purchases passed a limit of {allowed}"
        for address, n in per_address.items()
        if n > allowed
    ]
    return Invariant("rate limit held", len(per_address), violations)


def only_documented_5xx(ev: Evidence) -> Invariant:
    """A 5xx is a 503 that says when to retry, or a 502 for a Brevo refusal the soak injected."""
    violations, rejected = [], 0
    for answer in ev.journal.answers:
        status = answer.status or 0
        if status < 500:
            continue
        if status == 503 and answer.retry_after is None:
            violations.append(_describe(answer, "503 without Retry-After"))
        elif status == 502:
            rejected += 1
            if REFUSABLE not in answer.order.email or answer.code != "upstream_rejected":
                violations.append(_describe(answer, "502 without an injected Brevo refusal"))
        elif status not in (502, 503):
            violations.append(_describe(answer, f"{status}"))
    if rejected > ev.refusals_injected:
        violations.append(f"{rejected} answers were 502, the sandbox refused {ev.refusals_injected} calls")
    checked = sum(1 for a in ev.journal.answers if (a.status or 0) >= 500)
    return Invariant("only documented 5xx", checked, violations)


def only_expected_refusals(ev: Evidence) -> Invariant:
    """Agents send well-formed purchases: the only 4xx are 409 (key in use) and 429 (limits)."""
    violations = [
        _describe(answer, f"{answer.status}")
        for answer in ev.journal.answers
        if answer.status is not None and answer.status < 500 and answer.status != 200
        if answer.status not in DOCUMENTED_REFUSALS
        or (answer.status == 429 and answer.code not in LIMIT_CODES)
    ]
    return Invariant("only 409 and 429 refusals", len(ev.journal.answers), violations)


def nothing_stuck(ev: Evidence) -> Invariant:
    """Once the faults stop, every key ends at 200; a limit's 429 only for a key that never
    bought anything (no 200, no email, no receipt)."""
    bought: set[Order | None] = {order for order, _ in ev.seen.values()}
    bought |= {ev.order_of(r) for r in ev.fulfilled.values()}
    emailed = ev.emails_to()
    violations = []
    for order, last in ev.settled.items():
        if last is not None and last.status == 200:
            continue
        never_bought = order not in bought and emailed[order.email] == 0
        if last is not None and last.status == 429 and last.code in LIMIT_CODES and never_bought:
            continue
        what = "no answer" if last is None or last.status is None else f"{last.status} {last.code or ''}"
        history = "" if never_bought else "bought (a 200, a receipt or an email), yet "
        violations.append(f"{order.key}: {history}still {what.strip()} after the faults stopped")
    return Invariant("nothing stuck", len(ev.settled), violations)


def every_served_buyer_a_contact(ev: Evidence) -> Invariant:
    """Once the queue has drained, every served buyer is a Brevo contact: made for them with the
    name they bought under, or the owner's already. Let through: a buyer whose message an injected
    refusal put in the poison queue (`poison_only_from_refusals` holds those to the refusals), and,
    while messages still wait (the drain did not finish; the report says so), a missing contact."""
    c, violations = ev.contacts, []
    for order in ev.served_buyers():
        contact = c.found.get(order.email)
        if contact is None:
            if order.email not in c.poison and c.waiting == 0:
                who = f"{order.key or 'no key'} ({order.email})"
                violations.append(f"{who}: served, no message waits, yet no contact")
        elif order.email not in c.owner and contact["attributes"] != _attributes(order.name):
            violations.append(
                f"{order.key or 'no key'} ({order.email}): bought as {order.name!r}, "
                f"its contact holds {contact['attributes']}"
            )
    return Invariant("every served buyer a contact", len(ev.served_buyers()), violations)


def owner_contacts_unchanged(ev: Evidence) -> Invariant:
    """The contacts the owner made before the load are exactly as made, whoever bought for them:
    same attributes and lists, never written again."""
    c, violations = ev.contacts, []
    served = {order.email for order in ev.served_buyers()}
    for email, made in sorted(c.owner.items()):
        now = c.found.get(email)
        who = f"{email} ({'bought for' if email in served else 'not bought for'})"
        if now is None:
            violations.append(f"{who}: the owner's contact is gone")
        elif now["modifications"] or now["upserts"] != 1:
            violations.append(f"{who}: {now['upserts']} writes, {now['modifications']} after its creation")
        elif now["attributes"] != made["attributes"] or now["listIds"] != made["listIds"]:
            violations.append(f"{who}: now {now['attributes']} in lists {now['listIds']}")
    return Invariant("the owner's contacts unchanged", len(c.owner), violations)


def contacts_written_once(ev: Evidence) -> Invariant:
    """No buyer got two contacts: the sandbox holds one per address, so each contact the drainer
    made was written once (`upserts` 1, `modifications` 0), however often its message was handed
    over again (a killed run, a lost delete, a batch retried); and each is for an address an agent
    bought for."""
    c, violations = ev.contacts, []
    ordered = {order.email for order in ev.journal.orders}
    made = {email: contact for email, contact in c.found.items() if email not in c.owner}
    for email, contact in sorted(made.items()):
        if email not in ordered:
            violations.append(f"{email}: a contact for an address no agent bought for")
        elif contact["upserts"] != 1 or contact["modifications"]:
            writes, after = contact["upserts"], contact["modifications"]
            violations.append(f"{email}: {writes} writes, {after} after its creation")
    return Invariant("one contact per buyer, written once", len(made), violations)


def poison_only_from_refusals(ev: Evidence) -> Invariant:
    """The poison queue holds only buyers an injected refusal of their contact create turned
    away: refusable addresses, no more of them than the refusals the sandbox answered."""
    c, violations = ev.contacts, []
    if c.poisoned is None:
        violations.append("health did not say how many messages are in the poison queue")
    elif c.poisoned > ev.contact_refusals:
        violations.append(
            f"{c.poisoned} messages in the poison queue, the sandbox refused {ev.contact_refusals} creates"
        )
    violations += [
        f"{address}: in the poison queue with no refusal injected for it"
        for address in c.poison
        if REFUSABLE not in address
    ]
    settled = len(c.found) - len(c.owner) + len(c.poison)  # messages the drainer finished with
    return Invariant("poison only from injected refusals", settled, violations)


def _attributes(name: str) -> dict[str, str]:
    """The attributes a buyer's contact is made with (`shared.seams.brevo`)."""
    return {"FIRSTNAME": name} if name else {}


def _story(ev: Evidence, receipt_id: str) -> str:
    """Whose receipt, and what its buyer saw of it."""
    order = ev.order_of(ev.fulfilled[receipt_id])
    who = "unknown buyer" if order is None else order.key or "no key"
    if receipt_id in ev.seen:
        return f"{who}, answered 200"
    return f"{who}, in Blob but never answered: its host died mid-purchase, or its answer was lost"


def _check(receipt: dict, name: str) -> str | None:
    return next((c["result"] for c in receipt.get("checks", ()) if c["name"] == name), None)


def _day(ev: Evidence, receipt_id: str) -> str:
    return ev.fulfilled[receipt_id]["issued_at"][:10]


def _describe(answer: Answer, what: str) -> str:
    return (
        f"{what} {answer.code or ''} at {answer.at:.1f}s ({answer.phase}, {answer.channel}, "
        f"host{answer.host}, {answer.order.key or 'no key'})"
    )
