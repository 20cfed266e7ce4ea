"""speclint: a static spec check for MCP tools, before any agent calls them.

    python -m speclint [--format text|json|sarif] [--fail-on LEVEL] [--engines] TARGET
    python -m speclint [options] -- COMMAND [ARG ...]

TARGET is an MCP endpoint URL (Streamable HTTP: ``initialize``, ``notifications/initialized``, every
``tools/list`` page; ``--header`` adds request headers), a JSON file holding a ``tools/list`` result
(or a bare list, or a JSON-RPC response with one), or ``-`` for standard input. After ``--``, a
command that starts a stdio server (``speclint.stdio``).

Rules (the rule's severity; a finding may be lower, as noted):

SL001 mutating-without-idempotency-key [high]: a tool declared mutating (hints set, readOnlyHint not
    true) or, without hints, inferred mutating from its words (``speclint.words``), that is
    not idempotentHint and takes no key named as in ``IDEMPOTENCY_KEY_NAMES``. High when its words
    say each call adds another effect, medium when they say nothing either way, none when they
    say a repeat is harmless.
SL002 annotations-missing-or-contradicting [medium]: no behaviour hints; readOnlyHint true on a tool
    whose name or description uses a mutating verb; idempotentHint true with an optional key.
SL003 unbounded-input [medium]: strings without maxLength (or enum/const, or an anchored pattern
    with bounded repeats), arrays without maxItems, open objects; numbers without a minimum or
    maximum at low.
SL004 local-model-incompatible-schema [high]: what llguidance, outlines-core or llama.cpp's
    converter rejects (high) or silently weakens (medium), from ``speclint.engines``'s
    built-in rules or, with ``--engines``, the installed engines themselves.
SL005 undisclosed-side-effects [low]: a mutating tool whose description uses none of
    ``SIDE_EFFECT_WORDS``; a tool without outputSchema.
SL006 invalid-or-unsatisfiable-schema [high]: a tool name outside ``TOOL_NAME_PATTERN``, no input
    schema or a root that is not an object, an unknown type, bounds no value meets, a required
    property that may not be given, a pattern invalid in ECMA-262 (or only in Python: medium), a
    parameter without a type (medium). Where SL004 points at the same place, one SL006 finding.
SL007 unconstrained-sensitive-string [medium]: a string parameter named or described as a path,
    URL or command with no pattern, enum or const.

Output: text, ``--format json`` or ``--format sarif`` (2.1.0). Exit status: 0 when nothing is at or
above ``--fail-on`` (default high), 1 when something is, 2 when the target could not be read (one
line on stderr). docs/speclint.md has the tables, the measurements and the peers.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from speclint import engines as oracle
from speclint import patterns, words

__version__ = "0.1.0"

PROTOCOL_VERSION = "2025-06-18"
TIMEOUT_SECONDS = 30
MAX_PAGES = 1000
SEVERITIES = ("info", "low", "medium", "high")
RANK = {name: rank for rank, name in enumerate(SEVERITIES)}
SARIF_LEVEL = {"high": "error", "medium": "warning", "low": "note", "info": "note"}
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

# Root input-schema property names that count as an idempotency key (compared case-insensitively).
IDEMPOTENCY_KEY_NAMES = (
    "idempotency_key",
    "idempotencyKey",
    "idempotency-key",
    "request_id",
    "requestId",
    "client_request_id",
    "dedupe_key",
    "dedup_key",
)
_KEY_NAMES = frozenset(name.casefold() for name in IDEMPOTENCY_KEY_NAMES)

# SL005: words that say what a call changes in the world (any one is enough).
SIDE_EFFECT_WORDS = (
    "side effect",
    "side effects",
    "side-effect",
    "side-effects",
    "send", "sends", "sent",
    "create", "creates", "created",
    "update", "updates", "updated",
    "delete", "deletes", "deleted",
    "remove", "removes", "removed",
    "write", "writes", "written",
    "charge", "charges", "charged",
    "pay", "pays", "paid",
    "buy", "buys", "bought",
    "purchase", "purchases", "purchased",
    "email", "emails", "emailed",
    "store", "stores", "stored",
    "save", "saves", "saved",
    "change", "changes", "changed",
    "modify", "modifies", "modified",
    "post", "posts", "posted",
    "publish", "publishes", "published",
    "insert", "inserts", "inserted",
    "upload", "uploads", "uploaded",
    "transfer", "transfers", "transferred",
    "cancel", "cancels", "cancelled", "canceled",
    "notify", "notifies", "notified",
    "overwrite", "overwrites", "overwritten",
    "add", "adds", "added",
    "append", "appends", "appended",
    "push", "pushes", "pushed",
    "move", "moves", "moved",
    "rename", "renames", "renamed",
    "switch", "switches", "switched",
    "merge", "merges", "merged",
    "fork", "forks", "forked",
    "commit", "commits", "committed",
    "reset", "resets",
    "stage", "stages", "staged", "unstage", "unstages", "unstaged",
    "edit", "edits", "edited",
    "replace", "replaces", "replaced",
    "toggle", "toggles", "toggled",
    "reply", "replies", "replied",
    "execute", "executes", "executed",
    "set", "sets",
    "register", "registers", "registered",
    "archive", "archives", "archived",
    "close", "closes", "closed",
    "enable", "enables", "enabled", "disable", "disables", "disabled",
)  # fmt: skip

TOOL_NAME_PATTERN = "^[a-zA-Z0-9_-]{1,64}$"
_TOOL_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
HINT_KEYS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_SIDE_EFFECT_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(w) for w in SIDE_EFFECT_WORDS) + r")\b", re.IGNORECASE
)

# Keywords whose value is one schema, a list of schemas, or a name -> schema map.
SCHEMA_KEYWORDS = (
    "items",
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
)
NUMBER_BOUNDS = (("minimum", ("minimum", "exclusiveMinimum")), ("maximum", ("maximum", "exclusiveMaximum")))
SCHEMA_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")


@dataclass(frozen=True)
class Rule:
    id: str
    slug: str
    severity: str
    title: str
    rationale: str
    fix: str


RULES = (
    Rule(
        "SL001",
        "mutating-without-idempotency-key",
        "high",
        "Mutating tool without an idempotency key",
        "Agents retry on timeouts and errors; without a key to deduplicate on, every retry repeats "
        "the tool's effects (a second email, a second charge).",
        "Add an optional, bounded string property such as idempotency_key that the server "
        "deduplicates on, and tell callers to reuse it on retries; or mark the tool "
        "readOnlyHint/idempotentHint if repeating a call really changes nothing.",
    ),
    Rule(
        "SL002",
        "annotations-missing-or-contradicting",
        "medium",
        "Annotations missing or contradicting the schema",
        "Clients decide whether to confirm, retry or auto-run a tool from its annotations; missing "
        "hints default to the worst case and wrong hints mislead them.",
        "Declare readOnlyHint, destructiveHint, idempotentHint and openWorldHint truthfully: not "
        "read-only if the tool changes anything, idempotent only if every call is.",
    ),
    Rule(
        "SL003",
        "unbounded-input",
        "medium",
        "Unbounded input",
        "Inputs without length, item or property limits mean unbounded cost per call and unlimited "
        "room for prompt injection.",
        "Give every string a maxLength (or an enum/const), every array a maxItems, and every object "
        "additionalProperties: false.",
    ),
    Rule(
        "SL004",
        "local-model-incompatible-schema",
        "high",
        "Schema that local-model runtimes reject",
        "Grammar-based local-model runtimes compile the input schema to a grammar and reject (or "
        "silently mishandle) these constructs, so local agents cannot call the tool.",
        "Use a root type: object with properties, anchored ^...$ patterns with explicit classes "
        "([0-9], not \\d), no format, $ref, $defs or $schema, no boolean sub-schemas, and a tool "
        "name matching ^[a-zA-Z0-9_-]{1,64}$.",
    ),
    Rule(
        "SL005",
        "undisclosed-side-effects",
        "low",
        "Undisclosed side effects",
        "An agent, and the human approving its call, should learn from the description what a "
        "call changes, and be able to validate what it returns.",
        "Say in the description what the tool changes (sends, creates, updates, deletes, charges, "
        "...) and publish an outputSchema for its structured results.",
    ),
    Rule(
        "SL006",
        "invalid-or-unsatisfiable-schema",
        "high",
        "Schema that clients cannot use or no call can satisfy",
        "A pattern one side cannot compile, an unknown type, bounds that exclude every value or a "
        "required property that may not be given break every call; a parameter without a type "
        "leaves callers guessing.",
        "Use ECMA-262 patterns that Python also compiles, JSON Schema types, bounds that leave "
        "values, and a type on every parameter.",
    ),
    Rule(
        "SL007",
        "unconstrained-sensitive-string",
        "medium",
        "Path, URL or command parameter without constraints",
        "A string that names a file, a URL or a command reaches the filesystem, the network or an "
        "interpreter: unconstrained, a hostile or confused caller reaches anything the server can.",
        "Constrain it with an anchored pattern or an enum and enforce the same on the server.",
    ),
)

RULE_BY_ID = {rule.id: rule for rule in RULES}


@dataclass(frozen=True)
class Finding:
    rule_id: str
    tool: str
    path: str
    message: str
    fix: str
    level: str | None = None  # this finding's severity when it differs from the rule's

    @property
    def rule(self) -> Rule:
        return RULE_BY_ID[self.rule_id]

    @property
    def severity(self) -> str:
        return self.level or self.rule.severity

    def as_dict(self) -> dict:
        return {
            "rule_id": self.rule_id,
            "rule": self.rule.slug,
            "severity": self.severity,
            "tool": self.tool,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
        }


class Unreadable(Exception):
    """The target could not be fetched or is not a tools list."""


# ---------------------------------------------------------------- schema helpers


def pointer(*parts: object) -> str:
    """A JSON Pointer from path segments (RFC 6901 escaping)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def walk(schema: object, path: str, keyword: str | None = None) -> Iterator[tuple[str, object, str | None]]:
    """Every schema in `schema`, itself first, as (JSON Pointer, schema, keyword it hangs from)."""
    yield path, schema, keyword
    if not isinstance(schema, dict):
        return
    for kw in SCHEMA_KEYWORDS:
        if kw not in schema:
            continue
        value = schema[kw]
        if kw == "items" and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from walk(sub, path + pointer(kw, i), kw)
        else:
            yield from walk(value, path + pointer(kw), kw)
    for kw in SCHEMA_LIST_KEYWORDS:
        if isinstance(schema.get(kw), list):
            for i, sub in enumerate(schema[kw]):
                yield from walk(sub, path + pointer(kw, i), kw)
    for kw in SCHEMA_MAP_KEYWORDS:
        if isinstance(schema.get(kw), dict):
            for name, sub in schema[kw].items():
                yield from walk(sub, path + pointer(kw, name), kw)


