"""shared.purchase.tokens: ES256 download tokens named by their key's RFC 7638 thumbprint, and the refusal
of every signing key that is not an EC P-256 private key."""

from __future__ import annotations

import base64
import hashlib
import json
import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from jose import jwt
from jose.exceptions import JWTClaimsError, JWTError

from shared.config.errors import NotConfigured
from shared.config.keys import ALGORITHM, KeySet, public_jwk
from shared.purchase.tokens import AUDIENCE, TokenSigner

ISSUER = "https://store.example.net"
TTL = 7 * 24 * 3600


def pem(key, fmt=serialization.PrivateFormat.PKCS8, encryption=None) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, fmt, encryption or serialization.NoEncryption()
    ).decode()


def public_pem(key) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rfc7638_thumbprint(key: ec.EllipticCurvePrivateKey) -> str:
    """Computed here from the RFC's text: the required members crv, kty, x, y in lexicographic
    order, no whitespace, coordinates as full-length (32-byte) big-endian base64url."""
    numbers = key.public_key().public_numbers()
    x, y = (b64url(n.to_bytes(32, "big")) for n in (numbers.x, numbers.y))
    canonical = '{"crv":"P-256","kty":"EC","x":"' + x + '","y":"' + y + '"}'
    return b64url(hashlib.sha256(canonical.encode()).digest())


@pytest.fixture(scope="module")
def key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def signer(key) -> TokenSigner:
    return TokenSigner(KeySet.load(pem(key)), ISSUER, TTL)


def test_mint_produces_a_compact_es256_jws_named_by_the_key_thumbprint(key, signer):
    token = signer.mint("agent-starter-kit").token

    header = jwt.get_unverified_header(token)
    assert token.count(".") == 2
    assert header["alg"] == ALGORITHM == "ES256"
    assert header["kid"] == rfc7638_thumbprint(key)
    assert signer.kid == header["kid"]


def test_token_verifies_with_the_public_key_and_audience(key, signer):
    minted = signer.mint("mcp-field-guide")

    claims = jwt.decode(minted.token, public_pem(key), algorithms=["ES256"], audience=AUDIENCE, issuer=ISSUER)

    assert claims["aud"] == "storefront-download"
    assert claims["sub"] == "mcp-field-guide"
    assert claims["iss"] == ISSUER
    assert claims["jti"] == minted.jti
    assert claims["exp"] == claims["iat"] + TTL == minted.expires_at
    assert abs(claims["iat"] - time.time()) < 5


