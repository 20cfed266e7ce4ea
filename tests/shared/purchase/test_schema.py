"""shared.purchase.schema: the idempotency key, the purchase arguments and the input schema agents see."""

from __future__ import annotations

import itertools
import json
import re

import jsonschema
import pytest

from shared.config.errors import InvalidIdempotencyKey, InvalidRequest, StorefrontError, Unprocessable
from shared.purchase.catalog import BUNDLES, DEFAULT_BUNDLE_ID
from shared.purchase.schema import (
    INPUT_SCHEMA,
    KEY_PATTERN,
    canonical_request,
    read_idempotency_key,
    validate_arguments,
)
from speclint.rules import input_schema as speclint
from tests.support import UNKNOWN_BUNDLE_ID


def test_input_schema_obeys_every_local_model_rule_and_is_closed():
    tool = {"name": "purchase_free_bundle", "inputSchema": INPUT_SCHEMA}

    assert speclint.check_local_models(tool, "purchase_free_bundle") == []
    assert speclint.check_bounds(tool, "purchase_free_bundle") == []


def test_input_schema_patterns_compile_and_match_the_validator_pattern():
    assert INPUT_SCHEMA["properties"]["idempotency_key"]["pattern"] == KEY_PATTERN
    re.compile(KEY_PATTERN)


def test_input_schema_requires_email_and_offers_exactly_the_catalog_bundles():
    properties = INPUT_SCHEMA["properties"]
    assert INPUT_SCHEMA["required"] == ["email"]
    assert set(properties) == {"email", "name", "bundle_id", "idempotency_key"}
    assert properties["bundle_id"]["enum"] == sorted(BUNDLES)
    assert properties["bundle_id"]["default"] == DEFAULT_BUNDLE_ID


# --- read_idempotency_key --------------------------------------------------------------------------


def test_key_from_the_arguments_wins_over_the_header():
    assert read_idempotency_key({"idempotency_key": "from-args-1"}, "from-header-1") == "from-args-1"


def test_invalid_key_in_the_arguments_is_refused_even_with_a_valid_header():
    with pytest.raises(InvalidIdempotencyKey):
        read_idempotency_key({"idempotency_key": "short"}, "valid-header-key")


def test_key_from_the_header_is_used_when_the_arguments_have_none():
    assert read_idempotency_key({"email": "a@example.org"}, "header-key-1") == "header-key-1"


def test_key_from_the_header_is_stripped_of_surrounding_whitespace():
    assert read_idempotency_key({}, "  header-key-1\t\n") == "header-key-1"


def test_header_key_is_used_when_the_arguments_are_not_an_object():
    assert read_idempotency_key(["idempotency_key"], "header-key-1") == "header-key-1"


@pytest.mark.parametrize("arguments", [{}, {"email": "a@example.org"}, None, [], "text"])
def test_no_key_anywhere_is_none(arguments):
    assert read_idempotency_key(arguments, None) is None


@pytest.mark.parametrize(
    "key",
    ["abcdefgh", "A" * 128, "Aa0._-Zz", "key-0123456789", "........", "________"],
    ids=["min-length", "max-length", "all-classes", "typical", "dots", "underscores"],
)
def test_well_formed_keys_are_accepted_from_either_source(key):
    assert read_idempotency_key({"idempotency_key": key}, None) == key
    assert read_idempotency_key({}, key) == key


INVALID_KEYS = [
    pytest.param("abcdefg", id="too-short"),
    pytest.param("A" * 129, id="too-long"),
    pytest.param("", id="empty"),
    pytest.param("abcdefgh\n", id="trailing-newline"),
    pytest.param("\nabcdefgh", id="leading-newline"),
    pytest.param(" abcdefgh", id="leading-space"),
    pytest.param("abcd efgh", id="inner-space"),
    pytest.param("abcdefgh/", id="slash"),
    pytest.param("abcdefgh+", id="plus"),
    pytest.param("abcdéfgh", id="non-ascii-letter"),
    pytest.param("abcdefg\u0661", id="non-ascii-digit"),
    pytest.param("abcdefg\x00", id="nul"),
    pytest.param(12345678, id="integer"),
    pytest.param(None, id="null"),
    pytest.param(True, id="boolean"),
    pytest.param(["abcdefgh"], id="array"),
    pytest.param({"k": "abcdefgh"}, id="object"),
]


