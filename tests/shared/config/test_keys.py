"""shared.config.keys: the store's key set. The current key is named by its RFC 7638 thumbprint; retired
public keys stay published after it, so what they signed keeps verifying; nothing private is ever
published."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from shared.config.errors import NotConfigured
from shared.config.keys import (
    ALGORITHM,
    KeySet,
    load_private_key,
    public_jwk,
    retired_key_problem,
    thumbprint,
)

PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "k", "oth")


def pem(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def coordinates(key) -> tuple[str, str]:
    numbers = key.public_key().public_numbers()
    return b64url(numbers.x.to_bytes(32, "big")), b64url(numbers.y.to_bytes(32, "big"))


def rfc7638(key) -> str:
    """The thumbprint written out from RFC 7638 §3.2: the members crv, kty, x, y in that order,
    no whitespace, hashed with SHA-256 and base64url-encoded without padding."""
    x, y = coordinates(key)
    return b64url(hashlib.sha256(f'{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}'.encode()).digest())


def bare_jwk(key) -> dict[str, str]:
    x, y = coordinates(key)
    return {"kty": "EC", "crv": "P-256", "x": x, "y": y}


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def current() -> ec.EllipticCurvePrivateKey:
    return new_key()


@pytest.fixture(scope="module")
def retired() -> list[ec.EllipticCurvePrivateKey]:
    return [new_key(), new_key()]


# --- the current key -------------------------------------------------------------------------------


def test_the_kid_is_the_rfc7638_thumbprint_of_the_current_key(current):
    keys = KeySet.load(pem(current))

    assert keys.kid == rfc7638(current)
    assert len(base64.urlsafe_b64decode(keys.kid + "=")) == 32


def test_the_thumbprint_of_a_fixed_jwk_covers_only_the_required_members():
    # The example EC public key of RFC 7517 appendix A.1.
    jwk = {
        "kty": "EC",
        "crv": "P-256",
        "x": "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
        "y": "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM",
    }
    canonical = (
        '{"crv":"P-256","kty":"EC","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",'
        '"y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}'
    )

    assert thumbprint(jwk) == b64url(hashlib.sha256(canonical.encode()).digest())
    assert thumbprint({**jwk, "kid": "1", "use": "enc", "alg": "ES256"}) == thumbprint(jwk)
    assert thumbprint({**jwk, "x": jwk["y"], "y": jwk["x"]}) != thumbprint(jwk)


def test_the_kid_does_not_depend_on_the_pem_format(current):
    sec1 = current.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()

    assert KeySet.load(sec1).kid == KeySet.load(pem(current)).kid == rfc7638(current)


def test_different_keys_have_different_kids(current):
    assert KeySet.load(pem(current)).kid != KeySet.load(pem(new_key())).kid


def test_the_current_key_is_published_first_with_kid_alg_and_use(current):
    keys = KeySet.load(pem(current))

    assert keys.jwks() == {
        "keys": [{**bare_jwk(current), "kid": rfc7638(current), "alg": "ES256", "use": "sig"}]
    }
    assert ALGORITHM == "ES256"


def test_public_jwk_of_a_private_key_and_of_its_public_key_are_the_same(current):
    assert public_jwk(current) == public_jwk(current.public_key())
    assert public_jwk(current)["kid"] == rfc7638(current)


def test_a_coordinate_with_leading_zero_bytes_is_published_at_full_length():
    key = new_key()
    while key.public_key().public_numbers().y >= 2**248:
        key = new_key()

    published = KeySet.load(pem(key)).jwks()["keys"][0]

    assert len(base64.urlsafe_b64decode(published["y"] + "=")) == 32
    assert published["kid"] == rfc7638(key)


# --- retired keys ----------------------------------------------------------------------------------


def test_retired_keys_are_published_after_the_current_one_in_the_given_order(current, retired):
    keys = KeySet.load(pem(current), tuple(bare_jwk(k) for k in retired))

    published = keys.jwks()["keys"]

    assert [k["kid"] for k in published] == [rfc7638(current), *(rfc7638(k) for k in retired)]
    assert keys.kid == rfc7638(current)
    for key, jwk in zip([current, *retired], published, strict=True):
        assert jwk == {**bare_jwk(key), "kid": rfc7638(key), "alg": "ES256", "use": "sig"}


def test_a_retired_key_listed_twice_is_published_once(current, retired):
    first = bare_jwk(retired[0])

    keys = KeySet.load(pem(current), (first, bare_jwk(retired[1]), {**first, "kid": "again"}, first))

    kids = [k["kid"] for k in keys.jwks()["keys"]]
    assert kids == [rfc7638(current), rfc7638(retired[0]), rfc7638(retired[1])]


def test_the_current_key_listed_as_retired_is_published_once_as_the_current_key(current, retired):
    keys = KeySet.load(pem(current), (bare_jwk(retired[0]), bare_jwk(current)))

    assert [k["kid"] for k in keys.jwks()["keys"]] == [rfc7638(current), rfc7638(retired[0])]


@pytest.mark.parametrize(
    "kid",
    [pytest.param("wrong-kid", id="wrong"), pytest.param("", id="empty"), pytest.param(None, id="missing")],
)
def test_a_retired_key_is_published_under_its_true_thumbprint_whatever_kid_it_was_given(current, kid):
    old = new_key()
    given = bare_jwk(old) if kid is None else {**bare_jwk(old), "kid": kid}

    keys = KeySet.load(pem(current), (given,))

    assert keys.jwks()["keys"][1]["kid"] == rfc7638(old)
    assert keys.public_key(rfc7638(old)) is not None
    if kid:
        assert keys.public_key(kid) is None


def test_a_retired_key_given_the_current_keys_kid_does_not_replace_the_current_key(current):
    impostor = {**bare_jwk(new_key()), "kid": rfc7638(current)}

    keys = KeySet.load(pem(current), (impostor,))

    assert keys.public_key(rfc7638(current)) == public_jwk(current)
    assert keys.jwks()["keys"][1]["kid"] == thumbprint(impostor) != rfc7638(current)


def test_retired_keys_give_alg_and_use_even_when_listed_with_others(current):
    old = {**bare_jwk(new_key()), "alg": "HS256", "use": "enc"}

    published = KeySet.load(pem(current), (old,)).jwks()["keys"][1]

    assert (published["alg"], published["use"]) == ("ES256", "sig")


# --- public_key ------------------------------------------------------------------------------------


def test_public_key_finds_the_current_and_every_retired_key_by_kid(current, retired):
    keys = KeySet.load(pem(current), tuple(bare_jwk(k) for k in retired))

    for key in (current, *retired):
        found = keys.public_key(rfc7638(key))
        assert found is not None
        assert (found["x"], found["y"]) == coordinates(key)


@pytest.mark.parametrize("kid", ["", "unknown", "None"])
def test_public_key_of_an_unknown_kid_is_none(current, retired, kid):
    keys = KeySet.load(pem(current), tuple(bare_jwk(k) for k in retired))

    assert keys.public_key(kid) is None
    assert keys.public_key(rfc7638(new_key())) is None


# --- nothing private is published ------------------------------------------------------------------


def test_no_private_member_is_ever_published(current):
    # Retired keys given with extra members, even private-looking ones, are reduced to the public
    # members (settings refuse "d" before it gets here; the key set must not rely on that).
    numbers = current.private_numbers()
    leaky = {**bare_jwk(new_key()), "d": b64url(numbers.private_value.to_bytes(32, "big")), "ext": True}

    keys = KeySet.load(pem(current), (leaky,))

    document = json.dumps(keys.jwks())
    for jwk in keys.jwks()["keys"]:
        assert set(jwk) == {"kty", "crv", "x", "y", "kid", "alg", "use"}
        assert not set(jwk) & set(PRIVATE_MEMBERS)
    assert b64url(numbers.private_value.to_bytes(32, "big")) not in document
    assert "PRIVATE KEY" not in document


def test_the_jwks_is_a_fresh_document_each_time(current):
    keys = KeySet.load(pem(current))

    keys.jwks()["keys"].clear()

    assert len(keys.jwks()["keys"]) == 1


# --- not configured --------------------------------------------------------------------------------


def _unusable() -> list:
    return [
        pytest.param("", "is not set", id="missing"),
        pytest.param("not a pem", "not a readable PEM", id="garbage"),
        pytest.param(
            new_key()
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode(),
            "not a readable PEM",
            id="public-key-only",
        ),
        pytest.param(pem(rsa.generate_private_key(65537, 2048)), "EC P-256", id="rsa"),
        pytest.param(pem(ec.generate_private_key(ec.SECP384R1())), "EC P-256", id="p384"),
    ]


@pytest.mark.parametrize(("private_pem", "detail"), _unusable())
def test_an_unusable_signing_key_is_not_configured_naming_the_setting(private_pem, detail):
    for load in (lambda: KeySet.load(private_pem), lambda: load_private_key(private_pem)):
        with pytest.raises(NotConfigured) as caught:
            load()
        assert "STOREFRONT_SIGNING_KEY" in caught.value.message
        assert detail in caught.value.message
        assert caught.value.status == 503


def test_retired_keys_alone_do_not_make_a_key_set(retired):
    with pytest.raises(NotConfigured, match="STOREFRONT_SIGNING_KEY is not set"):
        KeySet.load("", tuple(bare_jwk(k) for k in retired))


def test_load_private_key_returns_the_p256_key(current):
    loaded = load_private_key(pem(current))

    assert loaded.curve.name == "secp256r1"
    assert loaded.private_numbers() == current.private_numbers()


# --- one written form per key ----------------------------------------------------------------------


def test_the_key_set_keeps_the_pkcs8_form_of_the_key_it_read(current):
    sec1 = current.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()

    keys = KeySet.load("  \n" + sec1.replace("\n", "\r\n") + "\n ")

    assert keys.private_pem == pem(current)
    assert keys.kid == rfc7638(current)


def _more_than_one_key() -> list:
    key, other = new_key(), new_key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return [
        pytest.param(pem(key) + pem(other), id="two-private-keys"),
        pytest.param(public.decode() + pem(other), id="a-public-key-first"),  # jose would sign with it
        pytest.param(f'"{pem(key)}"', id="json-quotes"),
        pytest.param(f"key: {pem(key)}", id="text-before"),
        pytest.param(pem(key) + "-- the old one", id="text-after"),
    ]


@pytest.mark.parametrize("private_pem", _more_than_one_key())
def test_a_signing_key_beside_anything_else_is_not_read(private_pem):
    with pytest.raises(NotConfigured) as caught:
        load_private_key(private_pem)

    assert caught.value.message.startswith(
        "STOREFRONT_SIGNING_KEY must be one PEM private key and nothing else"
    )


def test_a_retired_key_as_the_jwks_publishes_it_has_no_problem(current):
    assert retired_key_problem(public_jwk(current)) is None
    assert retired_key_problem(bare_jwk(current)) is None


def _respelt(jwk: dict, member: str, spelling) -> dict:
    return {**jwk, member: spelling(jwk[member])}


def _unused_bits_set(text: str) -> str:
    """The same 32 bytes with the unused low bits of the last character set: another spelling."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return text[:-1] + alphabet[alphabet.index(text[-1]) | 3]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param(lambda j: _respelt(j, "x", lambda x: x + "="), "unpadded base64url", id="padded"),
        pytest.param(lambda j: _respelt(j, "y", lambda y: y[:20] + "!" + y[20:]), "base64url", id="stray"),
        pytest.param(lambda j: _respelt(j, "y", _unused_bits_set), "unpadded base64url", id="unused-bits"),
        pytest.param(lambda j: _respelt(j, "x", lambda x: "AA" + x), "32 bytes", id="33-bytes"),
        pytest.param(lambda j: {**j, "x": 7}, "32 bytes", id="number"),
        pytest.param(lambda j: {**j, "kid": "key-2025"}, "RFC 7638 thumbprint", id="kid"),
        pytest.param(lambda j: {**j, "alg": "HS256"}, "ES256", id="alg"),
        pytest.param(lambda j: {**j, "use": "enc"}, "use sig", id="use"),
        pytest.param(lambda j: {**j, "d": "c2VjcmV0"}, "private member", id="private"),
        pytest.param(lambda j: {**j, "crv": "P-384"}, "EC P-256", id="curve"),
        pytest.param(lambda j: [j], "EC P-256", id="not-an-object"),
    ],
)
def test_a_retired_key_in_any_other_form_is_named_as_the_problem(current, change, problem):
    found = retired_key_problem(change(public_jwk(current)))

    assert found is not None and problem in found
    assert "c2VjcmV0" not in found


