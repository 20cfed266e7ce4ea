"""The example secrets however they were pasted, cased, wrapped or encoded are public, and a secret
pasted with invisible characters or stray quotes is refused: on Azure each counts as unset, on a
developer machine it is used and warned about. No problem ever shows the value."""

from __future__ import annotations

import base64
import codecs
import json
import secrets

import pytest

from shared.config.secret_forms import skeleton
from shared.config.secret_strength import PUBLISHED_SKELETONS, fingerprint, problem
from shared.config.settings import Settings
from shared.config.settings_reader import SettingsError
from tests.shared.config.test_secret_strength import EXAMPLE, ON_AZURE, strong_secrets

FIELDS = {"STOREFRONT_HASH_SECRET": "hash_secret", "BREVO_API_KEY": "brevo_api_key"}


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _fullwidth(value: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)


def _around(before: str, after: str):
    return lambda v: before + v + after


def _inside(char: str):
    return lambda v: v[:3] + char + v[3:]


DISGUISES = {
    # pasted
    "json-quotes": json.dumps,
    "json-line-with-its-comma": lambda v: json.dumps(v) + ",",
    "json-member-line": lambda v: f'"NAME": "{v}",',
    "env-line": lambda v: f"NAME={v}",
    **{
        label: _around(before, after)
        for label, before, after in [
            ("single-quotes", "'", "'"),
            ("backticks", "`", "`"),
            ("two-layers-of-quotes", "\"'", "'\""),
            ("leading-quote-only", '"', ""),
            ("curly-quotes", "\u201c", "\u201d"),
            ("single-curly-quotes", "\u2018", "\u2019"),
            ("guillemets", "\u00ab", "\u00bb"),
            ("fullwidth-quotes", "\uff02", "\uff02"),
            ("angle-brackets", "<", ">"),
            ("suffix-prod", "", "-prod"),
            ("suffix-1", "", "1"),
            ("prefix-xkeysib", "xkeysib-", ""),
        ]
    },
    # invisible characters
    "byte-order-mark": lambda v: "\ufeff" + v,
    "byte-order-marks-and-quotes": lambda v: "\ufeff" + json.dumps(v) + "\ufeff",
    "zero-width-space-after": lambda v: v + "\u200b",
    "zero-width-space-inside": _inside("\u200b"),
    "soft-hyphen-inside": _inside("\u00ad"),
    "word-joiner-inside": _inside("\u2060"),
    "word-joiner-and-soft-hyphen": lambda v: "\u2060\u00a0" + v + "\u00ad",
    "tag-character-inside": _inside("\U000e0041"),
    # other characters, case and width
    "fullwidth-nfkc": _fullwidth,
    "upper-case": str.upper,
    "title-case": str.title,
    "first-letter-upper": lambda v: v[0].upper() + v[1:],
    "twice": lambda v: v + v,
    "underscores": lambda v: v.replace("-", "_"),
    # encoded
    "base64": _b64,
    "base64url": lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
    "base64-of-a-line": lambda v: _b64(v + "\n"),
    "base64-of-utf16le": lambda v: _b64(v.encode("utf-16-le")),
    "base64-of-utf16-with-bom": lambda v: _b64(v.encode("utf-16")),
    "base64-of-utf16be": lambda v: _b64(v.encode("utf-16-be")),
    "base64-three-layers": lambda v: _b64(_b64(_b64(v))),
    "base64-of-quoted": lambda v: _b64(json.dumps(v)),
    "base64-of-hex": lambda v: _b64(v.encode().hex()),
    "base64-in-an-env-line": lambda v: "NAME=" + _b64(v),
    "hex": lambda v: v.encode().hex(),
    "upper-hex": lambda v: v.encode().hex().upper(),
    "0x-hex": lambda v: "0x" + v.encode().hex(),
    "colon-hex": lambda v: ":".join(f"{b:02x}" for b in v.encode()),
    "spaced-hex": lambda v: " ".join(f"{b:02X}" for b in v.encode()),
    "backslash-x-hex": lambda v: "".join(f"\\x{b:02x}" for b in v.encode()),
    "url-encoded": lambda v: "".join(f"%{b:02X}" for b in v.encode()),
    "base32": lambda v: base64.b32encode(v.encode()).decode(),
    "base32-unpadded-lower": lambda v: base64.b32encode(v.encode()).decode().rstrip("=").lower(),
    "rot13": lambda v: codecs.encode(v, "rot13"),
    "base64-of-rot13": lambda v: _b64(codecs.encode(v, "rot13")),
    "json-unicode-escapes": lambda v: "".join(f"\\u{ord(c):04x}" for c in v),
}


def _rows() -> list:
    return [
        pytest.param(name, disguise, id=f"{name}-{label}")
        for name in sorted(FIELDS)
        for label, disguise in DISGUISES.items()
    ]


@pytest.mark.parametrize(("name", "disguise"), _rows())
def test_the_example_value_in_any_disguise_is_public(name, disguise):
    value = disguise(EXAMPLE[name])

    found = problem(name, value)

    assert found == (
        f"{name} holds the public development value from local.settings.json.example, disguised (in "
        "another case, quoted, with characters around or inside it, or encoded)"
    )
    assert EXAMPLE[name] not in found and value not in found


