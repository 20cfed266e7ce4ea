"""Domain names as IDNA 2008 reads them (the `idna` package), and in no other way.

A valid U-label and its A-label are one label (RFC 5890), and DNS ignores ASCII case: those are
the spellings of one name. No mapping is applied (IDNA 2003's nameprep, UTS 46's, NFKC, case
folding), since a mapping can make two registrable names one (`straße.de` and `strasse.de`) or a
name that is nobody's into someone's (`xn--gmail-2ha.com`, gmail with a soft hyphen, into
`gmail.com`). A label IDNA 2008 refuses keeps its text, its ASCII letters lower-cased.
"""

from __future__ import annotations

import string

import idna

A_LABEL_PREFIX = "xn--"
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def ascii_lower(text: str) -> str:
    """`text` with A-Z lower-cased and every other character as it is (`ß` stays `ß`)."""
    return text.translate(_ASCII_LOWER)


def domain_key(domain: str) -> str:
    """The one spelling of `domain` that every spelling of its name gives: ASCII letters
    lower-cased, without the root's trailing dot, each label IDNA 2008 accepts as its A-label,
    each label it refuses as written. Total: any text gives a key, no text raises."""
    name = ascii_lower(domain)
    if name.endswith(".") and "" not in name[:-1].split("."):
        name = name[:-1]  # `example.org.` is the absolute form of `example.org`
    return ".".join(_label_key(label) for label in name.split("."))


def is_fake_a_label(label: str) -> bool:
    """True for a label that carries the A-label prefix but is not one IDNA 2008 accepts: its
    Punycode is not that of a valid U-label (`xn--gmail-2ha` is gmail and a soft hyphen,
    `xn--bcher-2pa` is `bÜcher`), or it is not the U-label's one canonical spelling."""
    lowered = ascii_lower(label)
    return lowered.startswith(A_LABEL_PREFIX) and not _a_label(lowered)


def _label_key(label: str) -> str:
    return _a_label(label) or label


def _a_label(label: str) -> str:
    """The A-label of a label IDNA 2008 accepts (an ASCII label is its own), "" otherwise. An
    ASCII label must be its own canonical spelling: the A-label of its U-label is the label."""
    try:
        encoded = idna.alabel(idna.ulabel(label)).decode("ascii")
    except UnicodeError:  # idna.IDNAError is one
        return ""
    if label.isascii() and encoded != label:
        return ""
    return encoded
