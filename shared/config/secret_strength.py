"""Which secret values the store will not run with on Azure: the development values published in
`local.settings.json.example` (anyone who read the repository knows them) however disguised, and
values too weak or too oddly pasted to keep a secret. With a public hash secret anyone can
reverse a receipt's `buyer.id` to the email; with a public signing key anyone can forge receipts.

The published values are known by fingerprint only: the signing key by its RFC 7638 thumbprint,
the others by SHA-256 of their `skeleton`, looked for in every reading of a value
(`shared.config.secret_forms`). A value is never normalised: what is hashed with is what was
checked. Each problem names the setting and never shows the value.
"""

from __future__ import annotations

import hashlib
import unicodedata

from cryptography.hazmat.primitives.asymmetric import ec

from shared.config.errors import NotConfigured
from shared.config.keys import load_private_key, public_jwk
from shared.config.secret_forms import invisible, readings, skeleton, stray_quote

HASH_SECRET_MIN_CHARS = 32
HASH_SECRET_MIN_DISTINCT = 8
BREVO_KEY_MIN_CHARS = 32
# A private number this close to 0 or to the group order was chosen by hand, not drawn at random.
_GUESSABLE_SCALAR = 2**128
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
EXAMPLE_FILE = "local.settings.json.example"
PUBLISHED_SIGNING_KEYS = frozenset({"oj-UjtSqNwGjx2O18HqK2KSwfERj1t2m-alcMV9HNE4"})
PUBLISHED_VALUES = {
    "STOREFRONT_HASH_SECRET": frozenset({"c3d9a02234b3befd3beea823fd346dced489a68d47763d7935603fe678ab5caa"}),
    "BREVO_API_KEY": frozenset({"2a82495eda11aeb725c2599405941dfcd4c7baa8d2139e46e7d7797139f2f456"}),
}
# The same values' skeletons: how many characters each has, and the SHA-256 of each.
PUBLISHED_SKELETONS = {
    "STOREFRONT_HASH_SECRET": (
        32,
        frozenset({"c754a52e776882a6b367146ff29b9f47e4de841335c37750b07996736c8364e3"}),
    ),
    "BREVO_API_KEY": (29, frozenset({"27d998ead382af293ffe5931b42b037693425bac991f0cd73c901ea0103647c2"})),
}


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def problem(name: str, value: str) -> str | None:
    """What makes `value` unfit to be the secret `name`, as a sentence naming the setting; None
    when it is fit, blank (a missing secret is reported as missing), or not a secret this module
    knows. A signing key that cannot be read at all is reported where keys are loaded."""
    if not value:
        return None
    if name == "STOREFRONT_SIGNING_KEY":
        return _signing_key_problem(value)
    if name in PUBLISHED_SKELETONS and _holds_published(name, value):
        if fingerprint(value) in PUBLISHED_VALUES[name]:
            return f"{name} is the public development value from {EXAMPLE_FILE}"
        return (
            f"{name} holds the public development value from {EXAMPLE_FILE}, disguised (in another "
            "case, quoted, with characters around or inside it, or encoded)"
        )
    if any(map(invisible, value)):
        return (
            f"{name} holds an invisible character (a byte-order mark, a zero-width space, a soft hyphen, "
            "a control character, a space other than a plain one): set the value alone, as plain text"
        )
    if stray_quote(value):
        return (
            f"{name} is wrapped in quotes or holds a typographic or unmatched quote: set the value alone, "
            "as plain text"
        )
    if unicodedata.normalize("NFKC", value) != value:
        return f"{name} changes under Unicode normalisation (NFKC): set the value as plain text"
    if name == "STOREFRONT_HASH_SECRET":
        if len(value) < HASH_SECRET_MIN_CHARS:
            return f"{name} is shorter than {HASH_SECRET_MIN_CHARS} characters"
        if len(set(value)) < HASH_SECRET_MIN_DISTINCT:
            return f"{name} repeats too few characters to be random (fewer than {HASH_SECRET_MIN_DISTINCT})"
    if name == "BREVO_API_KEY" and len(value) < BREVO_KEY_MIN_CHARS:
        return f"{name} is shorter than {BREVO_KEY_MIN_CHARS} characters, too short to be a Brevo API key"
    return None


def _holds_published(name: str, value: str) -> bool:
    """Whether the skeleton of `value`, or of anything it decodes to, holds a published value's."""
    length, fingerprints = PUBLISHED_SKELETONS[name]
    for text in readings(value):
        reduced = skeleton(text)
        for start in range(len(reduced) - length + 1):
            if fingerprint(reduced[start : start + length]) in fingerprints:
                return True
    return False


def _signing_key_problem(pem: str) -> str | None:
    try:
        key = load_private_key(pem)
    except NotConfigured:
        return None
    name = "STOREFRONT_SIGNING_KEY"
    if public_jwk(key)["kid"] in PUBLISHED_SIGNING_KEYS:
        return f"{name} is the public development key from {EXAMPLE_FILE}"
    if _guessable(key):
        return f"{name} was not generated at random: its private number is small enough to guess"
    return None


def _guessable(key: ec.EllipticCurvePrivateKey) -> bool:
    scalar = key.private_numbers().private_value
    return min(scalar, _P256_ORDER - scalar) < _GUESSABLE_SCALAR
