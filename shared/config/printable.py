"""Untrusted text made safe to show: on a page, in a receipt, in a log or on a terminal.

Request headers and stored receipts can carry characters that a reader never sees as themselves:
NUL, ESC (terminal colour and cursor codes), CR (overwrites a terminal line), bidi overrides such as
U+202E, line and paragraph separators. `printable` writes each such character as its Python escape
(`\\x1b`, `\\u202e`), so what was sent stays visible and inert, and printable text is unchanged.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """`text` with every character `str.isprintable` refuses (Unicode categories Cc, Cf, Zl, Zp,
    Zs other than the space, Cs, Co and Cn) written as its backslash escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