@pytest.mark.parametrize("key", INVALID_KEYS)
def test_malformed_key_in_the_arguments_is_refused(key):
    with pytest.raises(InvalidIdempotencyKey) as caught:
        read_idempotency_key({"idempotency_key": key}, None)

    assert caught.value.code == "invalid_idempotency_key"
    assert caught.value.status == 400
    assert "idempotency_key" in caught.value.message


@pytest.mark.parametrize(
    "header",
    ["", "   ", "abcdefg", "A" * 129, "abcd efgh", "abcdefgh/", "abcdéfgh", "abc\ndefgh"],
    ids=["empty", "blank", "too-short", "too-long", "inner-space", "slash", "non-ascii", "inner-newline"],
)
def test_malformed_key_in_the_header_is_refused(header):
    with pytest.raises(InvalidIdempotencyKey) as caught:
        read_idempotency_key({}, header)

    assert "Idempotency-Key header" in caught.value.message


def test_invalid_idempotency_key_is_an_invalid_request():
    assert issubclass(InvalidIdempotencyKey, InvalidRequest)
    assert InvalidIdempotencyKey("x").status == 400


# --- validate_arguments ----------------------------------------------------------------------------


def test_valid_arguments_are_returned_with_the_bundle_object():
    purchase = validate_arguments({"email": "ada@example.org", "name": "Ada", "bundle_id": "mcp-field-guide"})

    assert purchase.email == "ada@example.org"
    assert purchase.name == "Ada"
    assert purchase.bundle is BUNDLES["mcp-field-guide"]


def test_email_is_normalised_to_stripped_lower_case():
    assert validate_arguments({"email": "  Ada.Lovelace@Example.ORG \n"}).email == "ada.lovelace@example.org"


def test_name_is_stripped():
    assert validate_arguments({"email": "a@example.org", "name": "  Ada  "}).name == "Ada"


def test_missing_bundle_id_means_the_default_bundle():
    purchase = validate_arguments({"email": "a@example.org"})

    assert purchase.bundle is BUNDLES[DEFAULT_BUNDLE_ID]
    assert purchase.name == ""


def test_idempotency_key_is_an_allowed_field():
    assert validate_arguments({"email": "a@example.org", "idempotency_key": "key-12345"}).email


@pytest.mark.parametrize(
    "email",
    [
        "a@b.co",
        "first.last@example.org",
        "x+tag@sub.example.co.uk",
        "o'neil@example.org",
        "a" * 64 + "@example.org",
        "a@" + "b" * 63 + ".com",
        "user@xn--bcher-kva.example",
        "user@xn--strae-oqa.de",
        "user@example.xn--p1ai",
        "user@r3--sn-abc.example.org",
        "a" * 64 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 61,
    ],
    ids=[
        "short",
        "dots",
        "plus-subdomains",
        "apostrophe",
        "local-64",
        "label-63",
        "punycode",
        "punycode-sharp-s",
        "punycode-tld",
        "hyphens-3-4-no-a-label",
        "len-254",
    ],
)
def test_valid_email_addresses_are_accepted(email):
    assert validate_arguments({"email": email}).email == email


