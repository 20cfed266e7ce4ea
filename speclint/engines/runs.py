"""Running the real engines: compile a schema with every installed engine (llguidance,
outlines-core) and report their own messages. Engines are imported lazily, only here.

``engine_problems`` compiles in this process, with no limit of time or memory: a schema built to
blow up a compile holds it. speclint's command line and ``speclint.rules.lint`` compile through
``speclint.engines.child`` instead, which runs ``run_engine`` in a child process under a budget."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable, Iterable, Iterator

from speclint.engines.nodes import (
    ENGINES,
    LLGUIDANCE,
    OUTLINES,
    REJECTED,
    WEAKENED,
    Problem,
    is_count,
    nodes,
    one_line,
    outlines_reads_pattern,
)
from speclint.schema.patterns import repetition_count
from speclint.schema.walk import declared_types


def installed_engines() -> list[str]:
    """The engines `engine_problems` can compile with here (llama.cpp's converter never is)."""
    return [name for name, module in MODULES.items() if importlib.util.find_spec(module)]


def engine_problems(schema: object, base: str = "/inputSchema") -> list[Problem]:
    """Compile `schema` with every installed engine and report their own messages.

    A problem points at the construct when the engine was asked about it alone (outlines-core's
    probes and ablations), otherwise at `base`: llguidance's messages name keys, not places.
    """
    text = json.dumps(schema)
    engines = installed_engines()
    return merged((engine, said) for engine in engines for said in run_engine(engine, text, schema, base))


Said = tuple[str, str, str]  # (JSON Pointer, impact, the engine's message)
MODULES = {LLGUIDANCE: "llguidance", OUTLINES: "outlines_core"}


def _nowhere(path: str) -> None:
    return None


def run_engine(
    engine: str, text: str, schema: object, base: str = "/inputSchema", step: Callable[[str], None] = _nowhere
) -> Iterator[Said]:
    """What `engine` says of `schema` (`text` is its JSON), one (path, impact, message) each;
    `step(path)` is called before each compile, with the place that compile is about."""
    runners = {LLGUIDANCE: _run_llguidance, OUTLINES: _run_outlines}
    return runners[engine](text, schema, base, step)


def merged(said: Iterable[tuple[str, Said]]) -> list[Problem]:
    """One problem per (path, impact) from what each engine said, naming every engine."""
    found: dict[tuple[str, str], Problem] = {}
    for engine, (path, impact, message) in said:
        key = (path, impact)
        if key not in found:
            found[key] = Problem(path, (engine,), impact, one_line(f"{engine}: {message}"), _ENGINE_FIX)
        else:
            old = found[key]
            joined_message = one_line(f"{old.message}; {engine}: {message}")
            found[key] = Problem(path, (*old.engines, engine), impact, joined_message, _ENGINE_FIX)
    return list(found.values())


def located(problems: list[Problem], builtin: list[Problem], base: str = "/inputSchema") -> list[Problem]:
    """`problems` from the engines, with each one at `base` moved to where the built-in rules put
    the same engine's verdict of the same impact, when they put it in one place: llguidance names
    the key it refuses, not where it is, and a finding at the schema's root beside one at the
    pattern reads as two problems. Problems at one (path, impact) are then joined into one."""
    out = []
    for problem in problems:
        if problem.path == base:
            places = {
                p.path
                for p in builtin
                if p.impact == problem.impact and set(problem.engines) <= set(p.engines)
            }
            if len(places) == 1:
                problem = Problem(places.pop(), problem.engines, problem.impact, problem.message, problem.fix)
        out.append(problem)
    return joined(out)


def joined(problems: list[Problem]) -> list[Problem]:
    """One problem per (path, impact), naming every engine and saying what each does."""
    found: dict[tuple[str, str], Problem] = {}
    for problem in problems:
        key = (problem.path, problem.impact)
        old = found.get(key)
        if old is None:
            found[key] = problem
            continue
        engines = tuple(e for e in ENGINES if e in old.engines or e in problem.engines)
        message = one_line(f"{old.message}; {problem.message}")
        found[key] = Problem(old.path, engines, old.impact, message, old.fix)
    return list(found.values())


_ENGINE_FIX = "rewrite the construct the engine names (speclint's built-in SL004 findings say how)"


def _run_llguidance(text: str, schema: object, base: str, step: Callable[[str], None]) -> Iterator[Said]:
    from llguidance import LLMatcher, grammar_from

    step(base)
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar_from("json_schema", text))
    if messages:
        yield base, REJECTED if is_error else WEAKENED, " | ".join(messages)


def _run_outlines(text: str, schema: object, base: str, step: Callable[[str], None]) -> Iterator[Said]:
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

    step(base)
    try:
        regex = build_regex_from_schema(text)
    except Exception as error:  # noqa: BLE001 - the engine's refusal is the result
        yield base, REJECTED, str(error)
        return
    if not isinstance(schema, dict):
        return
    vocabulary = Vocabulary(1, {"a": [0]})
    for path, probe in _outlines_probes(schema, base):
        step(path)
        try:
            Index(build_regex_from_schema(json.dumps(probe)), vocabulary)
        except Exception as error:  # noqa: BLE001
            if "vocabulary provided is incompatible" not in str(error):
                yield path, REJECTED, f"Index: {error}"
    step(base)
    yield from _outlines_ignored(schema, base, regex, build_regex_from_schema)


def _outlines_probes(root: dict, base: str) -> Iterator[tuple[str, dict]]:
    """(path, small schema that takes outlines-core down the same code path) per risky construct."""
    for node in nodes(root, base):
        schema = node.schema
        if not isinstance(schema, dict) or OUTLINES not in node.engines:
            continue
        if isinstance(schema.get("pattern"), str) and outlines_reads_pattern(node):
            string = {"type": "string", "pattern": probe_pattern(schema["pattern"])}
            yield f"{node.path}/pattern", {"type": "object", "properties": {"q": string}, "required": ["q"]}
        low, high = schema.get("minItems"), schema.get("maxItems")
        if "array" in declared_types(schema) and (is_count(low) or is_count(high)):
            low, high = low if is_count(low) else 0, high if is_count(high) else None
            if high is not None:
                low, high = (min(low, 64), min(high, 64)) if low <= high else (min(low, 65), min(high, 64))
            counts = {"minItems": min(low, 64)} if high is None else {"minItems": low, "maxItems": high}
            yield f"{node.path}/minItems", {"type": "array", "items": {"type": "null"}, **counts}


_BRACE_COUNT = re.compile(r"(?<!\\)\{(\d+)(,(\d*))?\}")
PROBE_COUNT = 8


def probe_pattern(pattern: str) -> str:
    """`pattern` with every {m,n} count at most PROBE_COUNT, their order kept: what Index refuses
    (lookarounds, backreferences, \\b, inverted counts) stays, and a DFA that repeats a class a
    hundred times inside a hundred repeats (minutes and gigabytes in Index) stays small."""

    def clamp(brace: re.Match) -> str:
        low = repetition_count(brace.group(1))
        if brace.group(2) is None or not brace.group(3):
            return f"{{{min(low, PROBE_COUNT)}{brace.group(2) or ''}}}"
        high = repetition_count(brace.group(3))
        if low > high:
            return f"{{{PROBE_COUNT + 1},{PROBE_COUNT}}}"
        return f"{{{min(low, PROBE_COUNT)},{min(high, PROBE_COUNT)}}}"

    return _BRACE_COUNT.sub(clamp, pattern)


def _outlines_ignored(root: dict, base: str, regex: str, build) -> Iterator[Said]:
    for node in nodes(root, base):
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
