"""The store's signing keys. One current EC P-256 private key signs download tokens and receipts
(ES256); the public keys of retired keys stay published in the JWKS, so what they signed keeps
verifying after a rotation. Keys are named by their RFC 7638 thumbprint (`kid`).

A key is read in one written form only (one PEM block; unpadded base64url coordinates), so each
key has one `kid` and the JWKS names it once; the store signs with the form it checked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shared.config.errors import NotConfigured

ALGORITHM = "ES256"
_PUBLIC_MEMBERS = ("crv", "kty", "x", "y")
_PEM_BEGIN = "-----BEGIN "
_ONE_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
# The prime P-256's coordinates are taken modulo: x + p names the point x does.
P256_PRIME = 2**256 - 2**224 + 2**192 + 2**96 - 1


@dataclass(frozen=True)
class KeySet:
    private_pem: str
    kid: str
    public_keys: tuple[dict[str, str], ...]  # the current key first, then retired ones

    @classmethod
    def load(cls, private_pem: str, retired: tuple[dict, ...] = ()) -> KeySet:
        """The key set of `private_pem`, kept as the PKCS#8 PEM of the key read from it (what
        signs is what was checked, whatever else the text held), and the retired public keys."""
        key = load_private_key(private_pem)
        current = public_jwk(key)
        published: dict[str, dict[str, str]] = {current["kid"]: current}
        for jwk in map(_published, retired):
            published.setdefault(jwk["kid"], jwk)
        pkcs8 = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        return cls(private_pem=pkcs8, kid=current["kid"], public_keys=tuple(published.values()))

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
    if pem.count(_PEM_BEGIN) > 1 or (_ONE_PEM.search(pem) and not _ONE_PEM.fullmatch(pem.strip())):
        raise NotConfigured(
            "STOREFRONT_SIGNING_KEY must be one PEM private key and nothing else (no quotes, no "
            "second key or certificate around it)"
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


def on_p256(x: object, y: object) -> bool:
    """Whether a JWK's `x` and `y`, each unpadded base64url of 32 bytes as `public_jwk` writes
    them, make a point on P-256: a key off the curve would be published, then fail all that names
    it; a coordinate spelt another way (padding, stray characters, unused bits set, or p added:
    each must be below the prime p) would publish the key under a `kid` that no token of it names,
    in a JWK that verifiers refuse."""
    coordinates = [_coordinate(c) for c in (x, y)]
    if None in coordinates:
        return False
    x_int, y_int = (int.from_bytes(c or b"", "big") for c in coordinates)
    if x_int >= P256_PRIME or y_int >= P256_PRIME:
        return False
    try:
        ec.EllipticCurvePublicNumbers(x_int, y_int, ec.SECP256R1()).public_key()
    except ValueError:
        return False
    return True


def _coordinate(text: object) -> bytes | None:
    """The 32 bytes `text` spells as `public_jwk` writes them, else None."""
    if not isinstance(text, str) or len(text) != 43 or not _BASE64URL.fullmatch(text):
        return None
    try:
        decoded = base64.urlsafe_b64decode(text + "=")
    except binascii.Error:
        return None
    return decoded if _b64(int.from_bytes(decoded, "big")) == text else None


def retired_key_problem(jwk: object) -> str | None:
    """What keeps a retired key from being published as given, in words that never show a
    private member; None for a public EC P-256 JWK as the store's JWKS lists it (the members
    `kid`, `alg` and `use` may be left out, and if given must be the key's own)."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        return "is not an EC P-256 JWK (kty EC, crv P-256)"
    if "d" in jwk:
        return "holds a private member (d): list public keys only"
    if not on_p256(jwk.get("x"), jwk.get("y")):
        return "has no x and y that are unpadded base64url of 32 bytes below p making a point on P-256"
    if "kid" in jwk and jwk["kid"] != thumbprint(jwk):
        return "has a kid other than its RFC 7638 thumbprint, which names it in tokens and receipts"
    if jwk.get("alg", ALGORITHM) != ALGORITHM or jwk.get("use", "sig") != "sig":
        return f"is published for {ALGORITHM} signatures: alg, when given, must be {ALGORITHM}, use sig"
    return None


def thumbprint(jwk: dict[str, str]) -> str:
    """RFC 7638 JWK thumbprint over the required EC members."""
    canonical = json.dumps({m: jwk[m] for m in _PUBLIC_MEMBERS}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def _published(jwk: dict) -> dict[str, str]:
    members = {m: jwk[m] for m in _PUBLIC_MEMBERS}
    return {**members, "kid": thumbprint(members), "alg": ALGORITHM, "use": "sig"}


def _b64(n: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()
