"""Download tokens: compact JWS (ES256) signed with the store's key, carrying `exp`, `aud`,
`sub` (the bundle) and a unique `jti`. The header names the key by its RFC 7638 thumbprint (`kid`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from jose import jwt

from shared.config.keys import ALGORITHM, KeySet

AUDIENCE = "storefront-download"


@dataclass(frozen=True)
class DownloadToken:
    token: str
    jti: str
    issued_at: int
    expires_at: int


class TokenSigner:
    def __init__(
        self,
        keys: KeySet,
        issuer: str,
        ttl_seconds: int,
        clock: Callable[[], float] = time.time,
    ):
        self._keys = keys
        self._issuer = issuer
        self._ttl = ttl_seconds
        self._clock = clock
        self.kid = keys.kid

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
        token = jwt.encode(claims, self._keys.private_pem, algorithm=ALGORITHM, headers={"kid": self.kid})
        return DownloadToken(token=token, jti=jti, issued_at=now, expires_at=now + self._ttl)