def test_signature_is_a_raw_p256_ecdsa_signature_over_the_signing_input(key, signer):
    token = signer.mint("agent-starter-kit").token
    head, payload, signature = token.split(".")
    raw = b64url_decode(signature)

    assert len(raw) == 64
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key.public_key().verify(der, f"{head}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))


def test_token_does_not_verify_with_another_key(signer):
    other = ec.generate_private_key(ec.SECP256R1())

    with pytest.raises(JWTError):
        jwt.decode(
            signer.mint("agent-starter-kit").token, public_pem(other), algorithms=["ES256"], audience=AUDIENCE
        )


def test_token_is_refused_for_another_audience(key, signer):
    with pytest.raises(JWTClaimsError):
        jwt.decode(
            signer.mint("agent-starter-kit").token, public_pem(key), algorithms=["ES256"], audience="other"
        )


def test_tampered_token_does_not_verify(key, signer):
    head, _, signature = signer.mint("agent-starter-kit").token.split(".")
    forged = b64url(json.dumps({"aud": AUDIENCE, "sub": "mcp-field-guide", "exp": 4102444800}).encode())

    with pytest.raises(JWTError):
        jwt.decode(f"{head}.{forged}.{signature}", public_pem(key), algorithms=["ES256"], audience=AUDIENCE)


def test_claims_follow_the_injected_clock_and_ttl(key):
    signer = TokenSigner(KeySet.load(pem(key)), ISSUER, 600, clock=lambda: 1_893_492_900.75)

    minted = signer.mint("agent-starter-kit")

    claims = jwt.get_unverified_claims(minted.token)
    assert claims == {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "agent-starter-kit",
        "jti": minted.jti,
        "iat": 1_893_492_900,
        "exp": 1_893_493_500,
    }
    assert minted.expires_at == 1_893_493_500


def test_expired_token_is_refused(key):
    signer = TokenSigner(KeySet.load(pem(key)), ISSUER, 60, clock=lambda: time.time() - 3600)

    with pytest.raises(JWTError):
        jwt.decode(
            signer.mint("agent-starter-kit").token, public_pem(key), algorithms=["ES256"], audience=AUDIENCE
        )


def test_every_token_has_a_unique_jti(signer):
    minted = [signer.mint("agent-starter-kit") for _ in range(200)]

    assert len({m.jti for m in minted}) == 200
    assert len({m.token for m in minted}) == 200
    assert all(len(b64url_decode(m.jti)) == 16 for m in minted)


def test_minting_again_with_the_jti_and_issued_at_of_a_token_gives_identical_claims(key):
    first = TokenSigner(KeySet.load(pem(key)), ISSUER, 600, clock=lambda: 1_893_492_900.75).mint(
        "mcp-field-guide"
    )
    later = TokenSigner(KeySet.load(pem(key)), ISSUER, 600, clock=lambda: 1_893_499_999.0)

    again = later.mint("mcp-field-guide", jti=first.jti, issued_at=first.issued_at)

    assert jwt.get_unverified_claims(again.token) == jwt.get_unverified_claims(first.token)
    assert jwt.get_unverified_header(again.token) == jwt.get_unverified_header(first.token)
    assert (again.jti, again.issued_at, again.expires_at) == (first.jti, 1_893_492_900, 1_893_493_500)


def test_a_reminted_token_verifies_with_the_public_key(key, signer):
    first = signer.mint("agent-starter-kit")

    again = signer.mint("agent-starter-kit", jti=first.jti, issued_at=first.issued_at)

    claims = jwt.decode(again.token, public_pem(key), algorithms=["ES256"], audience=AUDIENCE, issuer=ISSUER)
    assert claims["jti"] == first.jti
    assert claims["iat"] == first.issued_at
    assert claims["exp"] == first.expires_at


def test_reminting_after_a_json_recovery_point_gives_the_same_claims(signer):
    first = signer.mint("agent-starter-kit")
    saved = json.loads(json.dumps({"jti": first.jti, "iat": first.issued_at}))

    again = signer.mint("agent-starter-kit", jti=saved["jti"], issued_at=saved["iat"])

    assert jwt.get_unverified_claims(again.token) == jwt.get_unverified_claims(first.token)


def test_only_a_given_jti_keeps_the_id_and_the_clock_gives_the_time(key):
    signer = TokenSigner(KeySet.load(pem(key)), ISSUER, 600, clock=lambda: 1_893_492_900.0)

    minted = signer.mint("agent-starter-kit", jti="resumed-token-id")

    assert minted.jti == "resumed-token-id"
    assert (minted.issued_at, minted.expires_at) == (1_893_492_900, 1_893_493_500)
    assert jwt.get_unverified_claims(minted.token)["jti"] == "resumed-token-id"


def test_only_a_given_issued_at_keeps_the_time_and_draws_a_new_jti(key):
    signer = TokenSigner(KeySet.load(pem(key)), ISSUER, 600, clock=lambda: 1_893_499_999.0)

    minted = [signer.mint("agent-starter-kit", issued_at=1_893_492_900) for _ in range(2)]

    assert [(m.issued_at, m.expires_at) for m in minted] == [(1_893_492_900, 1_893_493_500)] * 2
    assert minted[0].jti != minted[1].jti
    assert all(len(b64url_decode(m.jti)) == 16 for m in minted)


def test_kid_is_the_rfc7638_thumbprint_even_when_a_coordinate_has_leading_zero_bytes():
    # About one key in 128 has x < 2**248; its JWK x must still be 32 bytes long.
    key = ec.generate_private_key(ec.SECP256R1())
    while key.public_key().public_numbers().x >= 2**248:
        key = ec.generate_private_key(ec.SECP256R1())

    assert len(b64url_decode(public_jwk(key)["x"])) == 32
    assert public_jwk(key)["kid"] == rfc7638_thumbprint(key)
    assert TokenSigner(KeySet.load(pem(key)), ISSUER, TTL).kid == rfc7638_thumbprint(key)


def test_public_jwk_has_the_rfc7638_members_and_only_public_metadata(key):
    jwk = public_jwk(key)

    assert set(jwk) == {"crv", "kty", "x", "y", "kid", "alg", "use"}
    assert jwk["crv"] == "P-256" and jwk["kty"] == "EC"
    assert (jwk["kid"], jwk["alg"], jwk["use"]) == (rfc7638_thumbprint(key), "ES256", "sig")
    assert public_jwk(key.public_key()) == jwk


def test_tokens_are_signed_by_the_current_key_when_retired_keys_are_published(key):
    retired = ec.generate_private_key(ec.SECP256R1())
    keys = KeySet.load(pem(key), (public_jwk(retired),))

    token = TokenSigner(keys, ISSUER, TTL).mint("agent-starter-kit").token

    assert jwt.get_unverified_header(token)["kid"] == rfc7638_thumbprint(key)
    assert jwt.decode(token, public_pem(key), algorithms=["ES256"], audience=AUDIENCE)["sub"]
    with pytest.raises(JWTError):
        jwt.decode(token, public_pem(retired), algorithms=["ES256"], audience=AUDIENCE)


def test_traditional_sec1_ec_key_pem_is_accepted(key):
    signer = TokenSigner(KeySet.load(pem(key, serialization.PrivateFormat.TraditionalOpenSSL)), ISSUER, TTL)

    token = signer.mint("agent-starter-kit").token

    assert (
        jwt.decode(token, public_pem(key), algorithms=["ES256"], audience=AUDIENCE)["sub"]
        == "agent-starter-kit"
    )
    assert signer.kid == rfc7638_thumbprint(key)


def test_tokens_are_signed_by_the_key_that_was_checked_in_whatever_form_it_was_given(key):
    """The key set keeps the PKCS#8 form of the key it read, so jose, which reads the text again to
    sign, signs with that key and names it by its kid."""
    given = "\n " + pem(key, serialization.PrivateFormat.TraditionalOpenSSL).replace("\n", "\r\n") + " \n"
    signer = TokenSigner(KeySet.load(given), ISSUER, TTL)

    token = signer.mint("agent-starter-kit").token

    assert jwt.get_unverified_header(token)["kid"] == rfc7638_thumbprint(key)
    assert jwt.decode(token, public_pem(key), algorithms=["ES256"], audience=AUDIENCE)["sub"]


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(
            lambda key: public_pem(ec.generate_private_key(ec.SECP256R1())) + pem(key), id="public-first"
        ),
        pytest.param(
            lambda key: pem(key) + pem(ec.generate_private_key(ec.SECP256R1())), id="second-private"
        ),
    ],
)
def test_a_key_text_holding_another_key_is_not_configured_before_anything_is_signed(key, extra):
    """cryptography reads the private key past a public one where jose reads the public one and
    fails at every signature: such a text is refused, not signed with."""
    with pytest.raises(NotConfigured, match="STOREFRONT_SIGNING_KEY must be one PEM private key"):
        TokenSigner(KeySet.load(extra(key)), ISSUER, TTL)