schema_types = oracle.declared_types


def annotations(tool: dict) -> dict:
    hints = tool.get("annotations")
    return hints if isinstance(hints, dict) else {}


def root_schema(tool: dict) -> dict:
    schema = tool.get("inputSchema")
    return schema if isinstance(schema, dict) else {}


def idempotency_keys(tool: dict) -> list[str]:
    """The root input properties whose names mark them as idempotency keys."""
    properties = root_schema(tool).get("properties")
    if not isinstance(properties, dict):
        return []
    return [name for name in properties if isinstance(name, str) and name.casefold() in _KEY_NAMES]


def text(tool: dict, key: str) -> str:
    value = tool.get(key)
    return value if isinstance(value, str) else ""


def declares_behaviour(tool: dict) -> bool:
    """Whether the tool's annotations set any of the four behaviour hints."""
    return any(key in annotations(tool) for key in HINT_KEYS)


def mutation(tool: dict) -> tuple[str, words.Inference]:
    """How the tool is known to mutate: ("declared" | "inferred" | "", inference from its words).

    Declared: annotations set a hint and readOnlyHint is not true. Inferred: no hints, and the
    name (or else the description) uses a mutating verb. "" when it is read-only or unknown."""
    inference = words.infer(text(tool, "name"), text(tool, "description"))
    if declares_behaviour(tool):
        if annotations(tool).get("readOnlyHint") is True:
            return "", inference
        retry, evidence = words.retry_of(text(tool, "name"), text(tool, "description"))
        return "declared", words.Inference("mutates", retry, evidence)
    return ("inferred" if inference.effect == "mutates" else ""), inference


