"""What the engines that constrain local models reject or weaken in a tool's input schema.

Local runtimes turn a tool's ``inputSchema`` into a grammar with one of three engines: llguidance,
outlines-core and llama.cpp's own ``json-schema-to-grammar`` converter. An engine *rejects* a schema
when it refuses to compile it (the runtime then fails the request or drops the constraint), and
*weakens* it when it compiles a grammar that lets through values the schema forbids (llama.cpp's
converter prints a warning and accepts any string for a pattern it cannot translate).

* ``builtin_problems(schema)``: pure-Python rules, no engine needed. They mirror what the engines
  were measured to do (``tests/fixtures/speclint_hostile.json`` records each engine's verdict on
  crafted schemas, and ``tests/test_speclint_engines.py`` holds these rules to it).
* ``engine_problems(schema)``: compiles the schema with every installed engine and reports the
  engines' own messages. llguidance and outlines-core install from the package index as wheels
  (no torch); llama.cpp's converter is C++ with no Python build, so it is never installed here
  and only the built-in rules speak for it.
* ``installed_engines()``: the engines ``engine_problems`` can run here.

Both return ``Problem`` records, at most one per (JSON Pointer, impact): a pattern that two engines
reject and a third weakens is one "rejected" problem naming the two and one "weakened" problem
naming the third. Engines are imported lazily; importing this module needs the standard library only.

Not reported: constraints an engine ignores without a word where no rewrite of the schema helps
(numeric bounds and uniqueItems in outlines-core; in llama.cpp number bounds, formats other than
date, time, date-time and uuid, patternProperties, and a maxLength or count above 2000, which its
grammar parser turns into "unbounded"). A grammar is a shape; the server still validates every call.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

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


# ---------------------------------------------------------------- what the engines support

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
# outlines-core picks a schema's meaning from the first of these keys it holds; a non-empty schema
# with none of them is "Unsupported JSON Schema structure" (outlines-core json_schema/parsing.rs).
OUTLINES_KEYS = ("properties", "allOf", "anyOf", "oneOf", "prefixItems", "enum", "const", "$ref", "type")
TYPES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})
COUNT_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
# llama.cpp's GBNF parser refuses a repetition whose minimum exceeds this
# (src/llama-grammar.cpp, MAX_REPETITION_THRESHOLD); a larger maximum silently becomes unbounded.
LLAMA_MAX_REPETITION = 2000
# Bounds past these make llguidance fail to build its number regex ("Failed to generate regex for
# integer range") and make llama.cpp's build_min_max_int emit a grammar its parser cannot load.
I64_MAX = 2**63 - 1
LLAMA_ONE_SIDED_INT = 10**15

# Keywords whose value is one schema / a list of schemas / a map of schemas that the engines compile.
# Sub-schemas under keywords an engine rejects outright (not, if, contains, ...) are not walked:
# the keyword is the problem.
_ONE = ("additionalProperties", "items", "additionalItems")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties")


# ---------------------------------------------------------------- built-in rules


def builtin_problems(schema: object, base: str = "/inputSchema") -> list[Problem]:
    """Problems the engines were measured to have with `schema`, found without running them."""
    if not isinstance(schema, dict):
        return [_problem(base, {OUTLINES: REJECTED, LLAMA_CPP: REJECTED}, "the schema is not an object")]
    found: dict[tuple[str, str], Problem] = {}
    for node in _nodes(schema, base):
        for path, verdicts, what, fix in _node_findings(node, schema):
            _add(found, path, verdicts, what, fix)
    return list(found.values())


@dataclass(frozen=True)
class _Node:
    path: str
    schema: object
    keyword: str | None  # the keyword it hangs from ("properties", "items", ...); None at the root
    required: bool  # every valid value must contain it (root, required properties, allOf branches)
    engines: frozenset[str]  # the engines that compile it (llama.cpp and outlines-core skip some)


def _nodes(root: dict, base: str) -> Iterator[_Node]:
    """Every sub-schema the engines compile, with whether a valid value must contain it."""
    yield from _walk(root, base, None, True, frozenset(ENGINES))
    referenced = _referenced_definitions(root)
    for defs in ("$defs", "definitions"):
        if isinstance(root.get(defs), dict):
            for name, sub in root[defs].items():
                if f"#/{defs}/{name}" in referenced:
                    path = f"{base}/{defs}/{_escape(name)}"
                    yield from _walk(sub, path, defs, False, frozenset(ENGINES))


def _walk(
    schema: object, path: str, keyword: str | None, required: bool, engines: frozenset[str]
) -> Iterator[_Node]:
    yield _Node(path, schema, keyword, required, engines)
    if not isinstance(schema, dict):
        return
    names = schema.get("required") if isinstance(schema.get("required"), list) else []
    for kw in _MAP:
        if isinstance(schema.get(kw), dict):
            for name, sub in schema[kw].items():
                must = required and kw == "properties" and name in names
                sub_path = f"{path}/{kw}/{_escape(name)}"
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
    refs = (node.get("$ref") for node in _every_object(root))
    return {"/".join(ref.split("/")[:3]) for ref in refs if isinstance(ref, str)}


def _every_object(value: object) -> Iterator[dict]:
    """Every JSON object inside `value`, schemas or not."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


