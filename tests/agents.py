"""Web Bot Auth agents for the tests: Ed25519 keys, a key directory each test serves on loopback,
and requests signed by signers from outside the store: the `http-message-signatures` library
(the working group's dictionary `Signature-Agent`, with a nonce), the `bot-auth` package (the
earlier string form, no nonce) and Cloudflare's npm `web-bot-auth` (tests/clients/web_bot_auth.mjs)."""

from __future__ import annotations

import base64
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import requests
from bot_auth import BotAuth
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from http_message_signatures import HTTPMessageSigner, HTTPSignatureKeyResolver, algorithms

from shared.seams.key_directory import DIRECTORY_PATH, MEDIA_TYPE, thumbprint
from tests.loopback_http import Handler, LoopbackServer
from tests.support import ROOT

CLOUDFLARE_SIGNER = ROOT / "tests" / "clients" / "web_bot_auth.mjs"


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class AgentKey:
    private: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)

    @property
    def x(self) -> str:
        return _b64url(self.private.public_key().public_bytes_raw())

    @property
    def thumbprint(self) -> str:
        return thumbprint(self.x)

    @property
    def public_jwk(self) -> dict:
        return {"kty": "OKP", "crv": "Ed25519", "x": self.x}

    @property
    def private_jwk(self) -> dict:
        d = _b64url(self.private.private_bytes_raw())
        return {**self.public_jwk, "d": d, "kid": self.thumbprint}


class KeyDirectory:
    """An agent's key directory on 127.0.0.1: what it serves can be changed, and it counts hits."""

    def __init__(self, *keys: AgentKey):
        self.document: object = {"keys": [key.public_jwk for key in keys]}
        self.status = 200
        self.headers = {"Content-Type": MEDIA_TYPE, "Cache-Control": "max-age=300"}
        self.delay = 0.0
        self.hits = 0
        directory = self

        class Directory(Handler):
            def do_GET(self) -> None:
                directory.hits += 1
                time.sleep(directory.delay)
                document = directory.document
                body = document if isinstance(document, bytes) else json.dumps(document).encode()
                self.answer(directory.status, body, directory.headers)

        self._loopback = LoopbackServer(Directory)
        self.origin = self._loopback.origin

    @property
    def url(self) -> str:
        return self.origin + DIRECTORY_PATH

    def close(self) -> None:
        self._loopback.close()


class _Keys(HTTPSignatureKeyResolver):
    def __init__(self, key: AgentKey):
        self.key = key

    def resolve_private_key(self, key_id: str) -> Ed25519PrivateKey:
        return self.key.private


def sign(
    prepared: requests.PreparedRequest,
    key: AgentKey,
    agent: str,
    *,
    nonce: str | None = "fresh",
    created: float | None = None,
    lifetime: float = 300,
    covered: tuple[str, ...] = ("@authority", '"signature-agent";key="agent1"'),
    signature_agent: str | None = None,
) -> requests.PreparedRequest:
    """Sign `prepared` in place with the `http-message-signatures` library, as the working
    group's drafts describe: Signature-Agent a dictionary whose member the signature covers."""
    prepared.headers["Signature-Agent"] = signature_agent or f'agent1="{agent}"'
    now = time.time() if created is None else created
    HTTPMessageSigner(signature_algorithm=algorithms.ED25519, key_resolver=_Keys(key)).sign(
        prepared,
        key_id=key.thumbprint,
        created=datetime.fromtimestamp(now, timezone.utc),
        expires=datetime.fromtimestamp(now + lifetime, timezone.utc),
        nonce=base64.b64encode(secrets.token_bytes(64)).decode() if nonce == "fresh" else nonce,
        label="sig1",
        tag="web-bot-auth",
        covered_component_ids=covered,
    )
    return prepared


def bot_auth_headers(url: str, key: AgentKey, agent: str) -> dict[str, str]:
    """The headers the `bot-auth` package signs for `url`: Signature-Agent as one string."""
    return BotAuth([key.private_jwk], signAgent=f'"{agent}"').get_bot_signature_header(url)


class Signed(requests.auth.AuthBase):
    """A requests auth that signs every request with `sign` (keyword arguments passed on)."""

    def __init__(self, key: AgentKey, agent: str, **options: object):
        self.key, self.agent, self.options = key, agent, options

    def __call__(self, prepared: requests.PreparedRequest) -> requests.PreparedRequest:
        return sign(prepared, self.key, self.agent, **self.options)  # type: ignore[arg-type]
