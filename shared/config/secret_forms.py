"""The texts a secret value may stand for, so that a published value is known however it was
pasted: wrapped in quotes (" ' `) or in invisible characters at its ends (a byte-order mark, a
zero-width space), in another Unicode form of the same text (NFKC), or encoded as base64, hex or
URL-encoding. `shared.config.secret_strength` refuses a value that is not already `normal`, so
the value the store hashes with is always the value it checked.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import unicodedata
from urllib.parse import unquote_to_bytes

QUOTES = ('"', "'", "`")
# Invisible characters outside the categories below (Unicode's default-ignorable code points).
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
_INVISIBLE_CATEGORIES = ("Cc", "Cf", "Zs", "Zl", "Zp")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{4,}={0,2}")
_HEX = re.compile(r"(?:[0-9A-Fa-f]{2}){2,}")
# The most decoding a value gets: the value itself, then two layers of encoding, up to this size.
_LAYERS = 3
_LONGEST = 4096


def _invisible(char: str) -> bool:
    return unicodedata.category(char) in _INVISIBLE_CATEGORIES or bool(_IGNORABLE.match(char))


def unwrapped(value: str) -> str:
    """`value` without the layers a paste adds around it: invisible characters at either end and
    any number of matching quotes."""
    while True:
        start, end = 0, len(value)
        while start < end and _invisible(value[start]):
            start += 1
        while end > start and _invisible(value[end - 1]):
            end -= 1
        inner = value[start:end]
        if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in QUOTES:
            inner = inner[1:-1]
        if inner == value:
            return value
        value = inner


def normal(value: str) -> str:
    """`value` unwrapped and in Unicode NFKC form, until neither changes it (NFKC turns a
    full-width quote into a quote, which is then unwrapped)."""
    while (plain := unwrapped(unicodedata.normalize("NFKC", unwrapped(value)))) != value:
        value = plain
    return value


def stands_for(value: str) -> set[str]:
    """Every text `value` may be a disguise of: its `normal` form, and the `normal` form of what it
    decodes to as base64, hex or URL-encoding, two layers deep."""
    found: set[str] = set()
    layer = {value}
    for _ in range(_LAYERS):
        layer = {normal(text) for text in layer if len(text) <= _LONGEST} - found
        found |= layer
        layer = {decoded for text in layer for decoded in _decodings(text)}
    return found


def _decodings(text: str) -> list[str]:
    """What `text` reads as, as UTF-8 text under each encoding it could be written in."""
    raw: list[bytes] = []
    if _BASE64.fullmatch(text):
        standard = text.replace("-", "+").replace("_", "/").rstrip("=")
        with contextlib.suppress(binascii.Error):
            raw.append(base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True))
    if _HEX.fullmatch(text):
        raw.append(bytes.fromhex(text))
    if "%" in text:
        raw.append(unquote_to_bytes(text))
    found = []
    for data in raw:
        try:
            found.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return found