def _bad_keys() -> list:
    return [
        pytest.param("", "is not set", id="missing"),
        pytest.param("not a pem at all", "not a readable PEM", id="garbage"),
        pytest.param(
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            "not a readable PEM",
            id="garbage-inside-pem",
        ),
        pytest.param(
            pem(ec.generate_private_key(ec.SECP256R1()))[:-40], "not a readable PEM", id="truncated"
        ),
        pytest.param(
            public_pem(ec.generate_private_key(ec.SECP256R1())), "not a readable PEM", id="public-key"
        ),
        pytest.param(
            pem(
                ec.generate_private_key(ec.SECP256R1()),
                encryption=serialization.BestAvailableEncryption(b"secret"),
            ),
            "not a readable PEM",
            id="encrypted",
        ),
        pytest.param(pem(rsa.generate_private_key(65537, 2048)), "EC P-256", id="rsa"),
        pytest.param(pem(ec.generate_private_key(ec.SECP384R1())), "EC P-256", id="p384"),
        pytest.param(pem(ec.generate_private_key(ec.SECP256K1())), "EC P-256", id="secp256k1"),
        pytest.param(pem(ed25519.Ed25519PrivateKey.generate()), "EC P-256", id="ed25519"),
    ]


@pytest.mark.parametrize(("private_key_pem", "detail"), _bad_keys())
def test_unusable_signing_key_is_not_configured_naming_the_setting(private_key_pem, detail):
    with pytest.raises(NotConfigured) as caught:
        TokenSigner(KeySet.load(private_key_pem), ISSUER, TTL)

    assert "STOREFRONT_SIGNING_KEY" in caught.value.message
    assert detail in caught.value.message
    assert caught.value.status == 503
    assert caught.value.code == "not_configured"
