"""shared.protocols.downloads on Azurite: a genuine download token redeems to exactly the bundle's file; every
other token (expired, altered, forged with `alg: none` or HS256 key confusion, signed by a key the
store does not publish, for another audience, issuer or bundle, or not a token at all) is refused
with 401 or 403 before a byte of any file is read."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import time
import uuid

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jose import jwt

from devstack.run import DEV_ACCOUNT_KEY
from devstack.seed_bundles import sample_bundle, seed
from shared.config.errors import BundleUnavailable, Forbidden, InvalidToken, NotConfigured
from shared.config.keys import KeySet, public_jwk, thumbprint
from shared.protocols.downloads import MAX_TOKEN_LENGTH, Downloads
from shared.purchase.catalog import BUNDLES, find_bundle
from shared.purchase.tokens import AUDIENCE, TokenSigner
from shared.seams.bundle_files import BlobBundleFiles
from shared.seams.storage import container_client
from tests.support import UNKNOWN_BUNDLE_ID, off_curve, public_pem
from tests.support import new_ec_key as new_key
from tests.support import private_pem as pem

ISSUER = "https://store.example.net"
BUNDLE = "agent-starter-kit"
DEAD_BLOBS = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={DEV_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(value: object) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def claims(**changes) -> dict:
    now = int(time.time())
    base = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": BUNDLE,
        "jti": uuid.uuid4().hex,
        "iat": now,
        "exp": now + 600,
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not ...}


def es256(private_pem: str, payload: dict, **headers) -> str:
    return jwt.encode(payload, private_pem, algorithm="ES256", headers=headers)


def hs256(secret: bytes, header: dict, payload: dict) -> str:
    signing_input = f"{b64url_json(header)}.{b64url_json(payload)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def current() -> ec.EllipticCurvePrivateKey:
    return new_key()


@pytest.fixture(scope="module")
def retired() -> ec.EllipticCurvePrivateKey:
    return new_key()


@pytest.fixture(scope="module")
def keys(current, retired) -> KeySet:
    return KeySet.load(pem(current), (public_jwk(retired),))


@pytest.fixture(scope="module")
def bundles_container(azurite) -> str:
    name = "bundles" + uuid.uuid4().hex[:16]
    seed(azurite, name)
    yield name
    with contextlib.suppress(ResourceNotFoundError):
        container_client(azurite, name, 5).delete_container()


class SpyContainer:
    """The bundles container, recording every blob read."""

    def __init__(self, inner):
        self.inner = inner
        self.reads: list[str] = []

    def download_blob(self, name, *args, **kwargs):
        self.reads.append(name)
        return self.inner.download_blob(name, *args, **kwargs)


@pytest.fixture
def container(azurite, bundles_container) -> SpyContainer:
    return SpyContainer(container_client(azurite, bundles_container, 5))


@pytest.fixture
def downloads(keys, container) -> Downloads:
    return Downloads(lambda: keys, BlobBundleFiles(container), ISSUER)


@pytest.fixture
def signer(keys) -> TokenSigner:
    return TokenSigner(keys, ISSUER, 3600)


@pytest.fixture
def good_token(signer) -> str:
    return signer.mint(BUNDLE).token


def refused(downloads: Downloads, container: SpyContainer, token: str) -> Exception:
    """Redeem `token`, expecting a refusal (401 or 403) and no file read."""
    with pytest.raises((InvalidToken, Forbidden)) as caught:
        downloads.redeem(token)
    assert container.reads == []
    assert caught.value.status in (401, 403)
    return caught.value


# --- genuine tokens --------------------------------------------------------------------------------


@pytest.mark.parametrize("bundle_id", sorted(BUNDLES))
def test_a_genuine_token_redeems_to_exactly_the_seeded_bundle(downloads, container, signer, bundle_id):
    found = downloads.redeem(signer.mint(bundle_id).token)

    assert found.body == sample_bundle(find_bundle(bundle_id))
    assert found.bundle == find_bundle(bundle_id)
    assert found.filename == f"{bundle_id}.zip"
    assert found.content_type == "application/zip"
    assert container.reads == [f"{bundle_id}.zip"]


def test_check_names_the_bundle_without_reading_the_file(downloads, container, good_token):
    assert downloads.check(good_token) == find_bundle(BUNDLE)
    assert container.reads == []


def test_a_token_signed_by_a_retired_key_still_redeems(downloads, retired):
    old = TokenSigner(KeySet.load(pem(retired)), ISSUER, 3600).mint(BUNDLE).token

    assert downloads.redeem(old).body == sample_bundle(find_bundle(BUNDLE))


def test_a_token_stops_redeeming_once_its_key_is_no_longer_published(container, retired):
    old = TokenSigner(KeySet.load(pem(retired)), ISSUER, 3600).mint(BUNDLE).token
    without_retired = KeySet.load(pem(new_key()))

    error = refused(Downloads(lambda: without_retired, BlobBundleFiles(container), ISSUER), container, old)

    assert isinstance(error, InvalidToken)


def test_a_published_key_off_the_curve_refuses_its_tokens_and_never_fails(container, current, retired):
    """The settings refuse such a key at start-up; however a key set came to hold one, a token
    naming it is a 401, never a crypto library's exception."""
    broken = KeySet.load(pem(current), (off_curve(public_jwk(retired)),))
    old = TokenSigner(KeySet.load(pem(retired)), ISSUER, 3600).mint(BUNDLE).token

    error = refused(Downloads(lambda: broken, BlobBundleFiles(container), ISSUER), container, old)

    assert isinstance(error, InvalidToken)


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda jwk: {**jwk, "x": 12345}, id="number-coordinate"),
        pytest.param(lambda jwk: {**jwk, "y": jwk["y"][:-2]}, id="short-coordinate"),
        pytest.param(lambda jwk: {**jwk, "crv": "P-384"}, id="p384-curve"),
        pytest.param(lambda jwk: {**jwk, "kty": "oct"}, id="oct-type"),
    ],
)
def test_a_token_naming_a_published_key_no_library_can_use_is_a_401(container, current, retired, broken):
    """However a key set came to publish such a key, the token that names it is refused, never a
    500 from the library's exception."""
    published = broken(public_jwk(retired))
    hostile = KeySet.load(pem(current), (published,))
    token = es256(pem(retired), claims(), kid=thumbprint(published))
    assert hostile.public_key(thumbprint(published)) is not None

    error = refused(Downloads(lambda: hostile, BlobBundleFiles(container), ISSUER), container, token)

    assert isinstance(error, InvalidToken)


