"""UCP's request signatures as a platform makes them (`http-message-signatures` signing with the
platform's key: ES256, the baseline, ES384 and Ed25519), verified with the keys of the platform's
profile; each way a signature is refused gets UCP's code and status; and the store's response
signature verifies with the key it publishes."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import time
from dataclasses import dataclass

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from http_message_signatures import (
    HTTPMessageSigner,
    HTTPMessageVerifier,
    HTTPSignatureKeyResolver,
    algorithms,
)
from http_message_signatures.exceptions import InvalidSignature
from jose import jwk as jose_jwk

from shared.config.keys import KeySet, load_private_key
from shared.protocols.http import Answer, Request
from shared.protocols.ucp import signatures
from shared.protocols.ucp.signatures import SignatureRefusal
from tests.support import new_ec_key, private_pem

URL = "https://shop.example/ucp/checkout-sessions"
BODY = b'{"line_items":[{"item":{"id":"agent-starter-kit"},"quantity":1}]}'
HEADERS = {
    "Content-Type": "application/json",
    "UCP-Agent": 'profile="https://platform.example/profile"',
    "Idempotency-Key": "5a7e0c8e-6c63-4a53-9d8f-1f0c1f7a9e21",
}
COVERED = ("@method", "@authority", "@path", "content-digest", "content-type", "idempotency-key", "ucp-agent")


@dataclass
class Message:
    method: str
    url: str
    headers: dict


class Key(HTTPSignatureKeyResolver):
    def __init__(self, key):
        self.key = key

    def resolve_private_key(self, key_id):
        return self.key

    def resolve_public_key(self, key_id):
        return self.key.public_key()


def jwk_of(key, kid: str) -> dict:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "kid": kid,
            "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode(),
        }
    found = jose_jwk.construct(
        key.public_key(), "ES256" if key.curve.name == "secp256r1" else "ES384"
    ).to_dict()
    return {**{k: v.decode() if isinstance(v, bytes) else v for k, v in found.items()}, "kid": kid}


ALGORITHMS = {
    "ES256": (lambda: ec.generate_private_key(ec.SECP256R1()), algorithms.ECDSA_P256_SHA256),
    "ES384": (lambda: ec.generate_private_key(ec.SECP384R1()), algorithms.ECDSA_P384_SHA384),
    "EdDSA": (ed25519.Ed25519PrivateKey.generate, algorithms.ED25519),
}


def signed_request(key, algorithm, *, kid="platform-2026", covered=COVERED, digest=True, **sign) -> Request:
    """The request a platform sends; without `digest`, the signature is made over no body (and so
    covers no Content-Digest), but the body is sent."""
    message = Message("POST", URL, dict(HEADERS))
    HTTPMessageSigner(signature_algorithm=algorithm, key_resolver=Key(key)).sign(
        message,
        key_id=kid,
        label="sig1",
        include_alg=False,
        covered_component_ids=covered,
        body=BODY if digest else None,
        **sign,
    )
    return Request("POST", {k.lower(): v for k, v in message.headers.items()}, BODY, {}, {}, URL)


def refusal(req: Request, keys: list[dict]) -> tuple[str, int]:
    with pytest.raises(SignatureRefusal) as refused:
        signatures.verify_request(req, lambda fresh: keys)
    return refused.value.code, refused.value.status


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_request_signed_with_a_key_of_the_platforms_profile_verifies(name):
    make, algorithm = ALGORITHMS[name]
    key = make()

    signatures.verify_request(signed_request(key, algorithm), lambda fresh: [jwk_of(key, "platform-2026")])


def test_a_changed_body_is_a_digest_mismatch_and_a_changed_header_an_invalid_signature():
    key = ec.generate_private_key(ec.SECP256R1())
    req, keys = signed_request(key, algorithms.ECDSA_P256_SHA256), [jwk_of(key, "platform-2026")]
    other_key = {**req.headers, "idempotency-key": "another"}

    assert refusal(dataclasses.replace(req, body=BODY.replace(b"1", b"2")), keys) == ("digest_mismatch", 400)
    assert refusal(dataclasses.replace(req, headers=other_key), keys) == ("signature_invalid", 401)
    assert refusal(dataclasses.replace(req, url="https://elsewhere.example/ucp/checkout-sessions"), keys)[
        0
    ] == ("signature_invalid")


@pytest.mark.parametrize("left_out", ["@authority", "content-digest", "idempotency-key", "ucp-agent"])
def test_a_signature_that_leaves_out_a_component_ucp_requires_is_refused(left_out):
    key = ec.generate_private_key(ec.SECP256R1())
    covered = tuple(c for c in COVERED if c != left_out)
    req = signed_request(
        key,
        algorithms.ECDSA_P256_SHA256,
        covered=covered,
        digest=left_out != "content-digest",
    )

    code, status = refusal(req, [jwk_of(key, "platform-2026")])

    assert (code, status) == ("signature_invalid", 401)


def test_an_unknown_key_id_asks_the_profile_once_more_then_is_key_not_found():
    key = ec.generate_private_key(ec.SECP256R1())
    req = signed_request(key, algorithms.ECDSA_P256_SHA256, kid="rotated")
    asked: list[bool] = []

    def keys(fresh: bool) -> list[dict]:
        asked.append(fresh)
        return [jwk_of(key, "rotated")] if fresh else [jwk_of(key, "old")]

    signatures.verify_request(req, keys)
    assert asked == [False, True]
    assert refusal(req, [jwk_of(key, "old")]) == ("key_not_found", 401)


def test_an_algorithm_the_store_does_not_verify_is_algorithm_unsupported():
    key = ec.generate_private_key(ec.SECP256R1())
    req = signed_request(key, algorithms.ECDSA_P256_SHA256)
    rsa_jwk = {"kty": "RSA", "kid": "platform-2026", "n": "AQAB", "e": "AQAB"}
    with_alg = signed_request(key, algorithms.ECDSA_P256_SHA256)
    with_alg = dataclasses.replace(
        with_alg,
        headers={
            **with_alg.headers,
            "signature-input": with_alg.headers["signature-input"] + ';alg="ecdsa-p256-sha256"',
        },
    )

    assert refusal(req, [rsa_jwk]) == ("algorithm_unsupported", 400)
    assert refusal(with_alg, [jwk_of(key, "platform-2026")]) == ("algorithm_unsupported", 400)


def test_an_expired_signature_is_refused():
    key = ec.generate_private_key(ec.SECP256R1())
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    req = signed_request(key, algorithms.ECDSA_P256_SHA256, created=past, expires=past)

    assert refusal(req, [jwk_of(key, "platform-2026")]) == ("signature_invalid", 401)


def test_one_good_signature_among_bad_ones_is_enough_and_web_bot_auth_is_left_to_the_agent_layer():
    key = ec.generate_private_key(ec.SECP256R1())
    good = signed_request(key, algorithms.ECDSA_P256_SHA256)
    inputs = 'bad=("@method");keyid="nope", ' + good.headers["signature-input"]
    values = "bad=:AAAA:, " + good.headers["signature"]
    both = dataclasses.replace(good, headers={**good.headers, "signature-input": inputs, "signature": values})
    wba = dataclasses.replace(
        good,
        headers={
            **good.headers,
            "signature-input": 'sig2=("@authority");keyid="k";tag="web-bot-auth"',
            "signature": "sig2=:AAAA:",
        },
    )

    signatures.verify_request(both, lambda fresh: [jwk_of(key, "platform-2026")])
    signatures.verify_request(wba, lambda fresh: [])


@pytest.mark.parametrize(
    "signature_input, signature",
    [
        ("garbage(((", "sig1=:AAAA:"),
        ('sig1=("@method");keyid="k"', "not a dictionary ((("),
        ('sig1=("@method");keyid="k"', ""),
        ("sig1=token", "sig1=:AAAA:"),
        ('sig1=("@method")', "sig1=:AAAA:"),
        ('sig1=("@method");keyid="k"', "sig2=:AAAA:"),
        ('sig1=("@method");keyid="k"' + "x" * 9000, "sig1=:AAAA:"),
        ('sig1=("@method");keyid=5', "sig1=:AAAA:"),
    ],
)
def test_a_hostile_signature_header_is_a_refusal_never_a_crash(signature_input, signature):
    headers = {"signature-input": signature_input, "signature": signature, "content-type": "application/json"}
    req = Request("POST", headers, BODY, {}, {}, URL)

    code, status = refusal(req, [{"kty": "EC", "crv": "P-256", "kid": "k", "x": "AA", "y": "AA"}])

    assert status in (400, 401) and code in ("signature_invalid", "key_not_found", "digest_mismatch")


def test_the_stores_answer_signature_verifies_with_its_published_key_and_not_after_a_change():
    keys = KeySet.load(private_pem(new_ec_key()))
    answer = signatures.sign_answer(
        Answer(200, b'{"status":"completed"}', {"Content-Type": "application/json"}), keys, time.time()
    )

    @dataclass
    class Response:
        status_code: int
        headers: dict
        request: None = None

    public = load_private_key(keys.private_pem).public_key()
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ECDSA_P256_SHA256, key_resolver=Key(None))
    verifier.key_resolver.resolve_public_key = lambda key_id: public if key_id == keys.kid else None
    [result] = verifier.verify(Response(200, answer.headers), expect_tag=None, max_age=None, body=answer.body)

    assert (
        'keyid="' + keys.kid + '"' in answer.headers["Signature-Input"]
        and "alg=" not in answer.headers["Signature-Input"]
    )
    assert list(result.covered_components)[:3] == ['"@status"', '"content-digest"', '"content-type"']
    with pytest.raises(InvalidSignature):
        verifier.verify(Response(201, answer.headers), max_age=None)
    with pytest.raises(InvalidSignature):
        verifier.verify(Response(200, answer.headers), max_age=None, body=b'{"status":"canceled"}')


def test_a_key_anyone_could_sign_for_or_spelt_another_way_is_refused_as_web_bot_auths_are():
    """An Ed25519 key of small order, or a coordinate written another way than the one canonical
    spelling, proves nothing: the platform's key is refused as malformed."""
    from shared.seams.key_directory import SMALL_ORDER

    key = ec.generate_private_key(ec.SECP256R1())
    req = signed_request(key, algorithms.ECDSA_P256_SHA256)
    small = {"kty": "OKP", "crv": "Ed25519", "kid": "platform-2026"}
    small["x"] = base64.urlsafe_b64encode(SMALL_ORDER[1]).rstrip(b"=").decode()
    padded = {**jwk_of(key, "platform-2026")}
    padded["x"] += "="

    for keys in ([small], [padded]):
        with pytest.raises(SignatureRefusal) as refused:
            signatures.verify_request(req, lambda fresh, keys=keys: keys)
        assert (refused.value.code, refused.value.content) == (
            "signature_invalid",
            "the platform's key is malformed",
        )
