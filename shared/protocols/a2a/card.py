"""The A2A agent card (`GET /.well-known/agent-card.json`): A2A 1.0's card with the 0.3 fields its
clients read, describing the two skills (a free bundle, the catalog) and the signed-receipts
extension, signed by the store's key (card_signatures.py), cacheable with an ETag and a Last-Modified."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import TYPE_CHECKING

from shared import __version__
from shared.config.errors import NotConfigured
from shared.config.keys import KeySet
from shared.config.settings import Settings
from shared.protocols.a2a import card_signatures
from shared.protocols.a2a.answers import ARTIFACT_ID
from shared.protocols.a2a.protocol import INPUT_MODES, TEXT_TYPE, V03, V1
from shared.protocols.http import JSON_TYPE, Answer, Request, Usage, not_modified
from shared.purchase.call import OPERATION
from shared.purchase.catalog import BUNDLES, DEFAULT_BUNDLE_ID

if TYPE_CHECKING:
    from shared.seams.card_dates import TableCardDates

LIST_OPERATION = "list_bundles"
RECEIPTS_EXTENSION = "urn:storefront:a2a:signed-receipts:v1"
CARD_PATH = "/.well-known/agent-card.json"
CARD_USAGE = Usage(("GET", "HEAD"), "GET it for the agent card")
PURCHASE_EXAMPLE = {"email": "ada@example.org", "name": "Ada", "bundle_id": DEFAULT_BUNDLE_ID}
LIST_EXAMPLE = {"operation": LIST_OPERATION}


def card(settings: Settings) -> dict:
    """The card as served, unsigned: A2A 1.0's card, then the 0.3 fields its clients read."""
    return {**card_v1(settings), **_v03_fields(settings)}


def card_v1(settings: Settings) -> dict:
    """The card's A2A 1.0 fields, as a 1.0 reader rebuilds them: only fields 1.0 defines, and no
    default value a 1.0 verifier would drop before canonicalising (A2A 1.0 §8.4.1), so what is
    served is what it checks the signature over."""
    base = settings.public_base_url
    endpoint = _endpoint(settings)
    return {
        "name": "Storefront",
        "description": (
            "Gives away free digital bundles to AI agents: emails a bundle's download link to a "
            "buyer and answers with a signed audit receipt. Send one JSON object, as a data part "
            "(application/json) or as a text part that is only the object: the purchase arguments, "
            'or {"operation": "list_bundles"} for the catalog. Plain text is answered with what to send.'
        ),
        "version": __version__,
        "supportedInterfaces": [
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": V1},
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": V03},
        ],
        "capabilities": {
            "streaming": False,
            "pushNotifications": False,
            "extendedAgentCard": False,
            "extensions": [_receipts_extension(base)],
        },
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": [JSON_TYPE, TEXT_TYPE],
        "skills": [_purchase_skill(base), _list_skill()],
    }


def _v03_fields(settings: Settings) -> dict:
    """What a 0.3 client reads to find the endpoint (0.3 has no `supportedInterfaces`)."""
    return {"url": _endpoint(settings), "preferredTransport": "JSONRPC", "protocolVersion": "0.3.0"}


def _endpoint(settings: Settings) -> str:
    return f"{settings.public_base_url}/api/a2a"


def _jwks_url(base: str) -> str:
    """The store's public keys: what verifies its receipts and the card's signatures."""
    return f"{base}/.well-known/jwks.json"


def _receipts_extension(base: str) -> dict:
    return {
        "uri": RECEIPTS_EXTENSION,
        "description": (
            f'Every purchase task carries its receipt as the data part of the artifact "{ARTIFACT_ID}": '
            "a detached ES256 JWS over the receipt's canonical JSON, verifiable with the keys at "
            "jwksUrl; a fulfilled receipt is also on record at receiptUrl."
        ),
        "params": {
            "jwksUrl": _jwks_url(base),
            "receiptUrl": f"{base}/api/receipts/{{receipt_id}}",
            "artifactId": ARTIFACT_ID,
        },
    }


