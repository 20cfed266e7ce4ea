"""speclint's rules: each on crafted manifests and bare schemas, and the storefront's own tool (before
and after idempotency keys, the latter live over HTTP)."""

from __future__ import annotations

import json

import pytest

from shared.protocols.mcp.tools import TOOLS
from speclint.findings import RULE_BY_ID
from speclint.rules.behaviour import IDEMPOTENCY_KEY_NAMES, check_annotations
from speclint.rules.input_schema import check_bounds, check_local_models
from speclint.rules.lint import lint
from tests.speclint.support import load, object_schema, pre_idempotency_tool, run, run_cli, triples

# ---------------------------------------------------------------- the rules


def test_clean_manifest_has_no_findings():
    assert lint(load("clean.json")) == []


EXPECTED = {
    "sl001_no_idempotency_key.json": {
        ("SL001", "high", "send_invoice", "/inputSchema/properties"),
        ("SL001", "high", "append_log_line", "/inputSchema/properties"),
    },
    "sl001_inference.json": {
        # delete_file (only destructiveHint): a repeat finds the file gone, so no SL001
        # declared mutating, and "process" says nothing about repeats
        ("SL001", "medium", "process_batch", "/inputSchema/properties"),
        # no annotations: "post" says it mutates and adds another comment each call
        ("SL002", "medium", "post_comment", "/annotations"),
        ("SL001", "high", "post_comment", "/inputSchema/properties"),
        # no annotations: creating a named branch twice collides, so only the annotations finding
        ("SL002", "medium", "create_branch", "/annotations"),
        # no annotations, but "get" says it only reads: the missing annotations are the one finding
        ("SL002", "medium", "get_comments", "/annotations"),
    },
    "sl002_annotations.json": {
        ("SL002", "medium", "archive_order", "/annotations"),
        ("SL002", "medium", "rename_label", "/annotations"),
        ("SL002", "medium", "send_digest", "/annotations/readOnlyHint"),
        ("SL002", "medium", "weekly_report", "/annotations/readOnlyHint"),
        ("SL002", "medium", "refund_payment", "/annotations/idempotentHint"),
    },
    "sl003_unbounded.json": {
        ("SL003", "medium", "save_note", "/inputSchema"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/text"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/nullable_text"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/tags"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/tags/items"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/meta"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/meta/additionalProperties"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/choice/anyOf/0"),
        ("SL003", "low", "save_note", "/inputSchema/properties/choice/anyOf/1"),
        ("SL003", "low", "save_note", "/inputSchema/properties/lists/oneOf/0/items"),
        ("SL003", "low", "save_note", "/inputSchema/properties/lists/oneOf/1/items"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/lists/oneOf/1"),
        ("SL003", "medium", "save_note", "/inputSchema/properties/a~1b"),
        ("SL003", "medium", "tag_item", "/inputSchema/$defs/label"),
        # llguidance cannot prove the two branches disjoint, so it refuses the oneOf
        ("SL004", "high", "save_note", "/inputSchema/properties/lists/oneOf"),
    },
    "sl004_local_models.json": {
        ("SL006", "high", "bad name!", "/name"),
        ("SL006", "high", "array_root", "/inputSchema/type"),
        ("SL004", "medium", "pattern_checks", "/inputSchema/properties/a/pattern"),
        ("SL004", "medium", "pattern_checks", "/inputSchema/properties/b/pattern"),
        ("SL004", "medium", "pattern_checks", "/inputSchema/properties/c/pattern"),
        ("SL004", "high", "pattern_checks", "/inputSchema/properties/c/pattern"),
        ("SL004", "medium", "pattern_checks", "/inputSchema/properties/d/pattern"),
        ("SL004", "high", "pattern_checks", "/inputSchema/properties/d/pattern"),
        ("SL004", "medium", "pattern_checks", "/inputSchema/properties/e/pattern"),
        ("SL004", "medium", "pattern_checks", "/inputSchema/properties/f/pattern"),
        ("SL004", "medium", "pattern_checks", "/inputSchema/properties/g/pattern"),
        ("SL004", "medium", "keyword_checks", "/inputSchema/properties/when/format"),
        ("SL004", "high", "boolean_checks", "/inputSchema/properties/none/items"),
        ("SL006", "high", "boolean_checks", "/inputSchema/properties/anything"),
        ("SL006", "high", "missing_schema", "/inputSchema"),
    },
    "sl005_side_effects.json": {
        ("SL005", "low", "process_records", "/description"),
        ("SL005", "low", "sync_now", "/description"),
        ("SL005", "low", "read_stats", "/outputSchema"),
    },
    "sl006_invalid.json": {
        ("SL006", "high", "bad name!", "/name"),
        ("SL006", "high", "array_root", "/inputSchema/type"),
        ("SL006", "high", "missing_schema", "/inputSchema"),
        ("SL004", "medium", "find_things", "/inputSchema/properties/fine/pattern"),
        ("SL006", "high", "find_things", "/inputSchema/required"),
        ("SL006", "high", "find_things", "/inputSchema/properties/q/pattern"),
        ("SL006", "medium", "find_things", "/inputSchema/properties/python_only/pattern"),
        ("SL006", "high", "find_things", "/inputSchema/properties/typeless"),
        ("SL006", "high", "find_things", "/inputSchema/properties/wrong_type/type"),
        ("SL006", "high", "find_things", "/inputSchema/properties/short/minLength"),
        ("SL006", "high", "find_things", "/inputSchema/properties/few/minItems"),
        ("SL006", "high", "find_things", "/inputSchema/properties/count/minimum"),
        ("SL006", "high", "find_things", "/inputSchema/properties/ratio/exclusiveMinimum"),
        ("SL006", "high", "find_things", "/inputSchema/properties/negative/maxLength"),
        ("SL006", "high", "find_things", "/inputSchema/properties/nothing/enum"),
        ("SL006", "high", "find_things", "/inputSchema/properties/anything"),
    },
    "sl007_sensitive.json": {
        # outlines-core drops a format that has maxLength beside it
        ("SL004", "medium", "fetch_page", "/inputSchema/properties/target/format"),
        ("SL007", "medium", "fetch_page", "/inputSchema/properties/url"),
        ("SL007", "medium", "fetch_page", "/inputSchema/properties/target"),
        ("SL007", "medium", "fetch_page", "/inputSchema/properties/file_path"),
        ("SL007", "medium", "fetch_page", "/inputSchema/properties/where"),
        ("SL007", "medium", "fetch_page", "/inputSchema/properties/command"),
        ("SL007", "medium", "fetch_page", "/inputSchema/properties/sql"),
        # a tool about files: source and destination are paths; so are the items of "paths"
        ("SL007", "medium", "move_file", "/inputSchema/properties/source"),
        ("SL007", "medium", "move_file", "/inputSchema/properties/destination"),
        ("SL007", "medium", "move_file", "/inputSchema/properties/paths/items"),
    },
}


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_each_rule_fires_on_its_crafted_manifest(fixture):
    findings = lint(load(fixture))

    assert triples(findings) == EXPECTED[fixture]
    assert len(findings) == len(EXPECTED[fixture])  # one finding per problem, no duplicates
    for f in findings:
        assert f.message and "\n" not in f.message
        assert f.fix and "\n" not in f.fix


@pytest.mark.parametrize(
    ("rule_id", "slug", "severity"),
    [
        ("SL001", "mutating-without-idempotency-key", "high"),
        ("SL002", "annotations-missing-or-contradicting", "medium"),
        ("SL003", "unbounded-input", "medium"),
        ("SL004", "local-model-incompatible-schema", "high"),
        ("SL005", "undisclosed-side-effects", "low"),
        ("SL006", "invalid-or-unsatisfiable-schema", "high"),
        ("SL007", "unconstrained-sensitive-string", "medium"),
    ],
)
def test_rules_have_stable_ids_slugs_and_severities(rule_id, slug, severity):
    rule = RULE_BY_ID[rule_id]
    assert (rule.slug, rule.severity) == (slug, severity)
    assert rule.rationale and rule.fix and rule.title


@pytest.mark.parametrize("name", IDEMPOTENCY_KEY_NAMES)
def test_every_documented_key_name_counts_in_any_case(name):
    tool = load("sl001_no_idempotency_key.json")[0]
    tool["inputSchema"]["properties"][name.upper()] = {"type": "string", "maxLength": 64}
    assert lint([tool]) == []


def test_readonly_contradiction_ignores_nouns_and_denials():
    tool = load("clean.json")[1]  # get_post, readOnlyHint true
    for description in (
        "Lists the posts and pending updates of a user; never sends anything.",
        "Returns charges for a customer. Does not create anything.",
        "Reads a receipt; it does not create or delete anything.",
        "Shows the draft and never sends, charges, or deletes it.",
        "Demonstrates a long running operation with progress updates.",
        "Shows differences between branches or commits, and the latest changes.",
        "Returns the bundle_id to pass to purchase_free_bundle.",
    ):
        tool["description"] = description
        assert check_annotations(tool, "get_post") == []
    for description in (
        "Fetches a post, then sends it to the author.",
        "Does not create a draft; it sends the post.",
        "Never charges twice, and deletes the card afterwards.",
        "Returns the post and deletes it.",
        "Reads the post; deletes it",
        "Reads the post. Then it sends a copy to the author",
    ):
        tool["description"] = description
        assert triples(check_annotations(tool, "get_post")) == {
            ("SL002", "medium", "get_post", "/annotations/readOnlyHint")
        }, description


# ---------------------------------------------------------------- the storefront's own tool


def test_storefront_tool_before_idempotency_keys_is_high(tmp_path, capsys):
    tool = pre_idempotency_tool()
    findings = lint([tool])
    assert ("SL001", "high", "purchase_free_bundle", "/inputSchema/properties") in triples(findings)

    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps({"tools": [tool]}))
    code, out, err = run(capsys, str(manifest))
    assert code == 1
    assert "SL001 mutating-without-idempotency-key" in out
    assert err == ""


def test_storefront_tools_today_have_no_finding_at_any_severity():
    assert [tool["name"] for tool in TOOLS] == ["purchase_free_bundle", "list_bundles"]
    assert lint(list(TOOLS)) == []


def test_live_dev_host_passes_with_fail_on_low(host):
    url = f"{host.url}/api/a2a/mcp"

    result = run_cli(url, "--fail-on", "low")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""

    report = json.loads(run_cli(url, "--format", "json", "--fail-on", "low").stdout)
    assert report["tools_checked"] == 2
    assert report["findings"] == []


# --- SL003's open objects and SL004 on bare input schemas -------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "object", "properties": {}}, id="root-open"),
        pytest.param(
            {"type": "object", "properties": {}, "additionalProperties": True}, id="root-additional-true"
        ),
        pytest.param(object_schema(a={"type": "object", "properties": {}}), id="nested-open"),
    ],
)
def test_open_objects_are_unbounded_input(schema):
    found = check_bounds({"name": "t", "inputSchema": schema}, "t")
    assert any("additionalProperties" in f.message for f in found)