# ---------------------------------------------------------------- rules


def check_idempotency_key(tool: dict, name: str) -> list[Finding]:
    """SL001: a declared or inferred mutating tool, not retry-safe, that takes no idempotency key.

    High when its words say every call adds another effect (post, send, create_issue, ...);
    medium when they say nothing either way; nothing when they say a repeat is harmless
    (update, delete, create_branch, ...) or it declares idempotentHint: true."""
    how, inference = mutation(tool)
    if not how or annotations(tool).get("idempotentHint") is True or idempotency_keys(tool):
        return []
    if inference.retry == "safe":
        return []
    has_properties = isinstance(root_schema(tool).get("properties"), dict)
    path = "/inputSchema/properties" if has_properties else "/inputSchema"
    what = "declared neither read-only nor idempotent" if how == "declared" else "no annotations"
    if inference.retry == "unsafe":
        level = "high"
        why = f"{what}, and {inference.evidence} says each call adds another effect"
    else:
        level = "medium"
        why = f"{what}; it mutates ({inference.evidence}) and nothing says a repeat is harmless"
    return [
        Finding(
            "SL001",
            name,
            path,
            f"{why}; with no idempotency key (idempotency_key, request_id, ...) a retrying agent "
            "repeats the effect",
            'add an optional string property "idempotency_key" (maxLength 128, anchored pattern) '
            "that the server deduplicates on, and tell callers to reuse it when they retry; or "
            "declare idempotentHint: true if a repeat really changes nothing",
            level,
        )
    ]


def check_annotations(tool: dict, name: str) -> list[Finding]:
    """SL002: annotations missing, or contradicting what the name, description or schema say."""
    found = []
    raw = tool.get("annotations")
    if not isinstance(raw, dict):
        found.append(
            Finding(
                "SL002",
                name,
                "/annotations",
                "the tool has no annotations: clients must assume it is destructive, "
                "non-idempotent and open-world",
                "add annotations with readOnlyHint, destructiveHint, idempotentHint and "
                "openWorldHint set to what the tool really does",
            )
        )
    elif not any(key in raw for key in HINT_KEYS):
        found.append(
            Finding(
                "SL002",
                name,
                "/annotations",
                "annotations set none of readOnlyHint, destructiveHint, idempotentHint, openWorldHint",
                "set the four behaviour hints to what the tool really does",
            )
        )
    hints = annotations(tool)
    if hints.get("readOnlyHint") is True:
        verb = words.name_verb(words.words(text(tool, "name")))
        where = "name"
        if verb not in words.CONTRADICTING_VERBS:
            said = words.verbs_in_text(text(tool, "description"), words.CONTRADICTING_VERBS)
            verb, where = (said[0], "description") if said else (None, "")
        if verb is not None:
            found.append(
                Finding(
                    "SL002",
                    name,
                    "/annotations/readOnlyHint",
                    f"readOnlyHint is true but the tool's {where} says it changes something ({verb!r})",
                    "set readOnlyHint to false (and add an idempotency key), or reword the "
                    f"{where} if the tool really only reads",
                )
            )
    if hints.get("idempotentHint") is True:
        required = root_schema(tool).get("required")
        required = required if isinstance(required, list) else []
        optional = [key for key in idempotency_keys(tool) if key not in required]
        if optional:
            found.append(
                Finding(
                    "SL002",
                    name,
                    "/annotations/idempotentHint",
                    f"idempotentHint is true but the idempotency key {optional[0]!r} is optional: "
                    "a call without it is not idempotent, so the hint overstates",
                    f"add {optional[0]!r} to inputSchema.required, or set idempotentHint to false",
                )
            )
    return found


