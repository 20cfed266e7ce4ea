"""Signed receipts: every receipt carries a detached ES256 JWS over its own canonical form, so
anyone holding the store's public keys (the JWKS) can check it was issued by the store unaltered.

    "signature": {"alg": "ES256", "kid": "<key thumbprint>", "jws": "<header>..<signature>"}

The signed payload is the receipt without its `signature` member, serialised canonically: keys
sorted, no insignificant whitespace, UTF-8 (RFC 8785 for the value types receipts hold). Putting the
payload back between the two dots gives a standard compact JWS that any JOSE library verifies.
A stored receipt is also byte-exact: its bytes are `receipts.encode` of its content, so a verifier
that checks the bytes as well rejects any changed byte, whitespace included.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from jose import jws
from jose.exceptions import JOSEError

from shared.config.keys import ALGORITHM, KeySet
from shared.purchase.receipt.document import encode

TYPE = "storefront-receipt+jws"


def canonical(receipt: dict) -> bytes:
    unsigned = {k: v for k, v in receipt.items() if k != "signature"}
    return json.dumps(_numbers(unsigned), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _numbers(value: object) -> object:
    """RFC 8785 writes a number by its value: 1.0 is `1`. A receipt passed through a client that
    reads every number as a float (A2A's protobuf `Value`, JavaScript) still canonicalises to the
    bytes that were signed."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def sign(receipt: dict, keys: KeySet) -> dict[str, str]:
    """The `signature` member for `receipt` (any existing signature is ignored)."""
    headers = {"kid": keys.kid, "typ": TYPE}
    compact = jws.sign(canonical(receipt), keys.private_pem, headers=headers, algorithm=ALGORITHM)
    protected, _, signature = compact.split(".")
    return {"alg": ALGORITHM, "kid": keys.kid, "jws": f"{protected}..{signature}"}


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reason: str
    kid: str = ""


def verify(body: bytes, jwks: dict, *, exact_bytes: bool = True) -> Verdict:
    """Check a receipt's signature against a JWKS; with `exact_bytes`, also that the bytes are the
    store's own serialisation of the content (so no byte was changed, whitespace included).
    A verdict for any input: whatever a forged receipt or key set makes a library raise (a key
    off its curve, a document nested past the stack) is an invalid receipt, never an exception."""
    try:
        return _verify(body, jwks, exact_bytes)
    except Exception as exc:  # noqa: BLE001 - the input is the attacker's; the answer is a verdict
        return Verdict(False, f"the receipt or its key set cannot be checked ({type(exc).__name__})")


def _verify(body: bytes, jwks: dict, exact_bytes: bool) -> Verdict:
    try:
        receipt = json.loads(body)
    except (ValueError, RecursionError):
        return Verdict(False, "not a JSON receipt")
    signature = receipt.get("signature") if isinstance(receipt, dict) else None
    if not isinstance(signature, dict) or not isinstance(signature.get("jws"), str):
        return Verdict(False, "the receipt carries no signature")
    if set(signature) != {"alg", "kid", "jws"}:
        return Verdict(False, "the signature member holds something other than alg, kid and jws")
    compact = _attach(signature["jws"], canonical(receipt))
    if compact is None:
        return Verdict(False, "the signature is not a detached compact JWS")
    try:
        header = jws.get_unverified_header(compact)
    except (JOSEError, RecursionError):  # a header of nested arrays parses past the stack
        return Verdict(False, "the signature header is unreadable")
    kid = str(header.get("kid", ""))
    if header.get("alg") != ALGORITHM or signature["alg"] != ALGORITHM:
        return Verdict(False, f"algorithm {header.get('alg')!r} is not {ALGORITHM}", kid)
    if signature["kid"] != kid:
        return Verdict(False, "the signature's kid differs from the signed header's kid", kid)
    key = next((k for k in jwks.get("keys", []) if isinstance(k, dict) and k.get("kid") == kid), None)
    if key is None:
        return Verdict(False, f"no published key with kid {kid!r}", kid)
    try:
        jws.verify(compact, key, algorithms=[ALGORITHM])
    except JOSEError:
        return Verdict(False, "the signature does not match the receipt's content", kid)
    if exact_bytes and encode(receipt) != body:
        return Verdict(False, "the content is signed, but its bytes differ from the stored receipt", kid)
    return Verdict(True, f"signed by the store's key {kid}", kid)


def _canonical_b64(segment: str) -> bool:
    """Base64url without padding whose unused trailing bits are zero: one spelling per value."""
    try:
        decoded = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (ValueError, TypeError):
        return False
    return base64.urlsafe_b64encode(decoded).rstrip(b"=").decode() == segment


def _attach(detached: str, payload: bytes) -> str | None:
    parts = detached.split(".")
    if len(parts) != 3 or parts[1] or not all(map(_canonical_b64, (parts[0], parts[2]))):
        return None
    encoded = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
    return f"{parts[0]}.{encoded}.{parts[2]}"