def test_a_token_can_be_redeemed_more_than_once(downloads, good_token):
    assert downloads.redeem(good_token).body == downloads.redeem(good_token).body


def test_a_token_within_the_clock_skew_leeway_still_redeems(downloads, keys):
    token = TokenSigner(keys, ISSUER, 60, clock=lambda: time.time() - 75).mint(BUNDLE).token

    assert downloads.redeem(token).body == sample_bundle(find_bundle(BUNDLE))


# --- refused: not valid (401) ----------------------------------------------------------------------


def test_an_expired_token_is_refused(downloads, container, keys):
    token = TokenSigner(keys, ISSUER, 60, clock=lambda: time.time() - 3600).mint(BUNDLE).token

    error = refused(downloads, container, token)

    assert isinstance(error, InvalidToken)
    assert "expired" in error.message


def test_a_token_is_expired_by_the_downloads_clock(keys, container, good_token):
    later = Downloads(lambda: keys, BlobBundleFiles(container), ISSUER, clock=lambda: time.time() + 2 * 3600)

    error = refused(later, container, good_token)

    assert isinstance(error, InvalidToken)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"sub": "mcp-field-guide"}, id="other-bundle"),
        pytest.param({"exp": 4_102_444_800}, id="later-expiry"),
        pytest.param({"aud": "storefront-admin"}, id="other-audience"),
        pytest.param({"jti": "chosen"}, id="other-jti"),
    ],
)
def test_a_token_with_a_changed_claim_is_refused(downloads, container, good_token, change):
    header, payload, signature = good_token.split(".")
    altered = {**json.loads(b64url_decode(payload)), **change}

    error = refused(downloads, container, f"{header}.{b64url_json(altered)}.{signature}")

    assert isinstance(error, InvalidToken)


def test_a_token_with_a_changed_header_is_refused(downloads, container, good_token):
    header, payload, signature = good_token.split(".")
    altered = {**json.loads(b64url_decode(header)), "typ": "at+jwt"}

    assert isinstance(
        refused(downloads, container, f"{b64url_json(altered)}.{payload}.{signature}"), InvalidToken
    )