def check_bounds(tool: dict, name: str) -> list[Finding]:
    """SL003: strings without maxLength, arrays without maxItems, objects left open."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return []
    found = []
    for path, node, _ in walk(schema, "/inputSchema"):
        if not isinstance(node, dict):
            continue
        types = schema_types(node)
        bounded_values = "enum" in node or "const" in node
        bounded_pattern = patterns.bounds_length(node.get("pattern"))
        if "string" in types and "maxLength" not in node and not bounded_values and not bounded_pattern:
            found.append(
                Finding(
                    "SL003",
                    name,
                    path,
                    "string without maxLength: any length reaches the tool",
                    "add maxLength, an enum/const if the values are known, or an anchored pattern "
                    "whose repeats are bounded (^[a-z0-9]{1,64}$; outlines-core keeps a pattern only "
                    "without minLength/maxLength beside it)",
                )
            )
        if "array" in types and "maxItems" not in node and not bounded_values:
            found.append(
                Finding(
                    "SL003",
                    name,
                    path,
                    "array without maxItems: any number of items reaches the tool",
                    "add maxItems",
                )
            )
        numeric = types & {"number", "integer"}
        if numeric and not bounded_values:
            open_sides = [side for side, keys in NUMBER_BOUNDS if not any(key in node for key in keys)]
            if open_sides:
                found.append(
                    Finding(
                        "SL003",
                        name,
                        path,
                        f"{sorted(numeric)[0]} without a {' or '.join(open_sides)}: any size reaches "
                        "the tool (a page size of 10^9, a negative count)",
                        f"add {' and '.join(open_sides)} (or an enum if the values are known)",
                        "low",
                    )
                )
        is_object = "object" in types or (not types and isinstance(node.get("properties"), dict))
        if is_object and node.get("additionalProperties") is not False:
            found.append(
                Finding(
                    "SL003",
                    name,
                    path,
                    "open object: additionalProperties is not false, so any extra field reaches the tool",
                    "set additionalProperties: false and list every accepted property",
                )
            )
    return found


def check_local_models(tool: dict, name: str, engines: bool = False) -> list[Finding]:
    """SL004: what an engine local runtimes constrain generation with rejects (high) or silently
    weakens (medium) in the input schema. Built-in rules mirror the engines' measured verdicts;
    with `engines`, the installed engines compile the schema and speak for themselves."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return []
    problems = oracle.engine_problems(schema) if engines else oracle.builtin_problems(schema)
    return [
        Finding(
            "SL004",
            name,
            problem.path,
            problem.message,
            problem.fix,
            "high" if problem.impact == oracle.REJECTED else "medium",
        )
        for problem in problems
    ]


def check_side_effects(tool: dict, name: str) -> list[Finding]:
    """SL005: a mutating tool that does not say what it changes; a tool without outputSchema."""
    found = []
    if mutation(tool)[0]:
        description = tool.get("description")
        if not isinstance(description, str) or not _SIDE_EFFECT_RE.search(description):
            found.append(
                Finding(
                    "SL005",
                    name,
                    "/description",
                    "the tool may change things (not readOnlyHint) but its description does not "
                    "say what it changes",
                    "state the side effects in the description (e.g. 'Side effects: sends one "
                    "email and creates a contact'), or mark it readOnlyHint if it changes nothing",
                )
            )
    if not isinstance(tool.get("outputSchema"), dict):
        found.append(
            Finding(
                "SL005",
                name,
                "/outputSchema",
                "the tool has no outputSchema: clients cannot validate its structured results",
                "publish an outputSchema describing structuredContent",
            )
        )
    return found


JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
# (lower bound, upper bound): a schema with lower > upper accepts nothing.
BOUND_PAIRS = (
    ("minLength", "maxLength"),
    ("minItems", "maxItems"),
    ("minProperties", "maxProperties"),
    ("minContains", "maxContains"),
)
COUNT_KEYWORDS = tuple(k for pair in BOUND_PAIRS for k in pair)
# Keywords that give a value its shape without "type".
SHAPED_BY = ("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "not", "if")
# Where a sub-schema is one parameter (or one element of one), as opposed to a composition part.
PARAMETER_KEYWORDS = ("properties", "items", "prefixItems", "additionalProperties", "patternProperties")


def _unsatisfiable(node: dict) -> list[tuple[str, str]]:
    """(keyword, why) for each pair of bounds in `node` that no value can meet."""
    problems = []
    for low, high in BOUND_PAIRS:
        a, b = node.get(low), node.get(high)
        if _is_number(a) and _is_number(b) and a > b:
            problems.append((low, f"{low} {a} > {high} {b}"))
    mins = [(k, node[k]) for k in ("minimum", "exclusiveMinimum") if _is_number(node.get(k))]
    maxs = [(k, node[k]) for k in ("maximum", "exclusiveMaximum") if _is_number(node.get(k))]
    for low, a in mins:
        for high, b in maxs:
            inclusive = low == "minimum" and high == "maximum"
            if a > b or (a == b and not inclusive):
                problems.append((low, f"{low} {a} and {high} {b} leave no number"))
    if node.get("enum") == []:
        problems.append(("enum", "an empty enum"))
    return problems


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_schema_validity(tool: dict, name: str) -> list[Finding]:
    """SL006: a schema that clients or servers cannot use, or that no call can satisfy."""
    found = []

    def add(path: str, message: str, fix: str, level: str | None = None) -> None:
        found.append(Finding("SL006", name, path, message, fix, level))

    tool_name = tool.get("name")
    if not (isinstance(tool_name, str) and _TOOL_NAME_RE.fullmatch(tool_name)):
        add(
            "/name",
            f"tool name {tool_name!r} does not match {TOOL_NAME_PATTERN}: clients such as Claude refuse it",
            "rename the tool to 1-64 characters of letters, digits, _ and -",
        )
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        add(
            "/inputSchema",
            "inputSchema is missing or not a JSON object: MCP requires one",
            'give the tool an inputSchema {"type": "object", "properties": {...}}',
        )
        return found
    if schema.get("type") != "object":
        add(
            "/inputSchema/type",
            f"the input schema's root type is {schema.get('type')!r}, not 'object': MCP requires "
            "an object, and the MCP Python SDK refuses the whole tools/list",
            'make the root {"type": "object"} and wrap other values in a property',
        )
    for path, node, keyword in walk(schema, "/inputSchema"):
        if isinstance(node, bool):
            if node is True and keyword in PARAMETER_KEYWORDS and keyword != "additionalProperties":
                add(
                    path,
                    "parameter schema true: any value of any type",
                    "give it a type and bounds",
                    "medium",
                )
            continue
        if not isinstance(node, dict):
            add(path, "sub-schema is neither an object nor a boolean", "replace it with an object schema")
            continue
        declared = node.get("type")
        listed = declared if isinstance(declared, list) else [declared]
        unknown = [t for t in listed if t is not None and t not in JSON_TYPES]
        if unknown:
            add(
                path + "/type",
                f"type {unknown[0]!r} is not a JSON Schema type: validators refuse the whole schema",
                f"use one of {', '.join(sorted(JSON_TYPES))}",
            )
        elif (
            keyword in PARAMETER_KEYWORDS and path != "/inputSchema" and not any(k in node for k in SHAPED_BY)
        ):
            add(
                path,
                "parameter without a type: callers and local runtimes cannot tell what to send",
                "add a type (and bounds)",
                "medium",
            )
        for key in COUNT_KEYWORDS:
            value = node.get(key)
            if key in node and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                add(path + pointer(key), f"{key} {value!r} is not a non-negative integer", f"fix {key}")
        for key, why in _unsatisfiable(node):
            add(path + pointer(key), f"unsatisfiable bounds: {why}, so no call is valid", "fix the bounds")
        required = node.get("required")
        properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        closed = node.get("additionalProperties") is False and not node.get("patternProperties")
        if isinstance(required, list) and closed:
            missing = [r for r in required if isinstance(r, str) and r not in properties]
            if missing:
                add(
                    path + "/required",
                    f"required property {missing[0]!r} is not among the properties and no other is "
                    "allowed, so no call is valid",
                    f"add {missing[0]!r} to properties, or drop it from required",
                )
        if "pattern" in node:
            found.extend(_pattern_findings(node["pattern"], path + "/pattern", name))
    return found


def _pattern_findings(pattern: object, path: str, name: str) -> list[Finding]:
    if not isinstance(pattern, str):
        return [Finding("SL006", name, path, "pattern is not a string", "make it a string")]
    ecma = patterns.ecma_error(pattern)
    if ecma is not None:
        return [
            Finding(
                "SL006",
                name,
                path,
                f"pattern {pattern!r} is not an ECMA-262 regular expression ({ecma}): clients that "
                "validate arguments (Ajv, with the u flag) cannot compile the schema",
                "rewrite it in ECMA-262 syntax: (?<name>...) not (?P<name>...), no inline flags, "
                "escape only syntax characters, no possessive quantifiers or atomic groups",
            )
        ]
    python = patterns.python_error(pattern)
    if python is not None:
        return [
            Finding(
                "SL006",
                name,
                path,
                f"pattern {pattern!r} does not compile in Python ({python}): a Python server "
                "validating with jsonschema fails every call",
                "use syntax both dialects share (spell classes out instead of \\p{...}, "
                "(?P<name>...) is Python-only and (?<name>...) JavaScript-only: avoid named groups)",
                "medium",
            )
        ]
    return []


# SL007: what a string parameter's name or description says it carries, and why that is risky.
SENSITIVE = (
    (
        "filesystem path",
        frozenset(
            {"path", "paths", "filepath", "filename", "file", "files", "dir", "directory", "folder", "cwd"}
        ),
        re.compile(r"\b(?:file ?paths?|paths? to|directory|folder)\b", re.IGNORECASE),
        "a caller can name any path the server can reach (../../etc/passwd, ~/.ssh)",
    ),
    (
        "URL",
        frozenset(
            {"url", "urls", "uri", "link", "href", "endpoint", "webhook", "host", "hostname", "callback"}
        ),
        re.compile(r"\bUR[LI]s?\b"),
        "a caller can point the server at any host, internal ones included (SSRF)",
    ),
    (
        "command or code",
        frozenset(
            {"command", "cmd", "shell", "script", "exec", "sql", "statement", "code", "expression", "eval"}
        ),
        re.compile(r"\b(?:shell|command line|SQL|(?:script|code|command)s? to (?:run|execute))\b"),
        "a caller can run anything the server's interpreter can (injection)",
    ),
)


FILE_WORDS = frozenset({"file", "files", "directory", "directories", "dir", "folder", "path", "paths"})
MOVE_WORDS = frozenset({"source", "destination", "dest", "src", "from", "to"})
URL_FORMATS = ("uri", "url", "iri", "hostname")


def check_sensitive_strings(tool: dict, name: str) -> list[Finding]:
    """SL007: a string parameter named or described as a path, URL or command, left unconstrained.

    A string that is the items of an array property is judged by the array's name and
    description too (`paths: [...]`); `source` and `destination` count as paths in a tool whose
    name is about files (move_file)."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return []
    about_files = bool(set(words.words(text(tool, "name"))) & FILE_WORDS)
    found = []
    parents: dict[str, tuple[str, str]] = {}  # array property path -> (its name, its description)
    for path, node, keyword in walk(schema, "/inputSchema"):
        if not isinstance(node, dict):
            continue
        description = node.get("description") if isinstance(node.get("description"), str) else ""
        if keyword == "properties":
            parameter = path.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
            parents[path] = (parameter, description)
        elif keyword == "items" and path.endswith("/items") and path[: -len("/items")] in parents:
            parameter, outer = parents[path[: -len("/items")]]
            description = f"{description} {outer}"
        else:
            continue
        if "string" not in schema_types(node) or any(key in node for key in ("enum", "const", "pattern")):
            continue
        named = set(words.words(parameter))
        for kind, names, described, risk in SENSITIVE:
            fmt = node.get("format") if kind == "URL" else None
            moved = kind == "filesystem path" and about_files and named & MOVE_WORDS
            if named & names or described.search(description) or fmt in URL_FORMATS or moved:
                found.append(
                    Finding(
                        "SL007",
                        name,
                        path,
                        f"string parameter {parameter!r} takes a {kind} with no pattern or enum: {risk}",
                        "constrain it with an anchored pattern or an enum (an allowed prefix, no '..', "
                        "https only, ...) and enforce the same on the server",
                    )
                )
                break
    return found


CHECKS: tuple[Callable[[dict, str], list[Finding]], ...] = (
    check_idempotency_key,
    check_annotations,
    check_bounds,
    check_local_models,
    check_side_effects,
    check_schema_validity,
    check_sensitive_strings,
)


def lint(tools: list[dict], engines: bool = False) -> list[Finding]:
    """Every finding for every tool, in tool order, then rule order. With `engines`, SL004
    compiles each input schema with the installed engines instead of mirroring them."""
    checks = [
        functools.partial(check, engines=True) if engines and check is check_local_models else check
        for check in CHECKS
    ]
    findings = []
    for index, tool in enumerate(tools):
        name = tool.get("name")
        label = name if isinstance(name, str) and name else f"<tool #{index}>"
        found = [finding for check in checks for finding in check(tool, label)]
        findings.extend(merge_schema_findings(found))
    return findings


def merge_schema_findings(found: list[Finding]) -> list[Finding]:
    """One finding per root cause: where SL006 (the schema is invalid or unsatisfiable) and SL004
    (an engine rejects it) point at the same place, keep SL006, at the higher of the two
    severities, and say what the engines do in its message."""
    engines_at = {f.path: f for f in found if f.rule_id == "SL004"}
    merged = []
    taken = set()
    for f in found:
        other = engines_at.get(f.path) if f.rule_id == "SL006" else None
        if other is not None and f.path not in taken:
            taken.add(f.path)
            level = max(f.severity, other.severity, key=RANK.__getitem__)
            f = Finding(f.rule_id, f.tool, f.path, f"{f.message}; {other.message}", f.fix, level)
        merged.append(f)
    return [f for f in merged if not (f.rule_id == "SL004" and f.path in taken)]


def fails(findings: list[Finding], fail_on: str) -> bool:
    if fail_on == "never":
        return False
    return any(RANK[f.severity] >= RANK[fail_on] for f in findings)


# ---------------------------------------------------------------- reading the target


def tools_from(document: object, source: str) -> list[dict]:
    """The tools of a tools/list result, a bare list, or a JSON-RPC response carrying one."""
    if (
        isinstance(document, dict)
        and "tools" not in document
        and ("result" in document or "error" in document)
    ):
        if "error" in document:
            raise Unreadable(f"{source} holds a JSON-RPC error: {rpc_error_text(document['error'])}")
        document = document["result"]
    if isinstance(document, dict) and "tools" in document:
        tools = document["tools"]
    elif isinstance(document, list):
        tools = document
    else:
        raise Unreadable(
            f'{source} is not a tools/list result (expected {{"tools": [...]}}, a list of tools '
            "or a JSON-RPC response with one)"
        )
    if not isinstance(tools, list) or not all(isinstance(t, dict) and "name" in t for t in tools):
        raise Unreadable(f"{source} is not a tools list: every tool must be a JSON object with a name")
    return tools


def all_pages(request: Callable[[str, dict], dict], source: str) -> list[dict]:
    """Every tool of `tools/list`, following `nextCursor` for at most `MAX_PAGES` pages."""
    tools: list[dict] = []
    seen: set[str] = set()
    params: dict = {}
    while True:
        result = request("tools/list", params)
        tools.extend(tools_from(result, source))
        cursor = result.get("nextCursor")
        if cursor is None or cursor == "":
            return tools
        if not isinstance(cursor, str):
            raise Unreadable(f"{source}: nextCursor is not a string")
        if cursor in seen:
            raise Unreadable(f"{source}: pagination does not end (cursor {one_line(repr(cursor), 80)} again)")
        if len(seen) + 1 >= MAX_PAGES:
            raise Unreadable(f"{source}: pagination does not end (more than {MAX_PAGES} pages)")
        seen.add(cursor)
        params = {"cursor": cursor}


def rpc_error_text(error: object) -> str:
    if isinstance(error, dict):
        return one_line(f"{error.get('code')} {error.get('message')}")
    return one_line(repr(error))


def one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def parse_json(data: bytes | str, source: str) -> object:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"{source} is not JSON ({one_line(str(exc), 120)})") from None


def read_target(target: str, headers: dict[str, str], timeout: float) -> list[dict]:
    if target == "-":
        return tools_from(parse_json(sys.stdin.buffer.read(), "standard input"), "standard input")
    if target.startswith(("http://", "https://")):
        return McpClient(target, headers, timeout).list_tools()
    try:
        data = Path(target).read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read {target}: {exc.strerror or exc}") from None
    return tools_from(parse_json(data, target), target)


class McpClient:
    """Just enough of a Streamable HTTP MCP client to list tools."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float):
        self.url = url
        self.timeout = timeout
        self.http = requests.Session()
        self.http.headers.update(
            {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "User-Agent": f"speclint/{__version__}",
                **headers,
            }
        )
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.next_id = 0

    def list_tools(self) -> list[dict]:
        try:
            initialized = self.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "speclint", "version": __version__},
                },
            )
            if isinstance(initialized.get("protocolVersion"), str):
                self.protocol_version = initialized["protocolVersion"]
            self.notify("notifications/initialized")
            return all_pages(self.request, f"tools/list from {self.url}")
        finally:
            self.close()

    def close(self) -> None:
        if self.session_id is not None:
            # The spec asks clients to end a session they no longer need; best effort.
            with contextlib.suppress(requests.RequestException):
                self.http.delete(self.url, headers=self._headers(), timeout=self.timeout)
        self.http.close()

    def _headers(self) -> dict[str, str]:
        headers = {}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _post(self, message: dict) -> requests.Response:
        try:
            return self.http.post(
                self.url, data=json.dumps(message), headers=self._headers(), timeout=self.timeout, stream=True
            )
        except requests.RequestException as exc:
            raise Unreadable(f"cannot reach {self.url} ({message['method']}): {type(exc).__name__}") from None

    def notify(self, method: str) -> None:
        response = self._post({"jsonrpc": "2.0", "method": method})
        response.close()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        request_id = self.next_id
        response = self._post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            if response.headers.get("Mcp-Session-Id"):
                self.session_id = response.headers["Mcp-Session-Id"]
            message = self._message(response, request_id, method)
        finally:
            response.close()
        status = response.status_code
        error = message.get("error") if isinstance(message, dict) else None
        if status // 100 != 2:
            detail = f" (JSON-RPC error {rpc_error_text(error)})" if error is not None else ""
            raise Unreadable(f"{method} failed at {self.url}: HTTP {status}{detail}")
        if error is not None:
            raise Unreadable(f"{method} failed at {self.url}: JSON-RPC error {rpc_error_text(error)}")
        if not isinstance(message, dict) or message.get("id") != request_id:
            raise Unreadable(
                f"{method} answer from {self.url} is not the JSON-RPC response to request {request_id}"
            )
        if not isinstance(message.get("result"), dict):
            raise Unreadable(f"{method} answer from {self.url} has no result object")
        return message["result"]

    def _message(self, response: requests.Response, request_id: int, method: str) -> object:
        """The answer's JSON-RPC message, from a JSON body or an event stream; None if unreadable
        on an HTTP error (the status then says what went wrong)."""
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        try:
            if media_type == "text/event-stream":
                return self._from_event_stream(response, request_id, method)
            return parse_json(response.content, f"{method} answer from {self.url}")
        except requests.RequestException as exc:
            raise Unreadable(f"{method} answer from {self.url} broke off: {type(exc).__name__}") from None
        except Unreadable:
            if response.status_code // 100 != 2:
                return None
            raise

    def _from_event_stream(self, response: requests.Response, request_id: int, method: str) -> dict:
        """The response to `request_id` among the stream's events (others are skipped)."""
        source = f"{method} event stream from {self.url}"
        buffer = b""
        data: list[str] = []
        for chunk in response.iter_content(chunk_size=None):
            buffer += chunk
            while b"\n" in buffer:
                raw, buffer = buffer.split(b"\n", 1)
                line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
                if line == "":
                    message = self._event(data, request_id, source)
                    data = []
                    if message is not None:
                        return message
                elif not line.startswith(":"):
                    field, _, value = line.partition(":")
                    if field == "data":
                        data.append(value[1:] if value.startswith(" ") else value)
        if buffer.strip():
            field, _, value = buffer.decode("utf-8", errors="replace").rstrip("\r").partition(":")
            if field == "data":
                data.append(value[1:] if value.startswith(" ") else value)
        message = self._event(data, request_id, source)
        if message is None:
            raise Unreadable(f"{source} ended without the response to request {request_id}")
        return message

    @staticmethod
    def _event(data: list[str], request_id: int, source: str) -> dict | None:
        if not data:
            return None
        try:
            message = parse_json("\n".join(data), source)
        except Unreadable:  # not a JSON-RPC message (a keep-alive, say): not the answer
            return None
        if (
            isinstance(message, dict)
            and message.get("id") == request_id
            and ("result" in message or "error" in message)
        ):
            return message
        return None