def sl004(schema: dict, engines: bool = False) -> list[tuple[str, str, str]]:
    found = check_local_models({"name": "t", "inputSchema": schema}, "t", engines=engines)
    return [(f.severity, f.path, f.message) for f in found]


UNIQUE = {"type": "array", "maxItems": 3, "uniqueItems": True, "items": {"enum": [1]}}


def _pattern(pattern: str) -> dict:
    return object_schema(a={"type": "string", "pattern": pattern})


@pytest.mark.parametrize(
    ("schema", "severity", "engine"),
    [
        pytest.param(object_schema(a=UNIQUE), "high", "llguidance", id="uniqueItems-rejected"),
        pytest.param(_pattern("^(a)\\1$"), "high", "outlines-core", id="backreference"),
        pytest.param(_pattern("^\\p{L}{1,5}$"), "medium", "llama.cpp", id="unicode-property-weakened"),
        pytest.param(_pattern("[a-z]{1,5}"), "medium", "llama.cpp", id="unanchored"),
        pytest.param(
            object_schema(a={"if": {"type": "string"}, "then": {"maxLength": 3}}),
            "high",
            "llguidance",
            id="if",
        ),
    ],
)
def test_sl004_names_the_engine_and_its_severity_follows_impact(schema, severity, engine):
    found = sl004(schema)
    assert any(level == severity and engine in message for level, _, message in found), found


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(
            {**object_schema(), "$schema": "https://json-schema.org/draft/2020-12/schema"},
            id="schema-keyword",
        ),
        pytest.param(object_schema(a={"type": "string", "format": "email"}), id="format"),
        pytest.param(
            {**object_schema(a={"$ref": "#/$defs/a"}), "$defs": {"a": {"type": "string"}}}, id="ref-defs"
        ),
        pytest.param(
            object_schema(a={"type": "string", "pattern": "^[a-z]{1,5}$"}), id="anchored-explicit-class"
        ),
    ],
)
def test_what_every_engine_compiles_is_not_sl004(schema):
    assert sl004(schema) == []