Finding = tuple[str, dict[str, str], str, str]  # (path, {engine: impact}, what happens, fix)


def _node_findings(node: _Node, root: dict) -> Iterator[Finding]:
    for where, verdicts, what, fix in _schema_findings(node, root):
        kept = {engine: impact for engine, impact in verdicts.items() if engine in node.engines}
        if kept:
            yield where, kept, what, fix


def _schema_findings(node: _Node, root: dict) -> Iterator[Finding]:
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
    yield from _unsatisfiable_findings(schema, node)
    yield from _one_of_findings(schema, path)


def _keyword_findings(schema: dict, path: str) -> Iterator[Finding]:
    for kw, why in LLG_UNIMPLEMENTED.items():
        if kw in schema:
            yield (
                f"{path}/{_escape(kw)}",
                {LLGUIDANCE: REJECTED},
                f"rejects {kw}: {why}",
                f"drop {kw} and check it on the server; say it in the description",
            )


def _structure_findings(schema: dict, node: _Node) -> Iterator[Finding]:
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


def _ref_findings(schema: dict, path: str, root: dict) -> Iterator[Finding]:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return
    where = f"{path}/$ref"
    if ref.startswith("#/"):
        if not _resolves(root, ref):
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
        if ref[1:] not in _anchors(root):
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


def _type_findings(schema: dict, path: str) -> Iterator[Finding]:
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []
    for name in names:
        if isinstance(name, str) and name not in TYPES:
            yield (
                f"{path}/type",
                dict.fromkeys(ENGINES, REJECTED),
                f"reject type {name!r}, which JSON Schema does not have",
                f"use one of {', '.join(sorted(TYPES))}",
            )


def _count_findings(schema: dict, path: str) -> Iterator[Finding]:
    types = _types(schema)
    for kw in COUNT_KEYWORDS:
        if kw in schema and not _count(schema[kw]):
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
    if _count(min_length) and min_length > LLAMA_MAX_REPETITION and "string" in types:
        yield (
            f"{path}/minLength",
            {LLAMA_CPP: REJECTED},
            f"rejects minLength {min_length}: its grammar parser refuses to repeat a character "
            f"more than {LLAMA_MAX_REPETITION} times",
            f"lower minLength to {LLAMA_MAX_REPETITION} or less",
        )
    if _count(min_items) and min_items > LLAMA_MAX_REPETITION + 1:
        yield (
            f"{path}/minItems",
            {LLAMA_CPP: REJECTED},
            f"rejects minItems {min_items}: its grammar parser refuses to repeat an item more "
            f"than {LLAMA_MAX_REPETITION} times",
            f"lower minItems to {LLAMA_MAX_REPETITION} or less",
        )


