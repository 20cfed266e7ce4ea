"""Redeeming a download token: the link in the fulfillment email.

Only a compact JWS with `alg: ES256`, signed by a key the store publishes (current or retired,
found by `kid`), is accepted; `exp`, `aud` and the bundle are checked before any byte of the file
is read. Everything else is refused: 401 for a token that is not the store's or no longer valid
(`alg: none`, HS256 keyed with the public key, a changed byte, expiry), 403 for a genuine token
that is not for this (audience, bundle).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from jose import jws, jwt
from jose.exceptions import JOSEError, JWTClaimsError

from shared.config.errors import BundleUnavailable, Forbidden, InvalidToken, StorageOutage
from shared.config.keys import ALGORITHM, KeySet
from shared.purchase.catalog import Bundle, find_bundle
from shared.purchase.tokens import AUDIENCE
from shared.seams.bundle_files import BlobBundleFiles

MAX_TOKEN_LENGTH = 4096
# A compact JWS: three base64url segments, none empty (ES256 signs, so there is a signature).
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
LEEWAY_SECONDS = 30


@dataclass(frozen=True)
class Download:
    bundle: Bundle
    body: bytes
    filename: str
    content_type: str = "application/zip"


class Downloads:
    def __init__(
        self,
        keys: Callable[[], KeySet],
        files: BlobBundleFiles,
        issuer: str,
        clock: Callable[[], float] = time.time,
    ):
        self._keys = keys
        self._files = files
        self._issuer = issuer
        self._clock = clock

    def redeem(self, token: str) -> Download:
        bundle = self.check(token)
        return Download(bundle, self._read(bundle), f"{bundle.id}.zip")

    def check(self, token: str) -> Bundle:
        """The bundle a token grants, or InvalidToken / Forbidden."""
        if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH or not _COMPACT_JWS.fullmatch(token):
            raise InvalidToken("the download link is malformed")
        try:
            header = jws.get_unverified_header(token)
        except Exception:  # noqa: BLE001 - JOSEError, or a header nested past the stack: a 401
            raise InvalidToken("the download link is malformed") from None
        if header.get("alg") != ALGORITHM:
            raise InvalidToken(f"the download link must be signed with {ALGORITHM}")
        key = self._keys().public_key(str(header.get("kid", "")))
        if key is None:
            raise InvalidToken("the download link was not signed by a key this store publishes")
        claims = self._verified_claims(token, key)
        bundle = find_bundle(str(claims.get("sub", "")))
        if bundle is None:
            raise Forbidden("the download link names a bundle this store does not offer")
        return bundle

    def _verified_claims(self, token: str, key: dict) -> dict:
        """Signature, audience and issuer by jose; expiry against this object's clock."""
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=self._issuer,
                options={
                    "require_aud": True,
                    "require_sub": True,
                    "verify_exp": False,  # checked below, against the injectable clock
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except JWTClaimsError as exc:
            raise Forbidden(f"the download link is not valid here: {exc}") from None
        except JOSEError:
            raise InvalidToken("the download link's signature does not verify") from None
        except Exception as exc:  # noqa: BLE001 - a forged link is a 401, whatever a library raises
            raise InvalidToken(f"the download link cannot be checked ({type(exc).__name__})") from None
        expires = claims.get("exp")
        if not isinstance(expires, (int, float)) or isinstance(expires, bool):
            raise InvalidToken("the download link carries no valid expiry")
        if expires + LEEWAY_SECONDS <= self._clock():
            raise InvalidToken("the download link has expired")
        return claims

    def _read(self, bundle: Bundle) -> bytes:
        try:
            body = self._files.read(bundle.id)
        except StorageOutage as exc:
            raise BundleUnavailable("bundle storage is unreachable; try again shortly") from exc
        if body is None:
            raise BundleUnavailable(f"the file for {bundle.title} is not available yet")
        return body
