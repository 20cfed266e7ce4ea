"""Whether a JSON Schema `pattern` compiles where it will be used: ECMA-262 and Python.

JSON Schema says patterns are ECMA-262 regular expressions, and clients validate arguments with
JavaScript engines (Ajv compiles them with the `u` flag, where the grammar is strict: an escaped
letter or a lone brace is a syntax error). Python servers validate with `re`, which has its own
dialect (`(?P<name>...)`, no `\\p{...}`). A pattern that one side cannot compile breaks every call
there, so speclint checks both. `ecma_error` is a small checker of the `u`-mode grammar (the
productions of ECMA-262 §22.2.1 that patterns in tool schemas use); the tests hold it to Node's
own `new RegExp(pattern, "u")` on a table of patterns.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import warnings
from typing import NoReturn

from speclint.schema.unicode_properties import is_property

SYNTAX_CHARACTERS = set("^$\\.*+?()[]{}|/")
CONTROL_ESCAPES = set("fnrtv")
CLASS_ESCAPES = set("dDsSwW")
_QUANTIFIER_BRACE = re.compile(r"\{(\d+)(,(\d*))?\}")
_TRAIL_SURROGATE = re.compile(r"\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)
# \uXXXX or \u{X...} (any number of digits, leading zeros allowed, up to U+10FFFF), in a pattern
# or a group name. Only two adjacent \uXXXX escapes make a surrogate pair.
_UNICODE_ESCAPE = re.compile(r"\\u(?:([0-9A-Fa-f]{4})|\{([0-9A-Fa-f]+)\})")
_OPEN_COUNT = re.compile(r"\{\d+,\}")
# ECMA-262 identifiers are Unicode ID_Start / ID_Continue, of the Unicode version the engine
# carries. Python's own tables are older (and isidentifier() is XID, after NFKC), so a name is
# judged by general category, and a character this Python does not know yet (Cn) is given the
# benefit of the doubt: speclint refuses only what no engine accepts.
_ID_START_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Cn"})
_ID_CONTINUE_CATEGORIES = _ID_START_CATEGORIES | {"Mn", "Mc", "Nd", "Pc"}
_OTHER_ID_START = frozenset("\u1885\u1886\u2118\u212e\u309b\u309c")
_OTHER_ID_CONTINUE = frozenset("\u00b7\u0387\u1369\u136a\u136b\u136c\u136d\u136e\u136f\u1370\u1371"
                               "\u19da\u200c\u200d\u30fb\uff65")  # fmt: skip
GROUP_OPENERS = (("(?:", False), ("(?=", True), ("(?!", True), ("(?<=", True), ("(?<!", True))
_PROPERTY = re.compile(r"[pP]\{([A-Za-z_]+(?:=[A-Za-z0-9_]+)?)\}")


def repetition_count(digits: str) -> int:
    """A repetition count or group number written in `pattern`, capped where it stops mattering:
    Python refuses to convert a 4,300-digit string, and a hostile pattern may hold one."""
    return int(digits) if len(digits) <= 18 else 10**18


def python_error(pattern: str) -> str | None:
    """Python's `re` error for `pattern`, or None when it compiles."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarning on nested sets is not an error
            re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        return str(exc).split("\n")[0]
    return None


class _Invalid(Exception):
    pass


def _code_point(hex_digits: str) -> int:
    """The value of an escape's hex digits; past six significant digits it is out of range anyway."""
    digits = hex_digits.lstrip("0") or "0"
    return int(digits, 16) if len(digits) <= 6 else 0x110000


def _surrogate_pair(lead: int, trail: int) -> int:
    """The code point u-mode reads from an escaped lead and trail surrogate (\\uD83D\\uDE00)."""
    return 0x10000 + ((lead - 0xD800) << 10) + (trail - 0xDC00)


def _never_identifier(c: str) -> bool:
    """Noncharacters (unassigned for good) and the one letter that is Pattern_Syntax (U+2E2F)."""
    point = ord(c)
    return point & 0xFFFE == 0xFFFE or 0xFDD0 <= point <= 0xFDEF or point == 0x2E2F


def _id_start(c: str) -> bool:
    if c.isascii():
        return c.isalpha() or c in "$_"
    if _never_identifier(c):
        return False
    return unicodedata.category(c) in _ID_START_CATEGORIES or c in _OTHER_ID_START


def _id_continue(c: str) -> bool:
    if c.isascii():
        return c.isalnum() or c in "$_"
    if _never_identifier(c):
        return False
    return (
        unicodedata.category(c) in _ID_CONTINUE_CATEGORIES or c in _OTHER_ID_START or c in _OTHER_ID_CONTINUE
    )


@functools.lru_cache(maxsize=64)  # SL006 and SL003's bounds_length ask of the same pattern
def ecma_error(pattern: str) -> str | None:
    """Why `pattern` is not a valid ECMA-262 regular expression with the `u` flag, or None."""
    try:
        _EcmaChecker(pattern).check()
    except _Invalid as exc:
        return str(exc)
    return None


