"""The soak's report: what the run did, each invariant with its violations, and what the run
failed to exercise (a soak that met no fault proves nothing, so that fails it too)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from soak.checks import Evidence, Invariant
from soak.faults import CREATE, IMPORT, STORES, Fault, Injector

if TYPE_CHECKING:
    from soak.run import Config


@dataclass
class Outcome:
    config: Config
    invariants: list[Invariant]
    coverage: list[str]
    summary: list[str]

    @property
    def ok(self) -> bool:
        return not self.coverage and not any(inv.violations for inv in self.invariants)

    def text(self, shown: int = 12) -> str:
        lines = [*self.summary, "", f"  {'invariant':<44} {'checked':>8} {'violations':>10}"]
        for inv in self.invariants:
            lines.append(f"  {inv.name:<44} {inv.checked:>8} {len(inv.violations):>10}")
        for inv in (inv for inv in self.invariants if inv.violations):
            lines += ["", f"VIOLATED: {inv.name}"]
            lines += [f"  - {line}" for line in inv.violations[:shown]]
            if len(inv.violations) > shown:
                lines.append(f"  ... and {len(inv.violations) - shown} more")
        if self.coverage:
            lines += ["", "NOT EXERCISED (the run proves less than it should):"]
            lines += [f"  - {gap}" for gap in self.coverage]
        lines += [
            "",
            ("PASS" if self.ok else "FAIL")
            + f"; reproduce with SOAK_SEED={self.config.seed} SOAK_SECONDS={self.config.seconds:g} make soak",
        ]
        return "\n".join(lines)


def coverage(ev: Evidence, injector: Injector) -> list[str]:
    gaps = []
    codes = Counter(a.code for a in ev.journal.answers)
    if not codes["cost_ceiling_reached"]:
        gaps.append("the cost ceiling was never reached")
    if not codes["rate_limited"]:
        gaps.append("no purchase met the rate limit")
    for target in (*STORES, "brevo", "host"):
        if not any(name.startswith(target) for name in injector.applied):
            gaps.append(f"no {target} fault was applied")
    if not ev.refusals_injected:
        gaps.append("no Brevo refusal was answered")
    gaps += _contact_gaps(ev, injector)
    if not any(a.replayed for a in ev.journal.answers):
        gaps.append("no key was replayed")
    if not ev.fulfilled:
        gaps.append("nothing was bought")
    gaps += [f"fault not applied: {error}" for error in injector.errors]
    return gaps


def _contact_gaps(ev: Evidence, injector: Injector) -> list[str]:
    c, gaps = ev.contacts, []
    if not c.drain.done:
        gaps.append(
            f"the contact queue did not drain in {c.drain.seconds:.0f} s (health: {c.drain.backlog}): "
            "the buyers still queued were not checked"
        )
    if not injector.applied["brevo storm"]:
        gaps.append("no 429 storm on Brevo's contacts family was applied")
    if not c.family["refused"]:
        gaps.append("Brevo's contacts family answered no 429: no storm or limit met the drainer")
    if not injector.drain_kills["while draining"]:
        gaps.append("no host was killed while a drain run was going")
    if not set(c.owner) & {order.email for order in ev.served_buyers()}:
        gaps.append("no buyer was served for a contact the owner made")
    return gaps


def summary(
    config: Config, ev: Evidence, injector: Injector, repairs: list[str], faults: list[Fault]
) -> list[str]:
    answers = ev.journal.answers
    statuses = Counter("no answer" if a.status is None else str(a.status) for a in answers)
    channels = Counter(a.channel for a in answers)
    keyed = [o for o in ev.journal.orders if o.key]
    settled = Counter("none" if a is None else str(a.status) for a in ev.settled.values())
    ceiling = Counter(_result(r, "cost_ceiling") for r in ev.fulfilled.values())
    idem = Counter(_result(r, "idempotency") for r in ev.fulfilled.values())
    ledger_total = sum(listing.count for listing in ev.ledger.values())
    return [
        f"soak: seed {config.seed}, {config.seconds:g} s of load, {config.hosts} hosts, "
        f"{config.agents} agents, {config.orders_per_second:g} new orders/s",
        f"settings: lease {config.lease_seconds} s, storage timeout {config.storage_timeout_seconds:g} s, "
        f"Brevo timeout {config.brevo_timeout_seconds:g} s, rate limit {config.rate_limit}/h per address, "
        f"ceiling {config.ceiling_purchases} purchases",
        f"faults scheduled {len(faults)}, applied: "
        + ", ".join(f"{name} {n}" for name, n in sorted(injector.applied.items())),
        f"requests {len(answers)} (mcp {channels['mcp']}, http {channels['http']}); answers: "
        + ", ".join(f"{s} x{n}" for s, n in sorted(statuses.items()))
        + f"; replays {sum(a.replayed for a in answers)}",
        f"orders {len(ev.journal.orders)}: {len(keyed)} keyed (final answers "
        + ", ".join(f"{s} x{n}" for s, n in sorted(settled.items()))
        + f"), {len(ev.journal.orders) - len(keyed)} without a key",
        f"receipts: fulfilled {len(ev.fulfilled)}, answered 200 {len(ev.seen)}, stored {len(ev.stored)}, "
        f"ledger {ledger_total}; cost check "
        + ", ".join(f"{r} {n}" for r, n in sorted(ceiling.items()))
        + "; idempotency check "
        + ", ".join(f"{r} {n}" for r, n in sorted(idem.items())),
        "documented exception, unkeyed 200s answered while Table and Blob were both down: "
        + (", ".join(f"{rid} ({_where(ev, rid)})" for rid in sorted(ev.off_record())) or "none"),
        f"emails {len(ev.emails)}; Brevo refusals answered {ev.refusals_injected}; repair timer: "
        + ", ".join(repairs),
        *_contact_summary(ev, injector),
    ]


def _contact_summary(ev: Evidence, injector: Injector) -> list[str]:
    c = ev.contacts
    served = {order.email for order in ev.served_buyers()}
    made = [email for email in c.found if email not in c.owner]
    imported: Counter[str] = Counter()
    for report in c.imports:
        imported.update(created=report["created"], unchanged=report["unchanged"])
    requests = c.stats.get("requests", {})
    drained = "drained" if c.drain.done else "NOT drained"
    kills = injector.drain_kills
    return [
        f"contacts: served buyers {len(served)}, contacts made {len(made)}, the owner's "
        f"{len(c.owner)} ({len(set(c.owner) & served)} bought for); queue {drained} once the keys "
        f"settled ({c.drain.runs} runs asked, {c.drain.seconds:.0f} s), waiting {c.waiting}, "
        f"poisoned {c.poisoned} (create refusals answered {ev.contact_refusals})",
        f"Brevo contact calls: imports {requests.get(IMPORT, 0)} (contacts created "
        f"{imported['created']}, left as they were {imported['unchanged']}), creates "
        f"{requests.get(CREATE, 0) - len(c.owner)} (and the owner's {len(c.owner)}); contacts family "
        f"{c.family['limit']}: accepted {c.family['accepted']}, refused 429 {c.family['refused']}; "
        "kill mid-drain: " + (", ".join(f"{how} {n}" for how, n in sorted(kills.items())) or "none"),
    ]


def _where(ev: Evidence, receipt_id: str) -> str:
    places = [name for name, found in (("Blob", ev.stored), ("ledger", ev.listed())) if receipt_id in found]
    return "in " + " and ".join(places) if places else "on no store"


def _result(receipt: dict, name: str) -> str:
    return next((c["result"] for c in receipt.get("checks", ()) if c["name"] == name), "none")