@pytest.mark.parametrize("position", [0, 10, 42, 85])
def test_a_token_with_a_changed_signature_is_refused(downloads, container, good_token, position):
    header, payload, signature = good_token.split(".")
    raw = bytearray(b64url_decode(signature))
    raw[min(position, len(raw) - 1)] ^= 0x01

    error = refused(downloads, container, f"{header}.{payload}.{b64url(bytes(raw))}")

    assert isinstance(error, InvalidToken)


def test_a_token_with_the_signature_of_another_token_is_refused(downloads, container, signer):
    first, second = signer.mint(BUNDLE).token, signer.mint("mcp-field-guide").token

    spliced = ".".join(second.split(".")[:2] + first.split(".")[2:])

    assert isinstance(refused(downloads, container, spliced), InvalidToken)


@pytest.mark.parametrize(
    "header",
    [
        pytest.param({"alg": "none", "typ": "JWT"}, id="none"),
        pytest.param({"alg": "None", "typ": "JWT"}, id="None"),
        pytest.param({"alg": "NONE"}, id="NONE"),
        pytest.param({"typ": "JWT"}, id="no-alg"),
    ],
)
@pytest.mark.parametrize("signature", ["", "c2ln"], ids=["empty-signature", "junk-signature"])
def test_an_unsigned_alg_none_token_is_refused(downloads, container, keys, header, signature):
    token = f"{b64url_json({**header, 'kid': keys.kid})}.{b64url_json(claims())}.{signature}"

    assert isinstance(refused(downloads, container, token), InvalidToken)


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param(lambda key: public_pem(key).encode(), id="public-pem"),
        pytest.param(lambda key: public_pem(key).strip().encode(), id="public-pem-stripped"),
        pytest.param(
            lambda key: key.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            id="public-der",
        ),
        pytest.param(lambda key: json.dumps(public_jwk(key)).encode(), id="public-jwk-json"),
    ],
)
@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512"])
def test_an_hmac_token_keyed_with_the_public_key_is_refused(downloads, container, current, keys, secret, alg):
    # The classic key-confusion attack: the verifier's public key used as an HMAC secret.
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    header = {"alg": alg, "typ": "JWT", "kid": keys.kid}
    signing_input = f"{b64url_json(header)}.{b64url_json(claims())}"
    token = f"{signing_input}.{b64url(hmac.new(secret(current), signing_input.encode(), digest).digest())}"

    assert isinstance(refused(downloads, container, token), InvalidToken)


def test_an_hs256_token_built_with_jose_from_the_public_pem_is_refused(downloads, container, current, keys):
    # python-jose will not take a PEM as an HMAC secret, but will take the same bytes as an "oct" key.
    secret = public_pem(current).encode()
    token = jwt.encode(
        claims(), {"kty": "oct", "k": b64url(secret)}, algorithm="HS256", headers={"kid": keys.kid}
    )
    signing_input, _, signature = token.rpartition(".")
    assert hmac.compare_digest(
        b64url_decode(signature), hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    )

    assert isinstance(refused(downloads, container, token), InvalidToken)


def test_an_hmac_signature_under_an_es256_header_is_refused(downloads, container, current, keys):
    token = hs256(public_pem(current).encode(), {"alg": "ES256", "kid": keys.kid}, claims())

    assert isinstance(refused(downloads, container, token), InvalidToken)


def test_a_token_signed_by_an_unpublished_key_is_refused(downloads, container):
    stranger = TokenSigner(KeySet.load(pem(new_key())), ISSUER, 3600).mint(BUNDLE).token

    error = refused(downloads, container, stranger)

    assert isinstance(error, InvalidToken)
    assert "not signed by a key this store publishes" in error.message


def test_a_token_signed_by_another_key_under_the_stores_kid_is_refused(downloads, container, keys):
    forged = es256(pem(new_key()), claims(), kid=keys.kid)

    assert isinstance(refused(downloads, container, forged), InvalidToken)


def test_a_token_carrying_its_own_verification_key_in_the_header_is_refused(downloads, container, keys):
    attacker = new_key()
    for kid in (keys.kid, public_jwk(attacker)["kid"]):
        forged = es256(
            pem(attacker), claims(), kid=kid, jwk=public_jwk(attacker), jku="https://evil.example/jwks"
        )

        assert isinstance(refused(downloads, container, forged), InvalidToken)


