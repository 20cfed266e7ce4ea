"""shared.purchase.receipt.signatures: every receipt carries a detached ES256 JWS over its canonical
form. It verifies with nothing but the published JWKS and a standard JOSE library, survives key
rotation, and, checked byte-exactly, no changed byte of a stored receipt goes unnoticed."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from jose import jws as jose_jws

from shared.config.keys import KeySet, public_jwk
from shared.purchase.receipt import signatures
from shared.purchase.receipt.document import CHECK_NAMES, encode
from shared.purchase.receipt.signatures import canonical, sign, verify
from tests.support import new_ec_key as new_key
from tests.support import private_pem as pem
from tests.support import public_pem

B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@pytest.fixture(scope="module")
def key() -> ec.EllipticCurvePrivateKey:
    return new_key()


@pytest.fixture(scope="module")
def keys(key) -> KeySet:
    return KeySet.load(pem(key))


@pytest.fixture
def content() -> dict:
    """A receipt as the purchase flow builds it, before it is signed: nested objects, nulls,
    numbers and non-ASCII text (receipts are UTF-8, not \\u-escaped)."""
    return {
        "receipt_id": "rcpt_abcdefghijklmnopqrstuvwxyz",
        "version": 1,
        "issued_at": "2026-11-30T12:34:56Z",
        "operation": "purchase_free_bundle",
        "status": "fulfilled",
        "bundle": {"id": "agent-starter-kit", "title": "Agent Starter Kit"},
        "buyer": {"id": "b" * 64, "hint": "z***@e***.org"},
        "billing": {"amount": "0.00", "currency": "USD", "cost_estimate": "0.01", "cost_currency": "USD"},
        "checks": [{"name": name, "result": "pass", "detail": f"{name} ok"} for name in CHECK_NAMES],
        "receipt_url": "http://localhost:7071/api/receipts/rcpt_abcdefghijklmnopqrstuvwxyz",
        "download": {"token_id": "tok_0123456789", "expires_at": "2026-12-07T12:34:56Z"},
        "error": None,
        "caller": {"channel": "mcp", "user_agent": "agent/1.0 (Zoë; 東京)"},
    }


@pytest.fixture
def signed(content, keys) -> dict:
    return {**content, "signature": sign(content, keys)}


@pytest.fixture
def body(signed) -> bytes:
    return encode(signed)


# --- signing and verifying -------------------------------------------------------------------------


def test_a_signed_receipt_verifies_against_the_stores_jwks(body, keys):
    verdict = verify(body, keys.jwks())

    assert verdict.valid, verdict.reason
    assert verdict.kid == keys.kid
    assert keys.kid in verdict.reason


def test_a_receipt_whose_whole_numbers_came_back_as_floats_still_verifies_reformatted(signed, keys):
    # As a client that reads every number as a float hands it on (A2A's protobuf Value, JavaScript).
    floated = json.dumps({**signed, "version": float(signed["version"])}).encode()
    assert b'"version": 1.0' in floated
    tampered = json.dumps({**signed, "version": 1.5}).encode()

    assert verify(floated, keys.jwks(), exact_bytes=False).valid
    assert not verify(floated, keys.jwks()).valid  # the bytes are not the store's
    assert not verify(tampered, keys.jwks(), exact_bytes=False).valid


def test_the_signature_member_names_the_algorithm_the_key_and_a_detached_jws(signed, keys):
    signature = signed["signature"]

    assert set(signature) == {"alg", "kid", "jws"}
    assert signature["alg"] == "ES256"
    assert signature["kid"] == keys.kid
    protected, payload, raw = signature["jws"].split(".")
    assert payload == ""
    assert json.loads(b64url_decode(protected)) == {
        "alg": "ES256",
        "kid": keys.kid,
        "typ": signatures.TYPE,
    }
    assert len(b64url_decode(raw)) == 64


def test_signing_ignores_an_existing_signature_member(content, keys):
    resigned = sign({**content, "signature": {"alg": "none", "kid": "x", "jws": "a..b"}}, keys)

    assert verify(encode({**content, "signature": resigned}), keys.jwks()).valid


def test_verify_with_exact_bytes_is_the_default(content, keys):
    reindented = json.dumps({**content, "signature": sign(content, keys)}, indent=4).encode()

    assert not verify(reindented, keys.jwks()).valid
    assert verify(reindented, keys.jwks(), exact_bytes=False).valid


# --- no changed byte goes unnoticed ----------------------------------------------------------------

WHITESPACE_SWAPS = {b" ": [b"\t", b"\n", b"\r"], b"\n": [b" ", b"\r", b"\t"]}
STRUCTURE_SWAPS = {b'"': b"'", b"{": b"[", b"}": b"]", b"[": b"{", b"]": b"}", b":": b";", b",": b"."}


def substitutes(byte: int) -> list[bytes]:
    """Other bytes for one position: other whitespace for whitespace (keeping the JSON readable,
    the case only a byte-exact check catches), a neighbouring character for everything else."""
    char = bytes([byte])
    if char in WHITESPACE_SWAPS:
        return WHITESPACE_SWAPS[char]
    if char in STRUCTURE_SWAPS:
        return [STRUCTURE_SWAPS[char]]
    if char.isdigit():
        return [str((int(char) + 1) % 10).encode()]
    if char.isalpha():
        return [char.swapcase(), bytes([byte ^ 0x01])]
    return [bytes([byte ^ 0x01])]


def signature_metadata_span(body: bytes) -> range:
    """The `"alg": ...` and `"kid": ...` members of the signature object (covered separately)."""
    start = body.index(b'"alg": "ES256"', body.index(b'"signature": {'))
    end = body.index(b'"jws": ', start)
    return range(start, end)


def changed_bodies(body: bytes, skip: set[int]):
    for position in range(len(body)):
        if position in skip:
            continue
        for replacement in substitutes(body[position]):
            yield position, body[:position] + replacement + body[position + 1 :]


def test_a_change_of_any_single_byte_of_a_stored_receipt_invalidates_it(body, keys):
    jwks = keys.jwks()
    # Every position but the signature's alg/kid members (their own test below): whitespace there
    # is still tried.
    skip = {i for i in signature_metadata_span(body) if not body[i : i + 1].isspace()}

    tried, accepted = 0, []
    for position, changed in changed_bodies(body, skip):
        tried += 1
        if verify(changed, jwks).valid:
            accepted.append((position, body[max(0, position - 20) : position + 20]))

    assert accepted == []
    assert tried > len(body)  # whitespace positions are tried with more than one substitute
    assert len(skip) < 70  # the two members, nothing more


def structural_whitespace(body: bytes) -> list[int]:
    """Positions of whitespace between JSON tokens (not inside strings)."""
    positions, in_string, escaped = [], False, False
    for position, byte in enumerate(body):
        char = bytes([byte])
        if in_string:
            in_string = escaped or char != b'"'
            escaped = not escaped and char == b"\\"
        elif char == b'"':
            in_string = True
        elif char in (b" ", b"\n"):
            positions.append(position)
    return positions


def test_whitespace_changes_are_caught_only_by_the_byte_exact_check(body, keys):
    jwks = keys.jwks()
    positions = structural_whitespace(body)
    assert len(positions) > 100

    for position in positions:
        for replacement in WHITESPACE_SWAPS[body[position : position + 1]]:
            changed = body[:position] + replacement + body[position + 1 :]
            assert not verify(changed, jwks).valid, position
            assert verify(changed, jwks, exact_bytes=False).valid, position


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda b: b + b"\n", id="trailing-newline"),
        pytest.param(lambda b: b" " + b, id="leading-space"),
        pytest.param(lambda b: b.replace(b"\n  ", b"\n   ", 1), id="one-more-space"),
        pytest.param(lambda b: b.replace(b'": ', b'":', 1), id="one-space-fewer"),
        pytest.param(lambda b: b.replace("Zoë".encode(), b"Zo\\u00eb"), id="escaped-non-ascii"),
        pytest.param(lambda b: b"\xef\xbb\xbf" + b, id="byte-order-mark"),
    ],
)
def test_inserted_removed_or_re_escaped_bytes_invalidate_a_stored_receipt(body, keys, changed):
    altered = changed(body)
    assert altered != body

    assert not verify(altered, keys.jwks()).valid


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda s, other: s.update(alg="ES257"), id="alg-value"),
        pytest.param(lambda s, other: s.update(kid=other), id="kid-value"),
        pytest.param(
            lambda s, other: s.update(kid=s["kid"][:-1] + ("B" if s["kid"].endswith("A") else "A")),
            id="kid-last-character",
        ),
        pytest.param(lambda s, other: s.update(note="added"), id="extra-member"),
        pytest.param(lambda s, other: s.pop("kid"), id="kid-removed"),
    ],
)
def test_a_changed_signature_alg_or_kid_member_invalidates_the_receipt(content, keys, change):
    signature = sign(content, keys)
    original = dict(signature)
    change(signature, KeySet.load(pem(new_key())).kid)
    assert signature != original

    assert not verify(encode({**content, "signature": signature}), keys.jwks()).valid


def test_the_last_character_of_the_signature_has_no_equivalent_spelling(content, keys):
    signature = sign(content, keys)
    last = signature["jws"][-1]
    spellings = [c for c in B64URL if c != last and B64URL.index(c) >> 4 == B64URL.index(last) >> 4]
    assert len(spellings) == 15

    accepted = [
        c
        for c in spellings
        if verify(
            encode({**content, "signature": {**signature, "jws": signature["jws"][:-1] + c}}), keys.jwks()
        ).valid
    ]

    assert accepted == []


# --- changed content -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda r: r.update(status="refused"), id="status"),
        pytest.param(lambda r: r["billing"].update(amount="0.01"), id="amount"),
        pytest.param(lambda r: r["checks"][0].update(result="degraded"), id="check-result"),
        pytest.param(lambda r: r["checks"].pop(), id="check-removed"),
        pytest.param(lambda r: r.update(version=2), id="version"),
        pytest.param(lambda r: r.update(error={"code": "x"}), id="null-to-object"),
        pytest.param(lambda r: r.update(extra=True), id="member-added"),
        pytest.param(lambda r: r.pop("caller"), id="member-removed"),
        pytest.param(lambda r: r["caller"].update(user_agent="agent/1.0 (Zoe; 東京)"), id="accent-dropped"),
    ],
)
def test_a_changed_value_does_not_verify_however_it_is_serialised(signed, keys, change):
    change(signed)

    assert not verify(encode(signed), keys.jwks()).valid
    assert not verify(encode(signed), keys.jwks(), exact_bytes=False).valid
    assert not verify(json.dumps(signed).encode(), keys.jwks(), exact_bytes=False).valid


@pytest.mark.parametrize(
    "serialise",
    [
        pytest.param(lambda r: json.dumps(r, indent=4).encode(), id="indent-4"),
        pytest.param(lambda r: json.dumps(r, separators=(",", ":")).encode(), id="compact-ascii"),
        pytest.param(lambda r: json.dumps(dict(reversed(r.items())), indent=1).encode(), id="reordered"),
        pytest.param(lambda r: json.dumps(r, ensure_ascii=False, sort_keys=True).encode(), id="sorted"),
    ],
)
def test_a_re_serialised_receipt_verifies_only_without_the_byte_exact_check(signed, keys, serialise):
    reserialised = serialise(signed)
    assert reserialised != encode(signed)

    assert verify(reserialised, keys.jwks(), exact_bytes=False).valid
    assert not verify(reserialised, keys.jwks()).valid


@pytest.mark.parametrize(
    "signature",
    [
        pytest.param(..., id="removed"),
        pytest.param(None, id="null"),
        pytest.param({}, id="empty"),
        pytest.param("eyJhbGciOiJFUzI1NiJ9..c2ln", id="string"),
        pytest.param({"alg": "ES256", "jws": 42}, id="jws-not-a-string"),
    ],
)
def test_a_receipt_without_a_usable_signature_does_not_verify(content, keys, signature):
    receipt = dict(content) if signature is ... else {**content, "signature": signature}

    for exact in (True, False):
        verdict = verify(encode(receipt), keys.jwks(), exact_bytes=exact)
        assert not verdict.valid
        assert verdict.reason == "the receipt carries no signature"


def test_a_signature_carrying_its_payload_is_not_accepted_as_detached(content, keys):
    signature = sign(content, keys)
    protected, _, raw = signature["jws"].split(".")
    attached = f"{protected}.{b64url(canonical(content))}.{raw}"

    verdict = verify(encode({**content, "signature": {**signature, "jws": attached}}), keys.jwks())

    assert not verdict.valid
    assert "detached" in verdict.reason


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[1, 2]", b'"receipt"', b"null", b"[" * 50_000 + b"]" * 50_000],
    ids=["empty", "text", "array", "string", "null", "deeply-nested"],
)
def test_a_body_that_is_not_a_json_receipt_does_not_verify(keys, body):
    assert not verify(body, keys.jwks()).valid


# --- forged headers and foreign keys ---------------------------------------------------------------


def _forged(content: dict, header: dict, sign_input) -> bytes:
    protected = b64url(json.dumps(header, separators=(",", ":")).encode())
    signing_input = f"{protected}.{b64url(canonical(content))}".encode()
    forged = {
        "alg": header.get("alg"),
        "kid": header.get("kid"),
        "jws": f"{protected}..{sign_input(signing_input)}",
    }
    return encode({**content, "signature": forged})


def _hs256(secret: bytes):
    return lambda signing_input: b64url(hmac.new(secret, signing_input, hashlib.sha256).digest())


def test_an_alg_none_signature_is_refused(content, keys):
    body = _forged(content, {"alg": "none", "kid": keys.kid, "typ": signatures.TYPE}, lambda _: "")

    verdict = verify(body, keys.jwks())

    assert not verdict.valid
    assert "'none'" in verdict.reason


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param(lambda key: public_pem(key).encode(), id="public-pem"),
        pytest.param(lambda key: json.dumps(public_jwk(key)).encode(), id="public-jwk-json"),
        pytest.param(lambda key: b"", id="empty"),
    ],
)
def test_an_hs256_signature_keyed_with_public_material_is_refused(content, key, keys, secret):
    body = _forged(content, {"alg": "HS256", "kid": keys.kid, "typ": signatures.TYPE}, _hs256(secret(key)))

    for exact in (True, False):
        verdict = verify(body, keys.jwks(), exact_bytes=exact)
        assert not verdict.valid
        assert "'HS256'" in verdict.reason


def test_a_header_without_an_algorithm_is_refused(content, key, keys):
    body = _forged(content, {"kid": keys.kid}, lambda _: "")

    assert not verify(body, keys.jwks()).valid


def test_a_receipt_signed_by_an_unpublished_key_names_the_unknown_kid(content, keys):
    stranger = KeySet.load(pem(new_key()))
    body = encode({**content, "signature": sign(content, stranger)})

    verdict = verify(body, keys.jwks())

    assert not verdict.valid
    assert verdict.kid == stranger.kid
    assert "no published key" in verdict.reason


def test_a_receipt_signed_by_another_key_under_the_stores_kid_does_not_verify(content, keys):
    # An attacker who copies the store's kid into the header still cannot make the signature match.
    impostor = new_key()
    body = _forged(
        content,
        {"alg": "ES256", "kid": keys.kid, "typ": signatures.TYPE},
        lambda data: jose_jws.sign(data, pem(impostor), algorithm="ES256").split(".")[2],
    )

    verdict = verify(body, keys.jwks())

    assert not verdict.valid
    assert "does not match" in verdict.reason


def test_a_jwks_holding_another_key_under_the_receipts_kid_does_not_verify_it(body, keys):
    other = public_jwk(new_key())

    verdict = verify(body, {"keys": [{**other, "kid": keys.kid}]})

    assert not verdict.valid
    assert "does not match" in verdict.reason


@pytest.mark.parametrize(
    "jwks",
    [{"keys": []}, {}, {"keys": "not a list of keys"}, {"keys": [None, "x", 3]}],
    ids=["no-keys", "no-member", "string", "junk-entries"],
)
def test_an_empty_or_junk_jwks_verifies_nothing(body, jwks):
    assert not verify(body, jwks).valid


# --- the canonical form ----------------------------------------------------------------------------


def test_the_canonical_form_is_key_sorted_compact_utf8_without_the_signature():
    receipt = {"b": [3, {"z": None, "a": True}], "a": "Zoë 東京", "signature": {"jws": "x"}, "c": 1.5}

    assert canonical(receipt) == '{"a":"Zoë 東京","b":[3,{"a":true,"z":null}],"c":1.5}'.encode()


def test_the_canonical_form_does_not_depend_on_key_order(content):
    def reverse(value):
        if isinstance(value, dict):
            return {k: reverse(v) for k, v in reversed(value.items())}
        if isinstance(value, list):
            return [reverse(v) for v in value]
        return value

    reordered = reverse(content)
    assert list(reordered) != list(content)

    assert canonical(reordered) == canonical(content)


def test_a_receipt_re_ordered_by_a_client_still_verifies_without_the_byte_exact_check(signed, keys):
    reordered = json.dumps(dict(sorted(signed.items(), reverse=True)), ensure_ascii=False).encode()

    assert verify(reordered, keys.jwks(), exact_bytes=False).valid


# --- standard JOSE ---------------------------------------------------------------------------------


def test_the_signature_verifies_with_a_plain_jose_library_call(signed, keys):
    protected, _, raw = signed["signature"]["jws"].split(".")
    payload = b64url(canonical(signed))
    jwk = keys.jwks()["keys"][0]

    verified = jose_jws.verify(f"{protected}.{payload}.{raw}", jwk, algorithms=["ES256"])

    assert verified == canonical(signed)
    assert json.loads(verified) == {k: v for k, v in signed.items() if k != "signature"}


def test_the_signature_is_a_raw_p256_ecdsa_signature_over_the_jws_signing_input(signed, key):
    # The same check with no JOSE library at all: RFC 7515 §5.2 with ES256 from RFC 7518 §3.4.
    protected, _, raw = signed["signature"]["jws"].split(".")
    signature = b64url_decode(raw)
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))

    key.public_key().verify(
        der, f"{protected}.{b64url(canonical(signed))}".encode(), ec.ECDSA(hashes.SHA256())
    )


# --- key rotation ----------------------------------------------------------------------------------


def test_a_receipt_signed_before_a_rotation_verifies_against_the_new_jwks(key, body, keys):
    rotated = KeySet.load(pem(new_key()), (public_jwk(key),))
    assert rotated.kid != keys.kid

    verdict = verify(body, rotated.jwks())

    assert verdict.valid, verdict.reason
    assert verdict.kid == keys.kid


def test_receipts_signed_after_a_rotation_use_the_new_key_and_both_verify(key, content, body):
    rotated = KeySet.load(pem(new_key()), (public_jwk(key),))

    newer = encode({**content, "signature": sign(content, rotated)})

    assert json.loads(newer)["signature"]["kid"] == rotated.kid
    assert verify(newer, rotated.jwks()).valid
    assert verify(body, rotated.jwks()).valid


def test_a_receipt_signed_by_a_key_dropped_from_the_jwks_no_longer_verifies(body, keys):
    rotated_without_retired = KeySet.load(pem(new_key()))

    verdict = verify(body, rotated_without_retired.jwks())

    assert not verdict.valid
    assert verdict.kid == keys.kid


def test_a_signature_header_nested_past_the_parsers_stack_is_unreadable_not_a_crash(signed, keys):
    receipt = {**signed, "signature": {**signed["signature"], "jws": f"{b64url(b'[' * 2500)}..c2ln"}}

    verdict = verify(json.dumps(receipt).encode(), keys.jwks(), exact_bytes=False)

    assert verdict.valid is False
    assert verdict.reason == "the signature header is unreadable"
