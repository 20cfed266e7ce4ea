"""speclint's engine oracle: crafted schemas, real engines, and the built-in rules that mirror them.

tests/fixtures/speclint_hostile.json records what llguidance, outlines-core and llama.cpp's
converter did with each crafted schema. The installed engines are run again here, so an upgrade
that changes a verdict fails with the schema's name; llama.cpp's converter has no Python build, so
its recorded verdicts are the oracle for the built-in rules alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speclint.engines.builtin import builtin_problems
from speclint.engines.nodes import ENGINES, LLAMA_CPP, LLGUIDANCE, OUTLINES, REJECTED, WEAKENED
from speclint.engines.runs import engine_problems, installed_engines, probe_pattern
from tests.support import fresh_python

FIXTURES = Path(__file__).parents[1] / "fixtures"
HOSTILE = json.loads((FIXTURES / "speclint_hostile.json").read_text(encoding="utf-8"))["schemas"]
CORPUS = [
    (f"{path.stem}/{tool['name']}", tool["inputSchema"])
    for path in sorted((FIXTURES / "speclint_corpus").glob("*.json"))
    if path.name != "labels.json"
    for tool in json.loads(path.read_text(encoding="utf-8"))["tools"]
]
LIVE = (LLGUIDANCE, OUTLINES)
# The issue's floor: SL004 catches at least 12 of every 14 schemas an engine rejects.
RECALL_FLOOR = 12 / 14


def verdicts(problems: list, engines: tuple[str, ...] = ENGINES) -> dict[str, str]:
    """Each engine's verdict as the fixture spells it: the worst impact among its problems."""
    out = {}
    for engine in engines:
        impacts = {p.impact for p in problems if engine in p.engines}
        out[engine] = REJECTED if REJECTED in impacts else WEAKENED if WEAKENED in impacts else "ok"
    return out


def by_name(name: str) -> dict:
    return next(case["schema"] for case in HOSTILE if case["name"] == name)


def test_the_fixture_covers_the_issue_and_measures_false_positives():
    names = {case["name"] for case in HOSTILE}
    rejected = [c for c in HOSTILE if REJECTED in c["verdict"].values()]
    clean = [c for c in HOSTILE if set(c["verdict"].values()) == {"ok"}]
    assert len(names) == len(HOSTILE) >= 34
    assert len(rejected) >= 30 and len(clean) >= 14
    for construct in ("if_then_else", "not", "uniqueItems", "contains", "dependentRequired", "propertyNames"):
        assert construct in names
    for case in HOSTILE:
        assert case["why"] and case["schema"]["type"] == "object"
        assert set(case["verdict"]) == set(ENGINES)


def test_the_installed_engines_still_give_the_recorded_verdicts():
    assert set(installed_engines()) == set(LIVE), "requirements-dev.txt installs llguidance and outlines-core"
    changed = []
    for case in HOSTILE:
        live = verdicts(engine_problems(case["schema"]), LIVE)
        recorded = {engine: case["verdict"][engine] for engine in LIVE}
        if live != recorded:
            changed.append(f"{case['name']}: recorded {recorded}, now {live}")
    assert not changed, "an engine changed behaviour; re-measure the fixture:\n" + "\n".join(changed)


def test_builtin_rules_catch_what_each_engine_rejects_or_weakens():
    caught = missed = 0
    wrong = []
    for case in HOSTILE:
        got = verdicts(builtin_problems(case["schema"]))
        for engine, want in case["verdict"].items():
            if want == REJECTED:
                caught, missed = (caught + 1, missed) if got[engine] == REJECTED else (caught, missed + 1)
            if got[engine] != want:
                wrong.append(f"{case['name']} {engine}: engine {want}, built-in {got[engine]}")
    report = f"built-in recall on rejections {caught}/{caught + missed}; disagreements: " + "; ".join(wrong)
    assert caught / (caught + missed) >= RECALL_FLOOR, report
    assert not wrong, report


def test_builtin_rules_say_nothing_about_schemas_every_engine_accepts():
    clean = [case for case in HOSTILE if set(case["verdict"].values()) == {"ok"}]
    flagged = {c["name"]: [p.message for p in builtin_problems(c["schema"])] for c in clean}
    flagged = {name: messages for name, messages in flagged.items() if messages}
    assert not flagged, f"false positives on {len(flagged)} of {len(clean)} accepted schemas: {flagged}"


