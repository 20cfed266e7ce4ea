"""What both halves of ``speclint.engines`` share: the three engines and two impacts, the Problem
record, and which sub-schemas of a schema each engine compiles (``nodes``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard

from speclint.schema.walk import JSON_TYPES, declared_types

LLGUIDANCE = "llguidance"
OUTLINES = "outlines-core"
LLAMA_CPP = "llama.cpp"
ENGINES = (LLGUIDANCE, OUTLINES, LLAMA_CPP)
REJECTED = "rejected"
WEAKENED = "weakened"
MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class Problem:
    """One thing at one place in a schema that some engines reject or weaken."""

    path: str  # JSON Pointer into the tool, e.g. "/inputSchema/properties/q/pattern"
    engines: tuple[str, ...]  # in ENGINES order
    impact: str  # REJECTED or WEAKENED
    message: str  # one line naming the engines and what they do
    fix: str


# outlines-core picks a schema's meaning from the first of these keys it holds; a non-empty schema
# with none of them is "Unsupported JSON Schema structure" (outlines-core json_schema/parsing.rs).
OUTLINES_KEYS = ("properties", "allOf", "anyOf", "oneOf", "prefixItems", "enum", "const", "$ref", "type")

# llama.cpp's GBNF parser refuses a repetition whose minimum exceeds this
# (src/llama-grammar.cpp, MAX_REPETITION_THRESHOLD); a larger maximum silently becomes unbounded.
LLAMA_MAX_REPETITION = 2000

# Keywords whose value is one schema / a list of schemas / a map of schemas that the engines compile.
# Sub-schemas under keywords an engine rejects outright (not, if, contains, ...) are not walked:
# the keyword is the problem.
_ONE = ("additionalProperties", "items", "additionalItems")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties")

Verdict = tuple[str, dict[str, str], str, str]  # (path, {engine: impact}, what happens, fix)


@dataclass(frozen=True)
class Node:
    path: str
    schema: object
    keyword: str | None  # the keyword it hangs from ("properties", "items", ...); None at the root
    required: bool  # every valid value must contain it (root, required properties, allOf branches)
    engines: frozenset[str]  # the engines that compile it (llama.cpp and outlines-core skip some)


def nodes(root: dict, base: str) -> Iterator[Node]:
    """Every sub-schema the engines compile, with whether a valid value must contain it."""
    yield from _walk(root, base, None, True, frozenset(ENGINES))
    referenced = _referenced_definitions(root)
    for defs in ("$defs", "definitions"):
        if isinstance(root.get(defs), dict):
            for name, sub in root[defs].items():
                if f"#/{defs}/{name}" in referenced:
                    path = f"{base}/{defs}/{escape(name)}"
                    yield from _walk(sub, path, defs, False, frozenset(ENGINES))


def _walk(
    schema: object, path: str, keyword: str | None, required: bool, engines: frozenset[str]
) -> Iterator[Node]:
    yield Node(path, schema, keyword, required, engines)
    if not isinstance(schema, dict):
        return
    required_names = schema.get("required")
    listed = required_names if isinstance(required_names, list) else []
    names = {name for name in listed if isinstance(name, str)}  # a set: 40,000 names fit in a tool
    for kw in _MAP:
        if isinstance(schema.get(kw), dict):
            for name, sub in schema[kw].items():
                must = required and kw == "properties" and name in names
                sub_path = f"{path}/{kw}/{escape(name)}"
                yield from _walk(sub, sub_path, kw, must, _compilers(schema, kw, engines))
    for kw in _LIST:
        if isinstance(schema.get(kw), list):
            for i, sub in enumerate(schema[kw]):
                must = required and kw == "allOf"
                yield from _walk(sub, f"{path}/{kw}/{i}", kw, must, _compilers(schema, kw, engines))
    for kw in _ONE:
        value = schema.get(kw)
        if kw == "items" and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from _walk(sub, f"{path}/items/{i}", "items", False, _compilers(schema, kw, engines))
        elif isinstance(value, dict) or (isinstance(value, bool) and kw == "items"):
            yield from _walk(value, f"{path}/{kw}", kw, False, _compilers(schema, kw, engines))


def _compilers(parent: dict, keyword: str, engines: frozenset[str]) -> frozenset[str]:
    """Which of `engines` compile the sub-schemas under `parent[keyword]`.

    outlines-core reads only the first of OUTLINES_KEYS a schema holds (and reads items and
    additionalProperties only under "type"); llama.cpp never reads patternProperties or
    additionalItems. llguidance reads them all.
    """
    if keyword in ("patternProperties", "additionalItems"):
        engines -= {LLAMA_CPP}
    first = next((k for k in OUTLINES_KEYS if k in parent), None)
    reads = first == "type" if keyword in ("items", "additionalProperties") else keyword == first
    return engines if reads else engines - {OUTLINES}


def _referenced_definitions(root: dict) -> set[str]:
    """The "#/$defs/<name>" (or definitions) prefixes of every $ref in `root`."""
    refs = (node.get("$ref") for node in every_object(root))
    return {"/".join(ref.split("/")[:3]) for ref in refs if isinstance(ref, str)}


def every_object(value: object) -> Iterator[dict]:
    """Every JSON object inside `value`, schemas or not."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def outlines_reads_pattern(node: Node) -> bool:
    """outlines-core compiles a pattern only on a typed string without minLength or maxLength."""
    schema = node.schema
    if not isinstance(schema, dict):  # no pattern to read: the callers pass only object schemas
        return False
    first = next((k for k in OUTLINES_KEYS if k in schema), None)
    return (
        OUTLINES in node.engines
        and first == "type"
        and "string" in declared_types(schema)
        and "minLength" not in schema
        and "maxLength" not in schema
    )


def possible_types(schema: dict) -> set[str]:
    """The types a schema may take: declared, or all of them when it declares none."""
    return declared_types(schema) or set(JSON_TYPES)


def widen(types: set[str]) -> set[str]:
    return types | {"number"} if "integer" in types else types | {"integer"} if "number" in types else types


def as_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def escape(name: str) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")
