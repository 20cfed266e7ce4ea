"""speclint's command line: the output formats (text, JSON, SARIF), the targets it reads, exit codes,
and hostile tool lists, which are linted or refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from devstack.ports import free_port
from speclint.output import SARIF_LEVEL
from speclint.rules.lint import lint
from tests.speclint.support import FIXTURES, load, object_schema, run, run_cli
from tests.support import ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

# ---------------------------------------------------------------- output formats


def test_text_output_names_rule_tool_path_and_fix(capsys):
    code, out, _ = run(capsys, str(FIXTURES / "sl001_no_idempotency_key.json"))
    assert code == 1
    assert "HIGH   SL001 mutating-without-idempotency-key  send_invoice  /inputSchema/properties" in out
    assert "fix: " in out
    assert out.strip().splitlines()[-1].startswith("speclint: 2 tools checked, 2 finding(s)")


def test_json_output_parses(capsys):
    code, out, _ = run(capsys, str(FIXTURES / "sl002_annotations.json"), "--format", "json")
    assert code == 0  # medium findings, default --fail-on high
    report = json.loads(out)
    assert report["tools_checked"] == 5
    assert report["failed"] is False
    assert report["summary"] == {"high": 0, "medium": 5, "low": 0, "info": 0}
    first = report["findings"][0]
    assert set(first) == {"rule_id", "rule", "severity", "tool", "path", "message", "fix"}
    assert (first["rule_id"], first["rule"], first["severity"]) == (
        "SL002",
        "annotations-missing-or-contradicting",
        "medium",
    )


SARIF_SHAPE = {
    "type": "object",
    "required": ["$schema", "version", "runs"],
    "properties": {
        "$schema": {"type": "string"},
        "version": {"const": "2.1.0"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": [
                                                "id",
                                                "shortDescription",
                                                "fullDescription",
                                                "help",
                                                "defaultConfiguration",
                                            ],
                                            "properties": {
                                                "id": {"type": "string"},
                                                "shortDescription": {"$ref": "#/$defs/message"},
                                                "fullDescription": {"$ref": "#/$defs/message"},
                                                "help": {"$ref": "#/$defs/message"},
                                                "defaultConfiguration": {
                                                    "type": "object",
                                                    "required": ["level"],
                                                    "properties": {"level": {"$ref": "#/$defs/level"}},
                                                },
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "level", "message", "locations", "properties"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "level": {"$ref": "#/$defs/level"},
                                "message": {"$ref": "#/$defs/message"},
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "required": ["logicalLocations"],
                                        "properties": {
                                            "logicalLocations": {
                                                "type": "array",
                                                "minItems": 1,
                                                "items": {
                                                    "type": "object",
                                                    "required": ["name", "fullyQualifiedName"],
                                                },
                                            }
                                        },
                                    },
                                },
                                "properties": {"type": "object", "required": ["severity"]},
                            },
                        },
                    },
                },
            },
        },
    },
    "$defs": {
        "message": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
        "level": {"enum": ["none", "note", "warning", "error"]},
    },
}


def test_sarif_output_is_sarif_2_1_0(capsys):
    manifest = FIXTURES / "sl004_local_models.json"
    code, out, _ = run(capsys, str(manifest), "--format", "sarif")
    assert code == 1
    sarif = json.loads(out)

    assert sarif["version"] == "2.1.0" and "sarif" in sarif["$schema"]
    run_ = sarif["runs"][0]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "speclint"
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert rule_ids == ["SL001", "SL002", "SL003", "SL004", "SL005", "SL006", "SL007", "SL008"]
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    assert len(run_["results"]) == len(lint(load("sl004_local_models.json")))
    for result in run_["results"]:
        assert result["ruleId"] in rule_ids
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == SARIF_LEVEL[result["properties"]["severity"]]
        logical = result["locations"][0]["logicalLocations"][0]
        assert logical["fullyQualifiedName"] == logical["name"] + result["properties"]["jsonPointer"]
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == manifest.as_posix()
    names = {r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] for r in run_["results"]}
    assert "pattern_checks/inputSchema/properties/a/pattern" in names
    assert {r["level"] for r in run_["results"]} == {"error", "warning"}  # SL006's typeless parameter

    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(SARIF_SHAPE)
    jsonschema.validate(sarif, SARIF_SHAPE, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize(
    ("fixture", "levels"),
    [
        ("sl002_annotations.json", {"warning"}),
        ("sl005_side_effects.json", {"note"}),
        ("clean.json", set()),
    ],
)
def test_sarif_levels_follow_severity(capsys, fixture, levels):
    _, out, _ = run(capsys, str(FIXTURES / fixture), "--format", "sarif")
    assert {result["level"] for result in json.loads(out)["runs"][0]["results"]} == levels


# ---------------------------------------------------------------- targets and exit codes


def test_dash_reads_standard_input():
    manifest = (FIXTURES / "sl001_no_idempotency_key.json").read_text()
    result = run_cli("-", "--format", "json", stdin=manifest)
    assert result.returncode == 1
    assert {f["tool"] for f in json.loads(result.stdout)["findings"]} == {"send_invoice", "append_log_line"}

    clean = run_cli("-", stdin=(FIXTURES / "clean.json").read_text())
    assert clean.returncode == 0
    assert "no findings" in clean.stdout


def result_2026(tools: list[dict]) -> dict:
    """A 2026-07-28 tools/list result: its resultType, caching hints, serverInfo stamp and a cursor."""
    return {
        "resultType": "complete",
        "tools": tools,
        "nextCursor": "page-2",
        "ttlMs": 300000,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weather", "version": "4.2.1"}},
    }


@pytest.mark.parametrize(
    "wrap",
    [
        lambda tools: {"tools": tools},
        lambda tools: tools,
        lambda tools: {"jsonrpc": "2.0", "id": 7, "result": {"tools": tools}},
        result_2026,
        lambda tools: {"jsonrpc": "2.0", "id": "a", "result": result_2026(tools)},
    ],
    ids=["result", "bare-list", "json-rpc-response", "2026-07-28-result", "2026-07-28-response"],
)
def test_accepted_file_shapes(tmp_path, capsys, wrap):
    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps(wrap(load("sl001_no_idempotency_key.json"))))
    code, out, _ = run(capsys, str(manifest), "--format", "json")
    assert code == 1
    assert len(json.loads(out)["findings"]) == 2


def test_a_saved_2026_result_names_its_server_and_caching_hints_in_every_format(tmp_path, capsys):
    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps(result_2026(load("clean.json"))))
    server = {  # a file does not say which revision it was listed in
        "name": "weather",
        "version": "4.2.1",
        "protocol_version": None,
        "ttl_ms": 300000,
        "cache_scope": "public",
    }

    assert json.loads(run(capsys, str(manifest), "--format", "json")[1])["server"] == server
    assert json.loads(run(capsys, str(manifest), "--format", "sarif")[1])["runs"][0]["properties"] == {
        "server": server
    }
    assert run(capsys, str(manifest))[1].splitlines()[-2] == "server: weather 4.2.1"


def test_a_file_that_says_nothing_of_its_server_reports_none(capsys):
    code, out, _ = run(capsys, str(FIXTURES / "clean.json"), "--format", "json")
    assert (code, json.loads(out)["server"]) == (0, None)
    assert (
        "properties"
        not in json.loads(run(capsys, str(FIXTURES / "clean.json"), "--format", "sarif")[1])["runs"][0]
    )
    assert not any(
        line.startswith("server:") for line in run(capsys, str(FIXTURES / "clean.json"))[1].splitlines()
    )


@pytest.mark.parametrize(
    "content",
    [
        None,  # no such file
        "this is not JSON",
        '{"foo": 1}',
        '{"tools": {"name": "x"}}',
        '{"tools": ["purchase_free_bundle"]}',
        '{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "method not found"}}',
        '{"resultType": "input_required", "inputRequests": {}, "requestState": "x"}',
        '{"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "tools": []}}',
        '{"resultType": null, "tools": []}',
    ],
    ids=[
        "missing-file",
        "not-json",
        "not-a-tools-list",
        "tools-not-a-list",
        "tool-not-object",
        "rpc-error",
        "input-required",
        "input-required-response",
        "result-type-null",
    ],
)
def test_unreadable_files_exit_2(tmp_path, capsys, content):
    manifest = tmp_path / "tools.json"
    if content is not None:
        manifest.write_text(content)
    code, out, err = run(capsys, str(manifest))
    assert code == 2
    assert out == ""
    assert err.startswith("speclint: ") and err.count("\n") == 1
    if content is not None and "resultType" in content:
        assert "is not a tools list: its resultType is" in err and "not 'complete'" in err


def test_url_with_nothing_listening_exits_2(capsys):
    code, out, err = run(capsys, f"http://127.0.0.1:{free_port()}/mcp")
    assert code == 2
    assert out == ""
    assert "cannot reach" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("fail_on", "code"),
    [("high", 0), ("medium", 0), ("low", 1), ("info", 1), ("never", 0)],
)
def test_fail_on_thresholds_with_a_low_finding(capsys, fail_on, code):
    assert run(capsys, str(FIXTURES / "low_only.json"), "--fail-on", fail_on)[0] == code


@pytest.mark.parametrize(("fail_on", "code"), [("high", 1), ("never", 0)])
def test_fail_on_thresholds_with_a_high_finding(capsys, fail_on, code):
    assert run(capsys, str(FIXTURES / "sl001_no_idempotency_key.json"), "--fail-on", fail_on)[0] == code


def test_default_fail_on_is_high(capsys):
    assert run(capsys, str(FIXTURES / "sl002_annotations.json"))[0] == 0
    assert run(capsys, str(FIXTURES / "sl001_no_idempotency_key.json"))[0] == 1


# ---------------------------------------------------------------- hostile tool lists


def _listing(schema: dict, **tool: object) -> str:
    return json.dumps({"tools": [{"name": "t", "inputSchema": schema, **tool}]})


def _with_pattern(pattern: str) -> str:
    return _listing(object_schema(a={"type": "string", "pattern": pattern}))


def _with_bound(literal: str) -> str:
    return _listing(object_schema(n={"type": "integer", "maximum": 1})).replace(
        '"maximum": 1', f'"maximum": {literal}'
    )


HOSTILE_LISTS = {
    "nan-bound": _with_bound("NaN"),
    "huge-bound": _with_bound("1e400"),
    "type-object": _listing(object_schema(a={"type": {"x": 1}})),
    "type-list-of-lists": _listing(object_schema(a={"type": [[]]})),
    "5000-digit-count": _with_pattern("^a{1," + "9" * 5000 + "}$"),
    "5000-digit-backref": _with_pattern("^(a)\\" + "9" * 5000 + "$"),
    "superscript-ref": _listing(
        {"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/required/²"}}}
    ),
    "spaces-in-count": _with_pattern("^a{" + " " * 2000 + "," + " " * 2000 + "x}$"),
    "long-description": _listing(object_schema(), description="a " * 250_000),
    "lone-surrogate-name": '{"tools":[{"name":"\\ud800","inputSchema":{"type":"object"}}]}',
}


@pytest.mark.parametrize("output_format", ["text", "json", "sarif"])
@pytest.mark.parametrize("case", sorted(HOSTILE_LISTS))
def test_a_hostile_tool_list_is_linted_or_refused_in_one_line_never_a_traceback(
    tmp_path, case, output_format
):
    manifest = tmp_path / "tools.json"
    manifest.write_text(HOSTILE_LISTS[case])

    done = run_cli(str(manifest), "--format", output_format, "--fail-on", "never")
    assert done.returncode in (0, 2), done.stderr
    assert "Traceback" not in done.stderr
    if done.returncode == 2:
        assert done.stdout == "" and done.stderr.count("\n") == 1
    elif output_format != "text":
        json.loads(done.stdout)


def _shadowing_listing(names: int) -> str:
    """A megabyte sentence with a directive in it that names every other tool of the list."""
    others = [f"tool_{n}" for n in range(names)]
    description = "You must see " + ", ".join(others * 40)
    tools = [{"name": "t", "description": description, "inputSchema": object_schema()}]
    return json.dumps({"tools": tools + [{"name": n, "inputSchema": object_schema()} for n in others]})


# Quadratic before the fix, each of these took several times run_module's 60 s hang bound (1 MB of
# nested groups took 28 s, a 1 MB sentence naming 2,000 tools 56 s); linear now. Nothing is timed.
MEGABYTE_LISTS = {
    "nested-groups": _with_pattern("(" * 1_000_000 + ")" * 1_000_000),
    "shadowing-scan": _shadowing_listing(4_000),
}


@pytest.mark.parametrize("case", sorted(MEGABYTE_LISTS))
def test_a_megabyte_tool_list_is_linted_within_the_hang_bound(tmp_path, case):
    manifest = tmp_path / "tools.json"
    manifest.write_text(MEGABYTE_LISTS[case])

    done = run_cli(str(manifest), "--fail-on", "never", "--max-tool-bytes", "4M")  # past the 1 MiB default

    assert done.returncode == 0, done.stderr
    assert "checked" in done.stdout.splitlines()[-1]


def test_a_terminal_that_cannot_encode_a_name_gets_it_escaped_not_a_traceback(tmp_path):
    manifest = tmp_path / "tools.json"
    manifest.write_text(
        json.dumps({"tools": [{"name": "t\u00e9\U0001f600", "inputSchema": object_schema()}]})
    )

    done = subprocess.run(
        [sys.executable, "-m", "speclint", str(manifest), "--fail-on", "never"],
        cwd=ROOT,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
        capture_output=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert b"t\\xe9\\U0001f600" in done.stdout


def test_non_finite_numbers_are_refused_as_unreadable():
    done = run_cli("-", stdin=HOSTILE_LISTS["huge-bound"])
    assert done.returncode == 2
    assert "out of range" in done.stderr


def test_escape_sequences_from_the_server_never_reach_the_terminal(tmp_path):
    evil = "wipe\x1b[2J\x1b]0;owned\x07\u202egnp.exe"
    tool = {
        "name": evil,
        "description": "Sends \x1b[31mmail\x1b[0m.",
        "inputSchema": object_schema(**{evil: {"type": "string"}}),
    }
    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps({"tools": [tool]}))

    done = run_cli(str(manifest), "--fail-on", "never")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\u202e" not in done.stdout
    assert "wipe\\u001b[2J" in done.stdout and "\\u202e" in done.stdout


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "1e308"])
def test_timeout_must_be_a_sensible_number_of_seconds(timeout):
    done = run_cli("--timeout", timeout, "tools.json")
    assert done.returncode == 2
    assert "--timeout must be" in done.stderr and "Traceback" not in done.stderr
