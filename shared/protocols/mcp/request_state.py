"""The `requestState` of an MCP multi round-trip request: what the server needs between rounds,
carried by the client instead of kept in memory, so any instance can answer the retry.

The client holds it, so it is attacker-controlled input: the claims are sealed with an HMAC under
the store's hash secret (its own label), expire, and name the request they belong to (method, tool
and a digest of the arguments), so a state cannot be altered, forged, kept past its time or moved
to another request. It carries no email or key in the clear, only what the client sent already.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json

from shared.config.hashing import Hasher

FORMAT = "rs1"
MAX_LENGTH = 2048


class InvalidState(ValueError):
    """The state was not sealed by this store, was altered or names another request."""


class Expired(InvalidState):
    """The state is the store's own, for this request, but older than its time to live."""


def digest(value: object) -> str:
    """A digest of a request's salient parameters, the same for equal JSON whatever the key order."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def seal(hasher: Hasher, claims: dict, now: float, ttl: int) -> str:
    payload = json.dumps({**claims, "exp": int(now) + ttl}, sort_keys=True, separators=(",", ":"))
    body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
    return f"{FORMAT}.{body}.{hasher.request_state(f'{FORMAT}.{body}')}"


def unseal(hasher: Hasher, state: object, expected: dict, now: float) -> dict:
    """The claims of a state this store sealed for exactly the `expected` claims, still fresh."""
    if not isinstance(state, str) or len(state) > MAX_LENGTH or state.count(".") != 2:
        raise InvalidState("requestState is not one this server issued")
    fmt, body, mac = state.split(".")
    if fmt != FORMAT or not hmac.compare_digest(mac.encode(), hasher.request_state(f"{fmt}.{body}").encode()):
        raise InvalidState("requestState is not one this server issued, or it was altered")
    try:
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidState("requestState is not one this server issued") from None
    if not isinstance(claims, dict) or not isinstance(claims.get("exp"), int):
        raise InvalidState("requestState is not one this server issued")
    if any(claims.get(name) != value for name, value in expected.items()):
        raise InvalidState("requestState belongs to another request: send this one again without it")
    if claims["exp"] < now:
        raise Expired("requestState has expired: send the request again without it")
    return claims
