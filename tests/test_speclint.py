"""speclint: each rule on crafted manifests, the storefront's own tool (before and after
idempotency keys, the latter live over HTTP), the output formats, the exit codes and the MCP client."""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from shared.mcp import TOOL, TOOLS
from speclint.behaviour import IDEMPOTENCY_KEY_NAMES, check_annotations
from speclint.cli import main
from speclint.findings import RULE_BY_ID, Finding
from speclint.output import SARIF_LEVEL
from speclint.rules import lint
from speclint.schema_rules import check_bounds, check_local_models
from tests.support import free_port, run_module

FIXTURES = Path(__file__).parent / "fixtures" / "speclint"


def load(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text())["tools"]


def triples(findings: list[Finding]) -> set[tuple[str, str, str, str]]:
    return {(f.rule_id, f.severity, f.tool, f.path) for f in findings}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return run_module("speclint", *argv, stdin=stdin)


def pre_idempotency_tool() -> dict:
    """The storefront's tool as it shipped before idempotency keys."""
    tool = copy.deepcopy(TOOL)
    del tool["inputSchema"]["properties"]["idempotency_key"]
    return tool


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
    assert rule_ids == ["SL001", "SL002", "SL003", "SL004", "SL005", "SL006", "SL007"]
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    assert len(run_["results"]) == len(EXPECTED["sl004_local_models.json"])
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


@pytest.mark.parametrize(
    "wrap",
    [
        lambda tools: {"tools": tools},
        lambda tools: tools,
        lambda tools: {"jsonrpc": "2.0", "id": 7, "result": {"tools": tools}},
    ],
    ids=["result", "bare-list", "json-rpc-response"],
)
def test_accepted_file_shapes(tmp_path, capsys, wrap):
    manifest = tmp_path / "tools.json"
    manifest.write_text(json.dumps(wrap(load("sl001_no_idempotency_key.json"))))
    code, out, _ = run(capsys, str(manifest), "--format", "json")
    assert code == 1
    assert len(json.loads(out)["findings"]) == 2


@pytest.mark.parametrize(
    "content",
    [
        None,  # no such file
        "this is not JSON",
        '{"foo": 1}',
        '{"tools": {"name": "x"}}',
        '{"tools": ["purchase_free_bundle"]}',
        '{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "method not found"}}',
    ],
    ids=["missing-file", "not-json", "not-a-tools-list", "tools-not-a-list", "tool-not-object", "rpc-error"],
)
def test_unreadable_files_exit_2(tmp_path, capsys, content):
    manifest = tmp_path / "tools.json"
    if content is not None:
        manifest.write_text(content)
    code, out, err = run(capsys, str(manifest))
    assert code == 2
    assert out == ""
    assert err.startswith("speclint: ") and err.count("\n") == 1


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


# ---------------------------------------------------------------- the MCP client


