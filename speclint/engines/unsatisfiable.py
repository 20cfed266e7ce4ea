"""Schemas no value satisfies, as the engines see them: bounds that cross, empty enums, types
no literal has; llguidance rejects them wherever a valid value must hold one."""

from __future__ import annotations

import math
from collections.abc import Iterator

from speclint.engines.nodes import (
    LLAMA_CPP,
    LLGUIDANCE,
    OUTLINES,
    REJECTED,
    Node,
    Verdict,
    as_number,
    is_count,
    possible_types,
    widen,
)
from speclint.schema.walk import declared_types


def unsatisfiable_findings(schema: dict, node: Node) -> Iterator[Verdict]:
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
    listed = schema.get("properties")
    props = listed if isinstance(listed, dict) else {}
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
    types = possible_types(schema)
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if is_count(lo) and is_count(hi) and lo > hi and "string" in types:
        yield "minLength", f"minLength {lo} > maxLength {hi}", (OUTLINES, LLAMA_CPP)
    lo, hi = schema.get("minItems"), schema.get("maxItems")
    if is_count(lo) and is_count(hi) and lo > hi:
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
    if len(sets) > 1 and not set.intersection(*(widen(s) for s in sets)):
        yield "allOf", "its allOf branches declare types no value has at once", ()


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


def _empty_range(schema: dict, integer: bool) -> bool:
    low, high = as_number(schema.get("minimum")), as_number(schema.get("maximum"))
    xlow, xhigh = as_number(schema.get("exclusiveMinimum")), as_number(schema.get("exclusiveMaximum"))
    if integer:
        first = math.ceil(low) if low is not None else None
        last = math.floor(high) if high is not None else None
        if xlow is not None:
            first = max(b for b in (first, math.floor(xlow) + 1) if b is not None)
        if xhigh is not None:
            last = min(b for b in (last, math.ceil(xhigh) - 1) if b is not None)
        return first is not None and last is not None and first > last
    lows = [(v, x) for v, x in ((low, False), (xlow, True)) if v is not None]
    highs = [(v, x) for v, x in ((high, False), (xhigh, True)) if v is not None]
    if not lows or not highs:
        return False
    (lo, lo_x), (hi, hi_x) = max(lows), min(highs)
    return lo > hi or lo == hi and (lo_x or hi_x)
