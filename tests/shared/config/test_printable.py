"""shared.config.printable: untrusted text shown on a page, in a receipt, a log or a terminal keeps what
was sent visible, while control and format characters become inert escapes."""

from __future__ import annotations

import unicodedata

import pytest

from shared.config.printable import printable


@pytest.mark.parametrize(
    "text",
    ["", "Mozilla/5.0 (X11; Linux x86_64)", "Zoë 日本 🙂", "back\\slash 'quoted' \"too\"", "a b"],
)
def test_printable_text_is_unchanged(text):
    assert printable(text) == text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x00", r"\x00"),
        ("\x1b[31mred", r"\x1b[31mred"),
        ("VALID\rINVALID", r"VALID\rINVALID"),
        ("line\nbreak\ttab", r"line\nbreak\ttab"),
        ("\x85\x9b", r"\x85\x9b"),
        ("\u202egnp.exe", r"\u202egnp.exe"),
        ("zero\u200bwidth\ufeff", r"zero\u200bwidth\ufeff"),
        ("\u2028\u2029", r"\u2028\u2029"),
        ("\U000e0041", r"\U000e0041"),
    ],
    ids=["nul", "ansi", "cr", "newline-tab", "c1", "bidi", "zero-width", "separators", "tag"],
)
def test_control_and_format_characters_become_backslash_escapes(text, shown):
    assert printable(text) == shown


def test_no_character_of_the_categories_a_reader_cannot_see_survives():
    hidden = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in {"Cc", "Cf", "Zl", "Zp"}]

    shown = printable("".join(hidden))

    assert shown.isascii() and shown.isprintable()