def test_corpus_schemas_get_exactly_the_problems_the_engines_have():
    assert len(CORPUS) == 92
    mismatched = []
    for name, schema in CORPUS:
        live = verdicts(engine_problems(schema), LIVE)
        builtin = verdicts(builtin_problems(schema), LIVE)
        if builtin != live:
            mismatched.append(f"{name}: engines {live}, built-in {builtin}")
        if verdicts(builtin_problems(schema))[LLAMA_CPP] != "ok":
            mismatched.append(f"{name}: built-in flags llama.cpp, which compiled every corpus schema")
    assert not mismatched, "\n".join(mismatched)


def test_corpus_fetch_url_is_weakened_by_outlines_ignoring_its_format():
    fetch = dict(CORPUS)["fetch/fetch"]
    problems = builtin_problems(fetch)
    assert [(p.path, p.engines, p.impact) for p in problems] == [
        ("/inputSchema/properties/url/format", (OUTLINES,), WEAKENED)
    ]
    assert [p.path for p in engine_problems(fetch)] == [p.path for p in problems]


def test_engine_problems_carry_the_engines_own_messages():
    problems = engine_problems(by_name("pattern_lookahead"))
    messages = {engine: p.message for p in problems for engine in p.engines}
    assert "look-around" in messages[LLGUIDANCE]
    assert "Failed to build DFA" in messages[OUTLINES]
    assert all(p.impact == REJECTED and len(p.message) <= 300 and "\n" not in p.message for p in problems)
    assert engine_problems(by_name("control_plain")) == []


def test_problems_point_at_the_offending_keyword_and_say_which_engine_does_what():
    (problem,) = builtin_problems(by_name("uniqueItems"))
    assert problem.path == "/inputSchema/properties/tags/uniqueItems"
    assert problem.engines == (LLGUIDANCE,) and problem.impact == REJECTED
    assert problem.message.startswith("llguidance rejects uniqueItems")
    unanchored = builtin_problems(by_name("pattern_unanchored"), base="/x")
    found = [(p.path, p.engines, p.impact) for p in unanchored]
    assert found == [("/x/properties/q/pattern", (LLAMA_CPP,), WEAKENED)]
    assert "accepts any string" in unanchored[0].message and unanchored[0].fix


def test_a_pattern_two_engines_reject_and_llama_cpp_drops_is_two_problems():
    problems = builtin_problems(by_name("pattern_backreference"))
    assert {(p.impact, p.engines) for p in problems} == {
        (REJECTED, (LLGUIDANCE, OUTLINES)),
        (WEAKENED, (LLAMA_CPP,)),
    }
    assert len({p.path for p in problems}) == 1


@pytest.mark.parametrize(
    ("pattern", "llama"),
    [
        ("^[a-z0-9_-]{1,64}$", "ok"),
        ("^\\p{L}{1,8}$", WEAKENED),
        ("^[0-9]{2001}$", REJECTED),
        ("^(abc$", REJECTED),
        ("^a\\.b(?:c|d)*$", "ok"),
        ("^caf\u00e9$", "ok"),
    ],
)
def test_llama_cpp_pattern_mirror(pattern, llama):
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": pattern}}}
    assert verdicts(builtin_problems(schema))[LLAMA_CPP] == llama


def test_an_optional_unsatisfiable_property_is_dropped_by_llguidance_not_rejected():
    schema = {"type": "object", "properties": {"q": {"type": "integer", "minimum": 5, "maximum": 1}}}
    assert verdicts(engine_problems(schema), LIVE)[LLGUIDANCE] == "ok"
    assert verdicts(builtin_problems(schema))[LLGUIDANCE] == "ok"
    schema["required"] = ["q"]
    assert verdicts(engine_problems(schema), LIVE)[LLGUIDANCE] == REJECTED
    assert verdicts(builtin_problems(schema))[LLGUIDANCE] == REJECTED


