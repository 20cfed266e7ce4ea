"""The built-in rules: what the engines were measured to reject or weaken in a schema, found without
running them (``tests/fixtures/speclint_hostile.json`` holds the measurements). Patterns are judged
in ``speclint.engines.patterns``, schemas no value satisfies in ``speclint.engines.unsatisfiable``
and oneOf in ``speclint.engines.one_of``."""

from __future__ import annotations

import functools
from collections.abc import Iterator

from speclint.engines.nodes import (
    ENGINES,
    LLAMA_CPP,
    LLAMA_MAX_REPETITION,
    LLGUIDANCE,
    OUTLINES,
    OUTLINES_KEYS,
    REJECTED,
    WEAKENED,
    Node,
    Problem,
    Verdict,
    as_number,
    escape,
    every_object,
    is_count,
    nodes,
    one_line,
    outlines_reads_pattern,
    possible_types,
)
from speclint.engines.one_of import one_of_findings
from speclint.engines.patterns import pattern_verdicts
from speclint.engines.unsatisfiable import unsatisfiable_findings
from speclint.schema.walk import JSON_TYPES, declared_types

# llguidance answers 'Unimplemented keys: [...]' for these (parser/src/json/schema.rs keeps the
# list of keywords it implements; these validation keywords are not in it).
LLG_UNIMPLEMENTED = {
    "if": "it cannot make one part of the value depend on another",
    "then": "it cannot make one part of the value depend on another",
    "else": "it cannot make one part of the value depend on another",
    "not": "it cannot exclude values from a grammar",
    "uniqueItems": "it cannot constrain generation to distinct items",
    "contains": "it cannot require an item matching a sub-schema somewhere in an array",
    "minContains": "it cannot count items matching a sub-schema",
    "maxContains": "it cannot count items matching a sub-schema",
    "dependentRequired": "it cannot make one property require another",
    "dependentSchemas": "it cannot apply a schema only when a property is present",
    "dependencies": "it cannot make one property require another",
    "propertyNames": "it cannot constrain the keys of a map",
    "unevaluatedProperties": "it does not track which properties were evaluated",
    "unevaluatedItems": "it does not track which items were evaluated",
    "$dynamicRef": "it does not resolve dynamic references",
    "$dynamicAnchor": "it does not resolve dynamic references",
    "$recursiveRef": "it does not resolve recursive references (2019-09)",
    "$recursiveAnchor": "it does not resolve recursive references (2019-09)",
}
# Formats each engine compiles; llguidance and outlines-core reject any other name on a string.
# llama.cpp rejects none: it constrains date, time, date-time and uuid and ignores the rest.
LLG_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"}
)
OUTLINES_FORMATS = frozenset({"date-time", "date", "time", "uuid", "email", "uri"})

COUNT_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")

# Bounds past these make llguidance fail to build its number regex ("Failed to generate regex for
# integer range") and make llama.cpp's build_min_max_int emit a grammar its parser cannot load.
I64_MAX = 2**63 - 1
LLAMA_ONE_SIDED_INT = 10**15


def builtin_problems(
    schema: object, base: str = "/inputSchema", engines: tuple[str, ...] = ENGINES
) -> list[Problem]:
    """Problems the engines were measured to have with `schema`, found without running them:
    those of `engines` only (llama.cpp's alone beside the installed engines' own verdicts)."""
    if not isinstance(schema, dict):
        verdicts = {e: REJECTED for e in (OUTLINES, LLAMA_CPP) if e in engines}
        return [_problem(base, verdicts, "the schema is not an object")] if verdicts else []
    found: dict[tuple[str, str], Problem] = {}
    root = _Root(schema)
    for node in nodes(schema, base):
        for path, verdicts, what, fix in _node_findings(node, root, frozenset(engines)):
            _add(found, path, verdicts, what, fix)
    return list(found.values())


class _Root:
    """The schema checked, and its $anchor names, gathered once: a walk of the whole schema for
    each of thousands of $refs to an anchor was quadratic."""

    def __init__(self, schema: dict):
        self.schema = schema

    @functools.cached_property
    def anchors(self) -> set[str]:
        return {n["$anchor"] for n in every_object(self.schema) if isinstance(n.get("$anchor"), str)}


def _node_findings(node: Node, root: _Root, wanted: frozenset[str]) -> Iterator[Verdict]:
    for where, verdicts, what, fix in _schema_findings(node, root):
        kept = {e: impact for e, impact in verdicts.items() if e in node.engines and e in wanted}
        if kept:
            yield where, kept, what, fix


