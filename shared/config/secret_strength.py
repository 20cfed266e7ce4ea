"""Which secret values the store will not run with on Azure: the development values published in
`local.settings.json.example` (anyone who read the repository knows them) and values too weak to
keep a secret. With a public hash secret anyone can reverse a receipt's `buyer.id` to the email;
with a public signing key anyone can forge receipts and mint download links.

The published values are known here by fingerprint only: the signing key by its RFC 7638
thumbprint (any encoding of the same key is caught), the others by SHA-256 of every text the value
stands for (`shared.config.secret_forms`: quoted, encoded). A value not in its normal form is
refused too, never normalised: what is hashed with is what was checked. Each problem is worded
to name the setting and never to show its value.
"""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.asymmetric import ec

from shared.config.errors import NotConfigured
from shared.config.keys import load_private_key, public_jwk
from shared.config.secret_forms import normal, stands_for

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
    if PUBLISHED_VALUES.get(name, frozenset()) & {fingerprint(text) for text in stands_for(value)}:
        disguised = "" if fingerprint(value) in PUBLISHED_VALUES[name] else ", quoted or encoded"
        return f"{name} is the public development value from {EXAMPLE_FILE}{disguised}"
    if normal(value) != value:
        return (
            f"{name} is wrapped in quotes or invisible characters (a byte-order mark, a zero-width space), "
            "or changes under Unicode normalisation (NFKC): set the value alone, as plain text"
        )
    if name == "STOREFRONT_HASH_SECRET":
        if len(value) < HASH_SECRET_MIN_CHARS:
            return f"{name} is shorter than {HASH_SECRET_MIN_CHARS} characters"
        if len(set(value)) < HASH_SECRET_MIN_DISTINCT:
            return f"{name} repeats too few characters to be random (fewer than {HASH_SECRET_MIN_DISTINCT})"
    if name == "BREVO_API_KEY" and len(value) < BREVO_KEY_MIN_CHARS:
        return f"{name} is shorter than {BREVO_KEY_MIN_CHARS} characters, too short to be a Brevo API key"
    return None


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
