"""The rule set: each tool checked by every rule in order, and one finding per root cause.

The rules live in ``speclint.rules.behaviour`` (SL001, SL002, SL005), ``speclint.rules.input_schema``
(SL003, SL004, SL006, SL007) and ``speclint.rules.instructions`` (SL008); docs/speclint.md, "Rules",
says what each flags. ``lint`` keeps to a deadline: the engines' compiles run in a child process
killed at its budget or the deadline (``speclint.engines.child``), and the rules look at the
deadline before each tool, whose size ``speclint.limits`` caps.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from speclint.engines.child import Compiled, compile_schemas
from speclint.engines.runs import installed_engines
from speclint.findings import RANK, Finding
from speclint.limits import Deadline, Limits
from speclint.load import Unreadable
from speclint.rules.behaviour import check_annotations, check_idempotency_key, check_side_effects
from speclint.rules.input_schema import (
    check_bounds,
    check_local_models,
    check_schema_validity,
    check_sensitive_strings,
)
from speclint.rules.instructions import check_instructions

CHECKS: tuple[Callable[[dict, str], list[Finding]], ...] = (
    check_idempotency_key,
    check_annotations,
    check_bounds,
    check_local_models,
    check_side_effects,
    check_schema_validity,
    check_sensitive_strings,
    check_instructions,
)


def lint(
    tools: list[dict], engines: bool = False, limits: Limits | None = None, deadline: Deadline | None = None
) -> list[Finding]:
    """Every finding for every tool, in tool order, then rule order. With `engines`, SL004
    compiles each input schema with the installed engines (in a child process, each compile
    within `limits`) instead of mirroring them; SL008 knows the names of every tool of the list,
    to see one tool's text directing another. Past `deadline`, ``Unreadable``."""
    names = frozenset(t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str))
    labels = [_label(tool, index) for index, tool in enumerate(tools)]
    compiled = _compiled(tools, labels, limits, deadline) if engines else {}
    options: dict[Callable[..., list[Finding]], dict[str, frozenset[str]]] = {
        check_instructions: {"others": names}
    }
    checks = [functools.partial(check, **options.get(check, {})) for check in CHECKS]
    local_models = CHECKS.index(check_local_models)
    findings = []
    for index, tool in enumerate(tools):
        if deadline is not None and deadline.passed():
            raise Unreadable(deadline.missed(f"the rules had checked {index} of {len(tools)} tools"))
        checks[local_models] = functools.partial(
            check_local_models, engines=engines, compiled=compiled.get(index)
        )
        found = [finding for check in checks for finding in check(tool, labels[index])]
        findings.extend(merge_schema_findings(found))
    return findings


def _compiled(
    tools: list[dict], labels: list[str], limits: Limits | None, deadline: Deadline | None
) -> dict[int, Compiled]:
    """Each input schema compiled by the installed engines in one child process, by tool index."""
    at = [index for index, tool in enumerate(tools) if isinstance(tool.get("inputSchema"), dict)]
    schemas = [tools[index]["inputSchema"] for index in at]
    names = [repr(labels[index][:80]) for index in at]
    compiled = compile_schemas(schemas, installed_engines(), limits, deadline, names)
    return dict(zip(at, compiled, strict=True))


def _label(tool: dict, index: int) -> str:
    name = tool.get("name")
    return name if isinstance(name, str) and name else f"<tool #{index}>"


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
