"""Download tokens: compact JWS (ES256) signed with the store's key, carrying `exp`, `aud`,
`sub` (the bundle) and a unique `jti`. The header names the key by its RFC 7638 thumbprint (`kid`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jose import jwt

from shared.errors import NotConfigured

AUDIENCE = "storefront-download"
ALGORITHM = "ES256"


@dataclass(frozen=True)
class DownloadToken:
    token: str
    jti: str
    issued_at: int
    expires_at: int


class TokenSigner:
    def __init__(
        self,
        private_key_pem: str,
        issuer: str,
        ttl_seconds: int,
        clock: Callable[[], float] = time.time,
    ):
        self._pem = private_key_pem
        self._issuer = issuer
        self._ttl = ttl_seconds
        self._clock = clock
        self.kid = key_id(_load_private_key(private_key_pem))

    def mint(self, bundle_id: str, *, jti: str | None = None, issued_at: int | None = None) -> DownloadToken:
        """A new token; given the `jti` and `issued_at` of an earlier one, the same claims again
        (for a send resumed after a crash, so the receipt names the token the email carries)."""
        now = int(self._clock()) if issued_at is None else issued_at
        jti = jti or secrets.token_urlsafe(16)
        claims = {
            "iss": self._issuer,
            "aud": AUDIENCE,
            "sub": bundle_id,
            "jti": jti,
            "iat": now,
            "exp": now + self._ttl,
        }
        token = jwt.encode(claims, self._pem, algorithm=ALGORITHM, headers={"kid": self.kid})
        return DownloadToken(token=token, jti=jti, issued_at=now, expires_at=now + self._ttl)


def _load_private_key(pem: str) -> ec.EllipticCurvePrivateKey:
    if not pem:
        raise NotConfigured("STOREFRONT_SIGNING_KEY is not set; the store cannot mint download tokens")
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise NotConfigured("STOREFRONT_SIGNING_KEY is not a readable PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise NotConfigured("STOREFRONT_SIGNING_KEY must be an EC P-256 private key (ES256)")
    return key


def public_jwk(key: ec.EllipticCurvePrivateKey) -> dict[str, str]:
    numbers = key.public_key().public_numbers()
    return {"crv": "P-256", "kty": "EC", "x": _b64(numbers.x), "y": _b64(numbers.y)}


def key_id(key: ec.EllipticCurvePrivateKey) -> str:
    """RFC 7638 JWK thumbprint of the public key."""
    canonical = json.dumps(public_jwk(key), separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def _b64(n: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()