# ---------------------------------------------------------------- output


def summary(findings: list[Finding]) -> dict[str, int]:
    return {severity: sum(f.severity == severity for f in findings) for severity in reversed(SEVERITIES)}


def render_text(findings: list[Finding], tools: list[dict], fail_on: str) -> str:
    lines = []
    for f in findings:
        lines.append(f"{f.severity.upper():<7}{f.rule_id} {f.rule.slug}  {f.tool}  {f.path}")
        lines.append(f"       {f.message}")
        lines.append(f"       fix: {f.fix}")
    count = f"{len(tools)} tool{'s' if len(tools) != 1 else ''} checked"
    if findings:
        totals = ", ".join(f"{n} {severity}" for severity, n in summary(findings).items())
        verdict = "FAIL" if fails(findings, fail_on) else "pass"
        lines.append(
            f"speclint: {count}, {len(findings)} finding(s): {totals} (--fail-on {fail_on}: {verdict})"
        )
    else:
        lines.append(f"speclint: {count}, no findings")
    return "\n".join(lines) + "\n"


def render_json(findings: list[Finding], tools: list[dict], target: str, fail_on: str) -> str:
    report = {
        "tool": "speclint",
        "version": __version__,
        "target": target,
        "tools_checked": len(tools),
        "fail_on": fail_on,
        "failed": fails(findings, fail_on),
        "summary": summary(findings),
        "findings": [f.as_dict() for f in findings],
    }
    return json.dumps(report, indent=2) + "\n"


