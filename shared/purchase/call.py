"""What a purchase is asked, what it answers, and what one run of it learns on the way: the nouns
the purchase's steps share (`shared.purchase.storefront` composes the steps; `shared.purchase.operation`
runs them under the exactly-once executor)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.purchase.agent import UNVERIFIED, Agent
from shared.purchase.governance import Governance
from shared.purchase.receipt.document import Checks, new_receipt_id
from shared.purchase.schema import PurchaseInput, normalise_email
from shared.purchase.tokens import DownloadToken
from shared.seams.brevo import BrevoClient
from shared.seams.claims import Claim
from shared.seams.contact_queue import ContactQueue
from shared.seams.counters import Reservation
from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue

OPERATION = "purchase_free_bundle"
# Every door a purchase comes in by, as a receipt's `caller.channel` names it.
CHANNELS = ("mcp", "http", "a2a", "ucp")


@dataclass(frozen=True)
class Caller:
    channel: str
    user_agent: str = ""
    agent: Agent | None = None

    def __post_init__(self) -> None:
        if self.channel not in CHANNELS:
            raise ValueError(f"a purchase comes in by one of {CHANNELS}, not {self.channel!r}")

    def as_dict(self) -> dict[str, object]:
        agent = self.agent.as_dict() if self.agent else UNVERIFIED
        return {"channel": self.channel, "user_agent": self.user_agent[:200], "agent": agent}


@dataclass(frozen=True)
class PurchaseCall:
    arguments: object
    header_key: str | None
    client_ip: str
    caller: Caller


@dataclass(frozen=True)
class Outcome:
    status: int
    body: bytes
    replayed: bool = False
    retry_after: int | None = None
    may_have_sent: bool = False  # a failure after which the email may be out: its key is kept

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass(frozen=True)
class StoreConfig:
    public_base_url: str
    sender_email: str
    sender_name: str
    download_token_ttl_seconds: int = 7 * 24 * 3600
    missing_secrets: tuple[str, ...] = ()
    idempotency_fail_open: bool = False
    record_patience_seconds: float = 5.0
    email_template_dir: str = (
        ""  # an operator's email templates, checked at start-up (shared.purchase.emails)
    )

    def receipt_url(self, receipt_id: str) -> str:
        return f"{self.public_base_url}/api/receipts/{receipt_id}"


@dataclass(frozen=True)
class PurchaseServices:
    """The stores and clients the purchase's steps call."""

    config: StoreConfig
    hasher: Hasher
    governance: Governance
    receipts: BlobReceiptStore
    brevo: BrevoClient
    keys: Callable[[], KeySet]
    ledger: TableLedger
    repairs: RepairQueue
    contacts: ContactQueue
    clock: Callable[[], float]


@dataclass(frozen=True)
class Validated:
    """The request as the input schema accepted it, and its buyer as a receipt names them: the
    address's keyed hash and a masked hint, never the address."""

    purchase: PurchaseInput
    buyer_id: str
    buyer_hint: str


@dataclass
class Attempt:
    """One run of the purchase: the call, the request once validated, and what the run has learnt
    so far; turned into the receipt at the end."""

    call: PurchaseCall
    validated: Validated | None = None
    receipt_id: str = field(default_factory=new_receipt_id)
    checks: Checks = field(default_factory=Checks)
    resumed: bool = False
    brevo_key: str | None = None  # derived from the claim once held, as is the token's id
    token_id: str | None = None
    claimed_at: float = 0.0
    token: DownloadToken | None = None
    email_attempted: bool = False
    receipt_body: bytes | None = None
    inherited_receipt: bool = False
    reservations: list[Reservation] = field(default_factory=list)
    may_have_sent: bool = False  # the executor kept the key because an email may be out

    @property
    def email_tag(self) -> str | None:
        """The tag an email for this claim carries in Brevo's log (no key or address in it)."""
        return f"purchase-{self.brevo_key}" if self.brevo_key else None


def scoped_key_hash(hasher: Hasher, key: str, email: str) -> str:
    """Keys belong to the buyer: the same key under another email is another key, so nobody can
    squat on, or probe, someone else's key. Keys cannot hold NUL, so a scoped hash never equals
    the unscoped one that claims written before scoping carry."""
    return hasher.idempotency_key(f"{key}\x00{normalise_email(email)}")


BREVO_KEY_NAMESPACE = uuid.UUID("5c1d7a52-0f0e-4a8e-9f55-5b0b1a7d3e21")


def brevo_idempotency_key(claim: Claim) -> str:
    """The email's idempotency key at Brevo: derived from the claim, so a taker of the claim sends
    with the same key as its dead holder did (and as the claims written so far derive it)."""
    return claim.derived_uuid(BREVO_KEY_NAMESPACE)


def token_id(claim: Claim) -> str:
    """The download token's id: the same whoever mints it for this claim."""
    return claim.derived_id("token")


def iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
