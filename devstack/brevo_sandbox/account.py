"""The account behind the api-key (``/_sandbox/account``): whether transactional email is
activated, and how many email credits are left, with the refusals Brevo answers when either
stops a send: 402 ``not_enough_credits`` (400 with ``credits_status``, as some accounts report),
402 ``account_under_validation``, and 403 ``permission_denied`` with the SMTP relay's "not yet
activated" sentence. The codes are Brevo's documented ones (developers.brevo.com "Key concepts",
the status table in its SDKs) and, for activation, what accounts report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devstack.brevo_sandbox.wire import ApiError, invalid, is_int

ACTIVATIONS = ("active", "not_activated", "under_validation")
ACCOUNT_KEYS = frozenset({"transactional", "email_credits", "credits_status"})
NOT_ACTIVATED_MESSAGE = (
    "Unable to send email. Your SMTP account is not yet activated. "
    "Please contact us at contact@brevo.com to request activation"
)
UNDER_VALIDATION_MESSAGE = "Your account is under validation"
NOT_ENOUGH_CREDITS_MESSAGE = "You don't have enough credit to perform the request"


@dataclass
class Account:
    """``email_credits`` None: no limit; otherwise one credit per recipient of each email sent."""

    transactional: str = "active"
    email_credits: int | None = None
    credits_status: int = 402


def parse_account(payload: dict[str, Any]) -> Account:
    """The whole account as ``PUT /_sandbox/account`` gives it; what it leaves out is the default."""
    unknown = sorted(set(payload) - ACCOUNT_KEYS)
    if unknown:
        raise invalid(f"unknown keys {', '.join(unknown)}: give {', '.join(sorted(ACCOUNT_KEYS))}")
    transactional = payload.get("transactional", "active")
    if transactional not in ACTIVATIONS:
        raise invalid(f"transactional must be one of {', '.join(ACTIVATIONS)}")
    credits = payload.get("email_credits")
    if credits is not None and (not is_int(credits) or credits < 0):
        raise invalid("email_credits must be a whole number from 0, or null for no limit")
    status = payload.get("credits_status", 402)
    if status not in (400, 402):
        raise invalid("credits_status must be 402 (as documented) or 400 (as some report it)")
    return Account(transactional, credits, status)


def refuse_send(account: Account, recipients: int) -> None:
    """Raise Brevo's refusal when this account cannot send an email to *recipients* addresses."""
    if account.transactional == "not_activated":
        raise ApiError(403, "permission_denied", NOT_ACTIVATED_MESSAGE)
    if account.transactional == "under_validation":
        raise ApiError(402, "account_under_validation", UNDER_VALIDATION_MESSAGE)
    if account.email_credits is not None and account.email_credits < recipients:
        raise ApiError(account.credits_status, "not_enough_credits", NOT_ENOUGH_CREDITS_MESSAGE)


def spend(account: Account, recipients: int) -> None:
    if account.email_credits is not None:
        account.email_credits -= recipients
