"""Sealed records: what the store must keep for a while and read back, but may not keep in the
clear (a buyer's address waiting in the contact queue).

AES-256-GCM under a key derived from `STOREFRONT_HASH_SECRET` with its own label, so the sealed
text holds no address, and a queue read without the secret tells nothing. Each record carries a
fresh 96-bit nonce and its purpose as associated data, so a sealed contact cannot be replayed as
anything else. Rotating the secret makes records sealed before unreadable: `open` refuses them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.config.errors import NotConfigured

VERSION = "s1"
NONCE_BYTES = 12


class Unreadable(ValueError):
    """A sealed record that is not one this store sealed under its current secret."""


class Sealer:
    def __init__(self, secret: str, purpose: str):
        self._secret = secret.encode()
        self._purpose = purpose.encode()

    def _aead(self) -> AESGCM:
        if not self._secret:
            raise NotConfigured(
                "STOREFRONT_HASH_SECRET is not set (or was refused as an example or weak value); the "
                "store cannot seal what it keeps"
            )
        key = hmac.new(self._secret, b"sealing-key\x00" + self._purpose, hashlib.sha256).digest()
        return AESGCM(key)

    def check(self) -> None:
        """Raise NotConfigured when nothing can be sealed or opened (no secret)."""
        self._aead()

    def seal(self, record: dict) -> str:
        """The record as text safe to store: `s1.` then base64url of nonce and ciphertext."""
        nonce = os.urandom(NONCE_BYTES)
        plain = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
        sealed = nonce + self._aead().encrypt(nonce, plain, self._purpose)
        return f"{VERSION}.{base64.urlsafe_b64encode(sealed).decode().rstrip('=')}"

    def open(self, text: str) -> dict:
        """The record sealed as `text`; `Unreadable` for anything else (another secret, another
        purpose, a changed byte, not sealed at all)."""
        version, _, body = text.partition(".") if isinstance(text, str) else ("", "", "")
        if version != VERSION or not body:
            raise Unreadable("not a sealed record")
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, TypeError):
            raise Unreadable("not a sealed record") from None
        if len(raw) <= NONCE_BYTES:
            raise Unreadable("not a sealed record")
        try:
            plain = self._aead().decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], self._purpose)
        except InvalidTag:
            raise Unreadable("sealed under another secret, or changed") from None
        try:
            record = json.loads(plain)
        except (ValueError, RecursionError):
            raise Unreadable("sealed text that is not a record") from None
        if not isinstance(record, dict):
            raise Unreadable("sealed text that is not a record")
        return record