def _string_findings(schema: dict, node: _Node) -> Iterator[Finding]:
    path, types = node.path, _types(schema)
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
        yield from _pattern_findings(pattern, f"{path}/pattern", _outlines_reads_pattern(node))


def _number_findings(schema: dict, path: str) -> Iterator[Finding]:
    types = declared_types(schema)
    low, high = _number(schema.get("minimum")), _number(schema.get("maximum"))
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


def _unsatisfiable_findings(schema: dict, node: _Node) -> Iterator[Finding]:
    """Schemas no value satisfies; llguidance rejects them where a valid value must hold one."""
    for kw, why, always in _unsatisfiable(schema):
        engines = dict.fromkeys(always, REJECTED)
        if node.required:
            engines[LLGUIDANCE] = REJECTED
        if engines:
            yield (
                f"{node.path}/{kw}",
                engines,
                f"reject a schema no value satisfies ({why})",
                "fix the bounds or the types so that some value fits",
            )
    names = schema.get("required")
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if node.required and isinstance(names, list) and schema.get("additionalProperties") is False:
        missing = [n for n in names if isinstance(n, str) and n not in props]
        if missing:
            yield (
                f"{node.path}/required",
                {LLGUIDANCE: REJECTED},
                f"rejects required {missing[0]!r}: it is not in properties and additionalProperties "
                "is false, so no value can hold it",
                f"declare {missing[0]!r} under properties or drop it from required",
            )


def _unsatisfiable(schema: dict) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """(keyword, why, engines that reject it even where it is optional)."""
    types = _types(schema)
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if _count(lo) and _count(hi) and lo > hi and "string" in types:
        yield "minLength", f"minLength {lo} > maxLength {hi}", (OUTLINES, LLAMA_CPP)
    lo, hi = schema.get("minItems"), schema.get("maxItems")
    if _count(lo) and _count(hi) and lo > hi:
        yield "minItems", f"minItems {lo} > maxItems {hi}", (OUTLINES,)
    if types & {"integer", "number"} and _empty_range(schema, "integer" in types and "number" not in types):
        yield "minimum", "the bounds leave no number", ()
    for kw in ("enum", "anyOf", "oneOf"):
        if schema.get(kw) == []:
            yield kw, f"{kw} is empty", (LLAMA_CPP,)
    if schema.get("type") == []:
        yield "type", "type is an empty list", (LLAMA_CPP,)
    declared = declared_types(schema)
    for kw in ("enum", "const"):
        values = schema.get("enum") if kw == "enum" else [schema["const"]] if "const" in schema else None
        if (
            declared
            and isinstance(values, list)
            and values
            and not any(_json_type(v) & declared for v in values)
        ):
            yield kw, f"no {kw} value is of type {'/'.join(sorted(declared))}", ()
    branches = (
        [b for b in schema.get("allOf", []) if isinstance(b, dict)]
        if isinstance(schema.get("allOf"), list)
        else []
    )
    sets = [s for s in [declared, *(declared_types(b) for b in branches)] if s]
    if len(sets) > 1 and not set.intersection(*(_widen(s) for s in sets)):
        yield "allOf", "its allOf branches declare types no value has at once", ()


def _one_of_findings(schema: dict, path: str) -> Iterator[Finding]:
    branches = schema.get("oneOf")
    if not isinstance(branches, list) or len(branches) < 2:
        return
    pairs = ((a, b) for i, a in enumerate(branches) for b in branches[i + 1 :])
    if not all(_disjoint(a, b) for a, b in pairs):
        yield (
            f"{path}/oneOf",
            {LLGUIDANCE: REJECTED},
            "rejects oneOf whose branches it cannot prove disjoint (it cannot generate 'exactly one')",
            "use anyOf, or make the branches differ by type or by a const discriminator property",
        )