def _schema_findings(node: Node, root: _Root) -> Iterator[Verdict]:
    schema, path = node.schema, node.path
    if isinstance(schema, bool):
        if node.keyword in ("properties", "items", "prefixItems", "anyOf", "oneOf", "allOf"):
            yield (
                path,
                {OUTLINES: REJECTED, LLAMA_CPP: REJECTED},
                f"reject the boolean sub-schema {str(schema).lower()} (they compile only schema objects)",
                "write an object schema: {} for any value, a typed one for a real constraint, "
                "or drop the property",
            )
        return
    if not isinstance(schema, dict):
        return
    yield from _keyword_findings(schema, path)
    yield from _structure_findings(schema, node)
    yield from _ref_findings(schema, path, root)
    yield from _type_findings(schema, path)
    yield from _count_findings(schema, path)
    yield from _string_findings(schema, node)
    yield from _number_findings(schema, path)
    yield from unsatisfiable_findings(schema, node)
    yield from one_of_findings(schema, path)


def _keyword_findings(schema: dict, path: str) -> Iterator[Verdict]:
    for kw, why in LLG_UNIMPLEMENTED.items():
        if kw in schema:
            yield (
                f"{path}/{escape(kw)}",
                {LLGUIDANCE: REJECTED},
                f"rejects {kw}: {why}",
                f"drop {kw} and check it on the server; say it in the description",
            )


def _structure_findings(schema: dict, node: Node) -> Iterator[Verdict]:
    if schema and not any(k in schema for k in OUTLINES_KEYS):
        yield (
            node.path,
            {OUTLINES: REJECTED},
            "rejects a sub-schema with none of type, properties, enum, const, $ref, anyOf, oneOf, "
            "allOf, prefixItems (Unsupported JSON Schema structure)",
            'give it a "type" (or write {} for any value)',
        )
    if isinstance(schema.get("items"), list):
        yield (
            f"{node.path}/items",
            {OUTLINES: REJECTED},
            "rejects items given as a list (the draft-07 tuple form)",
            "use prefixItems for a tuple, or one items schema",
        )
    branches = schema.get("allOf")
    if "properties" not in schema and isinstance(branches, list) and len(branches) > 1:
        yield (
            f"{node.path}/allOf",
            {OUTLINES: WEAKENED},
            "compiles allOf as its branches' grammars back to back: every value it generates is "
            "the branches' values in a row (not JSON), not their intersection",
            "merge the branches into one schema (one properties, one required)",
        )


def _ref_findings(schema: dict, path: str, root: _Root) -> Iterator[Verdict]:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return
    where = f"{path}/$ref"
    if ref.startswith("#/"):
        if not _resolves(root.schema, ref):
            yield (
                where,
                dict.fromkeys(ENGINES, REJECTED),
                f"reject $ref {ref}: it points at nothing in this schema",
                "point it at an existing $defs entry",
            )
    elif ref == "#":
        yield (
            where,
            {LLAMA_CPP: REJECTED},
            "rejects $ref '#' (only references into #/... are supported)",
            "move the recursive part into $defs and reference #/$defs/<name>",
        )
    elif ref.startswith("#"):
        engines = {OUTLINES: REJECTED, LLAMA_CPP: REJECTED}
        if ref[1:] not in root.anchors:
            engines[LLGUIDANCE] = REJECTED
        yield (
            where,
            engines,
            f"reject $ref {ref}: references to an $anchor are not supported",
            "reference the definition by pointer, #/$defs/<name>",
        )
    else:
        yield (
            where,
            dict.fromkeys(ENGINES, REJECTED),
            f"reject $ref {ref}: they never fetch another document",
            "inline the referenced schema under $defs and reference #/$defs/<name>",
        )


def _type_findings(schema: dict, path: str) -> Iterator[Verdict]:
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []
    for name in names:
        if isinstance(name, str) and name not in JSON_TYPES:
            yield (
                f"{path}/type",
                dict.fromkeys(ENGINES, REJECTED),
                f"reject type {name!r}, which JSON Schema does not have",
                f"use one of {', '.join(sorted(JSON_TYPES))}",
            )


def _count_findings(schema: dict, path: str) -> Iterator[Verdict]:
    types = possible_types(schema)
    for kw in COUNT_KEYWORDS:
        if kw in schema and not is_count(schema[kw]):
            engines = {LLGUIDANCE: REJECTED}
            if kw in ("minLength", "maxLength") and "string" in types or kw in ("minItems", "maxItems"):
                engines[LLAMA_CPP] = REJECTED
            yield (
                f"{path}/{kw}",
                engines,
                f"reject {kw} {schema[kw]!r}: it must be a non-negative integer",
                f"write {kw} as a whole number",
            )
    min_length, min_items = schema.get("minLength"), schema.get("minItems")
    if is_count(min_length) and min_length > LLAMA_MAX_REPETITION and "string" in types:
        yield (
            f"{path}/minLength",
            {LLAMA_CPP: REJECTED},
            f"rejects minLength {min_length}: its grammar parser refuses to repeat a character "
            f"more than {LLAMA_MAX_REPETITION} times",
            f"lower minLength to {LLAMA_MAX_REPETITION} or less",
        )
    if is_count(min_items) and min_items > LLAMA_MAX_REPETITION + 1:
        yield (
            f"{path}/minItems",
            {LLAMA_CPP: REJECTED},
            f"rejects minItems {min_items}: its grammar parser refuses to repeat an item more "
            f"than {LLAMA_MAX_REPETITION} times",
            f"lower minItems to {LLAMA_MAX_REPETITION} or less",
        )