ERRORS = [
    pytest.param(None, InvalidRequest, "invalid_request", id="arguments-null"),
    pytest.param([], InvalidRequest, "invalid_request", id="arguments-array"),
    pytest.param("a@example.org", InvalidRequest, "invalid_request", id="arguments-string"),
    pytest.param({}, InvalidRequest, "invalid_request", id="email-missing"),
    pytest.param({"email": None}, InvalidRequest, "invalid_request", id="email-null"),
    pytest.param({"email": 42}, InvalidRequest, "invalid_request", id="email-number"),
    pytest.param({"email": True}, InvalidRequest, "invalid_request", id="email-boolean"),
    pytest.param({"email": ["a@example.org"]}, InvalidRequest, "invalid_request", id="email-array"),
    pytest.param({"email": "a" * 243 + "@example.org"}, InvalidRequest, "invalid_request", id="email-255"),
    pytest.param(
        {"email": " a@example.org" + " " * 241}, InvalidRequest, "invalid_request", id="email-255-padded"
    ),
    pytest.param({"email": ""}, InvalidRequest, "invalid_request", id="email-empty"),
    pytest.param({"email": "a@"}, InvalidRequest, "invalid_request", id="email-2"),
    pytest.param({"email": "a@example.org", "coupon": "x"}, InvalidRequest, "invalid_request", id="unknown"),
    pytest.param({"email": "a@example.org", "name": 7}, InvalidRequest, "invalid_request", id="name-number"),
    pytest.param({"email": "a@example.org", "name": None}, InvalidRequest, "invalid_request", id="name-null"),
    pytest.param(
        {"email": "a@example.org", "name": "n" * 101}, InvalidRequest, "invalid_request", id="name-101"
    ),
    pytest.param(
        {"email": "a@example.org", "name": "n" * 100 + " "},
        InvalidRequest,
        "invalid_request",
        id="name-101-padded",
    ),
    pytest.param(
        {"email": "a@example.org", "bundle_id": 3}, InvalidRequest, "invalid_request", id="bundle-num"
    ),
    pytest.param(
        {"email": "a@example.org", "bundle_id": None}, InvalidRequest, "invalid_request", id="bundle-null"
    ),
    pytest.param({"email": "not-an-email"}, Unprocessable, "invalid_email", id="email-no-at"),
    pytest.param({"email": "a@b"}, Unprocessable, "invalid_email", id="email-3"),
    pytest.param({"email": "a@b"}, Unprocessable, "invalid_email", id="email-no-tld"),
    pytest.param({"email": "a@b.c"}, Unprocessable, "invalid_email", id="email-tld-1"),
    pytest.param({"email": "a@b.c0m"}, Unprocessable, "invalid_email", id="email-tld-digit"),
    pytest.param({"email": "a b@example.org"}, Unprocessable, "invalid_email", id="email-space"),
    # U+212A KELVIN SIGN lower-cases to an ASCII "k": refused as typed, never sent as kim@.
    pytest.param({"email": "\u212aim@example.org"}, Unprocessable, "invalid_email", id="email-kelvin-sign"),
    pytest.param({"email": "kim@exampl\u212a.org"}, Unprocessable, "invalid_email", id="email-kelvin-domain"),
    pytest.param({"email": "a@@example.org"}, Unprocessable, "invalid_email", id="email-double-at"),
    pytest.param({"email": ".a@example.org"}, Unprocessable, "invalid_email", id="email-leading-dot"),
    pytest.param({"email": "a..b@example.org"}, Unprocessable, "invalid_email", id="email-double-dot"),
    pytest.param({"email": "a@-example.org"}, Unprocessable, "invalid_email", id="email-label-hyphen"),
    pytest.param({"email": "a@example..org"}, Unprocessable, "invalid_email", id="email-empty-label"),
    pytest.param({"email": "a@" + "b" * 64 + ".com"}, Unprocessable, "invalid_email", id="email-label-64"),
    pytest.param({"email": "a" * 65 + "@example.org"}, Unprocessable, "invalid_email", id="email-local-65"),
    pytest.param({"email": "ü@example.org"}, Unprocessable, "invalid_email", id="email-non-ascii"),
    # ASCII only: an internationalised domain is sent in its A-labels.
    pytest.param({"email": "a@bücher.de"}, Unprocessable, "invalid_email", id="email-u-label"),
    # Labels with the A-label prefix that IDNA 2008 refuses: no such name can be registered, and a
    # reading by IDNA 2003 would take the first for gmail.com.
    pytest.param({"email": "a@xn--gmail-2ha.com"}, Unprocessable, "invalid_email", id="email-soft-hyphen"),
    pytest.param({"email": "a@xn--bcher-2pa.de"}, Unprocessable, "invalid_email", id="email-a-label-caps"),
    pytest.param({"email": "a@XN--BCHER-2PA.DE"}, Unprocessable, "invalid_email", id="email-a-label-caps-2"),
    pytest.param({"email": "a@xn--zz.de"}, Unprocessable, "invalid_email", id="email-a-label-invalid"),
    pytest.param({"email": "a@xn--a.de"}, Unprocessable, "invalid_email", id="email-a-label-control"),
    pytest.param({"email": "a@sub.xn--zz.example"}, Unprocessable, "invalid_email", id="email-inner-label"),
    pytest.param({"email": "a@example.xn--zz"}, Unprocessable, "invalid_email", id="email-tld-fake"),
    pytest.param({"email": "a@example.org\nb"}, Unprocessable, "invalid_email", id="email-inner-newline"),
    pytest.param({"email": "a@example.org", "name": "a\x00b"}, Unprocessable, "invalid_name", id="name-nul"),
    pytest.param(
        {"email": "a@example.org", "name": "a\nb"}, Unprocessable, "invalid_name", id="name-newline"
    ),
    pytest.param(
        {"email": "a@example.org", "name": "a\u202eb"}, Unprocessable, "invalid_name", id="name-bidi"
    ),
    pytest.param({"email": "a@example.org", "name": "a\x7fb"}, Unprocessable, "invalid_name", id="name-del"),
    pytest.param(
        {"email": "a@example.org", "bundle_id": UNKNOWN_BUNDLE_ID},
        Unprocessable,
        "unknown_bundle",
        id="bundle",
    ),
    pytest.param(
        {"email": "a@example.org", "bundle_id": "Agent-Starter-Kit"},
        Unprocessable,
        "unknown_bundle",
        id="bundle-case",
    ),
]