def _disjoint(a: object, b: object) -> bool:
    """Mirrors llguidance's is_verifiably_disjoint_from: types, literal sets, a const discriminator."""
    if not isinstance(a, dict) or not isinstance(b, dict) or "$ref" in a or "$ref" in b:
        return False
    ta, tb = declared_types(a), declared_types(b)
    if ta and tb and not (_widen(ta) & _widen(tb)):
        return True
    la, lb = _literals(a), _literals(b)
    if la is not None and lb is not None and not (la & lb):
        return True
    pa = a.get("properties") if isinstance(a.get("properties"), dict) else {}
    pb = b.get("properties") if isinstance(b.get("properties"), dict) else {}
    ra = a.get("required") if isinstance(a.get("required"), list) else []
    rb = b.get("required") if isinstance(b.get("required"), list) else []
    return any(name in ra and name in rb and _disjoint(pa[name], pb[name]) for name in set(pa) & set(pb))


# ---------------------------------------------------------------- patterns

_LOOKAROUND_RE = re.compile(r"\(\?(?:=|!|<=|<!|>)")
# llama.cpp's gbnf_escape_length: the escapes its grammar literals and classes can hold.
_GBNF_ESCAPE_RE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[trn\\\"\[\]-])")
_LLAMA_LITERAL_ESCAPES = set("^$.[]()|{}*+?")
_QUANTIFIERS = set("*+?{")
_COUNT_RE = re.compile(r"\{(\d+)(?:,(\d*))?\}")
_LLAMA_COUNT_RE = re.compile(r"\s*(\d+)\s*|\s*(\d*)\s*,\s*(\d*)\s*")


def _pattern_findings(pattern: str, path: str, outlines_reads: bool) -> Iterator[Finding]:
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
            count = _COUNT_RE.match(pattern, i)
            if not count:
                return "a '{' that opens no repetition count"
            low, high = count.group(1), count.group(2)
            if high and int(low or 0) > int(high):
                return f"the repetition count {count.group(0)} has its minimum above its maximum"
        i += 1
    if in_class:
        return "an unterminated character class"
    return "unbalanced parentheses" if depth else ""


def _outlines_reads_pattern(node: _Node) -> bool:
    """outlines-core compiles a pattern only on a typed string without minLength or maxLength."""
    schema = node.schema
    first = next((k for k in OUTLINES_KEYS if k in schema), None)
    return (
        OUTLINES in node.engines
        and first == "type"
        and "string" in declared_types(schema)
        and "minLength" not in schema
        and "maxLength" not in schema
    )


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
            count = _LLAMA_COUNT_RE.fullmatch(body, i + 1, end)
            if not count:
                return WEAKENED, "invalid number in curly brackets"
            if not can_repeat:
                return REJECTED, "nothing to repeat"
            low = int(count.group(1) or count.group(2) or 0)
            high = int(count.group(1) or count.group(3) or -1)
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
            if nxt not in _LLAMA_LITERAL_ESCAPES and not _GBNF_ESCAPE_RE.match(body, i):
                return WEAKENED, f"unsupported escape: \\{nxt}"
            i += 2 if nxt in _LLAMA_LITERAL_ESCAPES else _GBNF_ESCAPE_RE.match(body, i).end() - i
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


# ---------------------------------------------------------------- running the engines


def installed_engines() -> list[str]:
    """The engines `engine_problems` can compile with here (llama.cpp's converter never is)."""
    modules = {LLGUIDANCE: "llguidance", OUTLINES: "outlines_core"}
    return [name for name, module in modules.items() if importlib.util.find_spec(module)]