def test_engines_option_reports_the_engines_own_messages(tmp_path, capsys):
    tool = {
        "name": "t",
        "description": "Reads.",
        "annotations": {"readOnlyHint": True},
        "inputSchema": object_schema(a=UNIQUE),
    }
    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps({"tools": [tool]}))

    code, out, err = run(capsys, str(manifest), "--engines", "--format", "json")
    findings = [f for f in json.loads(out)["findings"] if f["rule_id"] == "SL004"]
    assert (code, err) == (1, "")
    assert findings and all(f["message"].startswith(("llguidance:", "outlines-core:")) for f in findings)
    assert any("uniqueItems" in f["message"] for f in findings)


def test_engines_option_keeps_llama_cpps_verdicts_which_no_installed_engine_gives():
    schema = _pattern("^\\d{5}$")  # llguidance and outlines-core accept it; llama.cpp drops it

    assert sl004(schema, engines=True) == sl004(schema)
    assert [severity for severity, _, message in sl004(schema, engines=True) if "llama.cpp" in message] == [
        "medium"
    ]


def test_a_schema_no_call_satisfies_is_one_finding_not_two():
    tool = {"name": "t", "inputSchema": object_schema(a={"type": "string", "minLength": 5, "maxLength": 3})}
    found = [f for f in lint([tool]) if f.path == "/inputSchema/properties/a/minLength"]
    assert [(f.rule_id, f.severity) for f in found] == [("SL006", "high")]
    assert "unsatisfiable" in found[0].message and "outlines-core" in found[0].message