def _string_findings(schema: dict, node: Node) -> Iterator[Verdict]:
    path, types = node.path, possible_types(schema)
    if "string" not in types:
        return
    fmt = schema.get("format")
    has_length = "minLength" in schema or "maxLength" in schema
    pattern = schema.get("pattern")
    if isinstance(fmt, str):
        engines = {}
        if fmt not in LLG_FORMATS:
            engines[LLGUIDANCE] = REJECTED
        if fmt not in OUTLINES_FORMATS and not has_length and not isinstance(pattern, str):
            engines[OUTLINES] = REJECTED
        if engines:
            yield (
                f"{path}/format",
                engines,
                f"reject format {fmt!r}, which they do not know",
                f"drop format and say {fmt!r} in the description (llguidance knows "
                f"{', '.join(sorted(LLG_FORMATS))}; outlines-core {', '.join(sorted(OUTLINES_FORMATS))})",
            )
    if has_length and (isinstance(pattern, str) or isinstance(fmt, str) and fmt in OUTLINES_FORMATS):
        what = "pattern" if isinstance(pattern, str) else "format"
        yield (
            f"{path}/{what}",
            {OUTLINES: WEAKENED},
            f"drops this {what} without a word when minLength or maxLength is present and "
            "accepts any string of that length",
            "put the length into an anchored pattern (^[a-z0-9]{1,64}$) and drop minLength/maxLength",
        )
    if isinstance(pattern, str):
        yield from pattern_verdicts(pattern, f"{path}/pattern", outlines_reads_pattern(node))


def _number_findings(schema: dict, path: str) -> Iterator[Verdict]:
    types = declared_types(schema)
    low, high = as_number(schema.get("minimum")), as_number(schema.get("maximum"))
    if "integer" in types:
        for kw, value, beyond in (
            ("minimum", low, low is not None and (low >= I64_MAX or low <= -I64_MAX)),
            ("maximum", high, high is not None and high <= -I64_MAX),
        ):
            if beyond:
                yield (
                    f"{path}/{kw}",
                    {LLGUIDANCE: REJECTED},
                    f"rejects integer {kw} {value!r}: it cannot build a regex for a range past 64 bits",
                    f"drop {kw} or keep it within ±{I64_MAX}",
                )
        one_sided = (
            (low is not None and high is None and low > LLAMA_ONE_SIDED_INT and "minimum")
            or (high is not None and low is None and high < -LLAMA_ONE_SIDED_INT and "maximum")
            or (high is not None and high > I64_MAX and "maximum")
        )
        if one_sided:
            yield (
                f"{path}/{one_sided}",
                {LLAMA_CPP: REJECTED},
                f"rejects integer {one_sided} {schema[one_sided]!r}: its range grammar for a bound "
                "that large does not load",
                "give the integer both bounds, each within ±10^15, or drop the bound",
            )
    elif "number" in types:
        for kw, value in (("minimum", low), ("maximum", high)):
            if value is not None and abs(value) >= 2.0**63:
                yield (
                    f"{path}/{kw}",
                    {LLGUIDANCE: REJECTED},
                    f"rejects number {kw} {value!r}: it cannot build a regex for a float range that wide",
                    f"drop {kw} or keep it within ±9.2e18",
                )


# ---------------------------------------------------------------- helpers


def _add(
    found: dict[tuple[str, str], Problem], path: str, verdicts: dict[str, str], what: str, fix: str
) -> None:
    for impact in (REJECTED, WEAKENED):
        engines = tuple(e for e in ENGINES if verdicts.get(e) == impact)
        if not engines:
            continue
        key = (path, impact)
        if key in found:
            old = found[key]
            message = one_line(f"{old.message}; {_names(engines)} {what}")
            engines = tuple(e for e in ENGINES if e in old.engines or e in engines)
            found[key] = Problem(path, engines, impact, message, old.fix)
        else:
            found[key] = Problem(path, engines, impact, one_line(f"{_names(engines)} {what}"), fix)


def _problem(path: str, verdicts: dict[str, str], what: str) -> Problem:
    engines = tuple(e for e in ENGINES if e in verdicts)
    return Problem(
        path, engines, REJECTED, f"{_names(engines)} reject it: {what}", 'write {"type": "object", ...}'
    )


def _names(engines: tuple[str, ...]) -> str:
    return engines[0] if len(engines) == 1 else ", ".join(engines[:-1]) + " and " + engines[-1]


def _resolves(root: dict, ref: str) -> bool:
    node: object = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True