def engine_problems(schema: object, base: str = "/inputSchema") -> list[Problem]:
    """Compile `schema` with every installed engine and report their own messages.

    A problem points at the construct when the engine was asked about it alone (outlines-core's
    probes and ablations), otherwise at `base`: llguidance's messages name keys, not places.
    """
    text = json.dumps(schema)
    found: dict[tuple[str, str], Problem] = {}
    runners = {LLGUIDANCE: _run_llguidance, OUTLINES: _run_outlines}
    for engine in installed_engines():
        for path, impact, message in runners[engine](text, schema, base):
            key = (path, impact)
            if key not in found:
                found[key] = Problem(path, (engine,), impact, _one_line(f"{engine}: {message}"), _ENGINE_FIX)
            else:
                old = found[key]
                merged = _one_line(f"{old.message}; {engine}: {message}")
                found[key] = Problem(path, (*old.engines, engine), impact, merged, _ENGINE_FIX)
    return list(found.values())


_ENGINE_FIX = "rewrite the construct the engine names (speclint's built-in SL004 findings say how)"


def _run_llguidance(text: str, schema: object, base: str) -> Iterator[tuple[str, str, str]]:
    from llguidance import LLMatcher, grammar_from

    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar_from("json_schema", text))
    if messages:
        yield base, REJECTED if is_error else WEAKENED, " | ".join(messages)


def _run_outlines(text: str, schema: object, base: str) -> Iterator[tuple[str, str, str]]:
    """build_regex_from_schema, then the DFA that outlines_core.Index builds, for each probe.

    Lookarounds, backreferences, \\b and inverted item counts pass build_regex_from_schema and
    fail only when Index builds its DFA. Index over a whole schema's regex costs seconds where a
    value is free-form ({} alone takes ~5 s: the any-JSON regex has a huge DFA) and ~450 ms for
    format uri, so Index runs on probes instead: each pattern outlines-core reads, as a required
    string property, and each array's minItems/maxItems on an array of nulls (counts past 64
    clamped, their order kept). The rest of the regex is outlines-core's own and builds. A
    one-token vocabulary builds the same DFA and stops at the first state it cannot leave, which
    outlines-core reports as a vocabulary mismatch, not a schema problem. Silent weakening is found
    by compiling again without the construct: the same regex means outlines-core ignored it.
    """
    from outlines_core import Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema

    try:
        regex = build_regex_from_schema(text)
    except Exception as error:  # noqa: BLE001 - the engine's refusal is the result
        yield base, REJECTED, str(error)
        return
    if not isinstance(schema, dict):
        return
    vocabulary = Vocabulary(1, {"a": [0]})
    for path, probe in _outlines_probes(schema, base):
        try:
            Index(build_regex_from_schema(json.dumps(probe)), vocabulary)
        except Exception as error:  # noqa: BLE001
            if "vocabulary provided is incompatible" not in str(error):
                yield path, REJECTED, f"Index: {error}"
    yield from _outlines_ignored(schema, base, regex, build_regex_from_schema)


def _outlines_probes(root: dict, base: str) -> Iterator[tuple[str, dict]]:
    """(path, small schema that takes outlines-core down the same code path) per risky construct."""
    for node in _nodes(root, base):
        schema = node.schema
        if not isinstance(schema, dict) or OUTLINES not in node.engines:
            continue
        if isinstance(schema.get("pattern"), str) and _outlines_reads_pattern(node):
            string = {"type": "string", "pattern": schema["pattern"]}
            yield f"{node.path}/pattern", {"type": "object", "properties": {"q": string}, "required": ["q"]}
        low, high = schema.get("minItems"), schema.get("maxItems")
        if "array" in declared_types(schema) and (_count(low) or _count(high)):
            low, high = low if _count(low) else 0, high if _count(high) else None
            if high is not None:
                low, high = (min(low, 64), min(high, 64)) if low <= high else (min(low, 65), min(high, 64))
            counts = {"minItems": min(low, 64)} if high is None else {"minItems": low, "maxItems": high}
            yield f"{node.path}/minItems", {"type": "array", "items": {"type": "null"}, **counts}


