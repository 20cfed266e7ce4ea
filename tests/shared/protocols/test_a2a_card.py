"""The agent card's signatures and caching (shared/protocols/a2a/card.py, card_signatures.py), in
process: the official `a2a-sdk` verifier accepts the card as its resolver parses it and refuses a
tampered one; a verifier of the served JSON does too; the ETag names the card and the key, never
the random signature bytes; Last-Modified is the card's date on record (Azurite), or absent."""

from __future__ import annotations

import base64
import copy
import json
import time
import uuid
from collections.abc import Callable
from email.utils import format_datetime, parsedate_to_datetime

import pytest
import rfc8785
from a2a.client.card_resolver import parse_agent_card
from a2a.utils._jcs import canonicalize  # the sdk's own RFC 8785, to hold rfc8785 to it
from a2a.utils.signing import (
    InvalidSignaturesError,
    NoSignatureError,
    _canonicalize_agent_card,
    create_signature_verifier,
)
from jose import jws
from jose.exceptions import JOSEError
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from devstack.services import dev_settings
from shared import runtime
from shared.config.keys import public_jwk
from shared.config.settings import Settings
from shared.protocols.a2a import card as cards
from shared.protocols.a2a import card_signatures
from shared.protocols.http import Answer, Request
from shared.seams.card_dates import TableCardDates
from shared.seams.storage import table_client
from tests.support import new_ec_key, private_pem

BASE = "https://store.example"
JWKS_URL = f"{BASE}/.well-known/jwks.json"
V03_ONLY = ("url", "preferredTransport", "protocolVersion")


def settings(**env: str) -> Settings:
    return Settings.from_env({**dev_settings(), "STOREFRONT_PUBLIC_BASE_URL": BASE, **env})


def serve(
    s: Settings,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    dates: TableCardDates | None = None,
) -> Answer:
    return cards.agent_card(Request(method, headers or {}, b""), s, runtime.keyset(s), dates)


def served(s: Settings) -> dict:
    return json.loads(serve(s).body)


def key_provider(jwks: dict) -> Callable[[str | None, str | None], PyJWK]:
    """The key a signature names, from the store's JWKS and only from it."""

    def provide(kid: str | None, jku: str | None) -> PyJWK:
        found = [key for key in jwks["keys"] if key["kid"] == kid]
        if jku != JWKS_URL or not found:
            raise PyJWKError(f"no key {kid!r} at {jku!r}")
        return PyJWK(found[0])

    return provide


def sdk_verify(document: dict, jwks: dict) -> None:
    """What an a2a-sdk 1.3 client does: parse the JSON as its resolver does, then verify."""
    verifier = create_signature_verifier(key_provider(jwks), ["ES256"])
    verifier(parse_agent_card(copy.deepcopy(document)))


def raw_verify(document: dict, jwks: dict) -> bool:
    """A verifier of the JSON as fetched: RFC 8785 of the card less `signatures`, any one signature."""
    payload = base64.urlsafe_b64encode(
        rfc8785.dumps({k: v for k, v in document.items() if k != "signatures"})
    )
    for signature in document.get("signatures", []):
        compact = f"{signature['protected']}.{payload.rstrip(b'=').decode()}.{signature['signature']}"
        kid = jws.get_unverified_header(compact).get("kid")
        for key in (k for k in jwks["keys"] if k["kid"] == kid):
            try:
                jws.verify(compact, key, algorithms=["ES256"])
                return True
            except JOSEError:
                continue
    return False


def protected(signature: dict) -> dict:
    return json.loads(base64.urlsafe_b64decode(signature["protected"] + "=="))


@pytest.fixture(scope="module")
def store() -> Settings:
    return settings()


@pytest.fixture(scope="module")
def jwks(store) -> dict:
    return runtime.keyset(store)().jwks()


# --- what is signed, and by what ------------------------------------------------------------------


def test_the_official_verifier_accepts_the_card_as_its_resolver_parses_it(store, jwks):
    document = served(store)

    sdk_verify(document, jwks)

    assert len(document["signatures"]) == 2