@pytest.mark.parametrize(
    "kid",
    [pytest.param("unknown", id="unknown"), pytest.param("", id="empty"), pytest.param(..., id="missing")],
)
def test_a_token_with_an_unknown_or_missing_kid_is_refused(downloads, container, current, kid):
    headers = {} if kid is ... else {"kid": kid}

    error = refused(downloads, container, es256(pem(current), claims(), **headers))

    assert isinstance(error, InvalidToken)


def test_a_token_naming_the_retired_kid_but_signed_by_the_current_key_is_refused(
    downloads, container, current, retired
):
    token = es256(pem(current), claims(), kid=public_jwk(retired)["kid"])

    assert isinstance(refused(downloads, container, token), InvalidToken)


@pytest.mark.parametrize("missing", ["exp", "sub", "aud"])
def test_a_genuine_signature_over_claims_missing_a_required_one_is_refused(
    downloads, container, current, keys, missing
):
    token = es256(pem(current), claims(**{missing: ...}), kid=keys.kid)

    refused(downloads, container, token)


# --- refused: genuine but not for this (403) -------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"aud": "storefront-admin"}, id="other-audience"),
        pytest.param({"aud": ["storefront-admin", "other"]}, id="other-audiences"),
        pytest.param({"iss": "https://evil.example"}, id="other-issuer"),
        pytest.param({"iss": ISSUER + "/"}, id="issuer-with-slash"),
        pytest.param({"iss": ...}, id="no-issuer"),
    ],
)
def test_a_genuine_token_for_another_audience_or_issuer_is_forbidden(
    downloads, container, current, keys, change
):
    token = es256(pem(current), claims(**change), kid=keys.kid)

    error = refused(downloads, container, token)

    assert isinstance(error, Forbidden)
    assert error.status == 403


def test_a_token_minted_by_another_store_with_the_same_key_is_forbidden(downloads, container, keys):
    other_store = TokenSigner(keys, "https://other-store.example.net", 3600).mint(BUNDLE).token

    assert isinstance(refused(downloads, container, other_store), Forbidden)


@pytest.mark.parametrize(
    "sub", [UNKNOWN_BUNDLE_ID, "../agent-starter-kit", "agent-starter-kit.zip", "AGENT-STARTER-KIT"]
)
def test_a_genuine_token_for_a_bundle_the_store_does_not_offer_is_forbidden(
    downloads, container, signer, sub
):
    error = refused(downloads, container, signer.mint(sub).token)

    assert isinstance(error, Forbidden)
    assert error.status == 403


# --- refused: not a token at all -------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        "",
        " ",
        "a",
        "not-a-token",
        "a.b.c",
        "..",
        "...",
        "%%%.%%%.%%%",
        "eyJ.eyJ.sig",
        "e30.e30.",
        "bnVsbA.bnVsbA.",
        "W10.e30.c2ln",
        "\x00.\x00.\x00",
        "ey\u00e9.ey.sig",
        "eyJhbGciOiJFUzI1NiJ9.%%%.c2ln",
        "null",
        "../../secrets",
    ],
)
def test_a_garbage_string_is_refused_as_an_invalid_token(downloads, container, token):
    assert isinstance(refused(downloads, container, token), InvalidToken)


@pytest.mark.parametrize(
    "token",
    [
        "\udcff.e30.c2ln",  # a lone surrogate: no UTF-8 encoder takes it
        "e30.e30.c2ln\n",
        " e30.e30.c2ln",
        "e30.e30.c2l=",
        "\uff45yJ.e30.c2ln",  # FULLWIDTH LATIN SMALL LETTER E
        "e30.e30.c2ln\x00",
        "e30.e30+.c2ln",
    ],
    ids=["surrogate", "newline", "space", "padding", "fullwidth", "nul", "plus"],
)
def test_a_token_of_characters_no_compact_jws_holds_is_malformed_not_a_crash(downloads, container, token):
    error = refused(downloads, container, token)

    assert str(error) == "the download link is malformed"