def render_sarif(findings: list[Finding], target: str) -> str:
    rule_index = {rule.id: i for i, rule in enumerate(RULES)}
    is_file = target != "-" and not target.startswith(("http://", "https://", "stdio:"))
    results = []
    for f in findings:
        location: dict = {"logicalLocations": [{"name": f.tool, "fullyQualifiedName": f"{f.tool}{f.path}"}]}
        if is_file:
            location["physicalLocation"] = {"artifactLocation": {"uri": Path(target).as_posix()}}
        fingerprint = hashlib.sha256(f"{f.rule_id}\0{f.tool}\0{f.path}".encode()).hexdigest()
        results.append(
            {
                "ruleId": f.rule_id,
                "ruleIndex": rule_index[f.rule_id],
                "level": SARIF_LEVEL[f.severity],
                "message": {"text": f"{f.tool} {f.path}: {f.message}. Fix: {f.fix}."},
                "locations": [location],
                "partialFingerprints": {"speclintFinding/v1": fingerprint},
                "properties": {"severity": f.severity, "tool": f.tool, "jsonPointer": f.path, "fix": f.fix},
            }
        )
    rules = [
        {
            "id": rule.id,
            "name": rule.slug,
            "shortDescription": {"text": rule.title},
            "fullDescription": {"text": rule.rationale},
            "help": {"text": rule.fix},
            "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
            "properties": {"severity": rule.severity, "tags": ["mcp", "tool-spec"]},
        }
        for rule in RULES
    ]
    run: dict = {
        "tool": {"driver": {"name": "speclint", "version": __version__, "rules": rules}},
        "results": results,
    }
    if is_file:
        run["artifacts"] = [{"location": {"uri": Path(target).as_posix()}}]
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"


