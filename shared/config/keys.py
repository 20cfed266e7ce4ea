"""The store's signing keys. One current EC P-256 private key signs download tokens and receipts
(ES256); the public keys of retired keys stay published in the JWKS, so what they signed keeps
verifying after a rotation. Keys are named by their RFC 7638 thumbprint (`kid`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shared.config.errors import NotConfigured

ALGORITHM = "ES256"
_PUBLIC_MEMBERS = ("crv", "kty", "x", "y")


@dataclass(frozen=True)
class KeySet:
    private_pem: str
    kid: str
    public_keys: tuple[dict[str, str], ...]  # the current key first, then retired ones

    @classmethod
    def load(cls, private_pem: str, retired: tuple[dict, ...] = ()) -> KeySet:
        current = public_jwk(load_private_key(private_pem))
        published: dict[str, dict[str, str]] = {current["kid"]: current}
        for jwk in map(_published, retired):
            published.setdefault(jwk["kid"], jwk)
        return cls(private_pem=private_pem, kid=current["kid"], public_keys=tuple(published.values()))

    def jwks(self) -> dict:
        return {"keys": list(self.public_keys)}

    def public_key(self, kid: str) -> dict[str, str] | None:
        return next((jwk for jwk in self.public_keys if jwk["kid"] == kid), None)


def load_private_key(pem: str) -> ec.EllipticCurvePrivateKey:
    if not pem:
        raise NotConfigured(
            "STOREFRONT_SIGNING_KEY is not set (or was refused as an example or weak key); the store cannot "
            "sign tokens or receipts"
        )
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise NotConfigured("STOREFRONT_SIGNING_KEY is not a readable PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise NotConfigured("STOREFRONT_SIGNING_KEY must be an EC P-256 private key (ES256)")
    return key


def public_jwk(key: ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) -> dict[str, str]:
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    numbers = public.public_numbers()
    members = {"crv": "P-256", "kty": "EC", "x": _b64(numbers.x), "y": _b64(numbers.y)}
    return {**members, "kid": thumbprint(members), "alg": ALGORITHM, "use": "sig"}


def on_p256(x: str, y: str) -> bool:
    """Whether a JWK's `x` and `y` (base64url of 32 bytes each, as `public_jwk` writes them) make
    a point on P-256: a key off the curve would be published, then fail all that names it."""
    try:
        coordinates = [base64.urlsafe_b64decode(c + "=" * (-len(c) % 4)) for c in (x, y)]
        if any(len(c) != 32 for c in coordinates):
            return False
        x_int, y_int = (int.from_bytes(c, "big") for c in coordinates)
        ec.EllipticCurvePublicNumbers(x_int, y_int, ec.SECP256R1()).public_key()
    except (ValueError, TypeError):
        return False
    return True


def thumbprint(jwk: dict[str, str]) -> str:
    """RFC 7638 JWK thumbprint over the required EC members."""
    canonical = json.dumps({m: jwk[m] for m in _PUBLIC_MEMBERS}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def _published(jwk: dict) -> dict[str, str]:
    members = {m: jwk[m] for m in _PUBLIC_MEMBERS}
    return {**members, "kid": thumbprint(members), "alg": ALGORITHM, "use": "sig"}


def _b64(n: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()