def test_the_1_0_signature_covers_exactly_what_the_sdk_canonicalises(store):
    document = served(store)
    rebuilt = _canonicalize_agent_card(parse_agent_card(copy.deepcopy(document))).encode()

    assert rebuilt == card_signatures.canonical(cards.card_v1(store))
    assert cards.card_v1(store) == {k: v for k, v in document.items() if k not in (*V03_ONLY, "signatures")}


def test_the_card_is_canonicalised_as_the_sdk_canonicalises_json(store):
    document = served(store)

    assert card_signatures.canonical(document) == canonicalize(
        {k: v for k, v in document.items() if k != "signatures"}
    ).encode("utf-8")


def test_every_signature_names_the_algorithm_the_key_and_where_it_is_published(store, jwks):
    headers = [protected(signature) for signature in served(store)["signatures"]]

    assert headers == [{"alg": "ES256", "kid": jwks["keys"][0]["kid"], "jku": JWKS_URL, "typ": "JOSE"}] * 2


def test_the_served_json_verifies_as_served_and_covers_the_0_3_fields(store, jwks):
    document = served(store)
    moved = {**document, "url": "https://attacker.example/api/a2a"}

    assert raw_verify(document, jwks)
    assert not raw_verify(moved, jwks)
    sdk_verify(moved, jwks)  # a 1.0 verifier never reads the 0.3 fields: its signature cannot cover them


def test_the_1_0_verifier_needs_the_1_0_signature(store, jwks):
    document = served(store)
    only_served_json = {**document, "signatures": document["signatures"][1:]}

    with pytest.raises(InvalidSignaturesError):
        sdk_verify(only_served_json, jwks)
    assert raw_verify(only_served_json, jwks)


def _skill_described_otherwise(card: dict) -> None:
    card["skills"][0]["description"] += " Also sends a second email."


def _interface_moved(card: dict) -> None:
    card["supportedInterfaces"][0]["url"] = "https://attacker.example/api/a2a"


def _kid_swapped(card: dict) -> None:
    other = public_jwk(new_ec_key())["kid"]
    for signature in card["signatures"]:
        header = json.dumps({**protected(signature), "kid": other}).encode()
        signature["protected"] = base64.urlsafe_b64encode(header).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "tamper", [_skill_described_otherwise, _interface_moved, _kid_swapped], ids=lambda f: f.__name__[1:]
)
def test_a_tampered_card_fails_both_verifiers(store, jwks, tamper):
    document = served(store)
    tamper(document)

    with pytest.raises(InvalidSignaturesError):
        sdk_verify(document, jwks)
    assert not raw_verify(document, jwks)


def test_a_card_without_signatures_fails_the_verifier(store, jwks):
    document = served(store)
    del document["signatures"]

    with pytest.raises(NoSignatureError):
        sdk_verify(document, jwks)


def test_a_card_signed_by_another_key_fails_against_the_stores_keys(store, jwks):
    impostor = settings(STOREFRONT_SIGNING_KEY=private_pem(new_ec_key()))

    with pytest.raises(InvalidSignaturesError):
        sdk_verify(served(impostor), jwks)


def test_without_a_signing_key_the_card_is_served_unsigned():
    unsigned = settings(STOREFRONT_SIGNING_KEY="")
    answer = serve(unsigned)

    assert answer.status == 200 and "signatures" not in json.loads(answer.body)
    assert json.loads(answer.body) == cards.card(unsigned)


# --- caching --------------------------------------------------------------------------------------


def test_the_etag_is_the_same_on_every_instance_though_the_signatures_differ(store):
    first = serve(store)
    card_signatures._signature.cache_clear()  # another instance signs the card anew
    second = serve(store)

    assert first.headers["ETag"] == second.headers["ETag"]
    assert json.loads(first.body)["signatures"] != json.loads(second.body)["signatures"]
    assert serve(store).body == second.body  # one instance answers the same bytes each time


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("form", ["{}", "W/{}", '"other", {}', "*"])
def test_a_conditional_request_naming_the_card_is_304_with_its_caching_headers(store, method, form):
    etag = serve(store).headers["ETag"]
    tag = etag.removeprefix("W/")

    answer = serve(store, {"if-none-match": form.format(tag)}, method)

    assert (answer.status, answer.body) == (304, b"")
    assert answer.headers == {"Cache-Control": "public, max-age=300", "ETag": etag}