# Two points of P-256 with a small coordinate, so that the coordinate plus p still fits 32 bytes.
SMALL_X = (5, 0x459243B9AA581806FE913BCE99817ADE11CA503C64D9A3C533415C083248FBCC)
SMALL_Y = (0x8D0177EBAB9C6E9E10DB6DD095DBAC0D6375E8A97B70F611875D877F0069D2C7, 1)
P256_P = 2**256 - 2**224 + 2**192 + 2**96 - 1


def point_jwk(x: int, y: int) -> dict[str, str]:
    x_text, y_text = (b64url(n.to_bytes(32, "big")) for n in (x, y))
    return {"kty": "EC", "crv": "P-256", "x": x_text, "y": y_text}


@pytest.mark.parametrize("point", [SMALL_X, SMALL_Y], ids=["small-x", "small-y"])
def test_a_point_with_a_small_coordinate_is_a_retired_key_like_any_other(point):
    assert retired_key_problem(point_jwk(*point)) is None


@pytest.mark.parametrize(
    ("point", "shift"),
    [pytest.param(SMALL_X, (P256_P, 0), id="x-plus-p"), pytest.param(SMALL_Y, (0, P256_P), id="y-plus-p")],
)
def test_a_coordinate_plus_p_names_the_same_point_and_is_refused(point, shift):
    """Arithmetic modulo p would read it as the same key under a second kid; verifiers refuse it."""
    x, y = point[0] + shift[0], point[1] + shift[1]

    assert x < 2**256 and y < 2**256
    assert thumbprint(point_jwk(x, y)) != thumbprint(point_jwk(*point))
    found = retired_key_problem(point_jwk(x, y))

    assert found is not None and "below p" in found
