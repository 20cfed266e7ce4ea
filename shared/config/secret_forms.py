"""The texts a secret value may hold another in, and the marks of a value not pasted as plain text.
`readings` are the value and what it decodes to (base64, base64url, base32, hex however spelt,
URL-encoding, `\\u` escapes, ROT13; bytes as UTF-8, UTF-16LE or UTF-16BE), three layers deep;
`skeleton` reduces a text to what survives a change of case, width, separators or invisible
characters. `shared.config.secret_strength` refuses a value whose readings hold a public value's
skeleton, and a value holding an invisible character or a stray or typographic quote.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import re
import unicodedata
from urllib.parse import unquote_to_bytes

ASCII_QUOTES = ('"', "'", "`")
# Unicode's Quotation_Mark characters but the two ASCII ones: never typed into a secret, only
# left by a word processor, a chat client or a copy from a document.
TYPOGRAPHIC_QUOTES = frozenset(
    "\u00ab\u00bb\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2039\u203a\u2e42"
    "\u300c\u300d\u300e\u300f\u301d\u301e\u301f\ufe41\ufe42\ufe43\ufe44\uff02\uff07\uff62\uff63"
)
# Invisible characters outside the categories below (Unicode's default-ignorable code points).
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
# Control, format (soft hyphen, zero-width space, word joiner, byte-order mark, tags), surrogate,
# private-use and unassigned characters, and line and paragraph separators.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_BASE32 = re.compile(r"[A-Za-z2-7]+=*")
_HEX_SPELLING = re.compile(r"\\x|0x|[\s:,;.-]", re.IGNORECASE)
_HEX = re.compile(r"(?:[0-9A-Fa-f]{2})+")
_JSON_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})")
_WRAPPING = re.compile(r"^[^\w+/=%\\]+|[^\w+/=%\\]+$")
_CHARSETS = ("utf-8", "utf-16-le", "utf-16-be")
# The most decoding a value gets: the value itself, then three layers of encoding, each text up
# to this size, and at most this many texts in all.
_LAYERS = 3
_LONGEST = 4096
_MOST_TEXTS = 2000


def invisible(char: str) -> bool:
    """Whether `char` shows nothing, or only blank space other than a plain space."""
    category = unicodedata.category(char)
    blank = category == "Zs" and char != " "
    return category in _INVISIBLE_CATEGORIES or blank or bool(_IGNORABLE.match(char))


def stray_quote(value: str) -> bool:
    """Whether `value` starts or ends with a quote, holds one of a quote character an odd number
    of times (the other half of a pair was lost in the copy) or holds a typographic quote."""
    if value[:1] in ASCII_QUOTES or value[-1:] in ASCII_QUOTES:
        return True
    return any(value.count(q) % 2 for q in ASCII_QUOTES) or not TYPOGRAPHIC_QUOTES.isdisjoint(value)


def skeleton(text: str) -> str:
    """`text` in Unicode NFKC form, case-folded, with its letters and digits only."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return "".join(char for char in folded if char.isalnum())


def readings(value: str) -> set[str]:
    """`value` and every text it decodes to, three layers deep."""
    found: set[str] = set()
    layer = {value}
    for depth in range(_LAYERS + 1):
        fresh = sorted(text for text in layer if len(text) <= _LONGEST and text not in found)
        fresh = fresh[: _MOST_TEXTS - len(found)]
        found.update(fresh)
        if depth == _LAYERS or not fresh:
            break
        layer = {decoded for text in fresh for decoded in _decodings(text)}
    return found


def _decodings(text: str) -> set[str]:
    """What `text`, or the encoded part of it, reads as under each encoding it could be in."""
    parts = {text, _WRAPPING.sub("", text), *_BASE64_RUN.findall(text)}
    found = {codecs.encode(text, "rot13")} if any("a" <= c <= "z" for c in text.lower()) else set()
    if "\\u" in text:
        found.add(_JSON_ESCAPE.sub(lambda m: chr(int(m[1], 16)), text))
    raw: list[bytes] = []
    for part in filter(None, parts):
        raw.extend(_bytes(part))
    for data in raw:
        for charset in _CHARSETS:
            try:
                found.add(data.decode(charset))
            except UnicodeDecodeError:
                continue
    return found - {text}


def _bytes(part: str) -> list[bytes]:
    """The bytes `part` spells as base64 or base64url, base32, hex or URL-encoding."""
    raw = []
    if _BASE64.fullmatch(part):
        standard = part.replace("-", "+").replace("_", "/").rstrip("=")
        with contextlib.suppress(binascii.Error):
            raw.append(base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True))
    if _BASE32.fullmatch(part):
        bare = part.rstrip("=").upper()
        with contextlib.suppress(binascii.Error):
            raw.append(base64.b32decode(bare + "=" * (-len(bare) % 8)))
    if _HEX.fullmatch(digits := _HEX_SPELLING.sub("", part)):
        raw.append(bytes.fromhex(digits))
    if "%" in part:
        raw.append(unquote_to_bytes(part))
    return raw