@pytest.mark.parametrize(("arguments", "error", "code"), ERRORS)
def test_invalid_arguments_raise_the_right_error_class_and_code(arguments, error, code):
    with pytest.raises(StorefrontError) as caught:
        validate_arguments(arguments)

    assert type(caught.value) is error
    assert caught.value.code == code
    assert caught.value.message


def test_error_classes_map_to_their_statuses():
    assert (InvalidRequest.status, Unprocessable.status) == (400, 422)


def test_unknown_fields_are_named_in_the_error():
    with pytest.raises(InvalidRequest, match="coupon, zzz"):
        validate_arguments({"email": "a@example.org", "zzz": 1, "coupon": 2})


def test_unknown_bundle_error_lists_the_available_bundles():
    with pytest.raises(Unprocessable) as caught:
        validate_arguments({"email": "a@example.org", "bundle_id": UNKNOWN_BUNDLE_ID})

    for bundle_id in BUNDLES:
        assert bundle_id in caught.value.message


def test_invalid_email_error_does_not_echo_the_address():
    with pytest.raises(Unprocessable) as caught:
        validate_arguments({"email": "secret person@example.org"})

    assert "secret" not in caught.value.message


def test_a_fake_a_label_is_refused_with_what_an_a_label_must_be():
    with pytest.raises(Unprocessable) as caught:
        validate_arguments({"email": "grace.hopper@xn--gmail-2ha.com"})

    assert caught.value.code == "invalid_email"
    assert "xn--" in caught.value.message and "IDNA 2008" in caught.value.message
    assert "grace" not in caught.value.message and "gmail" not in caught.value.message


