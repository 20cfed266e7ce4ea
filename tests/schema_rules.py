"""The rules grammar-based local-model runtimes (llama.cpp, LM Studio, Ollama hosts) put on tool
schemas, as a walker the tests apply to our schemas and to the live tool list."""

from __future__ import annotations

import re

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

FORBIDDEN_KEYWORDS = ("$ref", "$defs", "definitions", "$schema", "format")
# Keywords whose value is one schema, a list of schemas, or a name → schema map.
SCHEMA_KEYWORDS = (
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
SCHEMA_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "dependentSchemas")
LOOKAROUNDS = ("(?=", "(?!", "(?<=", "(?<!")
SHORTHAND_CLASSES = re.compile(r"(?<!\\)(?:\\\\)*\\[dDsSwW]")


def local_model_violations(schema: object, path: str = "#") -> list[str]:
    """Every way `schema` breaks the rules of grammar-based local-model runtimes, as
    "<JSON pointer>: <rule>" strings; an empty list means the schema is safe to hand them.

    Rules: the root is `type: "object"` with `additionalProperties: false`; no `$ref`, `$defs`,
    `$schema` or `format` anywhere; every `pattern` is anchored `^...$` and uses neither shorthand
    classes (\\d \\s \\w and their negations) nor lookarounds; no boolean sub-schemas (the required
    `additionalProperties: false` is the one exception).
    """
    violations: list[str] = []
    if path == "#":
        if not isinstance(schema, dict):
            return [f"{path}: the root must be an object schema, not {type(schema).__name__}"]
        if schema.get("type") != "object":
            violations.append(f"{path}: the root must have type 'object'")
        if not isinstance(schema.get("properties"), dict):
            violations.append(f"{path}: the root must have properties")
        if schema.get("additionalProperties") is not False:
            violations.append(f"{path}: the root must set additionalProperties to false")
    if isinstance(schema, bool):
        return [f"{path}: boolean sub-schema"]
    if not isinstance(schema, dict):
        return [f"{path}: a schema must be an object, not {type(schema).__name__}"]
    for keyword in FORBIDDEN_KEYWORDS:
        if keyword in schema:
            violations.append(f"{path}: uses {keyword}")
    if "pattern" in schema:
        violations += _pattern_violations(schema["pattern"], f"{path}/pattern")
    for keyword in SCHEMA_KEYWORDS:
        if keyword not in schema:
            continue
        value = schema[keyword]
        if keyword == "additionalProperties" and value is False:
            continue
        violations += local_model_violations(value, f"{path}/{keyword}")
    for keyword in SCHEMA_LIST_KEYWORDS:
        for i, sub in enumerate(schema.get(keyword, [])):
            violations += local_model_violations(sub, f"{path}/{keyword}/{i}")
    for keyword in SCHEMA_MAP_KEYWORDS:
        for name, sub in schema.get(keyword, {}).items():
            violations += local_model_violations(sub, f"{path}/{keyword}/{name}")
    return violations


def _pattern_violations(pattern: object, path: str) -> list[str]:
    if not isinstance(pattern, str):
        return [f"{path}: pattern must be a string"]
    found = []
    if not pattern.startswith("^") or not pattern.endswith("$") or pattern.endswith("\\$"):
        found.append(f"{path}: pattern must be anchored ^...$")
    if SHORTHAND_CLASSES.search(pattern):
        found.append(f"{path}: pattern uses a shorthand class (\\d \\s \\w)")
    if any(look in pattern for look in LOOKAROUNDS):
        found.append(f"{path}: pattern uses a lookaround")
    return found


def tool_violations(tool: dict) -> list[str]:
    """Every local-model rule a `tools/list` entry breaks: its name and its input schema."""
    name = tool.get("name")
    found = (
        []
        if isinstance(name, str) and TOOL_NAME.fullmatch(name)
        else [f"name {name!r} breaks {TOOL_NAME.pattern}"]
    )
    return found + local_model_violations(tool.get("inputSchema"))
