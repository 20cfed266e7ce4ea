"""The purchase's effects: contact, token and send. Each runs once per claim: the contact and the
email are skipped when a predecessor's progress shows them done, and the download token derives
from the claim, so whoever sends the email mints the same token.

The contact is not made here: the buyer is put on the contact queue, durably, before the email
goes, and the drainer (`shared.purchase.contacts`) makes the contact later, inside Brevo's limits.
Between the send and its recovery point, the email's Brevo idempotency key and tag, both derived
from the claim, keep a taker from sending twice (docs/idempotency.md#how-it-works, the send gap)."""

from __future__ import annotations

import logging

from shared.config.errors import (
    NotConfigured,
    StorageOutage,
    StorefrontError,
    StoreUnavailable,
    UpstreamError,
    UpstreamUnavailable,
)
from shared.purchase import emails
from shared.purchase.call import Attempt, PurchaseServices, StoreConfig, iso
from shared.purchase.schema import PurchaseInput
from shared.purchase.tokens import DownloadToken, TokenSigner
from shared.seams.brevo import IDEMPOTENCY_WINDOW_SECONDS, QUOTA_STATUS, Email

log = logging.getLogger("storefront.purchase")


def configured(config: StoreConfig) -> None:
    """Nothing leaves a store whose secrets are missing or refused."""
    if config.missing_secrets:
        raise NotConfigured(
            "the store is not configured: "
            + ", ".join(config.missing_secrets)
            + " unset, not resolved from Key Vault, or refused as an example or weak value; its health"
            + " check names each and why"
        )


def signer(services: PurchaseServices) -> TokenSigner:
    config = services.config
    return TokenSigner(
        services.keys(), config.public_base_url, config.download_token_ttl_seconds, services.clock
    )


def check_recordable(services: PurchaseServices, attempt: Attempt, keyed: bool) -> None:
    """An unkeyed purchase whose guards found the Table down sends nothing unless Blob can
    take its receipt: with both stores down, a receipt answered 200 could not be on record."""
    if keyed or "degraded" not in (attempt.checks.result(c) for c in ("rate_limit", "cost_ceiling")):
        return
    try:
        services.receipts.probe()
    except StorageOutage:
        raise StoreUnavailable(
            "table and blob storage are both unreachable, so this purchase could not be recorded; "
            "nothing was sent",
            retry_after=5,
        ) from None


CONTACT_QUEUED = "contact queued for Brevo: created once the queue drains, an existing contact left unchanged"


def contact(services: PurchaseServices, attempt: Attempt, purchase: PurchaseInput) -> None:
    """The buyer on the contact queue, once, before anything is sent: a queue that cannot take
    it stops the purchase (503), so no buyer is served without becoming a contact."""
    checks = attempt.checks
    if checks.has("contact_upsert"):
        return
    try:
        services.contacts.enqueue(purchase.email, purchase.name)
    except StorageOutage:
        message = (
            "the buyer could not be queued to become a Brevo contact: storage is unreachable; "
            "no email was sent"
        )
        checks.set("contact_upsert", "fail", message)
        raise StoreUnavailable(message, retry_after=5) from None
    checks.set("contact_upsert", "pass", CONTACT_QUEUED)


def token(signer: TokenSigner, attempt: Attempt, purchase: PurchaseInput) -> DownloadToken:
    """The download token; under a claim its id and issue time derive from the claim."""
    held = attempt.token_id is not None
    return signer.mint(
        purchase.bundle.id,
        jti=attempt.token_id,
        issued_at=(int(attempt.claimed_at) or None) if held else None,
    )


def send(services: PurchaseServices, attempt: Attempt, purchase: PurchaseInput, token: DownloadToken) -> None:
    """The fulfillment email, unless Brevo's log shows an earlier attempt's."""
    checks = attempt.checks
    attempt.email_attempted = True
    try:
        earlier = _earlier_send(services, attempt, purchase)
        if earlier is not None:
            detail = f"already accepted by Brevo as {earlier} before a restart (found in its log)"
            checks.set("fulfillment_email", "pass", detail)
            return
        message_id = services.brevo.send_email(
            message(services.config, purchase, token, attempt.email_tag), attempt.brevo_key
        )
    except StorefrontError as exc:
        _refused(attempt, exc)
        checks.set("fulfillment_email", "fail", exc.message)
        raise
    if message_id is None:
        checks.set("fulfillment_email", "pass", "already accepted by Brevo before a restart")
    else:
        checks.set("fulfillment_email", "pass", f"accepted by Brevo as {message_id}")


def _refused(attempt: Attempt, exc: StorefrontError) -> None:
    """A send Brevo refused outright (a 4xx: its rate limit, the account's quota) sent nothing,
    so a first attempt's reservations go back and its claim is released: the buyer's retry is a
    new purchase that counts once and sends once. A resumed attempt keeps them: its predecessor
    may have sent. The quota's refusal is the operator's to fix, so it is logged, once per
    refused purchase, naming no buyer."""
    if not isinstance(exc, UpstreamError):
        return
    if exc.not_sent and not attempt.resumed:
        attempt.email_attempted = False
    if exc.upstream_status == QUOTA_STATUS:
        log.error(
            "Brevo refused a fulfillment email for the account's sending quota or plan (402 %s): "
            "buyers are answered 503 until the plan allows more sends",
            exc.upstream_code,
        )


def _earlier_send(services: PurchaseServices, attempt: Attempt, purchase: PurchaseInput) -> str | None:
    """For a resumed claim past Brevo's idempotency window, the message id of the email an
    earlier attempt got accepted, if Brevo's log shows one. Inside the window the key covers the
    resend and the log is not asked; past it, only the log can tell, so a failed lookup stops the
    run (503) rather than risk a second email."""
    if not attempt.resumed or attempt.email_tag is None:
        return None
    if services.clock() - attempt.claimed_at < IDEMPOTENCY_WINDOW_SECONDS:
        return None
    try:
        return services.brevo.find_sent(purchase.email, attempt.email_tag)
    except StorefrontError as exc:
        if not isinstance(exc, UpstreamUnavailable):
            raise  # a lasting refusal (502): retrying soon would not help
        raise UpstreamUnavailable(
            "Brevo's log could not confirm whether the earlier attempt's email went out; retry later",
            retry_after=max(exc.retry_after or 0, 30),
        ) from None


def message(config: StoreConfig, purchase: PurchaseInput, token: DownloadToken, tag: str | None) -> Email:
    """The fulfillment email as Brevo sends it: the content (`shared.purchase.emails`) addressed."""
    bundle = purchase.bundle
    content = emails.fulfillment_email(
        name=purchase.name,
        bundle=bundle,
        link=f"{config.public_base_url}/api/download/{token.token}",
        expires_at=iso(token.expires_at),
        template_dir=config.email_template_dir,
    )
    return Email(
        sender_email=config.sender_email,
        sender_name=config.sender_name,
        to_email=purchase.email,
        to_name=purchase.name,
        subject=content.subject,
        html=content.html,
        text=content.text,
        tags=("storefront", bundle.id, *((tag,) if tag else ())),
    )
