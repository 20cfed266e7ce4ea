"""A UCP platform on 127.0.0.1 for the tests: its profile (checkout and order at 2026-08-25, its
webhook URL, its ES256 key), a webhook receiver that records what the store posts and answers
with the statuses it is given, and requests signed with its key by `http-message-signatures`."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec
from http_message_signatures import (
    HTTPMessageSigner,
    HTTPMessageVerifier,
    HTTPSignatureKeyResolver,
    algorithms,
)

from tests.loopback_http import Handler, LoopbackServer

VERSION = "2026-08-25"
CHECKOUT, ORDER = "dev.ucp.shopping.checkout", "dev.ucp.shopping.order"


def b64(number: int) -> str:
    return base64.urlsafe_b64encode(number.to_bytes(32, "big")).rstrip(b"=").decode()


def public_key(jwk: dict) -> ec.EllipticCurvePublicKey:
    x, y = (int.from_bytes(base64.urlsafe_b64decode(jwk[c] + "=="), "big") for c in ("x", "y"))
    return ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()


@dataclass
class _Message:
    method: str
    url: str
    headers: dict


@dataclass
class _Response:
    status_code: int
    headers: dict
    request: None = None


class _Key(HTTPSignatureKeyResolver):
    def __init__(self, private=None, public=None):
        self.private, self.public = private, public

    def resolve_private_key(self, key_id):
        return self.private

    def resolve_public_key(self, key_id):
        return self.public


def verify_store_signature(message, jwk: dict, body: bytes) -> list:
    """Verify the store's signature on an answer (`status_code`) or a webhook (`method`, `url`)."""
    verifier = HTTPMessageVerifier(
        signature_algorithm=algorithms.ECDSA_P256_SHA256, key_resolver=_Key(public=public_key(jwk))
    )
    return verifier.verify(message, expect_tag=None, max_age=None, body=body)


def store_answer(status: int, headers) -> _Response:
    return _Response(status, dict(headers))


def webhook_message(url: str, headers: dict) -> _Message:
    return _Message("POST", url, dict(headers))


class Platform:
    def __init__(self, *webhook_statuses: int, order: bool = True):
        self.key = ec.generate_private_key(ec.SECP256R1())
        numbers = self.key.public_key().public_numbers()
        self.jwk = {
            "kty": "EC",
            "crv": "P-256",
            "kid": f"platform-{uuid.uuid4().hex[:8]}",
            "x": b64(numbers.x),
            "y": b64(numbers.y),
        }
        self.received: list[dict] = []
        self.statuses = list(webhook_statuses)
        self.padding = 0  # characters of a note added to each webhook answer
        platform = self

        class Profile(Handler):
            def do_GET(self) -> None:
                self._answer(200, platform.profile())

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                platform.received.append(
                    {"path": self.path, "headers": dict(self.headers.items()), "body": body}
                )
                status = platform.statuses.pop(0) if platform.statuses else 200
                self._answer(status, {"ucp": {"version": VERSION}, "note": "x" * platform.padding})

            def _answer(self, status: int, document: dict) -> None:
                self.answer(status, json.dumps(document).encode(), {"Content-Type": "application/json"})

        self._loopback = LoopbackServer(Profile)
        self.origin = self._loopback.origin
        self.profile_url = f"{self.origin}/.well-known/ucp"
        self.webhook_url = f"{self.origin}/webhooks/orders"
        self.order = order

    def profile(self) -> dict:
        capabilities: dict = {CHECKOUT: [{"version": VERSION}]}
        if self.order:
            capabilities[ORDER] = [{"version": VERSION, "config": {"webhook_url": self.webhook_url}}]
        return {
            "ucp": {"version": VERSION, "services": {}, "capabilities": capabilities, "payment_handlers": {}},
            "keys": [self.jwk],
        }

    @property
    def agent(self) -> str:
        return f'profile="{self.profile_url}"'

    def signed(self, method: str, url: str, body: bytes = b"", key: str | None = None) -> dict[str, str]:
        """The headers of a request from this platform, signed as UCP asks."""
        headers = {"UCP-Agent": self.agent}
        if body:
            headers["Content-Type"] = "application/json"
        if key:
            headers["Idempotency-Key"] = key
        message = _Message(method, url, headers)
        covered = ["@method", "@authority", "@path", "ucp-agent"] + (["idempotency-key"] if key else [])
        covered += ["content-digest", "content-type"] if body else []
        HTTPMessageSigner(
            signature_algorithm=algorithms.ECDSA_P256_SHA256, key_resolver=_Key(private=self.key)
        ).sign(
            message,
            key_id=self.jwk["kid"],
            label="sig1",
            include_alg=False,
            covered_component_ids=covered,
            body=body or None,
        )
        return message.headers

    def close(self) -> None:
        self._loopback.close()
