"""The rules about a tool's input schema: SL003 (bounded inputs), SL004 (what local-model engines
reject or weaken, from ``speclint.engines``), SL006 (a schema clients can use and calls can satisfy)
and SL007 (paths, URLs and commands constrained)."""

from __future__ import annotations

import re
from typing import TypeGuard

from speclint.engines.builtin import builtin_problems
from speclint.engines.child import Compiled, compile_schemas
from speclint.engines.nodes import LLAMA_CPP, REJECTED
from speclint.engines.runs import installed_engines, joined, located
from speclint.findings import Finding
from speclint.rules import words
from speclint.schema import patterns
from speclint.schema.walk import JSON_TYPES, declared_types, pointer, text, walk

TOOL_NAME_PATTERN = "^[a-zA-Z0-9_-]{1,64}$"
_TOOL_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
NUMBER_BOUNDS = (("minimum", ("minimum", "exclusiveMinimum")), ("maximum", ("maximum", "exclusiveMaximum")))


def check_bounds(tool: dict, name: str) -> list[Finding]:
    """SL003: strings without maxLength, arrays without maxItems, objects left open."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return []
    found = []
    for path, node, _ in walk(schema, "/inputSchema"):
        if not isinstance(node, dict):
            continue
        types = declared_types(node)
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


def check_local_models(
    tool: dict, name: str, engines: bool = False, compiled: Compiled | None = None
) -> list[Finding]:
    """SL004: what an engine local runtimes constrain generation with rejects (high) or silently
    weakens (medium) in the input schema. Built-in rules mirror the engines' measured verdicts;
    with `engines`, the installed engines compile the schema and speak for themselves (`compiled`
    holds what they made of it when ``lint`` compiled the whole list in one child process), a
    compile stopped at its budget is a problem of the schema, and the built-in rules still speak
    for llama.cpp's converter, which never runs here."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return []
    if engines:
        if compiled is None:
            (compiled,) = compile_schemas([schema], installed_engines())
        ran = located(compiled.problems, builtin_problems(schema)) + compiled.stopped
        problems = joined(ran + builtin_problems(schema, engines=(LLAMA_CPP,)))
    else:
        problems = builtin_problems(schema)
    return [
        Finding(
            "SL004",
            name,
            problem.path,
            problem.message,
            problem.fix,
            "high" if problem.impact == REJECTED else "medium",
        )
        for problem in problems
    ]


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


def _is_number(value: object) -> TypeGuard[int | float]:
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
        unknown = [t for t in listed if t is not None and not (isinstance(t, str) and t in JSON_TYPES)]
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
        declared_properties = node.get("properties")
        properties = declared_properties if isinstance(declared_properties, dict) else {}
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
        re.compile(r"\b(?:file ?paths?|(?<!JSON )(?<!json )paths? to|directory|folder)\b", re.IGNORECASE),
        "a caller can name any path the server can reach (../../etc/passwd, ~/.ssh)",
    ),
    (
        "URL",
        frozenset(
            {"url", "urls", "uri", "link", "href", "endpoint", "webhook", "host", "hostname", "callback"}
        ),
        re.compile(r"\bUR[LI]s?\b(?! slug)"),
        "a caller can point the server at any host, internal ones included (SSRF)",
    ),
    (
        "command or code",
        frozenset({"command", "cmd", "shell", "script", "exec", "sql", "statement", "expression", "eval"}),
        re.compile(r"\b(?:shell|command line|SQL|(?:script|code|command)s? to (?:run|execute))\b"),
        "a caller can run anything the server's interpreter can (injection)",
    ),
)


FILE_WORDS = frozenset({"file", "files", "directory", "directories", "dir", "folder", "path", "paths"})
MOVE_WORDS = frozenset({"source", "destination", "dest", "src", "from", "to"})
NOT_A_PATH = frozenset({"sort", "order", "direction"})
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
        own_description = node.get("description")
        description = own_description if isinstance(own_description, str) else ""
        if keyword == "properties":
            parameter = path.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
            parents[path] = (parameter, description)
        elif keyword == "items" and path.endswith("/items") and path[: -len("/items")] in parents:
            parameter, outer = parents[path[: -len("/items")]]
            description = f"{description} {outer}"
        else:
            continue
        if "string" not in declared_types(node) or any(key in node for key in ("enum", "const", "pattern")):
            continue
        named = set(words.words(parameter))
        if named & NOT_A_PATH:  # sort_dir, order_dir: a direction
            named -= {"dir"}
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