class _EcmaChecker:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.groups = 0
        self.names: set[str] = set()
        self.backrefs: list[int] = []
        self.named_refs: list[str] = []
        self.assertions: list[bool] = []  # per open group: is it a lookaround?

    def fail(self, why: str) -> NoReturn:
        raise _Invalid(f"{why} at position {self.i}")

    def check(self) -> None:
        depth = 0
        quantifiable = False
        while self.i < len(self.p):
            c = self.p[self.i]
            if c == "\\":
                quantifiable = self.atom_escape()
                continue
            if c == "[":
                self.character_class()
                quantifiable = True
                continue
            if c == "(":
                quantifiable = False
                depth += 1
                self.group_open()
                continue
            if c == ")":
                if depth == 0:
                    self.fail("unmatched ')'")
                depth -= 1
                self.i += 1
                quantifiable = not self._closes_assertion()
                continue
            if c in "*+?" or c == "{":
                if not quantifiable:
                    self.fail("nothing to repeat" if c != "{" else "lone quantifier brackets")
                self.quantifier()
                quantifiable = False
                continue
            if c in "}]":
                self.fail(f"lone {c!r}")
            quantifiable = c not in "|^$"
            self.i += 1
        if depth:
            self.fail("unterminated group")
        if any(n > self.groups for n in self.backrefs):
            raise _Invalid("a backreference names a group that does not exist")
        if any(name not in self.names for name in self.named_refs):
            raise _Invalid("a named backreference names a group that does not exist")

    # Groups: the opening bracket records whether it is an assertion, so that a quantifier after
    # its ')' can be refused (u-mode forbids quantified lookarounds).
    def group_open(self) -> None:
        for opener, assertion in GROUP_OPENERS:
            if self.p.startswith(opener, self.i):
                self.assertions.append(assertion)
                self.i += len(opener)
                return
        if self.p.startswith("(?<", self.i):
            name, end = self.group_name(self.i + 3, "invalid capture group name")
            if name in self.names:
                self.fail("duplicate capture group name")
            self.names.add(name)
            self.groups += 1
            self.assertions.append(False)
            self.i = end
            return
        if self.p.startswith("(?", self.i):
            self.fail(f"invalid group {self.p[self.i : self.i + 4]!r} (Python/PCRE syntax)")
        self.groups += 1
        self.assertions.append(False)
        self.i += 1

    def group_name(self, start: int, why: str) -> tuple[str, int]:
        """The group name from `start` to its '>' (escapes decoded) and the index after the '>'.

        A name is an identifier: a Unicode ID_Start character, `$` or `_`, then ID_Continue
        characters, `$`, ZWNJ or ZWJ. An escaped surrogate pair (`\\uD835\\uDC9C`) is one character."""
        end = self.p.find(">", start)
        if end < 0:
            self.fail(why)
        raw = self.p[start:end]
        points: list[int] = []
        at, lead_end = 0, -1  # lead_end: where a \uD800-\uDBFF escape just ended
        for escape in _UNICODE_ESCAPE.finditer(raw):
            points += map(ord, raw[at : escape.start()])
            four = escape.group(1)
            point = int(four, 16) if four else _code_point(escape.group(2))
            if point > 0x10FFFF:
                self.fail(why)
            if four and 0xDC00 <= point <= 0xDFFF and lead_end == escape.start():
                points[-1] = _surrogate_pair(points[-1], point)
                lead_end = -1
            else:
                points.append(point)
                lead_end = escape.end() if four and 0xD800 <= point <= 0xDBFF else -1
            at = escape.end()
        points += map(ord, raw[at:])
        name = "".join(map(chr, points))
        if not name or "\\" in name or not _id_start(name[0]) or not all(map(_id_continue, name[1:])):
            self.fail(why)
        return name, end + 1

    def _closes_assertion(self) -> bool:
        return self.assertions.pop() if self.assertions else False

    def quantifier(self) -> None:
        c = self.p[self.i]
        if c == "{":
            match = _QUANTIFIER_BRACE.match(self.p, self.i)
            if not match:
                self.fail("incomplete quantifier")
            low, has_comma, high = match.group(1), match.group(2), match.group(3)
            if has_comma and high and repetition_count(high) < repetition_count(low):
                self.fail("numbers out of order in {} quantifier")
            self.i = match.end()
        else:
            self.i += 1
        if self.i < len(self.p) and self.p[self.i] == "?":
            self.i += 1
        if self.i < len(self.p) and self.p[self.i] in "*+?{":
            self.fail("nothing to repeat (possessive or doubled quantifier)")

    def atom_escape(self) -> bool:
        """After a backslash outside a class; True when the atom can be quantified."""
        self.i += 1
        if self.i >= len(self.p):
            self.fail("\\ at end of pattern")
        c = self.p[self.i]
        if c in "bB":
            self.i += 1
            return False
        if c.isdigit() and c != "0":
            match = re.compile(r"\d+").match(self.p, self.i)
            if match is None:  # a digit that is no decimal digit (², a superscript): no backreference
                self.fail(f"invalid escape \\{c}")
            self.backrefs.append(repetition_count(match.group(0)))
            self.i = match.end()
            return True
        if c == "k":
            if self.p[self.i + 1 : self.i + 2] != "<":
                self.fail("invalid named reference")
            name, self.i = self.group_name(self.i + 2, "invalid named reference")
            self.named_refs.append(name)
            return True
        self.character_escape(in_class=False)
        return True

    def character_escape(self, in_class: bool) -> None:
        """The escape at self.i (the character after the backslash), shared with classes."""
        c = self.p[self.i]
        if c in CLASS_ESCAPES or c in CONTROL_ESCAPES or c in SYNTAX_CHARACTERS:
            self.i += 1
        elif c in "pP":
            match = _PROPERTY.match(self.p, self.i)
            if not match or not is_property(match.group(1)):
                self.fail("invalid property name")
            self.i = match.end()
        elif c == "c":
            if not re.match(r"[A-Za-z]", self.p[self.i + 1 : self.i + 2]):
                self.fail("invalid unicode escape \\c")
            self.i += 2
        elif c == "0":
            if self.p[self.i + 1 : self.i + 2].isdigit():
                self.fail("invalid decimal escape")
            self.i += 1
        elif c == "x":
            if not re.fullmatch(r"[0-9A-Fa-f]{2}", self.p[self.i + 1 : self.i + 3]):
                self.fail("invalid escape \\x")
            self.i += 3
        elif c == "u":
            match = _UNICODE_ESCAPE.match(self.p, self.i - 1)  # from the backslash
            if not match or (match.group(2) and _code_point(match.group(2)) > 0x10FFFF):
                self.fail("invalid unicode escape")
            self.i = match.end()
        elif in_class and c in "b-":
            self.i += 1
        else:
            self.fail(f"invalid escape \\{c}")

    def character_class(self) -> None:
        self.i += 1
        if self.p[self.i : self.i + 1] == "^":
            self.i += 1
        while self.i < len(self.p) and self.p[self.i] != "]":
            start = self.i
            atom = self.class_atom()
            if self.p[self.i : self.i + 1] == "-" and self.p[self.i + 1 : self.i + 2] not in ("]", ""):
                self.i += 1
                end = self.class_atom()
                if atom is None or end is None:
                    self.i = start
                    self.fail("invalid character class (a class escape in a range)")
                if ord(atom) > ord(end):
                    self.i = start
                    self.fail("range out of order in character class")
        if self.i >= len(self.p):
            self.fail("unterminated character class")
        self.i += 1

    def class_atom(self) -> str | None:
        """One class atom; its character, or None for a class escape (\\d, \\p{..})."""
        c = self.p[self.i]
        if c != "\\":
            self.i += 1
            return c
        self.i += 1
        if self.i >= len(self.p):
            self.fail("\\ at end of pattern")
        e = self.p[self.i]
        if e in CLASS_ESCAPES or e in "pP":
            self.character_escape(in_class=True)
            return None
        start = self.i
        self.character_escape(in_class=True)
        escaped = self.p[start : self.i]
        simple = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "b": "\b", "0": "\0"}
        if escaped in simple:
            return simple[escaped]
        if escaped[0] in "xu":
            point = _code_point(escaped[1:].strip("{}"))
            trail = _TRAIL_SURROGATE.match(self.p, self.i)
            if escaped[0] == "u" and escaped[1] != "{" and 0xD800 <= point <= 0xDBFF and trail:
                # u-mode reads \uD83D\uDE00 as one code point (U+1F600), so ranges of them work
                self.i = trail.end()
                point = _surrogate_pair(point, int(trail.group(1), 16))
            return chr(point)
        if escaped[0] == "c":
            return chr(ord(escaped[1]) % 32)
        return escaped


def bounds_length(pattern: object) -> bool:
    """Whether `pattern` alone bounds a string's length: valid, anchored ^...$ around the whole
    expression (no top-level |), and no unbounded repeat (*, +, {n,}). Such a pattern needs no
    maxLength, and outlines-core keeps a pattern only when no minLength/maxLength sits beside it."""
    if not isinstance(pattern, str) or ecma_error(pattern) is not None:
        return False
    if not pattern.startswith("^") or not pattern.endswith("$") or pattern.endswith("\\$"):
        return False
    depth, i, in_class = 0, 1, False
    while i < len(pattern) - 1:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c in "*+" or (c == "|" and depth == 0) or (c == "{" and _OPEN_COUNT.match(pattern, i)):
            return False
        i += 1
    return True
