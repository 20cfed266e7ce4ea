"""UCP's HTTP Message Signatures (UCP 2026-08-25, signatures.md): a platform's request signature
verified with the keys of its own profile, and the store's signature on the answers it signs.
RFC 9421 and RFC 9530 are `http-message-signatures`'; the store applies UCP's policy on top.

A request is verified when it carries `Signature-Input` and `Signature` ("Platforms SHOULD sign");
an unsigned one is served as before. Signatures tagged `web-bot-auth` are the agent layer's
(shared/protocols/agents.py). It passes when any other signature verifies ("REST Request
Verification"); when none does, the first failure is the answer, with UCP's code and status."""

from __future__ import annotations

import base64
import datetime
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import http_sf
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from http_message_signatures import (
    HTTPMessageSigner,
    HTTPMessageVerifier,
    HTTPSignatureKeyResolver,
    algorithms,
)
from http_message_signatures.digests import ContentDigest
from http_message_signatures.exceptions import HTTPMessageSignaturesException
from http_message_signatures.signatures import SignatureVerifyWarning

from shared.config.keys import KeySet, load_private_key, on_p256
from shared.protocols.http import Answer, Request
from shared.seams.key_directory import ed25519_public

LABEL = "sig1"
MAX_HEADER = 8192
CURVES = {
    "P-256": (ec.SECP256R1, algorithms.ECDSA_P256_SHA256, 32),
    "P-384": (ec.SECP384R1, algorithms.ECDSA_P384_SHA384, 48),
}
RESPONSE_COMPONENTS = ("@status", "content-digest", "content-type")


@dataclass(frozen=True)
class SignatureRefusal(Exception):
    """UCP's code for a request signature that cannot be accepted, and its REST status."""

    code: str
    status: int
    content: str


def signed(req: Request) -> bool:
    return req.header("signature-input") is not None or req.header("signature") is not None


def verify_request(req: Request, keys: Callable[[bool], list[dict]]) -> bool:
    """Accept the request's UCP signature, made with a key of `keys(fresh)` (the platform's
    profile's `keys[]`; `fresh` asks once more when a key id is unknown): True. False when its
    only signatures are tagged web-bot-auth, which prove no platform. Raises SignatureRefusal."""
    inputs, values = _headers(req)
    failures: list[SignatureRefusal] = []
    for label, (components, params) in inputs.items():
        if "tag" in params:
            continue  # web-bot-auth (the agent layer's) or another application's: not UCP's
        try:
            _verify_one(req, label, components, params, values.get(label), keys)
            return True
        except SignatureRefusal as refusal:
            failures.append(refusal)
    if failures:
        raise failures[0]
    if not any(params.get("tag") == "web-bot-auth" for _, params in inputs.values()):
        raise SignatureRefusal(
            "signature_invalid", 401, "no signature in Signature-Input is one UCP verifies"
        )
    return False


def sign_answer(answer: Answer, keys: KeySet, now: float) -> Answer:
    """The answer with Content-Digest and the store's signature over its status, digest and type
    (signatures.md "REST Response Signing"), by the current ES256 key, named by its kid."""
    message = _Response(answer.status, dict(answer.headers))
    _sign(message, RESPONSE_COMPONENTS, answer.body, keys, now)
    return Answer(answer.status, answer.body, message.headers)


def sign_request(
    method: str, url: str, headers: dict[str, str], body: bytes, keys: KeySet, now: float
) -> dict[str, str]:
    """`headers` with Content-Digest and the store's signature over a request it sends (an order
    webhook: signatures.md "REST Request Signing"), covering every header UCP asks a signer to."""
    message = _Message(method, url, dict(headers))
    sent = {name.lower() for name in headers}
    covered = ["@method", "@authority", "@path", "content-digest", "content-type"]
    covered += [name for name in ("ucp-agent", "webhook-id", "webhook-timestamp") if name in sent]
    _sign(message, covered, body, keys, now)
    return dict(message.headers)


def _sign(message: Any, covered: Sequence[str], body: bytes, keys: KeySet, now: float) -> None:
    signer = HTTPMessageSigner(signature_algorithm=algorithms.ECDSA_P256_SHA256, key_resolver=_Private(keys))
    signer.sign(
        message,
        key_id=keys.kid,
        created=datetime.datetime.fromtimestamp(int(now), datetime.timezone.utc),
        label=LABEL,
        include_alg=False,  # signatures.md: the algorithm comes from the key, never `alg`
        covered_component_ids=covered,
        body=body,
    )


def _headers(req: Request) -> tuple[dict[str, tuple[list[str], dict]], dict[str, bytes]]:
    text, value = req.header("signature-input") or "", req.header("signature") or ""
    if not text or not value:
        raise SignatureRefusal("signature_invalid", 401, "Signature-Input and Signature must both be sent")
    if max(len(text), len(value)) > MAX_HEADER:
        raise SignatureRefusal(
            "signature_invalid", 401, f"Signature-Input and Signature are limited to {MAX_HEADER} bytes"
        )
    try:
        parsed_inputs = http_sf.parse(text.encode(), tltype="dictionary")
        parsed_values = http_sf.parse(value.encode(), tltype="dictionary")
    except Exception:  # http_sf raises ValueError and others on malformed input
        raise SignatureRefusal(
            "signature_invalid", 401, "Signature-Input or Signature is not a structured dictionary"
        ) from None
    inputs: dict[str, tuple[list[str], dict]] = {}
    for label, member in cast(dict[str, Any], parsed_inputs).items():
        items, params = member if isinstance(member, tuple) else (None, {})
        if not isinstance(items, list) or not all(
            isinstance(i, tuple) and isinstance(i[0], str) for i in items
        ):
            raise SignatureRefusal(
                "signature_invalid", 401, f"Signature-Input {label} is not an inner list of components"
            )
        inputs[label] = ([http_sf.ser(item) for item in items], dict(params))
    values = {
        label: member[0]
        for label, member in cast(dict[str, Any], parsed_values).items()
        if isinstance(member, tuple) and isinstance(member[0], bytes)
    }
    return inputs, values


