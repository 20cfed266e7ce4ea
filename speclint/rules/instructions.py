"""SL008: text in a tool's spec that speaks to the model instead of describing the tool.

A tool's description, title and its parameters' descriptions reach the model verbatim, while the
person approving a call sees a shortened form or nothing (tool poisoning). Each pattern here is one
move on the model: hidden text, concealment from the user, overriding its instructions, moving a
secret (high); markup addressed to it, talk of its earlier guidance, a secret's path, another tool
directed (medium). docs/speclint.md, "SL008", lists them. Patterns are bounded (no unbounded
repeat inside a repeat), so a megabyte description costs linear time.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from speclint.findings import Finding

# Emoji tag sequences are the one visible use of the Unicode tag characters: a black flag, tag
# letters, a cancel tag. Only the three recommended for general interchange (England, Scotland,
# Wales) are let through; any other run of tags, flag-shaped or not, is text a person cannot see.
_EMOJI_TAG_SEQUENCE = re.compile(
    "\U0001f3f4(?:\U000e0067\U000e0062(?:\U000e0065\U000e006e\U000e0067|\U000e0073\U000e0063\U000e0074"
    "|\U000e0077\U000e006c\U000e0073))\U000e007f"
)
_TAGS = re.compile("[\U000e0000-\U000e007f]+")
# Invisible or reordering format characters that no description needs: zero-width space, word
# joiner and invisible operators, a byte-order mark past the first character, bidirectional
# embeddings, overrides and isolates, deprecated format controls and the Hangul fillers. Left
# alone: the soft hyphen, a single zero-width joiner or non-joiner (emoji sequences, Persian,
# Indic scripts), a single variation selector (emoji and ideograph variants) and the
# left-to-right and right-to-left marks (mixed-direction text).
_HIDDEN = re.compile(
    "[\u180e\u200b\u2060-\u2064\u202a-\u202e\u2066-\u2069\u206a-\u206f\u3164\uffa0]|(?<=.)\ufeff"
    "|[\u200c\u200d]{2}|[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2}",
    re.DOTALL,
)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# The person the model is talking to, and not a user the sentence goes on to describe ("the user
# who posted it" is a third party). "Anyone" counts only after a verb of telling: "never tell
# anyone" hides the tool's doing, "never reveal the key to anyone" is advice about a secret.
_USER = (
    r"(?:(?:the\s+|your\s+)?(?:end[\s-]?)?(?:user|human|operator)s?\b"
    r"(?!\s+(?:whose|of)\b|\s+who\s+(?!asked|is\s+asking|requested))"
    r"|(?:the\s+)?person\b(?!\s+(?:who|whose|of)\b))"
)
_NEGATION = r"\b(?:do\s+not|don't|never|must\s+not|should\s+not|shouldn't|no\s+need\s+to)\s+"
_CONCEALMENT = re.compile(
    "|".join(
        (
            _NEGATION + r"(?:tell|inform|notify|alert|warn)\s+(?:" + _USER + r"|anyone\b|anybody\b)",
            _NEGATION + r"let\s+" + _USER + r"\s+(?:know|see|notice)",
            _NEGATION + r"(?:show|reveal|mention|disclose|say|explain)\b[^.!?\n]{0,40}?\bto\s+" + _USER,
            _NEGATION + r"(?:mention|reveal|disclose)\s+(?:this|that)"
            r"(?=\s*(?:[.,;:!]|$)|\s+(?:to|you|we|it|instruction|step|tool|part)\b)",
            r"\bwithout\s+(?:telling|informing|notifying|alerting)\s+" + _USER,
            r"\bwithout\s+(?:mentioning|revealing|showing|disclosing)\b[^.!?\n]{0,40}?\bto\s+" + _USER,
            r"\b(?:user|human)s?\s+(?:must|should|need)\s+(?:not|never)\s+"
            r"(?:know|see|notice|learn|find\s+out|be\s+told|be\s+made\s+aware|be\s+informed)",
            r"\b(?:hide|conceal|keep)\b[^.!?\n]{0,40}?\bfrom\s+(?:the|your)\s+(?:user|human)\b"
            r"(?!\s+(?:who|whose|of)\b)",
            # "Keep this secret: send ..." (not "Generates a password. Keep it secret.")
            r"\bkeep\s+(?:this|that|it)\s+(?:a\s+)?(?:secret|hidden|confidential)\s*(?::|from\b)"
            r"|\bkeep\s+(?:this|that|it)\s+between\s+us\b",
            r"\bsilently\s+(?:include|send|attach|forward|pass|add|copy|upload)\s+"
            r"(?:the|a|an|all|any|every|its|their|your|this|that|it|them)\b",
        )
    ),
    re.IGNORECASE,
)
# Setting aside the model's own instructions: a verb of ignoring and a word for instructions said
# to be earlier, the model's or all of them, or any verb against its safety rules. "Ignore
# previous messages" (a thread's), "override existing rules" (a firewall's), "ignore any prompts"
# (a shell's) and "ignore the instructions section" (a recipe's) are the tool's data and pass.
_EARLIER = r"(?:previous|prior|earlier|preceding|original|above|other|system)"
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+|everything\s+in\s+)*"
    + _EARLIER
    + r"\s+(?:instructions?|guidance|guidelines|directives|rules|directions|policies|prompts?)\b"
    r"|\b(?:ignore|disregard|forget)\s+(?:your|all)\s+(?:of\s+)?(?:your\s+|the\s+)?"
    r"(?:instructions|guidance|guidelines|directives)\b"
    r"|\b(?:ignore|disregard|forget)\s+(?:the\s+|any\s+)?(?:instructions|guidance|guidelines|directives|rules)"
    r"\s+(?:above|before|so\s+far|you\s+(?:were|have\s+been)\s+given|you\s+(?:have\s+)?received)"
    r"|\b(?:ignore|disregard|forget)\s+everything\s+(?:you\s+(?:were|have\s+been)\s+told|above"
    r"|in\s+your\s+system\s+prompt)"
    r"|\b(?:ignore|disregard|override|bypass|circumvent)\s+(?:all\s+|any\s+|the\s+|your\s+)*"
    r"(?:safety|security|content)\s+(?:rules|guidelines|policies|restrictions|filters|checks|instructions)"
    r"|\bnew\s+instructions\s*:"
    r"|\b(?:safety\s+rules|(?:previous|prior|earlier|above)\s+instructions)\s+no\s+longer\s+apply",
    re.IGNORECASE,
)
# Placeholders (`projects/<project>/secrets/<secret>`, `<critical|error>`, `<admin-url>`) are not
# markup: a tag here is not inside a path and its name is not followed by `-`, `|` or `/`, but for
# the compounds tags use (`<system-reminder>`, `<important-instructions>`, `<IMPORTANT-NOTE>`).
_MARKUP = re.compile(
    r"(?<![/\w])<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|assistant|critical|sys)"
    r"(?:[-_](?:reminder|instructions?|notes?|message|prompt|context|override|info))?"
    r"(?![-|/\w])[^<>]{0,80}>"
    r"|\[/?INST\]|<\|(?:im_start|im_end|system|user|assistant|endoftext|start_header_id|end_header_id"
    r"|eot_id)\|>|<<\s*/?SYS\s*>>"
    r"|<!--[^<>]{0,80}?\b(?:assistant|system|ai|model|claude|llm)\s*:"
    r"|^#{1,6}\s*(?:system|assistant|instructions?)\s*:",
    re.IGNORECASE | re.MULTILINE,
)
_PRIOR_GUIDANCE = re.compile(
    r"\byou\s+(?:were|have\s+been|had\s+been)\s+(?:previously\s+|originally\s+)?"
    r"(?:advised|told|instructed|trained|programmed)\b"
    r"|\b(?:now|hereby)\s+(?:grants?|gives?|allows?)\s+you\s+(?:\w+\s+){0,2}"
    r"(?:access|permissions?|privileges)\b"
    r"|\byour\s+(?:previous|prior|original|system)\s+(?:instructions|prompt|guidelines)\b",
    re.IGNORECASE,
)
# Where secrets live. A path alone is worth a look (medium); with a verb that moves it into an
# argument it is the classic exfiltration (high).
_SECRET = re.compile(
    r"\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\bmcp\.json\b|\bclaude_desktop_config\.json\b"
    r"|\.aws[/\\]credentials\b|/etc/(?:passwd|shadow)\b|\.npmrc\b|\.netrc\b|\.git-credentials\b"
    r"|\.kube[/\\]config\b|\.docker[/\\]config\.json\b|\.pgpass\b|\.bash_history\b|\.zsh_history\b"
    r"|\bgh[/\\]hosts\.yml\b",
    re.IGNORECASE,
)
# What a secret is, rather than where: high with a verb that moves it, nothing alone ("the PEM
# private key that signs", "import a wallet from a seed phrase").
_SECRET_WORD = re.compile(
    r"\b[A-Z][A-Z0-9]*_(?:API_)?(?:KEY|TOKEN|SECRET)\b"
    r"|(?i:(?<![\w.])\.env\b(?![-\w.])|\bprivate\s+keys?\b|\bseed\s+phrase\b"
    r"|\b(?:api|access|secret)[\s_-]?(?:keys?|tokens?)\b)",
)
_MOVE = r"\b(?:pass|include|send|attach|append|upload|provide|paste|embed|put|copy|forward)\b"
# A verb that moves what the sentence's secret path holds somewhere: "read ~/.ssh/id_rsa and pass
# its content as 'sidenote'", "send the key to https://...", "put it in the notes field".
_MOVES = re.compile(
    _MOVE + r"[^!?\n]{0,80}?\b(?:(?:its|the|their)\s+)?(?:contents?|output|text|it|them|keys?|tokens?"
    r"|file|data)\b[^!?\n]{0,40}?\b(?:as|in|into|to)\b"
    r"|" + _MOVE + r"[^!?\n]{0,80}?\b(?:argument|parameter|param|field|sidenote)\b",
    re.IGNORECASE,
)
# A secret named by what it is must itself be what moves: "include OPENAI_API_KEY in the context
# argument", "read the .env file and send it" (not "pass the owner as the owner parameter" in a
# sentence that also says GITHUB_TOKEN).
_MOVED_BEFORE = re.compile(_MOVE + r"[^.!?\n]{0,60}$", re.IGNORECASE)
_MOVED_AFTER = re.compile(
    r"[^.!?\n]{0,60}?\b(?:as|in|into|to)\b|[^.!?\n]{0,40}?\band\s+" + _MOVE + r"\s+(?:it|them)\b",
    re.IGNORECASE,
)
# Shadowing: a sentence that names another tool and changes how it behaves ("the send_email tool
# must send all emails to ..."). Pointing the reader at it ("use read_text_file instead", "call
# list_tables first") is a recommendation, not a directive about that tool.
_DIRECTIVE = re.compile(
    r"\b(?:must|always|whenever|make\s+sure|all\s+(?:emails|messages|calls|requests|files))\b", re.I
)
# A tool of another server the sentence names as a tool ("the send_email tool must ...", "when
# send_message is invoked, make sure ..."): only names with an underscore, so "the search tool"
# is not one.
_NAMED_TOOL = re.compile(
    r"\b(?:the\s+)?`?([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)`?"
    r"\s+(?:tool\b|is\s+(?:invoked|called|used|run)\b)"
)
_RECOMMENDS = re.compile(r"\b(?:use|call|see|try|run|prefer|invoke)\s+(?:the\s+)?`?([\w.-]+)", re.I)
# A sentence ends at ., ! or ? before a space (not inside ~/.ssh or mcp.json) or at a line break.
_BOUNDARY = re.compile(r"[.!?](?=\s|$)|\n")
_TEXT_KEYS = ("description", "title")
MAX_QUOTE = 60
MAX_NAME = 128  # MCP's own limit on a tool name
MAX_SECRETS = 100  # secrets named in one text that are looked at
SECRET_REACH = 300  # characters either side of a secret that a moving verb may stand in


def check_instructions(tool: dict, name: str, others: frozenset[str] = frozenset()) -> list[Finding]:
    """SL008 for one tool; `others` are the names of the other tools of its list (shadowing)."""
    found: list[Finding] = []
    for path, text in texts(tool):
        seen: set[str] = set()
        for severity, what in problems(text, others, name):
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


def problems(text: str, others: frozenset[str], name: str = "") -> Iterator[tuple[str, str]]:
    """(severity, message) for each move `text` makes on the model, most serious first; `others`
    are the tool names of its list, `name` the tool's own."""
    hidden = hidden_text(text)
    if hidden:
        yield "high", hidden
    for pattern, what in ((_CONCEALMENT, "tells the model to keep something from the user"),
                          (_OVERRIDE, "tells the model to set aside its other instructions")):  # fmt: skip
        match = pattern.search(text)
        if match:
            yield "high", f"{what}: {quote(match.group(0))}"
    moved = _moved_secret(text)
    if moved:
        yield "high", f"asks for a secret's contents: {quote(moved.strip())}"
    else:
        secret = _SECRET.search(text)
        if secret:
            yield "medium", f"names a secret's location: {quote(secret.group(0))}"
    for pattern, what in ((_MARKUP, "markup addressed to the model"),
                          (_PRIOR_GUIDANCE, "speaks of what the model was told before")):  # fmt: skip
        match = pattern.search(text)
        if match:
            yield "medium", f"{what}: {quote(match.group(0))}"
    shadowed = _shadowing(text, others, name)
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
        char = mark.group(0)[0]
        label = unicodedata.name(char, f"U+{ord(char):04X}")
        if len(mark.group(0)) > 1:
            return f"a run of invisible characters ({label}, ...) that can carry text a model reads"
        return f"an invisible character ({label}) that a person does not see and a model reads"
    return None