@pytest.mark.parametrize(
    "arguments", [pytest.param(p.values[0], id=p.id) for p in ERRORS if p.values[1] is InvalidRequest]
)
def test_every_structural_refusal_is_also_rejected_by_the_input_schema(arguments):
    assert not jsonschema.Draft202012Validator(INPUT_SCHEMA).is_valid(arguments)


# The schema with bundle_id's enum left out: the catalog of the day, not the request's shape.
SHAPE_SCHEMA = {
    **INPUT_SCHEMA,
    "properties": {
        **INPUT_SCHEMA["properties"],
        "bundle_id": {k: v for k, v in INPUT_SCHEMA["properties"]["bundle_id"].items() if k != "enum"},
    },
}


@pytest.mark.parametrize(
    "arguments", [pytest.param(p.values[0], id=p.id) for p in ERRORS if p.values[1] is Unprocessable]
)
def test_every_value_refusal_has_the_shape_the_input_schema_asks_for(arguments):
    assert jsonschema.Draft202012Validator(SHAPE_SCHEMA).is_valid(arguments)


def _refusal(arguments: object) -> type[StorefrontError] | None:
    """The error class a purchase with these arguments is refused with, key included, or None."""
    try:
        read_idempotency_key(arguments, None)
        validate_arguments(arguments)
    except StorefrontError as exc:
        return type(exc)
    return None


CANDIDATES = {
    "email": [
        MISSING := object(),
        None,
        7,
        "",
        "a@",
        "a@b",
        "not-an-email",
        "Ada@Example.org",
        " ada@example.org ",
        "a" * 243 + "@example.org",
        "a" * 242 + "@example.org",
        "ada@example.org" + " " * 240,
    ],
    "name": [
        MISSING,
        None,
        0,
        "",
        "Ada",
        "  Ada  ",
        "n" * 100,
        "n" * 100 + " ",
        "n" * 101,
        "www.example.org",
        "a\x00b",
    ],
    "bundle_id": [MISSING, None, 3, "", UNKNOWN_BUNDLE_ID, DEFAULT_BUNDLE_ID, "Agent-Starter-Kit"],
    "idempotency_key": [MISSING, None, 5, "short", "key-12345678", "k" * 129],
    "coupon": [MISSING, "FREE"],
}


def test_400_is_exactly_what_the_schema_refuses_but_the_catalog_and_422_only_what_it_accepts():
    shape = jsonschema.Draft202012Validator(SHAPE_SCHEMA)
    wrong = []
    for values in itertools.product(*CANDIDATES.values()):
        arguments = {k: v for k, v in zip(CANDIDATES, values, strict=True) if v is not MISSING}
        refusal = _refusal(arguments)
        status = refusal.status if refusal else 200
        if shape.is_valid(arguments) != (status != 400) or status not in (200, 400, 422):
            wrong.append((arguments, status))

    assert wrong == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"email": "a@example.org"},
        {"email": "a@example.org", "name": "Ada Lovelace", "bundle_id": "mcp-field-guide"},
        {"email": "a@example.org", "name": "", "idempotency_key": "key-12345678"},
        {"email": "A@Example.org", "bundle_id": DEFAULT_BUNDLE_ID},
    ],
)
def test_arguments_valid_under_the_input_schema_are_accepted(arguments):
    jsonschema.Draft202012Validator(INPUT_SCHEMA).validate(arguments)

    assert validate_arguments(arguments).email == arguments["email"].lower()


# --- canonical_request (the payload fingerprint's input) -------------------------------------------

BASE = {"email": "ada@example.org", "name": "Ada", "bundle_id": "mcp-field-guide"}


