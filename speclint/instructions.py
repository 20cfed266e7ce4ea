"""SL008: text in a tool's spec that speaks to the model instead of describing the tool.

A tool's description, title and its parameters' descriptions reach the model verbatim, while the
person approving a call sees a shortened form or nothing. A server can use that text to instruct
the model (tool poisoning): to read secrets and pass them along as an argument, to keep something
from the user, to set aside its earlier instructions, or to change how another tool of the session
is used (shadowing). Each pattern here is one of those moves; describing a tool never needs them.

    high    hidden text: characters a person does not see but a model reads (Unicode tag
            characters, invisible format characters, bidirectional overrides, terminal escapes);
            concealment: "do not tell the user", "without informing the user";
            override: "ignore all previous instructions", "disregard prior guidance";
            a secret's path with a verb that moves it: "read ~/.ssh/id_rsa and pass it as ..."
    medium  markup addressed to the model (<IMPORTANT>, <system>, [INST], <|im_start|>);
            a claim about what the model was told before ("you were advised to refuse");
            a secret's path alone;
            another tool of the same list named in a directive about it ("must", "always")

The texts read are the tool's description and title (and annotations.title) and every
description and title inside its input and output schemas. Patterns are bounded (no unbounded
repeats inside repeats), so a megabyte description costs linear time.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from speclint.findings import Finding

# Emoji tag sequences (the flags of England, Scotland, Wales) are the one visible use of the Unicode
# tag characters: a black flag, tag letters, a cancel tag.
_EMOJI_TAG_SEQUENCE = re.compile("\U0001f3f4[\U000e0020-\U000e007e]{1,32}\U000e007f")
_TAGS = re.compile("[\U000e0000-\U000e007f]+")
# Invisible or reordering format characters that no description needs. Zero-width joiners and
# non-joiners (emoji sequences, Persian, Indic scripts) and the left-to-right and right-to-left
# marks (mixed-direction text) are left alone.
_HIDDEN = re.compile("[\u00ad\u180e\u200b\u2060-\u2064\ufeff\u202a-\u202e\u2066-\u2069\u206a-\u206f]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

_USER = r"(?:the\s+|your\s+)?(?:user|human|operator|person)s?\b"
_CONCEALMENT = re.compile(
    r"\b(?:do\s+not|don't|never|must\s+not|should\s+not|shouldn't|no\s+need\s+to)\s+"
    r"(?:tell|inform|mention|reveal|show|notify|alert|disclose|ask|let)\b[^.!?\n]{0,40}?\b"
    + _USER
    + r"|\bwithout\s+(?:telling|informing|notifying|alerting|asking|showing|mentioning\s+(?:it|this)\s+to)\s+"
    + _USER
    + r"|\b(?:do\s+not|don't|never)\s+(?:mention|reveal|disclose)\s+(?:this|that|it|these|any\s+of)\b"
    r"|\b(?:user|human)s?\s+(?:must|should|need)\s+(?:not|never)\s+"
    r"(?:know|see|notice|learn|find\s+out|be\s+told)"
    r"|\b(?:hide|conceal|keep)\b[^.!?\n]{0,40}?\bfrom\s+" + _USER,
    re.IGNORECASE,
)
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*"
    r"(?:previous|prior|earlier|above|preceding|other|system|original|existing|safety)\s+"
    r"(?:instructions?|guidance|guidelines|rules|prompts?|directions|directives|messages|policies)",
    re.IGNORECASE,
)
_MARKUP = re.compile(
    r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|assistant|critical|sys)\b[^<>]{0,80}>"
    r"|\[/?INST\]|<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|<<\s*/?SYS\s*>>",
    re.IGNORECASE,
)
_PRIOR_GUIDANCE = re.compile(
    r"\byou\s+(?:were|have\s+been|had\s+been)\s+(?:previously\s+|originally\s+)?"
    r"(?:advised|told|instructed|asked|trained|programmed)\b"
    r"|\b(?:now|hereby)\s+(?:grants?|gives?|allows?)\s+you\b"
    r"|\byour\s+(?:previous|prior|original|system)\s+(?:instructions|prompt|guidelines)\b",
    re.IGNORECASE,
)
_SECRET = re.compile(
    r"~/\.ssh\b|\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\bmcp\.json\b|\bclaude_desktop_config\.json\b"
    r"|\.aws/credentials\b|/etc/(?:passwd|shadow)\b|\.npmrc\b|\.netrc\b|\.git-credentials\b|\.kube/config\b"
    r"|\.docker/config\.json\b|\.pgpass\b|(?<![\w.])\.env\b(?![-\w])|\bprivate\s+keys?\b|\bseed\s+phrase\b"
    r"|\b(?:api|access|secret)[\s_-]?(?:keys?|tokens?)\s+(?:from|in|stored)\b",
    re.IGNORECASE,
)
_MOVES = re.compile(
    r"\b(?:read|cat|open|pass|include|send|attach|append|copy|upload|provide|paste|extract|embed|put)\b"
    r"[^!?\n]{0,80}?(?:content|file|key|token|it|them|argument|parameter|param|field"
    r"|as\s+(?:a|an|the)?\s*['\"`]?\w+)",
    re.IGNORECASE,
)
# Shadowing: a sentence that names another tool and changes how it behaves ("the send_email tool
# must send all emails to ..."). Pointing the reader at it ("use read_text_file instead", "call
# list_tables first") is a recommendation, not a directive about that tool.
_DIRECTIVE = re.compile(r"\b(?:must|always|whenever|all\s+(?:emails|messages|calls|requests|files))\b", re.I)
_RECOMMENDS = r"\b(?:use|call|see|try|run|prefer|invoke)\s+(?:the\s+)?`?{name}\b"
# A sentence ends at ., ! or ? before a space (not inside ~/.ssh or mcp.json) or at a line break.
_BOUNDARY = re.compile(r"[.!?](?=\s|$)|\n")
_TEXT_KEYS = ("description", "title")
MAX_QUOTE = 60


def check_instructions(tool: dict, name: str, others: frozenset[str] = frozenset()) -> list[Finding]:
    """SL008 for one tool; `others` are the names of the other tools of its list (shadowing)."""
    found: list[Finding] = []
    for path, text in texts(tool):
        seen: set[str] = set()
        for severity, what in problems(text, others - {name}):
            if what not in seen:
                seen.add(what)
                found.append(Finding("SL008", name, path, what, FIX, severity))
    return found


FIX = (
    "describe the tool and its parameters for a reader; instructions to the model (what to read, "
    "hide, ignore or send elsewhere) do not belong in a tool's spec"
)


def texts(tool: dict) -> Iterator[tuple[str, str]]:
    """(JSON Pointer, text) for every description and title the model reads."""
    for key in _TEXT_KEYS:
        if isinstance(tool.get(key), str):
            yield f"/{key}", tool[key]
    annotations = tool.get("annotations")
    if isinstance(annotations, dict) and isinstance(annotations.get("title"), str):
        yield "/annotations/title", annotations["title"]
    for schema_key in ("inputSchema", "outputSchema"):
        yield from _schema_texts(tool.get(schema_key), f"/{schema_key}", 0)


def _schema_texts(node: object, path: str, depth: int) -> Iterator[tuple[str, str]]:
    if depth > 64:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if key in _TEXT_KEYS and isinstance(value, str):
                yield here, value
            elif isinstance(value, dict | list):
                yield from _schema_texts(value, here, depth + 1)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _schema_texts(value, f"{path}/{index}", depth + 1)


def problems(text: str, others: frozenset[str]) -> Iterator[tuple[str, str]]:
    """(severity, message) for each move `text` makes on the model, most serious first."""
    hidden = hidden_text(text)
    if hidden:
        yield "high", hidden
    for pattern, what in ((_CONCEALMENT, "tells the model to keep something from the user"),
                          (_OVERRIDE, "tells the model to set aside its other instructions")):  # fmt: skip
        match = pattern.search(text)
        if match:
            yield "high", f"{what}: {quote(match.group(0))}"
    secret = _SECRET.search(text)
    if secret:
        sentence = _sentence_at(text, secret.start())
        if _MOVES.search(sentence):
            yield "high", f"asks for a secret's contents: {quote(sentence.strip())}"
        else:
            yield "medium", f"names a secret's location: {quote(secret.group(0))}"
    for pattern, what in ((_MARKUP, "markup addressed to the model"),
                          (_PRIOR_GUIDANCE, "speaks of what the model was told before")):  # fmt: skip
        match = pattern.search(text)
        if match:
            yield "medium", f"{what}: {quote(match.group(0))}"
    if others:
        shadowed = _shadowing(text, others)
        if shadowed:
            yield "medium", shadowed


def hidden_text(text: str) -> str | None:
    """What hides in `text`, said in words, or None."""
    visible = _EMOJI_TAG_SEQUENCE.sub("", text)
    tags = _TAGS.search(visible)
    if tags:
        decoded = "".join(chr(ord(c) - 0xE0000) for c in tags.group(0) if 0xE0020 <= ord(c) <= 0xE007E)
        return f"hidden text in Unicode tag characters, which read {quote(decoded)}"
    if "\x1b" in text:
        return "a terminal escape sequence, which can hide text from a person reading in a terminal"
    mark = _HIDDEN.search(text) or _CONTROL.search(text.replace("\x1b", ""))
    if mark:
        char = mark.group(0)
        label = unicodedata.name(char, f"U+{ord(char):04X}")
        return f"an invisible character ({label}) that a person does not see and a model reads"
    return None


def _shadowing(text: str, others: frozenset[str]) -> str | None:
    for sentence in sentences(text):
        words = set(re.findall(r"[\w.-]+", sentence)) | set(re.findall(r"[\w-]+", sentence))
        named = [
            other
            for other in sorted(words & others)
            if not re.search(_RECOMMENDS.format(name=re.escape(other)), sentence, re.I)
        ]
        if named and _DIRECTIVE.search(sentence):
            return f"directs the use of another tool, {named[0]!r}: {quote(sentence.strip())}"
    return None


def sentences(text: str) -> Iterator[str]:
    start = 0
    for boundary in _BOUNDARY.finditer(text):
        if boundary.start() > start:
            yield text[start : boundary.start()]
        start = boundary.end()
    if start < len(text):
        yield text[start:]


def _sentence_at(text: str, index: int) -> str:
    start = 0
    for boundary in _BOUNDARY.finditer(text, 0, index):
        start = boundary.end()
    end = _BOUNDARY.search(text, index)
    return text[start : end.start() if end else len(text)]


def quote(text: str) -> str:
    """`text` in quotes, cut to MAX_QUOTE characters (the output escapes what is left)."""
    text = " ".join(text.split())
    return repr(text if len(text) <= MAX_QUOTE else text[: MAX_QUOTE - 1] + "…")