def _purchase_skill(base: str) -> dict:
    return {
        "id": OPERATION,
        "name": "Get a free bundle",
        "description": (
            "Emails a free bundle's download link. Send one data part (or a text part that is only "
            "the JSON object) with the purchase arguments (the body POST /api/a2a/purchase takes): "
            "email (required), name, bundle_id (one of "
            f"{', '.join(sorted(BUNDLES))}; default {DEFAULT_BUNDLE_ID}), idempotency_key (8-128 of "
            "A-Z a-z 0-9 . _ -). Without idempotency_key the messageId is the key: resend the same "
            "message to retry, and you get the original receipt, not a second email. Side effects: "
            "the buyer becomes a contact in the store's mailing system and gets one email. The answer "
            "is a finished task, completed, rejected (bad input, a limit, a key in use) or failed (try "
            f'again later), whose artifact "{ARTIFACT_ID}" is the signed receipt; GetTask reads a '
            f"completed one again by its id. Verify receipts with {_jwks_url(base)}."
        ),
        "tags": ["purchase", "free", "bundle", "email", "receipt", "idempotent"],
        "examples": [
            json.dumps(PURCHASE_EXAMPLE),
            json.dumps({**PURCHASE_EXAMPLE, "idempotency_key": "order-2026-0001"}),
        ],
        "inputModes": INPUT_MODES,
        "outputModes": [JSON_TYPE, TEXT_TYPE],
    }


def _list_skill() -> dict:
    return {
        "id": LIST_OPERATION,
        "name": "List the free bundles",
        "description": (
            'Lists the bundles on offer. Send one data part {"operation": "list_bundles"}; the answer '
            'is a message whose data part is {"bundles": [{"id", "title", "description", "price", '
            '"currency"}]}, the document GET /api/bundles serves. Each id is a bundle_id to purchase. '
            "Read-only: no email, no purchase counted."
        ),
        "tags": ["catalog", "bundles", "read-only"],
        "examples": [json.dumps(LIST_EXAMPLE)],
        "inputModes": INPUT_MODES,
        "outputModes": [JSON_TYPE],
    }


def agent_card(
    req: Request, settings: Settings, keys: Callable[[], KeySet], dates: TableCardDates | None = None
) -> Answer:
    """The card, signed when the store has a signing key, cacheable for five minutes, with an ETag
    (a conditional GET or HEAD gets 304). The ETag is of the unsigned card and the signatures'
    protected header, never of the signature bytes, which differ from one instance to the next:
    every instance names the same card under the same tag, and a new card or key gets a new one.
    It is weak (W/) for that reason: equal meaning, not equal bytes. Last-Modified is when this
    card became the store's current card, on record in `dates`; without a record, none is sent."""
    served = card(settings)
    try:
        key_set: KeySet | None = keys()
    except NotConfigured:  # no signing key yet: the card is served unsigned
        key_set = None
    jku = _jwks_url(settings.public_base_url)
    header = card_signatures.header(key_set, jku) if key_set else {}
    unsigned = json.dumps(served, indent=2).encode()
    digest = hashlib.sha256(unsigned + b"\n" + json.dumps(header, sort_keys=True).encode())
    etag = f'W/"{digest.hexdigest()[:32]}"'
    headers = {"Cache-Control": "public, max-age=300", "ETag": etag}
    since = dates.since(etag, datetime.now(timezone.utc)) if dates is not None else None
    if since is not None:
        headers["Last-Modified"] = format_datetime(since, usegmt=True)
    if not_modified(req, etag, since):
        return Answer(304, b"", headers)
    if key_set is not None:
        views = [card_v1(settings), served]
        served = {**served, "signatures": card_signatures.sign(views, key_set, jku)}
    return Answer(200, json.dumps(served, indent=2).encode(), {"Content-Type": JSON_TYPE, **headers})
