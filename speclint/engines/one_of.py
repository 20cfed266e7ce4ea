"""llguidance's oneOf: it compiles one only when it can prove every two branches disjoint (by
type, by literal values, or by a const discriminator property); this mirror proves the same,
within a budget of comparisons."""

from __future__ import annotations

import json
from collections.abc import Iterator

from speclint.engines.nodes import LLGUIDANCE, REJECTED, Verdict, widen
from speclint.schema.walk import declared_types


def one_of_findings(schema: dict, path: str) -> Iterator[Verdict]:
    branches = schema.get("oneOf")
    if not isinstance(branches, list) or len(branches) < 2:
        return
    if _all_disjoint(branches) is False:
        yield (
            f"{path}/oneOf",
            {LLGUIDANCE: REJECTED},
            "rejects oneOf whose branches it cannot prove disjoint (it cannot generate 'exactly one')",
            "use anyOf, or make the branches differ by type or by a const discriminator property",
        )


MAX_COMPARISONS = 50_000  # of branch pairs and their shared properties, for one oneOf


class _OverBudget(Exception):
    """Proving a oneOf's branches disjoint pair by pair would take more than MAX_COMPARISONS."""


def _all_disjoint(branches: list) -> bool | None:
    """Whether llguidance proves every pair of `branches` disjoint; None when that is past
    MAX_COMPARISONS. llguidance compares every pair; this mirror proves the two shapes a
    oneOf of hundreds of branches takes at once (distinct literals, or one required property
    whose literals are distinct: a discriminator), and compares pair by pair otherwise. Past the
    budget it gives no verdict (--engines asks llguidance itself)."""
    if any(not isinstance(b, dict) or "$ref" in b for b in branches):
        return False
    budget = [MAX_COMPARISONS]
    try:
        literals = [_literals(b) for b in branches]
        known = [literal for literal in literals if literal is not None]
        if len(known) == len(literals):
            # Branches sharing no literal are disjoint: only those that share one need a look.
            return all(_disjoint(branches[i], branches[j], budget) for i, j in _sharing(known))
        if _discriminated(branches):
            return True
        pairs = ((a, b) for i, a in enumerate(branches) for b in branches[i + 1 :])
        return all(_disjoint(a, b, budget) for a, b in pairs)
    except _OverBudget:
        return None


def _sharing(literals: list[set[str]]) -> Iterator[tuple[int, int]]:
    """The pairs of indices whose literal sets share a value."""
    holders: dict[str, list[int]] = {}
    for index, values in enumerate(literals):
        for value in values:
            holders.setdefault(value, []).append(index)
    seen: set[tuple[int, int]] = set()
    for indices in holders.values():
        for n, i in enumerate(indices):
            for j in indices[n + 1 :]:
                if (i, j) not in seen:
                    seen.add((i, j))
                    yield i, j


def _discriminated(branches: list[dict]) -> bool:
    """Whether one property is required in every branch, with literals no two branches share."""
    required = [_required(b) for b in branches]
    properties = [_properties(b) for b in branches]
    for name in sorted(required[0] & set(properties[0])):
        subs = [
            props.get(name) if name in names else None
            for props, names in zip(properties, required, strict=True)
        ]
        schemas = [sub for sub in subs if isinstance(sub, dict) and "$ref" not in sub]
        if len(schemas) != len(subs):
            continue
        literals = [_literals(sub) for sub in schemas]
        known = [literal for literal in literals if literal is not None]
        if len(known) == len(literals) and next(_sharing(known), None) is None:
            return True
    return False


def _disjoint(a: object, b: object, budget: list[int]) -> bool:
    """Mirrors llguidance's is_verifiably_disjoint_from: types, literal sets, a const discriminator."""
    _spend(budget, 1)
    if not isinstance(a, dict) or not isinstance(b, dict) or "$ref" in a or "$ref" in b:
        return False
    ta, tb = declared_types(a), declared_types(b)
    if ta and tb and not (widen(ta) & widen(tb)):
        return True
    la, lb = _literals(a), _literals(b)
    if la is not None and lb is not None and not (la & lb):
        return True
    pa, pb = _properties(a), _properties(b)
    shared = set(pa) & set(pb)
    _spend(budget, len(shared))
    ra, rb = _required(a), _required(b)
    return any(name in ra and name in rb and _disjoint(pa[name], pb[name], budget) for name in shared)


def _spend(budget: list[int], comparisons: int) -> None:
    budget[0] -= comparisons
    if budget[0] < 0:
        raise _OverBudget


def _properties(schema: dict) -> dict:
    return schema["properties"] if isinstance(schema.get("properties"), dict) else {}


def _required(schema: dict) -> set[str]:
    names = schema.get("required")
    return {name for name in names if isinstance(name, str)} if isinstance(names, list) else set()


def _literals(schema: dict) -> set[str] | None:
    if "const" in schema:
        return {json.dumps(schema["const"], sort_keys=True)}
    if isinstance(schema.get("enum"), list):
        return {json.dumps(v, sort_keys=True) for v in schema["enum"]}
    return None