def _outlines_ignored(root: dict, base: str, regex: str, build) -> Iterator[tuple[str, str, str]]:
    for node in _nodes(root, base):
        schema = node.schema
        if not isinstance(schema, dict):
            continue
        for key in ("pattern", "format"):
            if key in schema and ("minLength" in schema or "maxLength" in schema):
                if _same_regex(build, schema, {k: v for k, v in schema.items() if k != key}):
                    yield (
                        f"{node.path}/{key}",
                        WEAKENED,
                        f"compiles the same regex without this {key}: it is ignored",
                    )
                break
        branches = schema.get("allOf")
        if "properties" not in schema and isinstance(branches, list) and len(branches) > 1:
            try:
                parts = [build(json.dumps(b)) for b in branches]
            except Exception:  # noqa: BLE001 - a branch that needs the root's $defs: nothing to compare
                continue
            if "".join(parts) in regex:
                yield (
                    f"{node.path}/allOf",
                    WEAKENED,
                    "compiles allOf as its branches back to back (two JSON texts)",
                )


def _same_regex(build, with_key: dict, without_key: dict) -> bool:
    try:
        return build(json.dumps(with_key)) == build(json.dumps(without_key))
    except Exception:  # noqa: BLE001
        return False


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
            message = _one_line(f"{old.message}; {_names(engines)} {what}")
            engines = tuple(e for e in ENGINES if e in old.engines or e in engines)
            found[key] = Problem(path, engines, impact, message, old.fix)
        else:
            found[key] = Problem(path, engines, impact, _one_line(f"{_names(engines)} {what}"), fix)


def _problem(path: str, verdicts: dict[str, str], what: str) -> Problem:
    engines = tuple(e for e in ENGINES if e in verdicts)
    return Problem(
        path, engines, REJECTED, f"{_names(engines)} reject it: {what}", 'write {"type": "object", ...}'
    )


def _names(engines: tuple[str, ...]) -> str:
    return engines[0] if len(engines) == 1 else ", ".join(engines[:-1]) + " and " + engines[-1]


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def _escape(name: str) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")


def _resolves(root: dict, ref: str) -> bool:
    node: object = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _anchors(root: object) -> set[str]:
    return {node["$anchor"] for node in _every_object(root) if isinstance(node.get("$anchor"), str)}


def declared_types(schema: dict) -> set[str]:
    """The types `schema` names in "type" (speclint's rules use it too)."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _types(schema: dict) -> set[str]:
    """The types a schema may take: declared, or all of them when it declares none."""
    return declared_types(schema) or set(TYPES)


def _widen(types: set[str]) -> set[str]:
    return types | {"number"} if "integer" in types else types | {"integer"} if "number" in types else types


def _json_type(value: object) -> set[str]:
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number", "integer"} if value.is_integer() else {"number"}
    if isinstance(value, str):
        return {"string"}
    return {"array"} if isinstance(value, list) else {"object"}


def _literals(schema: dict) -> set[str] | None:
    if "const" in schema:
        return {json.dumps(schema["const"], sort_keys=True)}
    if isinstance(schema.get("enum"), list):
        return {json.dumps(v, sort_keys=True) for v in schema["enum"]}
    return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _empty_range(schema: dict, integer: bool) -> bool:
    low, high = _number(schema.get("minimum")), _number(schema.get("maximum"))
    xlow, xhigh = _number(schema.get("exclusiveMinimum")), _number(schema.get("exclusiveMaximum"))
    if integer:
        bounds = [math.ceil(low) if low is not None else None, math.floor(high) if high is not None else None]
        if xlow is not None:
            bounds[0] = max(b for b in (bounds[0], math.floor(xlow) + 1) if b is not None)
        if xhigh is not None:
            bounds[1] = min(b for b in (bounds[1], math.ceil(xhigh) - 1) if b is not None)
        return None not in bounds and bounds[0] > bounds[1]
    lows = [(v, x) for v, x in ((low, False), (xlow, True)) if v is not None]
    highs = [(v, x) for v, x in ((high, False), (xhigh, True)) if v is not None]
    if not lows or not highs:
        return False
    (lo, lo_x), (hi, hi_x) = max(lows), min(highs)
    return lo > hi or lo == hi and (lo_x or hi_x)