def test_an_overlong_token_is_refused_even_when_genuine(downloads, container, current, keys):
    token = es256(pem(current), claims(padding="x" * MAX_TOKEN_LENGTH), kid=keys.kid)
    assert len(token) > MAX_TOKEN_LENGTH

    error = refused(downloads, container, token)

    assert isinstance(error, InvalidToken)


def test_a_megabyte_of_dots_and_letters_is_refused_by_its_shape_before_any_parsing(downloads, container):
    error = refused(downloads, container, ("a" * 1024 + ".") * 1024)

    assert str(error) == "the download link is malformed"


def test_a_header_nested_past_the_parsers_stack_is_malformed_not_a_crash(downloads, container):
    token = f"{b64url(b'[' * 2500)}.{b64url_json(claims())}.c2ln"  # 2,500 arrays deep, in 3.5 kB
    assert len(token) <= MAX_TOKEN_LENGTH

    error = refused(downloads, container, token)

    assert str(error) == "the download link is malformed"


def test_the_route_answers_a_nested_header_with_401(host):
    token = f"{b64url(b'[' * 2500)}.{b64url_json(claims())}.c2ln"

    answer = requests.get(f"{host.url}/api/download/{token}", timeout=10)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_token"


@pytest.mark.parametrize(
    "reshape",
    [
        pytest.param(lambda t: ".".join(t.split(".")[:2]), id="header-payload"),
        pytest.param(lambda t: ".".join(t.split(".")[1:]), id="payload-signature"),
        pytest.param(lambda t: t + ".c2ln", id="four-segments"),
        pytest.param(lambda t: t + ".", id="trailing-dot"),
        pytest.param(lambda t: "." + t, id="leading-dot"),
        pytest.param(lambda t: t.replace(".", "..", 1), id="empty-segment"),
        pytest.param(lambda t: t + "." + t, id="two-tokens"),
    ],
)
def test_a_genuine_token_with_two_or_four_segments_is_refused(downloads, container, good_token, reshape):
    assert isinstance(refused(downloads, container, reshape(good_token)), InvalidToken)


# --- the file is missing ---------------------------------------------------------------------------


def test_a_genuine_token_for_a_bundle_whose_file_is_missing_is_bundle_unavailable(azurite, keys, signer):
    name = "bundles" + uuid.uuid4().hex[:16]
    seed(azurite, name)
    client = container_client(azurite, name, 5)
    client.delete_blob("mcp-field-guide.zip")
    downloads = Downloads(lambda: keys, BlobBundleFiles(client), ISSUER)

    with pytest.raises(BundleUnavailable) as caught:
        downloads.redeem(signer.mint("mcp-field-guide").token)

    assert caught.value.status == 503
    assert caught.value.code == "bundle_unavailable"
    assert "MCP Field Guide" in caught.value.message
    assert downloads.redeem(signer.mint(BUNDLE).token).body == sample_bundle(find_bundle(BUNDLE))
    client.delete_container()


def test_a_bundles_container_that_does_not_exist_is_bundle_unavailable(azurite, keys, good_token):
    missing = container_client(azurite, "bundles" + uuid.uuid4().hex[:16], 5)

    with pytest.raises(BundleUnavailable):
        Downloads(lambda: keys, BlobBundleFiles(missing), ISSUER).redeem(good_token)


def test_unreachable_bundle_storage_is_bundle_unavailable(keys, good_token):
    dead = container_client(DEAD_BLOBS, "bundles", 1)

    with pytest.raises(BundleUnavailable) as caught:
        Downloads(lambda: keys, BlobBundleFiles(dead), ISSUER).redeem(good_token)

    assert caught.value.status == 503


def test_a_refused_token_is_refused_even_when_storage_is_down(keys, current):
    # Tokens are checked before storage is touched, so an outage cannot turn a 401 into a 503.
    dead = container_client(DEAD_BLOBS, "bundles", 1)

    with pytest.raises(InvalidToken):
        Downloads(lambda: keys, BlobBundleFiles(dead), ISSUER).redeem(
            es256(pem(new_key()), claims(), kid=keys.kid)
        )


def test_without_a_signing_key_no_token_redeems(container, good_token):
    def unconfigured() -> KeySet:
        raise NotConfigured("STOREFRONT_SIGNING_KEY is not set")

    with pytest.raises(NotConfigured):
        Downloads(unconfigured, BlobBundleFiles(container), ISSUER).redeem(good_token)
    assert container.reads == []
