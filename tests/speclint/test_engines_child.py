"""The engines' compiles under a budget (speclint.engines.child): a schema built to blow up a
compile is a finding naming the engine and its budget, the rest of the list is still compiled,
and the run's --timeout holds, engine compiles included.

tests/fixtures/speclint/compile_blowup.json (368 bytes) spells a repeat out by hand,
``^[ab]*a[ab][ab]…[ab]$`` with 21 of them: no {m,n} count for the probe to clamp, and
outlines-core's automaton doubles with each one (28 s and 2 GB, whatever --timeout said). The
CLI runs with a short --timeout under a subprocess bound of 30 s, which the old code overran."""

from __future__ import annotations

import copy
import json

import pytest

from speclint.engines.nodes import LLGUIDANCE, OUTLINES
from speclint.limits import Deadline, Limits
from speclint.rules.lint import lint
from tests.speclint.support import FIXTURES, load, object_schema, run_bounded

pytestmark = pytest.mark.services  # starts processes or servers of its own

BLOWUP = load("compile_blowup.json")[0]
PATTERN = "/inputSchema/properties/code/pattern"


def blowups(count: int) -> list[dict]:
    return [{**copy.deepcopy(BLOWUP), "name": f"match_code_{n}"} for n in range(count)]


def test_a_schema_whose_compile_blows_up_is_a_finding_naming_the_engine_and_its_budget():
    manifest = str(FIXTURES / "compile_blowup.json")
    # 9 s: the compile's third (3 s) plus starting the engines on a machine busy with other tests
    done = run_bounded(manifest, "--engines", "--timeout", "9", "--format", "json")

    assert done.returncode == 1, done.stderr
    (finding,) = [f for f in json.loads(done.stdout)["findings"] if f["rule_id"] == "SL004"]
    assert (finding["severity"], finding["tool"], finding["path"]) == ("high", "match_code", PATTERN)
    assert finding["message"].startswith(
        "outlines-core: did not finish compiling within its budget of 3 s and was stopped"
    )
    assert "free-form part" in finding["fix"]


def test_the_timeout_bounds_engine_compiles_that_each_keep_to_their_budget(tmp_path):
    """Four such tools: each compile is stopped at its third of --timeout and a fresh engines'
    process takes the next, and the run stops at the deadline: during a compile, or while a fresh
    process starts (where the deadline falls depends on how busy the machine is)."""
    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps({"tools": blowups(4)}))

    done = run_bounded(str(manifest), "--engines", "--timeout", "5")

    said = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b""
    assert said.count("\n") == 1 and "Traceback" not in said
    missed = "speclint: did not finish in time (5s for the whole run, --timeout): "
    assert said.startswith(missed), said
    doing = said.removeprefix(missed)
    assert doing == "starting the engines\n" or (
        doing.startswith("compiling the input schema of") and "with outlines-core" in doing
    ), said


def test_a_compile_past_the_memory_budget_is_a_finding_and_the_next_tool_still_compiles():
    unique = {"type": "array", "maxItems": 3, "uniqueItems": True, "items": {"enum": [1]}}
    after = {"name": "tag", "inputSchema": object_schema(tags=unique)}
    limits = Limits(engine_seconds=25, engine_memory=192 << 20)  # memory runs out long before time

    found = lint([BLOWUP, after], engines=True, limits=limits, deadline=Deadline.after(60))

    sl004 = [(f.tool, f.path, f.severity, f.message) for f in found if f.rule_id == "SL004"]
    stopped = [s for s in sl004 if s[0] == "match_code"]
    assert [(path, severity) for _, path, severity, _ in stopped] == [(PATTERN, "high")]
    assert stopped[0][3].startswith("outlines-core: ran out of its memory budget (192 MiB) compiling")
    # a fresh child went on: llguidance's own message on the next tool, at its place
    assert any(
        tool == "tag" and message.startswith(f"{LLGUIDANCE}:") and "uniqueItems" in message
        for tool, _, _, message in sl004
    ), sl004


def test_engines_that_finish_within_budget_say_what_they_always_said():
    """The child reports each engine's own words, merged as in-process compiles merge them."""
    schema = object_schema(a={"type": "string", "pattern": "^(?=a)a$"})
    found = lint([{"name": "t", "inputSchema": schema}], engines=True)

    (finding,) = [f for f in found if f.rule_id == "SL004" and f.severity == "high"]
    assert finding.path == "/inputSchema/properties/a/pattern"
    assert f"{LLGUIDANCE}:" in finding.message and f"{OUTLINES}:" in finding.message