@pytest.mark.parametrize(
    ("one", "other"),
    [
        pytest.param(
            {**BASE, "idempotency_key": "key-aaaaaaaa"}, {**BASE, "idempotency_key": "key-bbbbbbbb"}, id="key"
        ),
        pytest.param({**BASE, "idempotency_key": "key-aaaaaaaa"}, BASE, id="key-or-none"),
        pytest.param({**BASE, "email": "  Ada@Example.ORG \n"}, BASE, id="email-case-and-space"),
        pytest.param(
            {"email": "ada@example.org"},
            {"email": "ada@example.org", "bundle_id": DEFAULT_BUNDLE_ID},
            id="bundle",
        ),
        pytest.param({**BASE, "name": "  Ada\t"}, BASE, id="name-whitespace"),
        pytest.param({"email": "ada@example.org"}, {"email": "ada@example.org", "name": ""}, id="no-name"),
        pytest.param(
            {"email": "ada@example.org"}, {"email": "ada@example.org", "name": "   "}, id="blank-name"
        ),
        pytest.param(dict(reversed(list(BASE.items()))), BASE, id="field-order"),
    ],
)
def test_canonical_request_is_equal_for_the_same_purchase(one, other):
    assert canonical_request(one) == canonical_request(other)


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({**BASE, "email": "bob@example.org"}, id="email"),
        pytest.param({**BASE, "email": "ada@example.com"}, id="email-domain"),
        pytest.param({**BASE, "bundle_id": DEFAULT_BUNDLE_ID}, id="bundle"),
        pytest.param({**BASE, "name": "Bob"}, id="name"),
        pytest.param({**BASE, "name": "ada"}, id="name-case"),
        pytest.param({k: v for k, v in BASE.items() if k != "name"}, id="name-left-out"),
        pytest.param({**BASE, "extra": 1}, id="unknown-field"),
    ],
)
def test_canonical_request_differs_for_a_different_purchase(other):
    assert canonical_request(other) != canonical_request(BASE)


def test_canonical_request_is_compact_sorted_json_without_the_key():
    text = canonical_request({"name": " Zoë ", "idempotency_key": "key-12345678", "email": "Zoe@Example.org"})

    assert text == '{"bundle_id":"agent-starter-kit","email":"zoe@example.org","name":"Zoë"}'
    assert json.loads(text) == {"bundle_id": DEFAULT_BUNDLE_ID, "email": "zoe@example.org", "name": "Zoë"}


def test_canonical_request_does_not_change_the_arguments():
    arguments = {"email": " Ada@Example.org ", "idempotency_key": "key-12345678"}

    canonical_request(arguments)

    assert arguments == {"email": " Ada@Example.org ", "idempotency_key": "key-12345678"}


@pytest.mark.parametrize(
    "arguments", [None, [], "ada@example.org", 7], ids=["null", "list", "string", "number"]
)
def test_canonical_request_of_non_object_arguments_is_their_json(arguments):
    assert canonical_request(arguments) == json.dumps(arguments)
    assert canonical_request(arguments) != canonical_request({"email": "ada@example.org"})


# --- the name as agents see it (the rule itself: tests/shared/purchase/test_names.py) ---------------


def test_the_name_description_tells_agents_what_a_name_may_hold():
    description = INPUT_SCHEMA["properties"]["name"]["description"]

    assert "links" in description and "line breaks" in description


@pytest.mark.parametrize(
    "email",
    ["ivan@example.xn--p1ai", "a@xn--e1afmkfd.xn--p1ai", "a@example.XN--P1AI", "a@b.xn--80ao21a"],
    ids=["rf", "idn-domain-and-tld", "upper-case", "kz"],
)
def test_addresses_under_punycode_top_level_domains_are_accepted(email):
    assert validate_arguments({"email": email}).email == email.lower()


@pytest.mark.parametrize(
    "email",
    ["a@example.123", "a@example.xn--", "a@example.xn--p1ai-", "a@example.xn--p1_ai", "a@example.xn-p1ai"],
    ids=["numeric", "empty-punycode", "trailing-hyphen", "underscore", "single-hyphen"],
)
def test_numeric_or_malformed_top_level_domains_are_still_refused(email):
    with pytest.raises(Unprocessable) as caught:
        validate_arguments({"email": email})

    assert caught.value.code == "invalid_email"