# ---------------------------------------------------------------- command line


def header(value: str) -> tuple[str, str]:
    name, sep, content = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {value!r}")
    return name.strip(), content.strip()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="speclint",
        usage="%(prog)s [options] TARGET\n       %(prog)s [options] -- COMMAND [ARG ...]",
        description="Static spec check for MCP tools: idempotency keys, annotations, input bounds, "
        "local-model compatibility, valid schemas, disclosed side effects. TARGET is an MCP "
        "endpoint URL, a tools/list JSON file or - for stdin; after --, a command that starts a "
        "stdio MCP server.",
    )
    p.add_argument("target", metavar="TARGET", nargs="?", help="MCP endpoint URL, tools/list JSON file, or -")
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text", help="output format")
    p.add_argument(
        "--fail-on",
        choices=(*SEVERITIES, "never"),
        default="high",
        help="exit 1 when a finding is at or above this severity (default: high)",
    )
    p.add_argument(
        "--header",
        type=header,
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra HTTP header for URL targets (repeatable), e.g. 'Authorization: Bearer ...'",
    )
    p.add_argument(
        "--engines",
        action="store_true",
        help="SL004: compile every input schema with the installed engines (llguidance, "
        "outlines-core) and report their own messages instead of the built-in mirror",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"give up on a URL or a stdio server after this long (default: {TIMEOUT_SECONDS})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    p = parser()
    args = p.parse_args(argv)
    if bool(command) == bool(args.target):
        p.error("give one TARGET, or a command after --")
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    target = "stdio:" + shlex.join(command) if command else args.target
    try:
        if args.engines and not oracle.installed_engines():
            raise Unreadable(
                "--engines needs llguidance or outlines-core where speclint runs "
                "(pip install llguidance outlines-core)"
            )
        if command:
            from speclint import stdio  # noqa: PLC0415 - it imports this module

            tools = stdio.list_tools(command, args.timeout)
        else:
            tools = read_target(args.target, dict(args.header), args.timeout)
    except Unreadable as exc:
        print(f"speclint: {one_line(str(exc), 500)}", file=sys.stderr)
        return 2
    findings = lint(tools, engines=args.engines)
    if args.format == "json":
        sys.stdout.write(render_json(findings, tools, target, args.fail_on))
    elif args.format == "sarif":
        sys.stdout.write(render_sarif(findings, target))
    else:
        sys.stdout.write(render_text(findings, tools, args.fail_on))
    return 1 if fails(findings, args.fail_on) else 0
