"""Reading a tool document: its input schema node by node, each at a JSON Pointer, and its text fields."""

from __future__ import annotations

from collections.abc import Iterator

JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
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
SCHEMA_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")


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


def declared_types(schema: dict) -> set[str]:
    """The types `schema` names in "type"."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def root_schema(tool: dict) -> dict:
    schema = tool.get("inputSchema")
    return schema if isinstance(schema, dict) else {}


def text(tool: dict, key: str) -> str:
    value = tool.get(key)
    return value if isinstance(value, str) else ""