class FakeMcp:
    """A tiny MCP server: sessions, two pages of tools/list, optionally as an event stream."""

    def __init__(
        self,
        pages: dict,
        sse: bool = False,
        list_error: dict | None = None,
        status: int = 200,
        stall: str = "",
    ):
        self.pages, self.sse, self.list_error, self.status = pages, sse, list_error, status
        self.stall = stall  # tools/list never completes: "keep-alive", "trickle" (bytes keep coming), "cut"
        self.seen: list[tuple[str, str, dict, dict]] = []  # (HTTP method, RPC method, params, headers)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_DELETE(self):
                fake.seen.append(("DELETE", "", {}, dict(self.headers)))
                self._send(200, b"", "application/json")

            def do_POST(self):
                message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.seen.append(("POST", message["method"], message.get("params"), dict(self.headers)))
                fake.answer(self, message)

            def _send(self, status, body, content_type, headers=None):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/mcp"

    def answer(self, handler, message: dict) -> None:
        if "id" not in message:
            handler._send(202, b"", "application/json")
            return
        if self.status != 200:
            handler._send(self.status, b"<html>oops</html>", "text/html")
            return
        method, rpc_id = message["method"], message["id"]
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
            handler._send(200, json.dumps(body).encode(), "application/json", {"Mcp-Session-Id": "sess-42"})
            return
        if self.stall:
            self.stall_forever(handler)
            return
        if self.list_error is not None:
            body = {"jsonrpc": "2.0", "id": rpc_id, "error": self.list_error}
        else:
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": self.pages[message["params"].get("cursor")]}
        if not self.sse:
            handler._send(200, json.dumps(body).encode(), "application/json")
            return
        progress = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
        text = json.dumps(body, indent=1)  # multi-line JSON: several data lines in one event
        stream = ": keep-alive\r\n\r\n" + f"event: message\r\ndata: {json.dumps(progress)}\r\n\r\n"
        stream += "event: message\r\n" + "".join(f"data: {line}\r\n" for line in text.splitlines()) + "\r\n"
        handler._send(200, stream.encode(), "text/event-stream")

    def stall_forever(self, handler) -> None:
        """Bytes every 0.2 s and never the answer: SSE keep-alive comments, or a JSON body one
        byte at a time. Each read finishes quickly, so only a deadline ends the exchange."""
        keep_alive = self.stall == "keep-alive"
        if self.stall == "cut":  # a body shorter than its Content-Length, then the connection closes
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "1000")
            handler.end_headers()
            handler.wfile.write(b'{"jsonrpc": "2.0", ')
            handler.close_connection = True
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream" if keep_alive else "application/json")
        handler.send_header("Content-Length", str(10**9))
        handler.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(600):
                handler.wfile.write(b": ping\n\n" if keep_alive else b" ")
                handler.wfile.flush()
                time.sleep(0.2)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_mcp() -> Iterator:
    started: list[FakeMcp] = []

    def start(**kwargs) -> FakeMcp:
        server = FakeMcp(**kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def two_pages() -> dict:
    first, second = load("sl001_no_idempotency_key.json")
    return {None: {"tools": [first], "nextCursor": "page-2"}, "page-2": {"tools": [second]}}


@pytest.mark.parametrize("sse", [False, True], ids=["json", "event-stream"])
def test_url_target_follows_next_cursor_and_carries_the_session(fake_mcp, capsys, sse):
    server = fake_mcp(pages=two_pages(), sse=sse)

    code, out, err = run(capsys, server.url, "--format", "json", "--header", "Authorization: Bearer t0k")
    assert (code, err) == (1, "")
    assert [f["tool"] for f in json.loads(out)["findings"]] == ["send_invoice", "append_log_line"]

    calls = [(http, rpc, params) for http, rpc, params, _ in server.seen]
    assert calls == [
        ("POST", "initialize", calls[0][2]),
        ("POST", "notifications/initialized", None),
        ("POST", "tools/list", {}),
        ("POST", "tools/list", {"cursor": "page-2"}),
        ("DELETE", "", {}),
    ]
    assert calls[0][2]["protocolVersion"] == "2025-06-18"
    first_headers = server.seen[0][3]
    assert first_headers["Accept"] == "application/json, text/event-stream"
    assert first_headers["Content-Type"] == "application/json"
    assert "Mcp-Session-Id" not in first_headers
    for _, _, _, headers in server.seen:
        assert headers["Authorization"] == "Bearer t0k"
    for _, _, _, headers in server.seen[1:]:
        assert headers["Mcp-Session-Id"] == "sess-42"
        assert headers["MCP-Protocol-Version"] == "2025-06-18"


@pytest.mark.parametrize("stall", ["keep-alive", "trickle"])
def test_a_server_that_keeps_sending_but_never_answers_is_given_up_on_at_the_deadline(fake_mcp, stall):
    server = fake_mcp(pages=two_pages(), stall=stall)

    done = run_cli(server.url, "--timeout", "1.5")
    assert done.returncode == 2
    assert "did not finish listing tools in time (1.5s for the whole exchange)" in done.stderr


def test_an_answer_cut_short_exits_2_with_one_line(fake_mcp):
    server = fake_mcp(pages=two_pages(), stall="cut")

    done = run_cli(server.url, "--timeout", "5")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "tools/list answer from" in done.stderr and "broke off" in done.stderr


def test_json_rpc_error_from_the_server_exits_2(fake_mcp, capsys):
    server = fake_mcp(pages={}, list_error={"code": -32601, "message": "Method not found"})
    code, out, err = run(capsys, server.url)
    assert (code, out) == (2, "")
    assert "tools/list" in err and "-32601" in err and err.count("\n") == 1


def test_http_error_from_the_server_exits_2(fake_mcp, capsys):
    server = fake_mcp(pages={}, status=500)
    code, out, err = run(capsys, server.url)
    assert (code, out) == (2, "")
    assert "HTTP 500" in err and err.count("\n") == 1


# --- SL003's open objects and SL004 on bare input schemas -------------------------------------------


def _object(**properties: object) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "required": list(properties),
    }


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "object", "properties": {}}, id="root-open"),
        pytest.param(
            {"type": "object", "properties": {}, "additionalProperties": True}, id="root-additional-true"
        ),
        pytest.param(_object(a={"type": "object", "properties": {}}), id="nested-open"),
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
    return _object(a={"type": "string", "pattern": pattern})