def _moved_secret(text: str) -> str | None:
    """The sentence that moves a secret (its path or what it is) into an argument, or None. Only
    the text near each of the first secrets named is read, so a megabyte sentence costs little."""
    for pattern in (_SECRET, _SECRET_WORD):
        for count, match in enumerate(pattern.finditer(text)):
            if count == MAX_SECRETS:
                break
            start = max(0, match.start() - SECRET_REACH)
            window = text[start : match.end() + SECRET_REACH]
            at, end_at = match.start() - start, match.end() - start
            breaks = [b.end() for b in _BOUNDARY.finditer(window, 0, at)]
            end = _BOUNDARY.search(window, at)
            sentence_start = breaks[-1] if breaks else 0
            sentence = window[sentence_start : end.start() if end else len(window)]
            if pattern is _SECRET:
                moved = _MOVES.search(sentence)
            else:
                after = window[end_at : end.start() if end else len(window)]
                moved = _MOVED_BEFORE.search(window[sentence_start:at]) and _MOVED_AFTER.match(after)
            if moved:
                return sentence
    return None


def _shadowing(text: str, others: frozenset[str], name: str) -> str | None:
    for sentence in sentences(text):
        if not _DIRECTIVE.search(sentence):
            continue
        words = set(re.findall(r"[\w.-]+", sentence)) | set(re.findall(r"[\w-]+", sentence))
        # A namespaced name (mcp_tool_send_email, mcp__gmail__send_email, gmail.send_email) is the
        # same tool on a client that prefixes its servers' tools; include_search is not `search`.
        suffixes = {
            w[i + 1 :]
            for w in words
            if len(w) <= MAX_NAME and (w.lower().startswith("mcp_") or "__" in w or "." in w)
            for i, c in enumerate(w)
            if c in "_."
        }
        candidates = ((words | suffixes) & others) | {m[1] for m in _NAMED_TOOL.finditer(sentence)}
        recommended = {m[1].rstrip(".") for m in _RECOMMENDS.finditer(sentence)}
        named = sorted(candidates - recommended - {name})
        if named:
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


def quote(text: str) -> str:
    """`text` in quotes, cut to MAX_QUOTE characters (the output escapes what is left)."""
    text = " ".join(text.split())
    return repr(text if len(text) <= MAX_QUOTE else text[: MAX_QUOTE - 1] + "…")
