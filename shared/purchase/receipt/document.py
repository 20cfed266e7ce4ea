"""The receipt: one protocol-neutral audit-trail document per purchase attempt.

Every answer of the purchase flow is a receipt of this one shape, whichever endpoint was called; only
the `caller` block says which. The six runtime checks always appear, in this order, each with a
result of pass, fail, skipped or degraded. A fulfilled receipt is written once to Blob storage
(`shared.seams.receipt_store`) and served back byte for byte (replays, the receipt URL).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from typing import TypeVar

T = TypeVar("T")
RECEIPT_VERSION = 1
CHECK_NAMES = (
    "idempotency",
    "input_schema",
    "rate_limit",
    "cost_ceiling",
    "contact_upsert",
    "fulfillment_email",
)
RESULTS = ("pass", "fail", "skipped", "degraded")
RECEIPT_ID_PATTERN = "^rcpt_[a-z2-7]{26}$"
_RECEIPT_ID_RE = re.compile(RECEIPT_ID_PATTERN)


def new_receipt_id() -> str:
    return "rcpt_" + base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()


def is_receipt_id(value: str) -> bool:
    return bool(_RECEIPT_ID_RE.fullmatch(value))


class Checks:
    """The six runtime checks, each starting as skipped ("not reached")."""

    def __init__(self) -> None:
        self._checks = {name: ("skipped", "not reached") for name in CHECK_NAMES}
        self._recorded: set[str] = set()

    def set(self, name: str, result: str, detail: str) -> None:
        if name not in self._checks or result not in RESULTS:
            raise ValueError(f"unknown check {name!r} or result {result!r}")
        self._checks[name] = (result, detail)
        self._recorded.add(name)

    def recorded(self) -> dict[str, list[str]]:
        """The checks that have a result so far, for a recovery point."""
        return {n: list(self._checks[n]) for n in CHECK_NAMES if n in self._recorded}

    def has(self, name: str) -> bool:
        return name in self._recorded

    def result(self, name: str) -> str | None:
        """The check's result once recorded, else None."""
        return self._checks[name][0] if name in self._recorded else None

    def restore(self, recorded: dict[str, list[str]]) -> None:
        for name, (result, detail) in recorded.items():
            self.set(name, result, detail)

    def as_list(self) -> list[dict[str, str]]:
        return [{"name": n, "result": r, "detail": d} for n, (r, d) in self._checks.items()]


def encode(receipt: dict) -> bytes:
    return json.dumps(receipt, indent=2, ensure_ascii=False).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mask_email(email: str) -> str:
    """A hint a person can recognise without the address being recoverable: j***@e***.com."""
    local, _, domain = email.partition("@")
    host, _, tld = domain.rpartition(".")
    return f"{local[:1]}***@{host[:1]}***.{tld}"


def _nullable(schema: dict) -> dict:
    """`schema` or null, as anyOf branches of one type each: portable to single-`type` dialects."""
    return {"anyOf": [schema, {"type": "null"}]}


_CHECK_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "enum": list(CHECK_NAMES)},
        "result": {"type": "string", "enum": list(RESULTS)},
        "detail": {"type": "string"},
    },
    "required": ["name", "result", "detail"],
}
OUTPUT_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "receipt_id": {"type": "string"},
        "version": {"type": "integer"},
        "issued_at": {"type": "string", "description": "ISO 8601 UTC time of issue."},
        "operation": {"type": "string"},
        "status": {"type": "string", "enum": ["fulfilled", "refused", "failed"]},
        "bundle": _nullable(
            {"type": "object", "properties": {"id": {"type": "string"}, "title": {"type": "string"}}}
        ),
        "buyer": _nullable(
            {
                "type": "object",
                "description": "The buyer as a keyed hash and a masked hint; never the raw email.",
                "properties": {"id": {"type": "string"}, "hint": {"type": "string"}},
            }
        ),
        "billing": {
            "type": "object",
            "properties": {
                "amount": {"type": "string"},
                "currency": {"type": "string"},
                "cost_estimate": {"type": "string"},
                "cost_currency": {"type": "string"},
            },
        },
        "checks": {"type": "array", "items": _CHECK_SCHEMA, "minItems": 6, "maxItems": 6},
        "receipt_url": _nullable({"type": "string"}),
        "download": _nullable(
            {
                "type": "object",
                "description": "The download token's id and expiry; the token itself is in the email.",
                "properties": {"token_id": {"type": "string"}, "expires_at": {"type": "string"}},
            }
        ),
        "error": _nullable(
            {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "retry_after_seconds": _nullable({"type": "integer"}),
                },
            }
        ),
        "caller": {
            "type": "object",
            "properties": {
                "channel": {"type": "string"},
                "user_agent": {"type": "string"},
                "agent": {
                    "type": "object",
                    "description": "Who asked: an agent whose Web Bot Auth signature verified (its key "
                    "directory's origin and key thumbprint), or verified false. Receipts issued before "
                    "agents were verified have no agent.",
                    "properties": {
                        "verified": {"type": "boolean"},
                        "origin": {"type": "string"},
                        "key_thumbprint": {"type": "string"},
                    },
                    "required": ["verified"],
                },
            },
        },
        "signature": _nullable(
            {
                "type": "object",
                "description": "Detached ES256 JWS over the receipt without this member, in canonical "
                "form; verify it with the keys at /.well-known/jwks.json.",
                "properties": {
                    "alg": {"type": "string"},
                    "kid": {"type": "string"},
                    "jws": {"type": "string"},
                },
            }
        ),
    },
    "required": [
        "receipt_id",
        "version",
        "issued_at",
        "operation",
        "status",
        "billing",
        "checks",
        "caller",
    ],
}
