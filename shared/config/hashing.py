"""Keyed hashes (HMAC-SHA256) for everything that identifies a person or a request.

Idempotency keys, emails and client addresses are stored only as these hashes, so a leaked table
cannot be reversed with a dictionary of emails without the secret. Each kind of value is hashed
under its own label, so an email and a key with the same text never share a hash.
"""

from __future__ import annotations

import hashlib
import hmac

from shared.config.errors import NotConfigured


class Hasher:
    def __init__(self, secret: str):
        self._secret = secret.encode()

    def _digest(self, label: str, value: str) -> str:
        if not self._secret:
            raise NotConfigured(
                "STOREFRONT_HASH_SECRET is not set (or was refused as an example or weak value); the store "
                "cannot hash identifiers"
            )
        return hmac.new(self._secret, f"{label}\x00{value}".encode(), hashlib.sha256).hexdigest()

    def idempotency_key(self, key: str) -> str:
        return self._digest("idempotency-key", key)

    def email(self, normalised_email: str) -> str:
        return self._digest("email", normalised_email)

    def client_ip(self, ip: str) -> str:
        return self._digest("client-ip", ip)

    def agent(self, identity: str) -> str:
        """A verified agent's rate bucket: its directory origin and key thumbprint."""
        return self._digest("agent", identity)

    def nonce(self, token: str) -> str:
        """A Web Bot Auth signature's nonce (with its key id), counted once against replay."""
        return self._digest("signature-nonce", token)

    def request_state(self, payload: str) -> str:
        """The seal on state a client carries between the rounds of one MCP request."""
        return self._digest("request-state", payload)

    def request(self, canonical: str) -> str:
        """The payload fingerprint stored beside an idempotency key."""
        return self._digest("request", canonical)

    def ucp_key(self, scoped_key: str) -> str:
        """A UCP Idempotency-Key with its platform, operation and resource (the row it is kept under)."""
        return self._digest("ucp-idempotency-key", scoped_key)

    def platform(self, profile_url: str) -> str:
        """The UCP platform a checkout session belongs to, by its profile URL."""
        return self._digest("ucp-platform", profile_url)