@pytest.mark.parametrize(("name", "disguise"), _rows())
def test_on_azure_the_example_value_in_any_disguise_counts_as_unset(name, disguise):
    value = disguise(EXAMPLE[name])

    try:
        settings = Settings.from_env({**strong_secrets(), name: value, **ON_AZURE})
    except SettingsError as stopped:  # the Brevo key travels in a header: printable ASCII, no space
        assert name == "BREVO_API_KEY" and not (value.isascii() and value.isprintable() and " " not in value)
        assert str(stopped).startswith("BREVO_API_KEY must be printable ASCII")
        return
    assert settings.refused_secrets == (name,)
    assert settings.not_configured == (name,)
    assert getattr(settings, FIELDS[name]) == ""


@pytest.mark.parametrize("label", ["upper-case", "suffix-prod", "base64-of-utf16le", "rot13"])
def test_off_azure_the_disguised_example_is_used_with_a_warning(label):
    value = DISGUISES[label](EXAMPLE["STOREFRONT_HASH_SECRET"])

    settings = Settings.from_env({**strong_secrets(), "STOREFRONT_HASH_SECRET": value})

    assert [name for name, _ in settings.weak_secrets] == ["STOREFRONT_HASH_SECRET"]
    assert settings.refused_secrets == () and settings.hash_secret == value


# --- a strong secret pasted with what is not part of it -------------------------------------------

INVISIBLE = "holds an invisible character"
QUOTE = "is wrapped in quotes or holds a typographic or unmatched quote"
NFKC = "changes under Unicode normalisation (NFKC)"
PASTED = {
    "byte-order-mark": (lambda v: "\ufeff" + v, INVISIBLE),
    "zero-width-space-after": (lambda v: v + "\u200b", INVISIBLE),
    "zero-width-space-inside": (_inside("\u200b"), INVISIBLE),
    "soft-hyphen-inside": (_inside("\u00ad"), INVISIBLE),
    "word-joiner-inside": (_inside("\u2060"), INVISIBLE),
    "tag-character-inside": (_inside("\U000e0041"), INVISIBLE),
    "no-break-space-inside": (_inside("\u00a0"), INVISIBLE),
    "tab-inside": (_inside("\t"), INVISIBLE),
    "variation-selector-inside": (_inside("\ufe0f"), INVISIBLE),
    "json-quotes": (json.dumps, QUOTE),
    "json-line-with-its-comma": (lambda v: json.dumps(v) + ",", QUOTE),
    "leading-quote-only": (lambda v: '"' + v, QUOTE),
    "trailing-quote-only": (lambda v: v + "'", QUOTE),
    "one-quote-inside": (_inside('"'), QUOTE),
    "curly-quotes": (lambda v: f"\u201c{v}\u201d", QUOTE),
    "curly-quote-inside": (_inside("\u2019"), QUOTE),
    "guillemets": (lambda v: f"\u00ab{v}\u00bb", QUOTE),
    "low-quote": (lambda v: f"\u201e{v}\u201c", QUOTE),
    "ligature-nfkc": (lambda v: v + "\ufb01", NFKC),
}


@pytest.mark.parametrize(("wrap", "expected"), PASTED.values(), ids=list(PASTED))
def test_a_strong_secret_not_in_plain_form_is_refused_on_azure_and_used_unchanged_elsewhere(wrap, expected):
    """Never normalised: the value the store hashes with is the value that was checked."""
    value = wrap(secrets.token_hex(32))

    found = problem("STOREFRONT_HASH_SECRET", value)
    on_azure = Settings.from_env({**strong_secrets(), "STOREFRONT_HASH_SECRET": value, **ON_AZURE})
    elsewhere = Settings.from_env({**strong_secrets(), "STOREFRONT_HASH_SECRET": value})

    assert found is not None and found.startswith(f"STOREFRONT_HASH_SECRET {expected}")
    assert value not in found and value.strip("\"'\ufeff\u200b") not in found
    assert (on_azure.refused_secrets, on_azure.hash_secret) == (("STOREFRONT_HASH_SECRET",), "")
    assert elsewhere.hash_secret == value


@pytest.mark.parametrize(
    "value",
    [
        "correct horse battery staple " + secrets.token_hex(8),  # plain spaces inside
        secrets.token_hex(8) + '"' + secrets.token_hex(8) + '"' + secrets.token_hex(8),  # a pair
        secrets.token_urlsafe(32),
        "xkeysib-" + secrets.token_hex(32),
    ],
    ids=["passphrase", "paired-quotes-inside", "urlsafe", "brevo-form"],
)
def test_a_strong_secret_with_plain_punctuation_is_fit(value):
    assert problem("STOREFRONT_HASH_SECRET", value) is None


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_the_published_skeletons_are_the_example_files(name):
    reduced = skeleton(EXAMPLE[name])

    assert PUBLISHED_SKELETONS[name] == (len(reduced), frozenset({fingerprint(reduced)}))
