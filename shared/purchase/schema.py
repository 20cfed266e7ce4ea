"""The purchase's input: its JSON Schema (what agents see) and the validation that enforces it.

The schema is written for the strictest consumers, grammar-based local-model runtimes: root
`type: "object"`, `additionalProperties: false`, only anchored patterns, no `format`, `$ref` or
`$schema`. Validation is hand-written to match it field for field and to say exactly what is wrong.

A request's shape is refused with `InvalidRequest` (400), on the values as sent; a well-formed
value, with `Unprocessable` (422), a bundle_id outside the schema's enum (the catalog of the day)
included. docs/errors.md#the-rule states the rule.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from shared.config.errors import InvalidIdempotencyKey, InvalidRequest, Unprocessable
from shared.purchase.catalog import BUNDLES, DEFAULT_BUNDLE_ID, Bundle, find_bundle
from shared.purchase.domains import is_fake_a_label
from shared.purchase.names import hides_text, looks_like_a_link

KEY_PATTERN = "^[A-Za-z0-9._-]{8,128}$"
NAME_MAX = 100
EMAIL_MIN, EMAIL_MAX = 3, 254
_KEY_RE = re.compile(KEY_PATTERN)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# A top-level domain is letters, or an internationalised one in its ASCII form (xn--p1ai); never digits.
_TLD = r"(?:[A-Za-z]{2,63}|[Xx][Nn]--[A-Za-z0-9](?:[A-Za-z0-9-]{0,57}[A-Za-z0-9])?)"
_EMAIL_RE = re.compile(
    r"^(?P<local>[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"
    rf"@(?P<domain>{_LABEL}(?:\.{_LABEL})*\.{_TLD})$"
)
FAKE_A_LABEL_MESSAGE = (
    "email is not a valid address: a domain label that starts with 'xn--' must be the A-label of "
    "an internationalised name (IDNA 2008)"
)
NAME_HIDDEN_MESSAGE = (
    "name must not contain line breaks, control characters or invisible formatting characters "
    "(bidirectional overrides, zero-width characters)"
)
NAME_LINK_MESSAGE = (
    "name must be a person's name, not a link, a domain name or an email address: no '@', '://', "
    "'www.' or 'xn--', and no word joined to a top-level domain by a dot, a character that looks "
    "like one, brackets or the word 'dot'. Initials and titles are fine, capitalised and with a "
    "space after a title's dot: 'J.K. Rowling', 'Dr. Kim', 'John Smith, M.Sc.'"
)

INPUT_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "email": {
            "type": "string",
            "description": "Where to send the bundle's download link (the buyer's email address).",
            "minLength": EMAIL_MIN,
            "maxLength": EMAIL_MAX,
        },
        "name": {
            "type": "string",
            "description": (
                "The buyer's name, used in the email greeting. Optional. Any script, with spaces, "
                "apostrophes, hyphens, initials and titles such as 'J.K. Rowling' or 'Dr. Kim'; no "
                "links, domain names (also with look-alike dots or 'dot' for the dot), email "
                "addresses or line breaks."
            ),
            "maxLength": NAME_MAX,
        },
        "bundle_id": {
            "type": "string",
            "description": f"Which free bundle to send. Defaults to {DEFAULT_BUNDLE_ID}.",
            "enum": sorted(BUNDLES),
            "default": DEFAULT_BUNDLE_ID,
        },
        "idempotency_key": {
            "type": "string",
            "description": (
                "A unique key you choose for this purchase (8-128 of A-Z a-z 0-9 . _ -). Send the "
                "same key when you retry: the store then returns the original receipt instead of "
                "sending the bundle again. Recommended for every production agent."
            ),
            # The pattern bounds the length (8-128) on its own: outlines-core, which local runtimes
            # constrain generation with, drops a pattern that has minLength/maxLength beside it.
            "pattern": KEY_PATTERN,
        },
    },
    "required": ["email"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class PurchaseInput:
    email: str
    name: str
    bundle: Bundle


def read_idempotency_key(arguments: object, header_value: str | None) -> str | None:
    """The key from the arguments, else from the Idempotency-Key header; None when neither has one."""
    if isinstance(arguments, dict) and "idempotency_key" in arguments:
        key = arguments["idempotency_key"]
        source = "idempotency_key"
    elif header_value is not None:
        key = header_value.strip()
        source = "Idempotency-Key header"
    else:
        return None
    if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
        raise InvalidIdempotencyKey(
            f"{source} must be 8-128 characters of A-Z a-z 0-9 . _ - (pattern {KEY_PATTERN})"
        )
    return key


def canonical_request(arguments: object) -> str:
    """The request as the payload fingerprint sees it: arguments minus the key, the email
    normalised, defaults filled in, keys sorted. Equal purchases give equal text."""
    if not isinstance(arguments, dict):
        return json.dumps(arguments, sort_keys=True)
    canonical = {k: v for k, v in arguments.items() if k != "idempotency_key"}
    if isinstance(canonical.get("email"), str):
        canonical["email"] = normalise_email(canonical["email"])
    if isinstance(canonical.get("name"), str):
        canonical["name"] = canonical["name"].strip()
    canonical.setdefault("name", "")
    canonical.setdefault("bundle_id", DEFAULT_BUNDLE_ID)
    return json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def validate_arguments(arguments: object) -> PurchaseInput:
    """The purchase the arguments ask for. Every field's shape is checked before any value, so a
    request both malformed and refused is told what is malformed (400) first."""
    email, name, bundle_id = check_shape(arguments)
    return PurchaseInput(email=_address(email), name=_acceptable_name(name), bundle=_bundle(bundle_id))


def check_shape(arguments: object) -> tuple[str, str, str]:
    """The email, name and bundle_id of arguments whose shape the input schema accepts (but for
    bundle_id's enum), as sent; InvalidRequest naming what is wrong otherwise."""
    if not isinstance(arguments, dict):
        raise InvalidRequest("the purchase arguments must be a JSON object")
    unknown = sorted(set(arguments) - set(INPUT_SCHEMA["properties"]))
    if unknown:
        raise InvalidRequest(f"unknown field(s): {', '.join(unknown)[:200]}")
    email = arguments.get("email")
    if email is None:
        raise InvalidRequest("email is required")
    _string("email", email, EMAIL_MIN, EMAIL_MAX)
    name = arguments.get("name", "")
    _string("name", name, 0, NAME_MAX)
    bundle_id = arguments.get("bundle_id", DEFAULT_BUNDLE_ID)
    _string("bundle_id", bundle_id, 0, None)
    return email, name, bundle_id


def _string(field: str, value: object, shortest: int, longest: int | None) -> None:
    """A string field within its schema lengths, counted on the value as sent."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must be a string")
    if longest is not None and not shortest <= len(value) <= longest:
        bounds = f"{shortest}-{longest} characters" if shortest else f"at most {longest} characters"
        raise InvalidRequest(f"{field} must be {bounds}")


def lacks_only_email(arguments: object, header_key: str | None) -> bool:
    """True when the arguments would make a valid purchase but for the absent email: what a
    client that can ask its user is asked for instead of being refused."""
    if not isinstance(arguments, dict) or "email" in arguments:
        return False
    try:
        read_idempotency_key(arguments, header_key)
        _, name, bundle_id = check_shape({**arguments, "email": "a@example.org"})
        _acceptable_name(name)
        _bundle(bundle_id)
    except (InvalidRequest, Unprocessable):
        return False
    return True


def normalise_email(email: str) -> str:
    return email.strip().lower()


def _address(email: str) -> str:
    """The address, trimmed and lower-cased, if it is one: ASCII only (an internationalised domain
    in its A-labels), and every label with the `xn--` prefix an A-label IDNA 2008 accepts, so
    that no fake A-label (`xn--gmail-2ha.com`) is sent to or counted as another name."""
    if not email.isascii():  # before lower-casing, which maps the Kelvin sign (U+212A) to "k"
        raise Unprocessable("email is not a valid address", code="invalid_email")
    email = normalise_email(email)
    match = _EMAIL_RE.fullmatch(email)
    if not match or len(match["local"]) > 64:
        raise Unprocessable("email is not a valid address", code="invalid_email")
    if any(is_fake_a_label(label) for label in match["domain"].split(".")):
        raise Unprocessable(FAKE_A_LABEL_MESSAGE, code="invalid_email")
    return email


def _acceptable_name(name: str) -> str:
    name = name.strip()
    if hides_text(name):
        raise Unprocessable(NAME_HIDDEN_MESSAGE, code="invalid_name")
    if looks_like_a_link(name):
        raise Unprocessable(NAME_LINK_MESSAGE, code="invalid_name")
    return name


def _bundle(bundle_id: str) -> Bundle:
    bundle = find_bundle(bundle_id)
    if bundle is None:
        raise Unprocessable(
            f"unknown bundle_id; available: {', '.join(sorted(BUNDLES))}", code="unknown_bundle"
        )
    return bundle
