"""What the engines do with a ``pattern``: llguidance and outlines-core compile it with Rust's regex
crate, llama.cpp's converter translates it into grammar rules, and each refuses different things."""

from __future__ import annotations

import re
from collections.abc import Iterator

from speclint.engines.nodes import (
    LLAMA_CPP,
    LLAMA_MAX_REPETITION,
    LLGUIDANCE,
    OUTLINES,
    REJECTED,
    WEAKENED,
    Verdict,
)
from speclint.schema.patterns import repetition_count

_LOOKAROUND_RE = re.compile(r"\(\?(?:=|!|<=|<!|>)")
# llama.cpp's gbnf_escape_length: the escapes its grammar literals and classes can hold.
_GBNF_ESCAPE_RE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[trn\\\"\[\]-])")
_LLAMA_LITERAL_ESCAPES = set("^$.[]()|{}*+?")
_QUANTIFIERS = set("*+?{")
_COUNT_RE = re.compile(r"\{(\d+)(?:,(\d*))?\}")


def pattern_verdicts(pattern: str, path: str, outlines_reads: bool) -> Iterator[Verdict]:
    regex_engines = (LLGUIDANCE, OUTLINES) if outlines_reads else (LLGUIDANCE,)
    unsupported = _unsupported_regex(pattern)
    llama_impact, llama_why = _llama_pattern(pattern)
    rejected = dict.fromkeys(regex_engines, REJECTED) if unsupported else {}
    if llama_impact == REJECTED:
        rejected[LLAMA_CPP] = REJECTED
    if rejected:
        why = unsupported or llama_why
        yield (
            path,
            rejected,
            f"reject pattern {pattern!r}: {why}",
            "rewrite it as a plain anchored regex: no lookarounds, backreferences or \\b",
        )
    if llama_impact == WEAKENED:
        yield (
            path,
            {LLAMA_CPP: WEAKENED},
            f"drops pattern {pattern!r} ({llama_why}) and accepts any string",
            "anchor it ^...$ and spell classes out: [0-9] for \\d, [A-Za-z0-9_] for \\w, "
            "[ \\t\\n\\r] for \\s, no escapes inside [...] but \\\\ \\] \\- and \\xHH",
        )


def _unsupported_regex(pattern: str) -> str:
    """Why llguidance and outlines-core (both on Rust's regex crate) refuse `pattern`, or ''."""
    if _LOOKAROUND_RE.search(_strip_escapes(pattern)):
        return "lookarounds and atomic groups are not supported"
    i, in_class, depth = 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt.isdigit() and nxt != "0" or nxt == "k":
                return "backreferences are not supported"
            if nxt in ("b", "B") and not in_class:
                return "word boundaries (\\b, \\B) are not supported"
            braced = nxt in "pPxu" and pattern[i + 2 : i + 3] == "{"
            i = pattern.find("}", i) + 1 if braced and "}" in pattern[i:] else i + 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class, i = True, i + (2 if pattern[i + 1 : i + 2] == "]" else 1)
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return "unbalanced parentheses"
        elif c == "{":
            brace = _COUNT_RE.match(pattern, i)
            if not brace:
                return "a '{' that opens no repetition count"
            low, high = brace.group(1), brace.group(2)
            if high and repetition_count(low or "0") > repetition_count(high):
                return f"the repetition count {brace.group(0)} has its minimum above its maximum"
        i += 1
    if in_class:
        return "an unterminated character class"
    return "unbalanced parentheses" if depth else ""


def _strip_escapes(pattern: str) -> str:
    return re.sub(r"\\.", "_", pattern)