def test_engines_option_puts_an_engines_refusal_where_the_problem_is_not_at_the_root():
    """llguidance names the key it refuses, not its place: its finding moves to the pattern, so a
    backreference is one high finding there, and llama.cpp's verdict on it is still reported."""
    found = sl004(_pattern("(a)\\1"), engines=True)
    at = {(severity, path) for severity, path, _ in found}

    pattern = "/inputSchema/properties/a/pattern"
    assert at == {("high", pattern), ("medium", pattern)}
    messages = " ".join(message for _, _, message in found)
    assert "llguidance: regex parse error" in messages and "llama.cpp drops pattern" in messages


def test_engines_option_gives_one_finding_for_a_pattern_no_one_can_parse():
    tool = {"name": "t", "inputSchema": object_schema(a={"type": "string", "pattern": "^[a-$"})}
    found = [f for f in lint([tool], engines=True) if f.rule_id in ("SL004", "SL006")]

    pattern = "/inputSchema/properties/a/pattern"
    assert [(f.rule_id, f.severity, f.path) for f in found] == [("SL006", "high", pattern)]
    assert "llguidance" in found[0].message


def test_a_typeless_parameter_takes_the_engines_higher_severity():
    tool = {"name": "t", "inputSchema": object_schema(a={"description": "anything"})}
    found = [f for f in lint([tool]) if f.path == "/inputSchema/properties/a"]
    assert [(f.rule_id, f.severity) for f in found] == [("SL006", "high")]