def test_a_conditional_request_naming_another_tag_gets_the_card(store):
    answer = serve(store, {"if-none-match": '"other"'})

    assert answer.status == 200 and answer.headers["Cache-Control"] == "public, max-age=300"
    assert json.loads(answer.body)["signatures"]


def test_the_etag_changes_with_the_card_and_with_the_key(store):
    tags = {
        serve(s).headers["ETag"]
        for s in (
            store,
            settings(STOREFRONT_PUBLIC_BASE_URL="https://elsewhere.example"),
            settings(STOREFRONT_SIGNING_KEY=private_pem(new_ec_key())),
            settings(STOREFRONT_SIGNING_KEY=""),
        )
    }

    assert len(tags) == 4


def test_after_a_rotation_the_new_key_signs_and_a_card_cached_from_the_old_one_still_verifies(store):
    old = served(store)
    retired = json.dumps(runtime.keyset(store)().jwks())
    rotated = settings(
        STOREFRONT_SIGNING_KEY=private_pem(new_ec_key()), STOREFRONT_RETIRED_PUBLIC_KEYS=retired
    )
    keys = runtime.keyset(rotated)()
    new = served(rotated)

    assert {protected(signature)["kid"] for signature in new["signatures"]} == {keys.kid}
    assert serve(rotated).headers["ETag"] != serve(store).headers["ETag"]
    for document in (new, old):
        sdk_verify(document, keys.jwks())
        assert raw_verify(document, keys.jwks())


# --- Last-Modified --------------------------------------------------------------------------------


def card_dates(connection: str, timeout: float = 5) -> TableCardDates:
    return TableCardDates(table_client(connection, f"governance{uuid.uuid4().hex[:10]}", timeout), BASE)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_last_modified_is_when_the_card_became_current_and_a_date_no_earlier_is_304(store, azurite, method):
    dates = card_dates(azurite)
    before = int(time.time())
    first = serve(store, dates=dates)
    modified = first.headers["Last-Modified"]
    earlier = format_datetime(parsedate_to_datetime(modified).replace(year=2000), usegmt=True)

    same = serve(store, {"if-modified-since": modified}, method, dates)
    older = serve(store, {"if-modified-since": earlier}, method, dates)

    assert before <= parsedate_to_datetime(modified).timestamp() <= time.time()
    assert modified.endswith(" GMT") and first.status == 200
    assert (same.status, same.body, same.headers["Last-Modified"]) == (304, b"", modified)
    assert older.status == 200 and older.headers["Last-Modified"] == modified


def test_if_none_match_outranks_if_modified_since(store, azurite):
    dates = card_dates(azurite)
    modified = serve(store, dates=dates).headers["Last-Modified"]

    answer = serve(store, {"if-none-match": '"other"', "if-modified-since": modified}, dates=dates)

    assert answer.status == 200 and json.loads(answer.body)["signatures"]


@pytest.mark.parametrize("mode", ["cut", "stall"])
def test_storage_down_or_silent_serves_the_card_soon_without_last_modified(store, azurite, mode):
    with FaultProxy(endpoint_port(azurite, "Table")) as proxy:
        dates = card_dates(proxied(azurite, table=proxy), timeout=0.5)
        proxy.set(mode)
        started = time.monotonic()
        answer = serve(store, {"if-modified-since": "Fri, 01 Jan 2100 00:00:00 GMT"}, dates=dates)
        waited = time.monotonic() - started

    assert answer.status == 200 and json.loads(answer.body)["signatures"]
    assert "Last-Modified" not in answer.headers and answer.headers["ETag"]
    assert waited < 3, waited