def _verify_one(
    req: Request,
    label: str,
    components: list[str],
    params: Mapping[str, Any],
    value: bytes | None,
    keys: Callable[[bool], list[dict]],
) -> None:
    if value is None:
        raise SignatureRefusal("signature_invalid", 401, f"Signature has no value for {label}")
    if "alg" in params:
        raise SignatureRefusal(
            "algorithm_unsupported", 400, "a UCP signature names no alg: the key's type gives the algorithm"
        )
    keyid = params.get("keyid")
    if not isinstance(keyid, str) or not keyid:
        raise SignatureRefusal("signature_invalid", 401, f"signature {label} has no keyid")
    missing = [c for c in _required(req) if f'"{c}"' not in components]
    if missing:
        raise SignatureRefusal(
            "signature_invalid", 401, f"signature {label} does not cover {', '.join(missing)}"
        )
    jwk = _key(keyid, keys(False)) or _key(keyid, keys(True))
    if jwk is None:
        raise SignatureRefusal("key_not_found", 401, f"the platform's profile has no signing key {keyid!r}")
    algorithm, public = _public(jwk)
    if req.body or req.header("content-digest") is not None:
        try:
            ContentDigest.verify(req.header("content-digest") or "", req.body)
        except HTTPMessageSignaturesException as exc:
            raise SignatureRefusal(
                "digest_mismatch", 400, f"Content-Digest does not match the body: {exc}"
            ) from None
    verifier = _Verifier(signature_algorithm=algorithm, key_resolver=_Public(public))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SignatureVerifyWarning)
        try:
            verifier.verify(
                _Message(req.method.upper(), req.url, req.headers), expect_label=label, max_age=None
            )
        except (HTTPMessageSignaturesException, ValueError, TypeError, KeyError) as exc:
            raise SignatureRefusal(
                "signature_invalid", 401, f"signature {label} does not verify: {str(exc)[:160]}"
            ) from None


def _required(req: Request) -> list[str]:
    """What a UCP request signature must cover (signatures.md "REST Request Verification")."""
    needed = ["@method", "@authority", "@path"]
    if urlsplit(req.url).query:
        needed.append("@query")
    if req.body:
        needed += ["content-digest", "content-type"]
    needed += [
        name for name in ("idempotency-key", "ucp-agent", "signature-agent") if req.header(name) is not None
    ]
    return needed


def _key(keyid: str, keys: list[dict]) -> dict | None:
    """The profile's key named `keyid` that may verify: not one marked for encryption only."""
    for jwk in keys:
        ops = jwk.get("key_ops")
        if (
            jwk.get("kid") == keyid
            and jwk.get("use") != "enc"
            and (ops is None or (isinstance(ops, list) and "verify" in ops))
        ):
            return jwk
    return None


def _public(jwk: dict) -> tuple[type, Any]:
    """The algorithm and public key a JWK names; algorithm_unsupported for any other."""
    try:
        if jwk.get("kty") == "EC" and jwk.get("crv") in CURVES:
            curve, algorithm, size = CURVES[jwk["crv"]]
            if jwk["crv"] == "P-256" and not on_p256(jwk.get("x"), jwk.get("y")):  # the store's own rule
                raise ValueError("not a point of P-256, spelt the one way")
            x, y = (int.from_bytes(_coordinate(jwk.get(c), size), "big") for c in ("x", "y"))
            return algorithm, ec.EllipticCurvePublicNumbers(x, y, curve()).public_key()
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            raw = ed25519_public(jwk.get("x"))  # as Web Bot Auth's directories are read
            if raw is None:
                raise ValueError("not an Ed25519 key anyone but its holder can sign for")
            return algorithms.ED25519, ed25519.Ed25519PublicKey.from_public_bytes(raw)
    except (KeyError, TypeError, ValueError):
        raise SignatureRefusal("signature_invalid", 401, "the platform's key is malformed") from None
    raise SignatureRefusal(
        "algorithm_unsupported",
        400,
        f"keys of type {str(jwk.get('kty'))[:20]} {str(jwk.get('crv'))[:20]} are not supported",
    )


def _coordinate(text: object, size: int) -> bytes:
    """`size` bytes spelt as unpadded base64url the one canonical way; ValueError otherwise."""
    if not isinstance(text, str) or not text.replace("-", "").replace("_", "").isalnum():
        raise ValueError("not base64url")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != size or base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != text:
        raise ValueError("not the canonical spelling")
    return raw


class _Verifier(HTTPMessageVerifier):
    """`created` is optional for UCP's own signatures (signatures.md "Replay Protection": the
    idempotency key protects against replay); an `expires` in the past still fails."""

    require_created = False
    allow_label_only_selection = True


class _Public(HTTPSignatureKeyResolver):
    def __init__(self, key: Any):
        self._key = key

    def resolve_public_key(self, key_id: str) -> Any:
        return self._key


class _Private(HTTPSignatureKeyResolver):
    def __init__(self, keys: KeySet):
        self._keys = keys

    def resolve_private_key(self, key_id: str) -> Any:
        return load_private_key(self._keys.private_pem)


@dataclass(frozen=True)
class _Message:
    method: str
    url: str
    headers: Mapping[str, str]


@dataclass
class _Response:
    status_code: int
    headers: dict[str, str]
    request: None = None