def test_engines_option_finishes_on_every_schema_here_including_free_form_values(tmp_path):
    """outlines-core's Index over a whole schema's regex takes ~5 s for one free-form value ({}):
    a tools list with a few dozen of them would take minutes. engine_problems builds Index on
    probes only, so every corpus and crafted schema and the free-form ones finish in a fresh
    interpreter under a bound a whole-regex Index would blow many times over. (A hang guard,
    not a speed claim.)"""
    schemas_file = tmp_path / "schemas.json"
    code = (
        "import json, pathlib\n"
        "from speclint.engines.runs import engine_problems\n"
        f"schemas = json.loads(pathlib.Path({str(schemas_file)!r}).read_text())\n"
        "print(sum(1 for schema in schemas if engine_problems(schema)))\n"
    )
    free_form = {
        "type": "object",
        "properties": {"any": {}, "map": {"type": "object"}, "list": {"type": "array"}},
    }
    schemas = [schema for _, schema in CORPUS] + [case["schema"] for case in HOSTILE] + [free_form] * 20
    schemas_file.write_text(json.dumps(schemas))
    done = fresh_python(code, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0  # the crafted schemas still get their verdicts


def test_engine_problems_finish_on_patterns_whose_dfa_explodes():
    """Index on '^([a-z]{1,100} ?){1,100}$' ran for minutes and took gigabytes; the probe clamps
    counts (keeping their order), so this finishes, in a fresh interpreter with a time limit."""
    code = (
        "from speclint.engines.runs import engine_problems\n"
        "for pattern in ('^([a-z]{1,100} ?){1,100}$', '^(a{1,200}){1,200}$', '^[ab]*a[ab]{20}$'):\n"
        "    schema = {'type': 'object', 'properties': {'q': {'type': 'string', 'pattern': pattern}},"
        " 'required': ['q']}\n"
        "    assert engine_problems(schema) == [], pattern\n"
        "print('done')\n"
    )
    done = fresh_python(code, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr


@pytest.mark.parametrize(
    ("pattern", "probe"),
    [
        ("a{3}", "a{3}"),
        ("a{30,}", "a{8,}"),
        ("a{5,100}", "a{5,8}"),
        ("a{10,9}", "a{9,8}"),
        ("\\{50}", "\\{50}"),
    ],
)
def test_probes_clamp_counts_but_keep_an_inverted_one_inverted(pattern, probe):
    assert probe_pattern(pattern) == probe


def test_builtin_rules_stay_linear_on_wide_schemas(tmp_path):
    """Quadratic before, each of these alone overran this bound by minutes: a oneOf of 8,000
    titled constants and a tagged union of 7,000 variants (every pair of branches compared), a
    oneOf of 6,000 typed constants and one integer (no shortcut applies: the mirror stops after
    its budget of comparisons), 12,000 $refs to anchors (the schema walked again for each) and
    120,000 required properties (a list searched for each). Well under a tool's 1 MiB, some of
    them. In a fresh interpreter with a bound: a hang guard, not a speed claim. The verdicts
    stay llguidance's: distinct constants prove a oneOf, a repeated one does not."""
    code = """
import json, sys
from speclint.engines.builtin import builtin_problems
from speclint.engines.nodes import LLGUIDANCE

def one_of(branches):
    schema = {"type": "object", "properties": {"q": {"oneOf": branches}}, "required": ["q"]}
    return [p.path for p in builtin_problems(schema) if LLGUIDANCE in p.engines]

titled = [{"const": f"v{i}", "title": f"V{i}"} for i in range(8000)]
assert one_of(titled) == []
assert one_of(titled + [{"const": "v7999"}]) == ["/inputSchema/properties/q/oneOf"]
kinds = [{"kind": {"const": f"k{i}"}} for i in range(7000)]
tagged = [{"type": "object", "properties": kind, "required": ["kind"]} for kind in kinds]
assert one_of(tagged) == []
tagged[-1]["properties"]["kind"]["const"] = "k0"
assert one_of(tagged) == ["/inputSchema/properties/q/oneOf"]
one_of([{"type": "string", "const": f"v{i}"} for i in range(6000)] + [{"type": "integer"}])
defs = {f"d{i}": {"$anchor": f"a{i}", "type": "string"} for i in range(12000)}
refs = {f"p{i}": {"$ref": f"#a{i}"} for i in range(12000)}
builtin_problems({"type": "object", "$defs": defs, "properties": refs})
wide = {f"p{i}": {"type": "string", "maxLength": 3} for i in range(120000)}
assert builtin_problems({"type": "object", "properties": wide, "required": list(wide)}) == []
print("done")
"""
    done = fresh_python(code, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
