"""The purchase's first steps, govern and validate: the client's rate, the input, the recipient's
limit and the day's cost ceiling, each a governance reservation the exactly-once executor gives
back when the purchase cannot have happened. They run in the order that lets bad input count
against the client's rate; a resumed purchase skips those its predecessor passed (they came back
with its progress)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from shared.config.errors import LimitExceeded, StorageOutage, StorefrontError
from shared.config.hashing import Hasher
from shared.purchase.agent import Agent
from shared.purchase.call import Attempt, Validated
from shared.purchase.governance import Governance, Limits
from shared.purchase.receipt.document import mask_email
from shared.purchase.schema import PurchaseInput, check_shape, validate_arguments
from shared.seams.counters import Reservation

log = logging.getLogger("storefront.purchase")
Taken = Reservation | list[Reservation]  # what a guard takes: one reservation, or several


class Guards:
    def __init__(self, governance: Governance, hasher: Hasher):
        self._governance = governance
        self._hasher = hasher

    def govern(self, attempt: Attempt) -> PurchaseInput:
        """Every guard, in order; the validated input."""
        limits = self._governance.limits
        call = attempt.call
        self._guard(
            attempt,
            "rate_limit",
            self._rate_reservations(call.client_ip, call.caller.agent),
            _within_rate(limits, call.caller.agent),
        )
        purchase = validate(attempt, self._hasher)
        self._guard_recipient(attempt, purchase.email)
        self._guard(
            attempt,
            "cost_ceiling",
            self._governance.reserve_cost,
            f"within ${limits.daily_cost_ceiling_usd} per day "
            f"(this purchase ${limits.cost_per_purchase_usd})",
        )
        return purchase

    def _rate_reservations(self, ip: str, agent: Agent | None) -> Callable[[], list[Reservation]]:
        if agent is not None:
            return functools.partial(self._governance.reserve_agent_rate, agent)
        return lambda: [self._governance.reserve_rate(ip)]

    def give_back(self, reservation: Reservation) -> None:
        self._governance.release(reservation)

    def _guard_recipient(self, attempt: Attempt, email: str) -> None:
        """The per-recipient limit, reported inside the rate_limit check (the checks stay six).
        A resumed attempt whose predecessor reached the cost ceiling took it already."""
        if attempt.checks.has("cost_ceiling"):
            return
        limits = self._governance.limits
        reserve = functools.partial(self._governance.reserve_recipient, email)
        if _reserve(attempt, "rate_limit", reserve) and attempt.checks.result("rate_limit") == "pass":
            attempt.checks.set(
                "rate_limit",
                "pass",
                f"{_within_rate(limits, attempt.call.caller.agent)} and "
                f"{limits.recipient_limit_per_day} per day to this recipient",
            )

    def _guard(
        self,
        attempt: Attempt,
        check: str,
        reserve: Callable[[], Taken],
        within: str,
    ) -> None:
        """Take one governance reservation, unless a predecessor's is on the claim."""
        if not attempt.checks.has(check) and _reserve(attempt, check, reserve):
            attempt.checks.set(check, "pass", within)


def _within_rate(limits: Limits, agent: Agent | None) -> str:
    if agent is not None:
        return (
            f"within {limits.agent_rate} per hour from this verified agent "
            f"({limits.agent_site_rate} from its site)"
        )
    return f"within {limits.rate_limit_per_hour} per hour from this client"


def _reserve(attempt: Attempt, check: str, reserve: Callable[[], Taken]) -> bool:
    """Take a reservation (or several), reported under `check`: a refusal fails the check
    (429); an unreachable counter store fails open and marks it `degraded` (False)."""
    try:
        taken = reserve()
        attempt.reservations.extend(taken if isinstance(taken, list) else [taken])
    except LimitExceeded as exc:
        attempt.checks.set(check, "fail", exc.message)
        raise
    except StorageOutage as exc:
        log.warning("%s not enforced: %s", check, exc)
        attempt.checks.set(check, "degraded", "counter store unreachable; not enforced")
        return False
    return True


def validate(attempt: Attempt, hasher: Hasher) -> PurchaseInput:
    """The arguments against the input schema; the bundle and the buyer (hashed, masked) they name."""
    try:
        purchase = validate_arguments(attempt.call.arguments)
    except StorefrontError as exc:
        attempt.checks.set("input_schema", "fail", exc.message)
        raise
    attempt.checks.set("input_schema", "pass", "arguments match the input schema")
    attempt.validated = Validated(purchase, hasher.email(purchase.email), mask_email(purchase.email))
    return purchase


def check_input_shape(attempt: Attempt) -> None:
    """A malformed request is told so (400) before a reused key is (422)."""
    try:
        check_shape(attempt.call.arguments)
    except StorefrontError as exc:
        attempt.checks.set("input_schema", "fail", exc.message)
        raise