@pytest.mark.parametrize(
    ("schema", "severity", "engine"),
    [
        pytest.param(_object(a=UNIQUE), "high", "llguidance", id="uniqueItems-rejected"),
        pytest.param(_pattern("^(a)\\1$"), "high", "outlines-core", id="backreference"),
        pytest.param(_pattern("^\\p{L}{1,5}$"), "medium", "llama.cpp", id="unicode-property-weakened"),
        pytest.param(_pattern("[a-z]{1,5}"), "medium", "llama.cpp", id="unanchored"),
        pytest.param(
            _object(a={"if": {"type": "string"}, "then": {"maxLength": 3}}), "high", "llguidance", id="if"
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
            {**_object(), "$schema": "https://json-schema.org/draft/2020-12/schema"}, id="schema-keyword"
        ),
        pytest.param(_object(a={"type": "string", "format": "email"}), id="format"),
        pytest.param({**_object(a={"$ref": "#/$defs/a"}), "$defs": {"a": {"type": "string"}}}, id="ref-defs"),
        pytest.param(_object(a={"type": "string", "pattern": "^[a-z]{1,5}$"}), id="anchored-explicit-class"),
    ],
)
def test_what_every_engine_compiles_is_not_sl004(schema):
    assert sl004(schema) == []


def test_engines_option_reports_the_engines_own_messages(tmp_path, capsys):
    tool = {
        "name": "t",
        "description": "Reads.",
        "annotations": {"readOnlyHint": True},
        "inputSchema": _object(a=UNIQUE),
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
    tool = {"name": "t", "inputSchema": _object(a={"type": "string", "minLength": 5, "maxLength": 3})}
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
    tool = {"name": "t", "inputSchema": _object(a={"type": "string", "pattern": "^[a-$"})}
    found = [f for f in lint([tool], engines=True) if f.rule_id in ("SL004", "SL006")]

    pattern = "/inputSchema/properties/a/pattern"
    assert [(f.rule_id, f.severity, f.path) for f in found] == [("SL006", "high", pattern)]
    assert "llguidance" in found[0].message


def test_a_typeless_parameter_takes_the_engines_higher_severity():
    tool = {"name": "t", "inputSchema": _object(a={"description": "anything"})}
    found = [f for f in lint([tool]) if f.path == "/inputSchema/properties/a"]
    assert [(f.rule_id, f.severity) for f in found] == [("SL006", "high")]


# ---------------------------------------------------------------- hostile tool lists


def _listing(schema: dict, **tool: object) -> str:
    return json.dumps({"tools": [{"name": "t", "inputSchema": schema, **tool}]})


def _with_pattern(pattern: str) -> str:
    return _listing(_object(a={"type": "string", "pattern": pattern}))


def _with_bound(literal: str) -> str:
    return _listing(_object(n={"type": "integer", "maximum": 1})).replace(
        '"maximum": 1', f'"maximum": {literal}'
    )


HOSTILE_LISTS = {
    "nan-bound": _with_bound("NaN"),
    "huge-bound": _with_bound("1e400"),
    "type-object": _listing(_object(a={"type": {"x": 1}})),
    "type-list-of-lists": _listing(_object(a={"type": [[]]})),
    "5000-digit-count": _with_pattern("^a{1," + "9" * 5000 + "}$"),
    "5000-digit-backref": _with_pattern("^(a)\\" + "9" * 5000 + "$"),
    "superscript-ref": _listing(
        {"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/required/²"}}}
    ),
    "spaces-in-count": _with_pattern("^a{" + " " * 2000 + "," + " " * 2000 + "x}$"),
    "long-description": _listing(_object(), description="a " * 250_000),
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


def test_non_finite_numbers_are_refused_as_unreadable():
    done = run_cli("-", stdin=HOSTILE_LISTS["huge-bound"])
    assert done.returncode == 2
    assert "out of range" in done.stderr


def test_escape_sequences_from_the_server_never_reach_the_terminal(tmp_path):
    evil = "wipe\x1b[2J\x1b]0;owned\x07\u202egnp.exe"
    tool = {
        "name": evil,
        "description": "Sends \x1b[31mmail\x1b[0m.",
        "inputSchema": _object(**{evil: {"type": "string"}}),
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