def _llama_pattern(pattern: str) -> tuple[str, str]:
    """What llama.cpp's converter does with `pattern`: ("", ""), (WEAKENED, why) or (REJECTED, why).

    Mirrors common_chat_schema_converter::_visit_pattern and _pattern_to_rule in llama.cpp's
    common/json-schema-to-grammar.cpp (the copy vendored in llama-cpp-python 0.3.36): an
    ``unsupported_pattern`` there is a warning and any string, an ``invalid_pattern`` an error;
    plus two limits of the GBNF parser it feeds (src/llama-grammar.cpp).
    """
    if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$":
        return WEAKENED, "not anchored with '^' and '$'"
    body, i, depth, can_repeat = pattern[1:-1], 0, 0, False
    while i < len(body):
        c = body[i]
        if c == "(":
            if body[i + 1 : i + 2] == "?" and body[i + 2 : i + 3] != ":":
                return WEAKENED, "unsupported group syntax"
            depth, can_repeat = depth + 1, False
            i += 3 if body[i + 1 : i + 2] == "?" else 1
            continue
        if c == ")":
            if depth == 0:
                return REJECTED, "unbalanced parentheses"
            depth, can_repeat, i = depth - 1, True, i + 1
            continue
        if c in "^$":
            return WEAKENED, "anchor inside the pattern"
        if c == "[":
            end, why = _llama_class(body, i)
            if why:
                return (REJECTED if end < 0 else WEAKENED), why
            i, can_repeat = end, True
            continue
        if c == "|":
            i += 1
            continue
        if c in "*+?":
            if not can_repeat:
                return REJECTED, "nothing to repeat"
            i += 1
            continue
        if c == "{":
            end = body.find("}", i)
            if end < 0:
                return WEAKENED, "unterminated curly brackets"
            bounds = _llama_count(body[i + 1 : end])
            if bounds is None:
                return WEAKENED, "invalid number in curly brackets"
            if not can_repeat:
                return REJECTED, "nothing to repeat"
            low, high = bounds
            if low > LLAMA_MAX_REPETITION:
                return REJECTED, f"a count over {LLAMA_MAX_REPETITION}, which its grammar parser refuses"
            if 0 <= high < low:
                return REJECTED, "a count whose minimum is above its maximum"
            i = end + 1
            continue
        if c == "\\":
            if i == len(body) - 1:
                return REJECTED, "trailing backslash"
            nxt = body[i + 1]
            if nxt in _LLAMA_LITERAL_ESCAPES:
                i += 2
            elif escape := _GBNF_ESCAPE_RE.match(body, i):
                i = escape.end()
            else:
                return WEAKENED, f"unsupported escape: \\{nxt}"
            can_repeat = True
            continue
        if c in "]}":
            return WEAKENED, f"unsupported character: {c}"
        if not c.isascii() and body[i + 1 : i + 2] in _QUANTIFIERS and body[i + 1 : i + 2]:
            return REJECTED, f"a quantifier after the non-ASCII {c!r}, which splits its UTF-8 bytes"
        i, can_repeat = i + 1, True
    if depth:
        return REJECTED, "unbalanced parentheses"
    return "", ""


def _llama_count(inner: str) -> tuple[int, int] | None:
    """llama.cpp's reading of a {n}, {n,} or {n,m} body (spaces allowed around each number):
    (low, high), high -1 when open; None when it is no count. Split by hand, not by a regex, as
    a backtracking regex over runs of spaces took seconds on a 4 KB pattern."""
    parts = [part.strip() for part in inner.split(",")]
    if len(parts) > 2 or not all(part == "" or (part.isascii() and part.isdigit()) for part in parts):
        return None
    if len(parts) == 1:
        return (repetition_count(parts[0]),) * 2 if parts[0] else None
    return repetition_count(parts[0] or "0"), repetition_count(parts[1]) if parts[1] else -1


def _llama_class(body: str, start: int) -> tuple[int, str]:
    """(index after the class, '') or (-1, why) when invalid, (index, why) when unsupported."""
    i = start + 1
    while i < len(body) and body[i] != "]":
        if body[i] == "\\":
            match = _GBNF_ESCAPE_RE.match(body, i)
            if not match:
                return i, f"unsupported escape in character class: {body[i : i + 2]}"
            i = match.end()
        else:
            i += 1
    if i >= len(body):
        return -1, "unterminated character class"
    return i + 1, ""
